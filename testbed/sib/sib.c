// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * sib: a software InfiniBand HCA for the rsverbs test bed (testbed/README.md).
 *
 * New code written for rsverbs; no code is copied from rxe, siw, pib or any
 * other driver (their designs were read).  Licence: GPL-2.0 OR MIT, declared
 * to the kernel as "Dual MIT/GPL" (a GPL-compatible licence, needed for the
 * RDMA core's GPL-only symbols).
 *
 * Two ib_devices, sib0 and sib1, one InfiniBand port each (link layer IB,
 * RDMA_CORE_PORT_IBA_IB, virtual DMA: no dma_device).  They are meant to be
 * cabled back to back inside the module.
 *
 * STEP 1: devices, ports, the verbs objects and their state.
 * STEP 2: the cable and the UD engine (below, "the data path"):
 *  - post_send builds one packet per work request (LRH fields, the GRH when
 *    the AH is global, BTH/DETH fields: the P_Key, the destination QPN, the
 *    Q_Key), copies the payload out of the sender's MRs and hands the packet
 *    to a work item of the sending device (never delivered inline); the
 *    send completes at once (UD is unreliable: the WQE is consumed);
 *  - the work item routes it by DLID: to the peer port at the other end of
 *    the cable, or back to the sending port (its own LID); a multicast
 *    DLID goes to every QP attached with that MLID (and the GRH's MGID) on
 *    the peer port, and to the sending port's attached QPs but the sender;
 *  - each receiving QP checks the P_Key (bad_pkey_cntr) and the Q_Key
 *    (qkey_viol_cntr, 16 bits, saturating as the IBA's PortInfo counters),
 *    takes a receive WQE, writes the GRH into its first 40 bytes when the
 *    packet had one and the payload after them.
 * There is no SMA yet (process_mad, step 3): no SM can configure the port.
 * Without the fixed_lids parameter the ports stay INIT with LID 0 and phys
 * state LinkUp, as a real HCA port with a live link and no SM, and carry
 * no data (a port sends and takes data packets only when ACTIVE).  With
 * fixed_lids=1 (the test bed's hook until the SMA) the ports come up ACTIVE
 * with sib0 LID 1 and sib1 LID 2, SM LID 1.
 *
 * Identifiers, locally administered EUI-64s (bit 0x02 of the first octet set,
 * no OUI), the bytes 53 49 42 are "SIB", N is the device index (0 or 1):
 *   system image GUID  0200:0053:4942:0000  (both devices: one host)
 *   node GUID          0200:0053:4942:0N00
 *   port GUID          0200:0053:4942:0N01
 *   GID index 0        fe80:0000:0000:0000 + port GUID
 *
 * User space: the stock rdma-core provider libipathverbs serves these devices
 * (driver_id RDMA_DRIVER_QIB, uverbs ABI 1: every verb through ibv_cmd_*),
 * given the data-path write commands opted into uverbs_cmd_mask.
 *
 * Locking (Documentation/infiniband/core_locking.rst): post_send, post_recv,
 * poll_cq, req_notify_cq, create_ah and destroy_ah may run in atomic context:
 * they take spinlocks with interrupts saved and never sleep; post_send
 * allocates its packet with GFP_ATOMIC.  Completion handlers run from a work
 * item (sib_wq), never inline; so does every delivery.
 * Lock order: sib_cable_lock; then the receiving device's qp_xa lock or
 * mcast_lock; then qp->lock; then cq->lock; the port's lock is taken alone
 * or innermost.
 */
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/mm.h>
#include <linux/idr.h>
#include <linux/xarray.h>
#include <linux/workqueue.h>
#include <linux/spinlock.h>
#include <linux/scatterlist.h>
#include <linux/overflow.h>
#include <asm/unaligned.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_smi.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/uverbs_ioctl.h>

#include "sib_compat.h"

#define SIB_NDEV		2
#define SIB_PORT		1	/* the only port of each device */
#define SIB_PKEY_TBL_LEN	32	/* one PKeyTable block */
#define SIB_GID_TBL_LEN		1	/* index 0: prefix + port GUID */
#define SIB_MAX_QP		1024
#define SIB_MAX_QP_WR		4096	/* the MAD layer posts 512 receives */
#define SIB_MAX_SGE		8
#define SIB_MAX_CQ		1024
#define SIB_MAX_CQE		65535
#define SIB_MAX_MR		4096
#define SIB_MAX_PD		1024
#define SIB_MAX_AH		4096
#define SIB_MAX_MCAST_GRP	1024
#define SIB_MAX_MCAST_QP_ATTACH	64
#define SIB_MAX_TOTAL_MCAST	(SIB_MAX_MCAST_GRP * SIB_MAX_MCAST_QP_ATTACH)
#define SIB_GUID_BASE		0x0200005349420000ULL
#define SIB_MTU			4096	/* IB_MTU_4096: a UD message is one packet */
#define SIB_GRH_LEN		40	/* sizeof(struct ib_grh) */

static struct workqueue_struct *sib_wq;

static bool fixed_lids;
module_param(fixed_lids, bool, 0444);
MODULE_PARM_DESC(fixed_lids,
		 "ports ACTIVE at load with sib0 LID 1, sib1 LID 2, SM LID 1 (the test bed's hook until the SMA)");

/* The cable: sib_dev.peer, cut (NULL) before the devices go at unload. */
static DEFINE_SPINLOCK(sib_cable_lock);

struct sib_port {
	spinlock_t lock;	/* the fields below */
	enum ib_port_state state;
	enum ib_port_phys_state phys_state;
	u16 lid;
	u16 sm_lid;
	u8 lmc;
	u8 sm_sl;
	u32 cap_flags;
	u16 pkeys[SIB_PKEY_TBL_LEN];
	u32 qkey_viol_cntr;	/* both saturate at 0xffff (sib_count) */
	u32 bad_pkey_cntr;
	/* What the SM sets through the SMA (PortInfo), kept as set: */
	__be64 gid_prefix;	/* GID index 0's upper half */
	__be64 mkey;		/* kept and reported; never enforced */
	u8 neighbor_mtu;
	u8 op_vls;
	u8 subnet_timeout;
	u32 events;		/* BIT(IB_EVENT_*) not yet dispatched */
	bool dying;		/* unload: no more events */
};

struct sib_mcast {		/* one QP attached to one group */
	struct list_head list;
	union ib_gid mgid;
	u16 mlid;
	struct sib_qp *qp;
};

struct sib_dev {
	struct ib_device ibdev;
	int index;
	__be64 port_guid;
	struct sib_port port;
	struct ida qpn_ida;		/* UD QPNs, 2 .. 0xffffff */
	struct xarray mr_xa;		/* MR index -> sib_mr (L_Key >> 8) */
	spinlock_t mcast_lock;		/* mcast_list, mcast_* counts */
	struct list_head mcast_list;
	unsigned int mcast_groups;	/* distinct (MGID, MLID) keys */
	unsigned int mcast_attached;	/* entries in mcast_list */
	struct sib_dev *peer;		/* the other end; sib_cable_lock */
	struct xarray qp_xa;		/* qp_num -> sib_qp (0 and 1 too) */
	spinlock_t xmit_lock;		/* xmit_list */
	struct list_head xmit_list;	/* packets sent, not yet delivered */
	struct work_struct xmit_work;	/* delivers them */
	struct work_struct event_work;	/* dispatches port.events */
};

/* One UD packet on the cable: what its headers carry, then the payload. */
struct sib_pkt {
	struct list_head list;
	struct sib_dev *from;		/* the sending device */
	u32 src_qpn;			/* BTH/DETH */
	u32 dest_qpn;
	u32 qkey;
	u16 pkey;
	u16 slid;			/* LRH */
	u16 dlid;
	u8 sl;
	bool has_grh;
	bool has_imm;
	__be32 imm;
	struct ib_grh grh;
	u32 len;
	u8 data[];
};

struct sib_ucontext {
	struct ib_ucontext ibuc;
};

struct sib_pd {
	struct ib_pd ibpd;
};

struct sib_ah {
	struct ib_ah ibah;
	struct rdma_ah_attr attr;	/* grh.sgid_attr not kept: ibah has it */
};

struct sib_mr {
	struct ib_mr ibmr;
	struct ib_umem *umem;		/* NULL for the DMA MR */
	u64 iova;
	u64 length;
	int access;
};

struct sib_cq {
	struct ib_cq ibcq;
	spinlock_t lock;		/* the ring and flags */
	struct ib_wc *ring;
	u32 size;			/* entries in ring: cqe + 1 */
	u32 head;			/* next to poll */
	u32 count;			/* entries queued */
	u8 armed;			/* IB_CQ_SOLICITED or IB_CQ_NEXT_COMP */
	bool notify_pending;
	bool overflow_pending;
	bool overflowed;
	struct work_struct work;	/* completion and error events */
};

struct sib_rwqe {
	u64 wr_id;
	int num_sge;
	struct ib_sge sge[SIB_MAX_SGE];
};

struct sib_qp {
	struct ib_qp ibqp;
	spinlock_t lock;		/* state, attributes and the RQ */
	enum ib_qp_state state;
	u32 qkey;
	u16 pkey_index;
	u32 sq_psn;
	struct ib_qp_cap cap;
	enum ib_sig_type sq_sig_type;
	struct sib_rwqe *rq;		/* ring of cap.max_recv_wr entries */
	u32 rq_head;
	u32 rq_count;
	bool ida_qpn;			/* qp_num from qpn_ida */
};

static inline struct sib_dev *to_sdev(struct ib_device *d)
{
	return container_of(d, struct sib_dev, ibdev);
}

static inline struct sib_qp *to_sqp(struct ib_qp *q)
{
	return container_of(q, struct sib_qp, ibqp);
}

static inline struct sib_cq *to_scq(struct ib_cq *c)
{
	return container_of(c, struct sib_cq, ibcq);
}

static inline struct sib_ah *to_sah(struct ib_ah *a)
{
	return container_of(a, struct sib_ah, ibah);
}

static inline struct sib_mr *to_smr(struct ib_mr *m)
{
	return container_of(m, struct sib_mr, ibmr);
}

/* ---- device and port ---------------------------------------------------- */

static int sib_query_device(struct ib_device *ibdev, struct ib_device_attr *a,
			    struct ib_udata *udata)
{
	/* ABI 1 has no driver-specific query_device data. */
	if (udata && (udata->inlen || udata->outlen))
		return -EINVAL;

	memset(a, 0, sizeof(*a));
	a->fw_ver = 0;
	a->sys_image_guid = cpu_to_be64(SIB_GUID_BASE);
	a->max_mr_size = ~0ULL;
	a->page_size_cap = PAGE_SIZE;
	a->vendor_id = 0;
	a->vendor_part_id = 0;
	a->hw_ver = 0;
	a->max_qp = SIB_MAX_QP;
	a->max_qp_wr = SIB_MAX_QP_WR;
	a->device_cap_flags = IB_DEVICE_PORT_ACTIVE_EVENT |
			      IB_DEVICE_SYS_IMAGE_GUID;
	a->max_send_sge = SIB_MAX_SGE;
	a->max_recv_sge = SIB_MAX_SGE;
	a->max_sge_rd = 0;
	a->max_cq = SIB_MAX_CQ;
	a->max_cqe = SIB_MAX_CQE;
	a->max_mr = SIB_MAX_MR;
	a->max_pd = SIB_MAX_PD;
	a->max_ah = SIB_MAX_AH;
	a->max_mcast_grp = SIB_MAX_MCAST_GRP;
	a->max_mcast_qp_attach = SIB_MAX_MCAST_QP_ATTACH;
	a->max_total_mcast_qp_attach = SIB_MAX_TOTAL_MCAST;
	a->max_pkeys = SIB_PKEY_TBL_LEN;
	a->local_ca_ack_delay = 0;
	return 0;
}

static int sib_query_port(struct ib_device *ibdev, sib_port_t port,
			  struct ib_port_attr *a)
{
	struct sib_port *p = &to_sdev(ibdev)->port;
	unsigned long flags;

	if (port != SIB_PORT)
		return -EINVAL;
	/* The core zeroed *a (__ib_query_port) and adds the subnet prefix. */
	spin_lock_irqsave(&p->lock, flags);
	a->state = p->state;
	a->phys_state = p->phys_state;
	a->lid = p->lid;
	a->sm_lid = p->sm_lid;
	a->lmc = p->lmc;
	a->sm_sl = p->sm_sl;
	a->port_cap_flags = p->cap_flags;
	a->qkey_viol_cntr = p->qkey_viol_cntr;
	a->bad_pkey_cntr = p->bad_pkey_cntr;
	spin_unlock_irqrestore(&p->lock, flags);
	a->max_mtu = IB_MTU_4096;
	a->active_mtu = IB_MTU_4096;
	a->gid_tbl_len = SIB_GID_TBL_LEN;
	a->pkey_tbl_len = SIB_PKEY_TBL_LEN;
	a->max_msg_sz = 4096;	/* UD: one packet, the MTU */
	a->max_vl_num = 1;	/* VL0 only */
	a->active_width = IB_WIDTH_4X;
	a->active_speed = IB_SPEED_QDR;
	a->init_type_reply = 0;
	a->subnet_timeout = 0;
	return 0;
}

static int sib_modify_port(struct ib_device *ibdev, sib_port_t port, int mask,
			   struct ib_port_modify *pm)
{
	struct sib_port *p = &to_sdev(ibdev)->port;
	unsigned long flags;

	if (port != SIB_PORT)
		return -EINVAL;
	if (mask & ~(IB_PORT_SHUTDOWN | IB_PORT_INIT_TYPE |
		     IB_PORT_RESET_QKEY_CNTR))
		return -EOPNOTSUPP;
	if (mask & (IB_PORT_SHUTDOWN | IB_PORT_INIT_TYPE))
		return -EOPNOTSUPP;
	spin_lock_irqsave(&p->lock, flags);
	p->cap_flags = (p->cap_flags | pm->set_port_cap_mask) &
		       ~pm->clr_port_cap_mask;
	if (mask & IB_PORT_RESET_QKEY_CNTR)
		p->qkey_viol_cntr = 0;
	spin_unlock_irqrestore(&p->lock, flags);
	return 0;
}

static int sib_get_port_immutable(struct ib_device *ibdev, sib_port_t port,
				  struct ib_port_immutable *im)
{
	if (port != SIB_PORT)
		return -EINVAL;
	im->core_cap_flags = RDMA_CORE_PORT_IBA_IB;
	im->pkey_tbl_len = SIB_PKEY_TBL_LEN;
	im->gid_tbl_len = SIB_GID_TBL_LEN;
	im->max_mad_size = IB_MGMT_MAD_SIZE;
	return 0;
}

static enum rdma_link_layer sib_get_link_layer(struct ib_device *ibdev,
					       sib_port_t port)
{
	return IB_LINK_LAYER_INFINIBAND;
}

static int sib_query_gid(struct ib_device *ibdev, sib_port_t port, int index,
			 union ib_gid *gid)
{
	struct sib_dev *sd = to_sdev(ibdev);
	unsigned long flags;

	if (port != SIB_PORT || index < 0 || index >= SIB_GID_TBL_LEN)
		return -EINVAL;
	/* The default subnet prefix until an SM sets another (PortInfo). */
	spin_lock_irqsave(&sd->port.lock, flags);
	gid->global.subnet_prefix = sd->port.gid_prefix;
	spin_unlock_irqrestore(&sd->port.lock, flags);
	gid->global.interface_id = sd->port_guid;
	return 0;
}

static int sib_query_pkey(struct ib_device *ibdev, sib_port_t port, u16 index,
			  u16 *pkey)
{
	struct sib_port *p = &to_sdev(ibdev)->port;
	unsigned long flags;

	if (port != SIB_PORT || index >= SIB_PKEY_TBL_LEN)
		return -EINVAL;
	spin_lock_irqsave(&p->lock, flags);
	*pkey = p->pkeys[index];
	spin_unlock_irqrestore(&p->lock, flags);
	return 0;
}

/* ---- ucontext, PD ------------------------------------------------------- */

static int sib_alloc_ucontext(struct ib_ucontext *uc, struct ib_udata *udata)
{
	return 0;	/* ABI 1: no driver data, no mmap */
}

static void sib_dealloc_ucontext(struct ib_ucontext *uc)
{
}

static int sib_alloc_pd(struct ib_pd *pd, struct ib_udata *udata)
{
	return 0;
}

static int sib_dealloc_pd(struct ib_pd *pd, struct ib_udata *udata)
{
	return 0;
}

/* ---- AH ----------------------------------------------------------------- */

/* May be called in atomic context (kernel AHs without SLEEPABLE). */
static int sib_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init,
			 struct ib_udata *udata)
{
	struct rdma_ah_attr *a = init->ah_attr;
	struct sib_ah *ah = to_sah(ibah);

	if (a->type != RDMA_AH_ATTR_TYPE_IB)
		return -EINVAL;
	if (rdma_ah_get_port_num(a) != SIB_PORT)
		return -EINVAL;
	ah->attr = *a;
	ah->attr.grh.sgid_attr = NULL;	/* referenced by ibah->sgid_attr */
	return 0;
}

static int sib_query_ah(struct ib_ah *ibah, struct rdma_ah_attr *a)
{
	struct sib_ah *ah = to_sah(ibah);

	*a = ah->attr;
	a->grh.sgid_attr = ibah->sgid_attr;
	return 0;
}

static int sib_destroy_ah(struct ib_ah *ibah, u32 flags)
{
	return 0;
}

/* ---- MR ----------------------------------------------------------------- */

static struct ib_mr *sib_mr_new(struct sib_dev *sd, struct ib_umem *umem,
				u64 iova, u64 length, int access)
{
	struct sib_mr *mr;
	u32 idx;
	int err;

	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	err = xa_alloc_irq(&sd->mr_xa, &idx, mr, XA_LIMIT(1, SIB_MAX_MR),
			   GFP_KERNEL);
	if (err) {
		kfree(mr);
		return ERR_PTR(err == -EBUSY ? -ENOMEM : err);
	}
	mr->umem = umem;
	mr->iova = iova;
	mr->length = length;
	mr->access = access;
	/* IBA 10.6.3.3: index above, an 8-bit key below (0 for now). */
	mr->ibmr.lkey = idx << 8;
	mr->ibmr.rkey = idx << 8;
	return &mr->ibmr;
}

static struct ib_mr *sib_get_dma_mr(struct ib_pd *pd, int access)
{
	return sib_mr_new(to_sdev(pd->device), NULL, 0, ~0ULL, access);
}

static struct ib_mr *sib_reg_user_mr(struct ib_pd *pd, SIB_REG_USER_MR_ARGS)
{
	struct ib_umem *umem;
	struct ib_mr *mr;

	umem = ib_umem_get(pd->device, start, length, access);
	if (IS_ERR(umem))
		return ERR_CAST(umem);
	mr = sib_mr_new(to_sdev(pd->device), umem, virt_addr, length, access);
	if (IS_ERR(mr))
		ib_umem_release(umem);
	return mr;
}

static int sib_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct sib_mr *mr = to_smr(ibmr);

	/* After this no post_send or delivery copies to or from it: both
	 * hold the xarray's lock across their copy. */
	xa_erase_irq(&to_sdev(ibmr->device)->mr_xa, ibmr->lkey >> 8);
	ib_umem_release(mr->umem);	/* NULL-safe */
	kfree(mr);
	return 0;
}

/* ---- CQ ----------------------------------------------------------------- */

static void sib_cq_work(struct work_struct *w)
{
	struct sib_cq *cq = container_of(w, struct sib_cq, work);
	bool comp, ovf;
	unsigned long flags;

	spin_lock_irqsave(&cq->lock, flags);
	comp = cq->notify_pending;
	ovf = cq->overflow_pending;
	cq->notify_pending = false;
	cq->overflow_pending = false;
	spin_unlock_irqrestore(&cq->lock, flags);

	if (ovf && cq->ibcq.event_handler) {
		struct ib_event ev = {
			.device = cq->ibcq.device,
			.element.cq = &cq->ibcq,
			.event = IB_EVENT_CQ_ERR,
		};

		cq->ibcq.event_handler(&ev, cq->ibcq.cq_context);
	}
	if (comp && cq->ibcq.comp_handler)
		cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
}

/*
 * Queue one completion; cq->lock held.  Returns false on overflow (the
 * entry is dropped and IB_EVENT_CQ_ERR raised, as an HCA's CQ overrun).
 */
static bool sib_cq_push_locked(struct sib_cq *cq, const struct ib_wc *wc,
			       bool solicited)
{
	if (cq->count == cq->size) {
		if (!cq->overflowed) {
			cq->overflowed = true;
			cq->overflow_pending = true;
			queue_work(sib_wq, &cq->work);
		}
		return false;
	}
	cq->ring[(cq->head + cq->count) % cq->size] = *wc;
	cq->count++;
	if (cq->armed == IB_CQ_NEXT_COMP ||
	    (cq->armed == IB_CQ_SOLICITED && (solicited ||
					      wc->status != IB_WC_SUCCESS))) {
		cq->armed = 0;
		cq->notify_pending = true;
		queue_work(sib_wq, &cq->work);
	}
	return true;
}

static int sib_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
			 SIB_CREATE_CQ_UDATA)
{
	struct sib_cq *cq = to_scq(ibcq);

	if (attr->flags)
		return -EOPNOTSUPP;
	if (attr->cqe < 1 || attr->cqe > SIB_MAX_CQE)
		return -EINVAL;
	cq->size = attr->cqe + 1;
	cq->ring = kvcalloc(cq->size, sizeof(*cq->ring), GFP_KERNEL);
	if (!cq->ring)
		return -ENOMEM;
	spin_lock_init(&cq->lock);
	INIT_WORK(&cq->work, sib_cq_work);
	ibcq->cqe = attr->cqe;
	return 0;
}

static int sib_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	struct sib_cq *cq = to_scq(ibcq);
	unsigned long flags;

	/* No QP uses it any more (the core counts); stop the events. */
	spin_lock_irqsave(&cq->lock, flags);
	cq->armed = 0;
	spin_unlock_irqrestore(&cq->lock, flags);
	cancel_work_sync(&cq->work);
	kvfree(cq->ring);
	return 0;
}

static int sib_poll_cq(struct ib_cq *ibcq, int n, struct ib_wc *wc)
{
	struct sib_cq *cq = to_scq(ibcq);
	unsigned long flags;
	int i;

	spin_lock_irqsave(&cq->lock, flags);
	for (i = 0; i < n && cq->count; i++) {
		wc[i] = cq->ring[cq->head];
		cq->head = (cq->head + 1) % cq->size;
		cq->count--;
	}
	spin_unlock_irqrestore(&cq->lock, flags);
	return i;
}

static int sib_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags f)
{
	struct sib_cq *cq = to_scq(ibcq);
	unsigned long flags;
	int ret = 0;

	spin_lock_irqsave(&cq->lock, flags);
	if ((f & IB_CQ_SOLICITED_MASK) == IB_CQ_NEXT_COMP)
		cq->armed = IB_CQ_NEXT_COMP;
	else if (cq->armed != IB_CQ_NEXT_COMP)
		cq->armed = IB_CQ_SOLICITED;
	if ((f & IB_CQ_REPORT_MISSED_EVENTS) && cq->count)
		ret = 1;
	spin_unlock_irqrestore(&cq->lock, flags);
	return ret;
}

/* ---- QP ----------------------------------------------------------------- */

/* Complete every queued receive with IB_WC_WR_FLUSH_ERR; qp->lock held. */
static void sib_qp_flush_rq_locked(struct sib_qp *qp)
{
	struct sib_cq *cq = to_scq(qp->ibqp.recv_cq);
	struct ib_wc wc;

	spin_lock(&cq->lock);
	while (qp->rq_count) {
		memset(&wc, 0, sizeof(wc));
		wc.wr_id = qp->rq[qp->rq_head].wr_id;
		wc.status = IB_WC_WR_FLUSH_ERR;
		wc.opcode = IB_WC_RECV;
		wc.qp = &qp->ibqp;
		wc.port_num = SIB_PORT;
		if (!sib_cq_push_locked(cq, &wc, false))
			break;	/* the CQ overran; the rest is lost */
		qp->rq_head = (qp->rq_head + 1) % qp->cap.max_recv_wr;
		qp->rq_count--;
	}
	qp->rq_head = 0;
	qp->rq_count = 0;
	spin_unlock(&cq->lock);
}

/* The QP enters ERR: its receives are flushed; qp->lock held. */
static void sib_qp_error_locked(struct sib_qp *qp)
{
	qp->state = IB_QPS_ERR;
	sib_qp_flush_rq_locked(qp);
}

static int sib_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
			 struct ib_udata *udata)
{
	struct sib_dev *sd = to_sdev(ibqp->device);
	struct sib_qp *qp = to_sqp(ibqp);
	struct ib_qp_cap *c = &init->cap;
	int qpn, err;

	switch (init->qp_type) {
	case IB_QPT_SMI:
	case IB_QPT_GSI:
		if (init->port_num != SIB_PORT || udata)
			return -EINVAL;
		break;
	case IB_QPT_UD:
		break;
	default:
		return -EOPNOTSUPP;	/* UD only: no RC, UC, XRC, raw */
	}
	if (init->create_flags || init->srq)
		return -EOPNOTSUPP;
	if (!init->recv_cq || !init->send_cq)
		return -EINVAL;
	if (c->max_send_wr > SIB_MAX_QP_WR || c->max_recv_wr > SIB_MAX_QP_WR ||
	    c->max_send_sge > SIB_MAX_SGE || c->max_recv_sge > SIB_MAX_SGE ||
	    c->max_inline_data > 0)
		return -EINVAL;
	/* Report what was granted (the requested values, at least one). */
	c->max_send_wr = max_t(u32, c->max_send_wr, 1);
	c->max_recv_wr = max_t(u32, c->max_recv_wr, 1);
	c->max_send_sge = max_t(u32, c->max_send_sge, 1);
	c->max_recv_sge = max_t(u32, c->max_recv_sge, 1);
	c->max_inline_data = 0;

	qp->rq = kvcalloc(c->max_recv_wr, sizeof(*qp->rq), GFP_KERNEL);
	if (!qp->rq)
		return -ENOMEM;

	if (init->qp_type == IB_QPT_SMI) {
		ibqp->qp_num = 0;
	} else if (init->qp_type == IB_QPT_GSI) {
		ibqp->qp_num = 1;
	} else {
		qpn = ida_alloc_range(&sd->qpn_ida, 2, 0xffffff, GFP_KERNEL);
		if (qpn < 0) {
			kvfree(qp->rq);
			qp->rq = NULL;
			return qpn == -ENOSPC ? -ENOMEM : qpn;
		}
		ibqp->qp_num = qpn;
		qp->ida_qpn = true;
	}
	spin_lock_init(&qp->lock);
	qp->state = IB_QPS_RESET;
	qp->cap = *c;
	qp->sq_sig_type = init->sq_sig_type;
	/* Found by the delivery from now on (it takes nothing in RESET). */
	err = xa_insert(&sd->qp_xa, ibqp->qp_num, qp, GFP_KERNEL);
	if (err) {
		if (qp->ida_qpn)
			ida_free(&sd->qpn_ida, ibqp->qp_num);
		qp->ida_qpn = false;
		kvfree(qp->rq);
		qp->rq = NULL;
		return err == -EBUSY ? -EINVAL : err;
	}
	return 0;
}

static void sib_mcast_purge_qp(struct sib_dev *sd, struct sib_qp *qp);

static int sib_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct sib_dev *sd = to_sdev(ibqp->device);
	struct sib_qp *qp = to_sqp(ibqp);

	/* The core refuses while attachments count in usecnt; be safe. */
	sib_mcast_purge_qp(sd, qp);
	/* Out of both tables: no delivery reaches it once this returns (the
	 * delivery holds the table's lock while it writes to a QP). */
	xa_erase(&sd->qp_xa, ibqp->qp_num);
	if (qp->ida_qpn)
		ida_free(&sd->qpn_ida, ibqp->qp_num);
	kvfree(qp->rq);
	return 0;
}

static int sib_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr,
			 int mask, struct ib_udata *udata)
{
	struct sib_qp *qp = to_sqp(ibqp);
	enum ib_qp_state cur, next;
	unsigned long flags;
	int err = 0;

	if (udata && udata->inlen)
		return -EOPNOTSUPP;	/* ABI 1: no driver data */

	spin_lock_irqsave(&qp->lock, flags);
	cur = (mask & IB_QP_CUR_STATE) ? attr->cur_qp_state : qp->state;
	next = (mask & IB_QP_STATE) ? attr->qp_state : cur;
	if (cur != qp->state) {
		err = -EINVAL;
		goto out;
	}
	/* The IBA state table, required and allowed attributes per type. */
	if (!ib_modify_qp_is_ok(cur, next, ibqp->qp_type, mask)) {
		err = -EINVAL;
		goto out;
	}
	if ((mask & IB_QP_PORT) && attr->port_num != SIB_PORT) {
		err = -EINVAL;
		goto out;
	}
	if ((mask & IB_QP_PKEY_INDEX) && attr->pkey_index >= SIB_PKEY_TBL_LEN) {
		err = -EINVAL;
		goto out;
	}
	if (mask & IB_QP_QKEY)
		qp->qkey = attr->qkey;
	if (mask & IB_QP_PKEY_INDEX)
		qp->pkey_index = attr->pkey_index;
	if (mask & IB_QP_SQ_PSN)
		qp->sq_psn = attr->sq_psn & 0xffffff;
	if (mask & IB_QP_STATE) {
		qp->state = next;
		if (next == IB_QPS_RESET) {	/* the queues are emptied */
			qp->rq_head = 0;
			qp->rq_count = 0;
			qp->qkey = 0;
			qp->pkey_index = 0;
			qp->sq_psn = 0;
		} else if (next == IB_QPS_ERR) {
			sib_qp_error_locked(qp);
		}
	}
out:
	spin_unlock_irqrestore(&qp->lock, flags);
	return err;
}

static int sib_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
			struct ib_qp_init_attr *init)
{
	struct sib_qp *qp = to_sqp(ibqp);
	unsigned long flags;

	memset(attr, 0, sizeof(*attr));
	memset(init, 0, sizeof(*init));
	spin_lock_irqsave(&qp->lock, flags);
	attr->qp_state = qp->state;
	attr->cur_qp_state = qp->state;
	attr->qkey = qp->qkey;
	attr->pkey_index = qp->pkey_index;
	attr->sq_psn = qp->sq_psn;
	spin_unlock_irqrestore(&qp->lock, flags);
	attr->port_num = SIB_PORT;
	attr->path_mtu = IB_MTU_4096;
	attr->cap = qp->cap;
	init->qp_type = ibqp->qp_type;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->cap = qp->cap;
	init->sq_sig_type = qp->sq_sig_type;
	init->port_num = SIB_PORT;
	return 0;
}

/* ---- the data path: send ------------------------------------------------ */

/*
 * Copy len bytes between buf and the memory of one SGE, checked against its
 * MR: the L_Key names a live MR of the QP's PD that covers the range, with
 * local write access when it is written to.  For the DMA MR the address is a
 * kernel virtual address (virtual DMA); for a user MR, an offset into its
 * pinned pages.  Runs under the MR table's lock, so the MR cannot be
 * deregistered during the copy.  -EFAULT: a protection error.
 */
static int sib_sge_copy(struct sib_dev *sd, struct ib_pd *pd,
			const struct ib_sge *sge, u32 at, void *buf, u32 len,
			bool to_mr)
{
	struct sib_mr *mr;
	unsigned long flags;
	u64 addr, end;
	int err = 0;

	if (!len)
		return 0;
	if (check_add_overflow(sge->addr, (u64)at, &addr) ||
	    check_add_overflow(addr, (u64)len, &end))
		return -EFAULT;
	xa_lock_irqsave(&sd->mr_xa, flags);
	mr = xa_load(&sd->mr_xa, sge->lkey >> 8);
	if (!mr || mr->ibmr.lkey != sge->lkey || mr->ibmr.pd != pd ||
	    addr < mr->iova || end - mr->iova > mr->length ||
	    (to_mr && !(mr->access & IB_ACCESS_LOCAL_WRITE) && mr->umem)) {
		err = -EFAULT;
	} else if (!mr->umem) {
		void *va = (void *)(uintptr_t)addr;

		if (to_mr)
			memcpy(va, buf, len);
		else
			memcpy(buf, va, len);
	} else if (to_mr) {
		struct sg_table *t = &mr->umem->sgt_append.sgt;
		size_t off = addr - mr->iova + ib_umem_offset(mr->umem);

		if (sg_pcopy_from_buffer(t->sgl, t->orig_nents, buf, len, off) != len)
			err = -EFAULT;
	} else if (ib_umem_copy_from(buf, mr->umem, addr - mr->iova, len)) {
		err = -EFAULT;
	}
	xa_unlock_irqrestore(&sd->mr_xa, flags);
	return err;
}

/* Gather a send WR's SGEs into pkt->data. */
static int sib_gather(struct sib_qp *qp, const struct ib_send_wr *wr,
		      struct sib_pkt *pkt)
{
	struct sib_dev *sd = to_sdev(qp->ibqp.device);
	u32 at = 0;
	int i, err;

	for (i = 0; i < wr->num_sge; i++) {
		err = sib_sge_copy(sd, qp->ibqp.pd, &wr->sg_list[i], 0,
				   pkt->data + at, wr->sg_list[i].length, false);
		if (err)
			return err;
		at += wr->sg_list[i].length;
	}
	return 0;
}

static void sib_send_wc(struct sib_qp *qp, const struct ib_send_wr *wr,
			enum ib_wc_status status, u32 len)
{
	struct sib_cq *cq = to_scq(qp->ibqp.send_cq);
	struct ib_wc wc = {
		.wr_id = wr->wr_id,
		.status = status,
		.opcode = IB_WC_SEND,
		.byte_len = len,
		.qp = &qp->ibqp,
		.port_num = SIB_PORT,
	};

	/* Errors complete whatever was asked (IBA 10.8.6). */
	if (status == IB_WC_SUCCESS && !(wr->send_flags & IB_SEND_SIGNALED) &&
	    qp->sq_sig_type != IB_SIGNAL_ALL_WR)
		return;
	spin_lock(&cq->lock);
	sib_cq_push_locked(cq, &wc, false);
	spin_unlock(&cq->lock);
}

/*
 * Build one packet for wr; qp->lock held.  NULL with *status set when the WR
 * completes in error without a packet.
 */
static struct sib_pkt *sib_build(struct sib_qp *qp, const struct ib_send_wr *wr,
				 u32 len, enum ib_wc_status *status)
{
	struct sib_dev *sd = to_sdev(qp->ibqp.device);
	const struct ib_ud_wr *ud = ud_wr(wr);
	const struct rdma_ah_attr *ah = &to_sah(ud->ah)->attr;
	struct sib_port *p = &sd->port;
	u16 pkey_index = qp->ibqp.qp_type == IB_QPT_GSI ? ud->pkey_index : qp->pkey_index;
	struct sib_pkt *pkt;
	unsigned long flags;
	__be64 prefix;

	*status = IB_WC_LOC_PROT_ERR;
	if (pkey_index >= SIB_PKEY_TBL_LEN)
		return NULL;
	pkt = kmalloc(struct_size(pkt, data, len), GFP_ATOMIC);
	if (!pkt) {
		*status = IB_WC_LOC_QP_OP_ERR;
		return NULL;
	}
	if (sib_gather(qp, wr, pkt)) {
		kfree(pkt);
		return NULL;
	}
	pkt->from = sd;
	pkt->len = len;
	pkt->src_qpn = qp->ibqp.qp_num;
	pkt->dest_qpn = ud->remote_qpn & 0xffffff;
	/* IBA 10.2.5: a Q_Key with its high bit set means the QP's own. */
	pkt->qkey = (ud->remote_qkey & 0x80000000) ? qp->qkey : ud->remote_qkey;
	pkt->dlid = rdma_ah_get_dlid(ah);
	pkt->sl = rdma_ah_get_sl(ah);
	pkt->has_imm = wr->opcode == IB_WR_SEND_WITH_IMM;
	pkt->imm = pkt->has_imm ? wr->ex.imm_data : 0;
	spin_lock_irqsave(&p->lock, flags);
	pkt->pkey = p->pkeys[pkey_index];
	pkt->slid = p->lid | (rdma_ah_get_path_bits(ah) & ((1 << p->lmc) - 1));
	prefix = p->gid_prefix;
	spin_unlock_irqrestore(&p->lock, flags);
	/* IBA 14.2.2: a directed-route SMP (QP0 to the permissive DLID)
	 * carries the permissive SLID too; the answer goes back by it. */
	if (pkt->src_qpn == 0 && pkt->dlid == 0xffff)
		pkt->slid = 0xffff;
	pkt->has_grh = rdma_ah_get_ah_flags(ah) & IB_AH_GRH;
	memset(&pkt->grh, 0, sizeof(pkt->grh));
	if (pkt->has_grh) {
		const struct ib_global_route *g = rdma_ah_read_grh(ah);

		/* IPVer 6, TClass, FlowLabel; PayLen counts BTH, DETH,
		 * ImmDt, the payload and the ICRC (IBA 8.3.1). */
		pkt->grh.version_tclass_flow =
			cpu_to_be32((6u << 28) | ((u32)g->traffic_class << 20) |
				    (g->flow_label & 0xfffff));
		pkt->grh.paylen = cpu_to_be16(12 + 8 + (pkt->has_imm ? 4 : 0) + len + 4);
		pkt->grh.next_hdr = 0x1b;	/* IBA: the next header is BTH */
		pkt->grh.hop_limit = g->hop_limit;
		pkt->grh.sgid.global.subnet_prefix = prefix;
		pkt->grh.sgid.global.interface_id = sd->port_guid;
		pkt->grh.dgid = g->dgid;
	}
	return pkt;
}

/*
 * May be called in atomic context.  Each WR is checked, copied into a packet
 * (GFP_ATOMIC) and queued for the sending device's work item, and completes
 * at once.  A QP not in RTS refuses (-EINVAL); in ERR every WR completes
 * flushed.  A WR the device cannot carry (not SEND or SEND_WITH_IMM, more
 * SGEs than the QP's cap, more than one MTU of payload) is refused with
 * -EINVAL at its place in the list; a protection error (an SGE outside its
 * MR) completes with IB_WC_LOC_PROT_ERR and moves the QP to ERR.
 */
static int sib_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
			 const struct ib_send_wr **bad_wr)
{
	struct sib_qp *qp = to_sqp(ibqp);
	struct sib_dev *sd = to_sdev(ibqp->device);
	enum ib_wc_status status;
	struct sib_pkt *pkt;
	unsigned long flags;
	bool queued = false;
	int err = 0, i;
	u32 len;

	spin_lock_irqsave(&qp->lock, flags);
	if (qp->state != IB_QPS_RTS && qp->state != IB_QPS_ERR) {
		*bad_wr = wr;
		err = -EINVAL;
		goto out;
	}
	for (; wr; wr = wr->next) {
		if ((wr->opcode != IB_WR_SEND && wr->opcode != IB_WR_SEND_WITH_IMM) ||
		    wr->num_sge < 0 || wr->num_sge > qp->cap.max_send_sge ||
		    !ud_wr(wr)->ah || (wr->send_flags & IB_SEND_INLINE)) {
			*bad_wr = wr;
			err = -EINVAL;
			break;
		}
		for (len = 0, i = 0; i < wr->num_sge; i++)
			if (check_add_overflow(len, wr->sg_list[i].length, &len))
				len = U32_MAX;
		if (len > SIB_MTU) {
			*bad_wr = wr;
			err = -EINVAL;
			break;
		}
		if (qp->state == IB_QPS_ERR) {
			sib_send_wc(qp, wr, IB_WC_WR_FLUSH_ERR, 0);
			continue;
		}
		pkt = sib_build(qp, wr, len, &status);
		if (!pkt) {
			sib_send_wc(qp, wr, status, 0);
			sib_qp_error_locked(qp);
			continue;
		}
		spin_lock(&sd->xmit_lock);
		list_add_tail(&pkt->list, &sd->xmit_list);
		spin_unlock(&sd->xmit_lock);
		queued = true;
		sib_send_wc(qp, wr, IB_WC_SUCCESS, len);
	}
out:
	spin_unlock_irqrestore(&qp->lock, flags);
	if (queued)
		queue_work(sib_wq, &sd->xmit_work);
	return err;
}

/* May be called in atomic context: no allocation, no sleep. */
static int sib_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
			 const struct ib_recv_wr **bad_wr)
{
	struct sib_qp *qp = to_sqp(ibqp);
	struct sib_rwqe *e;
	unsigned long flags;
	int err = 0, i;

	spin_lock_irqsave(&qp->lock, flags);
	if (qp->state == IB_QPS_RESET) {
		err = -EINVAL;
		*bad_wr = wr;
		goto out;
	}
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || wr->num_sge > qp->cap.max_recv_sge) {
			err = -EINVAL;
			*bad_wr = wr;
			break;
		}
		if (qp->rq_count == qp->cap.max_recv_wr) {
			err = -ENOMEM;
			*bad_wr = wr;
			break;
		}
		e = &qp->rq[(qp->rq_head + qp->rq_count) % qp->cap.max_recv_wr];
		e->wr_id = wr->wr_id;
		e->num_sge = wr->num_sge;
		for (i = 0; i < wr->num_sge; i++)
			e->sge[i] = wr->sg_list[i];
		qp->rq_count++;
	}
	/* Posted to a QP in ERR: completed at once, flushed. */
	if (qp->state == IB_QPS_ERR)
		sib_qp_flush_rq_locked(qp);
out:
	spin_unlock_irqrestore(&qp->lock, flags);
	return err;
}

/* ---- multicast ---------------------------------------------------------- */

/*
 * Attachments are kept per device, keyed by (MGID, MLID), as the receive side
 * of step 2 will match them.  The core has already checked that the GID is
 * multicast and, on IB, that the LID is a multicast LID (is_valid_mcast_lid).
 * Attaching a QP twice succeeds (as mlx4 and rxe do); detaching a QP that is
 * not attached is -EINVAL (as rxe, and mlx4's firmware path).  For user QPs
 * ib_uverbs answers both cases itself from its own per-QP list and never
 * calls these; kernel callers (IPoIB, multicast.c users) do reach them.
 */
static bool sib_mcast_key(const struct sib_mcast *m, const union ib_gid *gid,
			  u16 lid)
{
	return m->mlid == lid && !memcmp(m->mgid.raw, gid->raw, sizeof(gid->raw));
}

static int sib_attach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid)
{
	struct sib_dev *sd = to_sdev(ibqp->device);
	struct sib_qp *qp = to_sqp(ibqp);
	struct sib_mcast *m, *n;
	unsigned int in_group = 0;
	unsigned long flags;
	int err = 0;

	if (ibqp->qp_type != IB_QPT_UD)
		return -EINVAL;
	n = kzalloc(sizeof(*n), GFP_KERNEL);
	if (!n)
		return -ENOMEM;
	n->mgid = *gid;
	n->mlid = lid;
	n->qp = qp;

	spin_lock_irqsave(&sd->mcast_lock, flags);
	list_for_each_entry(m, &sd->mcast_list, list) {
		if (!sib_mcast_key(m, gid, lid))
			continue;
		if (m->qp == qp)
			goto out;	/* already attached: 0 */
		in_group++;
	}
	if (in_group >= SIB_MAX_MCAST_QP_ATTACH ||
	    sd->mcast_attached >= SIB_MAX_TOTAL_MCAST ||
	    (!in_group && sd->mcast_groups >= SIB_MAX_MCAST_GRP)) {
		err = -ENOMEM;
		goto out;
	}
	if (!in_group)
		sd->mcast_groups++;
	sd->mcast_attached++;
	list_add_tail(&n->list, &sd->mcast_list);
	n = NULL;
out:
	spin_unlock_irqrestore(&sd->mcast_lock, flags);
	kfree(n);
	return err;
}

/* Drop entry m; sd->mcast_lock held.  Returns it for kfree outside. */
static struct sib_mcast *sib_mcast_unlink_locked(struct sib_dev *sd,
						 struct sib_mcast *m)
{
	struct sib_mcast *o;
	bool last = true;

	list_del(&m->list);
	sd->mcast_attached--;
	list_for_each_entry(o, &sd->mcast_list, list) {
		if (sib_mcast_key(o, &m->mgid, m->mlid)) {
			last = false;
			break;
		}
	}
	if (last)
		sd->mcast_groups--;
	return m;
}

static int sib_detach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid)
{
	struct sib_dev *sd = to_sdev(ibqp->device);
	struct sib_qp *qp = to_sqp(ibqp);
	struct sib_mcast *m, *found = NULL;
	unsigned long flags;

	spin_lock_irqsave(&sd->mcast_lock, flags);
	list_for_each_entry(m, &sd->mcast_list, list) {
		if (m->qp == qp && sib_mcast_key(m, gid, lid)) {
			found = sib_mcast_unlink_locked(sd, m);
			break;
		}
	}
	spin_unlock_irqrestore(&sd->mcast_lock, flags);
	if (!found)
		return -EINVAL;
	kfree(found);
	return 0;
}

static void sib_mcast_purge_qp(struct sib_dev *sd, struct sib_qp *qp)
{
	struct sib_mcast *m, *t;
	unsigned long flags;
	LIST_HEAD(dead);

	spin_lock_irqsave(&sd->mcast_lock, flags);
	list_for_each_entry_safe(m, t, &sd->mcast_list, list) {
		if (m->qp == qp) {
			sib_mcast_unlink_locked(sd, m);
			list_add(&m->list, &dead);
		}
	}
	spin_unlock_irqrestore(&sd->mcast_lock, flags);
	list_for_each_entry_safe(m, t, &dead, list)
		kfree(m);
}

/* ---- the data path: the cable and receive -------------------------------- */

/* IBA 10.9.3: P_Keys match when their low 15 bits are equal and at least one
 * is a full member; 0x0000 and 0x8000 match nothing. */
static bool sib_pkey_match(u16 a, u16 b)
{
	return (a & 0x7fff) && (a & 0x7fff) == (b & 0x7fff) && ((a | b) & 0x8000);
}

/* A saturating 16-bit PortInfo counter (IBA 14.2.5.6); p->lock held. */
static void sib_count(u32 *c)
{
	if (*c < 0xffff)
		(*c)++;
}

/*
 * Hand pkt to qp on device dst; the caller holds what keeps qp alive (the
 * QP table's or the multicast list's lock).  Drops are silent on the wire,
 * as UD's are: a QP not ready, a P_Key or Q_Key that does not match (counted
 * in the port's counters), no receive WQE posted.
 */
static void sib_recv(struct sib_dev *dst, struct sib_qp *qp,
		     const struct sib_pkt *pkt)
{
	struct sib_port *p = &dst->port;
	enum ib_qp_type type = qp->ibqp.qp_type;
	struct sib_rwqe *e;
	struct ib_wc wc;
	unsigned long flags, pflags;
	u16 pkey_index = 0;
	u32 room = 0, at, n;
	int i, err = 0;

	spin_lock_irqsave(&qp->lock, flags);
	if (qp->state != IB_QPS_RTR && qp->state != IB_QPS_RTS)
		goto out;
	if (type != IB_QPT_SMI) {
		bool ok = false;

		spin_lock_irqsave(&p->lock, pflags);
		if (type == IB_QPT_GSI) {
			/* QP1 takes any P_Key of the port's table (IBA 10.9.3.1). */
			for (i = 0; i < SIB_PKEY_TBL_LEN && !ok; i++)
				if (sib_pkey_match(pkt->pkey, p->pkeys[i])) {
					ok = true;
					pkey_index = i;
				}
		} else {
			pkey_index = qp->pkey_index;
			ok = sib_pkey_match(pkt->pkey, p->pkeys[pkey_index]);
		}
		if (!ok)
			sib_count(&p->bad_pkey_cntr);
		else if (pkt->qkey != qp->qkey)
			sib_count(&p->qkey_viol_cntr);
		spin_unlock_irqrestore(&p->lock, pflags);
		if (!ok || pkt->qkey != qp->qkey)
			goto out;
	}
	if (!qp->rq_count)
		goto out;
	e = &qp->rq[qp->rq_head];
	for (i = 0; i < e->num_sge; i++)
		room += e->sge[i].length;
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = e->wr_id;
	wc.opcode = IB_WC_RECV;
	wc.qp = &qp->ibqp;
	wc.port_num = SIB_PORT;
	if (room < SIB_GRH_LEN + pkt->len) {
		err = -ENOSPC;
	} else {
		/* The GRH's 40 bytes first (left as they were without one),
		 * then the payload: walk the SGEs as one buffer. */
		const u8 *src[2] = { (const u8 *)&pkt->grh, pkt->data };
		u32 len[2] = { pkt->has_grh ? SIB_GRH_LEN : 0, pkt->len };
		u32 off[2] = { 0, SIB_GRH_LEN };
		int k;

		for (k = 0; k < 2 && !err; k++) {
			u32 done = 0;

			for (i = 0, at = 0; i < e->num_sge && done < len[k] && !err; i++) {
				u32 lo = e->sge[i].length;
				u32 from = off[k] + done;

				if (from >= at + lo) {
					at += lo;
					continue;
				}
				n = min(len[k] - done, at + lo - from);
				err = sib_sge_copy(dst, qp->ibqp.pd, &e->sge[i], from - at,
						   (void *)(src[k] + done), n, true);
				done += n;
				at += lo;
			}
		}
	}
	qp->rq_head = (qp->rq_head + 1) % qp->cap.max_recv_wr;
	qp->rq_count--;
	if (err) {
		wc.status = err == -ENOSPC ? IB_WC_LOC_LEN_ERR : IB_WC_LOC_PROT_ERR;
	} else {
		wc.status = IB_WC_SUCCESS;
		wc.byte_len = SIB_GRH_LEN + pkt->len;
		wc.src_qp = pkt->src_qpn;
		wc.slid = pkt->slid;
		wc.sl = pkt->sl;
		wc.pkey_index = pkey_index;
		wc.wc_flags = (pkt->has_grh ? IB_WC_GRH : 0) |
			      (pkt->has_imm ? IB_WC_WITH_IMM : 0);
		wc.ex.imm_data = pkt->imm;
	}
	spin_lock(&to_scq(qp->ibqp.recv_cq)->lock);
	sib_cq_push_locked(to_scq(qp->ibqp.recv_cq), &wc, false);
	spin_unlock(&to_scq(qp->ibqp.recv_cq)->lock);
	if (err)
		sib_qp_error_locked(qp);
out:
	spin_unlock_irqrestore(&qp->lock, flags);
}

static bool sib_mcast_lid(u16 lid)
{
	return lid >= 0xc000 && lid != 0xffff;
}

/* The state of sd's port, its LID and LMC, read together. */
static enum ib_port_state sib_port_now(struct sib_dev *sd, u16 *lid, u8 *lmc)
{
	struct sib_port *p = &sd->port;
	enum ib_port_state state;
	unsigned long flags;

	spin_lock_irqsave(&p->lock, flags);
	state = p->state;
	*lid = p->lid;
	*lmc = p->lmc;
	spin_unlock_irqrestore(&p->lock, flags);
	return state;
}

/*
 * Deliver pkt to the port of dst: to its QP, or to its attached QPs.  self:
 * the sending port's own loopback (never the wire), where a directed-route
 * SMP is not taken and a multicast datagram skips the sending QP.
 */
static void sib_deliver(struct sib_dev *dst, const struct sib_pkt *pkt,
			bool self)
{
	struct sib_mcast *m;
	struct sib_qp *qp;
	unsigned long flags;
	bool smp = pkt->dest_qpn == 0;
	enum ib_port_state state;
	u16 lid;
	u8 lmc;

	/* IBA 7.2: an ACTIVE port takes data packets, an ARMED one too;
	 * SMPs (QP0, from QP0 only) flow as soon as the link is up (INIT). */
	state = sib_port_now(dst, &lid, &lmc);
	if (smp ? (state < IB_PORT_INIT || pkt->src_qpn != 0) :
		  (state != IB_PORT_ACTIVE && state != IB_PORT_ARMED))
		return;
	if (pkt->dlid == 0xffff) {
		/* The permissive LID: a directed-route SMP, for the port at the
		 * other end of the link, whatever its LID (IBA 14.2.2). */
		if (!smp || self)
			return;
		goto to_qp;
	}
	if (sib_mcast_lid(pkt->dlid)) {
		/* Multicast: the MLID, and the MGID when the packet has a GRH
		 * (IBA 10.5.2.3); never back to the sending QP itself. */
		spin_lock_irqsave(&dst->mcast_lock, flags);
		list_for_each_entry(m, &dst->mcast_list, list) {
			if (m->mlid != pkt->dlid)
				continue;
			if (pkt->has_grh && memcmp(m->mgid.raw, pkt->grh.dgid.raw, 16))
				continue;
			if (self && m->qp->ibqp.qp_num == pkt->src_qpn)
				continue;
			sib_recv(dst, m->qp, pkt);
		}
		spin_unlock_irqrestore(&dst->mcast_lock, flags);
		return;
	}
	if (!lid || (pkt->dlid & ~((1u << lmc) - 1)) != lid)
		return;
to_qp:
	xa_lock(&dst->qp_xa);
	qp = xa_load(&dst->qp_xa, pkt->dest_qpn);
	if (qp)
		sib_recv(dst, qp, pkt);
	xa_unlock(&dst->qp_xa);
}

/* ---- the switch (switch=1) ---------------------------------------------- */

/*
 * With switch=1 the cable runs through an emulated switch node (NodeType 2,
 * IBA 14.2.5.3): its port 1 is linked to sib0's port, its port 2 to sib1's,
 * port 0 is its management port (a base SP0, IBA 14.2.5.4 EnhancedPort0 0).
 * Its SMA answers the SMPs that reach it; directed-route SMPs are forwarded
 * hop by hop (IBA 14.2.2); every other packet is forwarded by the tables
 * the SM programs: unicast by the LinearForwardingTable, multicast by the
 * MulticastForwardingTable, never back out of the port it came in by.
 * What the tables do not name is dropped and counted (switch_drops).
 */
#define SIB_SW_PORTS		2	/* external ports 1 and 2 */
#define SIB_SW_LFT_CAP		1024	/* LinearFDBCap: 16 blocks of 64 */
#define SIB_SW_MFT_CAP		1024	/* MulticastFDBCap: 32 blocks of 32 */
#define SIB_SW_GUID		(SIB_GUID_BASE | 0x0f00)
#define SIB_SW_NO_PORT		0xff	/* an LFT entry that names no port */

struct sib_sw_port {		/* an external port's PortInfo, as set */
	enum ib_port_state state;
	enum ib_port_phys_state phys_state;
	u8 neighbor_mtu;
	u8 op_vls;
};

struct sib_switch {
	spinlock_t lock;	/* everything but ca[] */
	struct sib_sw_port port[SIB_SW_PORTS + 1];	/* [0]: port 0's state */
	/* Port 0's PortInfo: the switch's own LID and what the SM set. */
	u16 lid;
	u16 sm_lid;
	u8 lmc;
	u8 sm_sl;
	u8 subnet_timeout;
	__be64 mkey;		/* kept, never enforced */
	__be64 gid_prefix;
	u16 pkeys[SIB_PKEY_TBL_LEN];
	/* SwitchInfo (IBA 14.2.5.4) */
	u16 lft_top;
	u16 mft_top;
	u8 def_port;
	u8 def_mcast_pri;
	u8 def_mcast_not;
	u8 life_time;		/* LifeTimeValue, 5 bits */
	bool port_state_change;	/* PortStateChange */
	u8 lft[SIB_SW_LFT_CAP];		/* LID -> port */
	u16 mft[SIB_SW_MFT_CAP];	/* MLID - 0xc000 -> port mask */
	struct sib_dev *ca[SIB_SW_PORTS + 1];	/* port -> CA; sib_cable_lock */
};

static struct sib_switch sib_sw;
static bool sib_switch_on;
module_param_named(switch, sib_switch_on, bool, 0444);
MODULE_PARM_DESC(switch,
		 "1: an emulated switch between sib0 (its port 1) and sib1 (its port 2), forwarding by the tables the SM programs; 0: back to back (the default)");
static unsigned long sib_sw_drops;	/* sib_sw.lock */
module_param_named(switch_drops, sib_sw_drops, ulong, 0444);
MODULE_PARM_DESC(switch_drops,
		 "packets the switch dropped: no port in its forwarding tables, only the ingress port, or a port not ACTIVE");

static void sib_sw_init(void)
{
	struct sib_switch *sw = &sib_sw;
	int i;

	spin_lock_init(&sw->lock);
	for (i = 0; i <= SIB_SW_PORTS; i++) {
		/* Port 0 is always up; the links train at load. */
		sw->port[i].state = i && !fixed_lids ? IB_PORT_INIT : IB_PORT_ACTIVE;
		sw->port[i].phys_state = IB_PORT_PHYS_STATE_LINK_UP;
		sw->port[i].neighbor_mtu = IB_MTU_4096;
		sw->port[i].op_vls = 1;
	}
	sw->pkeys[0] = 0xffff;
	sw->gid_prefix = cpu_to_be64(0xfe80000000000000ULL);
	memset(sw->lft, SIB_SW_NO_PORT, sizeof(sw->lft));
	if (fixed_lids) {	/* sib0 LID 1 at port 1, sib1 LID 2 at port 2 */
		sw->lid = 3;
		sw->sm_lid = 1;
		sw->lft[1] = 1;
		sw->lft[2] = 2;
		sw->lft[3] = 0;
		sw->lft_top = 3;
	}
}

/* The cable: both links down (Polling) or trained again (INIT). */
static void sib_sw_cable(bool up)
{
	struct sib_switch *sw = &sib_sw;
	unsigned long flags;
	int i;

	spin_lock_irqsave(&sw->lock, flags);
	for (i = 1; i <= SIB_SW_PORTS; i++) {
		struct sib_sw_port *p = &sw->port[i];

		if (!up && p->state != IB_PORT_DOWN) {
			p->state = IB_PORT_DOWN;
			p->phys_state = IB_PORT_PHYS_STATE_POLLING;
			sw->port_state_change = true;
		} else if (up && p->state == IB_PORT_DOWN) {
			p->phys_state = IB_PORT_PHYS_STATE_LINK_UP;
			p->state = fixed_lids ? IB_PORT_ACTIVE : IB_PORT_INIT;
			sw->port_state_change = true;
		}
	}
	spin_unlock_irqrestore(&sw->lock, flags);
}

static bool sib_lid_is(u16 lid, u8 lmc, u16 dlid)
{
	return lid && (dlid & ~((1u << lmc) - 1)) == lid;
}

/* IBA 14.2.5.6 PortInfo of switch port n (0: the management port). */
static void sib_sw_port_info_locked(struct sib_switch *sw, int n, int in, u8 *data)
{
	struct ib_port_info *pi = (struct ib_port_info *)data;
	struct sib_sw_port *p = &sw->port[n];

	if (!n) {	/* the switch's own addresses live in port 0's */
		pi->mkey = sw->mkey;
		pi->gid_prefix = sw->gid_prefix;
		pi->lid = cpu_to_be16(sw->lid);
		pi->sm_lid = cpu_to_be16(sw->sm_lid);
		pi->cap_mask = cpu_to_be32(IB_PORT_SYS_IMAGE_GUID_SUP);
		pi->mkeyprot_resv_lmc = sw->lmc;
		pi->neighbormtu_mastersmsl = (p->neighbor_mtu << 4) | sw->sm_sl;
		pi->clientrereg_resv_subnetto = sw->subnet_timeout;
	} else {
		pi->neighbormtu_mastersmsl = p->neighbor_mtu << 4;
	}
	pi->local_port_num = in;	/* the port the SMP came in by */
	pi->link_width_enabled = 2;		/* 4X */
	pi->link_width_supported = 3;		/* 1X, 4X */
	pi->link_width_active = 2;
	pi->linkspeed_portstate = (7 << 4) | p->state;
	pi->portphysstate_linkdown = (p->phys_state << 4) | 2;
	pi->linkspeedactive_enabled = (4 << 4) | 7;
	pi->vlcap_inittype = 1 << 4;		/* VL0 only */
	pi->inittypereply_mtucap = IB_MTU_4096;
	pi->vlstallcnt_hoqlife = 0x1f;
	pi->operationalvl_pei_peo_fpi_fpo = p->op_vls << 4;
	pi->guid_cap = 1;
}

/* Set(PortInfo) of switch port n, all or nothing; returns the MAD status. */
static u16 sib_sw_set_port_info_locked(struct sib_switch *sw, int n, const u8 *data)
{
	const struct ib_port_info *pi = (const struct ib_port_info *)data;
	struct sib_sw_port *p = &sw->port[n];
	u8 state = pi->linkspeed_portstate & 0xf;
	u16 lid = be16_to_cpu(pi->lid), sm_lid = be16_to_cpu(pi->sm_lid);

	if (state > IB_PORT_ACTIVE)
		return IB_MGMT_MAD_STATUS_INVALID_ATTRIB_VALUE;
	if (n) {	/* an external port: the link state machine (IBA 7.2) */
		if ((state == IB_PORT_ARMED && p->state != IB_PORT_INIT &&
		     p->state != IB_PORT_ARMED) ||
		    (state == IB_PORT_ACTIVE && p->state != IB_PORT_ARMED &&
		     p->state != IB_PORT_ACTIVE))
			return IB_MGMT_MAD_STATUS_INVALID_ATTRIB_VALUE;
		if (p->state == IB_PORT_DOWN && state != IB_PORT_NOP)
			return IB_MGMT_MAD_STATUS_INVALID_ATTRIB_VALUE;
		if (state == IB_PORT_DOWN)
			p->state = IB_PORT_INIT;	/* the link trains again */
		else if (state != IB_PORT_NOP)
			p->state = state;
	} else {
		/* Base SP0: its state follows no link; its LID is the switch's. */
		if (lid >= 0xc000 || sm_lid >= 0xc000)
			return IB_MGMT_MAD_STATUS_INVALID_ATTRIB_VALUE;
		sw->lid = lid;
		sw->lmc = pi->mkeyprot_resv_lmc & 7;
		sw->sm_lid = sm_lid;
		sw->sm_sl = pi->neighbormtu_mastersmsl & 0xf;
		sw->mkey = pi->mkey;
		sw->gid_prefix = pi->gid_prefix;
		sw->subnet_timeout = pi->clientrereg_resv_subnetto & 0x1f;
	}
	if (pi->neighbormtu_mastersmsl >> 4)
		p->neighbor_mtu = pi->neighbormtu_mastersmsl >> 4;
	if (pi->operationalvl_pei_peo_fpi_fpo >> 4)
		p->op_vls = pi->operationalvl_pei_peo_fpi_fpo >> 4;
	return 0;
}

/* IBA 14.2.5.4 SwitchInfo: the 20 bytes it has. */
static void sib_sw_info_locked(struct sib_switch *sw, u8 *d)
{
	put_unaligned_be16(SIB_SW_LFT_CAP, d + 0);	/* LinearFDBCap */
	put_unaligned_be16(0, d + 2);			/* RandomFDBCap */
	put_unaligned_be16(SIB_SW_MFT_CAP, d + 4);	/* MulticastFDBCap */
	put_unaligned_be16(sw->lft_top, d + 6);		/* LinearFDBTop */
	d[8] = sw->def_port;
	d[9] = sw->def_mcast_pri;
	d[10] = sw->def_mcast_not;
	d[11] = (sw->life_time << 3) | (sw->port_state_change << 2);
	put_unaligned_be16(1, d + 12);			/* LIDsPerPort */
	put_unaligned_be16(0, d + 14);			/* PartitionEnforcementCap */
	d[16] = 0;	/* no enforcement or filtering, base SP0 */
	put_unaligned_be16(sw->mft_top, d + 18);	/* MulticastFDBTop */
}

static u16 sib_sw_set_info_locked(struct sib_switch *sw, const u8 *d)
{
	u16 top = get_unaligned_be16(d + 6);

	if (top >= SIB_SW_LFT_CAP)
		return IB_MGMT_MAD_STATUS_INVALID_ATTRIB_VALUE;
	sw->lft_top = top;
	sw->def_port = d[8];
	sw->def_mcast_pri = d[9];
	sw->def_mcast_not = d[10];
	sw->life_time = d[11] >> 3;
	if (d[11] & 4)		/* PortStateChange: cleared by writing 1 */
		sw->port_state_change = false;
	sw->mft_top = get_unaligned_be16(d + 18);
	return 0;
}

/*
 * The switch's SMA: answers smp in place (the request turned into its
 * GetResp).  false: nothing to answer (not a Get or Set).
 */
static bool sib_sw_sma_locked(struct sib_switch *sw, int in, struct ib_smp *smp)
{
	bool set = smp->method == IB_MGMT_METHOD_SET;
	u32 mod = be32_to_cpu(smp->attr_mod);
	u8 req[IB_SMP_DATA_SIZE];
	u16 status = 0;
	u32 i, b;

	if (smp->method != IB_MGMT_METHOD_GET && !set)
		return false;
	memcpy(req, smp->data, sizeof(req));
	memset(smp->data, 0, sizeof(smp->data));
	smp->method = IB_MGMT_METHOD_GET_RESP;
	if (smp->base_version != 1 || smp->class_version != 1) {
		status = IB_MGMT_MAD_STATUS_BAD_VERSION;
		goto out;
	}
	switch (smp->attr_id) {
	case IB_SMP_ATTR_NODE_DESC:
		if (set)
			status = IB_MGMT_MAD_STATUS_UNSUPPORTED_METHOD_ATTRIB;
		else
			strscpy(smp->data, "rsverbs sib switch", IB_DEVICE_NODE_DESC_MAX);
		break;
	case IB_SMP_ATTR_NODE_INFO: {
		struct ib_node_info *ni = (struct ib_node_info *)smp->data;

		if (set) {
			status = IB_MGMT_MAD_STATUS_UNSUPPORTED_METHOD_ATTRIB;
			break;
		}
		ni->base_version = 1;
		ni->class_version = 1;
		ni->node_type = RDMA_NODE_IB_SWITCH;
		ni->num_ports = SIB_SW_PORTS;
		ni->sys_guid = cpu_to_be64(SIB_SW_GUID);
		ni->node_guid = cpu_to_be64(SIB_SW_GUID);
		ni->port_guid = cpu_to_be64(SIB_SW_GUID);	/* port 0's, every port's */
		ni->partition_cap = cpu_to_be16(SIB_PKEY_TBL_LEN);
		ni->local_port_num = in;
		break;
	}
	case IB_SMP_ATTR_SWITCH_INFO:
		if (set)
			status = sib_sw_set_info_locked(sw, req);
		sib_sw_info_locked(sw, smp->data);
		break;
	case IB_SMP_ATTR_GUID_INFO:
		if (mod)
			status = IB_MGMT_MAD_STATUS_INVALID_ATTRIB_VALUE;
		else
			put_unaligned_be64(SIB_SW_GUID, smp->data);
		break;
	case IB_SMP_ATTR_PORT_INFO:
		if (mod > SIB_SW_PORTS) {
			status = IB_MGMT_MAD_STATUS_INVALID_ATTRIB_VALUE;
			break;
		}
		if (set)
			status = sib_sw_set_port_info_locked(sw, mod, req);
		sib_sw_port_info_locked(sw, mod, in, smp->data);
		break;
	case IB_SMP_ATTR_PKEY_TABLE:
		/* AttributeModifier: port << 16 | block (IBA 14.2.5.7); one
		 * table, port 0's: PartitionEnforcementCap 0. */
		if ((mod & 0xffff) || (mod >> 16) > SIB_SW_PORTS) {
			status = IB_MGMT_MAD_STATUS_INVALID_ATTRIB_VALUE;
			break;
		}
		for (i = 0; i < SIB_PKEY_TBL_LEN; i++) {
			if (set && !(mod >> 16))
				sw->pkeys[i] = get_unaligned_be16(req + 2 * i);
			put_unaligned_be16(sw->pkeys[i], smp->data + 2 * i);
		}
		break;
	case IB_SMP_ATTR_SL_TO_VL_TABLE:
	case IB_SMP_ATTR_VL_ARB_TABLE:
		break;	/* every SL on VL0 */
	case IB_SMP_ATTR_LINEAR_FORWARD_TABLE:
		/* AttributeModifier: the block of 64 LIDs (IBA 14.2.5.10). */
		if (mod >= SIB_SW_LFT_CAP / 64) {
			status = IB_MGMT_MAD_STATUS_INVALID_ATTRIB_VALUE;
			break;
		}
		if (set)
			memcpy(sw->lft + mod * 64, req, 64);
		memcpy(smp->data, sw->lft + mod * 64, 64);
		break;
	case IB_SMP_ATTR_MCAST_FORWARD_TABLE:
		/* AttributeModifier: bits 31-28 the position (which 16 ports
		 * of the mask), bits 8-0 the block of 32 MLIDs from 0xc000
		 * (IBA 14.2.5.12).  Ports 0-2: position 0 only. */
		b = mod & 0x1ff;
		if ((mod >> 28) || b >= SIB_SW_MFT_CAP / 32) {
			status = IB_MGMT_MAD_STATUS_INVALID_ATTRIB_VALUE;
			break;
		}
		for (i = 0; i < 32; i++) {
			if (set)
				sw->mft[b * 32 + i] = get_unaligned_be16(req + 2 * i) &
						      GENMASK(SIB_SW_PORTS, 0);
			put_unaligned_be16(sw->mft[b * 32 + i], smp->data + 2 * i);
		}
		break;
	default:	/* SMInfo too: no SM on the switch */
		status = IB_MGMT_MAD_STATUS_UNSUPPORTED_METHOD_ATTRIB;
	}
out:
	smp->status = cpu_to_be16(status);
	if (smp->mgmt_class == IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE)
		smp->status |= IB_SMP_DIRECTION;
	return true;
}

/*
 * A directed-route SMP at switch port in (IBA 14.2.2.2-3, C14-9 outbound and
 * C14-13 returning; the kernel's smi.c has the same rules for an HCA).  The
 * hop pointer and the return path are updated in place; answered here at
 * the end of its path.  Returns the egress port, or -1 to drop it.
 */
static int sib_sw_dr_locked(struct sib_switch *sw, int in, struct ib_smp *smp)
{
	u8 h = smp->hop_ptr, n = smp->hop_cnt;

	if (!n || n >= IB_SMP_MAX_PATH_HOPS)
		return -1;
	if (!(smp->status & IB_SMP_DIRECTION)) {
		if (h >= 1 && h < n) {		/* C14-9:2, an intermediate hop */
			smp->return_path[h] = in;
			smp->hop_ptr = ++h;
			return smp->initial_path[h];
		}
		/* C14-9:3-4, the end of the path: to the SMA (the LID-routed
		 * part of a DR SMP, a DR DLID not permissive, is not kept). */
		if (h != n || smp->dr_dlid != IB_LID_PERMISSIVE)
			return -1;
		smp->return_path[h] = in;
		if (!sib_sw_sma_locked(sw, in, smp))
			return -1;
		/* C14-13:1: the answer leaves by the port the request came by */
		smp->hop_ptr = h;
		return smp->return_path[h];
	}
	if (h >= 2 && h <= n) {			/* C14-13:2 */
		smp->hop_ptr = --h;
		return smp->return_path[h];
	}
	return -1;
}

static int sib_sw_lft_locked(struct sib_switch *sw, u16 dlid)
{
	return dlid < SIB_SW_LFT_CAP && dlid <= sw->lft_top ? sw->lft[dlid] : -1;
}

/*
 * A packet from CA sd into the switch; sib_cable_lock held (sw->ca[]).  An
 * SMP answered by the switch's SMA is turned into its answer in place.
 */
static void sib_sw_xmit(struct sib_dev *sd, struct sib_pkt *pkt)
{
	struct sib_switch *sw = &sib_sw;
	int in = sd->index + 1, out = -1, p;
	bool dr = false;
	unsigned long flags, mask = 0;

	spin_lock_irqsave(&sw->lock, flags);
	if (pkt->src_qpn == 0 && pkt->dest_qpn == 0) {
		/* SMPs (VL15) flow from INIT on (IBA 7.2). */
		struct ib_smp *smp = (struct ib_smp *)pkt->data;

		if (sw->port[in].state < IB_PORT_INIT || pkt->len < sizeof(*smp))
			goto count;
		if (smp->mgmt_class == IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE) {
			dr = true;	/* may leave by its ingress port */
			out = sib_sw_dr_locked(sw, in, smp);
		} else if (sib_lid_is(sw->lid, sw->lmc, pkt->dlid)) {
			if (!sib_sw_sma_locked(sw, in, smp))
				goto count;
			pkt->dlid = pkt->slid;
			pkt->slid = sw->lid;
			in = 0;		/* the answer comes from port 0 */
			out = sib_sw_lft_locked(sw, pkt->dlid);
		} else {
			out = sib_sw_lft_locked(sw, pkt->dlid);
		}
		if (out >= 1 && out <= SIB_SW_PORTS && (dr || out != in) &&
		    sw->port[out].state >= IB_PORT_INIT)
			mask = BIT(out);
	} else if (sw->port[in].state == IB_PORT_ACTIVE) {
		if (sib_mcast_lid(pkt->dlid)) {
			if (pkt->dlid - 0xc000 < SIB_SW_MFT_CAP)
				mask = sw->mft[pkt->dlid - 0xc000];
		} else {
			out = sib_sw_lft_locked(sw, pkt->dlid);
			if (out >= 1 && out <= SIB_SW_PORTS)
				mask = BIT(out);
		}
		/* Never back out of the ingress port, nor to port 0 (no
		 * receiver of data there); only an ACTIVE port sends. */
		mask &= GENMASK(SIB_SW_PORTS, 1) & ~BIT(in);
		for (p = 1; p <= SIB_SW_PORTS; p++)
			if (sw->port[p].state != IB_PORT_ACTIVE)
				mask &= ~BIT(p);
	}
count:
	if (!mask)
		sib_sw_drops++;
	spin_unlock_irqrestore(&sw->lock, flags);
	for_each_set_bit(p, &mask, SIB_SW_PORTS + 1)
		if (sw->ca[p])
			sib_deliver(sw->ca[p], pkt, false);
}

/* The sending device's work item: every queued packet onto the cable. */
static void sib_xmit_work(struct work_struct *w)
{
	struct sib_dev *sd = container_of(w, struct sib_dev, xmit_work);
	struct sib_pkt *pkt, *t;
	struct sib_dev *peer;
	enum ib_port_state state;
	unsigned long flags;
	u16 lid;
	u8 lmc;
	LIST_HEAD(batch);

	spin_lock_irqsave(&sd->xmit_lock, flags);
	list_splice_init(&sd->xmit_list, &batch);
	spin_unlock_irqrestore(&sd->xmit_lock, flags);
	list_for_each_entry_safe(pkt, t, &batch, list) {
		list_del(&pkt->list);
		/* A port that is not ACTIVE sends no data packet, but SMPs
		 * from its link up on (IBA 7.2). */
		state = sib_port_now(sd, &lid, &lmc);
		if (state == IB_PORT_ACTIVE ||
		    (pkt->src_qpn == 0 && state >= IB_PORT_INIT)) {
			/* Loopback first (own LID, or multicast): the switch
			 * may turn an SMP into its answer in place. */
			sib_deliver(sd, pkt, true);
			spin_lock(&sib_cable_lock);
			peer = sd->peer;
			if (peer)
				sib_deliver(peer, pkt, false);
			else if (sib_switch_on && !sib_lid_is(lid, lmc, pkt->dlid))
				sib_sw_xmit(sd, pkt);
			spin_unlock(&sib_cable_lock);
		}
		kfree(pkt);
	}
}

/* Free what was sent and never delivered (unload, after the work). */
static void sib_xmit_purge(struct sib_dev *sd)
{
	struct sib_pkt *pkt, *t;

	list_for_each_entry_safe(pkt, t, &sd->xmit_list, list) {
		list_del(&pkt->list);
		kfree(pkt);
	}
}

/* ---- the SMA: process_mad ---------------------------------------------- */

/*
 * The port's events, dispatched from a work item in a fixed order (never
 * from process_mad itself: the MAD layer may call it for a local SMP from
 * its send path).  A repeated event not yet dispatched is dispatched once.
 */
static const enum ib_event_type sib_event_order[] = {
	IB_EVENT_PORT_ERR, IB_EVENT_LID_CHANGE, IB_EVENT_PKEY_CHANGE,
	IB_EVENT_GID_CHANGE, IB_EVENT_SM_CHANGE, IB_EVENT_PORT_ACTIVE,
	IB_EVENT_CLIENT_REREGISTER,
};

static void sib_event_work(struct work_struct *w)
{
	struct sib_dev *sd = container_of(w, struct sib_dev, event_work);
	unsigned long flags;
	u32 events;
	int i;

	spin_lock_irqsave(&sd->port.lock, flags);
	events = sd->port.dying ? 0 : sd->port.events;
	sd->port.events = 0;
	spin_unlock_irqrestore(&sd->port.lock, flags);
	for (i = 0; i < ARRAY_SIZE(sib_event_order); i++) {
		struct ib_event ev = {
			.device = &sd->ibdev,
			.element.port_num = SIB_PORT,
			.event = sib_event_order[i],
		};

		if (events & BIT(sib_event_order[i]))
			ib_dispatch_event(&ev);
	}
}

/* p->lock held. */
static void sib_event_locked(struct sib_dev *sd, enum ib_event_type e)
{
	if (sd->port.dying)
		return;
	sd->port.events |= BIT(e);
	queue_work(sib_wq, &sd->event_work);
}

/* IBA 14.2.5.3 NodeInfo. */
static void sib_node_info(struct sib_dev *sd, u8 *data)
{
	struct ib_node_info *ni = (struct ib_node_info *)data;

	ni->base_version = 1;
	ni->class_version = 1;
	ni->node_type = RDMA_NODE_IB_CA;
	ni->num_ports = 1;
	ni->sys_guid = cpu_to_be64(SIB_GUID_BASE);
	ni->node_guid = sd->ibdev.node_guid;
	ni->port_guid = sd->port_guid;
	ni->partition_cap = cpu_to_be16(SIB_PKEY_TBL_LEN);
	ni->local_port_num = SIB_PORT;
}

/* IBA 14.2.5.6 PortInfo, as the port is now; p->lock held. */
static void sib_port_info_locked(struct sib_port *p, u8 *data)
{
	struct ib_port_info *pi = (struct ib_port_info *)data;

	pi->mkey = p->mkey;
	pi->gid_prefix = p->gid_prefix;
	pi->lid = cpu_to_be16(p->lid);
	pi->sm_lid = cpu_to_be16(p->sm_lid);
	pi->cap_mask = cpu_to_be32(p->cap_flags);
	pi->local_port_num = SIB_PORT;
	pi->link_width_enabled = 2;		/* 4X */
	pi->link_width_supported = 3;		/* 1X, 4X */
	pi->link_width_active = 2;		/* 4X */
	pi->linkspeed_portstate = (7 << 4) | p->state;	/* SDR, DDR, QDR */
	pi->portphysstate_linkdown = (p->phys_state << 4) | 2;	/* Polling */
	pi->mkeyprot_resv_lmc = p->lmc;
	pi->linkspeedactive_enabled = (4 << 4) | 7;	/* QDR; all three */
	pi->neighbormtu_mastersmsl = (p->neighbor_mtu << 4) | p->sm_sl;
	pi->vlcap_inittype = 1 << 4;		/* VL0 only */
	pi->inittypereply_mtucap = IB_MTU_4096;
	pi->vlstallcnt_hoqlife = 0x1f;		/* HOQLife: infinite */
	pi->operationalvl_pei_peo_fpi_fpo = p->op_vls << 4;
	pi->pkey_violations = cpu_to_be16(p->bad_pkey_cntr);
	pi->qkey_violations = cpu_to_be16(p->qkey_viol_cntr);
	pi->guid_cap = SIB_GID_TBL_LEN;
	pi->clientrereg_resv_subnetto = p->subnet_timeout;
}

/*
 * Set(PortInfo): what the SM may change, checked first and applied all or
 * nothing (IBA 14.2.5.6; an invalid state transition changes nothing and
 * answers "invalid attribute value").  The counters and the read-only
 * fields of the SM's copy are not taken (an SM writes back what it read).
 * M_Key protection is not enforced.  Returns the MAD status.
 */
static u16 sib_set_port_info(struct sib_dev *sd, const u8 *data)
{
	const struct ib_port_info *pi = (const struct ib_port_info *)data;
	struct sib_port *p = &sd->port;
	u8 state = pi->linkspeed_portstate & 0xf;
	u16 lid = be16_to_cpu(pi->lid), sm_lid = be16_to_cpu(pi->sm_lid);
	u8 lmc = pi->mkeyprot_resv_lmc & 7;
	u8 sm_sl = pi->neighbormtu_mastersmsl & 0xf;
	enum ib_port_state old;
	unsigned long flags;
	u16 status = 0;

	spin_lock_irqsave(&p->lock, flags);
	old = p->state;
	/* 0: no change; Down: the link retrains at once (back to INIT);
	 * Armed from Init; Active from Armed (IBA 7.2.1). */
	switch (state) {
	case IB_PORT_NOP:
	case IB_PORT_DOWN:
		break;
	case IB_PORT_ARMED:
		if (old != IB_PORT_INIT && old != IB_PORT_ARMED)
			status = IB_MGMT_MAD_STATUS_INVALID_ATTRIB_VALUE;
		break;
	case IB_PORT_ACTIVE:
		if (old != IB_PORT_ARMED && old != IB_PORT_ACTIVE)
			status = IB_MGMT_MAD_STATUS_INVALID_ATTRIB_VALUE;
		break;
	default:
		status = IB_MGMT_MAD_STATUS_INVALID_ATTRIB_VALUE;
	}
	if (lid >= 0xc000 || sm_lid >= 0xc000)	/* unicast LIDs only */
		status = IB_MGMT_MAD_STATUS_INVALID_ATTRIB_VALUE;
	if (status) {
		spin_unlock_irqrestore(&p->lock, flags);
		return status;
	}
	p->mkey = pi->mkey;
	if (p->gid_prefix != pi->gid_prefix) {
		p->gid_prefix = pi->gid_prefix;
		sib_event_locked(sd, IB_EVENT_GID_CHANGE);
	}
	if (p->lid != lid || p->lmc != lmc) {
		p->lid = lid;
		p->lmc = lmc;
		sib_event_locked(sd, IB_EVENT_LID_CHANGE);
	}
	if (p->sm_lid != sm_lid || p->sm_sl != sm_sl) {
		p->sm_lid = sm_lid;
		p->sm_sl = sm_sl;
		sib_event_locked(sd, IB_EVENT_SM_CHANGE);
	}
	if (pi->neighbormtu_mastersmsl >> 4)
		p->neighbor_mtu = pi->neighbormtu_mastersmsl >> 4;
	if (pi->operationalvl_pei_peo_fpi_fpo >> 4)
		p->op_vls = pi->operationalvl_pei_peo_fpi_fpo >> 4;
	p->subnet_timeout = pi->clientrereg_resv_subnetto & 0x1f;
	if (state == IB_PORT_DOWN) {
		p->state = IB_PORT_INIT;
		if (old == IB_PORT_ACTIVE)
			sib_event_locked(sd, IB_EVENT_PORT_ERR);
	} else if (state != IB_PORT_NOP) {
		p->state = state;
		if (state == IB_PORT_ACTIVE && old != IB_PORT_ACTIVE)
			sib_event_locked(sd, IB_EVENT_PORT_ACTIVE);
	}
	/* ClientReregister (bit 7): the port's clients join again. */
	if (pi->clientrereg_resv_subnetto & 0x80)
		sib_event_locked(sd, IB_EVENT_CLIENT_REREGISTER);
	spin_unlock_irqrestore(&p->lock, flags);
	return 0;
}

/* Set(PKeyTable), block 0. */
static void sib_set_pkeys(struct sib_dev *sd, const u8 *data)
{
	const __be16 *t = (const __be16 *)data;
	struct sib_port *p = &sd->port;
	unsigned long flags;
	bool changed = false;
	int i;

	spin_lock_irqsave(&p->lock, flags);
	for (i = 0; i < SIB_PKEY_TBL_LEN; i++) {
		changed |= p->pkeys[i] != be16_to_cpu(t[i]);
		p->pkeys[i] = be16_to_cpu(t[i]);
	}
	if (changed)
		sib_event_locked(sd, IB_EVENT_PKEY_CHANGE);
	spin_unlock_irqrestore(&p->lock, flags);
}

/*
 * The subnet management agent: the MAD layer gives the driver every MAD its
 * QP0 and QP1 receive, and every locally addressed directed-route SMP, first
 * ("right of first refusal", mad.c ib_mad_recv_done).  SubnGet and SubnSet
 * are answered here (SUCCESS | REPLY); everything else (responses for the
 * SM's own agent, GMPs for their agents) is left to the MAD layer with
 * SUCCESS alone, which it reads as "go on": to an agent of this port, as if
 * received (mad.c ib_mad_recv_done and, for a local directed-route SMP,
 * handle_outgoing_dr_smp, where FAILURE would fail the SM's send).
 * Attributes: NodeDescription, NodeInfo, GUIDInfo, PortInfo, PKeyTable,
 * SLtoVLMappingTable and VLArbitrationTable (VL0 only: all zero); the rest
 * answer "unsupported".  SMInfo is an SM's, not the SMA's: it is left to
 * the MAD layer, which hands it to an SM's agent on this port (opensm's) or
 * answers "unsupported" itself (mad.c generate_unmatched_resp), as mlx4's
 * driver leaves it (mlx4 mad.c ib_process_mad, "Don't process SMInfo
 * queries").
 */
static int sib_process_mad(struct ib_device *ibdev, int mad_flags, u32 port,
			   const struct ib_wc *in_wc, const struct ib_grh *in_grh,
			   const struct ib_mad *in, struct ib_mad *out,
			   size_t *out_size, u16 *out_pkey_index)
{
	struct sib_dev *sd = to_sdev(ibdev);
	const struct ib_smp *smp = (const struct ib_smp *)in;
	struct ib_smp *r = (struct ib_smp *)out;
	bool set = smp->method == IB_MGMT_METHOD_SET;
	u32 mod = be32_to_cpu(smp->attr_mod);
	unsigned long flags;
	u16 status = 0;

	if (port != SIB_PORT || *out_size < sizeof(*r))
		return IB_MAD_RESULT_FAILURE;
	if (smp->mgmt_class != IB_MGMT_CLASS_SUBN_LID_ROUTED &&
	    smp->mgmt_class != IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE)
		return IB_MAD_RESULT_SUCCESS;
	if (smp->method == IB_MGMT_METHOD_TRAP_REPRESS)
		return IB_MAD_RESULT_SUCCESS | IB_MAD_RESULT_CONSUMED;
	if ((smp->method != IB_MGMT_METHOD_GET && !set) ||
	    smp->attr_id == IB_SMP_ATTR_SM_INFO)
		return IB_MAD_RESULT_SUCCESS;

	memcpy(r, smp, sizeof(*r));
	memset(r->data, 0, sizeof(r->data));
	r->method = IB_MGMT_METHOD_GET_RESP;
	if (smp->base_version != 1 || smp->class_version != 1) {
		status = IB_MGMT_MAD_STATUS_BAD_VERSION;
		goto reply;
	}
	switch (smp->attr_id) {
	case IB_SMP_ATTR_NODE_DESC:
		memcpy(r->data, ibdev->node_desc, IB_DEVICE_NODE_DESC_MAX);
		break;
	case IB_SMP_ATTR_NODE_INFO:
		sib_node_info(sd, r->data);
		break;
	case IB_SMP_ATTR_GUID_INFO:
		if (mod) {
			status = IB_MGMT_MAD_STATUS_INVALID_ATTRIB_VALUE;
			break;
		}
		memcpy(r->data, &sd->port_guid, sizeof(sd->port_guid));
		break;
	case IB_SMP_ATTR_PORT_INFO:
		if (mod > SIB_PORT) {
			status = IB_MGMT_MAD_STATUS_INVALID_ATTRIB_VALUE;
			break;
		}
		if (set)
			status = sib_set_port_info(sd, smp->data);
		spin_lock_irqsave(&sd->port.lock, flags);
		sib_port_info_locked(&sd->port, r->data);
		spin_unlock_irqrestore(&sd->port.lock, flags);
		break;
	case IB_SMP_ATTR_PKEY_TABLE:
		if (mod) {	/* one block of 32 */
			status = IB_MGMT_MAD_STATUS_INVALID_ATTRIB_VALUE;
			break;
		}
		if (set)
			sib_set_pkeys(sd, smp->data);
		spin_lock_irqsave(&sd->port.lock, flags);
		for (int i = 0; i < SIB_PKEY_TBL_LEN; i++)
			((__be16 *)r->data)[i] = cpu_to_be16(sd->port.pkeys[i]);
		spin_unlock_irqrestore(&sd->port.lock, flags);
		break;
	case IB_SMP_ATTR_SL_TO_VL_TABLE:
	case IB_SMP_ATTR_VL_ARB_TABLE:
		break;	/* every SL on VL0; no arbitration to set */
	default:
		status = IB_MGMT_MAD_STATUS_UNSUPPORTED_METHOD_ATTRIB;
	}
reply:
	r->status = cpu_to_be16(status);
	if (smp->mgmt_class == IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE)
		r->status |= IB_SMP_DIRECTION;	/* the answer returns */
	*out_size = sizeof(*r);
	return IB_MAD_RESULT_SUCCESS | IB_MAD_RESULT_REPLY;
}

/* ---- registration ------------------------------------------------------- */

static const struct ib_device_ops sib_ops = {
	.owner = THIS_MODULE,
	.driver_id = RDMA_DRIVER_QIB,	/* served by the stock libipathverbs */
	.uverbs_abi_ver = 1,		/* ... which forwards every verb */

	.query_device = sib_query_device,
	.query_port = sib_query_port,
	.modify_port = sib_modify_port,
	.get_port_immutable = sib_get_port_immutable,
	.get_link_layer = sib_get_link_layer,
	.query_gid = sib_query_gid,
	.query_pkey = sib_query_pkey,
	.alloc_ucontext = sib_alloc_ucontext,
	.dealloc_ucontext = sib_dealloc_ucontext,
	.alloc_pd = sib_alloc_pd,
	.dealloc_pd = sib_dealloc_pd,
	.create_ah = sib_create_ah,
	.create_user_ah = sib_create_ah,
	.query_ah = sib_query_ah,
	.destroy_ah = sib_destroy_ah,
	.get_dma_mr = sib_get_dma_mr,
	.reg_user_mr = sib_reg_user_mr,
	.dereg_mr = sib_dereg_mr,
	.create_cq = sib_create_cq,
	.destroy_cq = sib_destroy_cq,
	.poll_cq = sib_poll_cq,
	.req_notify_cq = sib_req_notify_cq,
	.create_qp = sib_create_qp,
	.modify_qp = sib_modify_qp,
	.query_qp = sib_query_qp,
	.destroy_qp = sib_destroy_qp,
	.post_send = sib_post_send,
	.post_recv = sib_post_recv,
	.process_mad = sib_process_mad,
	.attach_mcast = sib_attach_mcast,
	.detach_mcast = sib_detach_mcast,

	INIT_RDMA_OBJ_SIZE(ib_ah, sib_ah, ibah),
	INIT_RDMA_OBJ_SIZE(ib_cq, sib_cq, ibcq),
	INIT_RDMA_OBJ_SIZE(ib_pd, sib_pd, ibpd),
	INIT_RDMA_OBJ_SIZE(ib_qp, sib_qp, ibqp),
	INIT_RDMA_OBJ_SIZE(ib_ucontext, sib_ucontext, ibuc),
};

static struct sib_dev *sib_devs[SIB_NDEV];

/*
 * The test hook on the cable: /sys/module/sib/parameters/cable, 1 (plugged,
 * at load) or 0 (pulled).  Pulled, both ports go DOWN with phys state
 * Polling (PORT_ERR where one was ACTIVE) and carry nothing, SMPs neither;
 * plugged again, the link trains: LinkUp and INIT, where an SM takes over
 * (or, with fixed_lids, ACTIVE again at once, with PORT_ACTIVE).  The LID
 * and the rest an SM set are kept, as a real port keeps its PortInfo.
 */
static bool cable = true;
static DEFINE_MUTEX(sib_cable_mutex);	/* cable and the devices' life */

static void sib_cable_apply(struct sib_dev *sd, bool up)
{
	struct sib_port *p = &sd->port;
	enum ib_port_state old;
	unsigned long flags;

	spin_lock_irqsave(&p->lock, flags);
	old = p->state;
	if (!up) {
		p->state = IB_PORT_DOWN;
		p->phys_state = IB_PORT_PHYS_STATE_POLLING;
		if (old == IB_PORT_ACTIVE)
			sib_event_locked(sd, IB_EVENT_PORT_ERR);
	} else if (old == IB_PORT_DOWN) {
		p->phys_state = IB_PORT_PHYS_STATE_LINK_UP;
		p->state = fixed_lids ? IB_PORT_ACTIVE : IB_PORT_INIT;
		if (fixed_lids)
			sib_event_locked(sd, IB_EVENT_PORT_ACTIVE);
	}
	spin_unlock_irqrestore(&p->lock, flags);
}

static int sib_cable_set(const char *val, const struct kernel_param *kp)
{
	bool up;
	int err, i;

	err = kstrtobool(val, &up);
	if (err)
		return err;
	mutex_lock(&sib_cable_mutex);
	cable = up;
	for (i = 0; i < SIB_NDEV; i++)
		if (sib_devs[i])
			sib_cable_apply(sib_devs[i], up);
	if (sib_switch_on)
		sib_sw_cable(up);
	mutex_unlock(&sib_cable_mutex);
	return 0;
}

static const struct kernel_param_ops sib_cable_ops = {
	.set = sib_cable_set,
	.get = param_get_bool,
};
module_param_cb(cable, &sib_cable_ops, &cable, 0644);
MODULE_PARM_DESC(cable, "1: the cable between sib0 and sib1 is plugged (the default); 0: pulled (a test hook)");

static void sib_port_init(struct sib_port *p, int index)
{
	spin_lock_init(&p->lock);
	/* A live link and no SM (no SMA before step 3): INIT, LID 0; or, with
	 * fixed_lids, what an SM would have made of it. */
	p->state = fixed_lids ? IB_PORT_ACTIVE : IB_PORT_INIT;
	p->phys_state = IB_PORT_PHYS_STATE_LINK_UP;
	p->lid = fixed_lids ? index + 1 : 0;
	p->sm_lid = fixed_lids ? 1 : 0;
	/* ClientReregister supported (IBA 14.2.5.6, CapabilityMask bit 25):
	 * opensm sets the bit only for ports that advertise it. */
	p->cap_flags = IB_PORT_SYS_IMAGE_GUID_SUP | IB_PORT_CLIENT_REG_SUP;
	p->pkeys[0] = 0xffff;
	p->gid_prefix = cpu_to_be64(0xfe80000000000000ULL);
	p->neighbor_mtu = IB_MTU_4096;
	p->op_vls = 1;
}

static struct sib_dev *sib_dev_create(int index)
{
	struct sib_dev *sd;
	u64 node_guid = SIB_GUID_BASE | ((u64)index << 8);
	int err;

	sd = ib_alloc_device(sib_dev, ibdev);
	if (!sd)
		return ERR_PTR(-ENOMEM);
	sd->index = index;
	sd->port_guid = cpu_to_be64(node_guid | 1);
	sib_port_init(&sd->port, index);
	ida_init(&sd->qpn_ida);
	xa_init_flags(&sd->mr_xa, XA_FLAGS_ALLOC1 | XA_FLAGS_LOCK_IRQ);
	xa_init(&sd->qp_xa);
	spin_lock_init(&sd->xmit_lock);
	INIT_LIST_HEAD(&sd->xmit_list);
	INIT_WORK(&sd->xmit_work, sib_xmit_work);
	INIT_WORK(&sd->event_work, sib_event_work);
	spin_lock_init(&sd->mcast_lock);
	INIT_LIST_HEAD(&sd->mcast_list);

	sd->ibdev.node_type = RDMA_NODE_IB_CA;
	sd->ibdev.node_guid = cpu_to_be64(node_guid);
	sd->ibdev.phys_port_cnt = 1;
	sd->ibdev.num_comp_vectors = 1;
	snprintf(sd->ibdev.node_desc, sizeof(sd->ibdev.node_desc),
		 "rsverbs sib HCA %d", index);
	sd->ibdev.uverbs_cmd_mask |= SIB_UVERBS_CMD_OPT_IN;
	ib_set_device_ops(&sd->ibdev, &sib_ops);

	/* No dma_device: the core uses virtual DMA (ib_uses_virt_dma). */
	err = ib_register_device(&sd->ibdev, "sib%d", NULL);
	if (err) {
		ida_destroy(&sd->qpn_ida);
		xa_destroy(&sd->mr_xa);
		xa_destroy(&sd->qp_xa);
		ib_dealloc_device(&sd->ibdev);
		return ERR_PTR(err);
	}
	return sd;
}

/* After ib_unregister_device and once no work item of sib_wq runs. */
static void sib_dev_free(struct sib_dev *sd)
{
	sib_xmit_purge(sd);
	WARN_ON(!list_empty(&sd->mcast_list));
	WARN_ON(!xa_empty(&sd->mr_xa));
	WARN_ON(!xa_empty(&sd->qp_xa));
	ida_destroy(&sd->qpn_ida);
	xa_destroy(&sd->mr_xa);
	xa_destroy(&sd->qp_xa);
	ib_dealloc_device(&sd->ibdev);
}

/*
 * Unload, and a failed load: the cable is cut first (no delivery reaches a
 * device any more), then every device is unregistered (the core destroys
 * their QPs: no post_send any more), then the work items are drained, and
 * only then is anything freed.
 */
static void sib_teardown(void)
{
	unsigned long flags;
	int i;

	spin_lock(&sib_cable_lock);
	for (i = 0; i < SIB_NDEV; i++)
		if (sib_devs[i])
			sib_devs[i]->peer = NULL;
	memset(sib_sw.ca, 0, sizeof(sib_sw.ca));
	spin_unlock(&sib_cable_lock);
	/* No event after this one: the core is about to forget the device. */
	for (i = 0; i < SIB_NDEV; i++) {
		if (!sib_devs[i])
			continue;
		spin_lock_irqsave(&sib_devs[i]->port.lock, flags);
		sib_devs[i]->port.dying = true;
		spin_unlock_irqrestore(&sib_devs[i]->port.lock, flags);
		cancel_work_sync(&sib_devs[i]->event_work);
	}
	for (i = SIB_NDEV - 1; i >= 0; i--)
		if (sib_devs[i])
			ib_unregister_device(&sib_devs[i]->ibdev);
	flush_workqueue(sib_wq);
	for (i = SIB_NDEV - 1; i >= 0; i--) {
		if (sib_devs[i])
			sib_dev_free(sib_devs[i]);
		sib_devs[i] = NULL;
	}
	destroy_workqueue(sib_wq);
}

static int __init sib_init(void)
{
	int i, err;

	if (!cable) {	/* a load parameter cable=0: plugged at load all the same */
		pr_info("sib: cable=0 at load is ignored: plugged\n");
		cable = true;
	}

	sib_sw_init();
	sib_wq = alloc_workqueue("sib", WQ_UNBOUND, 0);
	if (!sib_wq)
		return -ENOMEM;
	mutex_lock(&sib_cable_mutex);
	for (i = 0; i < SIB_NDEV; i++) {
		sib_devs[i] = sib_dev_create(i);
		if (IS_ERR(sib_devs[i])) {
			err = PTR_ERR(sib_devs[i]);
			sib_devs[i] = NULL;
			pr_err("sib: device %d: ib_register_device: %d\n", i, err);
			sib_teardown();
			mutex_unlock(&sib_cable_mutex);
			return err;
		}
	}
	/* The cable between the two ports, or through the switch. */
	spin_lock(&sib_cable_lock);
	if (sib_switch_on) {
		for (i = 0; i < SIB_NDEV; i++)
			sib_sw.ca[i + 1] = sib_devs[i];
	} else {
		sib_devs[0]->peer = sib_devs[1];
		sib_devs[1]->peer = sib_devs[0];
	}
	spin_unlock(&sib_cable_lock);
	mutex_unlock(&sib_cable_mutex);
	pr_info("sib: %s and %s registered (the UD data path and the SMA%s%s)\n",
		dev_name(&sib_devs[0]->ibdev.dev),
		dev_name(&sib_devs[1]->ibdev.dev),
		fixed_lids ? "; fixed LIDs 1 and 2, ACTIVE" : "",
		sib_switch_on ? "; a switch between them" : "");
	return 0;
}

static void __exit sib_exit(void)
{
	mutex_lock(&sib_cable_mutex);
	sib_teardown();
	mutex_unlock(&sib_cable_mutex);
}

module_init(sib_init);
module_exit(sib_exit);

MODULE_AUTHOR("The rsverbs developers");
MODULE_DESCRIPTION("sib: software InfiniBand HCA for the rsverbs test bed");
MODULE_LICENSE("Dual MIT/GPL");
