/* select: rsverbs' GID selection (rsverbs_gid_index(3)) beside what rdma_cm
 * itself chooses, for ctest/vm/select.sh. The rsverbs functions are looked up
 * with dlsym, so that the program runs relinked (select.rsv) or preloaded.
 *
 *   select rdma_cm ADDR GROUP   rdma_cm's own choice for ADDR: rdma_resolve_addr
 *                               from ADDR to the multicast GROUP binds a GID
 *                               entry; librdmacm reads its GID back
 *                               (route.addr.addr.ibaddr.sgid: the kernel's
 *                               ucma.c `ucma_query_addr` → `rdma_read_gids`,
 *                               the bound sgid_attr's GID). Then a UD QP and
 *                               rdma_join_multicast: the join event's
 *                               ah_attr.grh.sgid_index is the bound entry's
 *                               index (cma.c `cma_make_mc_event` →
 *                               `ib_init_ah_from_mcmember`). The kernel refuses
 *                               an IPv6 join on RoCE v2 (cma.c
 *                               `cma_iboe_join_multicast`: -ENOTSUPP); then
 *                               cm=- and the GID alone says what was bound.
 *                               rsverbs_gid_index_rdma_cm on the same device,
 *                               port, address and the netdev that holds ADDR.
 *                               Prints "rdma_cm ADDR DEV PORT IFNAME
 *                               gid=SYSFS-FORM cm=N|- rsverbs=M".
 *   select perftest DEV PORT    prints "perftest DEV PORT N" (or "-1 ERRNO").
 *   select find DEV PORT TYPE FAMILY IFNAME|0 VLAN START
 *                               prints "find N" (or "find -1 ERRNO"); FAMILY is
 *                               4, 6 or 0.
 *   select rdma_cm_at DEV PORT ADDR IFNAME|0
 *                               rsverbs_gid_index_rdma_cm alone: "at N" or "at -1 ERRNO".
 *   select errors DEV           the documented errors: NULL context and
 *                               address, a port the kernel does not have, bad
 *                               filter values, an address with no entry, a
 *                               family other than IP; "errors: N wrong" and
 *                               exit 1 when one answer differs.
 * Exits 2 on a setup error. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <rdma/rdma_cma.h>
#include <sys/un.h>
#include <rsverbs.h>
#define PROG_NAME "select"
#include "common.h"
#include "cm.h"

static __typeof__(&rsverbs_gid_index_rdma_cm) rs_rdma_cm;
static __typeof__(&rsverbs_gid_index_perftest) rs_perftest;
static __typeof__(&rsverbs_gid_index_find) rs_find;

static unsigned ifindex_of(const char *name)
{
	if (!strcmp(name, "0"))
		return 0;
	unsigned i = if_nametoindex(name);
	if (!i)
		die("no netdev %s", name);
	return i;
}

/* The netdev that holds the address `ss` (getifaddrs). */
static unsigned holder_of(const struct sockaddr_storage *ss, char name[IF_NAMESIZE])
{
	char want[INET6_ADDRSTRLEN], have[INET6_ADDRSTRLEN];
	getnameinfo((const struct sockaddr *)ss, sizeof(*ss), want, sizeof(want), NULL, 0, NI_NUMERICHOST);
	struct ifaddrs *ifa, *i;
	if (getifaddrs(&ifa))
		die("getifaddrs: %s", strerror(errno));
	unsigned found = 0;
	for (i = ifa; i && !found; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != ss->ss_family)
			continue;
		socklen_t len = ss->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
		if (getnameinfo(i->ifa_addr, len, have, sizeof(have), NULL, 0, NI_NUMERICHOST) == 0 && !strcmp(have, want)) {
			snprintf(name, IF_NAMESIZE, "%s", i->ifa_name);
			found = if_nametoindex(i->ifa_name);
		}
	}
	freeifaddrs(ifa);
	if (!found)
		die("no netdev holds %s", want);
	return found;
}

static int by_rdma_cm(const char *addr, const char *group)
{
	struct sockaddr_storage src, dst;
	addr_of(addr, &src);
	addr_of(group, &dst);
	char ifname[IF_NAMESIZE] = "";
	unsigned ifindex = holder_of(&src, ifname);

	struct rdma_event_channel *ch;
	struct rdma_cm_id *id = resolved_udp_id(&ch, &src, &dst);
	struct ibv_pd *pd = ibv_alloc_pd(id->verbs);
	struct ibv_cq *cq = pd ? ibv_create_cq(id->verbs, 2, NULL, NULL, 0) : NULL;
	if (!cq)
		die("pd/cq: %s", strerror(errno));
	struct ibv_qp_init_attr qa = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	if (rdma_create_qp(id, pd, &qa))
		die("rdma_create_qp: %s", strerror(errno));
	struct rdma_ud_param ud;
	int joined = !rdma_join_multicast(id, (struct sockaddr *)&dst, NULL);
	if (joined)
		expect_event(ch, RDMA_CM_EVENT_MULTICAST_JOIN, &ud);
	else if (!(errno == 524 /* the kernel's ENOTSUPP */ && src.ss_family == AF_INET6))
		die("rdma_join_multicast: %s", strerror(errno));

	errno = 0;
	int rs = rs_rdma_cm(id->verbs, id->port_num, (struct sockaddr *)&src, ifindex);
	int e = errno;
	const uint8_t *g = id->route.addr.addr.ibaddr.sgid.raw;
	printf("rdma_cm %s %s %u %s gid=", addr, ibv_get_device_name(id->verbs->device), id->port_num, ifname);
	for (int i = 0; i < 16; i += 2)
		printf("%s%02x%02x", i ? ":" : "", g[i], g[i + 1]);
	if (joined)
		printf(" cm=%u", ud.ah_attr.grh.sgid_index);
	else
		printf(" cm=-");
	printf(" rsverbs=%d", rs);
	if (rs < 0)
		printf(" errno=%d", e);
	printf("\n");
	if (joined)
		rdma_leave_multicast(id, (struct sockaddr *)&dst);
	rdma_destroy_qp(id);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return 0;
}

static void print_answer(const char *what, int rc)
{
	int e = errno;
	if (rc < 0)
		printf("%s -1 %d\n", what, e);
	else
		printf("%s %d\n", what, rc);
}

static int wrong;

static void expect(const char *what, int rc, int want_errno)
{
	int e = errno;
	printf("%-40s ret=%d errno=%d\n", what, rc, e);
	if (rc != -1 || e != want_errno)
		wrong++;
}

static int errors(struct ibv_context *ctx)
{
	struct sockaddr_storage v4, v6, none;
	addr_of("192.0.2.1", &v4);
	addr_of("2001:db8::1", &v6);
	addr_of("198.18.0.99", &none);
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	errno = 0;
	expect("rdma_cm NULL context", rs_rdma_cm(NULL, 1, (struct sockaddr *)&v4, 0), EINVAL);
	expect("rdma_cm NULL addr", rs_rdma_cm(ctx, 1, NULL, 0), EINVAL);
	expect("rdma_cm AF_UNIX", rs_rdma_cm(ctx, 1, (struct sockaddr *)&un, 0), EAFNOSUPPORT);
	expect("rdma_cm port 0", rs_rdma_cm(ctx, 0, (struct sockaddr *)&v4, 0), EINVAL);
	expect("rdma_cm port 99", rs_rdma_cm(ctx, 99, (struct sockaddr *)&v6, 0), EINVAL);
	expect("rdma_cm address with no entry", rs_rdma_cm(ctx, 1, (struct sockaddr *)&none, 0), ENOENT);
	expect("perftest NULL context", rs_perftest(NULL, 1), EINVAL);
	expect("perftest port 0", rs_perftest(ctx, 0), EINVAL);
	expect("perftest port 255", rs_perftest(ctx, 255), EINVAL);
	expect("find NULL context", rs_find(NULL, 1, -1, 0, 0, -1, 0), EINVAL);
	expect("find port 2", rs_find(ctx, 2, -1, 0, 0, -1, 0), EINVAL);
	expect("find gid_type 3", rs_find(ctx, 1, 3, 0, 0, -1, 0), EINVAL);
	expect("find family AF_UNIX", rs_find(ctx, 1, -1, AF_UNIX, 0, -1, 0), EINVAL);
	expect("find vlan 4096", rs_find(ctx, 1, -1, 0, 0, 4096, 0), EINVAL);
	expect("find start -1", rs_find(ctx, 1, -1, 0, 0, -1, -1), EINVAL);
	expect("find start past the table", rs_find(ctx, 1, -1, 0, 0, -1, 1 << 30), ENOENT);
	expect("find an ifindex with no entry", rs_find(ctx, 1, -1, 0, 1u << 30, -1, 0), ENOENT);
	/* A success leaves errno as it was. */
	errno = 4242;
	int rc = rs_perftest(ctx, 1);
	printf("%-40s ret=%d errno=%d\n", "perftest keeps errno on success", rc, errno);
	if (rc < 0 || errno != 4242)
		wrong++;
	printf("errors: %d wrong\n", wrong);
	return wrong ? 1 : 0;
}

int main(int argc, char **argv)
{
	rs_rdma_cm = (__typeof__(rs_rdma_cm))dlsym(RTLD_DEFAULT, "rsverbs_gid_index_rdma_cm");
	rs_perftest = (__typeof__(rs_perftest))dlsym(RTLD_DEFAULT, "rsverbs_gid_index_perftest");
	rs_find = (__typeof__(rs_find))dlsym(RTLD_DEFAULT, "rsverbs_gid_index_find");
	if (!rs_rdma_cm || !rs_perftest || !rs_find)
		die("rsverbs' GID selection is not loaded (run select.rsv, or preload librsverbs.so.1)");
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && !strcmp(argv[1], "rdma_cm"))
		return by_rdma_cm(argv[2], argv[3]);
	if (argc == 4 && !strcmp(argv[1], "perftest")) {
		struct ibv_context *ctx = open_by_name(argv[2]);
		char what[64];
		snprintf(what, sizeof(what), "perftest %s %s", argv[2], argv[3]);
		print_answer(what, rs_perftest(ctx, (uint8_t)atoi(argv[3])));
		return 0;
	}
	if (argc == 9 && !strcmp(argv[1], "find")) {
		struct ibv_context *ctx = open_by_name(argv[2]);
		int fam = atoi(argv[5]);
		fam = fam == 4 ? AF_INET : fam == 6 ? AF_INET6 : fam;
		print_answer("find", rs_find(ctx, (uint8_t)atoi(argv[3]), atoi(argv[4]), fam, ifindex_of(argv[6]),
					     (int)strtol(argv[7], NULL, 0), atoi(argv[8])));
		return 0;
	}
	if (argc == 6 && !strcmp(argv[1], "rdma_cm_at")) {
		struct ibv_context *ctx = open_by_name(argv[2]);
		struct sockaddr_storage a;
		addr_of(argv[4], &a);
		print_answer("at", rs_rdma_cm(ctx, (uint8_t)atoi(argv[3]), (struct sockaddr *)&a, ifindex_of(argv[5])));
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "errors"))
		return errors(open_by_name(argv[2]));
	die("usage: select rdma_cm ADDR GROUP | perftest DEV PORT | find DEV PORT TYPE FAMILY IFNAME VLAN START | rdma_cm_at DEV PORT ADDR IFNAME | errors DEV");
}
