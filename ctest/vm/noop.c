/* Attach and detach on a provider without a multicast op: siw (iWARP, RC
 * QPs only; testbed/siw.sh builds it). rdma-core answers from
 * libibverbs/dummy_ops.c: EOPNOTSUPP, no system call, errno untouched.
 * ctest/vm/siw.sh runs this as rdma-core, relinked and preloaded, under
 * strace, and requires identical lines and no system call between the
 * "calls" and "end" markers.
 *
 *   noop DEVICE */
#include "common.h"


static void mc(struct ibv_qp *qp, int attach, const union ibv_gid *g, uint16_t lid, const char *name)
{
	int err, ret = SENTINEL_CALL(&err, attach ? ibv_attach_mcast(qp, g, lid) : ibv_detach_mcast(qp, g, lid));
	printf("%s ret=%d errno=%d\n", name, ret, err);
}

int main(int argc, char **argv)
{
	union ibv_gid g6, g4, nonmc;

	if (argc != 2) {
		fprintf(stderr, "usage: noop DEVICE\n");
		return 2;
	}
	struct ibv_context *ctx = open_by_name(argv[1]);
	fprintf(stderr, "served-by ibv_attach_mcast=%s ibv_detach_mcast=%s\n", owner((void *)ibv_attach_mcast),
		owner((void *)ibv_detach_mcast));
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	if (!pd || !cq) {
		fprintf(stderr, "noop: pd/cq: %s\n", strerror(errno));
		return 2;
	}
	struct ibv_qp *rc = new_qp_on(pd, cq, IBV_QPT_RC);
	struct ibv_qp fake = *rc;
	fake.handle = 0x7fff1234;
	gid_from_hex(&g6, "ff0e0000000000000000000012345678");
	gid_from_hex(&g4, "00000000000000000000ffffef010203");
	gid_from_hex(&nonmc, "fe800000000000000000000000000001");

	/* stdout's first use costs a syscall (glibc's fstat): before the marker. */
	printf("noop %s\n", argv[1]);
	fflush(stdout);
	strace_mark("calls");
	mc(rc, 1, &g6, 0, "attach-ipv6-mgid");
	mc(rc, 1, &g6, 0, "attach-again");
	mc(rc, 0, &g6, 0, "detach");
	mc(rc, 0, &g6, 0, "detach-twice");
	mc(rc, 1, &g4, 0xc001, "attach-ipv4-mapped-lid");
	mc(rc, 0, &g4, 0xc001, "detach-ipv4-mapped-lid");
	mc(rc, 1, &nonmc, 0, "attach-non-multicast");
	mc(rc, 0, &nonmc, 0xffff, "detach-non-multicast");
	mc(&fake, 1, &g6, 0, "attach-bad-handle");
	mc(&fake, 0, &g6, 0, "detach-bad-handle");
	int fd = ctx->cmd_fd;
	ctx->cmd_fd = 1000;
	mc(rc, 1, &g6, 0, "attach-closed-fd");
	mc(rc, 0, &g6, 0, "detach-closed-fd");
	ctx->cmd_fd = fd;
	for (int i = 0, e; i < 1000; i++) {
		if (SENTINEL_CALL(&e, ibv_attach_mcast(rc, &g6, (uint16_t)i)) != EOPNOTSUPP || e != SENTINEL) {
			printf("repeat-%d differs\n", i);
			break;
		}
	}
	printf("repeat-1000 done\n");
	strace_mark("end");

	errno = SENTINEL;
	printf("destroy-qp ret=%d\n", ibv_destroy_qp(rc));
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}
