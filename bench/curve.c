/* curve: how the cost of attach+detach grows with the work, for the cost
 * curves of `make bench` (bench/curves.sh). Built like bench.c, twice:
 * `curve` (rdma-core; with LD_PRELOAD=librsverbs.so.1: rsverbs preloaded)
 * and `curve.rsv` (relinked). One process measures one point:
 *
 *   curve groups N   -d DEV -r REPS   pairs on one QP that has N-1 other groups
 *   curve qps N      -d DEV -r REPS   pairs of one QP on a group with N-1 other QPs
 *   curve contexts N -d DEV -r REPS   pairs rotating over N open contexts
 *   curve threads N  -d DEV -r REPS   N threads, REPS pairs each, own QP each
 *
 * Prints "ns_per_pair X" (the median of the per-pair times; for threads:
 * the wall time of all pairs divided by their number, i.e. inverse
 * throughput). Every call's result is checked; a wrong answer fails the
 * run. "served-by" on stderr names the library that serves the verbs. */
#include "../ctest/vm/common.h"
#include "timing.h"
#include <pthread.h>

static const char *dev_name = "rxe0";
static long reps = 2000;

static void fail(const char *what, int r)
{
	fprintf(stderr, "curve: %s: %d (%s)\n", what, r, strerror(r));
	exit(1);
}

static union ibv_gid grp(uint8_t tag, uint32_t i)
{
	union ibv_gid g = { .raw = { 0xff, 0x0e } };
	g.raw[11] = tag;
	g.raw[12] = i >> 24, g.raw[13] = i >> 16, g.raw[14] = i >> 8, g.raw[15] = i;
	return g;
}

struct obj {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
};

static struct obj open_obj(void)
{
	struct obj o = { .ctx = open_by_name(dev_name) };
	o.pd = ibv_alloc_pd(o.ctx);
	o.cq = ibv_create_cq(o.ctx, 4, NULL, NULL, 0);
	if (!o.pd || !o.cq)
		fail("pd/cq", errno);
	return o;
}

static void pair(struct ibv_qp *qp, const union ibv_gid *g)
{
	int r = ibv_attach_mcast(qp, g, 0);
	if (r)
		fail("attach", r);
	r = ibv_detach_mcast(qp, g, 0);
	if (r)
		fail("detach", r);
}

/* Times `reps` pairs, the i-th on qps[i % nqp]; returns the median in ns. */
static double time_pairs(struct ibv_qp **qps, int nqp, const union ibv_gid *g)
{
	uint64_t *dt = calloc(reps, sizeof(*dt));
	for (long i = 0; i < reps / 10; i++) /* warm-up: routes, caches */
		pair(qps[i % nqp], g);
	uint64_t n0 = mono_ns(), t0 = ticks();
	for (long i = 0; i < reps; i++) {
		uint64_t a = ticks();
		pair(qps[i % nqp], g);
		dt[i] = ticks() - a;
	}
	double ns_per_tick = (double)(mono_ns() - n0) / (double)(ticks() - t0);
	qsort(dt, reps, sizeof(*dt), cmp_u64);
	double med = dt[reps / 2] * ns_per_tick;
	free(dt);
	return med;
}

struct thr {
	struct ibv_qp *qp;
	union ibv_gid g;
	pthread_barrier_t *bar;
};

static void *thread_main(void *arg)
{
	struct thr *t = arg;
	pthread_barrier_wait(t->bar);
	for (long i = 0; i < reps; i++)
		pair(t->qp, &t->g);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: curve groups|qps|contexts|threads N [-d DEV] [-r REPS]\n");
		return 2;
	}
	const char *kind = argv[1];
	int n = atoi(argv[2]);
	for (int i = 3; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-d"))
			dev_name = argv[i + 1];
		else if (!strcmp(argv[i], "-r"))
			reps = atol(argv[i + 1]);
	}
	if (n < 1 || reps < 10)
		return 2;
	print_served_by(stderr);
	double ns;
	union ibv_gid g = grp(2, 0);
	if (!strcmp(kind, "groups")) {
		struct obj o = open_obj();
		struct ibv_qp *qp = new_qp_on(o.pd, o.cq, IBV_QPT_UD);
		for (int i = 0; i < n - 1; i++) {
			union ibv_gid other = grp(1, i);
			int r = ibv_attach_mcast(qp, &other, 0);
			if (r)
				fail("setup attach", r);
		}
		ns = time_pairs(&qp, 1, &g);
	} else if (!strcmp(kind, "qps")) {
		struct obj o = open_obj();
		struct ibv_qp *qp = new_qp_on(o.pd, o.cq, IBV_QPT_UD);
		for (int i = 0; i < n - 1; i++) {
			int r = ibv_attach_mcast(new_qp_on(o.pd, o.cq, IBV_QPT_UD), &g, 0);
			if (r)
				fail("setup attach", r);
		}
		ns = time_pairs(&qp, 1, &g);
	} else if (!strcmp(kind, "contexts")) {
		struct ibv_qp **qps = calloc(n, sizeof(*qps));
		for (int i = 0; i < n; i++) {
			struct obj o = open_obj();
			qps[i] = new_qp_on(o.pd, o.cq, IBV_QPT_UD);
		}
		ns = time_pairs(qps, n, &g);
	} else if (!strcmp(kind, "threads")) {
		struct obj o = open_obj();
		pthread_t *tid = calloc(n, sizeof(*tid));
		struct thr *t = calloc(n, sizeof(*t));
		pthread_barrier_t bar;
		pthread_barrier_init(&bar, NULL, n + 1);
		for (int i = 0; i < n; i++) {
			t[i] = (struct thr){ new_qp_on(o.pd, o.cq, IBV_QPT_UD), grp(3, i), &bar };
			pair(t[i].qp, &t[i].g); /* warm-up */
			pthread_create(&tid[i], NULL, thread_main, &t[i]);
		}
		pthread_barrier_wait(&bar);
		uint64_t t0 = mono_ns();
		for (int i = 0; i < n; i++)
			pthread_join(tid[i], NULL);
		ns = (double)(mono_ns() - t0) / ((double)reps * n);
	} else {
		fprintf(stderr, "curve: unknown kind %s\n", kind);
		return 2;
	}
	printf("ns_per_pair %.1f\n", ns);
	return 0;
}
