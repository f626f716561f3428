/* bench: per-call cost of ibv_attach_mcast, ibv_detach_mcast and
 * ibv_query_gid_ex, for `make bench` (bench/run.sh -> bench/guest.sh).
 *
 * One source, built twice, for every contender:
 *   bench          linked against rdma-core only: rdma-core 44 itself (twice
 *                  in a latency round: rdma-core-AA, for the noise band), or,
 *                  with LD_PRELOAD=librsverbs.so.1, rsverbs preloaded;
 *   bench.rsv      relinked with $(pkg-config --libs rsverbs): rsverbs first;
 *   bench --floor  the same program issuing the kernel commands itself with
 *                  one bare ioctl each, built from the public structs
 *                  (qp->context->cmd_fd, qp->handle) and the uapi headers:
 *                  exactly the bytes rdma-core 44 sends (reference 1.2, 3.3).
 *
 * Modes:
 *   bench time [--floor] [-d DEV] [-k K] [-b BLOCKS] [-s SCANS] [-n N,N,...]
 *              [-e E] [-i RING_IN -O RING_OUT] [-r READY] -o FILE
 *       one round: (a)-(c) BLOCKS blocks of K calls each, (d) SCANS blocks
 *       of one full scan, (e) for each N max(4, E/N) attach-all/detach-all
 *       cycles in up to BLOCKS blocks. Blocks of the operations alternate.
 *       With a ring, the process waits for a byte on RING_IN before each
 *       block and passes it on to RING_OUT after it, so the processes of a
 *       round (one per contender) take turns block by block; READY gets a
 *       byte once the process is set up. Per-call samples go to FILE as
 *       "op block ns" lines, a per-op summary to stderr;
 *   bench count [--floor] [-d DEV] [-k K]
 *       for strace: marks regions with write(-1, "MARK ...") so that the
 *       syscalls of a cold first call and of K steady calls can be counted;
 *   bench instr [--floor] [-d DEV] [-k K]
 *       for valgrind --tool=callgrind: one stats dump per region (client
 *       requests), so the user-space instructions per call can be read;
 *       the regions run again over do-nothing stand-ins ("-harness"
 *       dumps) measure the harness, to be subtracted;
 *   bench report DIR ROUNDS CONTENDER...
 *       pooled and per-slot statistics of the DIR/CONTENDER.ROUND files as
 *       the Markdown latency tables of BENCHMARKS.md (see report_mode).
 *
 * Every call's result is checked (0 for attach/detach/populated index,
 * ENODATA for the empty index, the same scan result every time): a
 * contender that gives a different answer fails the run instead of being
 * timed. "served-by" on stderr names the object that defines each verb. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <infiniband/verbs.h>
#include "timing.h"
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_ioctl_cmds.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include <valgrind/callgrind.h>

#define PORT 1

static int ring_in = -1, ring_out = -1, ready_fd = -1;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	/* In a ring round, tell the others at once: "x" on the ready FIFO
	 * (the script stops waiting) and around the ring (each process that
	 * receives it passes it on and stops). */
	if (ready_fd >= 0 && write(ready_fd, "x", 1) != 1)
		ready_fd = -1;
	if (ring_out >= 0 && write(ring_out, "x", 1) != 1)
		ring_out = -1;
	va_start(ap, fmt);
	fputs("bench: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

/* ---- the floor: one bare ioctl, the same command rdma-core 44 sends ---- */

static uint32_t floor_driver_id;

/* INVOKE_WRITE carrying ATTACH_MCAST (30) / DETACH_MCAST (31): reference 1.2. */
static int floor_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid, uint32_t cmd)
{
	struct ib_uverbs_attach_mcast req = { .qp_handle = qp->handle, .mlid = lid };
	memcpy(req.gid, gid->raw, sizeof(req.gid));
	struct {
		struct ib_uverbs_ioctl_hdr hdr;
		struct ib_uverbs_attr attrs[2];
	} c = {
		.hdr = { .length = sizeof(c), .object_id = UVERBS_OBJECT_DEVICE,
			 .method_id = UVERBS_METHOD_INVOKE_WRITE, .num_attrs = 2,
			 .driver_id = floor_driver_id },
		.attrs = {
			{ .attr_id = UVERBS_ATTR_WRITE_CMD, .len = 8,
			  .flags = UVERBS_ATTR_F_MANDATORY, .data = cmd },
			{ .attr_id = UVERBS_ATTR_CORE_IN, .len = sizeof(req),
			  .flags = UVERBS_ATTR_F_MANDATORY, .data = (uintptr_t)&req },
		},
	};
	return ioctl(qp->context->cmd_fd, RDMA_VERBS_IOCTL, &c) ? errno : 0;
}

static int floor_attach(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return floor_mcast(qp, gid, lid, IB_USER_VERBS_CMD_ATTACH_MCAST);
}

static int floor_detach(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return floor_mcast(qp, gid, lid, IB_USER_VERBS_CMD_DETACH_MCAST);
}

/* QUERY_GID_ENTRY with PORT, GID_INDEX, FLAGS, RESP_ENTRY: reference 3.3. */
static int floor_query(struct ibv_context *ctx, uint32_t port, uint32_t index,
		       struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
	struct {
		struct ib_uverbs_ioctl_hdr hdr;
		struct ib_uverbs_attr attrs[4];
	} c = {
		.hdr = { .length = sizeof(c), .object_id = UVERBS_OBJECT_DEVICE,
			 .method_id = UVERBS_METHOD_QUERY_GID_ENTRY, .num_attrs = 4,
			 .driver_id = floor_driver_id },
		.attrs = {
			{ .attr_id = UVERBS_ATTR_QUERY_GID_ENTRY_PORT, .len = 8,
			  .flags = UVERBS_ATTR_F_MANDATORY, .data = port },
			{ .attr_id = UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX, .len = 8,
			  .flags = UVERBS_ATTR_F_MANDATORY, .data = index },
			{ .attr_id = UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, .len = 4,
			  .flags = UVERBS_ATTR_F_MANDATORY, .data = flags },
			{ .attr_id = UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, .len = entry_size,
			  .flags = UVERBS_ATTR_F_MANDATORY, .data = (uintptr_t)entry },
		},
	};
	return ioctl(ctx->cmd_fd, RDMA_VERBS_IOCTL, &c) ? errno : 0;
}

/* The driver_id, found once at setup (untimed) the side-effect-free way of
 * reference 5 option 1: a method no kernel has answers EINVAL for a wrong
 * driver_id and EPROTONOSUPPORT for the right one. */
static uint32_t probe_driver_id(int fd)
{
	for (uint32_t id = 0; id < 64; id++) {
		struct ib_uverbs_ioctl_hdr h = { .length = sizeof(h), .method_id = 0x0fff,
						 .driver_id = id };
		if (ioctl(fd, RDMA_VERBS_IOCTL, &h) && errno == EPROTONOSUPPORT)
			return id;
	}
	die("no driver_id accepted on fd %d", fd);
}

/* ---- the verbs under test, as pointers: the same indirect call for all ---- */

struct verbs {
	int (*attach)(struct ibv_qp *, const union ibv_gid *, uint16_t);
	int (*detach)(struct ibv_qp *, const union ibv_gid *, uint16_t);
	int (*query)(struct ibv_context *, uint32_t, uint32_t, struct ibv_gid_entry *, uint32_t, size_t);
};

static struct verbs V;
static int is_floor;

static const char *definer(void *fn)
{
	Dl_info di;
	if (!dladdr(fn, &di) || !di.dli_fname)
		return "?";
	const char *s = strrchr(di.dli_fname, '/');
	return s ? s + 1 : di.dli_fname;
}

static void choose_verbs(void)
{
	if (is_floor) {
		V = (struct verbs){ floor_attach, floor_detach, floor_query };
		fprintf(stderr, "served-by floor (bare ioctl, driver_id from probe)\n");
		return;
	}
	/* Taking the addresses resolves them the way the dynamic linker binds
	 * this program's calls: rdma-core, the relinked or the preloaded
	 * rsverbs. */
	V = (struct verbs){ ibv_attach_mcast, ibv_detach_mcast, _ibv_query_gid_ex };
	fprintf(stderr, "served-by ibv_attach_mcast=%s ibv_detach_mcast=%s _ibv_query_gid_ex=%s\n",
		definer((void *)V.attach), definer((void *)V.detach), definer((void *)V.query));
}

/* ---- objects ---- */

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;      /* (a) */
	struct ibv_qp *qp_many; /* (e) */
	int gid_tbl_len;
	uint32_t empty_index;
	int max_mcast_grp;
};

static struct ibv_qp *new_ud_qp(struct env *e)
{
	struct ibv_qp_init_attr a = {
		.send_cq = e->cq, .recv_cq = e->cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(e->pd, &a);
	if (!qp)
		die("ibv_create_qp: %s", strerror(errno));
	return qp;
}

static void open_env(struct env *e, const char *devname)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n), *dev = NULL;
	if (!list)
		die("ibv_get_device_list: %s", strerror(errno));
	for (int i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), devname))
			dev = list[i];
	if (!dev)
		die("no device %s", devname);
	memset(e, 0, sizeof(*e));
	e->ctx = ibv_open_device(dev);
	ibv_free_device_list(list);
	if (!e->ctx)
		die("ibv_open_device(%s): %s", devname, strerror(errno));
	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = ibv_create_cq(e->ctx, 1, NULL, NULL, 0);
	if (!e->pd || !e->cq)
		die("ibv_alloc_pd/ibv_create_cq: %s", strerror(errno));
	e->qp = new_ud_qp(e);
	e->qp_many = new_ud_qp(e);
	struct ibv_port_attr pa;
	struct ibv_device_attr da;
	if (ibv_query_port(e->ctx, PORT, &pa) || ibv_query_device(e->ctx, &da))
		die("ibv_query_port/device: %s", strerror(errno));
	e->gid_tbl_len = pa.gid_tbl_len;
	e->max_mcast_grp = da.max_mcast_grp;
	if (is_floor && !floor_driver_id)
		floor_driver_id = probe_driver_id(e->ctx->cmd_fd);
}

/* The empty index of (c): the highest one that answers ENODATA. Found
 * through rdma-core's ibv_query_gid (not a verb under test). */
static void find_empty_index(struct env *e)
{
	for (int i = e->gid_tbl_len - 1; i >= 0; i--) {
		union ibv_gid g;
		static const union ibv_gid zero;
		if (!ibv_query_gid(e->ctx, PORT, i, &g) && !memcmp(&g, &zero, sizeof(g))) {
			e->empty_index = i;
			return;
		}
	}
	die("port %d has no empty GID index", PORT);
}

/* ff0e::TAG:I -- distinct multicast groups (distinct L2 addresses, too). */
static union ibv_gid mgid(uint8_t tag, uint32_t i)
{
	union ibv_gid g = { .raw = { 0xff, 0x0e } };
	g.raw[11] = tag;
	g.raw[12] = i >> 24;
	g.raw[13] = i >> 16;
	g.raw[14] = i >> 8;
	g.raw[15] = i;
	return g;
}

static void expect(const char *what, int got, int want, long i)
{
	if (got != want)
		die("%s (#%ld): returned %d (%s), expected %d", what, i, got, strerror(got), want);
}

/* ---- time mode ---- */

/* The samples of one operation: ticks, and the block each was taken in. */
struct series {
	char name[32];
	uint64_t *t;
	uint32_t *blk;
	long n, cap;
};

static struct series series[64];
static int nseries;
static uint32_t cur_block;

static struct series *new_series(const char *name, long cap)
{
	if (nseries == (int)(sizeof(series) / sizeof(series[0])))
		die("too many series");
	struct series *s = &series[nseries++];
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->t = malloc(sizeof(uint64_t) * (cap ? cap : 1));
	s->blk = malloc(sizeof(uint32_t) * (cap ? cap : 1));
	if (!s->t || !s->blk)
		die("out of memory");
	s->cap = cap;
	return s;
}

static void add(struct series *s, uint64_t dt)
{
	if (s->n < s->cap) {
		s->blk[s->n] = cur_block;
		s->t[s->n++] = dt;
	}
}

/* Nearest-rank quantile of a sorted array. */
static double quantile(const double *v, long n, double q)
{
	long r = (long)(q * n + 0.999999);
	if (r < 1)
		r = 1;
	if (r > n)
		r = n;
	return v[r - 1];
}

static double median(const double *v, long n)
{
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void parse_ns(const char *list, long *ns, int *count)
{
	char *copy = strdup(list), *save = NULL;
	*count = 0;
	for (char *tok = strtok_r(copy, ",", &save); tok && *count < 16; tok = strtok_r(NULL, ",", &save))
		ns[(*count)++] = atol(tok);
	free(copy);
}

/* The token ring: the contender processes of a round run at the same time
 * but take turns, one block each, passing a byte around a ring of FIFOs, so
 * that every contender's block j is timed within milliseconds of the
 * others' (a slow phase of the emulator hits all of them alike). Without a
 * ring (-i/-O not given) the blocks simply run back to back. */
static void turn_begin(void)
{
	char c = 't';
	while (ring_in >= 0 && read(ring_in, &c, 1) != 1)
		if (errno != EINTR)
			die("ring: read: %s", strerror(errno));
	if (c == 'x') {
		ready_fd = -1;
		die("another contender of this round failed");
	}
}

static void turn_end(void)
{
	while (ring_out >= 0 && write(ring_out, "t", 1) != 1)
		if (errno != EINTR)
			die("ring: write: %s", strerror(errno));
}

/* The blocks of one operation: `blocks` turns of `per` units each. */
struct plan {
	int op; /* 0 a, 1 b, 2 c, 3 d, 4+j (e) with ns[j] */
	long blocks, per, done;
};

struct timing {
	struct env *e;
	struct series *sa, *sb, *sc, *sd, *se_att[16], *se_det[16];
	long ns[16];
	int nn, populated0;
	union ibv_gid ga, *groups;
};

static void run_block(struct timing *T, struct plan *p)
{
	struct env *e = T->e;
	struct ibv_gid_entry ent;
	long units = p->per;
	switch (p->op) {
	case 0: /* (a) attach+detach pair */
		for (long i = 0; i < units; i++) {
			uint64_t t0 = ticks();
			int r1 = V.attach(e->qp, &T->ga, 0);
			int r2 = V.detach(e->qp, &T->ga, 0);
			uint64_t t1 = ticks();
			expect("(a) attach", r1, 0, i);
			expect("(a) detach", r2, 0, i);
			add(T->sa, t1 - t0);
		}
		break;
	case 1: /* (b) populated index */
		for (long i = 0; i < units; i++) {
			uint64_t t0 = ticks();
			int r = V.query(e->ctx, PORT, 0, &ent, 0, sizeof(ent));
			uint64_t t1 = ticks();
			expect("(b) query populated", r, 0, i);
			add(T->sb, t1 - t0);
		}
		break;
	case 2: /* (c) empty index */
		for (long i = 0; i < units; i++) {
			uint64_t t0 = ticks();
			int r = V.query(e->ctx, PORT, e->empty_index, &ent, 0, sizeof(ent));
			uint64_t t1 = ticks();
			expect("(c) query empty", r, ENODATA, i);
			add(T->sc, t1 - t0);
		}
		break;
	case 3: /* (d) full scan of the port's table, as perftest's GID selection */
		for (long s = 0; s < units; s++) {
			int populated = 0, other = 0;
			uint64_t t0 = ticks();
			for (int i = 0; i < e->gid_tbl_len; i++) {
				int r = V.query(e->ctx, PORT, i, &ent, 0, sizeof(ent));
				if (r == 0)
					populated++;
				else if (r != ENODATA)
					other++;
			}
			uint64_t t1 = ticks();
			if (other || (T->populated0 >= 0 && populated != T->populated0))
				die("(d) scan %ld: %d populated, %d errors other than ENODATA", s, populated, other);
			T->populated0 = populated;
			add(T->sd, t1 - t0);
		}
		break;
	default: { /* (e) N distinct groups on one QP, then detached in the same order */
		int j = p->op - 4;
		long n = T->ns[j];
		for (long c = 0; c < units; c++) {
			for (long i = 0; i < n; i++) {
				uint64_t t0 = ticks();
				int r = V.attach(e->qp_many, &T->groups[i], 0);
				uint64_t t1 = ticks();
				expect("(e) attach", r, 0, i);
				add(T->se_att[j], t1 - t0);
			}
			for (long i = 0; i < n; i++) {
				uint64_t t0 = ticks();
				int r = V.detach(e->qp_many, &T->groups[i], 0);
				uint64_t t1 = ticks();
				expect("(e) detach", r, 0, i);
				add(T->se_det[j], t1 - t0);
			}
		}
	}
	}
}

/* Per process: (a)-(c) `blocks` blocks of `k` calls; (d) `scans` blocks of
 * one scan; (e) for each N, C = max(4, ecalls / N) attach-all/detach-all
 * cycles in min(C, blocks) blocks. Every block ends with no group attached,
 * so the processes never hold groups at the same time (max_mcast_grp is
 * per device). */
static int time_mode(struct env *e, long k, long blocks, long scans, const char *nlist, long ecalls,
		     const char *out)
{
	struct timing T = { .e = e, .populated0 = -1 };
	struct plan plan[20];
	int np = 0;
	parse_ns(nlist, T.ns, &T.nn);
	plan[np++] = (struct plan){ 0, blocks, k, 0 };
	plan[np++] = (struct plan){ 1, blocks, k, 0 };
	plan[np++] = (struct plan){ 2, blocks, k, 0 };
	plan[np++] = (struct plan){ 3, scans, 1, 0 };
	T.sa = new_series("a", blocks * k);
	T.sb = new_series("b", blocks * k);
	T.sc = new_series("c", blocks * k);
	T.sd = new_series("d", scans);
	long nmax = 1;
	for (int j = 0; j < T.nn; j++) {
		char name[32];
		long n = T.ns[j], cycles = ecalls / n > 4 ? ecalls / n : 4;
		long nb = cycles < blocks ? cycles : blocks;
		if (n < 1 || n > e->max_mcast_grp)
			die("N=%ld is not within 1..max_mcast_grp (%d)", n, e->max_mcast_grp);
		plan[np++] = (struct plan){ 4 + j, nb, cycles / nb, 0 };
		snprintf(name, sizeof(name), "e%ld-attach", n);
		T.se_att[j] = new_series(name, nb * (cycles / nb) * n);
		snprintf(name, sizeof(name), "e%ld-detach", n);
		T.se_det[j] = new_series(name, nb * (cycles / nb) * n);
		nmax = n > nmax ? n : nmax;
	}
	T.ga = mgid(0xaa, 1);
	T.groups = malloc(sizeof(*T.groups) * nmax);
	if (!T.groups)
		die("out of memory");
	for (long i = 0; i < nmax; i++)
		T.groups[i] = mgid(0xee, i);

	/* Set up: say so (the fd stays open, so the byte stays in the FIFO
	 * until the script reads it). */
	if (ready_fd >= 0 && write(ready_fd, "r", 1) != 1)
		die("ready: %s", strerror(errno));
	/* Untimed warm-up, in a turn of its own (the processes of a round must
	 * not attach the same group at the same time: rxe can then fail a
	 * detach with EINVAL): first calls (rsverbs' per-context discovery,
	 * page faults of the code), so that every contender is timed in its
	 * steady state. The cold first call is counted separately (count
	 * mode). */
	struct ibv_gid_entry ent;
	turn_begin();
	expect("warm-up attach", V.attach(e->qp, &T.ga, 0), 0, 0);
	expect("warm-up detach", V.detach(e->qp, &T.ga, 0), 0, 0);
	expect("warm-up query", V.query(e->ctx, PORT, 0, &ent, 0, sizeof(ent)), 0, 0);
	expect("warm-up query empty", V.query(e->ctx, PORT, e->empty_index, &ent, 0, sizeof(ent)), ENODATA, 0);
	turn_end();

	uint64_t ns0 = mono_ns(), tk0 = ticks();
	/* Round-robin over the operations, one block per turn, so that each
	 * operation's blocks are spread over the whole run. */
	for (int more = 1; more;) {
		more = 0;
		for (int i = 0; i < np; i++) {
			struct plan *p = &plan[i];
			if (p->done == p->blocks)
				continue;
			turn_begin();
			run_block(&T, p);
			turn_end();
			p->done++;
			cur_block++;
			more = 1;
		}
	}
	uint64_t ns1 = mono_ns(), tk1 = ticks();
	double ns_per_tick = (double)(ns1 - ns0) / (double)(tk1 - tk0);

	FILE *f = fopen(out, "w");
	if (!f)
		die("%s: %s", out, strerror(errno));
	fprintf(f, "# ns_per_tick %.6f scan_populated %d empty_index %u gid_tbl_len %d\n",
		ns_per_tick, T.populated0, e->empty_index, e->gid_tbl_len);
	for (int i = 0; i < nseries; i++) {
		struct series *s = &series[i];
		double *v = malloc(sizeof(double) * (s->n ? s->n : 1));
		if (!v)
			die("out of memory");
		for (long j = 0; j < s->n; j++) {
			v[j] = s->t[j] * ns_per_tick;
			fprintf(f, "%s %u %.0f\n", s->name, s->blk[j], v[j]);
		}
		qsort(v, s->n, sizeof(double), cmp_double);
		if (s->n)
			fprintf(stderr, "  %-14s n=%-6ld median %9.0f ns  p99 %9.0f ns\n", s->name, s->n,
				median(v, s->n), quantile(v, s->n, 0.99));
		free(v);
	}
	if (fclose(f))
		die("%s: %s", out, strerror(errno));
	fprintf(stderr, "  %u blocks in %.2f s; timer %.3f ns/tick; scan: %d populated of %d\n", cur_block,
		(ns1 - ns0) / 1e9, ns_per_tick, T.populated0, e->gid_tbl_len);
	return 0;
}

/* ---- count mode (run under strace) ---- */

static void mark(const char *what)
{
	/* A syscall nobody else makes, with its label in strace's output. */
	char buf[96];
	int n = snprintf(buf, sizeof(buf), "MARK %s", what);
	if (write(-1, buf, n) != -1)
		die("mark");
}

static int count_mode(const char *devname, long k)
{
	/* Three contexts, all kept open (so no fd or address is reused): the
	 * process's first context, then later ones. Each region starts at the
	 * first call of a verb on a context that has never seen one. */
	struct env e1, e2, e3;
	open_env(&e1, devname);
	open_env(&e2, devname);
	open_env(&e3, devname);
	find_empty_index(&e1);
	e3.empty_index = e1.empty_index;
	union ibv_gid ga = mgid(0xaa, 2);
	struct ibv_gid_entry ent;
	int r;

	mark("b first-call ctx1");
	r = V.query(e1.ctx, PORT, 0, &ent, 0, sizeof(ent));
	mark("b steady");
	for (long i = 0; i < k; i++)
		r |= V.query(e1.ctx, PORT, 0, &ent, 0, sizeof(ent));
	mark("end");
	expect("count (b)", r, 0, 0);

	mark("a first-call ctx2");
	r = V.attach(e2.qp, &ga, 0);
	r |= V.detach(e2.qp, &ga, 0);
	mark("a steady");
	for (long i = 0; i < k; i++) {
		r |= V.attach(e2.qp, &ga, 0);
		r |= V.detach(e2.qp, &ga, 0);
	}
	mark("end");
	expect("count (a)", r, 0, 0);

	mark("c first-call ctx3");
	r = V.query(e3.ctx, PORT, e3.empty_index, &ent, 0, sizeof(ent));
	mark("c steady");
	int bad = 0;
	for (long i = 0; i < k; i++)
		bad |= V.query(e3.ctx, PORT, e3.empty_index, &ent, 0, sizeof(ent)) != ENODATA;
	mark("end");
	expect("count (c)", r, ENODATA, 0);
	expect("count (c) steady", bad, 0, 0);
	printf("count: k=%ld\n", k);
	return 0;
}

/* ---- instr mode (run under callgrind) ---- */

/* Stand-ins with the verbs' signatures that do nothing: the same loops run
 * over them measure the harness (loop, indirect call, result check), which
 * the guest script subtracts to get each library's own instructions. */
static int null_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	__asm__ volatile("" ::: "memory");
	return 0;
}

static int null_query(struct ibv_context *ctx, uint32_t port, uint32_t index, struct ibv_gid_entry *entry,
		      uint32_t flags, size_t entry_size)
{
	__asm__ volatile("" ::: "memory");
	return index ? ENODATA : 0;
}

/* One stats dump per operation: "a" (k attach+detach pairs), "b", "c" (k
 * queries each), named with SUFFIX. */
static void instr_regions(struct env *e, long k, const char *suffix)
{
	union ibv_gid ga = mgid(0xaa, 3);
	struct ibv_gid_entry ent;
	char name[32];
	int r = 0, bad = 0;

	CALLGRIND_ZERO_STATS;
	for (long i = 0; i < k; i++) {
		r |= V.attach(e->qp, &ga, 0);
		r |= V.detach(e->qp, &ga, 0);
	}
	snprintf(name, sizeof(name), "a%s", suffix);
	CALLGRIND_DUMP_STATS_AT(name);
	CALLGRIND_ZERO_STATS;
	for (long i = 0; i < k; i++)
		r |= V.query(e->ctx, PORT, 0, &ent, 0, sizeof(ent));
	snprintf(name, sizeof(name), "b%s", suffix);
	CALLGRIND_DUMP_STATS_AT(name);
	CALLGRIND_ZERO_STATS;
	for (long i = 0; i < k; i++)
		bad |= V.query(e->ctx, PORT, e->empty_index, &ent, 0, sizeof(ent)) != ENODATA;
	snprintf(name, sizeof(name), "c%s", suffix);
	CALLGRIND_DUMP_STATS_AT(name);
	expect("instr (a)/(b)", r, 0, 0);
	expect("instr (c)", bad, 0, 0);
}

static int instr_mode(const char *devname, long k)
{
	struct env e;
	open_env(&e, devname);
	find_empty_index(&e);
	union ibv_gid ga = mgid(0xaa, 3);
	struct ibv_gid_entry ent;
	int r = 0;

	/* The cold first call: discovery included. */
	CALLGRIND_ZERO_STATS;
	r |= V.query(e.ctx, PORT, 0, &ent, 0, sizeof(ent));
	CALLGRIND_DUMP_STATS_AT("b-first");
	for (int i = 0; i < 3; i++) {
		r |= V.attach(e.qp, &ga, 0) | V.detach(e.qp, &ga, 0);
		r |= V.query(e.ctx, PORT, 0, &ent, 0, sizeof(ent));
	}
	expect("instr warm-up", r, 0, 0);

	instr_regions(&e, k, "");
	struct verbs real = V;
	V = (struct verbs){ null_mcast, null_mcast, null_query };
	instr_regions(&e, k, "-harness");
	V = real;
	printf("instr: k=%ld\n", k);
	return 0;
}

/* ---- report mode ---- */

/* A slot is one block of one round: the blocks that the contenders of a
 * round ran in turn, side by side. Per-slot medians give per-slot ratios. */
#define MAXC 8
#define MAXBLK 256
#define MAXSLOT (64 * MAXBLK)

struct vec {
	double *v;
	long n, cap;
};

static void push(struct vec *x, double d)
{
	if (x->n == x->cap) {
		x->cap = x->cap ? 2 * x->cap : 256;
		x->v = realloc(x->v, sizeof(double) * x->cap);
		if (!x->v)
			die("out of memory");
	}
	x->v[x->n++] = d;
}

struct opdata {
	char op[64];
	struct vec all[MAXC];
	struct vec *slot[MAXC]; /* [MAXSLOT] */
	double med[MAXC], smed[MAXC], p99[MAXC];
};

static struct opdata ops[64];
static int nops;

static struct opdata *op_get(const char *name)
{
	for (int i = 0; i < nops; i++)
		if (!strcmp(ops[i].op, name))
			return &ops[i];
	if (nops == 64)
		die("too many ops");
	struct opdata *o = &ops[nops++];
	snprintf(o->op, sizeof(o->op), "%s", name);
	for (int c = 0; c < MAXC; c++) {
		o->slot[c] = calloc(MAXSLOT, sizeof(struct vec));
		if (!o->slot[c])
			die("out of memory");
	}
	return o;
}

static const char *op_label(const char *op)
{
	static char buf[64];
	long n;
	if (!strcmp(op, "a"))
		return "(a) attach+detach pair";
	if (!strcmp(op, "b"))
		return "(b) query_gid_ex, populated";
	if (!strcmp(op, "c"))
		return "(c) query_gid_ex, empty (ENODATA)";
	if (!strcmp(op, "d"))
		return "(d) scan of all indices";
	if (sscanf(op, "e%ld-", &n) == 1) {
		snprintf(buf, sizeof(buf), "(e) N=%ld, each %s", n, strchr(op, '-') + 1);
		return buf;
	}
	return op;
}

static void fmt_ns(char *buf, size_t len, double ns)
{
	if (ns >= 1e6)
		snprintf(buf, len, "%.2f ms", ns / 1e6);
	else if (ns >= 1e4)
		snprintf(buf, len, "%.1f µs", ns / 1e3);
	else
		snprintf(buf, len, "%.2f µs", ns / 1e3);
}

/* Per-slot ratios of contender c to contender ref (each slot: c's block
 * median over ref's block median), sorted into q; their count returned. */
static int slot_ratios(struct opdata *o, int c, int ref, double *q)
{
	int n = 0;
	for (int s = 0; s < MAXSLOT; s++) {
		struct vec *x = &o->slot[c][s], *y = &o->slot[ref][s];
		if (!x->n || !y->n)
			continue;
		qsort(x->v, x->n, sizeof(double), cmp_double);
		qsort(y->v, y->n, sizeof(double), cmp_double);
		q[n++] = median(x->v, x->n) / median(y->v, y->n);
	}
	qsort(q, n, sizeof(double), cmp_double);
	return n;
}

/* A ratio estimate: the median of the per-slot ratios, their quartiles,
 * and the standard error of that median (from the IQR, as for a normal
 * spread: sigma = IQR / 1.349, SE = 1.253 sigma / sqrt(n)). */
struct ratio {
	double med, q1, q3, se;
	int n;
};

static struct ratio ratio_of(struct opdata *o, int c, int ref, double *q)
{
	struct ratio r = { 1, 1, 1, 0, 0 };
	r.n = slot_ratios(o, c, ref, q);
	if (!r.n)
		return r;
	r.med = median(q, r.n);
	r.q1 = quantile(q, r.n, 0.25);
	r.q3 = quantile(q, r.n, 0.75);
	r.se = 1.253 * (r.q3 - r.q1) / 1.349 / sqrt(r.n);
	return r;
}

/* bench report DIR ROUNDS CONTENDER...: reads DIR/CONTENDER.ROUND ("op
 * block ns" lines). The first contender is the reference, "floor" is the
 * floor, and REF-AA (a second, identical run of the reference) measures the
 * method's noise.
 *
 * A *slot* is one block number of one round: the contenders ran their
 * block j of a round in turn, within milliseconds, so a slot compares them
 * under the same conditions. Ratios are the median over slots of the
 * per-slot ratio of block medians; this is robust to the emulator's speed
 * changing between slots, which moves pooled medians of multimodal
 * distributions. The noise band is the A/A ratio's distance from 1 or twice
 * its standard error, whichever is larger. */
static int report_mode(const char *dir, int rounds, int nc, char **names)
{
	if (nc > MAXC)
		die("at most %d contenders", MAXC);
	int ref = 0, flo = -1, aa = -1;
	char aaname[80];
	snprintf(aaname, sizeof(aaname), "%s-AA", names[ref]);
	for (int c = 0; c < nc; c++) {
		if (!strcmp(names[c], "floor"))
			flo = c;
		if (!strcmp(names[c], aaname))
			aa = c;
	}
	for (int c = 0; c < nc; c++)
		for (int r = 1; r <= rounds; r++) {
			char path[4096], op[64], line[256];
			unsigned blk;
			double v;
			snprintf(path, sizeof(path), "%s/%s.%d", dir, names[c], r);
			FILE *f = fopen(path, "r");
			if (!f)
				die("%s: %s", path, strerror(errno));
			while (fgets(line, sizeof(line), f)) {
				if (line[0] == '#')
					continue;
				if (sscanf(line, "%63s %u %lf", op, &blk, &v) != 3)
					die("%s: bad line %s", path, line);
				struct opdata *o = op_get(op);
				unsigned s = (unsigned)(r - 1) * MAXBLK + blk;
				if (blk >= MAXBLK || s >= MAXSLOT)
					die("%s: too many blocks or rounds", path);
				push(&o->all[c], v);
				push(&o->slot[c][s], v);
			}
			fclose(f);
		}
	double noise[64], *q = malloc(sizeof(double) * MAXSLOT);
	struct ratio vs_ref[64][MAXC], vs_floor[64][MAXC];
	if (!q)
		die("out of memory");
	for (int i = 0; i < nops; i++) {
		struct opdata *o = &ops[i];
		for (int c = 0; c < nc; c++) {
			struct vec *x = &o->all[c];
			if (!x->n)
				die("%s: no samples of %s", names[c], o->op);
			qsort(x->v, x->n, sizeof(double), cmp_double);
			o->med[c] = median(x->v, x->n);
			o->p99[c] = quantile(x->v, x->n, 0.99);
			int n = 0;
			for (int sl = 0; sl < MAXSLOT; sl++) {
				struct vec *y = &o->slot[c][sl];
				if (!y->n)
					continue;
				qsort(y->v, y->n, sizeof(double), cmp_double);
				q[n++] = median(y->v, y->n);
			}
			qsort(q, n, sizeof(double), cmp_double);
			/* The emulator alternates between a fast and a slow phase
			 * (its host's other load), at a time scale of blocks: the
			 * lower quartile of block medians is the fast phase's
			 * per-call time, stable where a median would flip between
			 * the two. */
			o->smed[c] = quantile(q, n, 0.25);
			vs_ref[i][c] = ratio_of(o, c, ref, q);
			if (flo >= 0)
				vs_floor[i][c] = ratio_of(o, c, flo, q);
		}
		noise[i] = 0;
		if (aa >= 0) {
			struct ratio r = vs_ref[i][aa];
			noise[i] = fabs(r.med - 1) > 2 * r.se ? fabs(r.med - 1) : 2 * r.se;
		}
	}

	/* Table 1: medians and ratios, one row per operation. */
	int cols = 1;
	printf("| operation (fast phase, per call) |");
	for (int c = 0; c < nc; c++, cols++)
		printf(" %s |", names[c]);
	for (int c = 0; c < nc; c++)
		if (c != ref && c != flo)
			printf(" %s ÷ %s |", names[c], names[ref]), cols++;
	if (flo >= 0)
		for (int c = 0; c < nc; c++)
			if (c != flo && c != aa)
				printf(" %s ÷ floor |", names[c]), cols++;
	printf(" noise ± |\n|---|");
	for (int c = 0; c < cols; c++)
		printf("---:|");
	printf("\n");
	for (int i = 0; i < nops; i++) {
		struct opdata *o = &ops[i];
		char m[32];
		printf("| %s |", op_label(o->op));
		for (int c = 0; c < nc; c++) {
			fmt_ns(m, sizeof(m), o->smed[c]);
			printf(" %s |", m);
		}
		for (int c = 0; c < nc; c++)
			if (c != ref && c != flo) {
				double r = vs_ref[i][c].med;
				printf(" %.3f%s |", r, c == aa ? "" : r <= 1 + noise[i] ? " ✓" : " ✗");
			}
		if (flo >= 0)
			for (int c = 0; c < nc; c++)
				if (c != flo && c != aa) {
					double r = vs_floor[i][c].med;
					printf(" %.3f%s |", r,
					       c == ref ? "" : r <= 1.03 ? " ✓" : r <= 1.03 + noise[i] ? " ≈" : " ✗");
				}
		printf(" %.1f%% |\n", 100 * noise[i]);
	}

	/* Table 2: every contender's median, p99, and the ratio's spread. */
	printf("\n| operation | contender | fast phase | median of all samples | p99 of all samples | samples |"
	       " ÷ %s per slot: median [quartiles] (slots) | ÷ %s, medians of all samples |\n",
	       names[ref], names[ref]);
	printf("|---|---|---:|---:|---:|---:|---:|---:|\n");
	for (int i = 0; i < nops; i++) {
		struct opdata *o = &ops[i];
		for (int c = 0; c < nc; c++) {
			char sm[32], m[32], p[32], vs[96] = "1", pooled[32] = "1";
			struct ratio r = vs_ref[i][c];
			fmt_ns(sm, sizeof(sm), o->smed[c]);
			fmt_ns(m, sizeof(m), o->med[c]);
			fmt_ns(p, sizeof(p), o->p99[c]);
			if (c != ref) {
				snprintf(vs, sizeof(vs), "%.3f [%.3f–%.3f] (%d)", r.med, r.q1, r.q3, r.n);
				snprintf(pooled, sizeof(pooled), "%.3f", o->med[c] / o->med[ref]);
			}
			printf("| %s | %s | %s | %s | %s | %ld | %s | %s |\n", c == 0 ? op_label(o->op) : "", names[c], sm, m,
			       p, o->all[c].n, vs, pooled);
		}
	}
	/* Machine-readable summary for the guest script's verdicts:
	 * contender=median/p99/ratio-to-ref/ratio-to-floor. */
	for (int i = 0; i < nops; i++) {
		fprintf(stderr, "SUMMARY %s noise=%.4f", ops[i].op, noise[i]);
		for (int c = 0; c < nc; c++)
			fprintf(stderr, " %s=%.0f/%.0f/%.4f/%.4f", names[c], ops[i].smed[c], ops[i].p99[c],
				vs_ref[i][c].med, flo >= 0 ? vs_floor[i][c].med : 0);
		fprintf(stderr, "\n");
	}
	free(q);
	return 0;
}

/* ---- main ---- */

int main(int argc, char **argv)
{
	if (argc < 2)
		die("usage: bench time|count|instr|report ...");
	const char *mode = argv[1];
	if (!strcmp(mode, "report")) {
		if (argc < 5)
			die("usage: bench report DIR ROUNDS CONTENDER... (the first is the reference)");
		return report_mode(argv[2], atoi(argv[3]), argc - 4, argv + 4);
	}
	const char *dev = "rxe0", *out = NULL, *nlist = "1,64,1024,8192", *ready = NULL;
	const char *rin = NULL, *rout = NULL;
	long k = 250, blocks = 16, scans = 16, ecalls = 8192;
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--floor"))
			is_floor = 1;
		else if (i + 1 < argc && !strcmp(a, "-d"))
			dev = argv[++i];
		else if (i + 1 < argc && !strcmp(a, "-k"))
			k = atol(argv[++i]);
		else if (i + 1 < argc && !strcmp(a, "-s"))
			scans = atol(argv[++i]);
		else if (i + 1 < argc && !strcmp(a, "-n"))
			nlist = argv[++i];
		else if (i + 1 < argc && !strcmp(a, "-b"))
			blocks = atol(argv[++i]);
		else if (i + 1 < argc && !strcmp(a, "-i"))
			rin = argv[++i];
		else if (i + 1 < argc && !strcmp(a, "-O"))
			rout = argv[++i];
		else if (i + 1 < argc && !strcmp(a, "-r"))
			ready = argv[++i];
		else if (i + 1 < argc && !strcmp(a, "-e"))
			ecalls = atol(argv[++i]);
		else if (i + 1 < argc && !strcmp(a, "-o"))
			out = argv[++i];
		else
			die("unknown argument %s", a);
	}
	/* The ring and ready FIFOs first, so that even a failure in the set-up
	 * reaches the other processes and the script (see die). */
	if (ready && (ready_fd = open(ready, O_RDWR)) < 0)
		die("%s: %s", ready, strerror(errno));
	if (rin && rout && ((ring_in = open(rin, O_RDWR)) < 0 || (ring_out = open(rout, O_RDWR)) < 0))
		die("ring %s -> %s: %s", rin, rout, strerror(errno));
	choose_verbs();
	if (!strcmp(mode, "count"))
		return count_mode(dev, k);
	if (!strcmp(mode, "instr"))
		return instr_mode(dev, k);
	if (strcmp(mode, "time") || !out || !!rin != !!rout || k < 1 || blocks < 1 || scans < 1)
		die("usage: bench time [--floor] [-d DEV] [-k K] [-b BLOCKS] [-s SCANS] [-n N,...] [-e E]"
		    " [-i RING_IN -O RING_OUT] [-r READY] -o FILE");
	struct env e;
	open_env(&e, dev);
	find_empty_index(&e);
	if (is_floor)
		fprintf(stderr, "floor driver_id %u\n", floor_driver_id);
	return time_mode(&e, k, blocks, scans, nlist, ecalls, out);
}
