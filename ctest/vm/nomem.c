/* nomem: every allocation rsverbs makes fails, and the verbs still answer
 * as they do with memory (docs/security.md, promise 16;
 * ctest/vm/nomem.sh).
 *
 *   nomem DEVICE NETDEV [fail]
 *
 * This program defines malloc, calloc, realloc and posix_memalign: the
 * dynamic linker binds every object's calls to them (the executable comes
 * first in the lookup scope). Each forwards to glibc's __libc_* entry,
 * unless "fail" was given, the window below is open, and the caller's
 * return address lies in librsverbs.so.1 (dladdr): then it fails (NULL,
 * ENOMEM) and is counted. rdma-core's own allocations never fail, so the
 * objects it creates are the same in both runs.
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
#include <dlfcn.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static int armed, fail_mode;
static volatile int failed, made;

/* Whether the allocation is rsverbs' and must fail (counted either way). */
static int ours_fails(void *caller)
{
	Dl_info info;
	if (!armed)
		return 0;
	if (!dladdr(caller, &info) || !info.dli_fname || !strstr(info.dli_fname, "librsverbs"))
		return 0;
	if (!fail_mode) {
		made++;
		return 0;
	}
	failed++;
	errno = ENOMEM;
	return 1;
}

void *malloc(size_t n)
{
	return ours_fails(__builtin_return_address(0)) ? NULL : __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
	return ours_fails(__builtin_return_address(0)) ? NULL : __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
	return ours_fails(__builtin_return_address(0)) ? NULL : __libc_realloc(p, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
	if (ours_fails(__builtin_return_address(0)))
		return ENOMEM;
	*out = __libc_memalign(align, n);
	return *out ? 0 : ENOMEM;
}

int main(int argc, char **argv)
{
	union ibv_gid gid, g4, g6;
	struct ibv_gid_entry entry, table[64];
	int err, ret;
	if (argc < 3) {
		fprintf(stderr, "usage: nomem DEVICE NETDEV [fail]\n");
		return 2;
	}
	fail_mode = argc > 3 && !strcmp(argv[3], "fail");
	struct ibv_context *ctx = open_by_name(argv[1]);
	print_served_by(stderr);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	if (!pd || !cq)
		die("pd/cq");
	struct ibv_qp *qp = new_qp_on(pd, cq, IBV_QPT_UD);
	gid_from_hex(&g4, "00000000000000000000ffffef090909"); /* ::ffff:239.9.9.9 */
	gid_from_hex(&g6, "ff0e0000000000000000000000090909");

	armed = 1;
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
	armed = 0;
	fflush(stdout);
	fprintf(stderr, "rsverbs allocations: %d failed, %d made\n", failed, made);
	if (ibv_destroy_qp(qp) || ibv_destroy_cq(cq) || ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		die("teardown");
	return 0;
}
