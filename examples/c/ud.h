/* What both examples share: the group's MGID, the device and port, and a
 * UD QP. Plain rdma-core verbs; nothing here is rsverbs-specific. */
#ifndef RSVERBS_EXAMPLE_UD_H
#define RSVERBS_EXAMPLE_UD_H
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MSG 64          /* payload bytes */
#define GRH 40          /* a UD receive buffer starts with the GRH */
#define SLOT (GRH + MSG)

/* The Q_Key of rdma_cm (librdmacm's RDMA_UDP_QKEY): the one mckey and every
 * rdma_join_multicast user takes. Sender and receiver must use the same. */
#define DEFAULT_QKEY 0x01234567u

static void die(const char *what)
{
	fprintf(stderr, "%s: %s\n", what, strerror(errno));
	exit(2);
}

/* The MGID RoCE v2 attaches for a group, as rdma_cm makes it (the
 * kernel's cma.c cma_iboe_set_mgid): ::ffff:a.b.c.d for an IPv4 group, an
 * IPv6 group as it is. Returns AF_INET or AF_INET6, 0 if not an address. */
static int group_mgid(const char *group, union ibv_gid *mgid)
{
	struct in_addr a4;
	memset(mgid, 0, sizeof(*mgid));
	if (inet_pton(AF_INET, group, &a4) == 1) {
		mgid->raw[10] = mgid->raw[11] = 0xff;
		memcpy(mgid->raw + 12, &a4, 4);
		return AF_INET;
	}
	return inet_pton(AF_INET6, group, mgid->raw) == 1 ? AF_INET6 : 0;
}

/* The named device, or the first one. */
static struct ibv_context *open_device(const char *name)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx = NULL;
	if (!list)
		die("ibv_get_device_list");
	for (int i = 0; i < n && !ctx; i++)
		if (!name || !strcmp(name, ibv_get_device_name(list[i])))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!ctx) {
		fprintf(stderr, "no RDMA device%s%s\n", name ? " " : "", name ? name : "");
		exit(2);
	}
	return ctx;
}

struct ud {
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf;
};

/* A UD QP on `port` with Q_Key `qkey`, in RTS, and `slots` buffers of SLOT
 * bytes; a receiver's buffers are posted. */
static void ud_open(struct ud *u, struct ibv_context *ctx, uint8_t port, uint32_t qkey, int slots, int receiver)
{
	struct ibv_qp_init_attr ia = { 0 };
	struct ibv_qp_attr a = { 0 };
	u->pd = ibv_alloc_pd(ctx);
	u->cq = ibv_create_cq(ctx, slots + 1, NULL, NULL, 0);
	u->buf = calloc(slots, SLOT);
	if (!u->pd || !u->cq || !u->buf)
		die("ibv_alloc_pd, ibv_create_cq");
	u->mr = ibv_reg_mr(u->pd, u->buf, (size_t)slots * SLOT, IBV_ACCESS_LOCAL_WRITE);
	if (!u->mr)
		die("ibv_reg_mr");
	ia.send_cq = ia.recv_cq = u->cq;
	ia.qp_type = IBV_QPT_UD;
	ia.cap.max_send_wr = receiver ? 1 : slots;
	ia.cap.max_recv_wr = receiver ? slots : 1;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	u->qp = ibv_create_qp(u->pd, &ia);
	if (!u->qp)
		die("ibv_create_qp");
	a.qp_state = IBV_QPS_INIT;
	a.port_num = port;
	a.qkey = qkey;
	if (ibv_modify_qp(u->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		die("ibv_modify_qp INIT");
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(u->qp, &a, IBV_QP_STATE))
		die("ibv_modify_qp RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(u->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("ibv_modify_qp RTS");
	for (int i = 0; receiver && i < slots; i++) {
		struct ibv_sge sge = { (uintptr_t)(u->buf + i * SLOT), SLOT, u->mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;
		if (ibv_post_recv(u->qp, &wr, &bad))
			die("ibv_post_recv");
	}
}

static void ud_close(struct ud *u)
{
	if (ibv_destroy_qp(u->qp))
		die("ibv_destroy_qp"); /* EBUSY: still attached */
	ibv_dereg_mr(u->mr);
	ibv_destroy_cq(u->cq);
	ibv_dealloc_pd(u->pd);
	free(u->buf);
}

/* One completion within `seconds`, or 0. */
static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc, double seconds)
{
	struct timespec nap = { 0, 1000000 }, t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n < 0)
			die("ibv_poll_cq");
		if (n)
			return 1;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 > seconds)
			return 0;
		nanosleep(&nap, NULL);
	}
}
#endif
