/* Bad input, fork/exec and stale-cache cases for ibv_attach_mcast,
 * ibv_detach_mcast and _ibv_query_gid_ex, on one RDMA device.
 *
 *   robust [-d DEV] [fallback]       all sections (ctest/vm/robust.sh)
 *   robust exec-child FD DEV         (internal) the exec'ed half of "exec"
 *
 * ctest/vm/robust.sh runs it as rdma-core (BIN/robust), relinked
 * (BIN/robust.rsv) and with LD_PRELOAD=librsverbs.so.1, plain and under
 * BIN/noioctl ENOTTY ("fallback": the write() and sysfs routes). Output
 * lines, one per call, with errno seeded with a sentinel before each call:
 *   R ...  must be identical in the three modes;
 *   N ...  NULL arguments, run in a forked child: rsverbs must answer
 *          ret=22 errno=22; rdma-core's answer (a crash) is recorded;
 *   D ...  a documented difference (cmd_fd < 0: rsverbs EOPNOTSUPP like
 *          rdma-core's dummy op, the rxe provider EBADF): recorded.
 * stderr carries "served-by" and "reuse" lines. */
#include "common.h"
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

static const char *mode_fallback;
static char self_path[4096]; /* for exec: /proc/self/exe is valgrind's tool under memcheck */
/* The parent's QP in fork_cases, kept reachable in the forked child (which
 * must not destroy it) for leak checkers; not static, so not optimised out. */
struct ibv_qp *robust_fork_qp;

static struct ibv_device *find_dev(struct ibv_device **list, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!name || !strcmp(ibv_get_device_name(list[i]), name))
			return list[i];
	return NULL;
}

static void mc_line(const char *tag, const char *name, struct ibv_qp *qp, int attach, const union ibv_gid *g,
		    uint16_t lid)
{
	int e, r = SENTINEL_CALL(&e, attach ? ibv_attach_mcast(qp, g, lid) : ibv_detach_mcast(qp, g, lid));
	printf("%s %s ret=%d errno=%d\n", tag, name, r, e);
}

/* One _ibv_query_gid_ex into a buffer pre-filled with 0xa5; prints the
 * result, errno, the first min(size, 64) bytes and a hash of the first
 * `size` bytes (when the buffer holds them). `at` overrides the buffer. */
static void q_line(const char *tag, const char *name, struct ibv_context *ctx, uint32_t port, uint32_t idx,
		   uint32_t flags, size_t size, void *at)
{
	size_t alloc = size <= 70000 ? size + 64 : 64;
	unsigned char *buf = malloc(alloc);
	int ret, err;

	memset(buf, 0xa5, alloc);
	ret = SENTINEL_CALL(&err, _ibv_query_gid_ex(ctx, port, idx, at ? at : (struct ibv_gid_entry *)buf, flags, size));
	printf("%s %s port=%u idx=%u flags=%#x size=%zu ret=%d errno=%d ", tag, name, port, idx, flags, size, ret,
	       err);
	for (size_t i = 0; i < size && i < 64 && i < alloc; i++)
		printf("%02x", buf[i]);
	if (size <= alloc)
		printf(" fnv=%016llx", (unsigned long long)fnv(buf, size));
	printf("\n");
	free(buf);
}

struct objs {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
};

static int open_objs(struct objs *o, struct ibv_device *dev)
{
	o->ctx = ibv_open_device(dev);
	if (!o->ctx)
		return -1;
	o->pd = ibv_alloc_pd(o->ctx);
	o->cq = ibv_create_cq(o->ctx, 16, NULL, NULL, 0);
	return o->pd && o->cq ? 0 : -1;
}

static void close_objs(struct objs *o)
{
	ibv_destroy_cq(o->cq);
	ibv_dealloc_pd(o->pd);
	ibv_close_device(o->ctx);
}

static struct ibv_qp *new_qp(struct objs *o, enum ibv_qp_type t)
{
	return new_qp_on(o->pd, o->cq, t);
}

/* ---- NULL arguments: each call in a forked child ---------------------- */

enum null_case { N_ATTACH_QP, N_DETACH_QP, N_ATTACH_QPCTX, N_DETACH_QPCTX, N_ATTACH_GID, N_DETACH_GID,
		 N_QUERY_CTX, N_QUERY_ENTRY, N_QUERY_ENTRY_SIZE0, N_QUERY_INLINE_ENTRY, N_QUERY_DEVICE, N_COUNT };
static const char *null_names[] = { "attach-qp-null", "detach-qp-null", "attach-qp-context-null",
				    "detach-qp-context-null", "attach-gid-null", "detach-gid-null",
				    "query-context-null", "query-entry-null", "query-entry-null-size0",
				    "query-inline-entry-null", "query-context-device-null" };

static int null_call(enum null_case c, struct objs *o, struct ibv_qp *qp)
{
	union ibv_gid g;
	struct ibv_gid_entry e;
	struct ibv_qp noctx;
	mgid(&g, 0xdead, 0, 1);
	memset(&noctx, 0, sizeof(noctx));
	noctx.handle = qp->handle;
	noctx.qp_type = IBV_QPT_UD;
	switch (c) {
	case N_ATTACH_QP: return ibv_attach_mcast(NULL, &g, 0);
	case N_DETACH_QP: return ibv_detach_mcast(NULL, &g, 0);
	case N_ATTACH_QPCTX: return ibv_attach_mcast(&noctx, &g, 0);
	case N_DETACH_QPCTX: return ibv_detach_mcast(&noctx, &g, 0);
	case N_ATTACH_GID: return ibv_attach_mcast(qp, NULL, 0);
	case N_DETACH_GID: return ibv_detach_mcast(qp, NULL, 0);
	case N_QUERY_CTX: return _ibv_query_gid_ex(NULL, 1, 0, &e, 0, sizeof(e));
	case N_QUERY_ENTRY: return _ibv_query_gid_ex(o->ctx, 1, 0, NULL, 0, sizeof(e));
	case N_QUERY_ENTRY_SIZE0: return _ibv_query_gid_ex(o->ctx, 1, 0, NULL, 0, 0);
	case N_QUERY_INLINE_ENTRY: return ibv_query_gid_ex(o->ctx, 1, 0, NULL, 0);
	case N_QUERY_DEVICE: {
		/* On the real context, for one call (never a copy: rdma-core
		 * finds its private data before the public struct). */
		struct ibv_device *saved = o->ctx->device;
		o->ctx->device = NULL;
		int r = _ibv_query_gid_ex(o->ctx, 1, 0, &e, 0, sizeof(e));
		o->ctx->device = saved;
		return r;
	}
	default: return -1;
	}
}

static void null_cases(struct objs *o, struct ibv_qp *qp)
{
	for (int c = 0; c < N_COUNT; c++) {
		char st[32];
		int fds[2];
		/* ctx->device is read only by the sysfs fallback: on the ioctl
		 * route both libraries succeed, so that case is compared. */
		const char *tag = (c == N_QUERY_DEVICE && !mode_fallback) ? "R" : "N";
		if (pipe(fds))
			exit(2);
		fflush(NULL);
		pid_t pid = fork();
		if (pid == 0) {
			int r[2];
			r[0] = SENTINEL_CALL(&r[1], null_call(c, o, qp));
			if (write(fds[1], r, sizeof(r)) != sizeof(r))
				_exit(3);
			_exit(0);
		}
		close(fds[1]);
		int st_ = wait_bounded(pid, 20000), r[2];
		if (st_ != -1 && WIFEXITED(st_) && WEXITSTATUS(st_) == 0 && read(fds[0], r, sizeof(r)) == sizeof(r))
			printf("%s %s ret=%d errno=%d\n", tag, null_names[c], r[0], r[1]);
		else
			printf("%s %s %s\n", tag, null_names[c], status_str(st_, st, sizeof(st)));
		close(fds[0]);
	}
}

/* ---- cmd_fd swaps ------------------------------------------------------ */

static void fd_cases(struct objs *o, struct ibv_qp *qp)
{
	union ibv_gid g;
	int saved = o->ctx->cmd_fd;
	mgid(&g, 0xfd, 0, 1);

	/* A number that was a valid fd a moment ago. */
	int closed = open("/dev/null", O_RDONLY);
	close(closed);
	o->ctx->cmd_fd = closed;
	mc_line("R", "attach-closed-fd", qp, 1, &g, 0);
	mc_line("R", "detach-closed-fd", qp, 0, &g, 0);
	q_line("R", "query-closed-fd", o->ctx, 1, 0, 0, 32, NULL);
	q_line("R", "query-closed-fd-size65536", o->ctx, 1, 0, 0, 65536, NULL);
	o->ctx->cmd_fd = INT_MAX;
	mc_line("R", "attach-fd-intmax", qp, 1, &g, 0);
	q_line("R", "query-fd-intmax", o->ctx, 1, 0, 0, 32, NULL);

	/* No uverbs fd at all (mlx5 VFIO contexts): rsverbs answers like
	 * rdma-core's dummy op; rxe's op would make the syscall on fd -1. */
	o->ctx->cmd_fd = -1;
	mc_line("D", "attach-cmd-fd-minus1", qp, 1, &g, 0);
	mc_line("D", "detach-cmd-fd-minus1", qp, 0, &g, 0);
	o->ctx->cmd_fd = -2;
	mc_line("D", "attach-cmd-fd-minus2", qp, 1, &g, 0);
	o->ctx->cmd_fd = -1;
	q_line("R", "query-cmd-fd-minus1", o->ctx, 1, 0, 0, 32, NULL);
	q_line("R", "query-cmd-fd-minus1-size65536", o->ctx, 1, 0, 0, 65536, NULL);
	o->ctx->cmd_fd = saved;

	/* The real fd again: everything works. */
	mc_line("R", "attach-after-fd-restored", qp, 1, &g, 0);
	mc_line("R", "detach-after-fd-restored", qp, 0, &g, 0);
	q_line("R", "query-after-fd-restored", o->ctx, 1, 0, 0, 32, NULL);
}

/* ---- handles the kernel never gave out for a QP ------------------------ */

static void handle_cases(struct objs *o, struct ibv_qp *qp)
{
	union ibv_gid g;
	struct ibv_qp fake = *qp; /* a copy of a QP is fine: only public fields are read */
	struct ibv_qp *gone = new_qp(o, IBV_QPT_UD);
	uint32_t gone_handle = gone->handle;
	struct {
		const char *name;
		uint32_t h;
	} hs[] = {
		{ "zero", 0 }, { "one", 1 }, { "0x7fffffff", 0x7fffffff }, { "0x80000000", 0x80000000u },
		{ "0xffffffff", 0xffffffffu }, { "cq-handle", o->cq->handle }, { "pd-handle", o->pd->handle },
		{ "destroyed-qp", 0 },
	};
	char name[96];
	mgid(&g, 0x4a, 0, 1);
	ibv_destroy_qp(gone);
	hs[7].h = gone_handle;
	for (unsigned i = 0; i < sizeof(hs) / sizeof(*hs); i++) {
		fake.handle = hs[i].h;
		snprintf(name, sizeof(name), "attach-handle-%s", hs[i].name);
		mc_line("R", name, &fake, 1, &g, 0);
		snprintf(name, sizeof(name), "detach-handle-%s", hs[i].name);
		mc_line("R", name, &fake, 0, &g, 0);
	}
	/* A QP of another context: its handle means something else (or
	 * nothing) on this fd. */
	struct objs o2;
	if (open_objs(&o2, o->ctx->device))
		exit(2);
	struct ibv_qp *other = new_qp(&o2, IBV_QPT_UD);
	fake = *other;
	fake.context = o->ctx;
	mc_line("R", "attach-handle-of-other-context", &fake, 1, &g, 0);
	mc_line("R", "detach-handle-of-other-context", &fake, 0, &g, 0);
	mc_line("R", "attach-other-context-qp", other, 1, &g, 0);
	mc_line("R", "detach-other-context-qp", other, 0, &g, 0);
	ibv_destroy_qp(other);
	close_objs(&o2);
}

/* ---- sizes, ports, indexes --------------------------------------------- */

static void gid_arg_cases(struct objs *o)
{
	static const size_t sizes[] = { 0, 1, 31, 32, 33, 65535, 65536, SIZE_MAX };
	static const uint32_t ports[] = { 0, 255, 256, 0xffffffffu };
	static const uint32_t idxs[] = { 0x80000000u, 0xffffffffu, 0x7fffffffu };
	char name[64];
	int empty = -1;

	for (uint32_t i = 0; i < 64 && empty < 0; i++) {
		struct ibv_gid_entry e;
		if (ibv_query_gid_ex(o->ctx, 1, i, &e, 0) == ENODATA)
			empty = i;
	}
	printf("R first-empty-index %d\n", empty);
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(*sizes); i++) {
		q_line("R", "size", o->ctx, 1, 0, 0, sizes[i], NULL);
		if (empty >= 0)
			q_line("R", "size-empty", o->ctx, 1, empty, 0, sizes[i], NULL);
		q_line("R", "size-bad-port", o->ctx, 0, 0, 0, sizes[i], NULL);
	}
	for (unsigned i = 0; i < sizeof(ports) / sizeof(*ports); i++) {
		snprintf(name, sizeof(name), "port-%u", ports[i]);
		q_line("R", name, o->ctx, ports[i], 0, 0, 32, NULL);
	}
	for (unsigned i = 0; i < sizeof(idxs) / sizeof(*idxs); i++) {
		snprintf(name, sizeof(name), "index-%u", idxs[i]);
		q_line("R", name, o->ctx, 1, idxs[i], 0, 32, NULL);
		q_line("R", name, o->ctx, 0xffffffffu, idxs[i], 0, 32, NULL);
	}
	/* An entry the program never wrote, filled by the kernel: reading it
	 * must be clean under memcheck, as with rdma-core, which marks what
	 * an ioctl wrote defined (libibverbs/cmd_ioctl.c finalize_attr). */
	{
		struct ibv_gid_entry fresh;
		int fe, fr = SENTINEL_CALL(&fe, ibv_query_gid_ex(o->ctx, 1, 0, &fresh, 0));
		printf("R fresh-entry ret=%d errno=%d type=%u ifindex-set=%d gid0=%02x\n", fr, fe,
		       fr ? 0u : fresh.gid_type, fr ? 0 : fresh.ndev_ifindex != 0, fr ? 0u : fresh.gid.raw[0]);
	}
	/* Misaligned entry: fine for both. */
	unsigned char *buf = malloc(128);
	memset(buf, 0xa5, 128);
	int e, r = SENTINEL_CALL(&e, _ibv_query_gid_ex(o->ctx, 1, 0, (struct ibv_gid_entry *)(buf + 1), 0, 32));
	printf("R misaligned-entry ret=%d errno=%d fnv=%016llx\n", r, e, (unsigned long long)fnv(buf, 128));
	free(buf);
	/* An entry pointer the kernel cannot write: EFAULT from the ioctl.
	 * On the sysfs route both libraries write it from user space (a
	 * crash), so only on the ioctl route. */
	if (!mode_fallback) {
		q_line("R", "entry-unmapped", o->ctx, 1, 0, 0, 32, (void *)16);
		if (empty >= 0)
			q_line("R", "entry-unmapped-empty", o->ctx, 1, empty, 0, 32, (void *)16);
		q_line("R", "entry-unmapped-bad-index", o->ctx, 1, 0xffffffffu, 0, 32, (void *)16);
	}
}

/* ---- fork and exec ------------------------------------------------------ */

static void fork_cases(struct objs *o, const char *devname)
{
	struct ibv_qp *qp = robust_fork_qp = new_qp(o, IBV_QPT_UD);
	union ibv_gid gp, gc;
	char st[32];
	mgid(&gp, 0xf0, 1, 1);
	mgid(&gc, 0xf0, 1, 2);
	mc_line("R", "fork-parent-attach", qp, 1, &gp, 0);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		/* The child shares the parent's uverbs file: same handles. */
		q_line("R", "fork-child-query", o->ctx, 1, 0, 0, 32, NULL);
		mc_line("R", "fork-child-attach-parent-group-again", qp, 1, &gp, 0);
		mc_line("R", "fork-child-attach-new-group", qp, 1, &gc, 0);
		mc_line("R", "fork-child-detach-new-group", qp, 0, &gc, 0);
		mc_line("R", "fork-child-detach-parent-group", qp, 0, &gp, 0);
		mc_line("R", "fork-child-detach-parent-group-again", qp, 0, &gp, 0);
		struct ibv_qp *cqp = new_qp(o, IBV_QPT_UD);
		mc_line("R", "fork-child-new-qp-attach", cqp, 1, &gc, 0);
		mc_line("R", "fork-child-new-qp-detach", cqp, 0, &gc, 0);
		printf("R fork-child-new-qp-destroy ret=%d\n", ibv_destroy_qp(cqp));
		/* A context opened in the child. */
		struct objs c;
		if (open_objs(&c, o->ctx->device) == 0) {
			q_line("R", "fork-child-own-context-query", c.ctx, 1, 0, 0, 32, NULL);
			close_objs(&c);
		} else {
			printf("R fork-child-own-context-open errno=%d\n", errno);
		}
		fflush(NULL);
		_exit(0);
	}
	int s = wait_bounded(pid, 60000);
	printf("R fork-child %s\n", status_str(s, st, sizeof(st)));
	mc_line("R", "fork-parent-detach-after-child-detached", qp, 0, &gp, 0);
	q_line("R", "fork-parent-query", o->ctx, 1, 0, 0, 32, NULL);
	printf("R fork-parent-destroy-qp ret=%d\n", ibv_destroy_qp(qp));

	/* exec: rdma-core opens cmd_fd O_CLOEXEC, so the new image has none
	 * of the parent's contexts; it opens its own. */
	char fdarg[16];
	snprintf(fdarg, sizeof(fdarg), "%d", o->ctx->cmd_fd);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		char *argv[] = { "robust", "exec-child", fdarg, (char *)devname, NULL };
		execv(self_path, argv);
		_exit(127);
	}
	s = wait_bounded(pid, 60000);
	printf("R exec-child %s\n", status_str(s, st, sizeof(st)));
}

static int exec_child(int fd, const char *devname)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_device *dev = list ? find_dev(list, n, devname) : NULL;
	struct objs o;
	int e, r = SENTINEL_CALL(&e, fcntl(fd, F_GETFD));
	printf("R exec-child-inherited-cmd-fd fcntl=%d errno=%d\n", r, r < 0 ? e : 0);
	if (!dev || open_objs(&o, dev)) {
		printf("R exec-child-open failed\n");
		return 1;
	}
	q_line("R", "exec-child-query", o.ctx, 1, 0, 0, 32, NULL);
	struct ibv_qp *qp = new_qp(&o, IBV_QPT_UD);
	union ibv_gid g;
	mgid(&g, 0xe0, 1, 1);
	mc_line("R", "exec-child-attach", qp, 1, &g, 0);
	mc_line("R", "exec-child-detach", qp, 0, &g, 0);
	ibv_destroy_qp(qp);
	close_objs(&o);
	ibv_free_device_list(list);
	return 0;
}

/* ---- a cached route on a reused (context address, cmd_fd) -------------- */

/* rsverbs caches a route per context address. Here the first call
 * on a new context is made while its fd number points at /dev/null (no
 * ioctl: both libraries take the sysfs route and rdma-core latches it in
 * that context's private data). The context is then closed and a new one
 * opened, which usually reuses both the address and the fd number: the new
 * context must behave like a new context, as it does in rdma-core. */
static void reuse_cases(struct ibv_device *dev)
{
	struct objs o1, o2;
	/* Bring the heap to its steady state first (stdout's buffer, rdma-core's
	 * first-open allocations), so that a later context can land on o1's
	 * address. No verb is called on these. */
	printf("R reuse-warm-up\n");
	for (int i = 0; i < 4; i++) {
		if (open_objs(&o1, dev))
			exit(2);
		close_objs(&o1);
	}
	if (open_objs(&o1, dev))
		exit(2);
	void *addr1 = o1.ctx;
	int fd1 = o1.ctx->cmd_fd;
	int saved = dup(fd1), dn = open("/dev/null", O_RDWR);
	dup2(dn, fd1);
	close(dn);
	q_line("R", "reuse-first-call-on-devnull", o1.ctx, 1, 0, 0, 32, NULL);
	dup2(saved, fd1);
	close(saved);
	/* Not compared (prefix X): with the real fd back, rdma-core stays on the
	 * sysfs route it latched in the context's private data, while rsverbs,
	 * which cannot tell this context from a new one at the same address,
	 * does not keep an ENOTTY latch that a non-uverbs fd caused and takes
	 * the ioctl route again. The compared case below (a new context at the
	 * same address must start afresh) is the one rsverbs guarantees; the two
	 * cannot both hold without rdma-core's private state. */
	q_line("X", "reuse-fd-restored-flags1", o1.ctx, 1, 0, 1, 32, NULL);
	q_line("X", "reuse-fd-restored-size40", o1.ctx, 1, 0, 0, 40, NULL);
	close_objs(&o1);

	/* Open and close until a context lands on the same address and fd
	 * (glibc usually needs a few rounds); no verb is called on the others. */
	int tries;
	for (tries = 1; tries <= 64; tries++) {
		if (open_objs(&o2, dev))
			exit(2);
		if (getenv("ROBUST_DEBUG"))
			fprintf(stderr, "reuse: try %d: %p fd %d (first %p fd %d)\n", tries, (void *)o2.ctx, o2.ctx->cmd_fd, addr1, fd1);
		if ((void *)o2.ctx == addr1 && o2.ctx->cmd_fd == fd1)
			break;
		if (tries < 64)
			close_objs(&o2);
	}
	fprintf(stderr, "reuse: new context at the same address and cmd_fd: %s (%d opens)\n",
		(void *)o2.ctx == addr1 && o2.ctx->cmd_fd == fd1 ? "yes" : "no", tries > 64 ? 64 : tries);
	q_line("R", "reuse-new-context-flags1", o2.ctx, 1, 0, 1, 32, NULL);
	q_line("R", "reuse-new-context-size40", o2.ctx, 1, 0, 0, 40, NULL);
	q_line("R", "reuse-new-context-size65536", o2.ctx, 1, 0, 0, 65536, NULL);
	q_line("R", "reuse-new-context-port0", o2.ctx, 0, 0, 0, 32, NULL);
	struct ibv_qp *qp = new_qp(&o2, IBV_QPT_UD);
	union ibv_gid g;
	mgid(&g, 0x5e, 0, 1);
	mc_line("R", "reuse-new-context-attach", qp, 1, &g, 0);
	mc_line("R", "reuse-new-context-detach", qp, 0, &g, 0);
	ibv_destroy_qp(qp);
	close_objs(&o2);
}

int main(int argc, char **argv)
{
	const char *devname = "rxe1";
	int n, fallback = 0;
	const struct opt opts[] = {
		{ .name = "-d", .str = &devname },
		{ .name = "fallback", .on = &fallback },
		{ .name = NULL },
	};

	if (!realpath(argv[0], self_path) && !realpath("/proc/self/exe", self_path))
		return 2;
	if (argc >= 4 && !strcmp(argv[1], "exec-child"))
		return exec_child(atoi(argv[2]), argv[3]);
	parse_opts(argc, argv, 1, opts, NULL);
	if (fallback)
		mode_fallback = "fallback";
	setvbuf(stdout, NULL, _IOLBF, 0);
	print_served_by(stderr);
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_device *dev = list ? find_dev(list, n, devname) : NULL;
	if (!dev) {
		fprintf(stderr, "robust: no device %s\n", devname);
		return 2;
	}

	/* First, so that rsverbs has seen no context of this process yet. */
	reuse_cases(dev);

	struct objs o;
	if (open_objs(&o, dev)) {
		fprintf(stderr, "robust: cannot open %s\n", devname);
		return 2;
	}
	struct ibv_qp *qp = new_qp(&o, IBV_QPT_UD);
	null_cases(&o, qp);
	fd_cases(&o, qp);
	handle_cases(&o, qp);
	gid_arg_cases(&o);
	ibv_destroy_qp(qp);
	fork_cases(&o, devname);
	close_objs(&o);
	ibv_free_device_list(list);
	fprintf(stderr, "robust: done\n");
	return 0;
}
