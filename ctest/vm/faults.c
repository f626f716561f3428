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
 * Lines: "inject SCENARIO SYSCALL ERRNO N: rc=R errno=E ok|FAIL why", then
 * "faults: N injected, N survived"; exit 1 when one did not survive. */
#define PROG_NAME "faults"
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include "common.h"


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

enum scenario { ATTACH_COLD, ATTACH_WARM, DETACH_WARM, QUERY_COLD, QUERY_WARM, QUERY_EMPTY, NSCEN };
static const char *scen_name[NSCEN] = { "attach-cold", "attach-warm", "detach-warm", "query-cold", "query-warm", "query-empty" };

/* What a child leaves for the parent, in memory shared across fork. */
struct shared {
	volatile int done;   /* the verb has returned */
	int rc, err;         /* its return value and errno */
	int ok;              /* the child's own checks held */
	char why[160];       /* the first that did not */
	int calls[NGROUPS];  /* census: watched calls during the verb */
	int kept;            /* sockets the library kept after the verb */
	int kept_max;        /* the census' `kept` (-1 in the census) */
	int grew;            /* 1: the pool may open one more socket (below) */
};
static struct shared *sh;
static int sh_fd; /* its memfd, which the exec'd child maps */
static const char *dev, *netdev;
/* The child runs the verb with no fd left (RLIMIT_NOFILE at the lowest
 * free fd number): every socket() and open() in it fails with EMFILE. */
static int no_fds;
static int injected, survived;
/* The sockets the census run of the current scenario kept. */
static int kept_max;

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

/* A filter that reports every watched syscall to the listener it returns. */
static int notify_filter(void)
{
	struct sock_filter f[4 + 2 * 2 * NGROUPS + 1];
	int n = 0;
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_HERE, 1, 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
	for (int g = 0; g < NGROUPS; g++)
		for (int k = 0; k < 2; k++) {
			if (groups[g].nr[k] < 0)
				continue;
			f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)groups[g].nr[k], 0, 1);
			f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF);
		}
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
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

/* ::ffff:239.79.0.<c> */
static void group(union ibv_gid *g, unsigned c)
{
	memset(g, 0, sizeof(*g));
	g->raw[10] = g->raw[11] = 0xff;
	g->raw[12] = 239, g->raw[13] = 79, g->raw[15] = (uint8_t)c;
}

/* The child: setup, filter, the verb, checks. */
static void child(enum scenario s, int sock)
{
	struct ibv_context *ctx = open_by_name(dev);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 4, NULL, NULL, 0) : NULL;
	if (!cq)
		_exit(3);
	struct ibv_qp *qp = new_qp_on(pd, cq, IBV_QPT_UD);
	union ibv_gid g, mine;
	struct ibv_gid_entry e;
	group(&g, 1);
	group(&mine, 9);
	/* The program's own socket and membership. */
	int own = ip_join_mgid(mine.raw, if_nametoindex(netdev));
	if (own < 0)
		_exit(3);
	if (s == ATTACH_WARM && (ibv_attach_mcast(qp, &g, 0) || ibv_detach_mcast(qp, &g, 0)))
		_exit(3);
	if (s == DETACH_WARM && ibv_attach_mcast(qp, &g, 0))
		_exit(3);
	if (s == QUERY_WARM || s == QUERY_EMPTY)
		ibv_query_gid_ex(ctx, 1, 0, &e, 0);
	int fds = count_fds(), socks = count_holders();
	int listener = notify_filter();
	if (listener < 0)
		_exit(3);
	send_fd(sock, listener);
	close(listener);
	struct rlimit saved;
	getrlimit(RLIMIT_NOFILE, &saved);
	if (no_fds) {
		int lowest = dup(0);
		close(lowest);
		struct rlimit none = { .rlim_cur = (rlim_t)lowest, .rlim_max = saved.rlim_max };
		setrlimit(RLIMIT_NOFILE, &none);
	}
	errno = SENTINEL;
	switch (s) {
	case ATTACH_COLD:
	case ATTACH_WARM:
		sh->rc = ibv_attach_mcast(qp, &g, 0);
		break;
	case DETACH_WARM:
		sh->rc = ibv_detach_mcast(qp, &g, 0);
		break;
	case QUERY_COLD:
	case QUERY_WARM:
		sh->rc = ibv_query_gid_ex(ctx, 1, 0, &e, 0);
		break;
	case QUERY_EMPTY:
		sh->rc = ibv_query_gid_ex(ctx, 1, 200, &e, 0);
		break;
	default:
		break;
	}
	sh->err = errno;
	sh->done = 1;
	if (no_fds)
		setrlimit(RLIMIT_NOFILE, &saved);
	/* From here on every watched call is let through. */
	int quiet = (sh->rc == EOPNOTSUPP || sh->rc == ENODATA) && sh->err == SENTINEL;
	if (sh->rc < 0 || (sh->rc > 0 && sh->err != sh->rc && !quiet))
		child_fail("rc %d with errno %d", sh->rc, sh->err);
	if (s == ATTACH_COLD || s == ATTACH_WARM)
		ibv_detach_mcast(qp, &g, 0);
	int fds2 = count_fds(), socks2 = count_holders();
	if (fds2 - socks2 != fds - socks)
		child_fail("fds other than sockets and rdma_cm fds: %d before, %d after", fds - socks, fds2 - socks2);
	sh->kept = socks2 - socks;
	/* A failure never leaves the library more sockets than the clean run
	 * did (the IP join's pool; none without it), but for one: ENOBUFS or
	 * ENOMEM from a join says the socket is full, and the pool opens the
	 * next one (ipjoin/sock.rs; ip_mc_join_group, ipv6_sock_mc_join); and
	 * a socket whose identity fstat cannot confirm is set aside, never
	 * closed (it may be the program's now: docs/security.md, promise 4). */
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

/* Runs scenario `s` in a child, failing the `nth` call of group `grp` with
 * `err` (nth 0: the census, nothing failed). Returns the wait status, or
 * -1 when the child could not be run. */
static int run(enum scenario s, int grp, int err, int nth)
{
	int sv[2];
	memset(sh, 0, sizeof(*sh));
	sh->kept_max = nth ? kept_max : -1;
	/* fcntl too: an rdma_cm fd whose mark cannot be read is set aside as
	 * not ours (src/ipjoin/cm.rs), never closed, and the next join opens
	 * another. */
	sh->grew = grp >= 0 && ((!strcmp(groups[grp].name, "setsockopt") && (err == ENOBUFS || err == ENOMEM)) ||
		!strcmp(groups[grp].name, "fstat") || !strcmp(groups[grp].name, "fcntl"));
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
		char a[4][16];
		close(sv[0]);
		if (fcntl(sv[1], F_SETFD, 0))
			_exit(3);
		snprintf(a[0], sizeof(a[0]), "%d", (int)s);
		snprintf(a[1], sizeof(a[1]), "%d", no_fds);
		snprintf(a[2], sizeof(a[2]), "%d", sv[1]);
		snprintf(a[3], sizeof(a[3]), "%d", sh_fd);
		execl("/proc/self/exe", PROG_NAME, "--child", a[0], a[1], a[2], a[3], dev, netdev, (char *)NULL);
		_exit(3);
	}
	close(sv[1]);
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

/* One injected run, judged. */
static void inject(enum scenario s, int g, int err, int nth)
{
	int st = run(s, g, err, nth);
	char b[64];
	injected++;
	int ok = st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && sh->done && sh->ok;
	printf("inject %s %s %s %d: rc=%d errno=%d %s", scen_name[s], groups[g].name, errname(err), nth, sh->rc, sh->err, ok ? "ok" : "FAIL");
	if (!ok)
		printf(" %s", st < 0 ? "could not run" : !WIFEXITED(st) ? status_str(st, b, sizeof(b)) : !sh->done ? "the verb never returned" : sh->why);
	putchar('\n');
	survived += ok;
}

/* The verb's kernel command failed with `err` in the warm state: the
 * verb's answer, as "rc errno" (the caller compares rsverbs' with
 * rdma-core's). */
static void command(enum scenario s, int err, int g)
{
	int st = run(s, g, err, 1);
	int ok = st >= 0 && WIFEXITED(st) && sh->done;
	printf("command %s %s: rc=%d errno=%d%s\n", scen_name[s], errname(err), sh->rc, sh->err, ok ? "" : " (did not run)");
}

int main(int argc, char **argv)
{
	/* faults --child SCENARIO NO_FDS SOCK SHM DEV NETDEV: run() exec'd us. */
	if (argc == 8 && !strcmp(argv[1], "--child")) {
		no_fds = atoi(argv[3]);
		sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED, atoi(argv[5]), 0);
		if (sh == MAP_FAILED)
			_exit(3);
		dev = argv[6], netdev = argv[7];
		child((enum scenario)atoi(argv[2]), atoi(argv[4]));
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
		int st = run((enum scenario)s, -1, 0, 0);
		if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) || !sh->ok)
			die("census of %s failed (status %d): %s", scen_name[s], st, sh->why);
		int calls[NGROUPS];
		memcpy(calls, sh->calls, sizeof(calls));
		kept_max = sh->kept;
		printf("census %s:", scen_name[s]);
		for (int g = 0; g < NGROUPS; g++)
			printf(" %s=%d", groups[g].name, calls[g]);
		printf(" rc=%d\n", sh->rc);
		/* Every position, every errno (a census past MAX_POS calls of
		 * one syscall is itself a failure: the verb is not at its floor). */
		for (int g = 0; g < NGROUPS; g++) {
			if (calls[g] > MAX_POS)
				die("census of %s: %d %s calls (more than %d)", scen_name[s], calls[g], groups[g].name, MAX_POS);
			for (int n = 1; n <= calls[g]; n++)
				for (int k = 0; k < 4 && groups[g].errs[k]; k++)
					inject((enum scenario)s, g, groups[g].errs[k], n);
		}
		/* RLIMIT_NOFILE exhausted for real, nothing injected. */
		no_fds = 1;
		st = run((enum scenario)s, -1, 0, 0);
		no_fds = 0;
		injected++;
		int ok = st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && sh->done && sh->ok;
		printf("inject %s RLIMIT_NOFILE exhausted: rc=%d errno=%d %s %s\n", scen_name[s], sh->rc, sh->err, ok ? "ok" : "FAIL", ok ? "" : sh->why);
		survived += ok;
	}
	printf("faults: %d injected, %d survived\n", injected, survived);
	return injected == survived ? 0 : 1;
}
