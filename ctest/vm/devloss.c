/* Device loss for ibv_attach_mcast, ibv_detach_mcast and _ibv_query_gid_ex.
 *
 *   devloss delete -d DEV -i NETDEV -o OTHERDEV
 *     A context on DEV with a QP attached and two threads calling all three
 *     verbs; then `rdma link delete DEV` while they run. Linux 6.1's rxe has
 *     no disassociate_ucontext, so the kernel's uverbs removal waits for
 *     every open uverbs file to be closed: the command blocks, the calls
 *     keep working; once the context is closed the deletion completes. (A
 *     driver that can disassociate would give EIO instead: that case is
 *     recorded too, and devloss eio checks its semantics.) Then the sysfs
 *     fallback meets the deleted device's missing files (on OTHERDEV's fd,
 *     with ctx->device pointing at the deleted device, under an ENOTTY
 *     filter); then DEV is recreated and a NEW context must work --
 *     including one that lands on the old context's address and fd number.
 *   devloss eio -d DEV [-w]
 *     A disassociated device, modelled by a seccomp filter that makes the
 *     verbs ioctl and write() on cmd_fd fail with EIO after the objects
 *     exist: attach and query give EIO, detach EIO, or 0 when
 *     RDMAV_ALLOW_DISASSOC_DESTROY / MLX4_DEVICE_FATAL_CLEANUP is set and
 *     not "0" (rdma-core cmd.c verbs_is_destroy_err). -w: the ioctl fails
 *     with ENOTTY from the start (write() route; the sysfs GID route).
 *
 * "R ..." lines must be identical for rdma-core, relinked and preloaded.
 * stderr carries diagnostics and "reuse" lines. */
#include "common.h"
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>

static const char *devname = "rxedl", *ifname = "dummydl", *othername = "rxe1";

static struct ibv_device *find(struct ibv_device **list, const char *name)
{
	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			return list[i];
	return NULL;
}

struct objs {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp[2];
};

static struct ibv_qp *make_qp(struct objs *o)
{
	struct ibv_qp_init_attr a = {
		.send_cq = o->cq, .recv_cq = o->cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	return ibv_create_qp(o->pd, &a);
}

static int open_objs(struct objs *o, struct ibv_device *dev)
{
	memset(o, 0, sizeof(*o));
	if (!(o->ctx = ibv_open_device(dev)))
		return -1;
	o->pd = ibv_alloc_pd(o->ctx);
	o->cq = o->pd ? ibv_create_cq(o->ctx, 16, NULL, NULL, 0) : NULL;
	if (!o->cq || !(o->qp[0] = make_qp(o)) || !(o->qp[1] = make_qp(o)))
		return -1;
	return 0;
}

static void close_objs(struct objs *o)
{
	for (int i = 0; i < 2; i++)
		if (o->qp[i])
			ibv_destroy_qp(o->qp[i]);
	if (o->cq)
		ibv_destroy_cq(o->cq);
	if (o->pd)
		ibv_dealloc_pd(o->pd);
	if (o->ctx)
		ibv_close_device(o->ctx);
}

static void mc_line(const char *name, struct ibv_qp *qp, int attach, const union ibv_gid *g)
{
	int e, r = SENTINEL_CALL(&e, attach ? ibv_attach_mcast(qp, g, 0) : ibv_detach_mcast(qp, g, 0));
	printf("R %s ret=%d errno=%d\n", name, r, e);
}

static void q_port(const char *name, struct ibv_context *ctx, uint32_t port, uint32_t idx, uint32_t flags, size_t size)
{
	unsigned char buf[128];
	memset(buf, 0xa5, sizeof(buf));
	int e, r = SENTINEL_CALL(&e, _ibv_query_gid_ex(ctx, port, idx, (struct ibv_gid_entry *)buf, flags, size));
	printf("R %s port=%u idx=%u flags=%u size=%zu ret=%d errno=%d ", name, port, idx, flags, size, r, e);
	for (size_t i = 0; i < (size < 64 ? size : 64); i++)
		printf("%02x", buf[i]);
	printf("\n");
}

static void q_line(const char *name, struct ibv_context *ctx, uint32_t idx, uint32_t flags, size_t size)
{
	q_port(name, ctx, 1, idx, flags, size);
}

/* ---- calls in flight ------------------------------------------------------ */

struct hammer {
	struct objs *o;
	int kind; /* 0: query_gid_ex, 1: attach/detach */
	atomic_int *stop;
	uint64_t seen[2]; /* bit e: errno e seen (e < 128): [0] query or attach, [1] detach */
	long calls;
};

static void *hammer(void *arg)
{
	struct hammer *h = arg;
	union ibv_gid g;
	struct ibv_gid_entry e;
	for (unsigned i = 0; !atomic_load(h->stop); i++) {
		if (h->kind == 0) {
			int r = ibv_query_gid_ex(h->o->ctx, 1, i % 4, &e, 0);
			h->seen[0] |= 1ull << (r & 63);
		} else {
			mgid(&g, 0xd1, 0, i % 8);
			int r = ibv_attach_mcast(h->o->qp[1], &g, 0);
			h->seen[0] |= 1ull << (r & 63);
			r = ibv_detach_mcast(h->o->qp[1], &g, 0);
			h->seen[1] |= 1ull << (r & 63);
		}
		h->calls++;
	}
	return NULL;
}

static const char *set_str(uint64_t s, char *buf, size_t n)
{
	size_t k = 0;
	buf[0] = 0;
	for (int e = 0; e < 64; e++)
		if (s >> e & 1)
			k += snprintf(buf + k, n - k, "%s%d", k ? "," : "", e);
	return buf;
}

/* Waits for a child that may sit in the kernel (D state) until our own fds
 * are closed: never blocks past `ms`. Returns the status or -1. */
static int wait_nohang(pid_t pid, int ms)
{
	int st;
	for (int i = 0; i <= ms; i += 20) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return st;
		usleep(20000);
	}
	return -1;
}

static int gid_ready(const char *dev, int idx)
{
	char path[256], line[64];
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/gids/%d", dev, idx);
	FILE *f = fopen(path, "r");
	int ok = f && fgets(line, sizeof(line), f) && strncmp(line, "0000:0000:0000:0000:0000:0000:0000:0000", 39);
	if (f)
		fclose(f);
	return ok;
}

static int do_delete(void)
{
	int n;
	char st[32], s1[256], s2[256];
	union ibv_gid g;
	struct ibv_device **list1 = ibv_get_device_list(&n);
	struct ibv_device *dev = find(list1, devname), *other = find(list1, othername);
	struct objs o;
	/* Bring the heap to its steady state, so that a context opened after
	 * the loss can land on this one's address (see robust.c). */
	for (int i = 0; i < 4 && dev; i++) {
		if (open_objs(&o, dev))
			return 2;
		close_objs(&o);
	}
	if (!dev || !other || open_objs(&o, dev)) {
		fprintf(stderr, "devloss: cannot open %s / find %s\n", devname, othername);
		return 2;
	}
	void *old_addr = o.ctx;
	int old_fd = o.ctx->cmd_fd;
	mgid(&g, 0xd0, 0, 1);
	mc_line("before-loss-attach", o.qp[0], 1, &g);
	q_line("before-loss-query", o.ctx, 0, 0, 32);

	/* Calls in flight, then the deletion. */
	atomic_int stop = 0;
	struct hammer h[2] = { { .o = &o, .kind = 0, .stop = &stop }, { .o = &o, .kind = 1, .stop = &stop } };
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, hammer, &h[i]);
	usleep(200000);
	fflush(NULL);
	pid_t del = fork();
	if (del == 0) {
		dup2(2, 1);
		execlp("rdma", "rdma", "link", "delete", devname, (char *)NULL);
		_exit(127);
	}
	/* Up to 3 s for the deletion to return while the context is open. */
	int dst = wait_nohang(del, 3000);
	int returned_while_open = dst != -1;
	if (returned_while_open)
		usleep(300000); /* calls after the loss */
	atomic_store(&stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	fprintf(stderr, "devloss: %ld + %ld calls in flight around the deletion\n", h[0].calls, h[1].calls);
	printf("R loss rdma-link-delete-returned-while-context-open=%s\n", returned_while_open ? "yes" : "no");
	printf("R loss in-flight query results={%s}\n", set_str(h[0].seen[0], s1, sizeof(s1)));
	printf("R loss in-flight attach results={%s} detach results={%s}\n", set_str(h[1].seen[0], s1, sizeof(s1)),
	       set_str(h[1].seen[1], s2, sizeof(s2)));
	/* After the loss (EIO on a driver that disassociates), or still
	 * working (6.1 rxe: the deletion waits for us). */
	mc_line("after-loss-attach-new", o.qp[0], 1, &(union ibv_gid){ .raw = { 0xff, 0x0e, [15] = 2 } });
	q_line("after-loss-query", o.ctx, 0, 0, 32);
	q_line("after-loss-query-size70000", o.ctx, 0, 0, 70000);
	mc_line("after-loss-detach", o.qp[0], 0, &g);
	mc_line("after-loss-detach-new", o.qp[0], 0, &(union ibv_gid){ .raw = { 0xff, 0x0e, [15] = 2 } });
	/* Keep the old context's heap chunk for the new context: rdma-core
	 * callocs the provider context (for rxe, a bare struct verbs_context)
	 * and ibv_context sits at its end. Holding the freed chunk until just
	 * before the new open makes the new context land on the old address,
	 * which is what rsverbs keys its route cache on. (devloss.sh runs this
	 * with glibc's tcache off: calloc never takes chunks from the tcache.) */
	void *base = (char *)o.ctx - offsetof(struct verbs_context, context);
	size_t usable = malloc_usable_size(base);
	close_objs(&o);
	void *held[64], *hold = NULL;
	int nheld = 0;
	while (nheld < 64 && (held[nheld] = malloc(usable)) != base)
		nheld++;
	if (nheld < 64)
		hold = base;
	else
		fprintf(stderr, "devloss: could not hold the old context's chunk (%p, %zu bytes)\n", base, usable);
	if (!returned_while_open)
		dst = wait_nohang(del, 60000);
	printf("R loss rdma-link-delete %s\n", status_str(dst, st, sizeof(st)));

	/* The device is gone. */
	struct ibv_device **list2 = ibv_get_device_list(&n);
	printf("R gone listed=%s\n", find(list2, devname) ? "yes" : "no");
	ibv_free_device_list(list2);
	int e;
	struct ibv_context *c = SENTINEL_CALL(&e, ibv_open_device(dev));
	printf("R gone open-old-device %s errno=%d\n", c ? "opened" : "failed", c ? 0 : e);
	if (c)
		ibv_close_device(c);

	/* The sysfs fallback meets the deleted device's missing files: a
	 * context of OTHERDEV whose ->device is, for a few calls, the deleted
	 * device (kept alive by list1; both libraries read its sysfs path). */
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		if (install_filter(ENOTTY, -1, 0))
			_exit(3);
		struct ibv_context *oc = ibv_open_device(other);
		if (!oc)
			_exit(4);
		q_line("gone-sysfs-other-device-query", oc, 0, 0, 32);
		struct ibv_device *saved = oc->device;
		oc->device = dev;
		q_line("gone-sysfs-query", oc, 0, 0, 32);
		q_line("gone-sysfs-query-idx1", oc, 1, 0, 32);
		q_line("gone-sysfs-query-flags1", oc, 0, 1, 32);
		oc->device = saved;
		q_line("gone-sysfs-other-device-again", oc, 0, 0, 32);
		ibv_close_device(oc);
		fflush(NULL);
		_exit(0);
	}
	printf("R gone-sysfs child %s\n", status_str(wait_bounded(pid, 60000), st, sizeof(st)));

	/* Recreate the device: a new context must work. */
	char *add[] = { "timeout", "60", "rdma", "link", "add", (char *)devname, "type", "rxe", "netdev",
			(char *)ifname, NULL };
	printf("R recreate rdma-link-add %s\n", status_str(run_cmd(70000, add), st, sizeof(st)));
	int ready = 0;
	for (int i = 0; i < 600 && !(ready = gid_ready(devname, 0) && gid_ready(devname, 1)); i++)
		usleep(50000);
	printf("R recreate gids-ready=%s\n", ready ? "yes" : "no");
	list2 = ibv_get_device_list(&n);
	struct ibv_device *dev2 = find(list2, devname);
	printf("R recreate listed=%s\n", dev2 ? "yes" : "no");
	if (!dev2)
		return 1;
	/* Up to 48 contexts open at once, to take the freed chunks: keep the
	 * one on the old context's address if any (rsverbs keys its route cache
	 * by the context address), else the first; no verb is called on them. */
	free(hold); /* the other held chunks stay taken until the open */
	struct objs cand[48], o2;
	int nc = 0, pick = 0;
	for (; nc < 48; nc++) {
		if (open_objs(&cand[nc], dev2))
			break;
		if ((void *)cand[nc].ctx == old_addr) {
			pick = nc++;
			break;
		}
	}
	if (nc == 0)
		return 1;
	for (int i = 0; i < nheld; i++)
		free(held[i]);
	for (int i = 0; i < nc; i++)
		if (i != pick)
			close_objs(&cand[i]);
	o2 = cand[pick];
	fprintf(stderr, "reuse: new context on the recreated device at the old context's address: %s (%d opens), same fd: %s\n",
		(void *)o2.ctx == old_addr ? "yes" : "no", nc, o2.ctx->cmd_fd == old_fd ? "yes" : "no");
	for (uint32_t i = 0; i < 4; i++)
		q_line("recreated-query", o2.ctx, i, 0, 32);
	q_line("recreated-query-flags1", o2.ctx, 0, 1, 32);
	q_line("recreated-query-size40", o2.ctx, 0, 0, 40);
	q_line("recreated-query-size70000", o2.ctx, 0, 0, 70000);
	q_port("recreated-query-port0", o2.ctx, 0, 0, 0, 32);
	mc_line("recreated-attach", o2.qp[0], 1, &g);
	mc_line("recreated-attach-again", o2.qp[0], 1, &g);
	mc_line("recreated-detach", o2.qp[0], 0, &g);
	mc_line("recreated-detach-again", o2.qp[0], 0, &g);
	close_objs(&o2);
	ibv_free_device_list(list2);
	ibv_free_device_list(list1);
	return 0;
}

/* ---- a disassociated device (seccomp EIO) -------------------------------- */

static int do_eio(int write_route)
{
	int n;
	struct objs o, o2;
	union ibv_gid g1, g2, g3;
	if (write_route && install_filter(ENOTTY, -1, 0))
		return 3;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_device *dev = find(list, devname);
	if (!dev || open_objs(&o, dev) || open_objs(&o2, dev))
		return 2;
	mgid(&g1, 0xe1, 0, 1);
	mgid(&g2, 0xe1, 0, 2);
	mgid(&g3, 0xe1, 0, 3);
	mc_line("eio-setup-attach", o.qp[0], 1, &g1);
	mc_line("eio-setup-attach-2", o.qp[1], 1, &g2);
	q_line("eio-setup-query", o.ctx, 0, 0, 32);
	/* o2: never used through the verbs before the loss. */
	if (install_filter(write_route ? 0 : EIO, o.ctx->cmd_fd, EIO) ||
	    install_filter(write_route ? 0 : EIO, o2.ctx->cmd_fd, EIO))
		return 3;
	mc_line("eio-attach", o.qp[0], 1, &g3);
	mc_line("eio-attach-attached", o.qp[0], 1, &g1);
	q_line("eio-query", o.ctx, 0, 0, 32);
	q_line("eio-query-empty", o.ctx, 100, 0, 32);
	q_line("eio-query-size70000", o.ctx, 0, 0, 70000);
	q_line("eio-query-flags1", o.ctx, 0, 1, 32);
	mc_line("eio-detach-attached", o.qp[0], 0, &g1);
	mc_line("eio-detach-attached-again", o.qp[0], 0, &g1);
	mc_line("eio-detach-never-attached", o.qp[0], 0, &g3);
	mc_line("eio-detach-2", o.qp[1], 0, &g2);
	mc_line("eio-fresh-context-attach", o2.qp[0], 1, &g3);
	q_line("eio-fresh-context-query", o2.ctx, 0, 0, 32);
	q_line("eio-fresh-context-query-size70000", o2.ctx, 0, 0, 70000);
	mc_line("eio-fresh-context-detach", o2.qp[0], 0, &g3);
	int e, r = SENTINEL_CALL(&e, ibv_destroy_qp(o.qp[0]));
	printf("R eio-destroy-qp ret=%d errno=%d\n", r, e);
	/* Exit without cleanup: closing the fds lets the kernel detach and
	 * destroy everything. */
	return 0;
}

int main(int argc, char **argv)
{
	int write_route = 0;
	const struct opt opts[] = {
		{ .name = "-d", .str = &devname },
		{ .name = "-i", .str = &ifname },
		{ .name = "-o", .str = &othername },
		{ .name = "-w", .on = &write_route },
		{ .name = NULL },
	};
	if (argc < 2)
		return 2;
	parse_opts(argc, argv, 2, opts, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	print_served_by(stderr);
	if (!strcmp(argv[1], "delete"))
		return do_delete();
	if (!strcmp(argv[1], "eio"))
		return do_eio(write_route);
	return 2;
}
