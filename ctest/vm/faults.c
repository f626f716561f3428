/* faults: every syscall rsverbs makes during a verb, failed on purpose
 * at each position with each plausible errno (ctest/vm/faults.sh, make
 * faults; docs/security.md).
 *
 *   faults DEV NETDEV    the scenarios below on DEV (port 1; GIDs on NETDEV)
 *
 * For each scenario, a census child runs the verb once with every watched
 * syscall reported to this process (seccomp SECCOMP_RET_USER_NOTIF, Linux
 * 5.0; SECCOMP_USER_NOTIF_FLAG_CONTINUE, 5.5) and counts them; then, for
 * each watched syscall, each of its errnos and each position N up to that
 * count, a new child runs the verb with the N-th such call failed. The
 * child does its setup before the filter and its checks after the verb
 * (results in shared memory: no syscall in between is ours), and this
 * process judges:
 *   - the child was not killed (no crash) and its checks held;
 *   - the verb returned 0, or a positive errno with errno equal to it, or
 *     one of rdma-core's quiet answers (EOPNOTSUPP, ENODATA) with errno
 *     untouched;
 *   - no fd leaked (sockets rsverbs keeps for RSVERBS_MCAST_IPJOIN aside);
 *   - the program's own UDP socket is open and still holds its group.
 * "the command" rows: in the warm state the verb's one kernel command is
 * failed with E in rsverbs (write or ioctl) and in rdma-core (ioctl, this
 * program without the preload): both must return E with errno E.
 *
 * Three more axes, each scenario again (FAULTS_AXES picks some of
 * "syscall allocation cancellation small-stack"; default all):
 *   allocation    the census counts the library's allocations during the
 *                 verb (ctest/vm/allocfail.h: an interposed malloc, calloc,
 *                 realloc and posix_memalign whose caller is in
 *                 librsverbs); then, for each N up to that count, a run
 *                 whose N-th allocation fails: the verb's answer (value,
 *                 errno, the GID entry) must equal the census', and the
 *                 N-th allocation must have come and failed.
 *   cancellation  the verb runs in a worker thread (deferred cancellation
 *                 enabled), under a filter that reports every syscall it
 *                 makes to the child's main thread (no watched list: any
 *                 syscall, glibc's cancellable wrappers' included). A
 *                 census counts the verb's syscalls; then a run with the
 *                 worker cancelled before the verb (pending from its entry:
 *                 any cancellation point reached inside would act), and
 *                 one per position K, pthread_cancel called while the
 *                 worker waits in its K-th syscall, for each K whose call
 *                 site (syscall, object, offset) no earlier position of
 *                 this path had (FAULTS_CANCEL=all: every K; see
 *                 cancellations()). Each must: return from
 *                 the verb with the census' answer (the library is not a
 *                 cancellation point), then be cancelled at its own
 *                 pthread_testcancel(); the process lives, no fd leaks, and
 *                 a later attach and detach from another thread complete
 *                 without a futex wait (the IP join's lock is free: its
 *                 uncontended lock makes no syscall).
 *   small-stack   the verb called from a SIGUSR1 handler on an 8 KiB
 *                 sigaltstack above a guard page (common.h
 *                 altstack_handler, as ctest/vm/stack.c): the census'
 *                 answer, and the same watched syscalls (but for how long
 *                 the fabric join waited for the SA: same_calls()).
 * Lines: "inject SCENARIO WHAT: rc=R errno=E ok|FAIL why", then one
 * "faults: AXIS: N injected, N survived" per axis; exit 1 when one did not
 * survive. */
#define PROG_NAME "faults"
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include "common.h"
#include "allocfail.h"


/* The watched syscalls, by what rsverbs calls them; each with the errnos
 * that a real kernel can give it here. */
struct group {
	const char *name;
	int nr[2];
	int errs[4];
};
static const struct group groups[] = {
	{ "ioctl", { __NR_ioctl, -1 }, { EINTR, EIO, ENOMEM, 0 } },
	{ "write", { __NR_write, -1 }, { EINTR, EIO, EACCES, 0 } },
	{ "socket", { __NR_socket, -1 }, { EMFILE, ENFILE, ENOBUFS, 0 } },
	{ "setsockopt", { __NR_setsockopt, -1 }, { ENOBUFS, ENOMEM, EINTR, 0 } },
#ifdef __NR_open
	{ "openat", { __NR_openat, __NR_open }, { EMFILE, ENOENT, EACCES, EINTR } },
#else
	{ "openat", { __NR_openat, -1 }, { EMFILE, ENOENT, EACCES, EINTR } },
#endif
	{ "read", { __NR_read, -1 }, { EINTR, EIO, 0, 0 } },
#if defined(__NR_fstat) && defined(__NR_newfstatat)
	{ "fstat", { __NR_fstat, __NR_newfstatat }, { EBADF, EIO, 0, 0 } },
#elif defined(__NR_newfstatat)
	{ "fstat", { __NR_newfstatat, -1 }, { EBADF, EIO, 0, 0 } },
#else
	{ "fstat", { __NR_fstat, -1 }, { EBADF, EIO, 0, 0 } },
#endif
#ifdef __NR_readlink
	{ "readlink", { __NR_readlinkat, __NR_readlink }, { ENOENT, EACCES, 0, 0 } },
#else
	{ "readlink", { __NR_readlinkat, -1 }, { ENOENT, EACCES, 0, 0 } },
#endif
	/* The fabric join's (RSVERBS_MCAST_FABRICJOIN): the rdma_cm fd's mark
	 * and flags, and its bounded wait for the join's event. */
	{ "fcntl", { __NR_fcntl, -1 }, { EBADF, EINVAL, 0, 0 } },
	{ "ppoll", { __NR_ppoll, -1 }, { EINTR, ENOMEM, 0, 0 } },
};
#define NGROUPS (int)(sizeof(groups) / sizeof(groups[0]))
#define MAX_POS 64
/* The cancellation axis' census: at most this many syscalls in one verb. */
#define MAX_ALL 256

enum scenario { ATTACH_COLD, ATTACH_WARM, DETACH_WARM, QUERY_COLD, QUERY_WARM, QUERY_EMPTY, NSCEN };
static const char *scen_name[NSCEN] = { "attach-cold", "attach-warm", "detach-warm", "query-cold", "query-warm", "query-empty" };

/* How a child runs the verb. */
enum mode {
	NORMAL = 'n',  /* as a program does (the census; the syscall axis) */
	NO_FDS = 'f',  /* RLIMIT_NOFILE at the lowest free fd number: every
			* socket() and open() in the verb fails with EMFILE */
	ALLOC = 'a',   /* the N-th allocation of the library fails */
	SMALL = 's',   /* from a handler on an 8 KiB sigaltstack */
	CANCEL = 'c',  /* in a worker thread, cancelled at the N-th syscall */
};
/* The axes, in the order of their summary lines. */
enum axis { AX_SYSCALL, AX_ALLOC, AX_CANCEL, AX_SMALL, NAXES };
static const char *axis_name[NAXES] = { "syscall", "allocation", "cancellation", "small stack" };
static const char *axis_word[NAXES] = { "syscall", "allocation", "cancellation", "small-stack" };

/* What a child leaves for the parent, in memory shared across fork. */
struct shared {
	volatile int done;   /* the verb has returned */
	int rc, err;         /* its return value and errno */
	uint64_t data;       /* a query's entry (FNV-1a; 0 for attach and detach) */
	int ok;              /* the child's own checks held */
	char why[160];       /* the first that did not */
	int calls[NGROUPS];  /* census: watched calls during the verb */
	int kept;            /* sockets the library kept after the verb */
	int kept_max;        /* the census' `kept` (-1 in the census) */
	int grew;            /* 1: the pool may open one more socket (below) */
	int allocs;          /* the library's allocations during the verb */
	int alloc_failed;    /* of which were failed */
	/* CANCEL, from the child's main thread: */
	int positions;       /* the worker's syscalls during the verb */
	int pos_nr[MAX_ALL]; /* the number of each */
	uint64_t pos_ip[MAX_ALL]; /* its syscall instruction's address (seccomp_data) */
	uint64_t pos_site[MAX_ALL]; /* census: that address as (object, offset) */
	int cancel_nr;       /* the syscall pthread_cancel came in (-1: before the verb; -2: never) */
	int cancelled;       /* pthread_join gave PTHREAD_CANCELED */
	int later_rc;        /* the later attach and detach from another thread */
	int later_futex;     /* its futex calls (a lock left held makes one) */
	long later_us;       /* its time */
};
static struct shared *sh;
static int sh_fd; /* its memfd, which the exec'd child maps */
static const char *dev, *netdev;
static int injected[NAXES], survived[NAXES];
/* The census run of the current scenario. */
static int kept_max;
static struct { int rc, err; uint64_t data; } ref;

/* The fds the library may keep after a verb: the IP join's sockets and the
 * fabric join's rdma_cm fd (the program has none of either here but its own
 * socket, counted before and after alike). */
static int count_holders(void)
{
	return count_socket_fds() + count_fds_to("/dev/infiniband/rdma_cm");
}

static int group_of(int nr)
{
	for (int g = 0; g < NGROUPS; g++)
		if (groups[g].nr[0] == nr || groups[g].nr[1] == nr)
			return g;
	return -1;
}

/* What a filter reports: the watched groups, every syscall, or futex. */
enum watch { WATCHED, EVERY, FUTEX };

/* A filter on the calling thread (and the threads it creates) that reports
 * the syscalls `w` names to the listener it returns. */
static int notify_filter(enum watch w)
{
	struct sock_filter f[4 + 2 * 2 * NGROUPS + 1];
	int n = 0;
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_HERE, 1, 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
	if (w == FUTEX) {
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)__NR_futex, 0, 1);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF);
	}
	for (int g = 0; w == WATCHED && g < NGROUPS; g++)
		for (int k = 0; k < 2; k++) {
			if (groups[g].nr[k] < 0)
				continue;
			f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)groups[g].nr[k], 0, 1);
			f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF);
		}
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, w == EVERY ? SECCOMP_RET_USER_NOTIF : SECCOMP_RET_ALLOW);
	struct sock_fprog prog = { .len = (unsigned short)n, .filter = f };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -1;
	return (int)syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
}

static void send_fd(int sock, int fd)
{
	char c = 0, buf[CMSG_SPACE(sizeof(int))];
	struct iovec io = { &c, 1 };
	struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = buf, .msg_controllen = sizeof(buf) };
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	h->cmsg_level = SOL_SOCKET, h->cmsg_type = SCM_RIGHTS, h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &fd, sizeof(int));
	if (sendmsg(sock, &m, 0) != 1)
		_exit(3);
}

static int recv_fd(int sock)
{
	char c, buf[CMSG_SPACE(sizeof(int))];
	struct iovec io = { &c, 1 };
	struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = buf, .msg_controllen = sizeof(buf) };
	int fd = -1;
	if (recvmsg(sock, &m, 0) != 1)
		return -1;
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	if (h && h->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(h), sizeof(int));
	return fd;
}

static void child_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void child_fail(const char *fmt, ...)
{
	va_list ap;
	if (!sh->ok)
		return;
	sh->ok = 0;
	va_start(ap, fmt);
	vsnprintf(sh->why, sizeof(sh->why), fmt, ap);
	va_end(ap);
}

/* ::ffff:239.79.0.<c>: the program's own IP membership, and the verbs'
 * groups on RoCE. */
static void group(union ibv_gid *g, unsigned c)
{
	memset(g, 0, sizeof(*g));
	g->raw[10] = g->raw[11] = 0xff;
	g->raw[12] = 239, g->raw[13] = 79, g->raw[15] = (uint8_t)c;
}

/* The verbs' group <c> and LID: with FAULTS_IB=1 (an InfiniBand port,
 * ctest/vm/sibfaults.sh) 239.79.0.<c>'s MGID as rdma_cm makes it there,
 * ff12:4001:ffff::f4f:<c> (common.h ib_mgid_of_v4), and FAULTS_LID (0 is
 * EINVAL on InfiniBand: is_valid_mcast_lid, verbs.c); otherwise group()
 * and LID 0. */
static uint16_t lid;
static void verb_group(union ibv_gid *g, unsigned c)
{
	group(g, c);
	if (getenv("FAULTS_IB")) {
		union ibv_gid v4 = *g;
		ib_mgid_of_v4(g, &v4);
	}
	const char *l = getenv("FAULTS_LID");
	lid = l ? (uint16_t)strtoul(l, NULL, 0) : 0;
}

/* ---- the child: its scenario's objects, the verb ----------------------- */
static enum scenario cur;
static struct ibv_context *ctx;
static struct ibv_qp *qp;
static union ibv_gid scen_gid, later_gid;
static struct ibv_gid_entry entry;
/* Whether verb() opens the allocation window: not on the small stack,
 * where the interposer's own dladdr per allocation would be the test's
 * stack, not the library's. */
static int count_allocs = 1;

/* The scenario's verb, with the library's allocations counted (and the
 * N-th failed in ALLOC); its answer in sh. */
static void verb(void)
{
	int rc = 0;
	memset(&entry, 0, sizeof(entry));
	alloc_fail_armed = count_allocs;
	errno = SENTINEL;
	switch (cur) {
	case ATTACH_COLD:
	case ATTACH_WARM:
		rc = ibv_attach_mcast(qp, &scen_gid, lid);
		break;
	case DETACH_WARM:
		rc = ibv_detach_mcast(qp, &scen_gid, lid);
		break;
	case QUERY_COLD:
	case QUERY_WARM:
		rc = ibv_query_gid_ex(ctx, 1, 0, &entry, 0);
		break;
	case QUERY_EMPTY:
		rc = ibv_query_gid_ex(ctx, 1, 200, &entry, 0);
		break;
	default:
		break;
	}
	sh->err = errno;
	alloc_fail_armed = 0;
	sh->rc = rc;
	sh->data = cur >= QUERY_COLD ? fnv(&entry, sizeof(entry)) : 0;
	sh->allocs = alloc_fail.seen;
	sh->alloc_failed = alloc_fail.failed;
	sh->done = 1;
}

static void on_usr1(int sig)
{
	verb();
}

/* ---- the cancellation axis: a worker thread and its supervisor --------- */
/* The position to cancel at (0: none, the census; -1: before the verb). */
static int cancel_nth;
/* A filtered thread's listener, once it has one (-2: it has none), and
 * whether it is inside the call its supervisor counts. */
static volatile int worker_listener = -1, in_verb, later_listener = -1, in_later;

static void *worker(void *arg)
{
	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
	pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, NULL);
	if (cancel_nth < 0 && pthread_cancel(pthread_self()))
		return NULL;
	int l = notify_filter(EVERY);
	__atomic_store_n(&worker_listener, l < 0 ? -2 : l, __ATOMIC_SEQ_CST);
	if (l < 0)
		return NULL;
	__atomic_store_n(&in_verb, 1, __ATOMIC_SEQ_CST);
	verb();
	__atomic_store_n(&in_verb, 0, __ATOMIC_SEQ_CST);
	/* The program's next cancellation point. */
	pthread_testcancel();
	return NULL;
}

/* Another thread's attach and detach of another group, after the worker
 * has ended; its futex calls reported (the IP join's lock, uncontended,
 * makes none: src/ipjoin/mod.rs `lock`). */
static void *later(void *arg)
{
	int l = notify_filter(FUTEX);
	__atomic_store_n(&later_listener, l < 0 ? -2 : l, __ATOMIC_SEQ_CST);
	if (l < 0)
		return NULL;
	uint64_t t0 = now_ns();
	__atomic_store_n(&in_later, 1, __ATOMIC_SEQ_CST);
	int rc = ibv_attach_mcast(qp, &later_gid, lid);
	if (!rc)
		rc = ibv_detach_mcast(qp, &later_gid, lid);
	__atomic_store_n(&in_later, 0, __ATOMIC_SEQ_CST);
	sh->later_us = (long)((now_ns() - t0) / 1000);
	sh->later_rc = rc;
	return NULL;
}

/* Runs `fn` in a new thread whose filter reports to this one, and serves
 * its notifications until it has ended: each one while *window is set is
 * counted in *count (its number in nrs, up to MAX_ALL), and at the
 * `nth`-th the thread is cancelled before its call goes on. Returns what
 * the thread returned (PTHREAD_CANCELED), or (void *)-1. */
static void *supervise(void *(*fn)(void *), volatile int *listener, volatile int *window, int nth, int *count, int *nrs,
		       uint64_t *ips)
{
	pthread_t t;
	void *ret = (void *)-1;
	int l;
	if (pthread_create(&t, NULL, fn, NULL))
		return ret;
	for (int i = 0; (l = __atomic_load_n(listener, __ATOMIC_SEQ_CST)) == -1 && i < 10000; i++)
		usleep(1000);
	if (l < 0) {
		if (l == -1)
			_exit(3); /* no filter after 10 s */
		pthread_join(t, &ret);
		return ret;
	}
	struct seccomp_notif_sizes sz;
	if (syscall(__NR_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz))
		_exit(3);
	struct seccomp_notif *req = calloc(1, sz.seccomp_notif > sizeof(*req) ? sz.seccomp_notif : sizeof(*req));
	struct seccomp_notif_resp *resp = calloc(1, sz.seccomp_notif_resp > sizeof(*resp) ? sz.seccomp_notif_resp : sizeof(*resp));
	int joined = 0;
	for (int waited = 0; waited < 30000;) {
		struct pollfd p = { .fd = l, .events = POLLIN };
		int r = poll(&p, 1, 5);
		if (r == 0 || (r > 0 && !(p.revents & POLLIN))) {
			waited += 5;
			if (pthread_tryjoin_np(t, &ret) == 0) {
				joined = 1;
				break;
			}
			continue;
		}
		if (r < 0)
			break;
		memset(req, 0, sz.seccomp_notif);
		if (ioctl(l, SECCOMP_IOCTL_NOTIF_RECV, req))
			continue;
		memset(resp, 0, sz.seccomp_notif_resp);
		resp->id = req->id;
		resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
		if (__atomic_load_n(window, __ATOMIC_SEQ_CST)) {
			int k = ++*count;
			if (nrs && k <= MAX_ALL)
				nrs[k - 1] = req->data.nr;
			if (ips && k <= MAX_ALL)
				ips[k - 1] = req->data.instruction_pointer;
			if (k == nth) {
				sh->cancel_nr = req->data.nr;
				pthread_cancel(t);
			}
		}
		/* ENOENT when a signal took the thread out of its call. */
		ioctl(l, SECCOMP_IOCTL_NOTIF_SEND, resp);
	}
	free(req);
	free(resp);
	close(l);
	if (!joined)
		pthread_join(t, &ret);
	return ret;
}

static void *blocked(void *arg)
{
	char c;
	int *fd = arg;
	return read(*fd, &c, 1) == 1 ? NULL : arg;
}

/* A first pthread_cancel, of a thread blocked in read(2): glibc then loads
 * libgcc_s and installs its SIGCANCEL handler (nptl/pthread_cancel.c), and
 * the unwinder runs once, here, not while the worker waits in a syscall
 * (it may hold a lock the loader wants). */
static void cancel_warm(void)
{
	int p[2];
	pthread_t t;
	if (pipe(p) || pthread_create(&t, NULL, blocked, &p[0]) || pthread_cancel(t) || pthread_join(t, NULL))
		_exit(3);
	close(p[0]);
	close(p[1]);
}

/* The verb in a worker thread cancelled at position cancel_nth, then the
 * later attach from another thread. */
static void cancel_run(void)
{
	cancel_warm();
	sh->cancel_nr = cancel_nth < 0 ? -1 : -2;
	void *ret = supervise(worker, &worker_listener, &in_verb, cancel_nth, &sh->positions, sh->pos_nr, sh->pos_ip);
	sh->cancelled = ret == PTHREAD_CANCELED;
	/* The census: each syscall's site as its object's name and offset,
	 * the same in every exec'd child whatever the load address. */
	for (int k = 0; cancel_nth == 0 && k < sh->positions && k < MAX_ALL; k++) {
		Dl_info i;
		uint64_t ip = sh->pos_ip[k];
		if (dladdr((void *)(uintptr_t)ip, &i) && i.dli_fname && i.dli_fbase) {
			const char *b = strrchr(i.dli_fname, '/');
			b = b ? b + 1 : i.dli_fname;
			sh->pos_site[k] = (fnv(b, strlen(b)) & ~(uint64_t)0xffffffff) | ((ip - (uintptr_t)i.dli_fbase) & 0xffffffff);
		} else {
			sh->pos_site[k] = ip; /* unknown: never the same as another */
		}
	}
	verb_group(&later_gid, 2);
	sh->later_rc = -1;
	supervise(later, &later_listener, &in_later, 0, &sh->later_futex, NULL, NULL);
}

/* The child: setup, filter, the verb, checks. */
static void child(enum scenario s, enum mode mode, int sock)
{
	cur = s;
	ctx = open_by_name(dev);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 4, NULL, NULL, 0) : NULL;
	if (!cq)
		_exit(3);
	qp = new_qp_on(pd, cq, IBV_QPT_UD);
	union ibv_gid mine;
	struct ibv_gid_entry e;
	verb_group(&scen_gid, 1);
	group(&mine, 9);
	/* The program's own socket and membership. */
	int own = ip_join_mgid(mine.raw, if_nametoindex(netdev));
	if (own < 0)
		_exit(3);
	if (s == ATTACH_WARM && (ibv_attach_mcast(qp, &scen_gid, lid) || ibv_detach_mcast(qp, &scen_gid, lid)))
		_exit(3);
	if (s == DETACH_WARM && ibv_attach_mcast(qp, &scen_gid, lid))
		_exit(3);
	if (s == QUERY_WARM || s == QUERY_EMPTY)
		ibv_query_gid_ex(ctx, 1, 0, &e, 0);
	count_allocs = mode != SMALL;
	if (mode == SMALL && altstack_handler(SIGUSR1, on_usr1, 8192))
		_exit(3);
	int fds = count_fds(), socks = count_holders();
	if (mode == CANCEL) {
		/* The child supervises its own worker: nothing for the parent. */
		close(sock);
		cancel_run();
	} else {
		int listener = notify_filter(WATCHED);
		if (listener < 0)
			_exit(3);
		send_fd(sock, listener);
		close(listener);
		struct rlimit saved;
		getrlimit(RLIMIT_NOFILE, &saved);
		if (mode == NO_FDS) {
			int lowest = dup(0);
			close(lowest);
			struct rlimit none = { .rlim_cur = (rlim_t)lowest, .rlim_max = saved.rlim_max };
			setrlimit(RLIMIT_NOFILE, &none);
		}
		if (mode == SMALL)
			raise(SIGUSR1);
		else
			verb();
		if (mode == NO_FDS)
			setrlimit(RLIMIT_NOFILE, &saved);
	}
	/* From here on every watched call is let through. */
	int quiet = (sh->rc == EOPNOTSUPP || sh->rc == ENODATA) && sh->err == SENTINEL;
	if (sh->rc < 0 || (sh->rc > 0 && sh->err != sh->rc && !quiet))
		child_fail("rc %d with errno %d", sh->rc, sh->err);
	if (s == ATTACH_COLD || s == ATTACH_WARM)
		ibv_detach_mcast(qp, &scen_gid, lid);
	int fds2 = count_fds(), socks2 = count_holders();
	if (fds2 - socks2 != fds - socks)
		child_fail("fds other than sockets and rdma_cm fds: %d before, %d after", fds - socks, fds2 - socks2);
	sh->kept = socks2 - socks;
	/* A failure never leaves the library more sockets than the clean run
	 * did (the IP join's pool; none without it), but for one: ENOBUFS or
	 * ENOMEM from a join says the socket is full, and the pool opens the
	 * next one (ipjoin/sock.rs; ip_mc_join_group, ipv6_sock_mc_join); and
	 * a socket whose identity fstat cannot confirm is set aside, never
	 * closed (it may be the program's now: docs/security.md, promise 4);
	 * and the cancellation axis' later attach may open the one its group
	 * needs. */
	if (sh->kept_max >= 0 ? sh->kept > sh->kept_max + sh->grew : sh->kept > 2)
		child_fail("sockets: %d before, %d after (a clean run keeps %d)", socks, socks2, sh->kept_max);
	if (fcntl(own, F_GETFD) < 0)
		child_fail("the program's socket %d was closed", own);
	else if (ip_member(netdev, &mine) != 1)
		child_fail("the program's membership of 239.79.0.9 on %s is gone", netdev);
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	_exit(0);
}

/* Runs scenario `s` in a child as `mode` says, failing the `nth` call of
 * group `grp` with `err` (grp -1: none; nth 0 in NORMAL: the census), or
 * the nth allocation (ALLOC), or cancelling at the nth syscall (CANCEL).
 * Returns the wait status, or -1 when the child could not be run. */
static int run(enum scenario s, enum mode mode, int grp, int err, int nth)
{
	int sv[2];
	memset(sh, 0, sizeof(*sh));
	sh->kept_max = mode != NORMAL || nth ? kept_max : -1;
	/* fcntl too: an rdma_cm fd whose mark cannot be read is set aside as
	 * not ours (src/ipjoin/cm.rs), never closed, and the next join opens
	 * another. */
	sh->grew = mode == CANCEL || (grp >= 0 && ((!strcmp(groups[grp].name, "setsockopt") && (err == ENOBUFS || err == ENOMEM)) ||
		!strcmp(groups[grp].name, "fstat") || !strcmp(groups[grp].name, "fcntl")));
	sh->ok = 1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		die("socketpair: %s", strerror(errno));
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		/* A fresh process, as a program's own is: a forked child of a
		 * process with rsverbs loaded has given up the write() fast
		 * path (its atfork handler, docs/write-path.md), so the child
		 * execs this program again and runs the verb there. */
		char a[5][16];
		close(sv[0]);
		if (fcntl(sv[1], F_SETFD, 0))
			_exit(3);
		snprintf(a[0], sizeof(a[0]), "%d", (int)s);
		snprintf(a[1], sizeof(a[1]), "%c", (char)mode);
		snprintf(a[2], sizeof(a[2]), "%d", sv[1]);
		snprintf(a[3], sizeof(a[3]), "%d", sh_fd);
		snprintf(a[4], sizeof(a[4]), "%d", nth);
		execl("/proc/self/exe", PROG_NAME, "--child", a[0], a[1], a[2], a[3], dev, netdev, a[4], (char *)NULL);
		_exit(3);
	}
	close(sv[1]);
	if (mode == CANCEL) {
		close(sv[0]);
		return wait_bounded(pid, 30000);
	}
	int listener = recv_fd(sv[0]);
	close(sv[0]);
	int seen = 0, st = -1, reaped = 0;
	if (listener >= 0) {
		struct seccomp_notif_sizes sz;
		if (syscall(__NR_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz))
			die("SECCOMP_GET_NOTIF_SIZES: %s", strerror(errno));
		struct seccomp_notif *req = calloc(1, sz.seccomp_notif > sizeof(*req) ? sz.seccomp_notif : sizeof(*req));
		struct seccomp_notif_resp *resp = calloc(1, sz.seccomp_notif_resp > sizeof(*resp) ? sz.seccomp_notif_resp : sizeof(*resp));
		/* The listener reports POLLHUP only once the filter's last task is
		 * reaped (kernel/seccomp.c `seccomp_notify_poll`, 5.10 on): the
		 * child's exit is looked for between polls. At most 30 s. */
		for (int waited = 0; waited < 30000;) {
			struct pollfd p = { .fd = listener, .events = POLLIN };
			int r = poll(&p, 1, 50);
			if (r == 0) {
				waited += 50;
				pid_t w = waitpid(pid, &st, WNOHANG);
				if (w == pid || w < 0) {
					reaped = w == pid;
					break;
				}
				continue;
			}
			if (r < 0 || !(p.revents & POLLIN))
				break; /* the child is gone (POLLHUP) */
			memset(req, 0, sz.seccomp_notif);
			if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, req))
				continue; /* the child died meanwhile */
			memset(resp, 0, sz.seccomp_notif_resp);
			resp->id = req->id;
			resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
			int g = group_of(req->data.nr);
			if (!sh->done && g >= 0) {
				sh->calls[g]++;
				if (g == grp && ++seen == nth) {
					resp->flags = 0;
					resp->error = -err;
				}
			}
			ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, resp);
		}
		free(req);
		free(resp);
		close(listener);
	}
	if (!reaped)
		st = wait_bounded(pid, 30000);
	return listener < 0 ? -1 : st;
}

static const char *errname(int e)
{
	static char b[16];
	switch (e) {
	case EINTR: return "EINTR";
	case EIO: return "EIO";
	case ENOMEM: return "ENOMEM";
	case EACCES: return "EACCES";
	case EMFILE: return "EMFILE";
	case ENFILE: return "ENFILE";
	case ENOBUFS: return "ENOBUFS";
	case ENOENT: return "ENOENT";
	case EBADF: return "EBADF";
	default: snprintf(b, sizeof(b), "%d", e); return b;
	}
}

/* A syscall's name, for the census lines: the watched ones' and those a
 * verb's path may make besides; else its number. */
static const char *sysname(int nr)
{
	static char b[16];
	int g = group_of(nr);
	if (g >= 0)
		return groups[g].name;
	switch (nr) {
	case __NR_close: return "close";
	case __NR_futex: return "futex";
	case __NR_mmap: return "mmap";
	case __NR_munmap: return "munmap";
	case __NR_getsockopt: return "getsockopt";
	case __NR_getdents64: return "getdents64";
	case __NR_gettid: return "gettid";
	case __NR_getpid: return "getpid";
	case __NR_tgkill: return "tgkill";
	case __NR_clock_gettime: return "clock_gettime";
	case __NR_sendto: return "sendto";
	case __NR_recvfrom: return "recvfrom";
	case __NR_bind: return "bind";
#ifdef __NR_brk
	case __NR_brk: return "brk";
#endif
#ifdef __NR_pread64
	case __NR_pread64: return "pread64";
#endif
	default: snprintf(b, sizeof(b), "nr%d", nr); return b;
	}
}

/* One run of axis `a`, judged: it survived (no crash, the verb returned,
 * the child's checks held) and `why` is NULL (the axis' own checks). */
static void judge(enum axis a, enum scenario s, const char *what, int st, const char *why)
{
	char b[64];
	injected[a]++;
	int ok = st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && sh->done && sh->ok && !why;
	printf("inject %s %s: rc=%d errno=%d %s", scen_name[s], what, sh->rc, sh->err, ok ? "ok" : "FAIL");
	if (!ok)
		printf(" %s", st < 0 ? "could not run" : !WIFEXITED(st) ? status_str(st, b, sizeof(b)) :
			!sh->done ? (a == AX_CANCEL ? "the verb never returned: the thread was cancelled inside it" : "the verb never returned") :
			!sh->ok ? sh->why : why ? why : status_str(st, b, sizeof(b)));
	putchar('\n');
	survived[a] += ok;
}

/* Whether the run's answer is the census' (value, errno, a query's entry). */
static int same_answer(void)
{
	return sh->rc == ref.rc && sh->err == ref.err && sh->data == ref.data;
}

/* One syscall-axis run: the nth call of group g failed with err. */
static void inject(enum scenario s, int g, int err, int nth)
{
	char what[64];
	int st = run(s, NORMAL, g, err, nth);
	snprintf(what, sizeof(what), "%s %s %d", groups[g].name, errname(err), nth);
	judge(AX_SYSCALL, s, what, st, NULL);
}

/* The verb's kernel command failed with `err` in the warm state: the
 * verb's answer, as "rc errno" (the caller compares rsverbs' with
 * rdma-core's). */
static void command(enum scenario s, int err, int g)
{
	int st = run(s, NORMAL, g, err, 1);
	int ok = st >= 0 && WIFEXITED(st) && sh->done;
	printf("command %s %s: rc=%d errno=%d%s\n", scen_name[s], errname(err), sh->rc, sh->err, ok ? "" : " (did not run)");
}

/* The allocation axis: every allocation of the census failed in turn. */
static void allocations(enum scenario s, int allocs)
{
	for (int n = 1; n <= allocs; n++) {
		char what[64];
		int st = run(s, ALLOC, -1, 0, n);
		snprintf(what, sizeof(what), "allocation %d of %d", n, allocs);
		judge(AX_ALLOC, s, what, st, sh->alloc_failed != 1 ? "the allocation never came" :
			!same_answer() ? "the answer differs from the census'" : NULL);
	}
}

static int group_named(const char *name)
{
	for (int g = 0; g < NGROUPS; g++)
		if (!strcmp(groups[g].name, name))
			return g;
	return -1;
}

/* Whether `run`'s watched calls are the census' (`ref`) but for the fabric
 * join's wait, whose length is the network's: NULL, or why not in `why`.
 * The wait (src/ipjoin/mod.rs wait_unlocked, cm.rs next_wait) is ppoll in
 * slices of WAIT_SLICE_MS until the join's event is read or its 100 ms
 * are over, and each event read is one GET_EVENT command: fcntl
 * (F_GETSIG), fstat (the fd's identity) and write (cm.rs Channel::cmd), the
 * last one answered EAGAIN. On InfiniBand the event is the SA's answer,
 * which comes when it comes: one slice more or less, or the answer inside
 * the wait or after it, changes ppoll by any number and fcntl, fstat and
 * write by the same number each; every other call must be the census'. A
 * verb that waited in neither run must match exactly. */
static const char *same_calls(const int *ref_calls, const int *calls, char *why, size_t n)
{
	const int pp = group_named("ppoll"), fc = group_named("fcntl"), fs = group_named("fstat"), wr = group_named("write");
	int d[NGROUPS], off = 0, waited = ref_calls[pp] > 0 || calls[pp] > 0, bad = 0;
	for (int g = 0; g < NGROUPS; g++)
		d[g] = calls[g] - ref_calls[g];
	for (int g = 0; g < NGROUPS; g++) {
		int wait_call = waited && (g == pp || g == fc || g == fs || g == wr);
		bad |= d[g] && !wait_call;
	}
	bad |= waited && (d[fc] != d[fs] || d[fc] != d[wr]);
	if (!bad)
		return NULL;
	off = snprintf(why, n, "other syscalls than the census'%s:", waited ? " (the wait aside)" : "");
	for (int g = 0; g < NGROUPS && off > 0 && (size_t)off < n; g++)
		if (d[g])
			off += snprintf(why + off, n - (size_t)off, " %s %d->%d", groups[g].name, ref_calls[g], calls[g]);
	return why;
}

/* The small-stack axis: the verb from a handler on an 8 KiB sigaltstack. */
static void small_stack(enum scenario s, const int *calls)
{
	char why[160];
	int st = run(s, SMALL, -1, 0, 0);
	judge(AX_SMALL, s, "small-stack", st, !same_answer() ? "the answer differs from the census'" :
		same_calls(calls, sh->calls, why, sizeof(why)));
}

/* The call sites a cancellation was delivered at, over this path's
 * scenarios (one process runs one path): (syscall, object, offset). */
static struct { int nr; uint64_t site; } tried[6 * MAX_ALL];
static int ntried;

/* Whether position k (0-based) of the census is a call site not tried yet
 * (and now it is). */
static int new_site(int k)
{
	for (int i = 0; i < ntried; i++)
		if (tried[i].nr == sh->pos_nr[k] && tried[i].site == sh->pos_site[k])
			return 0;
	tried[ntried].nr = sh->pos_nr[k], tried[ntried].site = sh->pos_site[k];
	ntried++;
	return 1;
}

/* The cancellation axis: the census of the verb's syscalls in a worker
 * thread, then a cancellation before the verb and at each of them whose
 * call site (the syscall instruction's object and offset, and the syscall)
 * no earlier position of this path's scenarios had. Whether a pending
 * deferred cancellation acts in a syscall is decided by the code that
 * makes it: glibc's cancellable wrappers switch the thread to asynchronous
 * cancellation around their syscall instruction (glibc 2.36
 * sysdeps/unix/sysdep.h SYSCALL_CANCEL, nptl/cancellation.c
 * __pthread_enable_asynccancel); a raw syscall (src/sys.rs) does not. The
 * same site again runs the same code: a loop's 16 ioctls, the sysfs
 * reads, a later scenario's shared path. FAULTS_CANCEL=all tries every
 * position. */
static void cancellations(enum scenario s)
{
	char what[96], why[160];
	const char *all_env = getenv("FAULTS_CANCEL");
	int all = all_env && !strcmp(all_env, "all");
	int st = run(s, CANCEL, -1, 0, 0);
	int positions = sh->positions;
	if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) || !sh->ok || !sh->done || !same_answer())
		die("cancellation census of %s failed (status %d, rc %d errno %d): %s", scen_name[s], st, sh->rc, sh->err, sh->why);
	if (positions > MAX_ALL)
		die("cancellation census of %s: %d syscalls (more than %d)", scen_name[s], positions, MAX_ALL);
	int try[MAX_ALL + 1], sites = 0;
	for (int k = 0; k < positions; k++)
		sites += try[k + 1] = all || new_site(k);
	printf("census-cancel %s: %d syscalls, %d new call sites:", scen_name[s], positions, sites);
	for (int k = 0; k < positions; k++)
		printf(" %s%s", sysname(sh->pos_nr[k]), try[k + 1] ? "" : "=");
	printf(" rc=%d\n", sh->rc);
	for (int k = -1; k <= positions; k++) {
		if (k == 0 || (k > 0 && !try[k]))
			continue;
		st = run(s, CANCEL, -1, 0, k);
		const char *bad = NULL;
		if (!sh->cancelled)
			bad = "the thread was not cancelled at its next cancellation point";
		else if (!same_answer())
			bad = "the answer differs from the census'";
		else if (sh->later_rc)
			bad = "the later attach and detach from another thread failed";
		else if (sh->later_futex) {
			snprintf(why, sizeof(why), "a lock was left held: the later attach from another thread waited (%d futex calls, %ld us)",
				 sh->later_futex, sh->later_us);
			bad = why;
		}
		if (k < 0)
			snprintf(what, sizeof(what), "cancel before the verb (later attach %ld us)", sh->later_us);
		else
			snprintf(what, sizeof(what), "cancel at syscall %d of %d (%s; later attach %ld us)", k, positions,
				 sh->cancel_nr >= 0 ? sysname(sh->cancel_nr) : "never reached", sh->later_us);
		judge(AX_CANCEL, s, what, st, bad);
	}
}

/* Whether FAULTS_AXES (default: all) names axis a. */
static int wanted(enum axis a)
{
	const char *v = getenv("FAULTS_AXES");
	return !v || !*v || strstr(v, axis_word[a]) != NULL;
}

int main(int argc, char **argv)
{
	/* faults --child SCENARIO MODE SOCK SHM DEV NETDEV NTH: run() exec'd us. */
	if (argc == 9 && !strcmp(argv[1], "--child")) {
		enum mode mode = (enum mode)argv[3][0];
		int nth = atoi(argv[8]);
		sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED, atoi(argv[5]), 0);
		if (sh == MAP_FAILED)
			_exit(3);
		dev = argv[6], netdev = argv[7];
		if (mode == ALLOC)
			alloc_fail.nth = nth;
		cancel_nth = mode == CANCEL ? nth : 0;
		child((enum scenario)atoi(argv[2]), mode, atoi(argv[4]));
	}
	if (argc < 3)
		die("usage: faults DEV NETDEV | faults --command DEV NETDEV");
	int only_command = !strcmp(argv[1], "--command");
	dev = argv[1 + only_command];
	netdev = argv[2 + only_command];
	sh_fd = memfd_create("faults", 0);
	if (sh_fd < 0 || ftruncate(sh_fd, sizeof(*sh)))
		die("memfd: %s", strerror(errno));
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED, sh_fd, 0);
	if (sh == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* The command rows: ioctl for rdma-core everywhere and for rsverbs'
	 * query; write for rsverbs' attach and detach (its fast path, taken
	 * in the exec'd child). */
	const char *lib = getenv("FAULTS_LIB"); /* "rsverbs" or "rdma-core" */
	int rsv = lib && !strcmp(lib, "rsverbs");
	static const enum scenario cmd_scen[] = { ATTACH_WARM, DETACH_WARM, QUERY_WARM };
	static const int cmd_errs[] = { EIO, ENOMEM, EINTR, EFAULT };
	for (unsigned i = 0; i < sizeof(cmd_scen) / sizeof(cmd_scen[0]); i++)
		for (unsigned k = 0; k < sizeof(cmd_errs) / sizeof(cmd_errs[0]); k++)
			command(cmd_scen[i], cmd_errs[k], rsv && cmd_scen[i] != QUERY_WARM ? 1 : 0);
	if (only_command)
		return 0;
	for (int s = 0; s < NSCEN; s++) {
		int st = run((enum scenario)s, NORMAL, -1, 0, 0);
		if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) || !sh->ok)
			die("census of %s failed (status %d): %s", scen_name[s], st, sh->why);
		int calls[NGROUPS];
		memcpy(calls, sh->calls, sizeof(calls));
		kept_max = sh->kept;
		ref.rc = sh->rc, ref.err = sh->err, ref.data = sh->data;
		int allocs = sh->allocs;
		printf("census %s:", scen_name[s]);
		for (int g = 0; g < NGROUPS; g++)
			printf(" %s=%d", groups[g].name, calls[g]);
		printf(" allocations=%d rc=%d\n", allocs, sh->rc);
		/* Every position, every errno (a census past MAX_POS calls of
		 * one syscall is itself a failure: the verb is not at its floor). */
		for (int g = 0; wanted(AX_SYSCALL) && g < NGROUPS; g++) {
			if (calls[g] > MAX_POS)
				die("census of %s: %d %s calls (more than %d)", scen_name[s], calls[g], groups[g].name, MAX_POS);
			for (int n = 1; n <= calls[g]; n++)
				for (int k = 0; k < 4 && groups[g].errs[k]; k++)
					inject((enum scenario)s, g, groups[g].errs[k], n);
		}
		if (wanted(AX_SYSCALL)) {
			/* RLIMIT_NOFILE exhausted for real, nothing injected. */
			st = run((enum scenario)s, NO_FDS, -1, 0, 0);
			judge(AX_SYSCALL, (enum scenario)s, "RLIMIT_NOFILE exhausted", st, NULL);
		}
		if (wanted(AX_ALLOC))
			allocations((enum scenario)s, allocs);
		if (wanted(AX_SMALL))
			small_stack((enum scenario)s, calls);
		if (wanted(AX_CANCEL))
			cancellations((enum scenario)s);
	}
	int all_ok = 1;
	for (int a = 0; a < NAXES; a++) {
		if (!wanted((enum axis)a))
			continue;
		printf("faults: %s: %d injected, %d survived\n", axis_name[a], injected[a], survived[a]);
		all_ok &= injected[a] == survived[a];
	}
	return all_ok ? 0 : 1;
}
