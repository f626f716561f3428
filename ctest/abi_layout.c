/* The struct offsets rsverbs reads (src/abi.rs asserts the same numbers),
 * checked against the installed <infiniband/verbs.h>. Compiling is the test. */
#include <infiniband/verbs.h>
#include <stddef.h>

#define AT(type, field, off) _Static_assert(offsetof(type, field) == (off), #type "." #field)
#define SIZE(type, n) _Static_assert(sizeof(type) == (n), "sizeof " #type)

AT(struct ibv_device, name, 24);
AT(struct ibv_device, ibdev_path, 408);
SIZE(struct ibv_device, 664);
AT(struct ibv_context, device, 0);
AT(struct ibv_context, cmd_fd, 264);
AT(struct ibv_context, ops._compat_attach_mcast, 240);
AT(struct ibv_context, ops._compat_detach_mcast, 248);
AT(struct ibv_qp, context, 0);
AT(struct ibv_qp, handle, 48);
AT(struct ibv_qp, qp_type, 60);
SIZE(union ibv_gid, 16);
SIZE(struct ibv_gid_entry, 32);
AT(struct ibv_gid_entry, gid, 0);
AT(struct ibv_gid_entry, gid_index, 16);
AT(struct ibv_gid_entry, port_num, 20);
AT(struct ibv_gid_entry, gid_type, 24);
AT(struct ibv_gid_entry, ndev_ifindex, 28);
_Static_assert(IBV_GID_TYPE_ROCE_V2 == 2, "gid type");
_Static_assert(IBV_LINK_LAYER_ETHERNET == 2, "link layer");

int main(void) { return 0; }
