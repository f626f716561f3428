/* mcgroup: a small multicast example on rdma-core verbs (RoCE, UD).
 *
 * Two processes share one RDMA device. The receiver creates a UD QP,
 * attaches it to a multicast group with ibv_attach_mcast() and joins the
 * group at the IP level on the device's netdev (RoCE needs both: the attach
 * tells the device which QPs want the group, the IP join makes the host
 * accept the group's packets). The sender addresses the group with an AH
 * (is_global=1, dgid = the group's MGID) and remote QPN 0xffffff. After the
 * first batch arrives, the receiver detaches with ibv_detach_mcast() and the
 * sender sends a second batch, which the receiver must no longer get.
 *
 * A second receiving QP, the witness, stays attached throughout: when it
 * has the whole second batch, the batch really reached the group, so the
 * detached QP's empty queue means something (rxe hands a group's packet to
 * every attached QP at once). The source GID is found with
 * ibv_query_gid_ex(). At the end mcgroup names the library that served each
 * of the three verbs (dladdr), so the same source shows rdma-core, rsverbs
 * by LD_PRELOAD, or rsverbs by relinking with `pkg-config --libs rsverbs`.
 *
 *   mcgroup [-d DEVICE] [-i PORT] [-b ADDRESS] [-g GROUP] [-n COUNT] [-t SECONDS]
 *   mcgroup hold GROUP IFNAME     hold an IP-level membership until killed
 *
 * Exit status: 0 when every datagram went where it should, 1 when not,
 * 2 on a setup error. */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#define PROG_NAME "mcgroup"
#include "common.h"

#define QKEY 0x1ee7c0de
#define MSG 64
#define GRH 40
#define SLOT (GRH + MSG)
#define MAX_COUNT 30

static double wait_s = 10; /* bound of every wait */

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void nap(void)
{
	struct timespec t = { 0, 1000000 }; /* 1 ms between polls */
	nanosleep(&t, NULL);
}


static const char *gid_str(const uint8_t *g, char *buf, size_t n)
{
	return inet_ntop(AF_INET6, g, buf, n) ? buf : "?";
}

/* "239.4.4.4" -> ::ffff:239.4.4.4, "ff0e::1" -> itself. Returns 4 or 6. */
static int parse_addr(const char *s, uint8_t gid[16])
{
	struct in_addr a4;
	memset(gid, 0, 16);
	if (inet_pton(AF_INET, s, &a4) == 1) {
		gid[10] = gid[11] = 0xff;
		memcpy(gid + 12, &a4, 4);
		return 4;
	}
	if (inet_pton(AF_INET6, s, gid) == 1)
		return is_v4mapped(gid) ? 4 : 6;
	return 0;
}

/* ---- the IP-level join ------------------------------------------------- */

static int ip_join(const uint8_t mgid[16], unsigned ifindex)
{
	int fd = ip_join_mgid(mgid, ifindex);
	if (fd < 0)
		die("%s on ifindex %u: %s", is_v4mapped(mgid) ? "IP_ADD_MEMBERSHIP" : "IPV6_ADD_MEMBERSHIP", ifindex,
		    strerror(errno));
	return fd;
}

/* mcgroup hold GROUP IFNAME: for programs that attach but do not join at
 * the IP level themselves (perftest). Holds the membership until killed. */
static void __attribute__((noreturn)) hold(const char *group, const char *ifname)
{
	uint8_t mgid[16];
	unsigned ifindex = if_nametoindex(ifname);
	if (!parse_addr(group, mgid))
		die("%s is not an IP address", group);
	if (!ifindex)
		die("no interface %s", ifname);
	ip_join(mgid, ifindex);
	printf("mcgroup: holding IP-level membership of %s on %s\n", group, ifname);
	fflush(stdout);
	for (;;)
		pause();
}

/* ---- finding the device and the source GID ----------------------------- */

struct where {
	struct ibv_device *dev;
	uint8_t port;
	struct ibv_gid_entry gid;
};

/* A RoCE v2 GID of the group's family on one port: the one equal to
 * `want` if given; otherwise the first IPv4-mapped one for an IPv4 group,
 * the first global (else link-local) IPv6 one for an IPv6 group. */
static int pick_gid(struct ibv_context *ctx, uint8_t port, int family, const uint8_t *want,
		    struct ibv_gid_entry *out)
{
	struct ibv_port_attr pa;
	int found = 0;
	if (ibv_query_port(ctx, port, &pa) || pa.link_layer != IBV_LINK_LAYER_ETHERNET)
		return 0;
	for (int i = 0; i < pa.gid_tbl_len; i++) {
		struct ibv_gid_entry e;
		if (ibv_query_gid_ex(ctx, port, i, &e, 0))
			continue; /* ENODATA: an empty entry */
		if (e.gid_type != IBV_GID_TYPE_ROCE_V2)
			continue;
		if (want) {
			if (!memcmp(e.gid.raw, want, 16)) {
				*out = e;
				return 1;
			}
			continue;
		}
		if ((family == 4) != is_v4mapped(e.gid.raw))
			continue;
		if (family == 4 || e.gid.raw[0] != 0xfe || (e.gid.raw[1] & 0xc0) != 0x80) {
			*out = e;
			return 1;
		}
		if (!found) {
			*out = e;
			found = 1;
		}
	}
	return found;
}

static void find_where(const char *devname, int port_arg, int family, const uint8_t *want,
		       struct where *w)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || !n)
		die("no RDMA device");
	for (int d = 0; d < n; d++) {
		struct ibv_device_attr da;
		struct ibv_context *ctx;
		if (devname && strcmp(devname, ibv_get_device_name(list[d])))
			continue;
		ctx = ibv_open_device(list[d]);
		if (!ctx)
			continue;
		if (!ibv_query_device(ctx, &da)) {
			for (int p = 1; p <= da.phys_port_cnt; p++) {
				if (port_arg && p != port_arg)
					continue;
				if (pick_gid(ctx, p, family, want, &w->gid)) {
					w->dev = list[d];
					w->port = p;
					ibv_close_device(ctx);
					return; /* the list stays allocated: w->dev lives in it */
				}
			}
		}
		ibv_close_device(ctx);
	}
	die("no RoCE v2 GID %s%s%s", want ? "equal to the address" : "for the group's family",
	    devname ? " on " : "", devname ? devname : "");
}

/* ---- verbs objects ----------------------------------------------------- */

struct ep {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf;
	int slots;
};

static void ep_open(struct ep *e, const struct where *w, int slots, int sender)
{
	struct ibv_qp_init_attr ia = { 0 };
	struct ibv_qp_attr a = { 0 };

	e->ctx = ibv_open_device(w->dev);
	if (!e->ctx)
		die("ibv_open_device: %s", strerror(errno));
	e->slots = slots;
	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = ibv_create_cq(e->ctx, slots + 1, NULL, NULL, 0);
	e->buf = calloc(slots, SLOT);
	if (!e->pd || !e->cq || !e->buf)
		die("ibv_alloc_pd/ibv_create_cq: %s", strerror(errno));
	e->mr = ibv_reg_mr(e->pd, e->buf, (size_t)slots * SLOT, IBV_ACCESS_LOCAL_WRITE);
	if (!e->mr)
		die("ibv_reg_mr: %s", strerror(errno));
	ia.send_cq = ia.recv_cq = e->cq;
	ia.qp_type = IBV_QPT_UD;
	ia.cap.max_send_wr = sender ? slots : 1;
	ia.cap.max_recv_wr = sender ? 1 : slots;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	e->qp = ibv_create_qp(e->pd, &ia);
	if (!e->qp)
		die("ibv_create_qp(UD): %s", strerror(errno));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = w->port;
	a.qkey = QKEY;
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		die("modify QP to INIT: %s", strerror(errno));
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE))
		die("modify QP to RTR: %s", strerror(errno));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("modify QP to RTS: %s", strerror(errno));
	if (sender)
		return;
	for (int i = 0; i < slots; i++) {
		struct ibv_sge sge = { (uintptr_t)(e->buf + i * SLOT), SLOT, e->mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;
		if (ibv_post_recv(e->qp, &wr, &bad))
			die("ibv_post_recv: %s", strerror(errno));
	}
}

/* Returns 0, or the first failing destroy's errno (EBUSY: still attached). */
static int ep_close(struct ep *e)
{
	int r = ibv_destroy_qp(e->qp);
	if (r)
		return r;
	ibv_dereg_mr(e->mr);
	ibv_destroy_cq(e->cq);
	ibv_dealloc_pd(e->pd);
	ibv_close_device(e->ctx);
	free(e->buf);
	return 0;
}

/* ---- the two processes, and the pipe between them ---------------------- */

struct msg {
	char tag;	/* R ready, D detached, Q quit (to the sender); S sent */
	uint32_t qpn;	/* the sender's QPN */
	uint32_t count; /* datagrams whose send completed successfully */
};

static void put(int fd, char tag, uint32_t qpn, uint32_t count)
{
	struct msg m = { tag, qpn, count };
	if (write(fd, &m, sizeof(m)) != sizeof(m))
		die("pipe write: %s", strerror(errno));
}

static struct msg get(int fd, const char *what)
{
	struct msg m = { 0 };
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int r = poll(&p, 1, (int)(wait_s * 3 * 1000));
	if (r <= 0)
		die("no word from the other process (%s) within %.0f s", what, wait_s * 3);
	if (read(fd, &m, sizeof(m)) != sizeof(m))
		die("the other process went away (%s)", what);
	return m;
}

static int sender(const struct where *w, const uint8_t mgid[16], int count, int rfd, int wfd)
{
	struct ep e;
	struct ibv_ah_attr aa = { 0 };
	struct ibv_ah *ah;

	ep_open(&e, w, count, 1);
	aa.is_global = 1;
	memcpy(aa.grh.dgid.raw, mgid, 16);
	aa.grh.sgid_index = w->gid.gid_index;
	aa.grh.hop_limit = 64;
	aa.port_num = w->port;
	ah = ibv_create_ah(e.pd, &aa);
	if (!ah)
		die("ibv_create_ah for the group: %s", strerror(errno));
	get(rfd, "receiver ready");
	for (int phase = 1; phase <= 2; phase++) {
		uint32_t ok = 0;
		for (int i = 0; i < count; i++) {
			char *p = e.buf + i * SLOT;
			struct ibv_sge sge = { (uintptr_t)p, MSG, e.mr->lkey };
			struct ibv_send_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1,
						  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED },
					   *bad;
			struct ibv_wc wc;
			double end = now() + wait_s;
			int n;
			snprintf(p, MSG, "mcgroup phase %d seq %d", phase, i);
			wr.wr.ud.ah = ah;
			wr.wr.ud.remote_qpn = 0xffffff;
			wr.wr.ud.remote_qkey = QKEY;
			if (ibv_post_send(e.qp, &wr, &bad))
				die("ibv_post_send: %s", strerror(errno));
			while ((n = ibv_poll_cq(e.cq, 1, &wc)) == 0 && now() < end)
				nap();
			if (n != 1)
				die("send %d.%d: no completion within %.0f s", phase, i, wait_s);
			if (wc.status != IBV_WC_SUCCESS) { /* the QP is in error now */
				fprintf(stderr, "mcgroup: send %d.%d: %s\n", phase, i,
					ibv_wc_status_str(wc.status));
				break;
			}
			ok++;
		}
		put(wfd, 'S', e.qp->qp_num, ok);
		if (phase == 1)
			get(rfd, "receiver detached");
	}
	get(rfd, "quit");
	ibv_destroy_ah(ah);
	return ep_close(&e) ? 2 : 0;
}

struct tally {
	int got[3]; /* good datagrams per phase */
	int bad;    /* wrong status, length, source or payload */
};

static void collect(struct ep *e, struct tally *t, uint32_t src_qpn)
{
	struct ibv_wc wc[8];
	int n;
	while ((n = ibv_poll_cq(e->cq, 8, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			int phase = 0, seq = -1;
			const char *p = e->buf + wc[i].wr_id * SLOT + GRH;
			if (wc[i].status != IBV_WC_SUCCESS || wc[i].opcode != IBV_WC_RECV ||
			    wc[i].byte_len != SLOT || !(wc[i].wc_flags & IBV_WC_GRH) ||
			    wc[i].src_qp != src_qpn ||
			    sscanf(p, "mcgroup phase %d seq %d", &phase, &seq) != 2 || phase < 1 ||
			    phase > 2) {
				t->bad++;
				continue;
			}
			t->got[phase]++;
		}
	}
	if (n < 0)
		die("ibv_poll_cq: %d", n);
}

int main(int argc, char **argv)
{
	const char *devname = NULL, *group = "239.4.4.4", *bind = NULL;
	int port = 0, count = 10, opt, family, down[2], up[2], status, fail = 0;
	uint8_t mgid[16], want[16];
	char s1[64], s2[64], ifname[IF_NAMESIZE] = "?";
	struct where w = { 0 };
	struct ep rx, wit;
	struct tally trx = { 0 }, twit = { 0 };
	struct msg m1, m2;
	pid_t child;
	int att_rx, att_wit, det_rx, det_wit, ipfd, ebusy;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && !strcmp(argv[1], "hold"))
		hold(argv[2], argv[3]);
	while ((opt = getopt(argc, argv, "d:i:b:g:n:t:")) != -1) {
		switch (opt) {
		case 'd': devname = optarg; break;
		case 'i': port = atoi(optarg); break;
		case 'b': bind = optarg; break;
		case 'g': group = optarg; break;
		case 'n': count = atoi(optarg); break;
		case 't': wait_s = atof(optarg); break;
		default:
			fprintf(stderr,
				"usage: mcgroup [-d DEVICE] [-i PORT] [-b ADDRESS] [-g GROUP] [-n COUNT] [-t SECONDS]\n"
				"       mcgroup hold GROUP IFNAME\n");
			return 2;
		}
	}
	family = parse_addr(group, mgid);
	if (!family || !(mgid[0] == 0xff || (family == 4 && (mgid[12] & 0xf0) == 0xe0)))
		die("%s is not an IPv4 or IPv6 multicast address", group);
	if (bind && parse_addr(bind, want) != family)
		die("%s is not an address of the group's family", bind);
	if (count < 1 || count > MAX_COUNT || wait_s <= 0)
		die("-n takes 1..%d, -t a positive number of seconds", MAX_COUNT);

	find_where(devname, port, family, bind ? want : NULL, &w);
	if (w.gid.ndev_ifindex)
		if_indextoname(w.gid.ndev_ifindex, ifname);
	printf("mcgroup: device %s port %u, source GID[%u] %s (RoCE v2, netdev %s)\n",
	       ibv_get_device_name(w.dev), w.port, w.gid.gid_index,
	       gid_str(w.gid.gid.raw, s1, sizeof(s1)), ifname);
	printf("mcgroup: group %s = MGID %s, qkey %#x\n", group, gid_str(mgid, s2, sizeof(s2)), QKEY);

	/* Fork before any memory registration: the two processes share nothing. */
	if (pipe(down) || pipe(up))
		die("pipe: %s", strerror(errno));
	child = fork();
	if (child < 0)
		die("fork: %s", strerror(errno));
	if (child == 0) {
		close(down[1]);
		close(up[0]);
		_exit(sender(&w, mgid, count, down[0], up[1]));
	}
	close(down[0]);
	close(up[1]);

	ep_open(&rx, &w, 2 * count, 0);
	ep_open(&wit, &w, 2 * count, 0);
	att_rx = ibv_attach_mcast(rx.qp, (const union ibv_gid *)mgid, 0);
	att_wit = ibv_attach_mcast(wit.qp, (const union ibv_gid *)mgid, 0);
	if (att_rx || att_wit)
		die("ibv_attach_mcast: %d, %d (%s)", att_rx, att_wit, strerror(att_rx ? att_rx : att_wit));
	ipfd = ip_join(mgid, w.gid.ndev_ifindex);
	printf("mcgroup: receiver QP %#x and witness QP %#x attached (ibv_attach_mcast returned 0, 0); "
	       "IP-level join on %s\n", rx.qp->qp_num, wit.qp->qp_num, ifname);

	put(down[1], 'R', 0, 0);
	m1 = get(up[0], "first batch");
	printf("mcgroup: sender QP %#x sent %u datagrams to the group\n", m1.qpn, m1.count);
	for (double end = now() + wait_s;
	     (trx.got[1] < (int)m1.count || twit.got[1] < (int)m1.count) && now() < end; nap()) {
		collect(&rx, &trx, m1.qpn);
		collect(&wit, &twit, m1.qpn);
	}
	printf("mcgroup: while attached: sent %u, received %d, witness received %d\n", m1.count,
	       trx.got[1], twit.got[1]);

	det_rx = ibv_detach_mcast(rx.qp, (const union ibv_gid *)mgid, 0);
	printf("mcgroup: receiver detached (ibv_detach_mcast returned %d)\n", det_rx);
	put(down[1], 'D', 0, 0);
	m2 = get(up[0], "second batch");
	for (double end = now() + wait_s; twit.got[2] < (int)m2.count && now() < end; nap())
		collect(&wit, &twit, m1.qpn);
	/* The witness has the batch; give a straggler for the detached QP the
	 * same chance, a bounded moment more. */
	for (double end = now() + 0.3; now() < end; nap())
		collect(&rx, &trx, m1.qpn);
	collect(&wit, &twit, m1.qpn);
	printf("mcgroup: after detach:  sent %u, received %d, witness received %d\n", m2.count,
	       trx.got[2], twit.got[2]);

	put(down[1], 'Q', 0, 0);
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "mcgroup: the sender failed (status %#x)\n", status);
		fail = 1;
	}
	det_wit = ibv_detach_mcast(wit.qp, (const union ibv_gid *)mgid, 0);
	ebusy = ep_close(&rx);
	if (ebusy || det_wit || ep_close(&wit)) {
		fprintf(stderr, "mcgroup: teardown: destroy receiver QP %d, detach witness %d\n", ebusy,
			det_wit);
		fail = 1;
	}
	close(ipfd);

	printf("mcgroup: verbs served by: ibv_attach_mcast=%s ibv_detach_mcast=%s _ibv_query_gid_ex=%s\n",
	       owner((void *)ibv_attach_mcast), owner((void *)ibv_detach_mcast),
	       owner((void *)_ibv_query_gid_ex));
	if (m1.count != (uint32_t)count || m2.count != (uint32_t)count) {
		fprintf(stderr, "mcgroup: FAIL: %u and %u of %d sends completed\n", m1.count, m2.count, count);
		fail = 1;
	}
	if (trx.got[1] != count || twit.got[1] != count || twit.got[2] != count) {
		fprintf(stderr, "mcgroup: FAIL: an attached QP missed datagrams\n");
		fail = 1;
	}
	if (det_rx || trx.got[2]) {
		fprintf(stderr, "mcgroup: FAIL: detach returned %d and the receiver got %d datagrams after it\n",
			det_rx, trx.got[2]);
		fail = 1;
	}
	if (trx.bad || twit.bad) {
		fprintf(stderr, "mcgroup: FAIL: %d unexpected completions\n", trx.bad + twit.bad);
		fail = 1;
	}
	if (fail)
		return 1;
	printf("mcgroup: OK: %d datagrams received while attached, none after detach\n", count);
	return 0;
}
