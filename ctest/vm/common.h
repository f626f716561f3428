/* Helpers shared by the guest test programs, ctest/vm/NAME.c. */
#ifndef RSVERBS_CTEST_COMMON_H
#define RSVERBS_CTEST_COMMON_H

#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The file name of the object that defines `fn` (dladdr), or "?". */
static inline const char *owner(void *fn)
{
	Dl_info info;
	const char *s;
	if (!dladdr(fn, &info) || !info.dli_fname)
		return "?";
	s = strrchr(info.dli_fname, '/');
	return s ? s + 1 : info.dli_fname;
}

/* A QP of type `t` with one WR and one SGE each way on `cq`; exits with
 * status 2 if it cannot be created. */
static inline struct ibv_qp *new_qp_on(struct ibv_pd *pd, struct ibv_cq *cq, enum ibv_qp_type t)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = t,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &a);
	if (!qp) {
		fprintf(stderr, "ibv_create_qp(%d): %s\n", t, strerror(errno));
		exit(2);
	}
	return qp;
}

/* A GID from 32 hex digits. */
static inline void gid_from_str(union ibv_gid *g, const char *hex32)
{
	for (int i = 0; i < 16; i++) {
		unsigned v;
		sscanf(hex32 + 2 * i, "%2x", &v);
		g->raw[i] = v;
	}
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
