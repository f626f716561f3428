/* nomem: every allocation rsverbs makes fails, and the verbs still answer
 * as they do with memory (docs/security.md, promise 16;
 * ctest/vm/nomem.sh).
 *
 *   nomem DEVICE NETDEV [fail]
 *
 * This program fails every allocation whose caller lies in
 * librsverbs.so.1, while the window below is open, when "fail" was given
 * (ctest/vm/allocfail.h, shared with faults.c), and counts them either
 * way.
 *
 * The window covers every verb on a fresh context (the first call
 * discovers its route), on the ioctl route: ibv_query_gid,
 * ibv_query_gid_ex, ibv_query_gid_table, then ibv_attach_mcast and
 * ibv_detach_mcast of an IPv4 group and an IPv6 one. Lines: one per call
 * ("query_gid ret=R errno=E ..."), then "rsverbs allocations: N failed,
 * M made". nomem.sh compares the lines of a run with "fail" to those of a
 * run without, under each set of features. Before: the first verb's route
 * discovery allocated (format!) and the failed allocation aborted the
 * process. */
#define PROG_NAME "nomem"
#include "common.h"
#include "allocfail.h"

int main(int argc, char **argv)
{
	union ibv_gid gid, g4, g6;
	struct ibv_gid_entry entry, table[64];
	int err, ret;
	if (argc < 3) {
		fprintf(stderr, "usage: nomem DEVICE NETDEV [fail]\n");
		return 2;
	}
	alloc_fail.nth = argc > 3 && !strcmp(argv[3], "fail") ? ALLOC_FAIL_EVERY : 0;
	struct ibv_context *ctx = open_by_name(argv[1]);
	print_served_by(stderr);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	if (!pd || !cq)
		die("pd/cq");
	struct ibv_qp *qp = new_qp_on(pd, cq, IBV_QPT_UD);
	gid_from_hex(&g4, "00000000000000000000ffffef090909"); /* ::ffff:239.9.9.9 */
	gid_from_hex(&g6, "ff0e0000000000000000000000090909");

	alloc_fail_armed = 1;
	ret = SENTINEL_CALL(&err, ibv_query_gid(ctx, 1, 0, &gid));
	printf("query_gid ret=%d errno=%d gid=%016llx\n", ret, err, (unsigned long long)gid.global.interface_id);
	ret = SENTINEL_CALL(&err, ibv_query_gid_ex(ctx, 1, 1, &entry, 0));
	printf("query_gid_ex ret=%d errno=%d type=%u\n", ret, err, ret ? 0 : entry.gid_type);
	ssize_t n = ibv_query_gid_table(ctx, table, 64, 0);
	printf("query_gid_table ret=%zd\n", n);
	ret = SENTINEL_CALL(&err, ibv_attach_mcast(qp, &g4, 0));
	printf("attach v4 ret=%d errno=%d\n", ret, err);
	ret = SENTINEL_CALL(&err, ibv_attach_mcast(qp, &g6, 0));
	printf("attach v6 ret=%d errno=%d\n", ret, err);
	ret = SENTINEL_CALL(&err, ibv_detach_mcast(qp, &g4, 0));
	printf("detach v4 ret=%d errno=%d\n", ret, err);
	ret = SENTINEL_CALL(&err, ibv_detach_mcast(qp, &g6, 0));
	printf("detach v6 ret=%d errno=%d\n", ret, err);
	alloc_fail_armed = 0;
	fflush(stdout);
	fprintf(stderr, "rsverbs allocations: %d failed, %d made\n", alloc_fail.failed, alloc_fail.seen - alloc_fail.failed);
	/* Explicit membership (rsverbs_mcast_join(3): ENOMEM, never EINVAL), after the count (it
	 * allocates, the verbs above do not): on stderr, "member join ret=R
	 * errno=E" and the leave's. Without memory the join is ENOMEM (12),
	 * never EINVAL ("no such port"), and the leave of what was not joined
	 * EADDRNOTAVAIL (99). */
	typedef int (*member_fn)(struct ibv_context *, uint8_t, const union ibv_gid *, int);
	member_fn rs_join = (member_fn)dlsym(RTLD_DEFAULT, "rsverbs_mcast_join");
	member_fn rs_leave = (member_fn)dlsym(RTLD_DEFAULT, "rsverbs_mcast_leave");
	if (rs_join && rs_leave) {
		int jret, jerr, lret, lerr;
		alloc_fail_armed = 1;
		jret = SENTINEL_CALL(&jerr, rs_join(ctx, 1, &g4, 0));
		lret = SENTINEL_CALL(&lerr, rs_leave(ctx, 1, &g4, 0));
		alloc_fail_armed = 0;
		fprintf(stderr, "member join ret=%d errno=%d\nmember leave ret=%d errno=%d\n", jret, jerr, lret, lerr);
	}
	if (ibv_destroy_qp(qp) || ibv_destroy_cq(cq) || ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		die("teardown");
	return 0;
}
