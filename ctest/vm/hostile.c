/* hostile: RSVERBS_MCAST_IPJOIN inside a program that does what real
 * programs do to a library (ctest/vm/hostile.sh, docs/security.md). Run preloaded
 * with RSVERBS_MCAST_IPJOIN=1 on DEV, whose GIDs are on NETDEV:
 *
 *   hostile reuse DEV NETDEV       the program closes rsverbs' socket, opens
 *                                  its own at that number and joins the same
 *                                  group on it; forks; detaches: its fd and
 *                                  its membership must be untouched
 *   hostile v6many DEV NETDEV N    N IPv6 groups on one QP: N joined
 *   hostile v4many DEV NETDEV N T  N IPv4 groups on one QP, by T threads:
 *                                  N joined
 *   hostile race DEV NETDEV R T    T threads attach and detach one group R
 *                                  times each; at the end (detached) the
 *                                  group must not be joined
 *   hostile refused DEV NETDEV     a detach the kernel refuses (a wrong
 *                                  LID) keeps the membership
 *
 * Prints "ok ..." or "FAIL ..." per check and "hostile: N ok, N failed";
 * exit status 1 when a check failed, 2 on a setup error. */
#define PROG_NAME "hostile"
#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <pthread.h>
#include "common.h"

static const char *netdev;
static int oks, fails;

static void check(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int cond, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs(cond ? "ok " : "FAIL ", stdout);
	vprintf(fmt, ap);
	putchar('\n');
	va_end(ap);
	cond ? oks++ : fails++;
}

/* ::ffff:239.78.<b>.<c> */
static void v4(union ibv_gid *g, unsigned b, unsigned c)
{
	memset(g, 0, sizeof(*g));
	g->raw[10] = g->raw[11] = 0xff;
	g->raw[12] = 239, g->raw[13] = 78, g->raw[14] = (uint8_t)b, g->raw[15] = (uint8_t)c;
}

/* ff0e::78:<i> */
static void v6(union ibv_gid *g, unsigned i)
{
	memset(g, 0, sizeof(*g));
	g->raw[0] = 0xff, g->raw[1] = 0x0e, g->raw[13] = 0x78;
	g->raw[14] = (uint8_t)(i >> 8), g->raw[15] = (uint8_t)i;
}

/* The groups of /proc/net/igmp (IPv4) or igmp6 listed under `netdev`
 * whose address starts like ours (239.78/16, ff0e::78:0/112). */
static int joined_on_netdev(int ipv4)
{
	char line[512], a[64], b[64];
	int n = 0, in_dev = 0;
	FILE *f = fopen(ipv4 ? "/proc/net/igmp" : "/proc/net/igmp6", "r");
	if (!f)
		die("cannot read /proc/net/igmp%s", ipv4 ? "" : "6");
	while (fgets(line, sizeof(line), f)) {
		if (ipv4 && line[0] != '\t' && line[0] != ' ') {
			in_dev = sscanf(line, "%63s %63s", a, b) == 2 && !strcmp(b, netdev);
		} else if (ipv4 && in_dev && sscanf(line, "%63s", a) == 1) {
			/* The __be32 printed with %08X (kernel igmp.c
			 * igmp_mc_seq_show): its bytes in host order are the
			 * address's, whatever the byte order. */
			uint32_t v = (uint32_t)strtoul(a, NULL, 16);
			uint8_t o[4];
			memcpy(o, &v, 4);
			n += o[0] == 239 && o[1] == 78;
		} else if (!ipv4 && sscanf(line, "%*s %63s %63s", a, b) == 2 && !strcmp(a, netdev) &&
			   !strncmp(b, "ff0e0000000000000000000000780", 29)) {
			n++;
		}
	}
	fclose(f);
	return n;
}

struct qp_set {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
};

static void setup(struct qp_set *s, const char *dev)
{
	s->ctx = open_by_name(dev);
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = s->pd ? ibv_create_cq(s->ctx, 4, NULL, NULL, 0) : NULL;
	if (!s->cq)
		die("pd/cq on %s: %s", dev, strerror(errno));
	s->qp = new_qp_on(s->pd, s->cq, IBV_QPT_UD);
}

static void teardown(struct qp_set *s)
{
	ibv_destroy_qp(s->qp);
	ibv_destroy_cq(s->cq);
	ibv_dealloc_pd(s->pd);
	ibv_close_device(s->ctx);
}

/* The socket fds of this process, as a bit set of fd numbers < 1024. */
static void socket_fds(unsigned char set[128])
{
	char path[64], target[64];
	memset(set, 0, 128);
	for (int fd = 0; fd < 1024; fd++) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		ssize_t n = readlink(path, target, sizeof(target) - 1);
		if (n > 0 && (target[n] = 0, !strncmp(target, "socket:", 7)))
			set[fd / 8] |= (unsigned char)(1u << (fd % 8));
	}
}

static int reuse(const char *dev)
{
	struct qp_set s;
	union ibv_gid g;
	unsigned char before[128], after[128];
	unsigned ifindex = if_nametoindex(netdev);
	int ours = -1;
	setup(&s, dev);
	v4(&g, 1, 1);
	socket_fds(before);
	check(ibv_attach_mcast(s.qp, &g, 0) == 0, "reuse: attach 239.78.1.1");
	check(ip_member(netdev, &g) == 1, "reuse: 239.78.1.1 joined on %s by rsverbs", netdev);
	socket_fds(after);
	for (int fd = 0; fd < 1024 && ours < 0; fd++)
		if ((after[fd / 8] & ~before[fd / 8]) & (1u << (fd % 8)))
			ours = fd;
	if (ours < 0)
		die("no new socket after the attach: is RSVERBS_MCAST_IPJOIN=1 set and rsverbs preloaded?");
	/* The program, a daemon: close every fd it does not know, then open
	 * its own socket, at that number, and join the same group on it. */
	close(ours);
	int mine = ip_join_mgid(g.raw, ifindex);
	if (mine < 0)
		die("the program's own join: %s", strerror(errno));
	if (mine != ours) {
		if (dup2(mine, ours) != ours)
			die("dup2: %s", strerror(errno));
		close(mine);
		mine = ours;
	}
	pid_t pid = fork();
	if (pid == 0)
		_exit(fcntl(mine, F_GETFD) < 0 ? 1 : 0); /* rsverbs' atfork handler left it open? */
	int st = 0;
	waitpid(pid, &st, 0);
	check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "reuse: a forked child still has the program's fd %d", mine);
	check(ibv_detach_mcast(s.qp, &g, 0) == 0, "reuse: detach");
	check(fcntl(mine, F_GETFD) >= 0, "reuse: the program's fd %d is open after the detach", mine);
	check(ip_member(netdev, &g) == 1, "reuse: the program's membership of 239.78.1.1 on %s survives the detach", netdev);
	struct ip_mreqn m = { .imr_ifindex = (int)ifindex };
	memcpy(&m.imr_multiaddr, g.raw + 12, 4);
	int r = setsockopt(mine, IPPROTO_IP, IP_DROP_MEMBERSHIP, &m, sizeof(m));
	check(r == 0, "reuse: the program's own IP_DROP_MEMBERSHIP works (%s)", r ? strerror(errno) : "0");
	close(mine);
	teardown(&s);
	return 0;
}

static int many6(const char *dev, int n)
{
	struct qp_set s;
	union ibv_gid g;
	int bad = 0;
	setup(&s, dev);
	for (int i = 0; i < n; i++) {
		v6(&g, (unsigned)i);
		bad += ibv_attach_mcast(s.qp, &g, 0) != 0;
	}
	check(bad == 0, "v6many: %d attaches returned 0 (%d did not)", n - bad, bad);
	int j = joined_on_netdev(0);
	check(j == n, "v6many: %d of %d IPv6 groups joined on %s", j, n, netdev);
	for (int i = 0; i < n; i++) {
		v6(&g, (unsigned)i);
		ibv_detach_mcast(s.qp, &g, 0);
	}
	j = joined_on_netdev(0);
	check(j == 0, "v6many: after the detaches, %d joined", j);
	teardown(&s);
	return 0;
}

struct work {
	struct ibv_qp *qp;
	int from, to, rounds, bad;
};

static void *attach_range(void *p)
{
	struct work *w = p;
	union ibv_gid g;
	for (int i = w->from; i < w->to; i++) {
		v4(&g, 2 + (unsigned)i / 250, (unsigned)i % 250);
		w->bad += ibv_attach_mcast(w->qp, &g, 0) != 0;
	}
	return NULL;
}

static int many4(const char *dev, int n, int threads)
{
	struct qp_set s;
	pthread_t t[16];
	struct work w[16];
	int bad = 0;
	setup(&s, dev);
	if (threads < 1 || threads > 16)
		die("threads: 1 to 16");
	for (int i = 0; i < threads; i++) {
		w[i] = (struct work){ .qp = s.qp, .from = n * i / threads, .to = n * (i + 1) / threads };
		pthread_create(&t[i], NULL, attach_range, &w[i]);
	}
	for (int i = 0; i < threads; i++) {
		pthread_join(t[i], NULL);
		bad += w[i].bad;
	}
	check(bad == 0, "v4many: %d attaches by %d threads returned 0 (%d did not)", n - bad, threads, bad);
	int j = joined_on_netdev(1);
	check(j == n, "v4many: %d of %d IPv4 groups joined on %s", j, n, netdev);
	union ibv_gid g;
	for (int i = 0; i < n; i++) {
		v4(&g, 2 + (unsigned)i / 250, (unsigned)i % 250);
		ibv_detach_mcast(s.qp, &g, 0);
	}
	j = joined_on_netdev(1);
	check(j == 0, "v4many: after the detaches, %d joined", j);
	teardown(&s);
	return 0;
}

static void *churn(void *p)
{
	struct work *w = p;
	union ibv_gid g;
	v4(&g, 1, 2);
	for (int i = 0; i < w->rounds; i++) {
		ibv_attach_mcast(w->qp, &g, 0);
		ibv_detach_mcast(w->qp, &g, 0);
	}
	return NULL;
}

static int race(const char *dev, int rounds, int threads)
{
	struct qp_set s;
	pthread_t t[16];
	struct work w[16];
	union ibv_gid g;
	setup(&s, dev);
	if (threads < 1 || threads > 16)
		die("threads: 1 to 16");
	v4(&g, 1, 2);
	for (int i = 0; i < threads; i++) {
		w[i] = (struct work){ .qp = s.qp, .rounds = rounds };
		pthread_create(&t[i], NULL, churn, &w[i]);
	}
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	/* Every thread ended with a detach: the QP may or may not be attached
	 * (the last call of all decides), and the IP join must say the same. */
	int attached = ibv_attach_mcast(s.qp, &g, 0) == 0; /* now certainly attached */
	check(attached, "race: attach after the churn");
	check(ip_member(netdev, &g) == 1, "race: attached, so joined on %s", netdev);
	check(ibv_detach_mcast(s.qp, &g, 0) == 0, "race: the final detach");
	check(ip_member(netdev, &g) == 0, "race: detached, so not joined on %s (%d threads x %d rounds)", netdev, threads, rounds);
	teardown(&s);
	return 0;
}

static int refused(const char *dev)
{
	struct qp_set s;
	union ibv_gid g;
	setup(&s, dev);
	v4(&g, 1, 3);
	check(ibv_attach_mcast(s.qp, &g, 0) == 0, "refused: attach with LID 0");
	check(ip_member(netdev, &g) == 1, "refused: joined");
	errno = SENTINEL;
	int rc = ibv_detach_mcast(s.qp, &g, 0x1234);
	check(rc != 0, "refused: a detach with another LID is refused (rc %d, errno %d)", rc, errno);
	check(ip_member(netdev, &g) == 1, "refused: still joined after the refused detach");
	check(ibv_detach_mcast(s.qp, &g, 0) == 0, "refused: the right detach");
	check(ip_member(netdev, &g) == 0, "refused: left after the right detach");
	teardown(&s);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 4)
		die("usage: hostile reuse|v6many|v4many|race|refused DEV NETDEV [N [T]]");
	const char *what = argv[1], *dev = argv[2];
	netdev = argv[3];
	int n = argc > 4 ? atoi(argv[4]) : 0, t = argc > 5 ? atoi(argv[5]) : 1;
	if (!strcmp(what, "reuse"))
		reuse(dev);
	else if (!strcmp(what, "v6many"))
		many6(dev, n);
	else if (!strcmp(what, "v4many"))
		many4(dev, n, t);
	else if (!strcmp(what, "race"))
		race(dev, n, t);
	else if (!strcmp(what, "refused"))
		refused(dev);
	else
		die("unknown scenario %s", what);
	printf("hostile: %d ok, %d failed\n", oks, fails);
	return fails ? 1 : 0;
}
