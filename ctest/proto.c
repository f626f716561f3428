/* rsverbs.h and verbs.h together: no conflict, and each rsverbs_* function
 * has exactly the type of the rdma-core function it stands for. */
#include <infiniband/verbs.h>
#include <rsverbs.h>

#define SAME(a, b) _Static_assert(__builtin_types_compatible_p(__typeof__(&a), __typeof__(&b)), #a " vs " #b)
SAME(rsverbs_attach_mcast, ibv_attach_mcast);
SAME(rsverbs_detach_mcast, ibv_detach_mcast);
SAME(rsverbs_query_gid_ex, _ibv_query_gid_ex);
SAME(rsverbs_query_gid, ibv_query_gid);
SAME(rsverbs_query_gid_table, _ibv_query_gid_table);

int main(void) { return 0; }
