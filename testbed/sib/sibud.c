// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * sibud: the verbs of a UD QP on a sib device (testbed/sib/sib.c), through
 * plain rdma-core libibverbs and its stock ipathverbs provider.  Run by
 * ctest/vm/sib.sh in the guest; prints one "NAME ret=R" line per call (R an
 * errno value, 0 for success) for the script to compare with what a real
 * HCA answers.  Exit status 1 when a setup step fails.
 *
 *   sibud [DEVICE]      default sib0
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <infiniband/verbs.h>

#define DIE(what) do { fprintf(stderr, "sibud: %s failed: %s\n", what, strerror(errno)); return 1; } while (0)

static void line(const char *name, int ret)
{
	printf("%s ret=%d%s%s\n", name, ret, ret ? " " : "", ret ? strerror(ret) : "");
}

int main(int argc, char **argv)
{
	const char *want = argc > 1 ? argv[1] : "sib0";
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), want))
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		DIE("ibv_open_device");
	struct ibv_port_attr pa;
	if (ibv_query_port(ctx, 1, &pa))
		DIE("ibv_query_port");
	printf("port state=%d link_layer=%d lid=%u\n", pa.state, pa.link_layer, pa.lid);

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	if (!pd || !ch)
		DIE("ibv_alloc_pd/ibv_create_comp_channel");
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, ch, 0);
	if (!cq)
		DIE("ibv_create_cq");
	static char buf[4096];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		DIE("ibv_reg_mr");
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	if (!qp)
		DIE("ibv_create_qp");
	printf("qp_num=%u\n", qp->qp_num);

	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qkey = 0x11111111 };
	line("modify_init", ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY));
	a.qp_state = IBV_QPS_RTR;
	line("modify_rtr", ibv_modify_qp(qp, &a, IBV_QP_STATE));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	line("modify_rts", ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN));
	struct ibv_qp_init_attr qi;
	memset(&a, 0, sizeof(a));
	line("query_qp", ibv_query_qp(qp, &a, IBV_QP_STATE | IBV_QP_QKEY, &qi));
	printf("query_qp state=%d qkey=0x%x\n", a.qp_state, a.qkey);

	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = sizeof(buf), .lkey = mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1 }, *rbad;
	line("post_recv", ibv_post_recv(qp, &rwr, &rbad));

	struct ibv_ah_attr aa = { .dlid = 1, .port_num = 1 };
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);
	line("create_ah", ah ? 0 : errno);
	struct ibv_send_wr swr = { .wr_id = 8, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED }, *sbad;
	swr.sg_list->length = 64;
	if (ah) {
		swr.wr.ud.ah = ah;
		swr.wr.ud.remote_qpn = qp->qp_num;
		swr.wr.ud.remote_qkey = 0x11111111;
		line("post_send", ibv_post_send(qp, &swr, &sbad));
	}

	union ibv_gid mgid;
	inet_pton(AF_INET6, "ff12:401b::1", mgid.raw);
	line("attach_c001", ibv_attach_mcast(qp, &mgid, 0xc001));
	line("attach_c001_again", ibv_attach_mcast(qp, &mgid, 0xc001));
	line("detach_c001", ibv_detach_mcast(qp, &mgid, 0xc001));
	line("detach_c001_again", ibv_detach_mcast(qp, &mgid, 0xc001));
	line("attach_lid0", ibv_attach_mcast(qp, &mgid, 0));

	/* To ERR: the posted receive completes flushed, with an event. */
	line("req_notify", ibv_req_notify_cq(cq, 0));
	a.qp_state = IBV_QPS_ERR;
	line("modify_err", ibv_modify_qp(qp, &a, IBV_QP_STATE));
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	int ev = poll(&pfd, 1, 10000);
	printf("cq_event=%s\n", ev == 1 ? "yes" : "no");
	if (ev == 1) {
		struct ibv_cq *ecq;
		void *ectx;
		if (!ibv_get_cq_event(ch, &ecq, &ectx))
			ibv_ack_cq_events(ecq, 1);
	}
	struct ibv_wc wc[4];
	int n = ibv_poll_cq(cq, 4, wc);
	printf("poll n=%d", n);
	for (int i = 0; i < n; i++)
		printf(" wr_id=%llu status=%s", (unsigned long long)wc[i].wr_id, ibv_wc_status_str(wc[i].status));
	printf("\n");

	if (ah)
		line("destroy_ah", ibv_destroy_ah(ah));
	line("destroy_qp", ibv_destroy_qp(qp));
	line("dereg_mr", ibv_dereg_mr(mr));
	line("destroy_cq", ibv_destroy_cq(cq));
	line("destroy_comp_channel", ibv_destroy_comp_channel(ch));
	line("dealloc_pd", ibv_dealloc_pd(pd));
	line("close_device", ibv_close_device(ctx));
	ibv_free_device_list(list);
	return 0;
}
