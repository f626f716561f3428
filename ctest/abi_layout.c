/* The struct offsets rsverbs reads (src/abi.rs asserts the same numbers),
 * checked against the installed <infiniband/verbs.h>, and the rdma_cm
 * commands it writes (src/uverbs/cm.rs, by position) against
 * <rdma/rdma_user_cm.h>. Compiling is the test. */
#define _DEFAULT_SOURCE /* htobe32, which <infiniband/ib.h> uses, under -std=c11 */
#include <infiniband/verbs.h>
#include <infiniband/ib.h>
#include <rdma/rdma_user_cm.h>
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

/* rdma_cm (src/uverbs/cm.rs: the *_LEN constants and the positions its
 * encoders write and its decoders read). */
SIZE(struct rdma_ucm_cmd_hdr, 8);
SIZE(struct rdma_ucm_create_id, 24);
AT(struct rdma_ucm_create_id, response, 8);
AT(struct rdma_ucm_create_id, ps, 16);
AT(struct rdma_ucm_create_id, qp_type, 18);
SIZE(struct rdma_ucm_create_id_resp, 4);
SIZE(struct rdma_ucm_destroy_id, 16);
AT(struct rdma_ucm_destroy_id, id, 8);
SIZE(struct rdma_ucm_destroy_id_resp, 4);
SIZE(struct rdma_ucm_bind, 136);
AT(struct rdma_ucm_bind, addr_size, 4);
AT(struct rdma_ucm_bind, addr, 8);
SIZE(struct rdma_ucm_query, 16);
AT(struct rdma_ucm_query, id, 8);
AT(struct rdma_ucm_query, option, 12);
SIZE(struct rdma_ucm_query_addr_resp, 280);
AT(struct rdma_ucm_query_addr_resp, port_num, 8);
AT(struct rdma_ucm_query_addr_resp, pkey, 10);
SIZE(struct rdma_ucm_join_mcast, 152);
AT(struct rdma_ucm_join_mcast, uid, 8);
AT(struct rdma_ucm_join_mcast, id, 16);
AT(struct rdma_ucm_join_mcast, addr_size, 20);
AT(struct rdma_ucm_join_mcast, join_flags, 22);
AT(struct rdma_ucm_join_mcast, addr, 24);
SIZE(struct rdma_ucm_get_event, 8);
SIZE(struct rdma_ucm_event_resp, 336);
AT(struct rdma_ucm_event_resp, id, 8);
AT(struct rdma_ucm_event_resp, event, 12);
AT(struct rdma_ucm_event_resp, status, 16);
AT(struct rdma_ucm_event_resp, param.ud.qkey, 24);
AT(struct rdma_ucm_event_resp, param.ud.ah_attr.grh.dgid, 28);
AT(struct rdma_ucm_event_resp, param.ud.ah_attr.dlid, 52);
SIZE(struct sockaddr_ib, 48);
AT(struct sockaddr_ib, sib_pkey, 2);
AT(struct sockaddr_ib, sib_addr, 8);
_Static_assert(AF_IB == 27, "AF_IB");
_Static_assert(RDMA_USER_CM_CMD_CREATE_ID == 0 && RDMA_USER_CM_CMD_DESTROY_ID == 1 &&
	       RDMA_USER_CM_CMD_GET_EVENT == 12 && RDMA_USER_CM_CMD_LEAVE_MCAST == 17 &&
	       RDMA_USER_CM_CMD_QUERY == 19 && RDMA_USER_CM_CMD_BIND == 20 && RDMA_USER_CM_CMD_JOIN_MCAST == 22,
	       "rdma_cm commands");
_Static_assert(RDMA_PS_UDP == 0x0111 && RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER == 1, "port space, join flags");

int main(void) { return 0; }
