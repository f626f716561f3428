/* mcast_recv: a RoCE multicast receiver done right, with rsverbs.
 *
 *   mcast_recv [-d DEVICE] [-p PORT] [-q QKEY] [-n COUNT] [-t SECONDS] GROUP
 *
 * A UD QP receives a group's datagrams only when it is attached to the
 * group's MGID (ibv_attach_mcast) AND the port's netdev has joined the group
 * at IP level: ibv_attach_mcast never does the second, so without it the
 * NIC's filter, snooping switches and the IP layer drop the group and
 * nothing arrives. rsverbs_mcast_join() makes that membership (on
 * InfiniBand: the Subnet Administrator's), and rsverbs_mcast_leave() ends
 * it. The group is an IPv4 or IPv6 address; the MGID is the RoCE v2 one.
 *
 * Prints "mcast_recv: ready" once attached and joined, then one line per
 * datagram and a total; exits 0 when COUNT datagrams arrived within
 * SECONDS, 1 when not, 2 on a setup error.
 *
 * Build: cc mcast_recv.c $(pkg-config --cflags --libs rsverbs)
 * Run:   ./mcast_recv -d rxe1 239.1.1.1     (and mcast_send on any host) */
#include <rsverbs.h>
#include <unistd.h>
#include "ud.h"

int main(int argc, char **argv)
{
	const char *dev = NULL;
	int port = 1, count = 10, c, got = 0, family;
	double seconds = 10;
	uint32_t qkey = DEFAULT_QKEY;
	union ibv_gid mgid;
	struct ibv_context *ctx;
	struct ud u;

	while ((c = getopt(argc, argv, "d:p:q:n:t:")) != -1) {
		switch (c) {
		case 'd': dev = optarg; break;
		case 'p': port = atoi(optarg); break;
		case 'q': qkey = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'n': count = atoi(optarg); break;
		case 't': seconds = atof(optarg); break;
		default: goto usage;
		}
	}
	if (optind != argc - 1 || count < 1 || port < 1 || port > 255)
		goto usage;
	family = group_mgid(argv[optind], &mgid);
	if (!family) {
		fprintf(stderr, "mcast_recv: %s is not an IPv4 or IPv6 address\n", argv[optind]);
		return 2;
	}
	ctx = open_device(dev);
	ud_open(&u, ctx, (uint8_t)port, qkey, count, 1);

	/* 1. The attach: the device hands the group's datagrams to this QP. */
	if (ibv_attach_mcast(u.qp, &mgid, 0))
		die("ibv_attach_mcast");
	/* 2. The membership: the fabric delivers the group to this port. */
	if (rsverbs_mcast_join(ctx, (uint8_t)port, &mgid, RSVERBS_MCAST_FULLMEMBER))
		die("rsverbs_mcast_join");
	printf("mcast_recv: ready: QP 0x%x attached to %s on %s port %d, Q_Key 0x%x\n", u.qp->qp_num,
	       argv[optind], ibv_get_device_name(ctx->device), port, qkey);
	fflush(stdout);

	while (got < count) {
		struct ibv_wc wc;
		if (!poll_one(u.cq, &wc, seconds))
			break;
		if (wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "mcast_recv: %s\n", ibv_wc_status_str(wc.status));
			break;
		}
		got++;
		printf("mcast_recv: %.*s (from QPN 0x%x)\n", MSG, u.buf + wc.wr_id * SLOT + GRH, wc.src_qp);
	}
	printf("mcast_recv: received %d of %d\n", got, count);

	/* The reverse order: leave, detach, then the QP can be destroyed. */
	if (rsverbs_mcast_leave(ctx, (uint8_t)port, &mgid, RSVERBS_MCAST_FULLMEMBER))
		die("rsverbs_mcast_leave");
	if (ibv_detach_mcast(u.qp, &mgid, 0))
		die("ibv_detach_mcast");
	ud_close(&u);
	ibv_close_device(ctx);
	return got == count ? 0 : 1;
usage:
	fprintf(stderr, "usage: mcast_recv [-d DEVICE] [-p PORT] [-q QKEY] [-n COUNT] [-t SECONDS] GROUP\n");
	return 2;
}
