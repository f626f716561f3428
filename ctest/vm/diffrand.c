/* Differential random test: the same random operations, in the same order,
 * on twin objects -- once through rdma-core, once through rsverbs -- and
 * every result compared.
 *
 * One process opens each device twice. Context A gets its PD, CQ and QPs
 * (UD in RESET/INIT/RTS, RC, UC) and is driven through rdma-core's own
 * ibv_attach_mcast, ibv_detach_mcast and _ibv_query_gid_ex (this program is
 * linked against -libverbs only). Context B gets an identical set and is
 * driven through rsverbs_attach_mcast/_detach_mcast/_query_gid_ex, found with
 * dlopen(RSVERBS_LIB, RTLD_NOW | RTLD_LOCAL), so the two never interpose.
 *
 * Each operation compares the return value, errno (a sentinel is stored
 * before every call) and, for GID queries, the caller's buffer: every byte
 * of the buffer in ioctl mode; with --fallback (run under ctest/vm/noioctl),
 * the first entry_size bytes, since rdma-core's sysfs fallback writes a
 * whole 32-byte entry whatever entry_size is. rsverbs must never write past
 * entry_size, in either mode.
 *
 * The operations: attach/detach with pooled multicast GIDs (ff0e, ff02,
 * ff05, ff01, ff08, ff3e, ff00::, all-ones, ::ffff:224-239.x), non-multicast
 * ones (fe80::1, ::, ::ffff:192.0.2.1, ...) and random ones; LIDs 0, 0xc001,
 * 0xffff, ... and random; UD QPs in RESET/INIT/RTS, RC and UC QPs, and copies
 * of a live ibv_qp whose handle is unknown, all ones, random, or the PD's or
 * the CQ's; query_gid_ex with ports 0/1/2/255/256/random, indices 0..1023,
 * 1024, 2^31, 2^32-1, random, flags 0 (mostly), 1, 0x80000000, random, and
 * entry sizes 32 (mostly), 0, 1, 24, 28, 31, 33, 40, 48, 4096, 65535, 65536,
 * 70000, random. About 1% of the calls are made with the context's cmd_fd
 * replaced by a closed fd (as conform.c does), restored right after.
 *
 * rsverbs caches a route per context in slots indexed by cmd_fd % 256; the
 * second device's rsverbs twin gets an fd in the first one's slot (dup2), so
 * alternating devices exercises the cache's eviction and rediscovery
 * (--no-collide keeps the fds rdma-core chose).
 *
 * Attach state is tracked per QP (both sides), so that an attach never puts
 * a second LID on a GID the QP already holds: that sequence leaves a QP the
 * kernel cannot destroy (docs/observed-6.1.md, "A kernel quirk"). The pool is
 * small, so no QP nears the 8192 groups and no group the 56 QPs. At the end
 * everything still attached is detached (compared too) and every QP must be
 * destroyable on both sides.
 *
 * usage: diffrand [--lib PATH] [--seed N] [--ops N] [--results FILE]
 *                 [--label TEXT] [--fallback] [--no-collide]
 *                 [--closed-fd-pct N] [--verbose] DEV...
 * Then a second phase of --gid-ops operations (default a quarter of --ops)
 * of the two other GID verbs: ibv_query_gid (ports 1/0/2/255, indices
 * 0..1023, -1, 1024, INT_MIN, random) and _ibv_query_gid_table (max_entries
 * 0..8, 2047, 2048, huge; entry sizes 32 mostly, 0, 4, 16, 28, 31, 33, 48,
 * 4096; flags 0 mostly; NULL entries in ioctl mode only, where rdma-core
 * sends it to the kernel; closed fds). It comes after the first phase, so a
 * seed's first phase is the same operations as before it existed; the
 * table's sysfs walk reads every index, so its share is kept small.
 *
 * Defaults: $RSVERBS_LIB, $DIFFRAND_SEED or the time, 10000 ops. --results
 * appends one PASS or FAIL line per operation. Exit 0: no divergence;
 * 1: divergences (each printed, then "REGRESSION SEED n"); 2: setup error;
 * 3: a QP could not be destroyed. */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

#if defined(__GLIBC__) && !__GLIBC_PREREQ(2, 32)
/* glibc < 2.32 (Debian 11's userland) has no strerrorname_np: the summary
 * then names errno values by number. */
static const char *strerrorname_np(int e)
{
	static char name[16];
	snprintf(name, sizeof name, "errno%d", e);
	return name;
}
#endif

#define MAXDEV 2
#define NQP 6     /* UD reset, UD init, UD rts, UD reset, RC, UC */
#define MAXENT 64 /* tracked attachments per QP (the pool is smaller) */
#define CLOSED_FD 1000

typedef int (*mcast_fn)(struct ibv_qp *, const union ibv_gid *, uint16_t);
typedef int (*query_fn)(struct ibv_context *, uint32_t, uint32_t, struct ibv_gid_entry *, uint32_t, size_t);
typedef int (*qgid_fn)(struct ibv_context *, uint8_t, int, union ibv_gid *);
typedef ssize_t (*table_fn)(struct ibv_context *, struct ibv_gid_entry *, size_t, uint32_t, size_t);
static mcast_fn rs_attach, rs_detach;
static query_fn rs_query;
static qgid_fn rs_qgid;
static table_fn rs_table;

/* ---- random numbers: splitmix64 ---- */
static uint64_t rng;
static uint64_t rnd(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}
static uint32_t pick(uint32_t n) { return (uint32_t)(rnd() % n); }
static int chance(int pct) { return pick(100) < (uint32_t)pct; }

/* ---- the twins ---- */
struct entry {
	union ibv_gid gid;
	uint16_t lid;
};
struct qpstate {
	struct entry e[MAXENT];
	int n;
};
struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp[NQP];
	struct qpstate st[NQP];
};
struct dev {
	const char *name;
	struct side s[2]; /* 0: rdma-core, 1: rsverbs */
};
static struct dev devs[MAXDEV];
static int ndevs, collide = 1, closed_pct = 1;
static const char *qp_names[NQP] = { "ud-reset", "ud-init", "ud-rts", "ud-reset2", "rc", "uc" };

/* ---- the group pool and edge-case GIDs ---- */
#define NPOOL 24
static union ibv_gid pool[NPOOL];
static uint16_t pool_lid[NPOOL]; /* lid = f(gid), covering the LID values */
static const char *pool_text[NPOOL] = {
	"ff0e::d1f:1", "ff0e::d1f:2", "ff0e::1234:5678", "ff02::d1f:1", "ff02::1", "ff05::d1f:1",
	"ff05::d1f:2", "ff01::d1f:1", "ff12::d1f:1", "ff3e:30:2001:db8::d1f", "ff00::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
	"::ffff:239.1.2.3", "::ffff:239.1.2.4", "::ffff:239.255.255.255", "::ffff:224.0.0.1", "::ffff:224.0.0.0", "::ffff:230.9.8.7",
	"::ffff:239.0.0.1", "::ffff:225.1.1.1", "ff0e::d1f:3", "ff02::d1f:2", "::ffff:239.2.2.2", "ff08::d1f:1",
};
static const uint16_t lid_values[] = { 0, 0xc001, 0xffff, 0x1234, 1, 0xbfff, 0xfffe, 0x8000 };
#define NEDGE 9
static union ibv_gid edge[NEDGE];
static const char *edge_text[NEDGE] = {
	"fe80::1", "::", "::ffff:192.0.2.1", "::ffff:127.0.0.1", "2001:db8::1",
	"::1", "::ffff:240.0.0.1", "::ffff:223.255.255.255", "feff::1",
};

static void parse_gid(union ibv_gid *g, const char *s)
{
	if (inet_pton(AF_INET6, s, g->raw) != 1) {
		fprintf(stderr, "diffrand: bad gid %s\n", s);
		exit(2);
	}
}

/* The kernel's rdma_is_multicast_addr(). */
static int is_mcast(const union ibv_gid *g)
{
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	if (!memcmp(g->raw, mapped, 12))
		return (g->raw[12] & 0xf0) == 0xe0;
	return g->raw[0] == 0xff;
}

/* ---- state tracking ---- */
static int find_ent(struct qpstate *st, const union ibv_gid *g, int lid)
{
	for (int i = 0; i < st->n; i++)
		if (!memcmp(st->e[i].gid.raw, g->raw, 16) && (lid < 0 || st->e[i].lid == lid))
			return i;
	return -1;
}
static void track(struct qpstate *st, int attach, const union ibv_gid *g, uint16_t lid)
{
	int i = find_ent(st, g, lid);
	if (attach && i < 0) {
		if (st->n == MAXENT) {
			fprintf(stderr, "diffrand: attachment table full\n");
			exit(2);
		}
		st->e[st->n].gid = *g;
		st->e[st->n++].lid = lid;
	} else if (!attach && i >= 0) {
		st->e[i] = st->e[--st->n];
	}
}

/* ---- operations ---- */
enum kind { K_ATTACH, K_DETACH, K_QUERY, K_CLEANUP, K_QGID, K_TABLE, NKIND };
static const char *kind_names[NKIND] = { "attach", "detach", "query_gid_ex", "cleanup-detach", "query_gid",
					 "query_gid_table" };
/* The kinds that fill a buffer of o->size bytes, compared. */
static int is_query(enum kind k) { return k == K_QUERY || k == K_QGID || k == K_TABLE; }

enum fake { F_NONE, F_UNKNOWN, F_ALLONES, F_RANDOM, F_PD, F_CQ, NFAKE };
static const char *fake_names[NFAKE] = { "", "fake(handle=0x7fff1234)", "fake(handle=0xffffffff)",
					  "fake(handle=random)", "fake(handle=pd)", "fake(handle=cq)" };

struct op {
	enum kind kind;
	int dev, qp;
	enum fake fake;
	uint32_t rand_handle;
	int closed_fd;
	union ibv_gid gid;
	uint16_t lid;
	uint32_t port, idx, flags;
	size_t size;
	unsigned char fill;
	/* K_TABLE: max_entries, entry_size (o->size is the caller's bytes),
	 * NULL entries. */
	size_t max, esz;
	int null_entries;
};

struct result {
	int ret, err;
	unsigned char *buf;
};

static size_t cap_of(size_t size) { return (size < 64 ? 64 : size) + 64; }

static void describe(const struct op *o, char *s, size_t n)
{
	char g[INET6_ADDRSTRLEN];
	if (o->kind == K_QUERY) {
		snprintf(s, n, "%s %s%s port=%u idx=%u flags=%#x entry_size=%zu", kind_names[o->kind],
			 devs[o->dev].name, o->closed_fd ? " closed-fd" : "", o->port, o->idx, o->flags, o->size);
		return;
	}
	if (o->kind == K_QGID) {
		snprintf(s, n, "%s %s%s port=%u index=%d", kind_names[o->kind], devs[o->dev].name,
			 o->closed_fd ? " closed-fd" : "", o->port, (int)o->idx);
		return;
	}
	if (o->kind == K_TABLE) {
		snprintf(s, n, "%s %s%s%s max_entries=%zu flags=%#x entry_size=%zu", kind_names[o->kind],
			 devs[o->dev].name, o->closed_fd ? " closed-fd" : "", o->null_entries ? " entries=NULL" : "",
			 o->max, o->flags, o->esz);
		return;
	}
	inet_ntop(AF_INET6, o->gid.raw, g, sizeof(g));
	snprintf(s, n, "%s %s %s%s%s%s gid=%s lid=%#x", kind_names[o->kind], devs[o->dev].name, qp_names[o->qp],
		 o->fake ? " " : "", fake_names[o->fake], o->closed_fd ? " closed-fd" : "", g, o->lid);
}

static void gen_gid(union ibv_gid *g, int *pooled)
{
	*pooled = 0;
	if (chance(70)) {
		*g = pool[pick(NPOOL)];
		*pooled = 1;
	} else if (chance(60)) {
		*g = edge[pick(NEDGE)];
	} else {
		/* random bytes, never multicast: attach state stays in the pool */
		for (int i = 0; i < 16; i += 8) {
			uint64_t r = rnd();
			memcpy(g->raw + i, &r, 8);
		}
		if (chance(30)) { /* IPv4-mapped, unicast */
			memset(g->raw, 0, 10);
			g->raw[10] = g->raw[11] = 0xff;
		}
		if (is_mcast(g))
			g->raw[0] = 0x20, g->raw[12] ^= 0x80;
	}
}

static uint16_t gen_lid(void)
{
	return chance(75) ? lid_values[pick(sizeof(lid_values) / sizeof(*lid_values))] : (uint16_t)rnd();
}

static void gen(struct op *o)
{
	memset(o, 0, sizeof(*o));
	o->dev = pick(ndevs);
	o->fill = (unsigned char)rnd();
	o->closed_fd = chance(closed_pct);
	uint32_t k = pick(100);
	if (k < 35 || k >= 65) {
		o->kind = k < 35 ? K_ATTACH : K_DETACH;
		o->qp = chance(80) ? pick(4) : 4 + pick(2); /* mostly UD */
		if (chance(4)) {
			o->fake = 1 + pick(NFAKE - 1);
			o->rand_handle = (uint32_t)rnd() | 0x10000; /* never a live handle */
		}
		int pooled, pi = -1;
		gen_gid(&o->gid, &pooled);
		if (pooled)
			for (int i = 0; i < NPOOL; i++)
				if (!memcmp(pool[i].raw, o->gid.raw, 16))
					pi = i;
		o->lid = pi >= 0 ? pool_lid[pi] : gen_lid();
		if (chance(20))
			o->lid = gen_lid();
		if (o->kind == K_ATTACH && !o->fake && !o->closed_fd) {
			/* Never a second LID on a GID this QP holds (either side). */
			for (int s = 0; s < 2; s++) {
				struct qpstate *st = &devs[o->dev].s[s].st[o->qp];
				int i = find_ent(st, &o->gid, -1);
				if (i >= 0)
					o->lid = st->e[i].lid;
			}
		} else if (o->kind == K_DETACH && chance(60)) {
			/* mostly detach something that is attached */
			struct qpstate *st = &devs[o->dev].s[0].st[o->qp];
			if (st->n) {
				struct entry *e = &st->e[pick(st->n)];
				o->gid = e->gid;
				o->lid = e->lid;
			}
		}
	} else {
		o->kind = K_QUERY;
		static const uint32_t ports[] = { 0, 2, 255, 256, 0xffffffff };
		o->port = chance(85) ? 1 : chance(80) ? ports[pick(5)] : (uint32_t)rnd();
		static const uint32_t idxs[] = { 1024, 0x80000000u, 0xffffffffu, 1025, 0x10000 };
		uint32_t r = pick(100);
		o->idx = r < 60 ? pick(16) : r < 85 ? pick(1024) : r < 95 ? idxs[pick(5)] : (uint32_t)rnd();
		static const uint32_t flags[] = { 1, 0x80000000u, 2, 0xffffffffu };
		o->flags = chance(90) ? 0 : chance(80) ? flags[pick(4)] : (uint32_t)rnd();
		static const size_t sizes[] = { 0, 28, 31, 33, 40, 65535, 65536, 1, 24, 48, 4096, 70000 };
		o->size = chance(80) ? 32 : chance(85) ? sizes[pick(12)] : pick(100);
	}
}

/* An operation of the second phase: ibv_query_gid or _ibv_query_gid_table. */
static int fallback;
static void gen_gid_op(struct op *o)
{
	memset(o, 0, sizeof(*o));
	o->dev = pick(ndevs);
	o->fill = (unsigned char)rnd();
	o->closed_fd = chance(closed_pct);
	/* In the fallback modes a table call walks every index through sysfs
	 * (tens of milliseconds under TCG): 2% there, 10% on the ioctl path. */
	if (chance(fallback ? 98 : 90)) {
		o->kind = K_QGID;
		static const uint8_t ports[] = { 0, 2, 255 };
		o->port = chance(90) ? 1 : ports[pick(3)];
		static const int idxs[] = { -1, 1024, 1025, INT32_MIN, 0x7fffffff };
		uint32_t r = pick(100);
		o->idx = r < 60 ? pick(16) : r < 85 ? pick(1024) : r < 95 ? (uint32_t)idxs[pick(5)] : (uint32_t)rnd();
		o->size = sizeof(union ibv_gid);
		return;
	}
	o->kind = K_TABLE;
	static const size_t maxes[] = { 2047, 2048, SIZE_MAX / 32, SIZE_MAX, 64 };
	o->max = chance(80) ? pick(9) : maxes[pick(5)];
	static const size_t sizes[] = { 0, 4, 16, 28, 31, 33, 48, 4096 };
	o->esz = chance(75) ? sizeof(struct ibv_gid_entry) : sizes[pick(8)];
	static const uint32_t flags[] = { 1, 0x80000000u };
	o->flags = chance(90) ? 0 : flags[pick(2)];
	/* NULL entries: rdma-core's sysfs walk would store through it. */
	o->null_entries = !fallback && chance(5);
	/* The caller's bytes: max * esz, at most 64 KiB (huge max_entries: the
	 * ioctl is refused, and the fallback writes only the valid entries). */
	o->size = o->esz && o->max > 65536 / o->esz ? 65536 : o->esz * o->max;
}

/* The call of `o` on side s (0 = rdma-core, 1 = rsverbs), on `qp` (attach,
 * detach) or `ctx` (query, into r->buf). */
static int call_op(const struct op *o, int s, struct ibv_context *ctx, struct ibv_qp *qp, struct result *r)
{
	switch (o->kind) {
	case K_ATTACH:
		return s ? rs_attach(qp, &o->gid, o->lid) : ibv_attach_mcast(qp, &o->gid, o->lid);
	case K_DETACH:
	case K_CLEANUP:
		return s ? rs_detach(qp, &o->gid, o->lid) : ibv_detach_mcast(qp, &o->gid, o->lid);
	case K_QUERY:
		return s ? rs_query(ctx, o->port, o->idx, (struct ibv_gid_entry *)r->buf, o->flags, o->size)
			 : _ibv_query_gid_ex(ctx, o->port, o->idx, (struct ibv_gid_entry *)r->buf, o->flags, o->size);
	case K_QGID:
		return s ? rs_qgid(ctx, (uint8_t)o->port, (int)o->idx, (union ibv_gid *)r->buf)
			 : ibv_query_gid(ctx, (uint8_t)o->port, (int)o->idx, (union ibv_gid *)r->buf);
	case K_TABLE: {
		struct ibv_gid_entry *e = o->null_entries ? NULL : (struct ibv_gid_entry *)r->buf;
		/* small counts or -errno: an int holds them */
		return (int)(s ? rs_table(ctx, e, o->max, o->flags, o->esz)
			       : _ibv_query_gid_table(ctx, e, o->max, o->flags, o->esz));
	}
	default:
		return r->ret; /* no call */
	}
}

/* Runs `o` on side s (0 = rdma-core, 1 = rsverbs). */
static void exec_op(const struct op *o, int s, struct result *r)
{
	struct side *sd = &devs[o->dev].s[s];
	struct ibv_context *ctx = sd->ctx;
	int saved_fd = ctx->cmd_fd;
	struct ibv_qp fake, *qp = NULL;

	if (!is_query(o->kind)) {
		qp = sd->qp[o->qp];
		if (o->fake) {
			fake = *qp;
			fake.handle = o->fake == F_UNKNOWN   ? 0x7fff1234u
				      : o->fake == F_ALLONES ? 0xffffffffu
				      : o->fake == F_RANDOM  ? o->rand_handle
				      : o->fake == F_PD      ? sd->pd->handle
							     : sd->cq->handle;
			qp = &fake;
		}
	} else {
		memset(r->buf, o->fill, cap_of(o->size));
	}
	if (o->closed_fd)
		ctx->cmd_fd = CLOSED_FD;
	r->ret = SENTINEL_CALL(&r->err, call_op(o, s, ctx, qp, r));
	ctx->cmd_fd = saved_fd;
	/* A real (not fake) QP whose call succeeded changed state. Fake QPs
	 * carry unknown or wrong-type handles, so they change nothing. */
	if (!is_query(o->kind) && !o->fake && !o->closed_fd && r->ret == 0)
		track(&sd->st[o->qp], o->kind == K_ATTACH, &o->gid, o->lid);
}

/* ---- bookkeeping ---- */
static int verbose;
static FILE *results;
static const char *label = "diffrand";
static uint64_t seed;
static long nops, ndiv, overruns_ref;
static long count[NKIND], outcome[NKIND][3]; /* 0, ENODATA, other errno */
#define MAXERR 160
static long errcount[NKIND][MAXERR];

static void hexdump(FILE *f, const unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n && i < 48; i++)
		fprintf(f, "%02x", b[i]);
	if (n > 48)
		fprintf(f, "...(%zu bytes)", n);
}

/* One op on both sides; returns 1 when they agree. */
static int run_op(struct op *o, struct result *a, struct result *b)
{
	char desc[256];
	const char *why = NULL;
	size_t cap = cap_of(o->size), cmp = is_query(o->kind) ? cap : 0;
	size_t past = cap;

	exec_op(o, 0, a);
	exec_op(o, 1, b);
	nops++;
	count[o->kind]++;
	/* The error as a positive errno: ibv_query_gid's is in errno,
	 * _ibv_query_gid_table's is its negative return; a count is 0. */
	int code = o->kind == K_QGID ? (a->ret ? a->err : 0) : o->kind == K_TABLE ? (a->ret < 0 ? -a->ret : 0) : a->ret;
	outcome[o->kind][code == 0 ? 0 : code == ENODATA ? 1 : 2]++;
	if (code >= 0 && code < MAXERR)
		errcount[o->kind][code]++;
	if (is_query(o->kind)) {
		size_t first = o->size < cap ? o->size : cap;
		for (size_t i = first; i < cap; i++)
			if (b->buf[i] != o->fill) {
				past = i;
				break;
			}
		int ref_over = 0;
		for (size_t i = first; i < cap; i++)
			if (a->buf[i] != o->fill)
				ref_over = 1;
		overruns_ref += ref_over;
		if (fallback)
			cmp = first;
	}
	describe(o, desc, sizeof(desc));
	if (a->ret != b->ret)
		why = "return value";
	else if (a->err != b->err)
		why = "errno";
	else if (past != cap)
		why = "rsverbs wrote past entry_size";
	else if (cmp && memcmp(a->buf, b->buf, cmp))
		why = "entry bytes";
	if (!why) {
		if (results)
			fprintf(results, "PASS %s seed=%llu op=%ld %s ret=%d errno=%d\n", label,
				(unsigned long long)seed, nops, kind_names[o->kind], a->ret, a->err);
		if (verbose)
			printf("op %ld: %s: ret=%d errno=%d\n", nops, desc, a->ret, a->err);
		return 1;
	}
	ndiv++;
	fprintf(stderr, "DIVERGENCE %s seed=%llu op=%ld (%s): %s\n", label, (unsigned long long)seed, nops, why,
		desc);
	fprintf(stderr, "  rdma-core: ret=%d errno=%d", a->ret, a->err);
	if (is_query(o->kind)) {
		fprintf(stderr, " bytes=");
		hexdump(stderr, a->buf, cmp ? cmp : o->size);
	}
	fprintf(stderr, "\n  rsverbs:   ret=%d errno=%d", b->ret, b->err);
	if (is_query(o->kind)) {
		fprintf(stderr, " bytes=");
		hexdump(stderr, b->buf, cmp ? cmp : o->size);
		if (past != cap)
			fprintf(stderr, " (first byte written past entry_size: %zu)", past);
	}
	fprintf(stderr, "\n");
	if (results)
		fprintf(results, "FAIL %s seed=%llu op=%ld %s: %s: rdma-core ret=%d errno=%d, rsverbs ret=%d errno=%d\n",
			label, (unsigned long long)seed, nops, why, desc, a->ret, a->err, b->ret, b->err);
	return 0;
}


static void die(const char *what)
{
	fprintf(stderr, "diffrand: %s: %s\n", what, strerror(errno));
	exit(2);
}

static struct ibv_qp *new_qp(struct side *sd, enum ibv_qp_type t, enum ibv_qp_state state, int slot)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = sd->cq, .recv_cq = sd->cq, .qp_type = t,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(sd->pd, &ia);
	/* A provider without RC or UC QPs (the test bed's sib: UD only): a UD
	 * QP in that slot, named so (the same in both libraries' runs). */
	if (!qp && errno == EOPNOTSUPP && t != IBV_QPT_UD) {
		ia.qp_type = IBV_QPT_UD;
		qp = ibv_create_qp(sd->pd, &ia);
		qp_names[slot] = t == IBV_QPT_RC ? "ud-for-rc" : "ud-for-uc";
	}
	if (!qp)
		die("ibv_create_qp");
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qkey = 0x11 };
	if (state >= IBV_QPS_INIT &&
	    ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		die("modify INIT");
	a.qp_state = IBV_QPS_RTR;
	if (state >= IBV_QPS_RTR && ibv_modify_qp(qp, &a, IBV_QP_STATE))
		die("modify RTR");
	a.qp_state = IBV_QPS_RTS;
	if (state >= IBV_QPS_RTS && ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("modify RTS");
	return qp;
}

static void open_twins(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct dev *d = &devs[ndevs++];
	d->name = name;
	for (int s = 0; s < 2; s++) {
		struct side *sd = &d->s[s];
		for (int i = 0; list && list[i]; i++)
			if (!strcmp(ibv_get_device_name(list[i]), name))
				sd->ctx = ibv_open_device(list[i]);
		if (!sd->ctx)
			die(name);
		sd->pd = ibv_alloc_pd(sd->ctx);
		sd->cq = ibv_create_cq(sd->ctx, 16, NULL, NULL, 0);
		if (!sd->pd || !sd->cq)
			die("pd/cq");
		sd->qp[0] = new_qp(sd, IBV_QPT_UD, IBV_QPS_RESET, 0);
		sd->qp[1] = new_qp(sd, IBV_QPT_UD, IBV_QPS_INIT, 1);
		sd->qp[2] = new_qp(sd, IBV_QPT_UD, IBV_QPS_RTS, 2);
		sd->qp[3] = new_qp(sd, IBV_QPT_UD, IBV_QPS_RESET, 3);
		sd->qp[4] = new_qp(sd, IBV_QPT_RC, IBV_QPS_RESET, 4);
		sd->qp[5] = new_qp(sd, IBV_QPT_UC, IBV_QPS_RESET, 5);
	}
	/* rsverbs caches a route per context in slots indexed by cmd_fd % 256:
	 * give the second device's rsverbs twin an fd in the first one's slot,
	 * so that alternating devices exercises the cache's eviction path. */
	if (collide && ndevs == 2) {
		struct ibv_context *c0 = devs[0].s[1].ctx, *c1 = d->s[1].ctx;
		int target = c0->cmd_fd + 256;
		if (dup2(c1->cmd_fd, target) != target)
			die("dup2");
		close(c1->cmd_fd);
		c1->cmd_fd = target;
	}
	ibv_free_device_list(list);
}

/* parse_opts' `rest`: a device, whose twins are opened there and then (the
 * first MAXDEV devices), or an unknown option (exit 2). */
static int dev_arg(const char *arg, int last)
{
	if (arg[0] == '-') {
		fprintf(stderr, "diffrand: unknown option %s\n", arg);
		return 2;
	}
	if (ndevs < MAXDEV)
		open_twins(arg);
	return 0;
}

int main(int argc, char **argv)
{
	const char *lib = getenv("RSVERBS_LIB"), *resfile = NULL, *seed_arg = getenv("DIFFRAND_SEED");
	long want = 10000, gid_ops = -1;
	int have_seed = 0;
	const struct opt opts[] = {
		{ .name = "--lib", .str = &lib },
		{ .name = "--seed", .str = &seed_arg },
		{ .name = "--ops", .lnum = &want },
		{ .name = "--gid-ops", .lnum = &gid_ops },
		{ .name = "--results", .str = &resfile },
		{ .name = "--label", .str = &label },
		{ .name = "--fallback", .on = &fallback },
		{ .name = "--no-collide", .off = &collide },
		{ .name = "--closed-fd-pct", .num = &closed_pct },
		{ .name = "--verbose", .on = &verbose },
		{ .name = NULL },
	};

	if (parse_opts(argc, argv, 1, opts, dev_arg))
		return 2;
	if (seed_arg)
		seed = strtoull(seed_arg, NULL, 0), have_seed = 1;
	if (!ndevs || !lib) {
		fprintf(stderr, "usage: diffrand [--lib RSVERBS_LIB] [--seed N] [--ops N] [--gid-ops N] [--results FILE] "
				"[--label TEXT] [--fallback] [--no-collide] [--closed-fd-pct N] [--verbose] DEV...\n");
		return 2;
	}
	if (!have_seed) {
		struct timespec t;
		clock_gettime(CLOCK_REALTIME, &t);
		seed = (uint64_t)t.tv_sec * 1000003u ^ (uint64_t)t.tv_nsec;
	}
	rng = seed;

	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "diffrand: dlopen %s: %s\n", lib, dlerror());
		return 2;
	}
	rs_attach = (mcast_fn)dlsym(h, "rsverbs_attach_mcast");
	rs_detach = (mcast_fn)dlsym(h, "rsverbs_detach_mcast");
	rs_query = (query_fn)dlsym(h, "rsverbs_query_gid_ex");
	rs_qgid = (qgid_fn)dlsym(h, "rsverbs_query_gid");
	rs_table = (table_fn)dlsym(h, "rsverbs_query_gid_table");
	if (!rs_attach || !rs_detach || !rs_query || !rs_qgid || !rs_table) {
		fprintf(stderr, "diffrand: dlsym: %s\n", dlerror());
		return 2;
	}
	printf("served-by reference: ibv_attach_mcast=%s ibv_detach_mcast=%s _ibv_query_gid_ex=%s\n",
	       owner((void *)ibv_attach_mcast), owner((void *)ibv_detach_mcast), owner((void *)_ibv_query_gid_ex));
	printf("served-by twin: rsverbs_attach_mcast=%s rsverbs_detach_mcast=%s rsverbs_query_gid_ex=%s\n",
	       owner((void *)rs_attach), owner((void *)rs_detach), owner((void *)rs_query));
	printf("served-by reference-gid: ibv_query_gid=%s _ibv_query_gid_table=%s\n", owner((void *)ibv_query_gid),
	       owner((void *)_ibv_query_gid_table));
	printf("served-by twin-gid: rsverbs_query_gid=%s rsverbs_query_gid_table=%s\n", owner((void *)rs_qgid),
	       owner((void *)rs_table));
	if (resfile && !(results = fopen(resfile, "a")))
		die(resfile);

	for (int i = 0; i < NPOOL; i++) {
		parse_gid(&pool[i], pool_text[i]);
		if (!is_mcast(&pool[i])) {
			fprintf(stderr, "diffrand: pool gid %s is not multicast\n", pool_text[i]);
			return 2;
		}
		/* f(gid): every LID value is some group's LID */
		pool_lid[i] = i < 8 ? lid_values[i] : i % 3 == 0 ? 0 : (uint16_t)(0x4000 + i * 0x111);
	}
	for (int i = 0; i < NEDGE; i++)
		parse_gid(&edge[i], edge_text[i]);

	struct result a = { .buf = malloc(cap_of(70000)) }, b = { .buf = malloc(cap_of(70000)) };
	struct op o;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < want; i++) {
		gen(&o);
		run_op(&o, &a, &b);
	}
	/* The second phase: ibv_query_gid and _ibv_query_gid_table. */
	if (gid_ops < 0)
		gid_ops = want / 4;
	for (long i = 0; i < gid_ops; i++) {
		gen_gid_op(&o);
		run_op(&o, &a, &b);
	}
	/* Detach everything either side still holds, then every QP must go. */
	for (int d = 0; d < ndevs; d++)
		for (int q = 0; q < NQP; q++) {
			struct qpstate *st0 = &devs[d].s[0].st[q], *st1 = &devs[d].s[1].st[q];
			while (st0->n || st1->n) {
				memset(&o, 0, sizeof(o));
				o.kind = K_CLEANUP;
				o.dev = d;
				o.qp = q;
				struct entry e = st0->n ? st0->e[0] : st1->e[0];
				o.gid = e.gid;
				o.lid = e.lid;
				run_op(&o, &a, &b);
				/* a divergent side keeps its entry: drop it here */
				int i0 = find_ent(st0, &e.gid, e.lid), i1 = find_ent(st1, &e.gid, e.lid);
				if (i0 >= 0)
					st0->e[i0] = st0->e[--st0->n];
				if (i1 >= 0)
					st1->e[i1] = st1->e[--st1->n];
			}
		}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	int undestroyed = 0;
	for (int d = 0; d < ndevs; d++)
		for (int s = 0; s < 2; s++) {
			struct side *sd = &devs[d].s[s];
			for (int q = 0; q < NQP; q++) {
				int r = ibv_destroy_qp(sd->qp[q]);
				if (r) {
					fprintf(stderr, "diffrand: %s side %d: destroy %s: %s\n", devs[d].name, s,
						qp_names[q], strerror(r));
					undestroyed++;
				}
			}
			ibv_destroy_cq(sd->cq);
			ibv_dealloc_pd(sd->pd);
			ibv_close_device(sd->ctx);
		}

	printf("%s: seed %llu: %ld ops in %.1f s, %ld divergences%s\n", label, (unsigned long long)seed, nops,
	       (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9, ndiv,
	       fallback ? " (fallback: entry bytes compared up to entry_size)" : "");
	for (int k = 0; k < NKIND; k++) {
		printf("%s:   %-15s %6ld ops: ok=%ld enodata=%ld error=%ld [", label, kind_names[k], count[k],
		       outcome[k][0], outcome[k][1], outcome[k][2]);
		for (int e = 1; e < MAXERR; e++)
			if (errcount[k][e])
				printf(" %s=%ld", strerrorname_np(e) ? strerrorname_np(e) : "?", errcount[k][e]);
		printf(" ]\n");
	}
	printf("%s:   rdma-core wrote past entry_size in %ld queries\n", label, overruns_ref);
	if (undestroyed)
		printf("%s: %d QPs could not be destroyed\n", label, undestroyed);
	if (results)
		fclose(results);
	if (ndiv)
		printf("REGRESSION SEED %llu\n", (unsigned long long)seed);
	return ndiv ? 1 : undestroyed ? 3 : 0;
}
