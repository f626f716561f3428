/* trace: the scenarios of RSVERBS_TRACE's hints (docs/trace.md), each a
 * subcommand on one device, port 1. Every verb call prints one stdout line
 * "trace: LABEL rc=N errno=N" (errno seeded with SENTINEL), so a run with
 * tracing on and one with it off must print the same lines; the trace
 * itself goes where RSVERBS_TRACE says and ctest/vm/trace.sh reads it.
 *
 *   trace attach DEV GROUP          attach, detach, destroy (no-ip-join and its twin)
 *   trace notmc DEV                 UD QP, unicast MGID ::ffff:192.0.2.1: EINVAL
 *   trace notud DEV GROUP           RC QP, multicast GROUP: EINVAL
 *   trace lidmismatch DEV GROUP     attach LID 0, detach LID 0x1234 (EINVAL), detach LID 0
 *   trace healthy DEV GROUP         attach, duplicate attach, detach, detach of a group
 *                                   never attached (EINVAL), destroy: no hint at all
 *   trace limit DEV GROUP N         N UD QPs attach GROUP (rxe: 56 fit), then detach
 *   trace exit DEV GROUP            attach, destroy (EBUSY), exit still attached
 *   trace walk DEV                  _ibv_query_gid_ex over the whole GID table
 *   trace attachments DEV           rsverbs_mcast_attachments (dlsym) after attaches
 *   trace qkey DEV GROUP N QKEY     a UD receiver (Q_Key 0x11111111, joined at IP level
 *                                   unless TRACE_NOJOIN=1)
 *                                   attaches IPv4 GROUP; a sender posts N datagrams to
 *                                   it with remote_qkey QKEY, then one marker with the
 *                                   receiver's; prints the completions and whether the
 *                                   port's qkey_viol_cntr rose by N (qkey-violations)
 *
 * GROUP is an IPv4 address (the MGID is ::ffff:GROUP) or an IPv6 one.
 * Exit status 0, or 2 on a setup error. */
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common.h"

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;

static void open_dev(const char *name)
{
	int n;
	struct ibv_device **l = ibv_get_device_list(&n);
	for (int i = 0; l && i < n; i++)
		if (!strcmp(ibv_get_device_name(l[i]), name))
			ctx = ibv_open_device(l[i]);
	if (l)
		ibv_free_device_list(l);
	if (!ctx || !(pd = ibv_alloc_pd(ctx)) || !(cq = ibv_create_cq(ctx, 64, NULL, NULL, 0))) {
		fprintf(stderr, "trace: cannot open %s\n", name);
		exit(2);
	}
}

/* A QP of type t, moved to INIT on port 1 (so that it has a port). */
static struct ibv_qp *qp_init(enum ibv_qp_type t)
{
	struct ibv_qp *qp = new_qp_on(pd, cq, t);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qkey = 0x11 };
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (t == IBV_QPT_UD)
		mask |= IBV_QP_QKEY;
	else
		mask |= IBV_QP_ACCESS_FLAGS;
	if (ibv_modify_qp(qp, &a, mask)) {
		perror("trace: ibv_modify_qp");
		exit(2);
	}
	return qp;
}

static void group(union ibv_gid *g, const char *s)
{
	struct in_addr v4;
	memset(g, 0, sizeof(*g));
	if (inet_pton(AF_INET, s, &v4) == 1) {
		g->raw[10] = g->raw[11] = 0xff;
		memcpy(g->raw + 12, &v4, 4);
	} else if (inet_pton(AF_INET6, s, g->raw) != 1) {
		fprintf(stderr, "trace: bad group %s\n", s);
		exit(2);
	}
}

static int mc(int attach, struct ibv_qp *qp, union ibv_gid *g, uint16_t lid, const char *label)
{
	int e, rc = SENTINEL_CALL(&e, attach ? ibv_attach_mcast(qp, g, lid) : ibv_detach_mcast(qp, g, lid));
	printf("trace: %s rc=%d errno=%d\n", label, rc, e);
	return rc;
}

static void destroy(struct ibv_qp *qp, const char *label)
{
	int e, rc = SENTINEL_CALL(&e, ibv_destroy_qp(qp));
	printf("trace: %s rc=%d errno=%d\n", label, rc, e);
}

/* A UD QP on its own CQ with room for n receives, taken to RTS with the
 * Q_Key qkey (a receiver must be in RTR for rxe to check its Q_Key:
 * rxe_recv.c check_type_state, then check_keys). */
static struct ibv_qp *ud_rts(struct ibv_cq *c, int n, uint32_t qkey)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = c, .recv_cq = c, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = n, .max_recv_wr = n, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qkey = qkey };
	if (!qp || ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)) {
		perror("trace: UD QP");
		exit(2);
	}
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE)) {
		perror("trace: RTR");
		exit(2);
	}
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .sq_psn = 0 };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN)) {
		perror("trace: RTS");
		exit(2);
	}
	return qp;
}

static uint32_t qkey_viol(void)
{
	struct ibv_port_attr pa;
	if (ibv_query_port(ctx, 1, &pa)) {
		perror("trace: ibv_query_port");
		exit(2);
	}
	return pa.qkey_viol_cntr;
}

/* The qkey scenario (see the top). Prints only what is the same with and
 * without the library: results, completion counts, yes/no. */
static void qkey_scenario(union ibv_gid *g, int n, uint32_t send_qkey)
{
	enum { SLOT = 40 + 64, RQKEY = 0x11111111 };
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	struct ibv_cq *rcq = ibv_create_cq(ctx, n + 2, NULL, NULL, 0), *scq = ibv_create_cq(ctx, n + 2, NULL, NULL, 0);
	char *buf = calloc(n + 2, SLOT);
	struct ibv_mr *mr = buf ? ibv_reg_mr(pd, buf, (size_t)(n + 2) * SLOT, IBV_ACCESS_LOCAL_WRITE) : NULL;
	int sgid = -1, ifindex = 0;
	if (!rcq || !scq || !mr) {
		perror("trace: qkey setup");
		exit(2);
	}
	for (int i = 0; i < 64 && sgid < 0; i++) {
		struct ibv_gid_entry e;
		if (!ibv_query_gid_ex(ctx, 1, i, &e, 0) && e.gid_type == IBV_GID_TYPE_ROCE_V2 && !memcmp(e.gid.raw, mapped, 12))
			sgid = i, ifindex = e.ndev_ifindex;
	}
	/* TRACE_NOJOIN=1: no IP-level join of our own (make demo's receiver
	 * that only attaches; RSVERBS_MCAST_IPJOIN=1 makes the join then). */
	int nojoin = getenv("TRACE_NOJOIN") && !strcmp(getenv("TRACE_NOJOIN"), "1");
	if (sgid < 0 || (!nojoin && ip_join_mgid(g->raw, ifindex) < 0)) {
		fprintf(stderr, "trace: no IPv4 RoCE v2 GID, or no IP-level join\n");
		exit(2);
	}
	struct ibv_qp *r = ud_rts(rcq, n + 1, RQKEY), *s = ud_rts(scq, n + 1, RQKEY);
	for (int i = 0; i <= n; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)(buf + (size_t)i * SLOT), .length = SLOT, .lkey = mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;
		if (ibv_post_recv(r, &wr, &bad)) {
			perror("trace: ibv_post_recv");
			exit(2);
		}
	}
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1, .grh = { .dgid = *g, .sgid_index = sgid, .hop_limit = 1 } };
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);
	if (!ah) {
		perror("trace: ibv_create_ah");
		exit(2);
	}
	mc(1, r, g, 0, "qkey-attach");
	uint32_t v0 = qkey_viol();
	/* n datagrams with send_qkey, then a marker with the receiver's */
	for (int i = 0; i <= n; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)(buf + (size_t)(n + 1) * SLOT), .length = 64, .lkey = mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = i, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
			.wr.ud = { .ah = ah, .remote_qpn = 0xffffff, .remote_qkey = i < n ? send_qkey : RQKEY },
		}, *bad;
		struct ibv_wc wc;
		int k;
		uint64_t end = now_ns() + 5000000000ull;
		if (ibv_post_send(s, &wr, &bad)) {
			perror("trace: ibv_post_send");
			exit(2);
		}
		while ((k = ibv_poll_cq(scq, 1, &wc)) == 0 && now_ns() < end)
			;
		if (k != 1 || wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "trace: send %d: no successful completion\n", i);
			exit(2);
		}
	}
	/* Until the marker has arrived and the counter has seen every
	 * mismatching datagram, or 5 s (rxe checks the Q_Key as the packet
	 * arrives, before any completion: rxe_recv.c rxe_rcv_mcast_pkt). */
	int got = 0, marker = 0;
	uint32_t rose = 0;
	uint64_t end = now_ns() + 5000000000ull;
	while (now_ns() < end) {
		struct ibv_wc wc[16];
		int k = ibv_poll_cq(rcq, 16, wc);
		for (int i = 0; i < k; i++)
			got += wc[i].status == IBV_WC_SUCCESS;
		/* Mismatching datagrams never complete: any completion is the
		 * marker then; with one Q_Key the marker is the last of n + 1. */
		marker = send_qkey == RQKEY ? got == n + 1 : got >= 1;
		rose = qkey_viol() - v0;
		if (marker && (send_qkey == RQKEY ? got == n + 1 : rose >= (uint32_t)n))
			break;
	}
	printf("trace: qkey completions=%d marker=%s counter-rose-by-%d=%s\n", got, marker ? "yes" : "no", n,
	       rose >= (uint32_t)n ? "yes" : rose == 0 ? "no" : "partly");
	mc(0, r, g, 0, "qkey-detach");
	ibv_destroy_ah(ah);
	destroy(s, "qkey-destroy-sender");
	destroy(r, "qkey-destroy-receiver");
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: see the top of ctest/vm/trace.c\n");
		return 2;
	}
	const char *cmd = argv[1];
	union ibv_gid g, g2;
	open_dev(argv[2]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 3)
		group(&g, argv[3]);

	if (!strcmp(cmd, "attach") && argc == 4) {
		struct ibv_qp *qp = qp_init(IBV_QPT_UD);
		mc(1, qp, &g, 0, "attach");
		mc(0, qp, &g, 0, "detach");
		destroy(qp, "destroy");
	} else if (!strcmp(cmd, "notmc")) {
		struct ibv_qp *qp = qp_init(IBV_QPT_UD);
		group(&g, "192.0.2.1");
		mc(1, qp, &g, 0, "attach-unicast-mgid");
		destroy(qp, "destroy");
	} else if (!strcmp(cmd, "notud") && argc == 4) {
		struct ibv_qp *qp = qp_init(IBV_QPT_RC);
		mc(1, qp, &g, 0, "attach-rc");
		destroy(qp, "destroy");
	} else if (!strcmp(cmd, "lidmismatch") && argc == 4) {
		struct ibv_qp *qp = qp_init(IBV_QPT_UD);
		mc(1, qp, &g, 0, "attach-lid-0");
		mc(0, qp, &g, 0x1234, "detach-lid-0x1234");
		mc(0, qp, &g, 0, "detach-lid-0");
		destroy(qp, "destroy");
	} else if (!strcmp(cmd, "healthy") && argc == 4) {
		struct ibv_qp *qp = qp_init(IBV_QPT_UD);
		group(&g2, "ff0e::7ace:dead");
		mc(1, qp, &g, 0, "attach");
		mc(1, qp, &g, 0, "attach-again");
		mc(0, qp, &g, 0, "detach");
		mc(0, qp, &g2, 0, "detach-never-attached");
		destroy(qp, "destroy");
	} else if (!strcmp(cmd, "limit") && argc == 5) {
		int n = atoi(argv[4]), ok = 0;
		struct ibv_qp **qps = calloc(n, sizeof(*qps));
		int *att = calloc(n, sizeof(*att));
		char label[64];
		for (int i = 0; i < n; i++) {
			qps[i] = qp_init(IBV_QPT_UD);
			snprintf(label, sizeof(label), "attach-qp-%d", i + 1);
			att[i] = mc(1, qps[i], &g, 0, label) == 0;
			ok += att[i];
		}
		printf("trace: %d of %d QPs attached\n", ok, n);
		for (int i = 0; i < n; i++) {
			if (att[i]) {
				snprintf(label, sizeof(label), "detach-qp-%d", i + 1);
				mc(0, qps[i], &g, 0, label);
			}
			snprintf(label, sizeof(label), "destroy-qp-%d", i + 1);
			destroy(qps[i], label);
		}
	} else if (!strcmp(cmd, "exit") && argc == 4) {
		struct ibv_qp *qp = qp_init(IBV_QPT_UD);
		mc(1, qp, &g, 0, "attach");
		destroy(qp, "destroy-while-attached");
		/* exit with the QP attached: the kernel cleans up at close */
	} else if (!strcmp(cmd, "walk")) {
		struct ibv_port_attr pa;
		int calls = 0, found = 0;
		if (ibv_query_port(ctx, 1, &pa))
			return 2;
		for (int i = 0; i < pa.gid_tbl_len; i++) {
			struct ibv_gid_entry e;
			int err, rc = SENTINEL_CALL(&err, ibv_query_gid_ex(ctx, 1, i, &e, 0));
			calls++;
			found += rc == 0;
			if (rc != 0 && rc != ENODATA)
				printf("trace: query %d rc=%d errno=%d\n", i, rc, err);
		}
		printf("trace: walk %d calls, %d entries\n", calls, found);
	} else if (!strcmp(cmd, "attachments")) {
		typedef int (*list_fn)(const struct ibv_qp *, union ibv_gid *, uint16_t *, size_t);
		list_fn list = (list_fn)dlsym(RTLD_DEFAULT, "rsverbs_mcast_attachments");
		struct ibv_qp *qp = qp_init(IBV_QPT_UD);
		union ibv_gid out[4];
		uint16_t lids[4];
		if (!list) {
			printf("trace: no rsverbs_mcast_attachments\n");
			return 2;
		}
		group(&g, "ff0e::7ace:1");
		group(&g2, "ff0e::7ace:2");
		mc(1, qp, &g, 0, "attach-1");
		mc(1, qp, &g2, 0, "attach-2");
		mc(1, qp, &g, 0, "attach-1-again");
		int e, n = SENTINEL_CALL(&e, list(qp, out, lids, 4));
		printf("trace: attachments %d errno=%d", n, e);
		for (int i = 0; i < n && i < 4; i++) {
			char s[INET6_ADDRSTRLEN];
			printf(" %s/%u", inet_ntop(AF_INET6, out[i].raw, s, sizeof(s)), lids[i]);
		}
		printf("\n");
		mc(0, qp, &g, 0, "detach-1");
		printf("trace: attachments-after-detach %d\n", list(qp, NULL, NULL, 0));
		mc(0, qp, &g2, 0, "detach-2");
		printf("trace: attachments-at-end %d\n", list(qp, NULL, NULL, 0));
		n = SENTINEL_CALL(&e, list(NULL, NULL, NULL, 0));
		printf("trace: attachments-null %d errno=%d\n", n, e);
		destroy(qp, "destroy");
	} else if (!strcmp(cmd, "qkey") && argc == 6) {
		qkey_scenario(&g, atoi(argv[4]), (uint32_t)strtoul(argv[5], NULL, 0));
	} else {
		fprintf(stderr, "trace: bad arguments (see the top of ctest/vm/trace.c)\n");
		return 2;
	}
	return 0;
}
