/* cmsend: an rdma_cm multicast sender that waits for its datagrams to leave.
 *
 *   cmsend -m GROUP -b ADDR [-C COUNT] [-t SECONDS]
 *
 * It does what `mckey -s` does (rdma_resolve_addr from ADDR to GROUP, UD QP
 * through rdma_create_qp, rdma_join_multicast as a full member, which makes
 * librdmacm call ibv_attach_mcast; COUNT SEND_WITH_IMM datagrams to the
 * group's AH, QPN and Q_Key; rdma_leave_multicast, which makes it call
 * ibv_detach_mcast), with one difference: every send is signaled, and it
 * waits for all COUNT completions before it leaves.
 *
 * Why (compat.sh's mckey pairs): mckey's sender posts unsignaled sends and
 * leaves and exits at once (librdmacm/examples/mckey.c `run`). From Linux
 * 6.x, rxe's post_send only schedules the QP's send task on a workqueue
 * (drivers/infiniband/sw/rxe/rxe_verbs.c `rxe_post_send` →
 * `rxe_sched_task`; rxe_task.c), and destroying the QP flushes what it has
 * not sent: in the test bed a 6.12 or 7.2 sender often put 1 of 10 (once 1
 * of 1000) datagrams on the wire, with rdma-core alone as with rsverbs, and
 * the receiver waited for ever. On 6.1 the task ran in the caller's context.
 * A UD send completes in rxe only after its packet went to the IP layer.
 *
 * Prints "cmsend: joined dgid: ..." and "cmsend: sent N, completed N";
 * exits 0 on success, 1 when a completion failed or did not come, 2 on a
 * setup error. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#define PROG_NAME "cmsend"
#include "common.h"
#include "cm.h"

int main(int argc, char **argv)
{
	const char *group = NULL, *bind_to = NULL;
	int count = 10, secs = 30, op;
	while ((op = getopt(argc, argv, "m:b:C:t:")) != -1) {
		switch (op) {
		case 'm': group = optarg; break;
		case 'b': bind_to = optarg; break;
		case 'C': count = atoi(optarg); break;
		case 't': secs = atoi(optarg); break;
		default: die("usage: cmsend -m GROUP -b ADDR [-C COUNT] [-t SECONDS]");
		}
	}
	if (!group || !bind_to || count < 1 || count > 4096 || secs < 1)
		die("usage: cmsend -m GROUP -b ADDR [-C 1..4096] [-t SECONDS]");
	struct sockaddr_storage src, dst;
	addr_of(bind_to, &src);
	addr_of(group, &dst);

	struct rdma_event_channel *ch;
	struct rdma_cm_id *id = resolved_udp_id(&ch, &src, &dst);

	enum { SIZE = 100 };
	static char buf[SIZE];
	struct ibv_pd *pd = ibv_alloc_pd(id->verbs);
	struct ibv_cq *cq = pd ? ibv_create_cq(id->verbs, count, NULL, NULL, 0) : NULL;
	struct ibv_mr *mr = cq ? ibv_reg_mr(pd, buf, SIZE, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!mr)
		die("pd/cq/mr: %s", strerror(errno));
	struct ibv_qp_init_attr qa = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD, .sq_sig_all = 1,
		.cap = { .max_send_wr = count, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	if (rdma_create_qp(id, pd, &qa))
		die("rdma_create_qp: %s", strerror(errno));

	struct rdma_ud_param ud;
	if (rdma_join_multicast(id, (struct sockaddr *)&dst, NULL))
		die("rdma_join_multicast: %s", strerror(errno));
	expect_event(ch, RDMA_CM_EVENT_MULTICAST_JOIN, &ud);
	char gs[INET6_ADDRSTRLEN];
	printf("cmsend: joined dgid: %s\n", inet_ntop(AF_INET6, ud.ah_attr.grh.dgid.raw, gs, sizeof(gs)) ? gs : "?");
	fflush(stdout);
	struct ibv_ah *ah = ibv_create_ah(pd, &ud.ah_attr);
	if (!ah)
		die("ibv_create_ah: %s", strerror(errno));

	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = SIZE, .lkey = mr->lkey };
	struct ibv_send_wr wr = {
		.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_IMM,
		.imm_data = htobe32(id->qp->qp_num),
		.wr.ud = { .ah = ah, .remote_qpn = ud.qp_num, .remote_qkey = ud.qkey },
	}, *bad;
	int sent = 0, done = 0, failed = 0;
	for (; sent < count; sent++)
		if (ibv_post_send(id->qp, &wr, &bad)) {
			fprintf(stderr, "cmsend: ibv_post_send %d: %s\n", sent, strerror(errno));
			break;
		}
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (done < sent) {
		struct ibv_wc wc[16];
		int n = ibv_poll_cq(cq, 16, wc);
		for (int i = 0; i < n; i++)
			if (wc[i].status != IBV_WC_SUCCESS && !failed++)
				fprintf(stderr, "cmsend: completion: %s\n", ibv_wc_status_str(wc[i].status));
		done += n > 0 ? n : 0;
		if (n > 0)
			continue;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec >= secs)
			break;
		struct timespec ms = { 0, 1000000 }; /* poll every 1 ms, leaving the CPU to rxe's task */
		nanosleep(&ms, NULL);
	}
	printf("cmsend: sent %d, completed %d, failed %d\n", sent, done, failed);

	if (rdma_leave_multicast(id, (struct sockaddr *)&dst))
		fprintf(stderr, "cmsend: rdma_leave_multicast: %s\n", strerror(errno));
	ibv_destroy_ah(ah);
	rdma_destroy_qp(id);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return sent == count && done == count && !failed ? 0 : 1;
}
