/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * sib: the kernel-version layer of the software InfiniBand HCA (sib.c).
 *
 * Only Linux 6.1 (Debian 12's 6.1.0-56-amd64) is built so far.  The hooks
 * below mark where the ib_device API is known to differ in the other kernels
 * the test bed boots (5.10, 6.12, 7.x), as read in
 * upstream's include/rdma/ib_verbs.h history, not yet built against: check
 * each one against that kernel's linux-headers before relying on it).  Every other file uses only these names.
 */
#ifndef SIB_COMPAT_H
#define SIB_COMPAT_H

#include <linux/version.h>

#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 1, 0)
/*
 * 5.10 differs in at least: port numbers are u8 (u32 from 5.13); QPs are
 * allocated by the driver, create_qp returns a struct ib_qp * (the core
 * allocates them from 5.15); the core sets no default uverbs_cmd_mask
 * (5.11: the driver must set the whole mask); virtual DMA came from
 * dma_virt_ops on the device rather than from a NULL dma_device.
 */
#error "sib: kernels before 6.1 are not supported yet (see sib_compat.h)"
#endif

#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 2, 0)
/*
 * Not built yet.  Known growth after 6.1 (unverified): create_cq takes a
 * struct uverbs_attr_bundle * instead of a struct ib_udata *, reg_user_mr
 * gains arguments.  Define the SIB_* signatures below per version when a
 * later kernel is built; until then refuse rather than miscompile.
 */
#error "sib: only Linux 6.1 is built so far (see sib_compat.h)"
#endif

/* Port numbers: u8 before 5.13, u32 since. */
typedef u32 sib_port_t;

/* create_cq's last argument (6.1: struct ib_udata *). */
#define SIB_CREATE_CQ_UDATA struct ib_udata *udata

/* reg_user_mr's arguments after the PD (6.1 form). */
#define SIB_REG_USER_MR_ARGS u64 start, u64 length, u64 virt_addr, \
	int access, struct ib_udata *udata

/*
 * The data-path write commands the core's default uverbs_cmd_mask
 * (5.11 on) leaves out, and that the stock libipathverbs (uverbs ABI 1)
 * sends through ibv_cmd_*.
 */
#define SIB_UVERBS_CMD_OPT_IN                                  \
	(BIT_ULL(IB_USER_VERBS_CMD_POST_SEND) |                \
	 BIT_ULL(IB_USER_VERBS_CMD_POST_RECV) |                \
	 BIT_ULL(IB_USER_VERBS_CMD_POLL_CQ) |                  \
	 BIT_ULL(IB_USER_VERBS_CMD_REQ_NOTIFY_CQ) |            \
	 BIT_ULL(IB_USER_VERBS_CMD_POST_SRQ_RECV))

#endif /* SIB_COMPAT_H */
