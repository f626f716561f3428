/* ipjoin: RSVERBS_MCAST_IPJOIN in the guest (ctest/vm/ipjoin.sh,
 * docs/ipjoin.md).
 *
 *   ipjoin DEV NETDEV OTHER E4E6   the scenarios below on DEV (port 1),
 *                                   whose GIDs are on NETDEV; with
 *                                   IPJOIN_HOLDER=cm the joins are held by
 *                                   an rdma_cm fd (the fabric join,
 *                                   docs/fabric-join.md), not by sockets
 *   ipjoin --sockets|--cm          print how many socket (rdma_cm) fds we have
 *   ipjoin --member NETDEV         print 1 when NETDEV has joined 239.77.1.10, else 0
 *   ipjoin --hold DEV              attach ::ffff:239.77.1.10 on DEV, print
 *                                   "held", wait for stdin's end (ipjoin.sh
 *                                   kills it there), then detach
 *
 * E4E6 is two digits, for IPv4-mapped and IPv6 groups: 1 when the IP-level
 * join is expected (rsverbs with RSVERBS_MCAST_IPJOIN=1), 0 when never
 * (rdma-core alone, the variable unset, or the joins made to fail). Every verb call prints a "call" line (its return value and errno,
 * errno set to SENTINEL before the call) that must be the same in every
 * run; every membership check prints "ok ..." or "FAIL ...", read from
 * /proc/net/igmp{,6}: on NETDEV it must equal the expectation, on OTHER it
 * must never appear. Exit status 1 when a check failed, 2 on a setup error. */
#include <arpa/inet.h>
#include "common.h"

static const char *netdev, *other;
static int expect, expect6, failed;
/* What holds the joins: sockets (the IP join) or an rdma_cm fd. */
static const char *holder = "socket:";

/* ::ffff:239.77.<b>.<c> */
static void v4(union ibv_gid *g, unsigned b, unsigned c)
{
	memset(g, 0, sizeof(*g));
	g->raw[10] = g->raw[11] = 0xff;
	g->raw[12] = 239, g->raw[13] = 77, g->raw[14] = b, g->raw[15] = c;
}

static int call(const char *what, int attach, struct ibv_qp *qp, const char *qname, union ibv_gid *g, uint16_t lid)
{
	char s[64];
	int rc, e;
	rc = SENTINEL_CALL(&e, attach ? ibv_attach_mcast(qp, g, lid) : ibv_detach_mcast(qp, g, lid));
	inet_ntop(AF_INET6, g->raw, s, sizeof(s));
	printf("call %s %s %s %s lid=%#x rc=%d errno=%d\n", what, attach ? "attach" : "detach", qname, s, lid, rc, e);
	return rc;
}

/* NETDEV's membership of `g` must be `want` (0 or 1); OTHER's 0. */
static void member(const char *what, const union ibv_gid *g, int want)
{
	int on = ip_member(netdev, g), off = ip_member(other, g);
	char s[64];
	inet_ntop(AF_INET6, g->raw, s, sizeof(s));
	if (on == want && off == 0) {
		printf("ok %s: %s %s on %s\n", what, s, want ? "joined" : "not joined", netdev);
	} else {
		printf("FAIL %s: %s on %s: %d (want %d), on %s: %d (want 0)\n", what, s, netdev, on, want, other, off);
		failed = 1;
	}
}

static void check(const char *what, int cond)
{
	printf("%s %s\n", cond ? "ok" : "FAIL", what);
	if (!cond)
		failed = 1;
}

static struct ibv_qp *ud_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp *qp = new_qp_on(pd, cq, IBV_QPT_UD);
	/* perftest's Q_Key, or IPJOIN_QKEY's (the fabric join's hint[qkey-mismatch]
	 * twin: rdma_cm's 0x01234567 is the group's on RoCE). */
	const char *qk = getenv("IPJOIN_QKEY");
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
				 .qkey = qk ? (uint32_t)strtoul(qk, NULL, 0) : 0x11111111 };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)) {
		fprintf(stderr, "ipjoin: modify_qp INIT: %s\n", strerror(errno));
		exit(2);
	}
	return qp;
}

/* Runs `self --sockets` (`--cm`) in a child made by the raw fork syscall,
 * which runs no atfork handler: only O_CLOEXEC can keep our holders out of
 * it. Returns the number it printed, or -1. */
static int holders_after_exec(const char *self)
{
	int p[2], n = -1;
	char buf[32] = "";
	if (pipe(p))
		return -1;
	fflush(NULL);
	pid_t pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
	if (pid == 0) {
		dup2(p[1], 1);
		execl(self, self, strcmp(holder, "socket:") ? "--cm" : "--sockets", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	if (read(p[0], buf, sizeof(buf) - 1) > 0)
		n = atoi(buf);
	close(p[0]);
	waitpid(pid, NULL, 0);
	return n;
}

int main(int argc, char **argv)
{
	union ibv_gid g;
	char st[32];
	if (argc == 2 && !strcmp(argv[1], "--sockets")) {
		printf("%d\n", count_socket_fds());
		return 0;
	}
	if (argc == 2 && !strcmp(argv[1], "--cm")) {
		printf("%d\n", count_fds_to("/dev/infiniband/rdma_cm"));
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "--member")) {
		v4(&g, 1, 10);
		printf("%d\n", ip_member(argv[2], &g));
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "--hold")) {
		struct ibv_context *c = open_by_name(argv[2]);
		struct ibv_pd *p = ibv_alloc_pd(c);
		struct ibv_cq *q = p ? ibv_create_cq(c, 8, NULL, NULL, 0) : NULL;
		char b;
		if (!q)
			return 2;
		struct ibv_qp *qp = ud_qp(p, q);
		v4(&g, 1, 10);
		if (ibv_attach_mcast(qp, &g, 0))
			return 2;
		printf("held\n");
		fflush(stdout);
		while (read(0, &b, 1) > 0)
			;
		return ibv_detach_mcast(qp, &g, 0) != 0;
	}
	if (getenv("IPJOIN_HOLDER") && !strcmp(getenv("IPJOIN_HOLDER"), "cm"))
		holder = "/dev/infiniband/rdma_cm";
	if (argc != 5) {
		fprintf(stderr, "usage: [IPJOIN_HOLDER=cm] ipjoin DEV NETDEV OTHER E4E6 | ipjoin --sockets | ipjoin --cm | ipjoin --hold DEV\n");
		return 2;
	}
	netdev = argv[2], other = argv[3];
	if (strlen(argv[4]) != 2) {
		fprintf(stderr, "ipjoin: E4E6 is two digits, e.g. 11\n");
		return 2;
	}
	expect = argv[4][0] == '1', expect6 = argv[4][1] == '1';
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct ibv_context *ctx = open_by_name(argv[1]);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 8, NULL, NULL, 0) : NULL;
	if (!cq) {
		fprintf(stderr, "ipjoin: pd/cq: %s\n", strerror(errno));
		return 2;
	}
	struct ibv_qp *q1 = ud_qp(pd, cq), *q2 = ud_qp(pd, cq), *rc_qp = new_qp_on(pd, cq, IBV_QPT_RC);
	print_served_by(stdout);

	/* 1. IPv4-mapped: attach joins, detach leaves. */
	v4(&g, 1, 1);
	member("v4 before", &g, 0);
	call("v4", 1, q1, "q1", &g, 0);
	member("v4 attached", &g, expect);
	call("v4", 0, q1, "q1", &g, 0);
	member("v4 detached", &g, 0);

	/* 2. IPv6 ff0e::. */
	mgid(&g, 0x77, 0, 2);
	member("v6 before", &g, 0);
	call("v6", 1, q1, "q1", &g, 0);
	member("v6 attached", &g, expect6);
	call("v6", 0, q1, "q1", &g, 0);
	member("v6 detached", &g, 0);

	/* 3. Two QPs: the first detach keeps the membership, the last ends it. */
	v4(&g, 1, 3);
	call("two", 1, q1, "q1", &g, 0);
	call("two", 1, q2, "q2", &g, 0);
	member("two attached", &g, expect);
	call("two", 0, q1, "q1", &g, 0);
	member("two, first detached", &g, expect);
	call("two", 0, q2, "q2", &g, 0);
	member("two, both detached", &g, 0);

	/* 4. A duplicate attach is one attachment: one detach ends it, and a
	 * second detach fails (EINVAL) and leaves nothing. */
	v4(&g, 1, 4);
	call("dup", 1, q1, "q1", &g, 0);
	call("dup", 1, q1, "q1", &g, 0);
	member("dup attached twice", &g, expect);
	call("dup", 0, q1, "q1", &g, 0);
	member("dup detached once", &g, 0);
	call("dup", 0, q1, "q1", &g, 0);
	member("dup detached twice", &g, 0);

	/* 5. Failed calls join and leave nothing: an RC QP, a GID that is not
	 * multicast, a detach of a pair never attached. */
	v4(&g, 1, 5);
	call("fail", 1, rc_qp, "rc", &g, 0);
	member("fail rc qp", &g, 0);
	memset(&g, 0, sizeof(g));
	g.raw[10] = g.raw[11] = 0xff, g.raw[12] = 192, g.raw[13] = 0, g.raw[14] = 2, g.raw[15] = 77;
	call("fail", 1, q1, "q1", &g, 0);
	member("fail unicast gid", &g, 0);
	v4(&g, 1, 6);
	call("fail", 1, q1, "q1", &g, 0);
	call("fail", 0, q2, "q2", &g, 0);
	member("fail detach of q2, q1 still attached", &g, expect);
	call("fail", 0, q1, "q1", &g, 0);
	member("fail q1 detached", &g, 0);
	/* A detach the kernel refuses for the attached pair itself (another
	 * LID: uverbs_cmd.c `ib_uverbs_detach_mcast` matches gid and mlid)
	 * keeps the membership; the right one ends it. */
	v4(&g, 1, 9);
	call("fail", 1, q1, "q1", &g, 0);
	call("fail", 0, q1, "q1", &g, 0xc001);
	member("fail refused detach (another lid), still attached", &g, expect);
	call("fail", 0, q1, "q1", &g, 0);
	member("fail q1 detached with its lid", &g, 0);

	/* 6. fork: the child has none of our sockets; its own attach/detach of
	 * the group, and its exit, leave our membership alone. */
	v4(&g, 1, 7);
	call("fork", 1, q1, "q1", &g, 0);
	member("fork parent attached", &g, expect);
	if (expect)
		check("fork parent holds a socket (an rdma_cm fd)", count_fds_to(holder) > 0);
	else if (!expect6 && !strcmp(holder, "socket:"))
		check("fork parent holds no socket", count_fds_to(holder) == 0);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		int bad = count_fds_to(holder) != 0;
		struct ibv_qp *q3 = ud_qp(pd, cq);
		bad |= ibv_attach_mcast(q3, &g, 0) != 0;
		bad |= ibv_detach_mcast(q3, &g, 0) != 0;
		bad |= ibv_destroy_qp(q3) != 0;
		_exit(bad);
	}
	int status = wait_bounded(pid, 20000);
	printf("call fork child %s\n", status_str(status, st, sizeof(st)));
	check("fork child: no inherited socket (rdma_cm fd), its attach/detach succeed", status == 0);
	member("fork after the child's attach, detach and exit", &g, expect);
	check("exec'd child (no atfork handler) has no socket (rdma_cm fd): CLOEXEC", holders_after_exec("/proc/self/exe") == 0);
	/* A child detaching our QP (the QP is shared) must not leave our
	 * membership: only the process that joined leaves. */
	v4(&g, 1, 8);
	call("fork2", 1, q1, "q1", &g, 0);
	fflush(NULL);
	pid = fork();
	if (pid == 0)
		_exit(ibv_detach_mcast(q1, &g, 0) != 0);
	status = wait_bounded(pid, 20000);
	printf("call fork2 child detach %s\n", status_str(status, st, sizeof(st)));
	member("fork2 after the child detached our QP", &g, expect);
	v4(&g, 1, 7);
	call("fork", 0, q1, "q1", &g, 0);
	member("fork parent detached", &g, 0);

	ibv_destroy_qp(rc_qp);
	ibv_destroy_qp(q2);
	ibv_destroy_qp(q1);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return failed;
}
