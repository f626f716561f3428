/* Concurrency and resource-leak stress for ibv_attach_mcast,
 * ibv_detach_mcast and _ibv_query_gid_ex.
 *
 *   stress run -d DEV -i NETDEV [-t THREADS] [-n ITERS]
 *     THREADS threads x ITERS mixed calls: half the threads on one shared
 *     context, half on a private context each; every thread also uses two
 *     QPs of the shared context. Each thread owns its groups, so every
 *     result is predictable and checked (attach 0; detach 0 when attached,
 *     else EINVAL; query 0 with a well-formed entry, or ENODATA with the
 *     entry untouched); a few groups on one shared QP are contended by all
 *     threads (attach 0, detach 0 or EINVAL). Meanwhile a thread adds and
 *     removes IPv4/IPv6 addresses on NETDEV over rtnetlink, so the GID table
 *     changes underneath. At the end every group is detached: once (0 when
 *     attached), then again (EINVAL), and every QP must be destroyable.
 *   stress forkload -d DEV [-n FORKS]
 *     Fork under load: 4 threads call _ibv_query_gid_ex round-robin over
 *     300 contexts (more than any small per-context cache holds, so lookups
 *     keep missing) while the main thread forks FORKS times; each child makes
 *     one call on a context (and one on a new context) and exits. A library
 *     lock held by another thread at fork() time would hang the child: every
 *     child must exit 0 within 10 s (rdma-core takes no lock on these paths).
 *     The first hung child's stacks are printed (gdb) before it is killed.
 *   stress cycles -d DEV [-n CYCLES]
 *     CYCLES x (open context, query a GID, PD, CQ, QP, attach, detach,
 *     destroy all, close); open fds and RSS are compared before and after.
 *
 * "R ..." lines must be identical in every mode (rdma-core, relinked,
 * preloaded); "P ..." lines are measurements (throughput, RSS), printed. */
#include "common.h"
#include <arpa/inet.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>

#define NGROUPS 8  /* owned groups per thread */
#define NCONT 4    /* contended groups */
#define NQP 3      /* QPs per thread: 2 shared, 1 own */
#define NIDX 16    /* GID indexes queried */

static struct ibv_device *dev;
static struct ibv_context *shared_ctx;
static struct ibv_pd *shared_pd;
static struct ibv_cq *shared_cq;
static struct ibv_qp *shared_qp[2];
static unsigned ifindex;
static long iters = 10000;
static int nthreads = 8;
static atomic_int stop_churn;
static atomic_long churn_changes, errors;
static pthread_barrier_t barrier;

#define ERR(...)                                                                                        \
	do {                                                                                            \
		if (atomic_fetch_add(&errors, 1) < 20)                                                  \
			fprintf(stderr, "stress: " __VA_ARGS__);                                        \
	} while (0)

static uint64_t rng(uint64_t *s)
{
	/* xorshift64* */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	return ibv_create_qp(pd, &a);
}

/* ---- rtnetlink address churn ------------------------------------------- */

static int nl_addr(int nl, int add, int family, const void *addr, int plen)
{
	struct {
		struct nlmsghdr nh;
		struct ifaddrmsg ifa;
		char attrs[64];
	} req;
	int alen = family == AF_INET ? 4 : 16;
	memset(&req, 0, sizeof(req));
	req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifaddrmsg));
	req.nh.nlmsg_type = add ? RTM_NEWADDR : RTM_DELADDR;
	req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | (add ? NLM_F_CREATE | NLM_F_REPLACE : 0);
	req.ifa.ifa_family = family;
	req.ifa.ifa_prefixlen = plen;
	req.ifa.ifa_index = ifindex;
	req.ifa.ifa_flags = family == AF_INET6 ? IFA_F_NODAD : 0;
	for (int type = IFA_LOCAL; type <= IFA_ADDRESS + 1; type++) {
		if (type != IFA_LOCAL && type != IFA_ADDRESS)
			continue;
		struct rtattr *rta = (struct rtattr *)((char *)&req + NLMSG_ALIGN(req.nh.nlmsg_len));
		rta->rta_type = type;
		rta->rta_len = RTA_LENGTH(alen);
		memcpy(RTA_DATA(rta), addr, alen);
		req.nh.nlmsg_len = NLMSG_ALIGN(req.nh.nlmsg_len) + RTA_LENGTH(alen);
	}
	if (send(nl, &req, req.nh.nlmsg_len, 0) < 0)
		return errno;
	char buf[512];
	ssize_t n = recv(nl, buf, sizeof(buf), 0);
	if (n < (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr)))
		return EIO;
	struct nlmsghdr *h = (struct nlmsghdr *)buf;
	if (h->nlmsg_type == NLMSG_ERROR)
		return -((struct nlmsgerr *)NLMSG_DATA(h))->error;
	return 0;
}

static void churn_addr(int i, int *family, unsigned char a[16], int *plen)
{
	memset(a, 0, 16);
	if (i % 2 == 0) { /* 198.51.100.x/32 */
		*family = AF_INET, *plen = 32;
		a[0] = 198, a[1] = 51, a[2] = 100, a[3] = 1 + (i / 2) % 250;
	} else { /* 2001:db8:5::x/128 */
		*family = AF_INET6, *plen = 128;
		a[0] = 0x20, a[1] = 0x01, a[2] = 0x0d, a[3] = 0xb8, a[5] = 5;
		a[14] = ((i / 2) % 250) >> 8, a[15] = 1 + (i / 2) % 250;
	}
}

static void *churn(void *arg)
{
	int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	unsigned char a[16];
	int fam, plen, i;
	if (nl < 0 || bind(nl, (struct sockaddr *)&sa, sizeof(sa))) {
		ERR("netlink: %s\n", strerror(errno));
		return NULL;
	}
	/* At most 6 churn addresses at a time: add i, delete i-6. */
	for (i = 0; !atomic_load(&stop_churn); i++) {
		int r;
		churn_addr(i, &fam, a, &plen);
		if ((r = nl_addr(nl, 1, fam, a, plen)))
			ERR("add address %d: %s\n", i, strerror(r));
		if (i >= 6) {
			churn_addr(i - 6, &fam, a, &plen);
			if ((r = nl_addr(nl, 0, fam, a, plen)) && r != EADDRNOTAVAIL)
				ERR("delete address %d: %s\n", i - 6, strerror(r));
		}
		atomic_fetch_add(&churn_changes, 2);
		usleep(2000);
	}
	for (int j = i - 6 < 0 ? 0 : i - 6; j < i; j++) {
		churn_addr(j, &fam, a, &plen);
		nl_addr(nl, 0, fam, a, plen);
	}
	close(nl);
	return NULL;
}

/* ---- worker threads ------------------------------------------------------ */

struct worker {
	int id;
	struct ibv_context *ctx; /* shared_ctx or its own */
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp[NQP];
	unsigned char attached[NQP][NGROUPS];
	long ops[3]; /* query, attach, detach */
};

/* The entries present before the churn starts never change; the others
 * come and go. */
#define NSTABLE 3
static union {
	struct ibv_gid_entry e;
	unsigned char b[sizeof(struct ibv_gid_entry)];
} stable[NSTABLE];
static int stable_ret[NSTABLE];
static atomic_long raced;

static void check_query(struct worker *w, uint32_t idx)
{
	union {
		struct ibv_gid_entry e;
		unsigned char b[sizeof(struct ibv_gid_entry)];
	} u;
	memset(&u, 0xa5, sizeof(u));
	int r = ibv_query_gid_ex(w->ctx, 1, idx, &u.e, 0);
	if (idx < NSTABLE) {
		if (r != stable_ret[idx] || memcmp(&u, &stable[idx], sizeof(u)))
			ERR("thread %d: query idx %u: %d, a stable entry changed\n", w->id, idx, r);
	} else if (r == 0) {
		static const unsigned char zero[16];
		if (u.e.gid_index != idx || u.e.port_num != 1 || u.e.gid_type != IBV_GID_TYPE_ROCE_V2 ||
		    u.e.ndev_ifindex != ifindex || !memcmp(u.e.gid.raw, zero, 16))
			ERR("thread %d: query idx %u: bad entry (index %u port %u type %u ifindex %u)\n", w->id, idx,
			    u.e.gid_index, u.e.port_num, u.e.gid_type, u.e.ndev_ifindex);
	} else if (r == ENODATA) {
		for (unsigned i = 0; i < sizeof(u); i++)
			if (u.b[i] != 0xa5) {
				ERR("thread %d: query idx %u: ENODATA but the entry was written\n", w->id, idx);
				break;
			}
	} else if (r == EINVAL) {
		/* The kernel's own race (uverbs_std_types_device.c, QUERY_GID_ENTRY):
		 * rdma_get_gid_attr() took the entry, then the address was deleted
		 * and rdma_read_gid_attr_ndev_rcu() finds it invalid: -EINVAL.
		 * Only on the indexes the churn uses; counted and printed. */
		atomic_fetch_add(&raced, 1);
	} else {
		ERR("thread %d: query idx %u: %d\n", w->id, idx, r);
	}
}

static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t s = 0x9e3779b97f4a7c15ull * (w->id + 1);
	union ibv_gid g;
	pthread_barrier_wait(&barrier);
	for (long i = 0; i < iters; i++) {
		uint64_t x = rng(&s);
		unsigned op = x % 100, q = (x >> 8) % NQP, k = (x >> 16) % NGROUPS;
		if (op < 40) {
			check_query(w, (x >> 24) % NIDX);
			w->ops[0]++;
		} else if (op < 45) {
			/* contended groups on shared QP 0 */
			mgid(&g, 0x58, 0, (x >> 24) % NCONT);
			int att = (x >> 32) & 1, r = att ? ibv_attach_mcast(shared_qp[0], &g, 0)
							  : ibv_detach_mcast(shared_qp[0], &g, 0);
			if (att ? r != 0 : (r != 0 && r != EINVAL))
				ERR("thread %d: contended %s: %d\n", w->id, att ? "attach" : "detach", r);
			w->ops[att ? 1 : 2]++;
		} else if (op < 75) {
			mgid(&g, 0x57, w->id, k);
			int r = ibv_attach_mcast(w->qp[q], &g, 0);
			if (r != 0)
				ERR("thread %d: attach qp %u group %u: %d\n", w->id, q, k, r);
			else
				w->attached[q][k] = 1;
			w->ops[1]++;
		} else {
			mgid(&g, 0x57, w->id, k);
			int r = ibv_detach_mcast(w->qp[q], &g, 0), want = w->attached[q][k] ? 0 : EINVAL;
			if (r != want)
				ERR("thread %d: detach qp %u group %u: %d, expected %d\n", w->id, q, k, r, want);
			w->attached[q][k] = 0;
			w->ops[2]++;
		}
	}
	return NULL;
}

static int run(const char *ifname)
{
	struct worker *ws = calloc(nthreads, sizeof(*ws));
	pthread_t *th = calloc(nthreads, sizeof(*th)), churn_th;
	union ibv_gid g;
	int bad_final = 0, destroy_fail = 0;

	ifindex = if_nametoindex(ifname);
	if (!ifindex) {
		fprintf(stderr, "stress: no netdev %s\n", ifname);
		return 2;
	}
	shared_ctx = ibv_open_device(dev);
	if (!shared_ctx)
		return 2;
	shared_pd = ibv_alloc_pd(shared_ctx);
	shared_cq = ibv_create_cq(shared_ctx, 16, NULL, NULL, 0);
	for (int i = 0; i < 2; i++)
		if (!(shared_qp[i] = make_qp(shared_pd, shared_cq)))
			return 2;
	for (int t = 0; t < nthreads; t++) {
		struct worker *w = &ws[t];
		w->id = t;
		if (t < nthreads / 2) {
			w->ctx = shared_ctx, w->pd = shared_pd, w->cq = shared_cq;
		} else {
			w->ctx = ibv_open_device(dev);
			if (!w->ctx)
				return 2;
			w->pd = ibv_alloc_pd(w->ctx);
			w->cq = ibv_create_cq(w->ctx, 16, NULL, NULL, 0);
		}
		w->qp[0] = shared_qp[0], w->qp[1] = shared_qp[1];
		if (!(w->qp[2] = make_qp(w->pd, w->cq)))
			return 2;
	}
	for (int i = 0; i < NSTABLE; i++) {
		memset(&stable[i], 0xa5, sizeof(stable[i]));
		stable_ret[i] = ibv_query_gid_ex(shared_ctx, 1, i, &stable[i].e, 0);
		if (stable_ret[i]) {
			fprintf(stderr, "stress: GID %d of %s is not populated: %d\n", i, ibv_get_device_name(dev), stable_ret[i]);
			return 2;
		}
	}
	pthread_barrier_init(&barrier, NULL, nthreads + 1);
	pthread_create(&churn_th, NULL, churn, NULL);
	for (int t = 0; t < nthreads; t++)
		pthread_create(&th[t], NULL, work, &ws[t]);
	pthread_barrier_wait(&barrier);
	uint64_t t0 = now_ns();
	for (int t = 0; t < nthreads; t++)
		pthread_join(th[t], NULL);
	double secs = (now_ns() - t0) / 1e9;
	atomic_store(&stop_churn, 1);
	pthread_join(churn_th, NULL);

	long ops[3] = { 0 };
	for (int t = 0; t < nthreads; t++)
		for (int i = 0; i < 3; i++)
			ops[i] += ws[t].ops[i];
	long total = ops[0] + ops[1] + ops[2];
	printf("R stress threads=%d calls=%ld\n", nthreads, total);
	printf("R stress mismatches=%ld\n", atomic_load(&errors));
	printf("P stress %ld calls (%ld query, %ld attach, %ld detach) in %.2f s: %.0f calls/s; %ld address changes; "
	       "%ld queries raced an address deletion (kernel EINVAL)\n",
	       total, ops[0], ops[1], ops[2], secs, total / secs, atomic_load(&churn_changes), atomic_load(&raced));

	/* Final state: each owned group detaches exactly once. */
	long attached = 0, detached = 0;
	for (int t = 0; t < nthreads; t++)
		for (int q = 0; q < NQP; q++)
			for (int k = 0; k < NGROUPS; k++) {
				struct worker *w = &ws[t];
				mgid(&g, 0x57, t, k);
				int r1 = ibv_detach_mcast(w->qp[q], &g, 0), r2 = ibv_detach_mcast(w->qp[q], &g, 0);
				attached += w->attached[q][k];
				if (r1 != (w->attached[q][k] ? 0 : EINVAL) || r2 != EINVAL) {
					bad_final++;
					fprintf(stderr, "stress: final detach t%d q%d g%d: %d then %d (attached=%d)\n", t,
						q, k, r1, r2, w->attached[q][k]);
				}
				detached += r1 == 0;
			}
	for (int c = 0; c < NCONT; c++) {
		mgid(&g, 0x58, 0, c);
		int r1 = ibv_detach_mcast(shared_qp[0], &g, 0), r2 = ibv_detach_mcast(shared_qp[0], &g, 0);
		if ((r1 != 0 && r1 != EINVAL) || r2 != EINVAL)
			bad_final++;
	}
	printf("R final owned-groups-detached-once=%s bad=%d\n", attached == detached ? "yes" : "no", bad_final);
	fprintf(stderr, "stress: %ld owned groups were attached at the end\n", attached);
	/* No attachment left behind: every QP can be destroyed. */
	for (int t = 0; t < nthreads; t++) {
		destroy_fail += ibv_destroy_qp(ws[t].qp[2]) != 0;
		if (ws[t].ctx != shared_ctx) {
			ibv_destroy_cq(ws[t].cq);
			ibv_dealloc_pd(ws[t].pd);
			ibv_close_device(ws[t].ctx);
		}
	}
	for (int i = 0; i < 2; i++)
		destroy_fail += ibv_destroy_qp(shared_qp[i]) != 0;
	printf("R final destroy-failures=%d\n", destroy_fail);
	ibv_destroy_cq(shared_cq);
	ibv_dealloc_pd(shared_pd);
	ibv_close_device(shared_ctx);
	free(ws);
	free(th);
	return 0;
}

/* ---- fork while other threads are inside the library --------------------- */

#define NCTX 300
static struct ibv_context *fl_ctx[NCTX];
static atomic_int fl_stop;

static void *fl_work(void *arg)
{
	uint64_t s = 0x1234567 + (uintptr_t)arg;
	struct ibv_gid_entry e;
	while (!atomic_load(&fl_stop)) {
		struct ibv_context *c = fl_ctx[rng(&s) % NCTX];
		int r = ibv_query_gid_ex(c, 1, 0, &e, 0);
		if (r)
			ERR("forkload: query %d\n", r);
	}
	return NULL;
}

static int forkload(long forks)
{
	pthread_t th[4];
	int hung = 0, bad = 0, n = 0;
	char st[32];
	for (int i = 0; i < NCTX; i++)
		if (!(fl_ctx[i] = ibv_open_device(dev))) {
			fprintf(stderr, "stress: forkload: open %d: %s\n", i, strerror(errno));
			return 2;
		}
	for (int t = 0; t < 4; t++)
		pthread_create(&th[t], NULL, fl_work, (void *)(uintptr_t)t);
	uint64_t t0 = now_ns();
	for (long f = 0; f < forks; f++) {
		pid_t pid = fork();
		if (pid == 0) {
			struct ibv_gid_entry e;
			int r = ibv_query_gid_ex(fl_ctx[f % NCTX], 1, 0, &e, 0);
			struct ibv_context *c = ibv_open_device(dev);
			int r2 = c ? ibv_query_gid_ex(c, 1, 0, &e, 0) : -1;
			_exit(r == 0 && r2 == 0 ? 0 : 1);
		}
		int w = -1;
		for (int ms = 0; ms < 10000 && w == -1; ms += 5)
			if (waitpid(pid, &w, WNOHANG) != pid)
				w = -1, usleep(5000);
		if (w == -1) {
			hung++;
			fprintf(stderr, "stress: forkload: child %ld (pid %d) hung for 10 s\n", f, pid);
			if (hung == 1) {
				/* Where it sleeps: the kernel's view, then gdb's. */
				char path[64], buf[256];
				snprintf(path, sizeof(path), "/proc/%d/wchan", pid);
				FILE *fw = fopen(path, "r");
				if (fw && fgets(buf, sizeof(buf), fw))
					fprintf(stderr, "stress: forkload: hung child's wchan: %s\n", buf);
				if (fw)
					fclose(fw);
				snprintf(buf, sizeof(buf), "%d", pid);
				char *gdb[] = { "timeout", "120", "gdb", "-q", "-batch", "-p", buf, "-ex", "thread apply all bt 12", NULL };
				run_cmd(130000, gdb);
			}
			kill(pid, SIGKILL);
			waitpid(pid, &w, 0);
		} else if (!WIFEXITED(w) || WEXITSTATUS(w)) {
			bad++;
			fprintf(stderr, "stress: forkload: child %ld %s\n", f, status_str(w, st, sizeof(st)));
		}
		n++;
		if (hung >= 2)
			break;
	}
	double secs = (now_ns() - t0) / 1e9;
	atomic_store(&fl_stop, 1);
	for (int t = 0; t < 4; t++)
		pthread_join(th[t], NULL);
	for (int i = 0; i < NCTX; i++)
		ibv_close_device(fl_ctx[i]);
	printf("R forkload forks=%d hung=%d failed=%d mismatches=%ld\n", n, hung, bad, atomic_load(&errors));
	printf("P forkload %d forks in %.1f s under 4 calling threads\n", n, secs);
	return 0;
}

/* ---- open/close cycles ------------------------------------------------------ */

static int cycle(int i)
{
	struct ibv_context *ctx = ibv_open_device(dev);
	struct ibv_gid_entry e;
	union ibv_gid g;
	int bad = 0;
	if (!ctx)
		return 1;
	bad |= ibv_query_gid_ex(ctx, 1, 0, &e, 0) != 0;
	bad |= _ibv_query_gid_ex(ctx, 1, 0, &e, 0, 70000) != EINVAL;
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_qp *qp = pd && cq ? make_qp(pd, cq) : NULL;
	if (qp) {
		mgid(&g, 0xcc, 0, i & 0xff);
		bad |= ibv_attach_mcast(qp, &g, 0) != 0;
		bad |= ibv_detach_mcast(qp, &g, 0) != 0;
		bad |= ibv_detach_mcast(qp, &g, 0) != EINVAL;
		bad |= ibv_destroy_qp(qp) != 0;
	} else {
		bad = 1;
	}
	if (cq)
		ibv_destroy_cq(cq);
	if (pd)
		ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return bad;
}

static int cycles(long n)
{
	int bad = 0;
	long warm = n / 10 < 50 ? n / 10 : 50;
	for (long i = 0; i < warm; i++)
		bad += cycle(i);
	int fd0 = count_fds();
	long rss0 = rss_kb();
	uint64_t t0 = now_ns();
	for (long i = 0; i < n; i++)
		bad += cycle(i);
	double secs = (now_ns() - t0) / 1e9;
	int fd1 = count_fds();
	long rss1 = rss_kb();
	printf("R cycles=%ld failed-cycles=%d fd-delta=%d\n", n, bad, fd1 - fd0);
	printf("P cycles %ld in %.2f s (%.2f ms each); fds %d -> %d; RSS %ld -> %ld kB (%+ld kB)\n", n, secs,
	       secs * 1e3 / n, fd0, fd1, rss0, rss1, rss1 - rss0);
	printf("P rss-delta-kb %ld\n", rss1 - rss0);
	return 0;
}

int main(int argc, char **argv)
{
	const char *devname = "rxe1", *ifname = "dummy0";
	int n;
	const struct opt opts[] = {
		{ .name = "-d", .str = &devname },
		{ .name = "-i", .str = &ifname },
		{ .name = "-t", .num = &nthreads },
		{ .name = "-n", .lnum = &iters },
		{ .name = NULL },
	};
	if (argc < 2)
		return 2;
	parse_opts(argc, argv, 2, opts, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	print_served_by(stderr);
	struct ibv_device **list = ibv_get_device_list(&n);
	for (int i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), devname))
			dev = list[i];
	if (!dev) {
		fprintf(stderr, "stress: no device %s\n", devname);
		return 2;
	}
	int r = !strcmp(argv[1], "run")	   ? run(ifname)
		: !strcmp(argv[1], "cycles")   ? cycles(iters)
		: !strcmp(argv[1], "forkload") ? forkload(iters)
					       : 2;
	ibv_free_device_list(list);
	return r;
}
