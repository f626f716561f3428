// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * sibdata: the UD data path of sib (testbed/sib/sib.c) across its cable,
 * through plain rdma-core libibverbs and its stock ipathverbs provider.  Run
 * by ctest/vm/sib.sh in a guest where sib.ko was loaded with fixed_lids=1
 * (sib0 LID 1, sib1 LID 2, both ACTIVE).  Prints one "NAME VALUE" line per
 * observation for the script to compare; exit status 1 when a setup step
 * fails.
 *
 *   sibdata                  the cases below, on sib0 and sib1
 *   sibdata recv DEV MGID LID QKEY COUNT   a receiver that only attaches
 *   sibdata hold DEV MGID LID QKEY         the same, driven from stdin
 *
 * Absence is never waited for: every case that expects a datagram not to
 * arrive sends a second, good one to the same QP right after it (the same
 * sending device delivers in order), and the good one must be the first
 * completion there.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <infiniband/verbs.h>

#define QKEY 0x11111111u
#define BUF 8192
#define DIE(what) do { fprintf(stderr, "sibdata: %s failed: %s\n", what, strerror(errno)); exit(1); } while (0)

struct ep {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf;
	union ibv_gid gid;
};

static struct ibv_context *open_dev(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		DIE(name);
	ibv_free_device_list(list);
	return ctx;
}

/* A UD QP in RTS with Q_Key qkey and P_Key index pkey_index. */
static void ep_init(struct ep *e, struct ibv_context *ctx, struct ibv_pd *pd, uint32_t qkey, uint16_t pkey_index)
{
	e->ctx = ctx;
	e->pd = pd;
	if (!(e->cq = ibv_create_cq(ctx, 64, NULL, NULL, 0)))
		DIE("ibv_create_cq");
	if (!(e->buf = aligned_alloc(4096, BUF)))
		DIE("aligned_alloc");
	if (!(e->mr = ibv_reg_mr(pd, e->buf, BUF, IBV_ACCESS_LOCAL_WRITE)))
		DIE("ibv_reg_mr");
	struct ibv_qp_init_attr ia = {
		.send_cq = e->cq, .recv_cq = e->cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2, .max_recv_sge = 2 },
	};
	if (!(e->qp = ibv_create_qp(pd, &ia)))
		DIE("ibv_create_qp");
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = pkey_index, .port_num = 1, .qkey = qkey };
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		DIE("modify INIT");
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE))
		DIE("modify RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		DIE("modify RTS");
	if (ibv_query_gid(ctx, 1, 0, &e->gid))
		DIE("ibv_query_gid");
}

/* One receive of len bytes at the start of the buffer, pre-filled with 0xEE. */
static void post_recv(struct ep *e, uint64_t id, uint32_t len)
{
	memset(e->buf, 0xee, BUF);
	struct ibv_sge sge = { .addr = (uintptr_t)e->buf, .length = len, .lkey = e->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;
	if (ibv_post_recv(e->qp, &wr, &bad))
		DIE("ibv_post_recv");
}

static struct ibv_ah *ah_to(struct ibv_pd *pd, uint16_t dlid, const union ibv_gid *dgid)
{
	struct ibv_ah_attr aa = { .dlid = dlid, .port_num = 1 };
	if (dgid) {
		aa.is_global = 1;
		aa.grh.dgid = *dgid;
		aa.grh.sgid_index = 0;
		aa.grh.hop_limit = 1;
	}
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);
	if (!ah)
		DIE("ibv_create_ah");
	return ah;
}

/* Send len bytes of pattern c (at offset 4096 of the sender's buffer). */
static int send_to(struct ep *s, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey, int c, uint32_t len)
{
	memset(s->buf + 4096, c, len);
	struct ibv_sge sge = { .addr = (uintptr_t)s->buf + 4096, .length = len, .lkey = s->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 100, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = qkey;
	int r = ibv_post_send(s->qp, &wr, &bad);
	if (r)
		return r;
	struct ibv_wc wc;
	for (int n = 0; n == 0;)
		if ((n = ibv_poll_cq(s->cq, 1, &wc)) < 0)
			DIE("ibv_poll_cq (send)");
	/* A sender's CQ is shared with its receives: tests post no receive
	 * on a sender before its send completes. */
	return wc.status == IBV_WC_SUCCESS && wc.wr_id == 100 ? 0 : 1000 + wc.status;
}

/* The next completion of e, within 10 s (a bound, not a wait for absence). */
static int next_wc(struct ep *e, struct ibv_wc *wc)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(e->cq, 1, wc);
		if (n)
			return n;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 10)
			return 0;
	}
}

/* Receive one on e: print NAME's status, wr_id, byte_len, src_qp, slid, GRH flag, payload check. */
static void expect(struct ep *e, const char *name, int c, uint32_t len)
{
	struct ibv_wc wc;
	if (!next_wc(e, &wc)) {
		printf("%s none\n", name);
		return;
	}
	int ok = 1;
	for (uint32_t i = 0; i < len; i++)
		ok &= (unsigned char)e->buf[40 + i] == (unsigned char)c;
	printf("%s wr_id=%llu status=%s byte_len=%u src_qp=%u slid=%u grh=%d imm=%d data=%s\n", name,
	       (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), wc.byte_len, wc.src_qp, wc.slid,
	       !!(wc.wc_flags & IBV_WC_GRH), !!(wc.wc_flags & IBV_WC_WITH_IMM), ok ? "ok" : "bad");
}

static uint32_t counter(struct ibv_context *ctx, int qkey)
{
	struct ibv_port_attr pa;
	if (ibv_query_port(ctx, 1, &pa))
		DIE("ibv_query_port");
	return qkey ? pa.qkey_viol_cntr : pa.bad_pkey_cntr;
}

/* One receive of a full MTU and the GRH area, without touching the buffer
 * (post_recv's pre-fill is for the cases above). */
static void repost(struct ep *e, uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)e->buf, .length = 4096 + 40, .lkey = e->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;
	if (ibv_post_recv(e->qp, &wr, &bad))
		DIE("ibv_post_recv");
}

/*
 * The receiver of recv and hold, from their DEV MGID LID QKEY: a UD QP
 * with Q_Key QKEY on DEV port 1, eight receives posted, not attached yet.
 * Returns LID.
 */
static uint16_t receiver(char **argv, struct ep *e, union ibv_gid *mgid)
{
	struct ibv_context *c = open_dev(argv[0]);
	struct ibv_pd *pd = ibv_alloc_pd(c);

	if (!pd || inet_pton(AF_INET6, argv[1], mgid->raw) != 1)
		DIE("setup");
	ep_init(e, c, pd, (uint32_t)strtoul(argv[3], NULL, 0), 0);
	for (int i = 0; i < 8; i++)
		repost(e, (uint64_t)i);
	return (uint16_t)strtoul(argv[2], NULL, 0);
}

/*
 * sibdata recv DEV MGID LID QKEY COUNT: a receiver that only attaches (as a
 * raw-verbs program does): a UD QP with Q_Key QKEY on DEV port 1, attached
 * to MGID with LID; prints "ready", then waits up to 20 s for COUNT
 * datagrams ("got N" after each), detaches and prints "done N".
 */
static int recv_mode(char **argv)
{
	union ibv_gid mgid;
	struct ep e;
	int want = atoi(argv[4]), got = 0;
	uint16_t lid = receiver(argv, &e, &mgid);
	int rc = ibv_attach_mcast(e.qp, &mgid, lid);
	printf("attach rc=%d\n", rc ? errno : 0);
	if (rc)
		return 1;
	printf("ready\n");
	fflush(stdout);
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (got < want) {
		struct ibv_wc wc;
		int n = ibv_poll_cq(e.cq, 1, &wc);
		if (n < 0)
			DIE("ibv_poll_cq");
		if (n == 1) {
			if (wc.status != IBV_WC_SUCCESS)
				break;
			got++;
			printf("got %d\n", got);
			fflush(stdout);
			repost(&e, wc.wr_id);
			continue;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 20)
			break;
	}
	printf("detach rc=%d\n", ibv_detach_mcast(e.qp, &mgid, lid) ? errno : 0);
	printf("done %d\n", got);
	return got == want ? 0 : 1;
}

/*
 * sibdata hold DEV MGID LID QKEY: the receiver of recv_mode, attached once
 * and held while stdin gives it one command a line, each answered with one
 * line: "attach" attaches the QP to the group again (the kernel answers a
 * duplicate attach with 0: ib_uverbs_attach_mcast), "attach rc=E";
 * "reattach LID" detaches it and attaches it again with LID (a program
 * that learnt the group's new MLID: rdmavt refuses a second MLID for an
 * MGID, rdmavt/mcast.c rvt_mcast_add, and mlx5 attaches by MGID alone, so
 * the old one goes first), "detach rc=E attach rc=F";
 * "poll" takes what has arrived without waiting, "have N" (the datagrams
 * so far); "wait N" waits up to 20 s until N have arrived in all, "have N".
 * "detach" detaches it ("detach rc=E"); "end" or the end of stdin
 * detaches it if it is still attached ("detach rc=E"; else "done") and
 * exits 0.
 */
static int hold_mode(char **argv)
{
	union ibv_gid mgid;
	struct ep e;
	char line[64];
	int got = 0;
	uint16_t lid = receiver(argv, &e, &mgid);
	int a0 = ibv_attach_mcast(e.qp, &mgid, lid) ? errno : 0;
	int attached = !a0;
	printf("attach rc=%d\n", a0);
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin) && strcmp(line, "end\n")) {
		int want = 0;
		unsigned int other;
		if (!strcmp(line, "attach\n")) {
			int a = ibv_attach_mcast(e.qp, &mgid, lid) ? errno : 0;
			attached = attached || !a;
			printf("attach rc=%d\n", a);
			fflush(stdout);
			continue;
		}
		if (!strcmp(line, "detach\n")) {
			int d = ibv_detach_mcast(e.qp, &mgid, lid) ? errno : 0;
			attached = attached && d;
			printf("detach rc=%d\n", d);
			fflush(stdout);
			continue;
		}
		if (sscanf(line, "reattach %i", &other) == 1) {
			int d = ibv_detach_mcast(e.qp, &mgid, lid) ? errno : 0;
			int a = ibv_attach_mcast(e.qp, &mgid, (uint16_t)other) ? errno : 0;
			if (!a)
				lid = (uint16_t)other;
			attached = !a || (attached && d);
			printf("detach rc=%d attach rc=%d\n", d, a);
			fflush(stdout);
			continue;
		}
		if (strcmp(line, "poll\n") && sscanf(line, "wait %d", &want) != 1) {
			fprintf(stderr, "sibdata hold: unknown command %s", line);
			return 1;
		}
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (;;) {
			struct ibv_wc wc;
			int n = ibv_poll_cq(e.cq, 1, &wc);
			if (n < 0 || (n == 1 && wc.status != IBV_WC_SUCCESS))
				DIE("ibv_poll_cq");
			if (n == 1) {
				got++;
				repost(&e, wc.wr_id);
				continue;
			}
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (got >= want || t.tv_sec - t0.tv_sec > 20)
				break;
		}
		printf("have %d\n", got);
		fflush(stdout);
	}
	if (attached)
		printf("detach rc=%d\n", ibv_detach_mcast(e.qp, &mgid, lid) ? errno : 0);
	else
		printf("done\n");
	return 0;
}

/*
 * One datagram of byte c to the group (AH tom) from a: a receive posted on
 * each of b, c and d (wr_id first, first + 1, first + 2), the line
 * "send_TAG ret=R", then the first completion of each QP whose letter is
 * in take ("TAG_b" ...); a QP left out keeps its receive for a fence.
 */
static void mcast_round(struct ep *a, struct ibv_ah *tom, struct ep *bcd[3], uint64_t first, const char *tag,
			int c, const char *take)
{
	char name[32];

	for (int i = 0; i < 3; i++)
		post_recv(bcd[i], first + (uint64_t)i, 4096);
	printf("send_%s ret=%d\n", tag, send_to(a, tom, 0xffffff, QKEY, c, 512));
	for (int i = 0; i < 3; i++) {
		if (!strchr(take, 'b' + i))
			continue;
		snprintf(name, sizeof(name), "%s_%c", tag, 'b' + i);
		expect(bcd[i], name, c, 512);
	}
}

int main(int argc, char **argv)
{
	if (argc == 7 && !strcmp(argv[1], "recv"))
		return recv_mode(argv + 2);
	if (argc == 6 && !strcmp(argv[1], "hold"))
		return hold_mode(argv + 2);
	struct ibv_context *c0 = open_dev("sib0"), *c1 = open_dev("sib1");
	struct ibv_pd *p0 = ibv_alloc_pd(c0), *p1 = ibv_alloc_pd(c1);
	if (!p0 || !p1)
		DIE("ibv_alloc_pd");
	struct ep a, b, c, d, z;
	ep_init(&a, c0, p0, QKEY, 0);	/* the sender, on sib0 */
	ep_init(&b, c1, p1, QKEY, 0);	/* receivers on sib1 */
	ep_init(&c, c1, p1, QKEY, 0);
	ep_init(&d, c0, p0, QKEY, 0);	/* a receiver beside the sender */
	ep_init(&z, c1, p1, QKEY, 1);	/* P_Key index 1: 0x0000, matches nothing */
	printf("qpn a=%u b=%u c=%u d=%u\n", a.qp->qp_num, b.qp->qp_num, c.qp->qp_num, d.qp->qp_num);

	/* Unicast across the cable, no GRH: 40 bytes left as they were. */
	struct ibv_ah *to1 = ah_to(p0, 2, NULL);
	post_recv(&b, 1, 4096);
	printf("send_plain ret=%d\n", send_to(&a, to1, b.qp->qp_num, QKEY, 0x5a, 256));
	expect(&b, "recv_plain", 0x5a, 256);
	printf("plain_grh_area_untouched %s\n", (unsigned char)b.buf[0] == 0xee && (unsigned char)b.buf[39] == 0xee ? "yes" : "no");

	/* With a GRH: the first 40 bytes are it. */
	struct ibv_ah *to1g = ah_to(p0, 2, &b.gid);
	post_recv(&b, 2, 4096);
	printf("send_grh ret=%d\n", send_to(&a, to1g, b.qp->qp_num, QKEY, 0x33, 1000));
	expect(&b, "recv_grh", 0x33, 1000);
	struct ibv_grh *g = (struct ibv_grh *)b.buf;
	printf("grh version=%u next_hdr=0x%x paylen=%u sgid_is_a=%d dgid_is_b=%d\n",
	       ntohl(g->version_tclass_flow) >> 28, g->next_hdr, ntohs(g->paylen),
	       !memcmp(&g->sgid, &a.gid, 16), !memcmp(&g->dgid, &b.gid, 16));

	/* A full MTU, and one byte over it (refused at post). */
	post_recv(&b, 3, 4096 + 40);
	printf("send_mtu ret=%d\n", send_to(&a, to1, b.qp->qp_num, QKEY, 0x11, 4096));
	expect(&b, "recv_mtu", 0x11, 4096);
	printf("send_over_mtu ret=%d\n", send_to(&a, to1, b.qp->qp_num, QKEY, 0x11, 4097));

	/* A receive too small for the GRH area and the payload. */
	post_recv(&b, 4, 40 + 99);
	printf("send_small ret=%d\n", send_to(&a, to1, b.qp->qp_num, QKEY, 0x22, 100));
	expect(&b, "recv_small", 0x22, 0);
	/* ... moved b to ERR, as a receive completion error does; back to RTS. */
	struct ibv_qp_attr ra = { .qp_state = IBV_QPS_RESET };
	ibv_modify_qp(b.qp, &ra, IBV_QP_STATE);
	ep_init(&b, c1, p1, QKEY, 0);

	/* The wrong Q_Key: dropped and counted; then a good one arrives first. */
	uint32_t q0 = counter(c1, 1);
	post_recv(&b, 5, 4096);
	printf("send_bad_qkey ret=%d\n", send_to(&a, to1, b.qp->qp_num, 0x22222222, 0x44, 64));
	printf("send_fence ret=%d\n", send_to(&a, to1, b.qp->qp_num, QKEY, 0x45, 64));
	expect(&b, "recv_after_bad_qkey", 0x45, 64);
	printf("qkey_viol_cntr_rise %u\n", counter(c1, 1) - q0);

	/* The Q_Key's high bit: the sending QP's own (QKEY). */
	post_recv(&b, 6, 4096);
	printf("send_own_qkey ret=%d\n", send_to(&a, to1, b.qp->qp_num, 0x80000000, 0x46, 64));
	expect(&b, "recv_own_qkey", 0x46, 64);

	/* A P_Key that matches nothing: dropped and counted. */
	uint32_t k0 = counter(c1, 0);
	post_recv(&z, 7, 4096);
	printf("send_to_pkey0 ret=%d\n", send_to(&a, to1, z.qp->qp_num, QKEY, 0x47, 64));
	post_recv(&b, 16, 4096);
	printf("send_fence_pkey ret=%d\n", send_to(&a, to1, b.qp->qp_num, QKEY, 0x4d, 64));
	expect(&b, "recv_after_bad_pkey", 0x4d, 64);
	printf("bad_pkey_cntr_rise %u\n", counter(c1, 0) - k0);
	struct ibv_wc zwc;
	printf("pkey0_polled %d\n", ibv_poll_cq(z.cq, 1, &zwc));

	/* Unicast to the sender's own port (LID 1). */
	struct ibv_ah *to0 = ah_to(p0, 1, NULL);
	post_recv(&d, 8, 4096);
	printf("send_loop ret=%d\n", send_to(&a, to0, d.qp->qp_num, QKEY, 0x48, 64));
	expect(&d, "recv_loop", 0x48, 64);

	/* Multicast: b and c on sib1, d beside the sender, and the sender
	 * itself attached; every attached QP but the sender gets one. */
	union ibv_gid mgid;
	inet_pton(AF_INET6, "ff12:401b:ffff::1", mgid.raw);
	struct ibv_ah *tom = ah_to(p0, 0xc001, &mgid);
	struct ep *att[] = { &a, &b, &c, &d };
	for (int i = 0; i < 4; i++)
		if (ibv_attach_mcast(att[i]->qp, &mgid, 0xc001))
			DIE("ibv_attach_mcast");
	struct ep *bcd[3] = { &b, &c, &d };
	/* The sender has a receive posted too: were its own datagram looped
	 * back to it, that would be its first receive completion (after the
	 * send's, which send_to takes). */
	post_recv(&a, 12, 4096);
	mcast_round(&a, tom, bcd, 9, "mcast", 0x49, "bcd");
	/* The sender: not to itself.  Fence: a unicast from d to a. */
	post_recv(&a, 17, 4096);
	struct ibv_ah *d_to_a = ah_to(p0, 1, NULL);
	printf("send_fence_a ret=%d\n", send_to(&d, d_to_a, a.qp->qp_num, QKEY, 0x4a, 64));
	expect(&a, "sender_first_recv", 0x4a, 64);

	/* b detached: c and d still get the group, b nothing (fence: unicast). */
	if (ibv_detach_mcast(b.qp, &mgid, 0xc001))
		DIE("ibv_detach_mcast");
	mcast_round(&a, tom, bcd, 13, "mcast2", 0x4b, "cd");
	printf("send_fence_b ret=%d\n", send_to(&a, to1, b.qp->qp_num, QKEY, 0x4c, 64));
	expect(&b, "detached_first_recv", 0x4c, 64);

	/* b attached again, twice (the second a duplicate: uverbs keeps one
	 * entry, ib_uverbs_attach_mcast): one copy of the next datagram, and
	 * the unicast after it is b's next completion (no second copy). */
	printf("reattach_b rc=%d\n", ibv_attach_mcast(b.qp, &mgid, 0xc001) ? errno : 0);
	printf("reattach_b_dup rc=%d\n", ibv_attach_mcast(b.qp, &mgid, 0xc001) ? errno : 0);
	mcast_round(&a, tom, bcd, 18, "mcast3", 0x4e, "bcd");
	post_recv(&b, 21, 4096);
	printf("send_fence_b3 ret=%d\n", send_to(&a, to1, b.qp->qp_num, QKEY, 0x4f, 64));
	expect(&b, "mcast3_b_once", 0x4f, 64);

	/* One detach ends b's attachment, the duplicate's too: the group's
	 * next datagram reaches c (the witness), b's next completion is the
	 * unicast after it. */
	printf("detach_b_again rc=%d\n", ibv_detach_mcast(b.qp, &mgid, 0xc001) ? errno : 0);
	mcast_round(&a, tom, bcd, 22, "mcast4", 0x50, "cd");
	printf("send_fence_b4 ret=%d\n", send_to(&a, to1, b.qp->qp_num, QKEY, 0x51, 64));
	expect(&b, "detached_again_first_recv", 0x51, 64);
	return 0;
}
