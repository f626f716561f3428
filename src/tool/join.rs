//! `rsverbs selftest --join GROUP` (docs/selftest.md): explicit memberships
//! of GROUP through rsverbs (`rsverbs_mcast_join`/`rsverbs_mcast_leave`, the
//! exports' bodies) against librdmacm's `rdma_join_multicast_ex` and
//! `rdma_leave_multicast` on the same port, the sequence that
//! ctest/vm/member.c proves in the test bed; and, when an rsverbs engine
//! joins at IP level (`RSVERBS_MCAST_IPJOIN=1`, `RSVERBS_MCAST_FABRICJOIN=roce`),
//! a join-bearing attach against librdmacm's join and libibverbs' attach.
//!
//! librdmacm is loaded here with dlopen (the command does not depend on it)
//! and initialised before the run ([`RdmaCm::open`]: its event channel and a
//! trial bind per port), since it keeps the devices it opened open for the
//! process's life (cma.c `ucma_init_device`): the run's fd check is then
//! rsverbs' own.
//!
//! Each step's answer: the value, `errno` when it failed (0 on success:
//! librdmacm's internal calls may leave it changed), and on RoCE one byte,
//! whether the port's netdev is a member of GROUP in /proc/net/igmp after
//! the step. On InfiniBand the SA's records are not read: `saquery -m`
//! shows them.

use crate::ffi::Device;
use crate::gids::Port;
use crate::net;
use crate::report::{Answer, Case};
use crate::selftest::{Mcast, SENTINEL};
use core::ffi::{CStr, c_int, c_void};
use core::net::Ipv4Addr;
use rsverbs::abi::{IBV_GID_TYPE_IB, IBV_GID_TYPE_ROCE_V2, ibv_context, ibv_gid, ibv_qp};
use rsverbs::error::{errno, set_errno};
use rsverbs::mgid::Mgid;

/// librdmacm's `struct rdma_event_channel` (rdma_cma.h): its fd first.
#[repr(C)]
struct EventChannel {
    fd: c_int,
}

/// The head of `struct rdma_cm_event` (rdma_cma.h).
#[repr(C)]
struct EventHead {
    id: *mut c_void,
    listen_id: *mut c_void,
    event: c_int,
    status: c_int,
}

/// The head of `struct rdma_cm_id` (rdma_cma.h): the device's context.
#[repr(C)]
struct IdHead {
    verbs: *mut ibv_context,
}

/// `struct rdma_cm_join_mc_attr_ex` (rdma_cma.h).
#[repr(C)]
struct JoinAttrEx {
    comp_mask: u32,
    join_flags: u32,
    addr: *const libc::sockaddr,
}

/// rdma_cma.h: `RDMA_PS_UDP`, `RDMA_CM_EVENT_MULTICAST_JOIN`,
/// `RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS`, and
/// the join flags (rsverbs_mcast_join(3) takes the same values).
const PS_UDP: c_int = 0x0111;
const EVENT_MULTICAST_JOIN: c_int = 12;
const JOIN_ATTR_ADDRESS_AND_FLAGS: u32 = 0b11;
const FULL: c_int = 0;
const SENDONLY: c_int = 1;
const RESERVED: c_int = 2;
/// How long a join's event is waited for (member.c's 5 s).
const JOIN_WAIT_MS: c_int = 5000;

type CreateChannel = unsafe extern "C" fn() -> *mut EventChannel;
type DestroyChannel = unsafe extern "C" fn(*mut EventChannel);
type CreateId = unsafe extern "C" fn(*mut EventChannel, *mut *mut c_void, *mut c_void, c_int) -> c_int;
type DestroyId = unsafe extern "C" fn(*mut c_void) -> c_int;
type BindAddr = unsafe extern "C" fn(*mut c_void, *const libc::sockaddr) -> c_int;
type JoinEx = unsafe extern "C" fn(*mut c_void, *mut JoinAttrEx, *mut c_void) -> c_int;
type Leave = unsafe extern "C" fn(*mut c_void, *const libc::sockaddr) -> c_int;
type GetEvent = unsafe extern "C" fn(*mut EventChannel, *mut *mut EventHead) -> c_int;
type AckEvent = unsafe extern "C" fn(*mut EventHead) -> c_int;

/// librdmacm, loaded, and its event channel.
pub struct RdmaCm {
    handle: *mut c_void,
    ch: *mut EventChannel,
    destroy_channel: DestroyChannel,
    create_id: CreateId,
    destroy_id: DestroyId,
    bind_addr: BindAddr,
    join_ex: JoinEx,
    leave: Leave,
    get_event: GetEvent,
    ack_event: AckEvent,
}

impl Drop for RdmaCm {
    fn drop(&mut self) {
        // SAFETY: the channel is ours, with no ID left on it; the handle came from dlopen.
        unsafe {
            if !self.ch.is_null() {
                (self.destroy_channel)(self.ch);
            }
            libc::dlclose(self.handle);
        }
    }
}

fn sockaddr(a: Ipv4Addr) -> libc::sockaddr_in {
    // SAFETY: sockaddr_in is plain data.
    let mut s: libc::sockaddr_in = unsafe { core::mem::zeroed() };
    s.sin_family = libc::AF_INET as libc::sa_family_t;
    s.sin_addr.s_addr = u32::from_ne_bytes(a.octets());
    s
}

impl RdmaCm {
    /// Loads librdmacm.so.1 and makes its event channel.
    pub fn open() -> Result<RdmaCm, String> {
        // SAFETY: a NUL-terminated name.
        let handle = unsafe { libc::dlopen(c"librdmacm.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err("--join needs librdmacm.so.1 (Debian: librdmacm1), which cannot be loaded".into());
        }
        let sym = |name: &CStr| -> Result<*mut c_void, String> {
            // SAFETY: a live handle and a NUL-terminated name.
            let p = unsafe { libc::dlsym(handle, name.as_ptr()) };
            if p.is_null() { Err(format!("librdmacm.so.1 has no {}", name.to_string_lossy())) } else { Ok(p) }
        };
        let found = (|| {
            Ok::<_, String>((
                sym(c"rdma_create_event_channel")?,
                sym(c"rdma_destroy_event_channel")?,
                sym(c"rdma_create_id")?,
                sym(c"rdma_destroy_id")?,
                sym(c"rdma_bind_addr")?,
                sym(c"rdma_join_multicast_ex")?,
                sym(c"rdma_leave_multicast")?,
                sym(c"rdma_get_cm_event")?,
                sym(c"rdma_ack_cm_event")?,
            ))
        })();
        let (cc, dc, ci, di, ba, je, lv, ge, ae) = match found {
            Ok(f) => f,
            Err(e) => {
                // SAFETY: the handle came from dlopen.
                unsafe { libc::dlclose(handle) };
                return Err(e);
            }
        };
        // SAFETY: each symbol is librdmacm's function of that name, whose
        // prototype (rdma_cma.h) is the type it becomes.
        let mut cm = unsafe {
            use core::mem::transmute as t;
            RdmaCm {
                handle,
                ch: core::ptr::null_mut(),
                destroy_channel: t::<*mut c_void, DestroyChannel>(dc),
                create_id: t::<*mut c_void, CreateId>(ci),
                destroy_id: t::<*mut c_void, DestroyId>(di),
                bind_addr: t::<*mut c_void, BindAddr>(ba),
                join_ex: t::<*mut c_void, JoinEx>(je),
                leave: t::<*mut c_void, Leave>(lv),
                get_event: t::<*mut c_void, GetEvent>(ge),
                ack_event: t::<*mut c_void, AckEvent>(ae),
            }
        };
        // SAFETY: as above.
        cm.ch = unsafe { core::mem::transmute::<*mut c_void, CreateChannel>(cc)() };
        if cm.ch.is_null() {
            return Err(format!("rdma_create_event_channel: {} (is rdma_ucm loaded?)", std::io::Error::last_os_error()));
        }
        Ok(cm)
    }

    /// A UDP ID bound to `addr`, and the device it bound to.
    fn bound_id(&self, addr: Ipv4Addr) -> Result<(*mut c_void, *mut ibv_context), String> {
        let mut id = core::ptr::null_mut();
        // SAFETY: a live channel; id is written on success.
        if unsafe { (self.create_id)(self.ch, &mut id, core::ptr::null_mut(), PS_UDP) } != 0 {
            return Err(format!("rdma_create_id: {}", std::io::Error::last_os_error()));
        }
        let sa = sockaddr(addr);
        // SAFETY: a live ID and a sockaddr_in.
        if unsafe { (self.bind_addr)(id, (&sa as *const libc::sockaddr_in).cast()) } != 0 {
            let e = std::io::Error::last_os_error();
            // SAFETY: our ID, no event pending.
            unsafe { (self.destroy_id)(id) };
            return Err(format!("rdma_bind_addr {addr}: {e}"));
        }
        // SAFETY: a bound ID's head names its device's context.
        let verbs = unsafe { (*id.cast::<IdHead>()).verbs };
        Ok((id, verbs))
    }

    /// The join's event, waited for at most [`JOIN_WAIT_MS`]: 0, or -1 with
    /// errno the event's status (member.c `cm_wait`).
    fn wait(&self) -> c_int {
        // SAFETY: a live channel.
        let mut p = libc::pollfd { fd: unsafe { (*self.ch).fd }, events: libc::POLLIN, revents: 0 };
        // SAFETY: one pollfd.
        if unsafe { libc::poll(&mut p, 1, JOIN_WAIT_MS) } != 1 {
            set_errno(libc::ETIMEDOUT);
            return -1;
        }
        let mut e = core::ptr::null_mut();
        // SAFETY: a live channel; e is written on success.
        if unsafe { (self.get_event)(self.ch, &mut e) } != 0 {
            return -1;
        }
        // SAFETY: librdmacm's event, acknowledged once.
        let st = unsafe {
            let st = if (*e).event == EVENT_MULTICAST_JOIN { 0 } else if (*e).status < 0 { -(*e).status } else { libc::EIO };
            (self.ack_event)(e);
            st
        };
        set_errno(st);
        if st == 0 { 0 } else { -1 }
    }
}

/// What a port needs for the join cases, found before the run.
pub struct Plan {
    /// The address librdmacm's IDs bind to: the port's netdev's IPv4.
    addr: Ipv4Addr,
    /// The netdev whose /proc/net/igmp membership each step shows (RoCE).
    netdev: Option<String>,
    ib: bool,
}

/// The port's IPv4 address and netdev: its first IPv4-mapped GID on RoCE
/// (the address is the netdev's); on InfiniBand the IPoIB netdev whose
/// hardware address ends with the port's GID, and its first IPv4 address.
/// The address must bind, through librdmacm, to this very device.
pub fn plan(cm: &RdmaCm, d: &Device, p: &Port) -> Result<Plan, String> {
    let ib = p.info.link_layer != crate::ffi::LINK_LAYER_ETHERNET;
    let (addr, netdev) = if ib {
        let gid = p.table.slots.iter().find_map(|s| match s {
            crate::table::Slot::Gid(g) => Some(g.raw),
            _ => None,
        });
        let nd = gid.and_then(|g| crate::ib::ipoib_netdevs(&g).into_iter().next()).ok_or("no IPoIB netdev of this port (ib_ipoib; its hardware address ends with the port GID)")?;
        let a = crate::ib::ipv4_addrs(&nd).into_iter().next().ok_or_else(|| format!("the IPoIB netdev {nd} has no IPv4 address (rdma_cm binds by one)"))?;
        (a, Some(nd))
    } else {
        p.table
            .slots
            .iter()
            .find_map(|s| match s {
                crate::table::Slot::Gid(g) if g.gid_type == IBV_GID_TYPE_ROCE_V2 => crate::table::v4_mapped(&g.raw).map(|a| (a, net::name(g.ifindex))),
                _ => None,
            })
            .ok_or("no IPv4 address in the port's GID table (rdma_cm binds by one)")?
    };
    let (id, verbs) = cm.bound_id(addr)?;
    // SAFETY: our ID, no event pending.
    unsafe { (cm.destroy_id)(id) };
    // SAFETY: librdmacm's context of a live device.
    let bound = unsafe { crate::ffi::context_device_name(verbs) };
    if bound != d.name {
        return Err(format!("{addr} binds to {bound} through rdma_cm, not to {}", d.name));
    }
    Ok(Plan { addr, netdev, ib })
}

/// One library's way to join and leave.
#[derive(Clone, Copy)]
enum Side {
    RdmaCm,
    Rsverbs,
}

/// The steps of the sequence: (name, join or leave, flags). member.c `seq`.
const SEQ: [(&str, bool, c_int); 9] = [
    ("leave of what is not joined", false, FULL),
    ("join with bad flags (2)", true, RESERVED),
    ("join send-only", true, SENDONLY),
    ("join full beside it", true, FULL),
    ("leave send-only (the full member stays)", false, SENDONLY),
    ("leave full", false, FULL),
    ("leave send-only again", false, SENDONLY),
    ("join send-only alone", true, SENDONLY),
    ("leave send-only alone", false, SENDONLY),
];

/// The join cases on one port: the sequence, each step a case of its own
/// (librdmacm's run first, then rsverbs'), and the join-bearing attach
/// when an engine is on. `qp` is the command's own QP on the device.
/// `rdma_core` is libibverbs' attach and detach.
pub fn cases(cm: &RdmaCm, plan: &Plan, ctx: *mut ibv_context, port: u8, group: Ipv4Addr, qp: Option<*mut ibv_qp>, rdma_core: (Mcast, Mcast)) -> (Vec<Case>, Vec<String>) {
    let mut notes = Vec::new();
    let mut mgid = Mgid::for_group(group.into(), if plan.ib { IBV_GID_TYPE_IB } else { IBV_GID_TYPE_ROCE_V2 }).map_or([0; 16], |m| m.0);
    // On InfiniBand the scope and P_Key of the IPoIB netdev's broadcast
    // group, as rdma_cm's (ib.rs mgid_on, cma.c cma_set_mgid).
    if let (true, Some(b)) = (plan.ib, plan.netdev.as_deref().and_then(crate::ib::broadcast)) {
        mgid = crate::ib::mgid_on(mgid, &b);
    }
    let member = || -> Vec<u8> {
        match &plan.netdev {
            Some(nd) if !plan.ib => vec![u8::from(net::igmp_joined(&net::read("/proc/net/igmp"), nd, group.octets()))],
            _ => Vec::new(),
        }
    };
    let answer = |ret: c_int| -> Answer {
        let e = errno();
        Answer { ret: i64::from(ret), errno: if ret == 0 { 0 } else { e }, bytes: member() }
    };
    // librdmacm's two IDs, the full member's and the send-only member's
    // (it finds a membership to leave by its address alone: cma.c
    // rdma_leave_multicast), as member.c's.
    let mut ids = [core::ptr::null_mut(); 2];
    for id in &mut ids {
        match cm.bound_id(plan.addr) {
            Ok((i, _)) => *id = i,
            Err(e) => {
                notes.push(format!("--join {group}: skipped: {e}"));
                close_ids(cm, &ids);
                return (Vec::new(), notes);
            }
        }
    }
    let sa = sockaddr(group);
    let sa_ptr = (&sa as *const libc::sockaddr_in).cast::<libc::sockaddr>();
    let g = ibv_gid { raw: mgid };
    let step = |side: Side, join: bool, flags: c_int| -> Answer {
        set_errno(SENTINEL);
        let ret = match side {
            // SAFETY: a live context and a 16-byte MGID. (The test build
            // of ctest/vm/selftest.sh, --cfg rsverbs_selftest_broken, makes
            // every send-only join a full one, so that its guest test sees
            // a join step differ.)
            Side::Rsverbs if join => unsafe { rsverbs::capi::member::rsverbs_mcast_join(ctx, port, &g, if cfg!(rsverbs_selftest_broken) && flags == SENDONLY { FULL } else { flags }) },
            // SAFETY: as above.
            Side::Rsverbs => unsafe { rsverbs::capi::member::rsverbs_mcast_leave(ctx, port, &g, flags) },
            Side::RdmaCm => {
                let id = ids[usize::from(flags == SENDONLY)];
                if join {
                    let mut attr = JoinAttrEx { comp_mask: JOIN_ATTR_ADDRESS_AND_FLAGS, join_flags: flags as u32, addr: sa_ptr };
                    // SAFETY: a bound ID, a filled attr.
                    if unsafe { (cm.join_ex)(id, &mut attr, core::ptr::null_mut()) } != 0 { -1 } else { cm.wait() }
                } else {
                    // SAFETY: a bound ID and a sockaddr_in.
                    unsafe { (cm.leave)(id, sa_ptr) }
                }
            }
        };
        answer(ret)
    };
    let mut out = Vec::new();
    let by_rdma_cm: Vec<Answer> = SEQ.iter().map(|&(_, join, flags)| step(Side::RdmaCm, join, flags)).collect();
    let by_rsverbs: Vec<Answer> = SEQ.iter().map(|&(_, join, flags)| step(Side::Rsverbs, join, flags)).collect();
    for (i, (a, b)) in by_rdma_cm.into_iter().zip(by_rsverbs).enumerate() {
        out.push(Case { name: format!("--join {group}: {}", SEQ[i].0), rdma_core: vec![a], rsverbs: vec![b] });
    }
    // The join-bearing attach: librdmacm's join, then libibverbs' attach,
    // against rsverbs' attach with its IP-level engine on (RoCE only).
    match (ip_level_engine(), qp, plan.ib) {
        (true, Some(qp), false) => {
            let attach = |side: Side, on: bool| -> Answer {
                set_errno(SENTINEL);
                let ret = match side {
                    Side::RdmaCm if on => {
                        let mut attr = JoinAttrEx { comp_mask: JOIN_ATTR_ADDRESS_AND_FLAGS, join_flags: FULL as u32, addr: sa_ptr };
                        // SAFETY: as in step.
                        let j = if unsafe { (cm.join_ex)(ids[0], &mut attr, core::ptr::null_mut()) } != 0 { -1 } else { cm.wait() };
                        // SAFETY: libibverbs' attach of our QP and a 16-byte GID.
                        if j != 0 { j } else { unsafe { (rdma_core.0)(qp, &g, 0) } }
                    }
                    Side::RdmaCm => {
                        // SAFETY: libibverbs' detach of our QP, attached above.
                        let d = unsafe { (rdma_core.1)(qp, &g, 0) };
                        // SAFETY: the bound ID and a sockaddr_in.
                        let l = unsafe { (cm.leave)(ids[0], sa_ptr) };
                        if d != 0 { d } else { l }
                    }
                    // SAFETY: our QP and a 16-byte GID.
                    Side::Rsverbs if on => unsafe { rsverbs::capi::rsverbs_attach_mcast(qp, &g, 0) },
                    // SAFETY: as above.
                    Side::Rsverbs => unsafe { rsverbs::capi::rsverbs_detach_mcast(qp, &g, 0) },
                };
                answer(ret)
            };
            let a = vec![attach(Side::RdmaCm, true), attach(Side::RdmaCm, false)];
            let b = vec![attach(Side::Rsverbs, true), attach(Side::Rsverbs, false)];
            out.push(Case { name: format!("--join {group}: an attach that joins, then its detach (rdma_join_multicast_ex and ibv_attach_mcast)"), rdma_core: a, rsverbs: b });
        }
        (false, _, false) => notes.push("--join: the join-bearing attach not compared: rsverbs' attach joins at IP level only with RSVERBS_MCAST_IPJOIN=1 or RSVERBS_MCAST_FABRICJOIN=roce".into()),
        (_, _, true) => notes.push("--join: on InfiniBand the join-bearing attach is not compared (its MLID is the SA's, from the join event), nor the SA's records read (saquery -m shows them)".into()),
        (true, None, false) => notes.push("--join: the join-bearing attach not compared: no QP of the command's own on this device".into()),
    }
    close_ids(cm, &ids);
    // What both libraries answered, step by step, where they agree (a
    // difference is reported with both answers).
    let mut shown: Vec<String> = out.iter().filter(|c| c.identical()).map(|c| format!("{}: {}", c.name, c.rdma_core.iter().map(step_text).collect::<Vec<_>>().join(", then "))).collect();
    shown.append(&mut notes);
    (out, shown)
}

/// "ret=R errno=E member=M" (member on RoCE only).
fn step_text(a: &Answer) -> String {
    let mut t = format!("ret={} errno={}", a.ret, crate::report::errno_text(a.errno));
    if let Some(m) = a.bytes.first() {
        t.push_str(&format!(" member={m}"));
    }
    t
}

fn close_ids(cm: &RdmaCm, ids: &[*mut c_void]) {
    for &id in ids.iter().filter(|i| !i.is_null()) {
        // SAFETY: our ID; a leave was made for every join of the sequence.
        unsafe { (cm.destroy_id)(id) };
    }
}

/// Whether rsverbs' attach on a RoCE port joins at IP level: as the
/// library reads its switches (src/ipjoin: `RSVERBS_MCAST_IPJOIN=1`, or
/// `RSVERBS_MCAST_FABRICJOIN=roce`).
fn ip_level_engine() -> bool {
    let v = |k: &str| std::env::var_os(k).map(|v| v.to_string_lossy().into_owned());
    v("RSVERBS_MCAST_IPJOIN").as_deref() == Some("1") || v("RSVERBS_MCAST_FABRICJOIN").as_deref() == Some("roce")
}
