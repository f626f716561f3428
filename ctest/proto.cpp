// The same as proto.c, for C++ (extern "C" linkage and types).
#include <infiniband/verbs.h>
#include <rsverbs.h>
#include <type_traits>

static_assert(std::is_same<decltype(&rsverbs_attach_mcast), decltype(&ibv_attach_mcast)>::value, "attach");
static_assert(std::is_same<decltype(&rsverbs_detach_mcast), decltype(&ibv_detach_mcast)>::value, "detach");
static_assert(std::is_same<decltype(&rsverbs_query_gid_ex), decltype(&_ibv_query_gid_ex)>::value, "query");
static_assert(std::is_same<decltype(&rsverbs_query_gid), decltype(&ibv_query_gid)>::value, "query_gid");
static_assert(std::is_same<decltype(&rsverbs_query_gid_table), decltype(&_ibv_query_gid_table)>::value, "query_gid_table");

int main() { return 0; }
