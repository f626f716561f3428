/* End-to-end multicast over Soft-RoCE: does a UD datagram sent to a group
 * reach the QPs the verbs attached, exactly once, and stop reaching them
 * after detach?
 *
 * An ordinary rdma-core program (it only includes <infiniband/verbs.h>), run
 * by ctest/vm/e2e.sh three ways in one boot: linked against rdma-core alone
 * (the reference), relinked with -lrsverbs first, and with
 * LD_PRELOAD=librsverbs.so.1. ibv_attach_mcast, ibv_detach_mcast and
 * ibv_query_gid_ex (the GID-index lookup) are whichever library the link mode
 * gives; the "served-by" line names it (dladdr).
 *
 * Per group, one receiver UD QP and, per device, one sender UD QP (rxe does
 * not deliver a QP's own datagram) and one bystander QP that is never
 * attached. All groups go through four phases together, so the two bounded
 * "nothing arrives" waits are shared by every group:
 *   1. attach twice (the second is a duplicate), send #1: delivered once;
 *   2. detach once, send #2: nothing arrives (and no late copy of #1);
 *   3. attach again, send #3: delivered once;
 *   4. detach, send #4: nothing arrives (and no late copy of #3).
 * The host also joins each group at the IP level on the rxe netdev
 * (IP_ADD_MEMBERSHIP / IPV6_ADD_MEMBERSHIP): rxe's attach only adds the L2
 * address, and the multicast loopback needs the IP membership.
 *
 * Output: one line per group and phase (identical in the three modes), and
 * "MISMATCH" lines on stderr when a phase differs from the expectation; the
 * exit status is 0 only when every phase matched. */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

#define QKEY 0x1e2e0001u
#define NRECV 16
#define PAYLOAD 64
#define SLOT (40 + PAYLOAD) /* GRH + payload */
#define MAGIC 0x65326521u
#define MAXG 8

/* Deadlines, in ms. A positive phase ends as soon as every datagram is in. */
static int arrive_ms = 8000, quiet_ms = 2500;

struct dev {
	const char *name;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *sender, *bystander;
	struct ibv_mr *mr;
	unsigned char *buf; /* slots: [group][NRECV] then bystander, then send */
	int bystander_got;
};

struct group {
	const char *label; /* the MGID as text */
	int ipv4;
	struct dev *d;
	union ibv_gid mgid;
	int sgid_index, ifindex, sock;
	struct ibv_qp *qp;
	struct ibv_ah *ah;
	int got[5]; /* datagrams received, by sequence number 1..4 */
	int ret[5][2]; /* the verbs' return values, by phase */
	int bad;    /* received something malformed */
};

static struct dev devs[2];
static struct group groups[MAXG];
static int ndevs, ngroups, mismatches;

static void die(const char *what)
{
	fprintf(stderr, "e2e: %s: %s\n", what, strerror(errno));
	exit(2);
}

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000L + t.tv_nsec / 1000000;
}


static struct dev *open_dev(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct dev *d = &devs[ndevs++];

	d->name = name;
	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			d->ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!d->ctx)
		die(name);
	d->pd = ibv_alloc_pd(d->ctx);
	d->scq = ibv_create_cq(d->ctx, 64, NULL, NULL, 0);
	d->rcq = ibv_create_cq(d->ctx, (MAXG + 1) * NRECV, NULL, NULL, 0);
	if (!d->pd || !d->scq || !d->rcq)
		die("pd/cq");
	size_t len = (size_t)(MAXG + 2) * NRECV * SLOT;
	d->buf = calloc(1, len);
	d->mr = ibv_reg_mr(d->pd, d->buf, len, IBV_ACCESS_LOCAL_WRITE);
	if (!d->mr)
		die("ibv_reg_mr");
	return d;
}

static struct ibv_qp *ud_qp(struct dev *d)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = d->scq, .recv_cq = d->rcq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 16, .max_recv_wr = NRECV, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(d->pd, &ia);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qkey = QKEY };
	if (!qp)
		die("ibv_create_qp");
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		die("modify INIT");
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		die("modify RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("modify RTS");
	return qp;
}

/* wr_id = slot number in d->buf; slot / NRECV is the owner (group index
 * within the device, or MAXG for the bystander). */
static void post_recv(struct dev *d, struct ibv_qp *qp, int slot)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(d->buf + (size_t)slot * SLOT), .length = SLOT, .lkey = d->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad;
	if (ibv_post_recv(qp, &wr, &bad))
		die("ibv_post_recv");
}

/* The first RoCE v2 GID of port 1 that is IPv4-mapped (ipv4) or a global
 * IPv6 address (not link-local, not mapped). Found with ibv_query_gid_ex. */
static int find_sgid(struct dev *d, int ipv4, int *ifindex)
{
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	for (int i = 0; i < 64; i++) {
		struct ibv_gid_entry e;
		if (ibv_query_gid_ex(d->ctx, 1, i, &e, 0))
			continue;
		if (e.gid_type != IBV_GID_TYPE_ROCE_V2)
			continue;
		int is_mapped = !memcmp(e.gid.raw, mapped, 12);
		int is_ll = e.gid.raw[0] == 0xfe && (e.gid.raw[1] & 0xc0) == 0x80;
		int is_loop = !memcmp(e.gid.raw, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\1", 16);
		if (ipv4 ? is_mapped : !is_mapped && !is_ll && !is_loop) {
			*ifindex = e.ndev_ifindex;
			return i;
		}
	}
	fprintf(stderr, "e2e: %s has no %s RoCE v2 GID\n", d->name, ipv4 ? "IPv4" : "IPv6");
	exit(2);
}

static void add_group(struct dev *d, const char *label)
{
	struct group *g = &groups[ngroups];
	struct in6_addr a6;
	struct in_addr a4;

	g->d = d;
	g->label = label;
	g->ipv4 = inet_pton(AF_INET, label, &a4) == 1;
	if (g->ipv4) {
		memset(g->mgid.raw, 0, 16);
		g->mgid.raw[10] = g->mgid.raw[11] = 0xff;
		memcpy(g->mgid.raw + 12, &a4, 4);
	} else if (inet_pton(AF_INET6, label, &a6) == 1) {
		memcpy(g->mgid.raw, &a6, 16);
	} else {
		fprintf(stderr, "e2e: bad group %s\n", label);
		exit(2);
	}
	g->sgid_index = find_sgid(d, g->ipv4, &g->ifindex);

	/* The IP-level membership on the rxe netdev. */
	g->sock = ip_join_mgid(g->mgid.raw, g->ifindex);
	if (g->sock < 0)
		die(g->ipv4 ? "IP_ADD_MEMBERSHIP" : "IPV6_ADD_MEMBERSHIP");

	g->qp = ud_qp(d);
	int gi = 0; /* index among this device's groups */
	for (int i = 0; i < ngroups; i++)
		gi += groups[i].d == d;
	for (int s = 0; s < NRECV; s++)
		post_recv(d, g->qp, gi * NRECV + s);

	struct ibv_ah_attr ah = {
		.is_global = 1, .port_num = 1,
		.grh = { .dgid = g->mgid, .sgid_index = g->sgid_index, .hop_limit = 64 },
	};
	g->ah = ibv_create_ah(d->pd, &ah);
	if (!g->ah)
		die("ibv_create_ah");
	char ifname[IF_NAMESIZE] = "?";
	if_indextoname(g->ifindex, ifname);
	fprintf(stderr, "e2e: %s %s: sgid index %d, netdev %s, receiver qpn %#x\n", d->name, label,
		g->sgid_index, ifname, g->qp->qp_num);
	ngroups++;
}

static struct group *group_of(struct dev *d, int gi)
{
	for (int i = 0; i < ngroups; i++)
		if (groups[i].d == d && gi-- == 0)
			return &groups[i];
	return NULL;
}

static void send_seq(struct group *g, int seq)
{
	struct dev *d = g->d;
	unsigned char *p = d->buf + (size_t)(MAXG + 1) * NRECV * SLOT;
	uint32_t w[4] = { MAGIC, (uint32_t)(g - groups), (uint32_t)seq, 0 };
	struct ibv_sge sge = { .addr = (uintptr_t)p, .length = PAYLOAD, .lkey = d->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = seq, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
		.wr.ud = { .ah = g->ah, .remote_qpn = 0xffffff, .remote_qkey = QKEY },
	}, *bad;
	struct ibv_wc wc;
	long end = now_ms() + arrive_ms;
	int n;

	memset(p, 0, PAYLOAD);
	memcpy(p, w, sizeof(w));
	if (ibv_post_send(d->sender, &wr, &bad))
		die("ibv_post_send");
	while ((n = ibv_poll_cq(d->scq, 1, &wc)) == 0 && now_ms() < end)
		;
	if (n != 1 || wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "e2e: send to %s: %s\n", g->label,
			n == 1 ? ibv_wc_status_str(wc.status) : "no completion before the deadline");
		exit(2);
	}
}

/* Drains every receive CQ once; returns the number of completions. */
static int drain(void)
{
	int total = 0;
	for (int k = 0; k < ndevs; k++) {
		struct dev *d = &devs[k];
		struct ibv_wc wc[16];
		int n = ibv_poll_cq(d->rcq, 16, wc);
		if (n < 0)
			die("ibv_poll_cq");
		for (int i = 0; i < n; i++) {
			int slot = (int)wc[i].wr_id, owner = slot / NRECV;
			uint32_t w[4];
			total++;
			if (owner == MAXG) {
				d->bystander_got++;
				post_recv(d, d->bystander, slot);
				continue;
			}
			struct group *g = group_of(d, owner);
			memcpy(w, d->buf + (size_t)slot * SLOT + 40, sizeof(w));
			if (wc[i].status != IBV_WC_SUCCESS || wc[i].qp_num != g->qp->qp_num ||
			    wc[i].byte_len != 40 + PAYLOAD || w[0] != MAGIC || w[1] != (uint32_t)(g - groups) ||
			    w[2] < 1 || w[2] > 4) {
				fprintf(stderr, "e2e: %s %s: unexpected completion status=%s len=%u words=%#x,%u,%u\n",
					d->name, g->label, ibv_wc_status_str(wc[i].status), wc[i].byte_len, w[0], w[1], w[2]);
				g->bad++;
			} else {
				g->got[w[2]]++;
			}
			post_recv(d, g->qp, slot);
		}
	}
	return total;
}

/* Polls until every group has seq `want` (want > 0), or for the whole quiet
 * window (want == 0). Returns the elapsed ms. */
static long wait_for(int want)
{
	long start = now_ms(), end = start + (want ? arrive_ms : quiet_ms);
	for (;;) {
		drain();
		int all = 1;
		for (int i = 0; i < ngroups; i++)
			all &= groups[i].got[want] > 0;
		if ((want && all) || now_ms() >= end)
			break;
		if (!want)
			usleep(1000);
	}
	drain();
	return now_ms() - start;
}

static void report(struct group *g, const char *phase, const char *calls, int expect1, int expect3)
{
	int ok = g->got[1] == expect1 && g->got[3] == expect3 && g->got[2] == 0 && g->got[4] == 0 && !g->bad;
	printf("%s %s %s: %s delivered #1=%d #2=%d #3=%d #4=%d bad=%d\n", g->d->name, g->label, phase, calls,
	       g->got[1], g->got[2], g->got[3], g->got[4], g->bad);
	if (!ok) {
		fprintf(stderr, "MISMATCH %s %s %s: expected #1=%d #3=%d and nothing else\n", g->d->name, g->label,
			phase, expect1, expect3);
		mismatches++;
	}
}

static void expect_ret(struct group *g, const char *what, int ret)
{
	if (ret) {
		fprintf(stderr, "MISMATCH %s %s: %s returned %d (errno %d)\n", g->d->name, g->label, what, ret, errno);
		mismatches++;
	}
}

int main(int argc, char **argv)
{
	char calls[96];
	long t;

	if (getenv("E2E_ARRIVE_MS"))
		arrive_ms = atoi(getenv("E2E_ARRIVE_MS"));
	if (getenv("E2E_QUIET_MS"))
		quiet_ms = atoi(getenv("E2E_QUIET_MS"));
	printf("served-by ibv_attach_mcast=%s ibv_detach_mcast=%s _ibv_query_gid_ex=%s\n",
	       owner((void *)ibv_attach_mcast), owner((void *)ibv_detach_mcast), owner((void *)_ibv_query_gid_ex));

	/* argv: DEV GROUP... [-- DEV GROUP...] */
	struct dev *d = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--")) {
			d = NULL;
			continue;
		}
		if (!d) {
			if (ndevs == 2) {
				fprintf(stderr, "e2e: at most two devices\n");
				return 2;
			}
			d = open_dev(argv[i]);
			continue;
		}
		if (ngroups == MAXG) {
			fprintf(stderr, "e2e: at most %d groups\n", MAXG);
			return 2;
		}
		add_group(d, argv[i]);
	}
	if (!ngroups) {
		fprintf(stderr, "usage: e2e DEV GROUP... [-- DEV GROUP...]\n");
		return 2;
	}
	for (int k = 0; k < ndevs; k++) {
		devs[k].sender = ud_qp(&devs[k]);
		devs[k].bystander = ud_qp(&devs[k]);
		for (int s = 0; s < NRECV; s++)
			post_recv(&devs[k], devs[k].bystander, MAXG * NRECV + s);
	}

	/* 1. attached twice: exactly one copy */
	for (int i = 0; i < ngroups; i++) {
		struct group *g = &groups[i];
		g->ret[1][0] = ibv_attach_mcast(g->qp, &g->mgid, 0);
		expect_ret(g, "attach", g->ret[1][0]);
		g->ret[1][1] = ibv_attach_mcast(g->qp, &g->mgid, 0);
		expect_ret(g, "duplicate attach", g->ret[1][1]);
		send_seq(g, 1);
	}
	t = wait_for(1);
	fprintf(stderr, "e2e: phase 1 took %ld ms\n", t);
	for (int i = 0; i < ngroups; i++) {
		snprintf(calls, sizeof(calls), "attach=%d attach-again=%d", groups[i].ret[1][0], groups[i].ret[1][1]);
		report(&groups[i], "1-attached-twice", calls, 1, 0);
	}

	/* 2. detached (once: the duplicate attach made no second entry) */
	for (int i = 0; i < ngroups; i++) {
		struct group *g = &groups[i];
		g->ret[2][0] = ibv_detach_mcast(g->qp, &g->mgid, 0);
		expect_ret(g, "detach", g->ret[2][0]);
		send_seq(g, 2);
	}
	t = wait_for(0);
	fprintf(stderr, "e2e: phase 2 waited %ld ms\n", t);
	for (int i = 0; i < ngroups; i++) {
		snprintf(calls, sizeof(calls), "detach=%d", groups[i].ret[2][0]);
		report(&groups[i], "2-detached", calls, 1, 0);
	}

	/* 3. attached again */
	for (int i = 0; i < ngroups; i++) {
		struct group *g = &groups[i];
		g->ret[3][0] = ibv_attach_mcast(g->qp, &g->mgid, 0);
		expect_ret(g, "re-attach", g->ret[3][0]);
		send_seq(g, 3);
	}
	t = wait_for(3);
	fprintf(stderr, "e2e: phase 3 took %ld ms\n", t);
	for (int i = 0; i < ngroups; i++) {
		snprintf(calls, sizeof(calls), "attach=%d", groups[i].ret[3][0]);
		report(&groups[i], "3-reattached", calls, 1, 1);
	}

	/* 4. detached again: nothing new, no late copy of #3 */
	for (int i = 0; i < ngroups; i++) {
		struct group *g = &groups[i];
		g->ret[4][0] = ibv_detach_mcast(g->qp, &g->mgid, 0);
		expect_ret(g, "second detach", g->ret[4][0]);
		send_seq(g, 4);
	}
	t = wait_for(0);
	fprintf(stderr, "e2e: phase 4 waited %ld ms\n", t);
	for (int i = 0; i < ngroups; i++) {
		snprintf(calls, sizeof(calls), "detach=%d", groups[i].ret[4][0]);
		report(&groups[i], "4-detached-again", calls, 1, 1);
	}

	for (int k = 0; k < ndevs; k++) {
		printf("%s bystander (never attached): delivered %d\n", devs[k].name, devs[k].bystander_got);
		if (devs[k].bystander_got) {
			fprintf(stderr, "MISMATCH %s: the bystander QP received %d datagrams\n", devs[k].name,
				devs[k].bystander_got);
			mismatches++;
		}
	}

	/* Every QP can be destroyed: nothing is left attached. */
	for (int i = 0; i < ngroups; i++) {
		struct group *g = &groups[i];
		expect_ret(g, "destroy qp", ibv_destroy_qp(g->qp));
		ibv_destroy_ah(g->ah);
		close(g->sock);
	}
	for (int k = 0; k < ndevs; k++) {
		struct dev *dv = &devs[k];
		ibv_destroy_qp(dv->sender);
		ibv_destroy_qp(dv->bystander);
		ibv_dereg_mr(dv->mr);
		ibv_destroy_cq(dv->scq);
		ibv_destroy_cq(dv->rcq);
		ibv_dealloc_pd(dv->pd);
		ibv_close_device(dv->ctx);
	}
	fprintf(stderr, "e2e: %d groups, %d mismatches\n", ngroups, mismatches);
	return mismatches ? 1 : 0;
}
