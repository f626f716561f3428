/* The write() fast path of attach/detach, where credentials change: a
 * forked child, and a process that changed its uid after opening the
 * device. The kernel refuses write() on a uverbs fd from other credentials
 * than the opener's (uverbs_main.c `ib_uverbs_write` -> `ib_safe_file_access`,
 * EACCES and one kernel log line); INVOKE_WRITE, which rdma-core sends, has no
 * such check. rsverbs must give rdma-core's answers in both cases.
 *
 *   writepath fork|setuid DEVICE
 * Prints one line per call (return value, errno seeded with a sentinel);
 * ctest/vm/writepath.sh compares the lines of rdma-core, relinked and
 * preloaded runs, and reads the kernel log. */
#include "common.h"
#include <sys/wait.h>

static union ibv_gid g;

static void cycle(struct ibv_qp *qp, const char *who)
{
	for (int i = 0; i < 3; i++) {
		int r, e;
		g.raw[15] = (uint8_t)i;
		r = SENTINEL_CALL(&e, ibv_attach_mcast(qp, &g, 0));
		printf("%s attach-%d ret=%d errno=%d\n", who, i, r, e);
		r = SENTINEL_CALL(&e, ibv_detach_mcast(qp, &g, 0));
		printf("%s detach-%d ret=%d errno=%d\n", who, i, r, e);
		r = SENTINEL_CALL(&e, ibv_detach_mcast(qp, &g, 0));
		printf("%s detach-again-%d ret=%d errno=%d\n", who, i, r, e);
	}
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[1], "fork") && strcmp(argv[1], "setuid"))) {
		fprintf(stderr, "usage: writepath fork|setuid DEVICE\n");
		return 2;
	}
	struct ibv_context *ctx = open_by_name(argv[2]);
	print_served_by(stderr);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_qp *qp = new_qp_on(pd, cq, IBV_QPT_UD);
	gid_from_hex(&g, "ff0e00000000000000000000000a0b00");

	if (!strcmp(argv[1], "fork")) {
		/* A child forked before the parent's first verb call, then one
		 * forked after the parent took the fast path. */
		for (int round = 0; round < 2; round++) {
			fflush(stdout);
			pid_t pid = fork();
			if (pid == 0) {
				cycle(qp, round ? "child-after-parent-calls" : "child-before-any-call");
				_exit(0);
			}
			int st = wait_bounded(pid, 60000);
			char buf[32];
			printf("child-%d %s\n", round, status_str(st, buf, sizeof(buf)));
			cycle(qp, "parent");
		}
	} else {
		cycle(qp, "parent");
		/* Keep root's saved uid so that the objects can be destroyed. */
		if (setresuid(65534, 65534, 0)) {
			perror("setresuid");
			return 2;
		}
		cycle(qp, "nobody");
		if (setresuid(0, 0, 0)) {
			perror("setresuid back");
			return 2;
		}
		cycle(qp, "root-again");
	}
	printf("destroy ret=%d\n", ibv_destroy_qp(qp));
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}
