/* Conformance cases for ibv_attach_mcast, ibv_detach_mcast, ibv_query_gid_ex,
 * ibv_query_gid and ibv_query_gid_table, on every RDMA device of the machine.
 *
 * An ordinary rdma-core program: it only includes <infiniband/verbs.h>.
 * ctest/guest_suite.sh runs it three ways in one boot -- linked against
 * rdma-core alone (the reference), relinked with -lrsverbs first, and with
 * LD_PRELOAD=librsverbs.so.1 -- and requires identical output. Each line
 * records a call's return value, errno (seeded with a sentinel before every
 * call, so "untouched" is visible) and, for GID queries, every byte of the
 * caller's buffer. The "served-by" lines name the object that defines each
 * verb (dladdr) and are compared separately. */
#include "common.h"

static int ncases;

static void line(const char *dev, const char *name, int ret, int err)
{
	printf("%s %s ret=%d errno=%d\n", dev, name, ret, err);
	ncases++;
}

#define MC(qp, att, g, lid, name)                                                              \
	do {                                                                                   \
		int e_, r_ = SENTINEL_CALL(&e_, (att) ? ibv_attach_mcast(qp, g, lid)           \
						      : ibv_detach_mcast(qp, g, lid)); \
		line(dev, name, r_, e_);                                                       \
	} while (0)

/* Whether port 1 of ctx is InfiniBand. */
static int port_is_ib(struct ibv_context *ctx)
{
	struct ibv_port_attr pa;
	return ibv_query_port(ctx, 1, &pa) == 0 && pa.link_layer != IBV_LINK_LAYER_ETHERNET;
}

/* Whether dev is one of the comma-separated names of list. */
static int in_list(const char *list, const char *dev)
{
	size_t n = strlen(dev);
	for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, dev, n) && (p[n] == ',' || p[n] == '\0'))
			return 1;
	return 0;
}

struct objs {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
};

static struct ibv_qp *new_qp(struct objs *o, enum ibv_qp_type t)
{
	return new_qp_on(o->pd, o->cq, t);
}

/* A QP of type t, or NULL when the provider has none of that type
 * (EOPNOTSUPP); any other failure exits as new_qp's (which tries once more
 * and says why). */
static struct ibv_qp *try_qp(struct objs *o, enum ibv_qp_type t)
{
	struct ibv_qp *qp = try_qp_on(o->pd, o->cq, t);
	if (!qp && errno == EOPNOTSUPP)
		return NULL;
	return qp ? qp : new_qp(o, t);
}

static void mcast_cases(const char *dev, struct objs *o)
{
	union ibv_gid g6, g4, nonmc[3], tmp;
	struct ibv_qp *ud = new_qp(o, IBV_QPT_UD), *ud2 = new_qp(o, IBV_QPT_UD);
	/* A provider without RC or UC QPs (the test bed's sib: UD only) gets
	 * a line saying so instead of their cases. */
	struct ibv_qp *rc = try_qp(o, IBV_QPT_RC), *uc = try_qp(o, IBV_QPT_UC);
	char name[96];
	int e, r;
	/* The LID of every attach: 0 on RoCE (ignored there), a multicast LID
	 * on InfiniBand, where the kernel core refuses any other
	 * (verbs.c is_valid_mcast_lid: 0xC000-0xFFFE). */
	uint16_t vl = port_is_ib(o->ctx) ? 0xc000 : 0;

	gid_from_hex(&g6, "ff0e0000000000000000000012345678");
	gid_from_hex(&g4, "00000000000000000000ffffef010203");       /* ::ffff:239.1.2.3 */
	gid_from_hex(&nonmc[0], "fe800000000000000000000000000001"); /* fe80::1 */
	gid_from_hex(&nonmc[1], "00000000000000000000ffffc0000201"); /* ::ffff:192.0.2.1 */
	memset(&nonmc[2], 0, sizeof(nonmc[2]));                      /* :: */

	MC(ud, 1, &g6, vl, "attach-ipv6-mgid");
	MC(ud, 1, &g6, vl, "attach-again-dedup");
	MC(ud, 0, &g6, vl, "detach");
	MC(ud, 0, &g6, vl, "detach-twice");
	MC(ud, 0, &g4, vl, "detach-never-attached");
	MC(ud, 1, &g4, vl, "attach-ipv4-mapped-mgid");
	MC(ud, 0, &g4, vl, "detach-ipv4-mapped-mgid");
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "attach-non-multicast-%d", i);
		MC(ud, 1, &nonmc[i], vl, name);
		snprintf(name, sizeof(name), "detach-non-multicast-%d", i);
		MC(ud, 0, &nonmc[i], vl, name);
	}
	if (rc) {
		MC(rc, 1, &g6, vl, "attach-rc-qp");
		MC(rc, 0, &g6, vl, "detach-rc-qp");
	} else {
		line(dev, "no-rc-qp", 0, 0);
	}
	if (uc)
		MC(uc, 1, &g6, vl, "attach-uc-qp");
	else
		line(dev, "no-uc-qp", 0, 0);
	for (unsigned lid = 0x1234; lid <= 0xffff; lid += 0xffff - 0x1234) {
		snprintf(name, sizeof(name), "attach-lid-%#x", lid);
		MC(ud, 1, &g6, lid, name);
		snprintf(name, sizeof(name), "detach-other-lid-%#x", lid);
		MC(ud, 0, &g6, lid ^ 1, name);
		snprintf(name, sizeof(name), "detach-lid-%#x", lid);
		MC(ud, 0, &g6, lid, name);
	}
	/* Groups keyed on (gid, lid): two lids of one gid are two entries. */
	MC(ud, 1, &g6, vl, "attach-gid-lid0");
	MC(ud, 1, &g4, vl, "attach-second-group");
	r = SENTINEL_CALL(&e, ibv_destroy_qp(ud));
	line(dev, "destroy-attached-qp", r, e);
	MC(ud, 0, &g6, vl, "detach-lid0-after-ebusy");
	MC(ud, 0, &g4, vl, "detach-second-group");

	/* A handle the kernel never gave out: a copy of a live QP. */
	struct ibv_qp fake = *ud2;
	fake.handle = 0x7fff1234;
	MC(&fake, 1, &g6, vl, "attach-bad-handle");
	MC(&fake, 0, &g6, vl, "detach-bad-handle");
	/* The context's fd is not open. (A copy of the context would not do:
	 * rdma-core finds its private data at fixed offsets before it.) Both
	 * libraries read cmd_fd afresh on every call. */
	int saved_fd = o->ctx->cmd_fd;
	o->ctx->cmd_fd = 1000;
	MC(ud2, 1, &g6, vl, "attach-closed-fd");
	MC(ud2, 0, &g6, vl, "detach-closed-fd");
	o->ctx->cmd_fd = saved_fd;

	/* InfiniBand's own LID cases: the multicast range's ends, the
	 * unicast LID below it, LID 0 and the permissive LID 0xFFFF (refused
	 * by is_valid_mcast_lid), and a detach with another multicast LID
	 * than the attach's. */
	if (vl) {
		static const uint16_t ib_lids[] = { 0, 0xbfff, 0xc000, 0xc001, 0xfffe, 0xffff };
		for (size_t i = 0; i < sizeof(ib_lids) / sizeof(ib_lids[0]); i++) {
			snprintf(name, sizeof(name), "ib-attach-lid-%#x", ib_lids[i]);
			MC(ud, 1, &g6, ib_lids[i], name);
			snprintf(name, sizeof(name), "ib-detach-lid-%#x", ib_lids[i]);
			MC(ud, 0, &g6, ib_lids[i], name);
		}
		MC(ud, 1, &g6, 0xc000, "ib-attach-lid-0xc000-again");
		MC(ud, 0, &g6, 0xc001, "ib-detach-with-another-mlid");
		MC(ud, 0, &g6, 0xc000, "ib-detach-with-its-mlid");
	}

	/* Limits: groups per QP, then QPs per group, then everything detached.
	 * groups-per-qp is max_mcast_grp + 1 attaches (8,193 on rxe), most of
	 * this program's time (and 10-20x slower on 7.x under TCG); attach and
	 * detach are write() commands in both libraries whatever the ioctl
	 * does, so conform.sh runs it in the ioctl mode only
	 * (CONFORM_SKIP_GROUP_LIMIT=1 in the noioctl modes). */
	int ok = 0, ferr = 0, fret = 0, det = 0, derr = 0;
	struct ibv_device_attr da;
	ibv_query_device(o->ctx, &da);
	int group_limit = !getenv("CONFORM_SKIP_GROUP_LIMIT");
	for (int i = 0; group_limit && i <= da.max_mcast_grp; i++) {
		tmp = g6;
		tmp.raw[12] = i >> 8;
		tmp.raw[13] = i & 0xff;
		r = SENTINEL_CALL(&e, ibv_attach_mcast(ud2, &tmp, vl));
		if (r) {
			fret = r, ferr = e;
			break;
		}
		ok++;
	}
	for (int i = 0; i < ok; i++) {
		tmp = g6;
		tmp.raw[12] = i >> 8;
		tmp.raw[13] = i & 0xff;
		if (SENTINEL_CALL(&e, ibv_detach_mcast(ud2, &tmp, vl)) == 0)
			det++;
		else
			derr = e;
	}
	snprintf(name, sizeof(name), "groups-per-qp ok=%d then ret=%d errno=%d detached=%d last-detach-errno=%d",
		 ok, fret, ferr, det, derr);
	if (group_limit)
		line(dev, name, 0, 0);

	int nq = da.max_mcast_qp_attach + 1;
	struct ibv_qp **qps = calloc(nq, sizeof(*qps));
	ok = 0, ferr = 0, fret = 0, det = 0;
	for (int i = 0; i < nq; i++) {
		qps[i] = new_qp(o, IBV_QPT_UD);
		r = SENTINEL_CALL(&e, ibv_attach_mcast(qps[i], &g4, vl));
		if (r) {
			fret = r, ferr = e;
			break;
		}
		ok++;
	}
	for (int i = 0; i < nq && qps[i]; i++) {
		if (i < ok && SENTINEL_CALL(&e, ibv_detach_mcast(qps[i], &g4, vl)) == 0)
			det++;
		ibv_destroy_qp(qps[i]);
	}
	free(qps);
	snprintf(name, sizeof(name), "qps-per-group ok=%d then ret=%d errno=%d detached=%d", ok, fret, ferr, det);
	line(dev, name, 0, 0);

	r = SENTINEL_CALL(&e, ibv_destroy_qp(ud));
	line(dev, "destroy-after-detach", r, e);
	ibv_destroy_qp(ud2);
	if (rc)
		ibv_destroy_qp(rc);
	if (uc)
		ibv_destroy_qp(uc);
}

/* One query with a buffer of `size` bytes pre-filled with 0xa5; prints every
 * byte (or a hash for large buffers). */
static int query(const char *dev, const char *name, struct ibv_context *ctx, uint32_t port,
		 uint32_t idx, uint32_t flags, size_t size, int print)
{
	size_t cap = size < 64 ? 64 : size;
	unsigned char *buf = malloc(cap);
	int ret, err;

	memset(buf, 0xa5, cap);
	ret = SENTINEL_CALL(&err, _ibv_query_gid_ex(ctx, port, idx, (struct ibv_gid_entry *)buf, flags, size));
	if (print) {
		printf("%s %s port=%u idx=%u flags=%#x size=%zu ret=%d errno=%d ", dev, name, port, idx,
		       flags, size, ret, err);
		/* The entry is the caller's `size` bytes; what was written past
		 * them (rdma-core's sysfs fallback writes 32 bytes whatever the
		 * size) is reported apart, on stderr. */
		if (size <= 64)
			for (size_t i = 0; i < size; i++)
				printf("%02x", buf[i]);
		else
			printf("fnv=%016llx", (unsigned long long)fnv(buf, size));
		printf("\n");
		ncases++;
		for (size_t i = size; i < cap; i++)
			if (buf[i] != 0xa5) {
				fprintf(stderr, "overrun %s %s idx=%u size=%zu: byte %zu written\n", dev, name, idx, size, i);
				break;
			}
	}
	free(buf);
	return ret;
}

static void gid_cases(const char *dev, struct ibv_context *ctx)
{
	static const uint32_t bad_idx[] = { 1024, 0x10000, 0x7fffffff, 0x80000000, 0xffffffff };
	static const uint32_t bad_port[] = { 0, 2, 255, 256, 257, 0xffffffff };
	static const size_t sizes[] = { 0, 8, 28, 31, 32, 33, 40, 4096, 65535, 65536, 70000 };
	int first_empty = -1;

	/* The whole table of port 1, as perftest's GID selection scans it. */
	uint64_t h = 0xcbf29ce484222325ull;
	int counts[128] = { 0 };
	for (uint32_t i = 0; i < 1024; i++) {
		struct ibv_gid_entry e;
		memset(&e, 0xa5, sizeof(e));
		int err, r = SENTINEL_CALL(&err, ibv_query_gid_ex(ctx, 1, i, &e, 0));
		counts[r & 127]++;
		h = (h ^ fnv((unsigned char *)&e, sizeof(e)) ^ (uint64_t)r << 32 ^ (uint64_t)err) * 0x100000001b3ull;
		if (r == ENODATA && first_empty < 0)
			first_empty = i;
		if (i < 8 || (int)i == first_empty)
			query(dev, "entry", ctx, 1, i, 0, 32, 1);
	}
	printf("%s scan-1024 ok=%d enodata=%d other=%d fnv=%016llx\n", dev, counts[0], counts[ENODATA],
	       1024 - counts[0] - counts[ENODATA], (unsigned long long)h);
	ncases++;
	if (first_empty < 0)
		first_empty = 1023;
	for (unsigned i = 0; i < sizeof(bad_idx) / sizeof(*bad_idx); i++)
		query(dev, "bad-index", ctx, 1, bad_idx[i], 0, 32, 1);
	for (unsigned i = 0; i < sizeof(bad_port) / sizeof(*bad_port); i++)
		query(dev, "bad-port", ctx, bad_port[i], 0, 0, 32, 1);
	query(dev, "flags", ctx, 1, 0, 1, 32, 1);
	query(dev, "flags", ctx, 1, 0, 0x80000000, 32, 1);
	query(dev, "flags-empty", ctx, 1, first_empty, 1, 32, 1);
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(*sizes); i++) {
		query(dev, "size", ctx, 1, 0, 0, sizes[i], 1);
		query(dev, "size-empty", ctx, 1, first_empty, 0, sizes[i], 1);
	}
	/* The context's fd is not open (see mcast_cases). */
	int saved_fd = ctx->cmd_fd;
	ctx->cmd_fd = 1000;
	query(dev, "closed-fd", ctx, 1, 0, 0, 32, 1);
	query(dev, "closed-fd-oversize", ctx, 1, 0, 0, 70000, 1);
	ctx->cmd_fd = saved_fd;
}

/* ibv_query_gid into a 32-byte buffer pre-filled with 0xa5, of which the
 * verb may write the first 16; prints the result and those 16 bytes when
 * `print`, and folds them into *h when h is given. `gid` NULL: passes NULL. */
static int qgid(const char *dev, const char *name, struct ibv_context *ctx, uint8_t port, int idx, int print,
		uint64_t *h, int null_gid)
{
	unsigned char buf[32];
	int ret, err;

	memset(buf, 0xa5, sizeof(buf));
	ret = SENTINEL_CALL(&err, ibv_query_gid(ctx, port, idx, null_gid ? NULL : (union ibv_gid *)buf));
	if (print) {
		printf("%s qgid-%s port=%u idx=%d gid=%s ret=%d errno=%d ", dev, name, port, idx,
		       null_gid ? "NULL" : "buf", ret, err);
		for (int i = 0; i < 16; i++)
			printf("%02x", buf[i]);
		printf("\n");
		ncases++;
	}
	if (h)
		*h = (*h ^ fnv(buf, 16) ^ (uint64_t)(unsigned)ret << 32 ^ (uint64_t)err) * 0x100000001b3ull;
	for (int i = 16; i < 32; i++)
		if (buf[i] != 0xa5) {
			fprintf(stderr, "overrun %s qgid-%s idx=%d: byte %d written\n", dev, name, idx, i);
			break;
		}
	return ret;
}

/* The table's buffer: 64 KiB and a margin, pre-filled with 0xa5. */
#define TABLE_CAP (65536 + 64)

/* _ibv_query_gid_table into the table buffer (or NULL). The caller's
 * buffer is max_entries * entry_size bytes (the whole buffer when that is
 * larger): prints the result, the FNV of those bytes and the first 64 of
 * them. What was written past them (rdma-core's sysfs fallback writes whole
 * 32-byte entries) is reported apart, on stderr. */
static ssize_t qtable(const char *dev, const char *name, struct ibv_context *ctx, size_t max, uint32_t flags,
		      size_t esz, int null_entries)
{
	unsigned char *buf = malloc(TABLE_CAP);
	size_t region = TABLE_CAP;
	ssize_t ret;
	int err;

	if (esz == 0 || max <= TABLE_CAP / esz)
		region = esz * max;
	memset(buf, 0xa5, TABLE_CAP);
	ret = SENTINEL_CALL(&err, _ibv_query_gid_table(ctx, null_entries ? NULL : (struct ibv_gid_entry *)buf, max,
						       flags, esz));
	printf("%s table-%s max=%zu flags=%#x esz=%zu entries=%s ret=%zd errno=%d fnv=%016llx ", dev, name, max, flags,
	       esz, null_entries ? "NULL" : "buf", ret, err, (unsigned long long)fnv(buf, region));
	for (size_t i = 0; i < region && i < 64; i++)
		printf("%02x", buf[i]);
	printf("\n");
	ncases++;
	for (size_t i = region; i < TABLE_CAP; i++)
		if (buf[i] != 0xa5) {
			fprintf(stderr, "overrun %s table-%s max=%zu esz=%zu: byte %zu written\n", dev, name, max, esz, i);
			break;
		}
	free(buf);
	return ret;
}

/* Every context stays open until the program ends, so that no context is
 * allocated where another was freed: rsverbs keeps rdma-core's per-context
 * "no GID methods" latch by the context's address, and a context at a freed
 * one's address inherits it (src/uverbs/route.rs; rsverbs(7), DIFFERENCES):
 * its first GID call then skips the ioctl rdma-core would try, and with it
 * the EPROTONOSUPPORT left in errno. The fresh-context cases below are about
 * a first call, not about that. */
static struct ibv_context *held[16];
static int nheld;

static void hold(struct ibv_context *ctx)
{
	if (nheld < (int)(sizeof(held) / sizeof(*held)))
		held[nheld++] = ctx;
	else
		ibv_close_device(ctx);
}

/* ibv_query_gid and ibv_query_gid_table. `dev_handle` opens the fresh
 * contexts whose first GID call is one of these (in the EPROTONOSUPPORT
 * mode that call meets the refused ioctl and latches the fallback). */
static void gid_family_cases(const char *dev, struct ibv_context *ctx, struct ibv_device *dev_handle)
{
	static const int bad_idx[] = { 0x7fffffff, INT32_MIN, -2 };
	static const uint8_t bad_port[] = { 0, 2, 255 };
	static const size_t sizes[] = { 0, 4, 16, 28, 31, 33, 40, 48, 64, 4096 };
	/* A fallback mode: rdma-core would store through a NULL entries. */
	int fallback = getenv("CONFORM_FALLBACK") != NULL;
	int first_empty = -1, ok = 0, fails = 0;
	uint64_t h = 0xcbf29ce484222325ull;
	struct ibv_context *fresh;

	/* A fresh context whose first GID call is the table, with flags set:
	 * EINVAL from the kernel, or EOPNOTSUPP from the fallback (errno the
	 * refused ioctl's where it was tried). */
	fresh = ibv_open_device(dev_handle);
	if (fresh) {
		qtable(dev, "first-call-flags", fresh, 64, 1, sizeof(struct ibv_gid_entry), 0);
		qtable(dev, "then", fresh, 64, 0, sizeof(struct ibv_gid_entry), 0);
		hold(fresh);
	}
	fresh = ibv_open_device(dev_handle);
	if (fresh) {
		qgid(dev, "first-call", fresh, 1, 0, 1, NULL, 0);
		hold(fresh);
	}

	/* ibv_query_gid over port 1, indices -1 to 1025. */
	for (int i = -1; i <= 1025; i++) {
		int r = qgid(dev, "scan", ctx, 1, i, 0, &h, 0);
		int print = i < 8 || i >= 1023;
		if (r == 0)
			ok++;
		else
			fails++;
		if (first_empty < 0 && i >= 0) {
			unsigned char zero[16] = { 0 }, g[16];
			memset(g, 0xa5, sizeof(g));
			if (ibv_query_gid(ctx, 1, i, (union ibv_gid *)g) == 0 && !memcmp(g, zero, 16)) {
				first_empty = i;
				print = 1;
			}
		}
		if (print)
			qgid(dev, "entry", ctx, 1, i, 1, NULL, 0);
	}
	printf("%s qgid-scan ok=%d fail=%d fnv=%016llx\n", dev, ok, fails, (unsigned long long)h);
	ncases++;
	for (unsigned i = 0; i < sizeof(bad_idx) / sizeof(*bad_idx); i++)
		qgid(dev, "bad-index", ctx, 1, bad_idx[i], 1, NULL, 0);
	for (unsigned i = 0; i < sizeof(bad_port) / sizeof(*bad_port); i++)
		if (qgid(dev, "bad-port", ctx, bad_port[i], 0, 1, NULL, 0) != 0)
			/* Failed: neither library stores the GID, so NULL is safe. */
			qgid(dev, "bad-port", ctx, bad_port[i], 0, 1, NULL, 1);

	/* The table: its size n, then max_entries around it and far off it. */
	ssize_t n = qtable(dev, "all", ctx, 64, 0, sizeof(struct ibv_gid_entry), 0);
	size_t around[] = { 0, 1, n > 1 ? (size_t)n - 1 : 1, n > 0 ? (size_t)n : 1, (size_t)n + 1, 2047, 2048,
			    SIZE_MAX / sizeof(struct ibv_gid_entry), SIZE_MAX / sizeof(struct ibv_gid_entry) - 1, SIZE_MAX };
	for (unsigned i = 0; i < sizeof(around) / sizeof(*around); i++)
		qtable(dev, "max", ctx, around[i], 0, sizeof(struct ibv_gid_entry), 0);
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(*sizes); i++)
		qtable(dev, "entry-size", ctx, 8, 0, sizes[i], 0);
	qtable(dev, "entry-size", ctx, 1, 0, 65535, 0);
	qtable(dev, "entry-size", ctx, 1, 0, 65536, 0);
	qtable(dev, "entry-size-small-max", ctx, n > 1 ? (size_t)n - 1 : 1, 0, 8, 0);
	qtable(dev, "flags", ctx, 64, 1, sizeof(struct ibv_gid_entry), 0);
	qtable(dev, "flags", ctx, 64, 0x80000000u, sizeof(struct ibv_gid_entry), 0);
	qtable(dev, "flags-too-big", ctx, 4096, 1, sizeof(struct ibv_gid_entry), 0);
	qtable(dev, "null", ctx, 0, 0, sizeof(struct ibv_gid_entry), 1);
	if (!fallback)
		qtable(dev, "null", ctx, 4, 0, sizeof(struct ibv_gid_entry), 1);

	/* The context's fd is not open (see mcast_cases). */
	int saved_fd = ctx->cmd_fd;
	ctx->cmd_fd = 1000;
	qgid(dev, "closed-fd", ctx, 1, 0, 1, NULL, 0);
	qtable(dev, "closed-fd", ctx, 64, 0, sizeof(struct ibv_gid_entry), 0);
	qtable(dev, "closed-fd-too-big", ctx, 4096, 0, sizeof(struct ibv_gid_entry), 0);
	ctx->cmd_fd = saved_fd;
}

int main(int argc, char **argv)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	/* Only these devices: a comma-separated list (CONFORM_DEVS in conform.sh). */
	const char *only = argc > 1 ? argv[1] : NULL;

	if (!list || n == 0) {
		fprintf(stderr, "conform: no RDMA device\n");
		return 2;
	}
	print_served_by(stderr);
	for (int d = 0; d < n; d++) {
		const char *dev = ibv_get_device_name(list[d]);
		struct objs o;
		if (only && !in_list(only, dev))
			continue;
		/* iWARP (siw) has RC QPs only and no multicast op: ctest/vm/siw.sh. */
		if (list[d]->transport_type == IBV_TRANSPORT_IWARP) {
			fprintf(stderr, "conform: %s is iWARP: its cases are siw.sh's\n", dev);
			continue;
		}
		o.ctx = ibv_open_device(list[d]);
		if (!o.ctx) {
			fprintf(stderr, "conform: cannot open %s\n", dev);
			return 2;
		}
		o.pd = ibv_alloc_pd(o.ctx);
		o.cq = ibv_create_cq(o.ctx, 64, NULL, NULL, 0);
		gid_cases(dev, o.ctx);
		gid_family_cases(dev, o.ctx, list[d]);
		mcast_cases(dev, &o);
		ibv_destroy_cq(o.cq);
		ibv_dealloc_pd(o.pd);
		hold(o.ctx);
	}
	while (nheld > 0)
		ibv_close_device(held[--nheld]);
	ibv_free_device_list(list);
	fprintf(stderr, "conform: %d cases\n", ncases);
	return 0;
}
