/* An ordinary rdma-core program (only <infiniband/verbs.h>) that passes NULL
 * to the five verbs. rdma-core crashes here; rsverbs answers EINVAL.
 * Run relinked (-lrsverbs first) and as a preload over a -libverbs build.
 * It also reports which object defines each symbol it called (dladdr). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <string.h>

static int fails;

static void expect_einval(const char *what, int ret)
{
	int e = errno;
	printf("%-34s ret=%d errno=%d\n", what, ret, e);
	if (ret != EINVAL || e != EINVAL)
		fails++;
}

/* ibv_query_gid's convention: -1, errno EINVAL. */
static void expect_minus1(const char *what, int ret)
{
	int e = errno;
	printf("%-34s ret=%d errno=%d\n", what, ret, e);
	if (ret != -1 || e != EINVAL)
		fails++;
}

/* _ibv_query_gid_table's: -EINVAL, errno EINVAL. */
static void expect_neg_einval(const char *what, ssize_t ret)
{
	int e = errno;
	printf("%-34s ret=%zd errno=%d\n", what, ret, e);
	if (ret != -EINVAL || e != EINVAL)
		fails++;
}

static const char *owner(void *fn)
{
	Dl_info info;
	return dladdr(fn, &info) && info.dli_fname ? info.dli_fname : "?";
}

int main(void)
{
	union ibv_gid gid;
	struct ibv_qp qp;
	struct ibv_gid_entry entry;

	memset(&gid, 0, sizeof(gid));
	memset(&qp, 0, sizeof(qp)); /* qp.context == NULL */
	errno = 0;
	expect_einval("ibv_attach_mcast(NULL qp)", ibv_attach_mcast(NULL, &gid, 0));
	errno = 0;
	expect_einval("ibv_attach_mcast(NULL gid)", ibv_attach_mcast(&qp, NULL, 0));
	errno = 0;
	expect_einval("ibv_attach_mcast(qp->context NULL)", ibv_attach_mcast(&qp, &gid, 0));
	errno = 0;
	expect_einval("ibv_detach_mcast(NULL qp)", ibv_detach_mcast(NULL, &gid, 0));
	errno = 0;
	expect_einval("ibv_detach_mcast(qp->context NULL)", ibv_detach_mcast(&qp, &gid, 0));
	errno = 0;
	expect_einval("ibv_query_gid_ex(NULL context)", ibv_query_gid_ex(NULL, 1, 0, &entry, 0));
	errno = 0;
	expect_minus1("ibv_query_gid(NULL context)", ibv_query_gid(NULL, 1, 0, &gid));
	errno = 0;
	expect_neg_einval("ibv_query_gid_table(NULL context)", ibv_query_gid_table(NULL, &entry, 1, 0));
	printf("owner ibv_attach_mcast %s\n", owner((void *)ibv_attach_mcast));
	printf("owner ibv_detach_mcast %s\n", owner((void *)ibv_detach_mcast));
	printf("owner _ibv_query_gid_ex %s\n", owner((void *)_ibv_query_gid_ex));
	printf("owner ibv_query_gid %s\n", owner((void *)ibv_query_gid));
	printf("owner _ibv_query_gid_table %s\n", owner((void *)_ibv_query_gid_table));
	printf("null_args: %s\n", fails ? "FAIL" : "ok");
	return fails != 0;
}
