/* member: explicit multicast membership (rsverbs_mcast_join(3),
 * docs/fabric-join.md "Explicit membership") beside librdmacm's own
 * rdma_join_multicast_ex on the same RoCE port, in the guest.
 *
 *   member DEV NETDEV BINDADDR seq rsverbs|rdmacm
 *       the same sequence of joins and leaves (full and send-only members of
 *       an IPv4 group; a leave of what is not held; bad flags), each step's
 *       answer and the group's IGMP membership on NETDEV after it, one
 *       "step" line each: rsverbs' lines must equal librdmacm's.
 *   member DEV NETDEV BINDADDR extra
 *       rsverbs only: counted joins, IPv6, bad arguments, errno on success,
 *       a forked child that has none of its parent's memberships.
 *   member DEV NETDEV BINDADDR hold full|sendonly rsverbs|rdmacm GROUP
 *       joins GROUP (a.b.c.d), prints "held", waits for a line on stdin
 *       ("again": joins it once more, prints "held" and waits again; any
 *       other line or the end: on), prints whether NETDEV is still a member
 *       ("after member=N"), leaves.
 *   member DEV NETDEV BINDADDR once full|sendonly rsverbs|rdmacm GROUP
 *       joins and leaves GROUP, printing membership after each.
 *   member DEV NETDEV BINDADDR raw rsverbs MGID
 *       rsverbs only: a full join of MGID exactly as given, and its leave.
 *   member DEV NETDEV BINDADDR privdrop rsverbs|rdmacm UID
 *       a privilege drop (docs/fabric-join.md, credential changes): as root, attaches (rsverbs)
 *       and joins; then setgroups(0), setresgid(UID), setresuid(UID); then
 *       attaches, detaches and leaves again. The kernel refuses the
 *       rdma_cm fd opened as root to the new credentials (EACCES,
 *       ucma_write -> ib_safe_file_access): librdmacm's calls fail with it
 *       and its memberships stay; rsverbs replaces the fd. One "step" line
 *       per call, then "final GROUP member=M" for each group.
 * On an InfiniBand port rsverbs is given rdma_cm's InfiniBand MGID of each
 * IPv4 group (rs_gid), librdmacm the group's address as everywhere.
 * rsverbs' functions are found with dlsym (preloaded or relinked alike);
 * "rsverbs" without them is an error (exit 2). Other failures: "FAIL" lines
 * and exit 1. */
#define PROG_NAME "member"
#include "common.h"
#include <arpa/inet.h>
#include <dlfcn.h>
#include <net/if.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <grp.h>
#include <sys/wait.h>

typedef int (*member_fn)(struct ibv_context *, uint8_t, const union ibv_gid *, int);
static member_fn rs_join, rs_leave;
static struct ibv_context *ctx;
static const char *netdev, *bindaddr;
static int failed;

/* librdmacm's side: two UDP IDs bound to BINDADDR, the full member's
 * and the send-only member's: librdmacm finds a membership to leave by its
 * address alone (cma.c rdma_leave_multicast), so one ID cannot hold both
 * kinds of the same group apart. */
static struct rdma_event_channel *ch;
static struct rdma_cm_id *ids[2];

static void v4_gid(union ibv_gid *g, const char *group)
{
	memset(g, 0, sizeof(*g));
	g->raw[10] = g->raw[11] = 0xff;
	if (inet_pton(AF_INET, group, g->raw + 12) != 1)
		die("bad group %s", group);
}

static void cm_open(void)
{
	ch = rdma_create_event_channel();
	for (int i = 0; i < 2; i++) {
		struct sockaddr_in a = { .sin_family = AF_INET };
		if (!ch || rdma_create_id(ch, &ids[i], NULL, RDMA_PS_UDP))
			die("rdma_create_id: %s", strerror(errno));
		if (inet_pton(AF_INET, bindaddr, &a.sin_addr) != 1 || rdma_bind_addr(ids[i], (struct sockaddr *)&a))
			die("rdma_bind_addr %s: %s", bindaddr, strerror(errno));
	}
}

/* The ID of a join of `flags` (bad flags: the full member's). */
static struct rdma_cm_id *cm_id(int flags)
{
	return ids[flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER];
}

/* The join's event (MULTICAST_JOIN or _ERROR), waited for at most 5 s:
 * 0, or -1 with errno (the event's status). */
static int cm_wait(void)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *e;
	int st;
	if (poll(&p, 1, 5000) != 1) {
		errno = ETIMEDOUT;
		return -1;
	}
	if (rdma_get_cm_event(ch, &e))
		return -1;
	st = e->event == RDMA_CM_EVENT_MULTICAST_JOIN ? 0 : (e->status < 0 ? -e->status : EIO);
	rdma_ack_cm_event(e);
	errno = st;
	return st ? -1 : 0;
}

/* On an InfiniBand port (ib_port), rsverbs is given the MGID rdma_cm makes
 * of the IPv4 group for a UDP ID (common.h ib_mgid_of_v4), which is what
 * librdmacm's side joins; on RoCE the v4-mapped MGID itself. */
static int ib_port;

static const union ibv_gid *rs_gid(const union ibv_gid *g, union ibv_gid *out)
{
	if (!ib_port)
		return g;
	ib_mgid_of_v4(out, g);
	return out;
}

/* One join or leave of group `g` (v4-mapped), either library's way. */
static int do_join(int rsverbs, const union ibv_gid *g, int flags)
{
	union ibv_gid ibg;
	if (rsverbs)
		return rs_join(ctx, 1, rs_gid(g, &ibg), flags);
	struct sockaddr_in a = { .sin_family = AF_INET };
	memcpy(&a.sin_addr, g->raw + 12, 4);
	struct rdma_cm_join_mc_attr_ex j = {
		.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS,
		.join_flags = (uint32_t)flags,
		.addr = (struct sockaddr *)&a,
	};
	if (rdma_join_multicast_ex(cm_id(flags), &j, NULL))
		return -1;
	return cm_wait();
}

static int do_leave(int rsverbs, const union ibv_gid *g, int flags)
{
	union ibv_gid ibg;
	if (rsverbs)
		return rs_leave(ctx, 1, rs_gid(g, &ibg), flags);
	struct sockaddr_in a = { .sin_family = AF_INET };
	memcpy(&a.sin_addr, g->raw + 12, 4);
	return rdma_leave_multicast(cm_id(flags), (struct sockaddr *)&a);
}

/* "step NAME rc=R errno=E member=M" (errno only when rc != 0). */
static void step(const char *name, int rc, const union ibv_gid *g)
{
	int e = errno;
	printf("step %s rc=%d errno=%d member=%d\n", name, rc, rc ? e : 0, ip_member(netdev, g));
	fflush(stdout);
}

static void expect(int ok, const char *what)
{
	if (!ok) {
		printf("FAIL %s\n", what);
		failed = 1;
	}
}

/* The sequence both libraries run (no IPv6: rdma_cm refuses an IPv6 group
 * on RoCE v2 with ENOTSUPP, docs/ipjoin.md). */
static void seq(int rs)
{
	union ibv_gid g;
	v4_gid(&g, "239.77.5.1");
	step("leave-not-joined", do_leave(rs, &g, RDMA_MC_JOIN_FLAG_FULLMEMBER), &g);
	step("join-bad-flags", do_join(rs, &g, RDMA_MC_JOIN_FLAG_RESERVED), &g);
	step("join-sendonly", do_join(rs, &g, RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER), &g);
	step("join-full", do_join(rs, &g, RDMA_MC_JOIN_FLAG_FULLMEMBER), &g);
	step("leave-sendonly", do_leave(rs, &g, RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER), &g);
	step("leave-full", do_leave(rs, &g, RDMA_MC_JOIN_FLAG_FULLMEMBER), &g);
	step("leave-sendonly-again", do_leave(rs, &g, RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER), &g);
	step("join-sendonly-alone", do_join(rs, &g, RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER), &g);
	step("leave-sendonly-alone", do_leave(rs, &g, RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER), &g);
}

/* rsverbs only. */
static void extra(void)
{
	union ibv_gid g, g6, uni;
	int rc;
	v4_gid(&g, "239.77.5.2");
	gid_from_hex(&g6, "ff0e0000000000000000000000770502");
	v4_gid(&uni, "239.77.5.3");
	uni.raw[12] = 10; /* ::ffff:10.77.5.3, not multicast */

	/* Counted: two joins need two leaves. */
	expect(rs_join(ctx, 1, &g, 0) == 0 && rs_join(ctx, 1, &g, 0) == 0, "two full joins");
	expect(ip_member(netdev, &g) == 1, "member after two joins");
	expect(rs_leave(ctx, 1, &g, 0) == 0 && ip_member(netdev, &g) == 1, "still a member after one leave of two");
	expect(rs_leave(ctx, 1, &g, 0) == 0 && ip_member(netdev, &g) == 0, "not a member after the second leave");
	errno = 0;
	expect(rs_leave(ctx, 1, &g, 0) == -1 && errno == EADDRNOTAVAIL, "a third leave: EADDRNOTAVAIL");

	/* IPv6: joined at IP level (rdma_cm would refuse it on RoCE v2). */
	expect(rs_join(ctx, 1, &g6, 0) == 0 && ip_member(netdev, &g6) == 1, "IPv6 full join: member");
	expect(rs_join(ctx, 1, &g6, 1) == 0 && ip_member(netdev, &g6) == 1, "IPv6 send-only join beside it");
	expect(rs_leave(ctx, 1, &g6, 1) == 0 && ip_member(netdev, &g6) == 1, "IPv6 send-only leave: the full member stays");
	expect(rs_leave(ctx, 1, &g6, 0) == 0 && ip_member(netdev, &g6) == 0, "IPv6 full leave: gone");

	/* errno is left as it was on success, set on failure. */
	errno = SENTINEL;
	expect(rs_join(ctx, 1, &g, 1) == 0 && errno == SENTINEL, "a success leaves errno");
	expect(rs_leave(ctx, 1, &g, 1) == 0 && errno == SENTINEL, "a successful leave leaves errno");

	/* Bad arguments: EINVAL, nothing joined. */
	struct { const char *what; struct ibv_context *c; uint8_t port; const union ibv_gid *g; int flags; } bad[] = {
		{ "NULL context", NULL, 1, &g, 0 },
		{ "NULL mgid", ctx, 1, NULL, 0 },
		{ "port 0", ctx, 0, &g, 0 },
		{ "port 9", ctx, 9, &g, 0 },
		{ "flags 2", ctx, 1, &g, 2 },
		{ "flags -1", ctx, 1, &g, -1 },
		{ "a unicast GID", ctx, 1, &uni, 0 },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char what[96];
		errno = 0;
		rc = rs_join(bad[i].c, bad[i].port, bad[i].g, bad[i].flags);
		snprintf(what, sizeof(what), "join with %s: EINVAL (rc %d, errno %d)", bad[i].what, rc, errno);
		expect(rc == -1 && errno == EINVAL, what);
		errno = 0;
		rc = rs_leave(bad[i].c, bad[i].port, bad[i].g, bad[i].flags);
		snprintf(what, sizeof(what), "leave with %s: EINVAL (rc %d, errno %d)", bad[i].what, rc, errno);
		expect(rc == -1 && errno == EINVAL, what);
	}
	expect(ip_member(netdev, &g) == 0, "nothing joined by the refused calls");

	/* A forked child has none of its parent's memberships, and its exit
	 * leaves the parent's alone. */
	expect(rs_join(ctx, 1, &g, 0) == 0 && ip_member(netdev, &g) == 1, "parent joined");
	pid_t pid = fork();
	if (pid == 0) {
		errno = 0;
		int r = rs_leave(ctx, 1, &g, 0);
		_exit(r == -1 && errno == EADDRNOTAVAIL ? 0 : 1);
	}
	int st = 0;
	expect(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "the child's leave of its parent's membership: EADDRNOTAVAIL");
	expect(ip_member(netdev, &g) == 1, "the parent is still a member after the child");
	expect(rs_leave(ctx, 1, &g, 0) == 0 && ip_member(netdev, &g) == 0, "the parent's leave");
	printf("extra done\n");
}

/* The privilege drop's groups (239.77.5.3x): attached or joined before
 * the drop, kept or ended after it; and made after it. */
enum { PD_ATT_DETACH, PD_JOIN_LEAVE, PD_ATT_KEEP, PD_JOIN_KEEP, PD_SO_LEAVE, PD_ATT_AFTER, PD_JOIN_AFTER, PD_N };
static const char *const pd_name[PD_N] = { "attached-then-detached", "joined-then-left", "attached-kept", "joined-kept",
					   "sendonly-then-left", "attached-after", "joined-after" };

static void drop_to(uid_t uid)
{
	if (setgroups(0, NULL) || setresgid(uid, uid, uid) || setresuid(uid, uid, uid))
		die("dropping to uid %u: %s", (unsigned)uid, strerror(errno));
	if (geteuid() != uid || getegid() != uid)
		die("still euid %u egid %u", (unsigned)geteuid(), (unsigned)getegid());
	printf("dropped uid=%u\n", (unsigned)uid);
	fflush(stdout);
}

static int pd_attach(struct ibv_qp *qp, int attach, const union ibv_gid *g)
{
	union ibv_gid m = *g;
	return attach ? ibv_attach_mcast(qp, &m, 0) : ibv_detach_mcast(qp, &m, 0);
}

/* rsverbs: every kind of membership before the drop, the first call after
 * it meets the fd's EACCES. librdmacm: its joins before, its calls after
 * (the kernel's answer to both libraries; librdmacm passes it on). */
static void privdrop(int rs, uid_t uid)
{
	union ibv_gid g[PD_N];
	char a[32];
	for (int i = 0; i < PD_N; i++) {
		snprintf(a, sizeof(a), "239.77.5.%d", 30 + i);
		v4_gid(&g[i], a);
	}
	struct ibv_qp *qp = NULL;
	if (rs) {
		struct ibv_pd *pd = ibv_alloc_pd(ctx);
		struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 4, NULL, NULL, 0) : NULL;
		if (!cq)
			die("pd/cq: %s", strerror(errno));
		qp = new_qp_on(pd, cq, IBV_QPT_UD);
		struct ibv_qp_attr at = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qkey = 0x01234567 };
		if (ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
			die("modify_qp INIT: %s", strerror(errno));
		step("root-attach", pd_attach(qp, 1, &g[PD_ATT_DETACH]), &g[PD_ATT_DETACH]);
		step("root-attach-kept", pd_attach(qp, 1, &g[PD_ATT_KEEP]), &g[PD_ATT_KEEP]);
	}
	step("root-join", do_join(rs, &g[PD_JOIN_LEAVE], RDMA_MC_JOIN_FLAG_FULLMEMBER), &g[PD_JOIN_LEAVE]);
	step("root-join-kept", do_join(rs, &g[PD_JOIN_KEEP], RDMA_MC_JOIN_FLAG_FULLMEMBER), &g[PD_JOIN_KEEP]);
	step("root-join-sendonly", do_join(rs, &g[PD_SO_LEAVE], RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER), &g[PD_SO_LEAVE]);
	drop_to(uid);
	if (rs) {
		step("attach-after-drop", pd_attach(qp, 1, &g[PD_ATT_AFTER]), &g[PD_ATT_AFTER]);
		step("detach-after-drop", pd_attach(qp, 0, &g[PD_ATT_DETACH]), &g[PD_ATT_DETACH]);
	}
	step("leave-after-drop", do_leave(rs, &g[PD_JOIN_LEAVE], RDMA_MC_JOIN_FLAG_FULLMEMBER), &g[PD_JOIN_LEAVE]);
	step("join-after-drop", do_join(rs, &g[PD_JOIN_AFTER], RDMA_MC_JOIN_FLAG_FULLMEMBER), &g[PD_JOIN_AFTER]);
	step("leave-sendonly-after-drop", do_leave(rs, &g[PD_SO_LEAVE], RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER), &g[PD_SO_LEAVE]);
	for (int i = 0; i < PD_N; i++)
		printf("final %s member=%d\n", pd_name[i], ip_member(netdev, &g[i]));
	fflush(stdout);
}

static int kind_of(const char *k)
{
	if (!strcmp(k, "full"))
		return RDMA_MC_JOIN_FLAG_FULLMEMBER;
	if (!strcmp(k, "sendonly"))
		return RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
	die("not full or sendonly: %s", k);
}

int main(int argc, char **argv)
{
	if (argc < 6)
		die("usage: member DEV NETDEV BINDADDR seq|extra|hold|once ...");
	const char *what = argv[4];
	netdev = argv[2];
	bindaddr = argv[3];
	ctx = open_by_name(argv[1]);
	struct ibv_port_attr pa;
	if (ibv_query_port(ctx, 1, &pa))
		die("ibv_query_port: %s", strerror(errno));
	ib_port = pa.link_layer == IBV_LINK_LAYER_INFINIBAND;
	/* Also the relinked build's reference to the verbs (librsverbs first):
	 * without one, --as-needed would drop librsverbs from it. */
	print_served_by(stderr);
	rs_join = (member_fn)dlsym(RTLD_DEFAULT, "rsverbs_mcast_join");
	rs_leave = (member_fn)dlsym(RTLD_DEFAULT, "rsverbs_mcast_leave");
	const char *lib = !strcmp(what, "seq") || !strcmp(what, "privdrop") || !strcmp(what, "raw") ? argv[5] : argc >= 8 ? argv[6] : "rsverbs";
	int rs = strcmp(lib, "rsverbs") == 0;
	if (rs && (!rs_join || !rs_leave)) {
		fprintf(stderr, "member: rsverbs_mcast_join is not loaded\n");
		return 2;
	}
	if (!rs)
		cm_open();
	if (!strcmp(what, "seq")) {
		seq(rs);
	} else if (!strcmp(what, "raw") && argc >= 7 && rs) {
		/* raw rsverbs MGID: a full join of MGID as given, and its leave */
		union ibv_gid g;
		if (inet_pton(AF_INET6, argv[6], g.raw) != 1)
			die("bad MGID %s", argv[6]);
		step("raw-join", rs_join(ctx, 1, &g, RDMA_MC_JOIN_FLAG_FULLMEMBER), &g);
		step("raw-leave", rs_leave(ctx, 1, &g, RDMA_MC_JOIN_FLAG_FULLMEMBER), &g);
	} else if (!strcmp(what, "extra")) {
		extra();
	} else if (!strcmp(what, "privdrop") && argc >= 7) {
		privdrop(rs, (uid_t)strtoul(argv[6], NULL, 10));
	} else if (argc >= 8 && (!strcmp(what, "hold") || !strcmp(what, "once"))) {
		union ibv_gid g;
		int flags = kind_of(argv[5]);
		v4_gid(&g, argv[7]);
		step("join", do_join(rs, &g, flags), &g);
		if (!strcmp(what, "hold")) {
			char line[16];
			printf("held\n");
			fflush(stdout);
			/* "again": one more (counted) join of the group, then wait again */
			while (fgets(line, sizeof(line), stdin) && !strcmp(line, "again\n")) {
				step("join-again", do_join(rs, &g, flags), &g);
				printf("held\n");
				fflush(stdout);
			}
			printf("after member=%d\n", ip_member(netdev, &g));
		}
		step("leave", do_leave(rs, &g, flags), &g);
	} else {
		die("unknown: %s", what);
	}
	for (int i = 0; i < 2; i++)
		if (ids[i])
			rdma_destroy_id(ids[i]);
	if (ch)
		rdma_destroy_event_channel(ch);
	ibv_close_device(ctx);
	return failed;
}
