/* rsverbs.h and verbs.h together: no conflict, and each rsverbs_* function
 * has exactly the type of the rdma-core function it stands for. */
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rsverbs.h>

#define SAME(a, b) _Static_assert(__builtin_types_compatible_p(__typeof__(&a), __typeof__(&b)), #a " vs " #b)
SAME(rsverbs_attach_mcast, ibv_attach_mcast);
SAME(rsverbs_detach_mcast, ibv_detach_mcast);
SAME(rsverbs_query_gid_ex, _ibv_query_gid_ex);
SAME(rsverbs_query_gid, ibv_query_gid);
SAME(rsverbs_query_gid_table, _ibv_query_gid_table);

/* rsverbs' own functions (rsverbs_gid_index(3)): the types the page gives. */
#define TYPED(f, t) _Static_assert(__builtin_types_compatible_p(__typeof__(&f), t), #f)
TYPED(rsverbs_gid_index_rdma_cm, int (*)(struct ibv_context *, uint8_t, const struct sockaddr *, unsigned int));
TYPED(rsverbs_gid_index_perftest, int (*)(struct ibv_context *, uint8_t));
TYPED(rsverbs_gid_index_find, int (*)(struct ibv_context *, uint8_t, int, int, unsigned int, int, int));
/* rsverbs_mcast_join(3), and its flags: librdmacm's join flags' values. */
TYPED(rsverbs_mcast_join, int (*)(struct ibv_context *, uint8_t, const union ibv_gid *, int));
TYPED(rsverbs_mcast_leave, int (*)(struct ibv_context *, uint8_t, const union ibv_gid *, int));
_Static_assert(RSVERBS_MCAST_FULLMEMBER == RDMA_MC_JOIN_FLAG_FULLMEMBER, "full member");
_Static_assert(RSVERBS_MCAST_SENDONLY_FULLMEMBER == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER, "send-only");

int main(void) { return 0; }
