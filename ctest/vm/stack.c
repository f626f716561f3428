/* stack: every export's stack use, and every verb called from a signal
 * handler on an 8 KiB alternate stack (docs/security.md, the stack budget;
 * ctest/vm/stack.sh).
 *
 *   stack DEVICE measure BUDGET   each call's peak stack, checked
 *   stack DEVICE normal           each call's answer, called normally
 *   stack DEVICE signal           the same calls, each from a SIGUSR1
 *                                 handler on an 8 KiB sigaltstack
 *
 * Every call runs on a fresh context (ibv_open_device, a PD, a CQ and a UD
 * QP made by rdma-core first), so its first call discovers the context's
 * route, the deepest path; then once more on the same context (the
 * steady state). The exports are the five verbs and, where the program
 * has them (dlsym: the relinked or preloaded library), the rsverbs_* C
 * exports of include/rsverbs.h.
 *
 * measure: the call runs on a makecontext stack of 64 KiB filled with a
 * pattern, whose lower end is a PROT_NONE guard page; the bytes touched
 * are the distance from its top to the lowest byte that no longer holds
 * the pattern. An empty function's figure (the trampoline's) is taken
 * away: "NAME first=N steady=M" are the library's bytes (rsverbs', and
 * rdma-core's under it, if any), and a call above BUDGET is a FAIL line.
 * With RSVERBS_TRACE naming a file, the trace file's fd is closed before
 * each first call, so that the call's line opens the file again by its
 * path (the sink's re-open: the deepest trace path).
 *
 * Failure paths (docs/security.md, the stack budget), by the environment: STACK_PENDING_RUN=1
 * makes three ENODATA GID queries (indexes 9 to 11) before each first call, so that the
 * trace's collapsed run is pending when the call's first line (and the
 * file's re-open, as root) comes; STACK_CRED_CHANGE=1 joins a group as
 * root before everything (the fabric join's rdma_cm fd opened) and drops
 * one capability from the bounding set (PR_CAPBSET_DROP: new credentials,
 * still root) before each call of attach, detach, join and leave, so that
 * each meets EACCES on that fd (ucma_write, ib_safe_file_access) and
 * replaces it. stack.sh runs the fabric join's failed open apart, in a
 * mount namespace where /dev/infiniband/rdma_cm is not the device.
 *
 * The groups and the LID, by the environment (default: RoCE's): STACK_GROUPS
 * "HEX HEX" the two groups (default ::ffff:239.10.10.10 and ff0e::a0a0a, the
 * IP join's two families; labelled v4 and v6, otherwise mgid1 and mgid2),
 * STACK_CRED_GROUP the first join's group (default ::ffff:239.10.10.11),
 * STACK_LID the LID of every attach and detach (default 0: RoCE's; on
 * InfiniBand 0 is EINVAL, the kernel's is_valid_mcast_lid, verbs.c, wants
 * 0xc000..0xfffe; ctest/vm/sibfaults.sh passes InfiniBand MGIDs and 0xc001).
 *
 * signal: the handler runs on an 8 KiB (8,192-byte) alternate stack
 * mmap'ed above a PROT_NONE guard page: a verb that overflows it dies with
 * SIGSEGV. Its answers must equal the normal run's (stack.sh compares). */
#define PROG_NAME "stack"
#include "common.h"
#include "rsverbs.h"
#include <arpa/inet.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <ucontext.h>

#define PATTERN 0xa5
#define REGION (64 * 1024)
#define ALTSTACK 8192

enum op {
	QUERY_GID, QUERY_GID_EX, QUERY_GID_EX_EMPTY, QUERY_GID_TABLE, ATTACH, DETACH,
	R_QUERY_GID, R_QUERY_GID_EX, R_QUERY_GID_TABLE, R_ATTACH, R_DETACH, R_ATTACHMENTS,
	R_INDEX_RDMA_CM, R_INDEX_PERFTEST, R_INDEX_FIND, R_MCAST_JOIN, R_MCAST_LEAVE, N_OPS
};
static const char *const names[N_OPS] = {
	"ibv_query_gid", "_ibv_query_gid_ex", "_ibv_query_gid_ex(empty)", "_ibv_query_gid_table",
	"ibv_attach_mcast", "ibv_detach_mcast",
	"rsverbs_query_gid", "rsverbs_query_gid_ex", "rsverbs_query_gid_table", "rsverbs_attach_mcast",
	"rsverbs_detach_mcast", "rsverbs_mcast_attachments", "rsverbs_gid_index_rdma_cm",
	"rsverbs_gid_index_perftest", "rsverbs_gid_index_find", "rsverbs_mcast_join", "rsverbs_mcast_leave",
};

/* The five verbs, called through pointers that dlvsym resolved at the
 * start, with the versions a program links (IBVERBS_1.1, IBVERBS_1.11):
 * a call through the program's own PLT would be bound lazily at its first
 * call, and ld.so's resolver (which saves the whole xsave area: about
 * 2 KB here) would count as the library's stack. */
static struct {
	__typeof__(ibv_query_gid) *query_gid;
	__typeof__(_ibv_query_gid_ex) *query_gid_ex;
	__typeof__(_ibv_query_gid_table) *query_gid_table;
	__typeof__(ibv_attach_mcast) *attach;
	__typeof__(ibv_detach_mcast) *detach;
} v;

/* The rsverbs_* exports, when the program has them. */
static struct {
	__typeof__(rsverbs_query_gid) *query_gid;
	__typeof__(rsverbs_query_gid_ex) *query_gid_ex;
	__typeof__(rsverbs_query_gid_table) *query_gid_table;
	__typeof__(rsverbs_attach_mcast) *attach;
	__typeof__(rsverbs_detach_mcast) *detach;
	__typeof__(rsverbs_mcast_attachments) *attachments;
	__typeof__(rsverbs_gid_index_rdma_cm) *rdma_cm;
	__typeof__(rsverbs_gid_index_perftest) *perftest;
	__typeof__(rsverbs_gid_index_find) *find;
	__typeof__(rsverbs_mcast_join) *join;
	__typeof__(rsverbs_mcast_leave) *leave;
} rs;

/* The call in progress and its answer (set by run_op, read after it). */
static struct ibv_context *ctx;
static struct ibv_qp *qp;
static union ibv_gid group;
static uint16_t lid; /* STACK_LID */
static enum op cur;
static char answer[512];

/* The call's answer: static, so that the measured frame is the call's
 * alone (the formatting is done after it, off the measured stack). */
static long ret_v;
static int err_v;
static union ibv_gid gid_v, gids_v[4];
static struct ibv_gid_entry entry_v, table_v[16];
static uint16_t lids_v[4];
static struct sockaddr_in sin_v = { .sin_family = AF_INET };

static void run_op(void)
{
	int err = 0;
	long ret = 0;
	switch (cur) {
	case QUERY_GID: ret = SENTINEL_CALL(&err, v.query_gid(ctx, 1, 0, &gid_v)); break;
	case R_QUERY_GID: ret = SENTINEL_CALL(&err, rs.query_gid(ctx, 1, 0, &gid_v)); break;
	case QUERY_GID_EX: ret = SENTINEL_CALL(&err, v.query_gid_ex(ctx, 1, 1, &entry_v, 0, sizeof(entry_v))); break;
	case QUERY_GID_EX_EMPTY: ret = SENTINEL_CALL(&err, v.query_gid_ex(ctx, 1, 9, &entry_v, 0, sizeof(entry_v))); break;
	case R_QUERY_GID_EX: ret = SENTINEL_CALL(&err, rs.query_gid_ex(ctx, 1, 1, &entry_v, 0, sizeof(entry_v))); break;
	case QUERY_GID_TABLE: ret = SENTINEL_CALL(&err, v.query_gid_table(ctx, table_v, 16, 0, sizeof(table_v[0]))); break;
	case R_QUERY_GID_TABLE: ret = SENTINEL_CALL(&err, rs.query_gid_table(ctx, table_v, 16, 0, sizeof(table_v[0]))); break;
	case ATTACH: ret = SENTINEL_CALL(&err, v.attach(qp, &group, lid)); break;
	case DETACH: ret = SENTINEL_CALL(&err, v.detach(qp, &group, lid)); break;
	case R_ATTACH: ret = SENTINEL_CALL(&err, rs.attach(qp, &group, lid)); break;
	case R_DETACH: ret = SENTINEL_CALL(&err, rs.detach(qp, &group, lid)); break;
	case R_ATTACHMENTS: ret = SENTINEL_CALL(&err, rs.attachments(qp, gids_v, lids_v, 4)); break;
	case R_INDEX_RDMA_CM: ret = SENTINEL_CALL(&err, rs.rdma_cm(ctx, 1, (struct sockaddr *)&sin_v, 0)); break;
	case R_INDEX_PERFTEST: ret = SENTINEL_CALL(&err, rs.perftest(ctx, 1)); break;
	case R_INDEX_FIND: ret = SENTINEL_CALL(&err, rs.find(ctx, 1, IBV_GID_TYPE_ROCE_V2, AF_INET, 0, 0xffff, 0)); break;
	case R_MCAST_JOIN: ret = SENTINEL_CALL(&err, rs.join(ctx, 1, &group, RSVERBS_MCAST_FULLMEMBER)); break;
	case R_MCAST_LEAVE: ret = SENTINEL_CALL(&err, rs.leave(ctx, 1, &group, RSVERBS_MCAST_FULLMEMBER)); break;
	case N_OPS: break;
	}
	ret_v = ret;
	err_v = err;
}

/* Clears the answer's buffers before a call. */
static void clear_answer(void)
{
	memset(&gid_v, 0, sizeof(gid_v));
	memset(&entry_v, 0, sizeof(entry_v));
	memset(table_v, 0, sizeof(table_v));
	memset(gids_v, 0, sizeof(gids_v));
	memset(lids_v, 0, sizeof(lids_v));
	inet_pton(AF_INET, "192.0.2.1", &sin_v.sin_addr);
}

/* The answer of the call just made, as a line's tail. */
static void format_answer(void)
{
	uint64_t h = 0;
	switch (cur) {
	case QUERY_GID: case R_QUERY_GID: h = fnv(&gid_v, sizeof(gid_v)); break;
	case QUERY_GID_EX: case QUERY_GID_EX_EMPTY: case R_QUERY_GID_EX: h = fnv(&entry_v, sizeof(entry_v)); break;
	case QUERY_GID_TABLE: case R_QUERY_GID_TABLE: h = fnv(table_v, sizeof(table_v)); break;
	case R_ATTACHMENTS: h = fnv(gids_v, sizeof(gids_v)) ^ fnv(lids_v, sizeof(lids_v)); break;
	default: break;
	}
	snprintf(answer, sizeof(answer), "ret=%ld errno=%d data=%016llx", ret_v, err_v, (unsigned long long)h);
}

static int available(enum op o)
{
	switch (o) {
	case R_QUERY_GID: return rs.query_gid != NULL;
	case R_QUERY_GID_EX: return rs.query_gid_ex != NULL;
	case R_QUERY_GID_TABLE: return rs.query_gid_table != NULL;
	case R_ATTACH: return rs.attach != NULL;
	case R_DETACH: return rs.detach != NULL;
	case R_ATTACHMENTS: return rs.attachments != NULL && rs.attach != NULL;
	case R_INDEX_RDMA_CM: return rs.rdma_cm != NULL;
	case R_INDEX_PERFTEST: return rs.perftest != NULL;
	case R_INDEX_FIND: return rs.find != NULL;
	case R_MCAST_JOIN: case R_MCAST_LEAVE: return rs.join != NULL && rs.leave != NULL;
	default: return 1;
	}
}

/* ---- measure: a pattern-filled stack above a guard page ---------------- */
static char *region; /* guard page, then REGION bytes of stack */
static long page;
static ucontext_t main_uc, run_uc;
static void (*body)(void);

static void trampoline(void)
{
	body();
}

static void nothing(void)
{
}

/* The bytes of the stack that `f` touched. */
static size_t touched(void (*f)(void))
{
	char *lo = region + page;
	memset(lo, PATTERN, REGION);
	if (getcontext(&run_uc))
		die("getcontext: %s", strerror(errno));
	run_uc.uc_stack.ss_sp = lo;
	run_uc.uc_stack.ss_size = REGION;
	run_uc.uc_link = &main_uc;
	makecontext(&run_uc, trampoline, 0);
	body = f;
	if (swapcontext(&main_uc, &run_uc))
		die("swapcontext: %s", strerror(errno));
	size_t i = 0;
	while (i < REGION && (unsigned char)lo[i] == PATTERN)
		i++;
	/* STACK_DUMP=NAME (a diagnosis, not a test): the words of NAME's
	 * deepest stack that point into a loaded object's text, deepest first,
	 * as the object and the offset in its file (addr2line -f -e FILE). */
	const char *dump = getenv("STACK_DUMP");
	if (dump && f == run_op && !strcmp(dump, names[cur]))
		for (size_t w = i & ~(size_t)7; w + 8 <= REGION; w += 8) {
			void *a;
			Dl_info info;
			memcpy(&a, lo + w, sizeof(a));
			if (dladdr(a, &info) && info.dli_fname)
				printf("frame at -%zu: %#lx %s %s\n", REGION - w,
				       (unsigned long)((char *)a - (char *)info.dli_fbase), info.dli_fname, info.dli_sname ? info.dli_sname : "?");
		}
	return REGION - i;
}

/* The trace file's fd (RSVERBS_TRACE=PATH or hints:PATH), closed so that
 * the next line opens it again by its path. */
static void close_trace_fd(void)
{
	const char *t = getenv("RSVERBS_TRACE");
	char link[64], target[PATH_MAX];
	if (!t)
		return;
	if (!strncmp(t, "hints:", 6))
		t += 6;
	if (t[0] != '/')
		return;
	for (int fd = 3; fd < 1024; fd++) {
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		ssize_t n = readlink(link, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = 0;
		if (!strcmp(target, t))
			close(fd);
	}
}

/* ---- signal: the call from a handler on a small alternate stack -------- */
static void handler(int sig)
{
	run_op();
}

static void on_altstack(void)
{
	if (raise(SIGUSR1))
		die("raise: %s", strerror(errno));
}

static void setup_altstack(void)
{
	if (altstack_handler(SIGUSR1, handler, ALTSTACK))
		die("sigaltstack: %s", strerror(errno));
}

/* One call of the current op, as the mode says; its figure in measure. */
static size_t call(int mode, int first)
{
	size_t n = 0;
	clear_answer();
	if (mode == 'm') {
		if (first)
			close_trace_fd();
		n = touched(run_op);
	} else if (mode == 's') {
		on_altstack();
	} else {
		run_op();
	}
	format_answer();
	return n;
}

/* STACK_CRED_CHANGE: one more capability out of the bounding set (the
 * credentials change; root keeps what the test needs: CAP_SETPCAP,
 * CAP_SYS_ADMIN, CAP_NET_*, CAP_DAC_*). */
static void drop_one_cap(void)
{
	static const int caps[] = { 22, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40,
				    25, 18, 17, 16, 15, 11, 10, 9 };
	static unsigned next;
	if (next >= sizeof(caps) / sizeof(caps[0]))
		die("no capability left to drop");
	if (prctl(PR_CAPBSET_DROP, caps[next], 0, 0, 0))
		die("PR_CAPBSET_DROP %d: %s", caps[next], strerror(errno));
	next++;
}

int main(int argc, char **argv)
{
	if (argc < 3 || (strcmp(argv[2], "measure") && strcmp(argv[2], "normal") && strcmp(argv[2], "signal")) ||
	    (!strcmp(argv[2], "measure") && argc < 4)) {
		fprintf(stderr, "usage: stack DEVICE measure BUDGET | normal | signal\n");
		return 2;
	}
	int mode = argv[2][0], failed = 0;
	/* errno's first use binds the program's PLT slot of __errno_location
	 * (lazily, by ld.so's resolver): here, not in the first measured call. */
	errno = 0;
	long budget = argc > 3 ? atol(argv[3]) : 0;
	page = sysconf(_SC_PAGESIZE);
	v.query_gid = dlvsym(RTLD_DEFAULT, "ibv_query_gid", "IBVERBS_1.1");
	v.query_gid_ex = dlvsym(RTLD_DEFAULT, "_ibv_query_gid_ex", "IBVERBS_1.11");
	v.query_gid_table = dlvsym(RTLD_DEFAULT, "_ibv_query_gid_table", "IBVERBS_1.11");
	v.attach = dlvsym(RTLD_DEFAULT, "ibv_attach_mcast", "IBVERBS_1.1");
	v.detach = dlvsym(RTLD_DEFAULT, "ibv_detach_mcast", "IBVERBS_1.1");
	if (!v.query_gid || !v.query_gid_ex || !v.query_gid_table || !v.attach || !v.detach)
		die("dlvsym: a verb is missing");
	rs.query_gid = dlsym(RTLD_DEFAULT, "rsverbs_query_gid");
	rs.query_gid_ex = dlsym(RTLD_DEFAULT, "rsverbs_query_gid_ex");
	rs.query_gid_table = dlsym(RTLD_DEFAULT, "rsverbs_query_gid_table");
	rs.attach = dlsym(RTLD_DEFAULT, "rsverbs_attach_mcast");
	rs.detach = dlsym(RTLD_DEFAULT, "rsverbs_detach_mcast");
	rs.attachments = dlsym(RTLD_DEFAULT, "rsverbs_mcast_attachments");
	rs.rdma_cm = dlsym(RTLD_DEFAULT, "rsverbs_gid_index_rdma_cm");
	rs.perftest = dlsym(RTLD_DEFAULT, "rsverbs_gid_index_perftest");
	rs.find = dlsym(RTLD_DEFAULT, "rsverbs_gid_index_find");
	rs.join = dlsym(RTLD_DEFAULT, "rsverbs_mcast_join");
	rs.leave = dlsym(RTLD_DEFAULT, "rsverbs_mcast_leave");
	print_served_by(stderr);
	size_t base = 0;
	if (mode == 'm') {
		region = mmap(NULL, page + REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (region == MAP_FAILED || mprotect(region, page, PROT_NONE))
			die("stack region: %s", strerror(errno));
		base = touched(nothing);
		printf("trampoline %zu\n", base);
	} else if (mode == 's') {
		setup_altstack();
	}
	int pending_run = getenv("STACK_PENDING_RUN") != NULL, cred_change = getenv("STACK_CRED_CHANGE") != NULL;
	if (cred_change) {
		/* The rdma_cm fd opened (and a membership held) with root's
		 * first credentials; ctx0 stays open. */
		union ibv_gid x;
		struct ibv_context *ctx0 = open_by_name(argv[1]);
		const char *cg = getenv("STACK_CRED_GROUP");
		gid_from_hex(&x, cg ? cg : "00000000000000000000ffffef0a0a0b");
		if (!rs.join || rs.join(ctx0, 1, &x, RSVERBS_MCAST_FULLMEMBER))
			die("STACK_CRED_CHANGE: the first join: %s", strerror(errno));
	}
	/* An IPv4-mapped group and an IPv6 one: the IP join's two families
	 * (or STACK_GROUPS': two hex MGIDs, space-separated). */
	char groups[2][33] = { "00000000000000000000ffffef0a0a0a", "ff0e00000000000000000000000a0a0a" };
	const char *labels[2] = { "v4", "v6" }, *sg = getenv("STACK_GROUPS");
	if (sg) {
		if (sscanf(sg, "%32s %32s", groups[0], groups[1]) != 2 || strlen(groups[0]) != 32 || strlen(groups[1]) != 32)
			die("STACK_GROUPS: want two 32-digit hex MGIDs, got '%s'", sg);
		labels[0] = "mgid1", labels[1] = "mgid2";
	}
	const char *sl = getenv("STACK_LID");
	lid = sl ? (uint16_t)strtoul(sl, NULL, 0) : 0;
	for (enum op o = 0; o < N_OPS; o++) {
		if (!available(o))
			continue;
		for (int g = 0; g < 2; g++) {
			/* Only attach, detach, join and leave differ by group. */
			int by_group = o == ATTACH || o == DETACH || o == R_ATTACH || o == R_DETACH || o == R_MCAST_JOIN ||
				       o == R_MCAST_LEAVE;
			if (g && !by_group)
				break;
			gid_from_hex(&group, groups[g]);
			ctx = open_by_name(argv[1]);
			struct ibv_pd *pd = ibv_alloc_pd(ctx);
			struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
			if (!pd || !cq)
				die("pd/cq");
			qp = new_qp_on(pd, cq, IBV_QPT_UD);
			size_t peak[2];
			char first_answer[512];
			for (int round = 0; round < 2; round++) {
				/* Detach (and the attachments' list) on a group attached
				 * first, in the steady round; attach's group detached after. */
				if (round == 1 && (o == DETACH || o == R_DETACH || o == R_ATTACHMENTS))
					if (ibv_attach_mcast(qp, &group, lid))
						die("attach before %s: %s", names[o], strerror(errno));
				/* A leave of a membership joined first, in both rounds
				 * (STACK_JOIN_MAY_FAIL: the fabric join's open fails; the
				 * leave then answers EADDRNOTAVAIL). */
				if (o == R_MCAST_LEAVE && rs.join(ctx, 1, &group, RSVERBS_MCAST_FULLMEMBER) &&
				    !getenv("STACK_JOIN_MAY_FAIL"))
					die("join before %s: %s", names[o], strerror(errno));
				cur = o;
				if (pending_run && round == 0)
					for (int k = 9; k < 12; k++)
						v.query_gid_ex(ctx, 1, k, &entry_v, 0, sizeof(entry_v));
				if (cred_change && by_group && g == 0)
					drop_one_cap();
				peak[round] = call(mode, round == 0);
				if (peak[round] >= base)
					peak[round] -= base;
				if (round == 0)
					memcpy(first_answer, answer, sizeof(answer));
				if (o == ATTACH || o == R_ATTACH || (round == 1 && o == R_ATTACHMENTS))
					ibv_detach_mcast(qp, &group, lid);
				if (o == R_MCAST_JOIN)
					rs.leave(ctx, 1, &group, RSVERBS_MCAST_FULLMEMBER);
			}
			const char *label = g ? labels[1] : by_group ? labels[0] : "-";
			if (mode == 'm') {
				size_t p = peak[0] > peak[1] ? peak[0] : peak[1];
				printf("%s %s first=%zu steady=%zu\n", names[o], label, peak[0], peak[1]);
				if (budget && p > (size_t)budget) {
					printf("OVER %s %s %zu > %ld\n", names[o], label, p, budget);
					failed = 1;
				}
			} else {
				printf("%s %s first %s\n%s %s steady %s\n", names[o], label, first_answer, names[o], label, answer);
			}
			if (ibv_destroy_qp(qp) || ibv_destroy_cq(cq) || ibv_dealloc_pd(pd) || ibv_close_device(ctx))
				die("teardown");
		}
	}
	fflush(stdout);
	return failed;
}
