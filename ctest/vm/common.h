/* Helpers shared by the guest test programs, ctest/vm/NAME.c. Header-only:
 * ctest/build.sh compiles each C file of ctest/vm on its own (with
 * -D_GNU_SOURCE), so everything here is static. */
#ifndef RSVERBS_CTEST_COMMON_H
#define RSVERBS_CTEST_COMMON_H

#include <dirent.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdarg.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RDMA_VERBS_IOCTL_REQ 0xc0181b01u
#define SENTINEL 4242

/* Evaluates `call` (a verb call, or any expression) with errno seeded with
 * SENTINEL, so that "errno untouched" is visible, and stores the errno it
 * leaves in *(errp) right after it; the value is the call's. For the
 * programs' result lines: a call's return value and errno. */
#define SENTINEL_CALL(errp, call)                                              \
	__extension__({                                                        \
		errno = SENTINEL;                                              \
		__typeof__(call) sentinel_ret_ = (call);                       \
		*(errp) = errno;                                               \
		sentinel_ret_;                                                 \
	})

/* A test program's fatal error (a setup error, not a test's failure):
 * "PROG_NAME: error: MESSAGE" on stderr, and exit status 2. For the programs
 * that define PROG_NAME before including this header. */
#ifdef PROG_NAME
__attribute__((noreturn, format(printf, 1, 2))) static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs(PROG_NAME ": error: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}
#endif

/* An option of parse_opts, as written on the command line: "-d", "--seed",
 * "fallback". With `str` (the string), `num` (its atoi) or `lnum` (its
 * atol) it takes the argument after it as its value; with `on` or `off` it
 * takes none and stores 1 or 0. */
struct opt {
	const char *name;
	const char **str;
	int *num;
	long *lnum;
	int *on, *off;
};

/* Walks argv[i..argc) in order. An argument that names one of `opts` (a
 * table ended by a NULL name) is taken, with the next argument, whatever it
 * is, as its value where it takes one; as the last argument such an option
 * is not recognised. Any other argument goes to `rest` with whether it is
 * the last one (no `rest`: ignored); a non-zero return from `rest` ends the
 * walk and is parse_opts' value. Returns 0 otherwise. */
static inline int parse_opts(int argc, char **argv, int i, const struct opt *opts,
			     int (*rest)(const char *arg, int last))
{
	for (; i < argc; i++) {
		const struct opt *o = opts;
		while (o->name && (strcmp(argv[i], o->name) || (!o->on && !o->off && i + 1 == argc)))
			o++;
		if (!o->name) {
			int r = rest ? rest(argv[i], i + 1 == argc) : 0;
			if (r)
				return r;
		} else if (o->on) {
			*o->on = 1;
		} else if (o->off) {
			*o->off = 0;
		} else if (o->str) {
			*o->str = argv[++i];
		} else if (o->num) {
			*o->num = atoi(argv[++i]);
		} else {
			*o->lnum = atol(argv[++i]);
		}
	}
	return 0;
}

static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* FNV-1a over a buffer. */
static inline uint64_t fnv(const void *p, size_t n)
{
	const unsigned char *c = p;
	uint64_t h = 0xcbf29ce484222325ull;
	while (n--)
		h = (h ^ *c++) * 0x100000001b3ull;
	return h;
}

static inline void gid_from_hex(union ibv_gid *g, const char *hex32)
{
	for (int i = 0; i < 16; i++) {
		unsigned v;
		sscanf(hex32 + 2 * i, "%2x", &v);
		g->raw[i] = v;
	}
}

/* A multicast GID ff0e::<a>:<b>:<c>. */
static inline void mgid(union ibv_gid *g, unsigned a, unsigned b, unsigned c)
{
	memset(g, 0, sizeof(*g));
	g->raw[0] = 0xff;
	g->raw[1] = 0x0e;
	g->raw[10] = a >> 8, g->raw[11] = a;
	g->raw[12] = b >> 8, g->raw[13] = b;
	g->raw[14] = c >> 8, g->raw[15] = c;
}

/* Which object defines `fn` (dladdr), e.g. "librsverbs.so.1". */
static inline const char *owner(void *fn)
{
	Dl_info info;
	const char *s;
	if (!dladdr(fn, &info) || !info.dli_fname)
		return "?";
	s = strrchr(info.dli_fname, '/');
	return s ? s + 1 : info.dli_fname;
}

static inline void print_served_by(FILE *f)
{
	fprintf(f, "served-by ibv_attach_mcast=%s ibv_detach_mcast=%s _ibv_query_gid_ex=%s ibv_query_gid=%s _ibv_query_gid_table=%s\n",
		owner((void *)ibv_attach_mcast), owner((void *)ibv_detach_mcast),
		owner((void *)_ibv_query_gid_ex), owner((void *)ibv_query_gid),
		owner((void *)_ibv_query_gid_table));
}

/* This architecture's seccomp_data.arch (linux/audit.h). */
#if defined(__x86_64__)
#define AUDIT_ARCH_HERE AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define AUDIT_ARCH_HERE AUDIT_ARCH_AARCH64
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define AUDIT_ARCH_HERE AUDIT_ARCH_PPC64LE
#elif defined(__s390x__)
#define AUDIT_ARCH_HERE AUDIT_ARCH_S390X
#else
#error "common.h: add this architecture's AUDIT_ARCH_"
#endif
/* The low 32 bits of the u64 seccomp_data.args[n], for a BPF_W load: the
 * second word on a big-endian machine (linux/seccomp.h struct seccomp_data). */
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define SECCOMP_ARG_LO(n) (offsetof(struct seccomp_data, args[n]) + 4)
#else
#define SECCOMP_ARG_LO(n) offsetof(struct seccomp_data, args[n])
#endif

/* Installs a seccomp filter on the calling thread (and its children):
 * ioctl(_, RDMA_VERBS_IOCTL, _) fails with `ioctl_err` (0: allowed), and
 * write(`fd`, ...) fails with `write_err` (0 or fd < 0: allowed). ENOTTY /
 * EPROTONOSUPPORT model old kernels; EIO models a disassociated device
 * (hot-unplug), which the rxe driver of Linux 6.1 cannot produce. */
static inline int install_filter(unsigned ioctl_err, int fd, unsigned write_err)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_HERE, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_ioctl, 0, 4),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SECCOMP_ARG_LO(1)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, RDMA_VERBS_IOCTL_REQ, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, ioctl_err ? SECCOMP_RET_ERRNO | (ioctl_err & SECCOMP_RET_DATA) : SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		/* nr is still in the accumulator */
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_write, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SECCOMP_ARG_LO(0)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)fd, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, (write_err && fd >= 0) ? SECCOMP_RET_ERRNO | (write_err & SECCOMP_RET_DATA) : SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
		perror("seccomp");
		return -1;
	}
	return 0;
}

/* Installs `handler` for `sig` on an alternate signal stack of `size`
 * bytes, mmap'ed above a PROT_NONE guard page: a handler that overflows it
 * dies with SIGSEGV instead of writing below it (SA_ONSTACK). Returns 0,
 * or -1 with errno set. For a verb called from a signal handler on a small
 * stack (SIGSTKSZ: 8 KiB; ctest/vm/stack.c, ctest/vm/faults.c). */
static inline int altstack_handler(int sig, void (*handler)(int), size_t size)
{
	long page = sysconf(_SC_PAGESIZE);
	char *m = mmap(NULL, (size_t)page + size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return -1;
	if (mprotect(m, (size_t)page, PROT_NONE))
		return -1;
	stack_t ss = { .ss_sp = m + page, .ss_size = size };
	struct sigaction sa = { .sa_handler = handler, .sa_flags = SA_ONSTACK };
	sigemptyset(&sa.sa_mask);
	return sigaltstack(&ss, NULL) || sigaction(sig, &sa, NULL) ? -1 : 0;
}

/* Waits for `pid` at most `ms` milliseconds (bounded polling). Returns the
 * wait status, or -1 on timeout (the child is then killed and reaped). */
static inline int wait_bounded(pid_t pid, int ms)
{
	int st;
	for (int i = 0; i < ms; i += 10) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return st;
		if (r < 0)
			return -1;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

/* "exit=N", "signal=N" or "timeout" for a wait status. */
static inline const char *status_str(int st, char *buf, size_t n)
{
	if (st == -1)
		snprintf(buf, n, "timeout");
	else if (WIFSIGNALED(st))
		snprintf(buf, n, "signal=%d", WTERMSIG(st));
	else
		snprintf(buf, n, "exit=%d", WEXITSTATUS(st));
	return buf;
}

/* Runs a command with a time bound, output to stderr; returns its status. */
static inline int run_cmd(int ms, char *const argv[])
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(2, 1);
		execvp(argv[0], argv);
		_exit(127);
	}
	return wait_bounded(pid, ms);
}

static inline long rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			v = strtol(line + 6, NULL, 10);
	fclose(f);
	return v;
}

/* Open fds of this process (the directory's own fd excluded). */
static inline int count_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;
}

/* Open fds of this process whose link starts with `prefix` ("socket:" for
 * sockets, "/dev/infiniband/rdma_cm"). */
static inline int count_fds_to(const char *prefix)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	char path[300], target[64];
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		ssize_t len;
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		len = readlink(path, target, sizeof(target) - 1);
		if (len > 0 && (target[len] = 0, !strncmp(target, prefix, strlen(prefix))))
			n++;
	}
	closedir(d);
	return n;
}

/* The process's socket fds (the IP join's holders). */
static inline int count_socket_fds(void)
{
	return count_fds_to("socket:");
}

/* Whether `netdev` has joined the IP group of MGID `g` (v4-mapped:
 * /proc/net/igmp, a device line then its groups as %08X of the __be32,
 * kernel igmp.c igmp_mc_seq_show; else /proc/net/igmp6, one line per group,
 * mcast.c igmp6_mc_seq_show). -1 when the file cannot be read. */
/* Whether MGID `g` is an IPv4-mapped address (::ffff:a.b.c.d). */
static inline int is_v4mapped(const uint8_t *g)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	return !memcmp(g, mapped, 12);
}

/* The MGID rdma_cm makes of the IPv4 group of v4-mapped `v4` on an
 * InfiniBand port, for a UDP ID (cma.c cma_set_mgid: ip_ib_mc_map, the RDMA
 * CM signature 0x01, the IPoIB broadcast group's scope 2 and P_Key 0xffff,
 * the group's low 28 bits): ff12:4001:ffff::G. The SA takes no ::ffff: MGID. */
static inline void ib_mgid_of_v4(union ibv_gid *out, const union ibv_gid *v4)
{
	static const uint8_t prefix[6] = { 0xff, 0x12, 0x40, 0x01, 0xff, 0xff };
	memset(out, 0, sizeof(*out));
	memcpy(out->raw, prefix, sizeof(prefix));
	memcpy(out->raw + 12, v4->raw + 12, 4);
	out->raw[12] &= 0x0f;
}

/* Joins the IP group of MGID `g` on `ifindex` (v4-mapped: IP_ADD_MEMBERSHIP,
 * else IPV6_ADD_MEMBERSHIP), as a program must for RoCE multicast to reach
 * it from another host (docs/ipjoin.md). Returns the CLOEXEC socket that
 * holds the membership, or -1 with errno set. */
static inline int ip_join_mgid(const uint8_t g[16], unsigned ifindex)
{
	int v4 = is_v4mapped(g), fd = socket(v4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0), r;
	if (fd < 0)
		return -1;
	if (v4) {
		struct ip_mreqn m = { .imr_ifindex = (int)ifindex };
		memcpy(&m.imr_multiaddr, g + 12, 4);
		r = setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof(m));
	} else {
		struct ipv6_mreq m = { .ipv6mr_interface = ifindex };
		memcpy(&m.ipv6mr_multiaddr, g, 16);
		r = setsockopt(fd, IPPROTO_IPV6, IPV6_ADD_MEMBERSHIP, &m, sizeof(m));
	}
	if (r) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static inline int ip_member(const char *netdev, const union ibv_gid *g)
{
	char line[512], want[40];
	int v4 = is_v4mapped(g->raw), in_dev = 0, found = 0;
	FILE *f = fopen(v4 ? "/proc/net/igmp" : "/proc/net/igmp6", "r");
	if (!f)
		return -1;
	if (v4) {
		uint32_t be;
		memcpy(&be, g->raw + 12, 4);
		snprintf(want, sizeof(want), "%08X", be);
	} else {
		for (int i = 0; i < 16; i++)
			snprintf(want + 2 * i, 3, "%02x", g->raw[i]);
	}
	while (!found && fgets(line, sizeof(line), f)) {
		char a[64], b[64];
		if (v4 && line[0] != '\t' && line[0] != ' ')
			in_dev = sscanf(line, "%63s %63s", a, b) == 2 && !strcmp(b, netdev);
		else if (v4)
			found = in_dev && sscanf(line, "%63s", a) == 1 && !strcmp(a, want);
		else
			found = sscanf(line, "%*s %63s %63s", a, b) == 2 && !strcmp(a, netdev) && !strcmp(b, want);
	}
	fclose(f);
	return found;
}

/* Opens the RDMA device called `name`; exits with status 2 if there is none. */
static inline struct ibv_context *open_by_name(const char *name)
{
	struct ibv_context *ctx = NULL;
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	for (int i = 0; list && i < n && !ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	if (!ctx) {
		fprintf(stderr, "cannot open RDMA device %s: %s\n", name, strerror(errno));
		exit(2);
	}
	return ctx;
}

/* A QP of type `t` with one WR and one SGE each way on `cq`, or NULL with
 * errno (EOPNOTSUPP: the provider has no QP of that type). */
static inline struct ibv_qp *try_qp_on(struct ibv_pd *pd, struct ibv_cq *cq, enum ibv_qp_type t)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = t,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	return ibv_create_qp(pd, &a);
}

/* try_qp_on's QP; exits with status 2 if it cannot be created. */
static inline struct ibv_qp *new_qp_on(struct ibv_pd *pd, struct ibv_cq *cq, enum ibv_qp_type t)
{
	struct ibv_qp *qp = try_qp_on(pd, cq, t);
	if (!qp) {
		fprintf(stderr, "ibv_create_qp(%d): %s\n", t, strerror(errno));
		exit(2);
	}
	return qp;
}

/* A marker in an strace log: write(-1, "MARK <label>", ...) fails with
 * EBADF and does nothing else (bench/strace_regions.awk reads it). */
static inline void strace_mark(const char *label)
{
	char buf[64];
	int n = snprintf(buf, sizeof(buf), "MARK %s", label);
	if (write(-1, buf, (size_t)n) < 0)
		errno = 0;
}

#endif
