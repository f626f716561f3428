/* trace: the scenarios of RSVERBS_TRACE's hints (docs/trace.md), each a
 * subcommand on one device, port 1. Every verb call prints one stdout line
 * "trace: LABEL rc=N errno=N" (errno seeded with SENTINEL), so a run with
 * tracing on and one with it off must print the same lines; the trace
 * itself goes where RSVERBS_TRACE says and ctest/vm/trace.sh reads it.
 *
 *   trace attach DEV GROUP          attach, detach, destroy (no-ip-join and its twin)
 *   trace notmc DEV                 UD QP, unicast MGID ::ffff:192.0.2.1: EINVAL
 *   trace notud DEV GROUP           RC QP, multicast GROUP: EINVAL
 *   trace lidmismatch DEV GROUP     attach LID 0, detach LID 0x1234 (EINVAL), detach LID 0
 *   trace healthy DEV GROUP         attach, duplicate attach, detach, detach of a group
 *                                   never attached (EINVAL), destroy: no hint at all
 *   trace limit DEV GROUP N         N UD QPs attach GROUP (rxe: 56 fit), then detach
 *   trace exit DEV GROUP            attach, destroy (EBUSY), exit still attached
 *   trace walk DEV                  _ibv_query_gid_ex over the whole GID table
 *   trace attachments DEV           rsverbs_mcast_attachments (dlsym) after attaches
 *
 * GROUP is an IPv4 address (the MGID is ::ffff:GROUP) or an IPv6 one.
 * Exit status 0, or 2 on a setup error. */
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common.h"

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;

static void open_dev(const char *name)
{
	int n;
	struct ibv_device **l = ibv_get_device_list(&n);
	for (int i = 0; l && i < n; i++)
		if (!strcmp(ibv_get_device_name(l[i]), name))
			ctx = ibv_open_device(l[i]);
	if (l)
		ibv_free_device_list(l);
	if (!ctx || !(pd = ibv_alloc_pd(ctx)) || !(cq = ibv_create_cq(ctx, 64, NULL, NULL, 0))) {
		fprintf(stderr, "trace: cannot open %s\n", name);
		exit(2);
	}
}

/* A QP of type t, moved to INIT on port 1 (so that it has a port). */
static struct ibv_qp *qp_init(enum ibv_qp_type t)
{
	struct ibv_qp *qp = new_qp_on(pd, cq, t);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qkey = 0x11 };
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (t == IBV_QPT_UD)
		mask |= IBV_QP_QKEY;
	else
		mask |= IBV_QP_ACCESS_FLAGS;
	if (ibv_modify_qp(qp, &a, mask)) {
		perror("trace: ibv_modify_qp");
		exit(2);
	}
	return qp;
}

static void group(union ibv_gid *g, const char *s)
{
	struct in_addr v4;
	memset(g, 0, sizeof(*g));
	if (inet_pton(AF_INET, s, &v4) == 1) {
		g->raw[10] = g->raw[11] = 0xff;
		memcpy(g->raw + 12, &v4, 4);
	} else if (inet_pton(AF_INET6, s, g->raw) != 1) {
		fprintf(stderr, "trace: bad group %s\n", s);
		exit(2);
	}
}

static int mc(int attach, struct ibv_qp *qp, union ibv_gid *g, uint16_t lid, const char *label)
{
	int e, rc = SENTINEL_CALL(&e, attach ? ibv_attach_mcast(qp, g, lid) : ibv_detach_mcast(qp, g, lid));
	printf("trace: %s rc=%d errno=%d\n", label, rc, e);
	return rc;
}

static void destroy(struct ibv_qp *qp, const char *label)
{
	int e, rc = SENTINEL_CALL(&e, ibv_destroy_qp(qp));
	printf("trace: %s rc=%d errno=%d\n", label, rc, e);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: see the top of ctest/vm/trace.c\n");
		return 2;
	}
	const char *cmd = argv[1];
	union ibv_gid g, g2;
	open_dev(argv[2]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 3)
		group(&g, argv[3]);

	if (!strcmp(cmd, "attach") && argc == 4) {
		struct ibv_qp *qp = qp_init(IBV_QPT_UD);
		mc(1, qp, &g, 0, "attach");
		mc(0, qp, &g, 0, "detach");
		destroy(qp, "destroy");
	} else if (!strcmp(cmd, "notmc")) {
		struct ibv_qp *qp = qp_init(IBV_QPT_UD);
		group(&g, "192.0.2.1");
		mc(1, qp, &g, 0, "attach-unicast-mgid");
		destroy(qp, "destroy");
	} else if (!strcmp(cmd, "notud") && argc == 4) {
		struct ibv_qp *qp = qp_init(IBV_QPT_RC);
		mc(1, qp, &g, 0, "attach-rc");
		destroy(qp, "destroy");
	} else if (!strcmp(cmd, "lidmismatch") && argc == 4) {
		struct ibv_qp *qp = qp_init(IBV_QPT_UD);
		mc(1, qp, &g, 0, "attach-lid-0");
		mc(0, qp, &g, 0x1234, "detach-lid-0x1234");
		mc(0, qp, &g, 0, "detach-lid-0");
		destroy(qp, "destroy");
	} else if (!strcmp(cmd, "healthy") && argc == 4) {
		struct ibv_qp *qp = qp_init(IBV_QPT_UD);
		group(&g2, "ff0e::7ace:dead");
		mc(1, qp, &g, 0, "attach");
		mc(1, qp, &g, 0, "attach-again");
		mc(0, qp, &g, 0, "detach");
		mc(0, qp, &g2, 0, "detach-never-attached");
		destroy(qp, "destroy");
	} else if (!strcmp(cmd, "limit") && argc == 5) {
		int n = atoi(argv[4]), ok = 0;
		struct ibv_qp **qps = calloc(n, sizeof(*qps));
		int *att = calloc(n, sizeof(*att));
		char label[64];
		for (int i = 0; i < n; i++) {
			qps[i] = qp_init(IBV_QPT_UD);
			snprintf(label, sizeof(label), "attach-qp-%d", i + 1);
			att[i] = mc(1, qps[i], &g, 0, label) == 0;
			ok += att[i];
		}
		printf("trace: %d of %d QPs attached\n", ok, n);
		for (int i = 0; i < n; i++) {
			if (att[i]) {
				snprintf(label, sizeof(label), "detach-qp-%d", i + 1);
				mc(0, qps[i], &g, 0, label);
			}
			snprintf(label, sizeof(label), "destroy-qp-%d", i + 1);
			destroy(qps[i], label);
		}
	} else if (!strcmp(cmd, "exit") && argc == 4) {
		struct ibv_qp *qp = qp_init(IBV_QPT_UD);
		mc(1, qp, &g, 0, "attach");
		destroy(qp, "destroy-while-attached");
		/* exit with the QP attached: the kernel cleans up at close */
	} else if (!strcmp(cmd, "walk")) {
		struct ibv_port_attr pa;
		int calls = 0, found = 0;
		if (ibv_query_port(ctx, 1, &pa))
			return 2;
		for (int i = 0; i < pa.gid_tbl_len; i++) {
			struct ibv_gid_entry e;
			int err, rc = SENTINEL_CALL(&err, ibv_query_gid_ex(ctx, 1, i, &e, 0));
			calls++;
			found += rc == 0;
			if (rc != 0 && rc != ENODATA)
				printf("trace: query %d rc=%d errno=%d\n", i, rc, err);
		}
		printf("trace: walk %d calls, %d entries\n", calls, found);
	} else if (!strcmp(cmd, "attachments")) {
		typedef int (*list_fn)(const struct ibv_qp *, union ibv_gid *, uint16_t *, size_t);
		list_fn list = (list_fn)dlsym(RTLD_DEFAULT, "rsverbs_mcast_attachments");
		struct ibv_qp *qp = qp_init(IBV_QPT_UD);
		union ibv_gid out[4];
		uint16_t lids[4];
		if (!list) {
			printf("trace: no rsverbs_mcast_attachments\n");
			return 2;
		}
		group(&g, "ff0e::7ace:1");
		group(&g2, "ff0e::7ace:2");
		mc(1, qp, &g, 0, "attach-1");
		mc(1, qp, &g2, 0, "attach-2");
		mc(1, qp, &g, 0, "attach-1-again");
		int e, n = SENTINEL_CALL(&e, list(qp, out, lids, 4));
		printf("trace: attachments %d errno=%d", n, e);
		for (int i = 0; i < n && i < 4; i++) {
			char s[INET6_ADDRSTRLEN];
			printf(" %s/%u", inet_ntop(AF_INET6, out[i].raw, s, sizeof(s)), lids[i]);
		}
		printf("\n");
		mc(0, qp, &g, 0, "detach-1");
		printf("trace: attachments-after-detach %d\n", list(qp, NULL, NULL, 0));
		mc(0, qp, &g2, 0, "detach-2");
		printf("trace: attachments-at-end %d\n", list(qp, NULL, NULL, 0));
		n = SENTINEL_CALL(&e, list(NULL, NULL, NULL, 0));
		printf("trace: attachments-null %d errno=%d\n", n, e);
		destroy(qp, "destroy");
	} else {
		fprintf(stderr, "trace: bad arguments (see the top of ctest/vm/trace.c)\n");
		return 2;
	}
	return 0;
}
