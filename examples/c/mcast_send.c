/* mcast_send: a RoCE multicast sender with an explicit send-only membership.
 *
 *   mcast_send [-d DEVICE] [-p PORT] [-q QKEY] [-n COUNT] GROUP
 *
 * A sender never attaches, so nothing that hooks ibv_attach_mcast joins
 * for it. On InfiniBand the subnet manager may not route a non-member's
 * datagrams across switches: a sender should be a send-only full member.
 * rsverbs_mcast_join(..., RSVERBS_MCAST_SENDONLY_FULLMEMBER) makes that
 * membership without a QP (on RoCE it puts nothing on the wire, as the
 * kernel's rdma_cm: a send-only member sends no IGMP report). This program
 * sends on RoCE ports only: on InfiniBand the address handle also needs the
 * group's MLID, which the SA's answer gives (librdmacm's join event).
 *
 * Sends COUNT datagrams to the group's MGID (RoCE v2) from the port's
 * RoCE v2 GID of the group's family, to QPN 0xffffff with Q_Key QKEY (the
 * receivers' QPs' Q_Key); exits 0 when every send completed.
 *
 * Build: cc mcast_send.c $(pkg-config --cflags --libs rsverbs) */
#include <rsverbs.h>
#include <unistd.h>
#include "ud.h"

int main(int argc, char **argv)
{
	const char *dev = NULL;
	int port = 1, count = 10, c, sent = 0, family, sgid;
	uint32_t qkey = DEFAULT_QKEY;
	union ibv_gid mgid;
	struct ibv_context *ctx;
	struct ibv_port_attr pa;
	struct ibv_ah_attr aa = { 0 };
	struct ibv_ah *ah;
	struct ud u;

	while ((c = getopt(argc, argv, "d:p:q:n:")) != -1) {
		switch (c) {
		case 'd': dev = optarg; break;
		case 'p': port = atoi(optarg); break;
		case 'q': qkey = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'n': count = atoi(optarg); break;
		default: goto usage;
		}
	}
	if (optind != argc - 1 || count < 1 || port < 1 || port > 255)
		goto usage;
	family = group_mgid(argv[optind], &mgid);
	if (!family) {
		fprintf(stderr, "mcast_send: %s is not an IPv4 or IPv6 address\n", argv[optind]);
		return 2;
	}
	ctx = open_device(dev);
	if (ibv_query_port(ctx, (uint8_t)port, &pa))
		die("ibv_query_port");
	if (pa.link_layer != IBV_LINK_LAYER_ETHERNET) {
		fprintf(stderr, "mcast_send: port %d of %s is not RoCE (Ethernet): this example sends on RoCE only\n", port,
			ibv_get_device_name(ctx->device));
		return 2;
	}
	/* The source: the port's first RoCE v2 GID of the group's family. */
	sgid = rsverbs_gid_index_find(ctx, (uint8_t)port, IBV_GID_TYPE_ROCE_V2, family, 0, -1, 0);
	if (sgid < 0)
		die("rsverbs_gid_index_find (a RoCE v2 GID of the group's family)");
	ud_open(&u, ctx, (uint8_t)port, qkey, count, 0);

	if (rsverbs_mcast_join(ctx, (uint8_t)port, &mgid, RSVERBS_MCAST_SENDONLY_FULLMEMBER))
		die("rsverbs_mcast_join (send-only)");

	aa.is_global = 1;
	aa.grh.dgid = mgid;
	aa.grh.sgid_index = (uint8_t)sgid;
	aa.grh.hop_limit = 64;
	aa.port_num = (uint8_t)port;
	ah = ibv_create_ah(u.pd, &aa);
	if (!ah)
		die("ibv_create_ah");
	for (int i = 0; i < count; i++) {
		char *p = u.buf + i * SLOT;
		struct ibv_sge sge = { (uintptr_t)p, MSG, u.mr->lkey };
		struct ibv_send_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;
		struct ibv_wc wc;
		snprintf(p, MSG, "datagram %d of %d", i + 1, count);
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = 0xffffff; /* every QP attached to the group */
		wr.wr.ud.remote_qkey = qkey;
		if (ibv_post_send(u.qp, &wr, &bad))
			die("ibv_post_send");
		/* Wait for the completion: a QP destroyed right after posting may
		 * drop what it has not sent yet (rxe sends from a work queue). */
		if (!poll_one(u.cq, &wc, 10)) {
			fprintf(stderr, "mcast_send: datagram %d: no completion within 10 s\n", i + 1);
			break;
		}
		if (wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "mcast_send: datagram %d: %s\n", i + 1, ibv_wc_status_str(wc.status));
			break;
		}
		sent++;
	}
	printf("mcast_send: sent %d of %d to %s from GID index %d, Q_Key 0x%x\n", sent, count, argv[optind], sgid,
	       qkey);
	ibv_destroy_ah(ah);
	if (rsverbs_mcast_leave(ctx, (uint8_t)port, &mgid, RSVERBS_MCAST_SENDONLY_FULLMEMBER))
		die("rsverbs_mcast_leave");
	ud_close(&u);
	ibv_close_device(ctx);
	return sent == count ? 0 : 1;
usage:
	fprintf(stderr, "usage: mcast_send [-d DEVICE] [-p PORT] [-q QKEY] [-n COUNT] GROUP\n");
	return 2;
}
