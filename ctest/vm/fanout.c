/* fanout: raw UD verbs multicast from one sender to N receivers on other
 * hosts (testbed/fanout.sh boots them), with sequence numbers in bounded
 * bursts and a TCP control channel from every receiver to the sender.
 *
 *   fanout send --port P --receivers N [--plan all|joinleave] [--bursts K]
 *               [--burst B] [--group A.B.C.D] [--expect all|none] [--dev DEV]
 *   fanout recv --server IP --port P --id I [--join] [--group A.B.C.D] [--dev DEV]
 *               [--expect all|none] [--skip SEQ]
 *   fanout gather --port P --receivers N     (sender side of a barrier)
 *   fanout ready --server IP --port P --id I (receiver side: returns on "go")
 *
 * The sender coordinates: between bursts it tells receivers to attach or
 * detach their main QP (ibv_attach_mcast / ibv_detach_mcast) and waits for
 * every ack, so "datagrams sent while a member" is exact.  After a burst it
 * announces the burst's sequence range; each receiver waits until its
 * witness QP (attached for the whole run, same group) has the whole burst
 * and, if it is a member, until its main QP has it too (bounded: 30 s, a
 * failure), then reports distinct/duplicate counts.  The witness makes an
 * empty main QP meaningful: the burst demonstrably reached this host's rxe.
 * rxe queues a group's packet to the QPs attached at receive time
 * (rxe_recv.c, rxe_rcv_mcast_pkt), so a QP detached before the burst (acked)
 * cannot get any of it later.  With --expect none (nothing is expected to
 * arrive) the bound is 3 s and reaching it is the normal outcome.
 *
 * Q_Key 0x11111111 (perftest's) on every QP; payload: magic, run nonce, seq.
 * Exit: 0 when the sender's verdict holds, 1 when not, 2 on setup errors. */
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <sys/random.h>
#include <sys/socket.h>
#define PROG_NAME "fanout"
#include "common.h"

#define QKEY 0x11111111u
#define MAGIC 0x66616e6fu /* "fano" */
#define GRH 40
#define MSG 64
#define SLOT (GRH + MSG)
#define RQ_DEPTH 512
#define MAX_RECV 64
#define MAX_SEQ 100000

/* ---- options ----------------------------------------------------------- */

struct opts {
	const char *mode, *server, *plan, *group, *dev, *expect;
	int port, receivers, bursts, burst, id, join, skip;
};

/* parse_opts' `rest`: every option but --join takes a value, so a last
 * argument that is none of them lacks one; any other is unknown. */
static int bad_opt(const char *arg, int last)
{
	if (last)
		die("%s needs a value", arg);
	die("unknown option %s", arg);
}

static void parse(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){ .plan = "all", .group = "239.77.0.1", .expect = "all",
			    .bursts = 4, .burst = 100, .id = -1, .skip = -1 };
	o->dev = getenv("RSVERBS_NET_DEV") ? getenv("RSVERBS_NET_DEV") : "rxe2";
	const struct opt opts[] = {
		{ .name = "--join", .on = &o->join },
		{ .name = "--port", .num = &o->port },
		{ .name = "--receivers", .num = &o->receivers },
		{ .name = "--bursts", .num = &o->bursts },
		{ .name = "--burst", .num = &o->burst },
		{ .name = "--id", .num = &o->id },
		{ .name = "--skip", .num = &o->skip },
		{ .name = "--server", .str = &o->server },
		{ .name = "--plan", .str = &o->plan },
		{ .name = "--group", .str = &o->group },
		{ .name = "--dev", .str = &o->dev },
		{ .name = "--expect", .str = &o->expect },
		{ .name = NULL },
	};
	if (argc < 2)
		die("usage: fanout send|recv|gather|ready [options] (see ctest/vm/fanout.c)");
	o->mode = argv[1];
	parse_opts(argc, argv, 2, opts, bad_opt);
	if (o->port <= 0 || o->port > 65535)
		die("--port 1..65535 required");
	if (strcmp(o->expect, "all") && strcmp(o->expect, "none"))
		die("--expect all|none");
	if ((!strcmp(o->mode, "send") || !strcmp(o->mode, "gather")) &&
	    (o->receivers < 1 || o->receivers > MAX_RECV))
		die("--receivers 1..%d required", MAX_RECV);
	if (o->bursts < 1 || o->burst < 1 || (long)o->bursts * o->burst > MAX_SEQ || o->burst > RQ_DEPTH / 2)
		die("--bursts/--burst: at most %d datagrams in all, %d a burst", MAX_SEQ, RQ_DEPTH / 2);
	if ((!strcmp(o->mode, "recv") || !strcmp(o->mode, "ready")) && (!o->server || o->id < 0))
		die("--server and --id required");
}

/* ---- the control channel: text lines over TCP ---------------------------- */

struct chan {
	int fd;
	char buf[512];
	size_t len;
};

static void chan_send(struct chan *c, const char *fmt, ...)
{
	char line[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (write(c->fd, line, (size_t)n) != n)
		die("control channel write: %s", strerror(errno));
}

/* Next line (without the newline) into `out`, waiting at most `ms`.
 * Returns 0, or -1 on timeout or a closed channel. */
static int chan_line(struct chan *c, char *out, size_t n, int ms)
{
	uint64_t end = now_ns() + (uint64_t)ms * 1000000ull;
	for (;;) {
		char *nl = memchr(c->buf, '\n', c->len);
		if (nl) {
			size_t l = (size_t)(nl - c->buf);
			snprintf(out, n, "%.*s", (int)l, c->buf);
			memmove(c->buf, nl + 1, c->len - l - 1);
			c->len -= l + 1;
			return 0;
		}
		uint64_t t = now_ns();
		if (t >= end || c->len == sizeof(c->buf))
			return -1;
		struct pollfd p = { .fd = c->fd, .events = POLLIN };
		if (poll(&p, 1, (int)((end - t) / 1000000ull) + 1) <= 0)
			continue;
		ssize_t r = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
		if (r <= 0)
			return -1;
		c->len += (size_t)r;
	}
}

/* Connects to the sender, retrying for up to 180 s (it may boot later). */
static int connect_retry(const char *ip, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
		die("--server %s: not an IPv4 address", ip);
	for (int i = 0; i < 1800; i++) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			die("socket: %s", strerror(errno));
		if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
			return fd;
		close(fd);
		usleep(100000);
	}
	die("cannot reach the sender at %s:%d for 180 s", ip, port);
	return -1;
}

/* Accepts `n` receivers (each says "h ID"), for up to 180 s; chans[ID]. */
static void accept_all(int port, int n, struct chan *chans)
{
	int one = 1, ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	char line[64];
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ls, (struct sockaddr *)&sa, sizeof(sa)) || listen(ls, MAX_RECV))
		die("listen on port %d: %s", port, strerror(errno));
	for (int i = 0; i < n; i++)
		chans[i].fd = -1;
	for (int got = 0; got < n;) {
		struct pollfd p = { .fd = ls, .events = POLLIN };
		if (poll(&p, 1, 180000) <= 0)
			die("only %d of %d receivers connected within 180 s", got, n);
		struct chan c = { .fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC) };
		int id;
		if (c.fd < 0 || chan_line(&c, line, sizeof(line), 30000) || sscanf(line, "h %d", &id) != 1 ||
		    id < 0 || id >= n || chans[id].fd >= 0)
			die("bad hello from a receiver: '%s'", line);
		chans[id] = c;
		got++;
	}
	close(ls);
}

/* ---- verbs ------------------------------------------------------------- */

struct ud {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
	int gid_index;
	union ibv_gid mgid;
};

/* The RoCE v2 GID equal to ::ffff:`ip` on port 1 (rdma_cm's and perftest's
 * choice for that address). */
static int gid_index_of(struct ibv_context *ctx, const char *ip)
{
	struct ibv_port_attr pa;
	uint8_t want[16] = { [10] = 0xff, [11] = 0xff };
	if (inet_pton(AF_INET, ip, want + 12) != 1)
		die("RSVERBS_NET_IP %s: not an IPv4 address", ip);
	if (ibv_query_port(ctx, 1, &pa))
		die("ibv_query_port: %s", strerror(errno));
	for (int i = 0; i < pa.gid_tbl_len; i++) {
		struct ibv_gid_entry e;
		if (!ibv_query_gid_ex(ctx, 1, i, &e, 0) && e.gid_type == IBV_GID_TYPE_ROCE_V2 &&
		    !memcmp(e.gid.raw, want, 16))
			return i;
	}
	die("no RoCE v2 GID ::ffff:%s on port 1", ip);
	return -1;
}

static void ud_open(struct ud *u, const struct opts *o, int nslots)
{
	const char *ip = getenv("RSVERBS_NET_IP");
	struct in_addr g;
	if (!ip)
		die("RSVERBS_NET_IP is not set (run in a networked guest: testbed/vm.sh --ip)");
	if (inet_pton(AF_INET, o->group, &g) != 1 || (ntohl(g.s_addr) >> 28) != 14)
		die("--group %s: not an IPv4 multicast address", o->group);
	memset(&u->mgid, 0, sizeof(u->mgid));
	u->mgid.raw[10] = u->mgid.raw[11] = 0xff;
	memcpy(u->mgid.raw + 12, &g, 4);
	u->ctx = open_by_name(o->dev);
	u->gid_index = gid_index_of(u->ctx, ip);
	u->pd = ibv_alloc_pd(u->ctx);
	u->cq = u->pd ? ibv_create_cq(u->ctx, 2 * RQ_DEPTH + 16, NULL, NULL, 0) : NULL;
	u->buf = calloc((size_t)nslots, SLOT);
	u->mr = u->cq && u->buf ? ibv_reg_mr(u->pd, u->buf, (size_t)nslots * SLOT, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!u->mr)
		die("pd/cq/mr on %s: %s", o->dev, strerror(errno));
}

static struct ibv_qp *ud_qp(struct ud *u)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = u->cq, .recv_cq = u->cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 16, .max_recv_wr = RQ_DEPTH, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(u->pd, &ia);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };
	if (!qp || ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		die("UD QP to INIT: %s", strerror(errno));
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		die("UD QP to RTR: %s", strerror(errno));
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("UD QP to RTS: %s", strerror(errno));
	return qp;
}

static void post_recv(struct ud *u, struct ibv_qp *qp, int slot)
{
	struct ibv_sge s = { .addr = (uintptr_t)(u->buf + (size_t)slot * SLOT), .length = SLOT, .lkey = u->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = (uint64_t)slot, .sg_list = &s, .num_sge = 1 }, *bad;
	if (ibv_post_recv(qp, &wr, &bad))
		die("ibv_post_recv: %s", strerror(errno));
}

/* ---- receiver ---------------------------------------------------------- */

static int ip_join(const char *group, const char *ifname)
{
	uint8_t g[16] = { [10] = 0xff, [11] = 0xff };
	unsigned ifindex = if_nametoindex(ifname);
	int fd = -1;
	if (!ifindex || inet_pton(AF_INET, group, g + 12) != 1 || (fd = ip_join_mgid(g, ifindex)) < 0)
		die("IP_ADD_MEMBERSHIP %s on %s: %s", group, ifname, strerror(errno));
	return fd;
}

struct rx {
	struct ud u;
	struct ibv_qp *main_qp, *wit_qp;
	uint32_t nonce;
	int skip;
	uint8_t *main_n, *wit_n; /* per seq: copies received */
	long stray, dups;
};

/* Polls the CQ once; counts every datagram of this run per QP and seq. */
static void rx_poll(struct rx *r)
{
	struct ibv_wc wc[32];
	int n = ibv_poll_cq(r->u.cq, 32, wc);
	if (n < 0)
		die("ibv_poll_cq failed");
	for (int i = 0; i < n; i++) {
		struct ibv_qp *qp = wc[i].qp_num == r->main_qp->qp_num ? r->main_qp : r->wit_qp;
		int slot = (int)wc[i].wr_id;
		if (wc[i].status == IBV_WC_SUCCESS && wc[i].opcode == IBV_WC_RECV) {
			uint32_t *m = (uint32_t *)(r->u.buf + (size_t)slot * SLOT + GRH);
			uint8_t *cnt = qp == r->main_qp ? r->main_n : r->wit_n;
			if (m[0] != MAGIC || m[1] != r->nonce || m[2] >= MAX_SEQ)
				r->stray++; /* another run's, or garbage */
			else if ((int)m[2] == r->skip && qp == r->main_qp)
				; /* --skip: a broken receiver, for the self-test of the checks */
			else if (cnt[m[2]]++ && qp == r->main_qp)
				r->dups++;
		} else if (wc[i].status != IBV_WC_WR_FLUSH_ERR) {
			die("recv completion status %s", ibv_wc_status_str(wc[i].status));
		}
		post_recv(&r->u, qp, slot);
	}
}

static int have_all(const uint8_t *cnt, int first, int last)
{
	for (int s = first; s <= last; s++)
		if (!cnt[s])
			return 0;
	return 1;
}

static int count_range(const uint8_t *cnt, int first, int last)
{
	int n = 0;
	for (int s = first; s <= last; s++)
		n += cnt[s] != 0;
	return n;
}

static int do_recv(const struct opts *o)
{
	struct rx r = { .skip = o->skip };
	struct chan c = { .fd = -1 };
	char line[128];
	int member = 0, wto = 0;
	long wait_ms = strcmp(o->expect, "all") ? 3000 : 30000;

	ud_open(&r.u, o, 2 * RQ_DEPTH);
	r.main_qp = ud_qp(&r.u);
	r.wit_qp = ud_qp(&r.u);
	for (int i = 0; i < RQ_DEPTH; i++) {
		post_recv(&r.u, r.main_qp, i);
		post_recv(&r.u, r.wit_qp, RQ_DEPTH + i);
	}
	r.main_n = calloc(MAX_SEQ, 1);
	r.wit_n = calloc(MAX_SEQ, 1);
	if (!r.main_n || !r.wit_n)
		die("out of memory");
	if (o->join)
		ip_join(o->group, getenv("RSVERBS_NET_IF") ? getenv("RSVERBS_NET_IF") : "eth0");
	errno = 0;
	int rc = ibv_attach_mcast(r.wit_qp, &r.u.mgid, 0);
	printf("CALL id=%d attach witness rc=%d errno=%d\n", o->id, rc, rc ? errno : 0);
	c.fd = connect_retry(o->server, o->port);
	chan_send(&c, "h %d\n", o->id);
	if (chan_line(&c, line, sizeof(line), 60000) || sscanf(line, "n %u", &r.nonce) != 1)
		die("no run nonce from the sender");
	for (;;) {
		int k, first, last;
		if (chan_line(&c, line, sizeof(line), 300000))
			die("the sender went silent (300 s)");
		if (!strcmp(line, "A") || !strcmp(line, "D")) {
			int att = line[0] == 'A';
			rx_poll(&r);
			errno = 0;
			rc = att ? ibv_attach_mcast(r.main_qp, &r.u.mgid, 0) : ibv_detach_mcast(r.main_qp, &r.u.mgid, 0);
			int e = rc ? errno : 0;
			printf("CALL id=%d %s main rc=%d errno=%d\n", o->id, att ? "attach" : "detach", rc, e);
			if (!rc)
				member = att;
			chan_send(&c, "%c %d %d\n", att ? 'a' : 'd', rc, e);
		} else if (sscanf(line, "E %d %d %d", &k, &first, &last) == 3 && first >= 0 && last < MAX_SEQ &&
			   first <= last) {
			uint64_t end = now_ns() + (uint64_t)wait_ms * 1000000ull;
			for (;;) {
				rx_poll(&r);
				if (have_all(r.wit_n, first, last) && (!member || have_all(r.main_n, first, last)))
					break;
				if (now_ns() > end) {
					wto++;
					break;
				}
				usleep(200);
			}
			chan_send(&c, "r %d %d %d\n", k, count_range(r.main_n, first, last),
				  count_range(r.wit_n, first, last));
		} else if (!strcmp(line, "Q")) {
			rx_poll(&r);
			chan_send(&c, "q %ld %ld %d\n", r.dups, r.stray, wto);
			break;
		} else {
			die("unknown command '%s'", line);
		}
	}
	errno = 0;
	rc = ibv_detach_mcast(r.wit_qp, &r.u.mgid, 0);
	printf("CALL id=%d detach witness rc=%d errno=%d\n", o->id, rc, rc ? errno : 0);
	print_served_by(stdout);
	return 0;
}

/* ---- sender ------------------------------------------------------------ */

/* Member of burst `k`?  plan all: always.  plan joinleave: receiver i joins
 * at burst i%3 and leaves at i%3+2+i%2; with 3 or more receivers the last
 * one never joins (a detached receiver next to members). */
static int member_at(const struct opts *o, int i, int k)
{
	if (!strcmp(o->plan, "all"))
		return 1;
	if (o->receivers >= 3 && i == o->receivers - 1)
		return 0;
	int from = i % 3, to = from + 2 + i % 2;
	return k >= from && k < to;
}

struct peer {
	int member, sent_member, got_member, got_other, wit;
	char calls[256];
};

static void ack(struct chan *c, struct peer *p, int id, char want)
{
	char line[64], tag;
	int rc, e;
	if (chan_line(c, line, sizeof(line), 60000) || sscanf(line, "%c %d %d", &tag, &rc, &e) != 3 || tag != want)
		die("receiver %d: no %c ack ('%s')", id, want, line);
	size_t l = strlen(p->calls);
	snprintf(p->calls + l, sizeof(p->calls) - l, "%s%c%d", l ? "," : "", want, rc ? -e : 0);
	if (!rc)
		p->member = want == 'a';
}

static int do_send(const struct opts *o)
{
	struct ud u;
	struct chan c[MAX_RECV];
	struct peer p[MAX_RECV] = { 0 };
	uint32_t nonce;
	int n = o->receivers, all = !strcmp(o->expect, "all"), bad = 0, seq = 0;
	char line[128];

	if (getrandom(&nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce))
		die("no random nonce");
	ud_open(&u, o, 16);
	struct ibv_qp *qp = ud_qp(&u);
	struct ibv_ah_attr aa = {
		.is_global = 1, .port_num = 1,
		.grh = { .dgid = u.mgid, .sgid_index = (uint8_t)u.gid_index, .hop_limit = 64 },
	};
	struct ibv_ah *ah = ibv_create_ah(u.pd, &aa);
	if (!ah)
		die("ibv_create_ah: %s", strerror(errno));
	accept_all(o->port, n, c);
	for (int i = 0; i < n; i++)
		chan_send(&c[i], "n %u\n", nonce);
	uint64_t t0 = now_ns();
	for (int k = 0; k < o->bursts; k++) {
		for (int i = 0; i < n; i++)
			if (member_at(o, i, k) != p[i].member)
				chan_send(&c[i], member_at(o, i, k) ? "A\n" : "D\n");
		for (int i = 0; i < n; i++)
			if (member_at(o, i, k) != p[i].member)
				ack(&c[i], &p[i], i, member_at(o, i, k) ? 'a' : 'd');
		int first = seq;
		for (int j = 0; j < o->burst; j++, seq++) {
			uint32_t *m = (uint32_t *)u.buf;
			m[0] = MAGIC, m[1] = nonce, m[2] = (uint32_t)seq;
			struct ibv_sge s = { .addr = (uintptr_t)u.buf, .length = MSG, .lkey = u.mr->lkey };
			struct ibv_send_wr wr = {
				.sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
				.wr.ud = { .ah = ah, .remote_qpn = 0xffffff, .remote_qkey = QKEY },
			}, *badwr;
			struct ibv_wc wc;
			int r;
			if (ibv_post_send(qp, &wr, &badwr))
				die("ibv_post_send: %s", strerror(errno));
			uint64_t end = now_ns() + 10000000000ull;
			while (!(r = ibv_poll_cq(u.cq, 1, &wc)) && now_ns() < end)
				;
			if (r != 1 || wc.status != IBV_WC_SUCCESS)
				die("send completion: %s", r == 1 ? ibv_wc_status_str(wc.status) : "none in 10 s");
		}
		for (int i = 0; i < n; i++)
			chan_send(&c[i], "E %d %d %d\n", k, first, seq - 1);
		for (int i = 0; i < n; i++) {
			int rk, got, wit;
			if (chan_line(&c[i], line, sizeof(line), 120000) ||
			    sscanf(line, "r %d %d %d", &rk, &got, &wit) != 3 || rk != k)
				die("receiver %d: no report for burst %d ('%s')", i, k, line);
			if (p[i].member) {
				p[i].sent_member += o->burst;
				p[i].got_member += got;
			} else {
				p[i].got_other += got;
			}
			p[i].wit += wit;
		}
		fprintf(stderr, "fanout: burst %d/%d done (%d datagrams)\n", k + 1, o->bursts, seq);
	}
	for (int i = 0; i < n; i++)
		if (p[i].member)
			chan_send(&c[i], "D\n");
	for (int i = 0; i < n; i++)
		if (p[i].member)
			ack(&c[i], &p[i], i, 'd');
	double secs = (double)(now_ns() - t0) / 1e9;
	printf("SENT datagrams=%d bursts=%d burst=%d plan=%s expect=%s secs=%.2f\n", seq, o->bursts, o->burst,
	       o->plan, o->expect, secs);
	for (int i = 0; i < n; i++) {
		long dups, stray;
		int wto, got = p[i].got_member + p[i].got_other;
		chan_send(&c[i], "Q\n");
		if (chan_line(&c[i], line, sizeof(line), 60000) || sscanf(line, "q %ld %ld %d", &dups, &stray, &wto) != 3)
			die("receiver %d: no final report ('%s')", i, line);
		int lost = p[i].sent_member - p[i].got_member;
		/* all: every datagram sent while a member, once, and nothing else;
		 * none: nothing at all reaches the QP (the witness neither). */
		int ok = all ? lost == 0 && p[i].got_other == 0 && dups == 0 && stray == 0 && wto == 0
			     : got == 0 && dups == 0 && p[i].wit == 0;
		bad |= !ok;
		printf("RECV id=%d sent_member=%d got=%d dup=%ld lost=%d extra=%d stray=%ld witness=%d wto=%d calls=%s %s\n",
		       i, p[i].sent_member, got, dups, lost, p[i].got_other, stray, p[i].wit, wto, p[i].calls,
		       ok ? "ok" : "FAIL");
	}
	printf("VERDICT %s\n", bad ? "FAIL" : "ok");
	print_served_by(stdout);
	return bad;
}

/* ---- barrier for programs without a control channel (mckey) -------------- */

static int do_gather(const struct opts *o)
{
	struct chan c[MAX_RECV];
	accept_all(o->port, o->receivers, c);
	for (int i = 0; i < o->receivers; i++)
		chan_send(&c[i], "go\n");
	return 0;
}

static int do_ready(const struct opts *o)
{
	struct chan c = { .fd = connect_retry(o->server, o->port) };
	char line[16];
	chan_send(&c, "h %d\n", o->id);
	if (chan_line(&c, line, sizeof(line), 300000) || strcmp(line, "go"))
		die("no go from the sender");
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	setvbuf(stdout, NULL, _IOLBF, 0);
	parse(argc, argv, &o);
	if (!strcmp(o.mode, "send"))
		return do_send(&o);
	if (!strcmp(o.mode, "recv"))
		return do_recv(&o);
	if (!strcmp(o.mode, "gather"))
		return do_gather(&o);
	if (!strcmp(o.mode, "ready"))
		return do_ready(&o);
	die("unknown mode %s", o.mode);
	return 2;
}
