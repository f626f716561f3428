//! `rsverbs selftest` (docs/selftest.md): rdma-core's answers against
//! rsverbs' on this host's own devices, in one process.
//!
//! rdma-core's five verbs are libibverbs' own definitions, found by their
//! versioned names (`dlvsym` on the handle of the loaded libibverbs.so.1)
//! so that a preload of librsverbs.so.1 cannot stand in for them; rsverbs'
//! are the bodies of the library's exports (`rsverbs::capi`), linked into
//! this command. Each case calls both the same way: `errno` seeded with
//! [`SENTINEL`], the caller's buffer filled with [`PATTERN`], and compares
//! the value, `errno` and every byte of the buffer (report.rs).
//!
//! Attach and detach run on a PD, CQ and QPs of the command's own, with
//! groups in 239.255.77.0/24 and ff1e::77:0/112 (a fresh group for each
//! case and each library, so that neither's state affects the other's);
//! whatever a case leaves attached is detached after it, and the objects
//! are destroyed on every way out (`Objects`' Drop). SIGINT, SIGTERM and
//! SIGHUP set a flag that is read between cases: the run stops there and
//! the teardown is the normal one.

use crate::ffi::{Device, LINK_LAYER_ETHERNET};
use crate::report::{Answer, Case, DeviceReport, EXIT_ENV, Fds, Report, Section};
use core::ffi::{CStr, c_char, c_int, c_void};
use rsverbs::abi::{ibv_context, ibv_gid, ibv_gid_entry, ibv_qp};
use rsverbs::error::{errno, set_errno};
use crate::join;
use core::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// `errno` before every call: a value no verb sets, so "untouched" shows.
pub const SENTINEL: i32 = 0x5a5a;
/// Every byte of a caller's buffer before a call.
pub const PATTERN: u8 = 0xa5;

type QueryGid = unsafe extern "C" fn(*mut ibv_context, u8, c_int, *mut ibv_gid) -> c_int;
type QueryGidEx = unsafe extern "C" fn(*mut ibv_context, u32, u32, *mut ibv_gid_entry, u32, usize) -> c_int;
type QueryGidTable = unsafe extern "C" fn(*mut ibv_context, *mut ibv_gid_entry, usize, u32, usize) -> isize;
pub type Mcast = unsafe extern "C" fn(*mut ibv_qp, *const ibv_gid, u16) -> c_int;

/// One library's five verbs. `_ibv_query_gid_ex` and `_ibv_query_gid_table`
/// are IBVERBS_1.11 (rdma-core 31): None before it, on both sides.
#[derive(Clone, Copy)]
struct Verbs {
    query_gid: QueryGid,
    query_gid_ex: Option<QueryGidEx>,
    query_gid_table: Option<QueryGidTable>,
    attach: Mcast,
    detach: Mcast,
}

/// rsverbs' side: the exports' bodies.
fn rsverbs_verbs(rdma_core: &Verbs) -> Verbs {
    Verbs {
        query_gid: rsverbs_side_query_gid,
        query_gid_ex: rdma_core.query_gid_ex.map(|_| rsverbs::capi::rsverbs_query_gid_ex as QueryGidEx),
        query_gid_table: rdma_core.query_gid_table.map(|_| rsverbs::capi::rsverbs_query_gid_table as QueryGidTable),
        attach: rsverbs::capi::rsverbs_attach_mcast,
        detach: rsverbs::capi::rsverbs_detach_mcast,
    }
}

#[cfg(not(rsverbs_selftest_broken))]
use rsverbs::capi::rsverbs_query_gid as rsverbs_side_query_gid;

/// The test build's broken library (ctest/vm/selftest.sh, built with
/// `--cfg rsverbs_selftest_broken`, never by make): one errno changed,
/// that of `ibv_query_gid` on port 0, so that the guest test sees the
/// command find a difference and name its case.
///
/// # Safety
/// As `rsverbs_query_gid`'s.
#[cfg(rsverbs_selftest_broken)]
unsafe extern "C" fn rsverbs_side_query_gid(ctx: *mut ibv_context, port: u8, index: c_int, gid: *mut ibv_gid) -> c_int {
    // SAFETY: forwarded.
    let r = unsafe { rsverbs::capi::rsverbs_query_gid(ctx, port, index, gid) };
    if port == 0 {
        set_errno(errno() + 1);
    }
    r
}

/// rdma-core's side: the loaded libibverbs.so.1's own definitions.
struct RdmaCore {
    handle: *mut c_void,
    verbs: Verbs,
    /// The file that defines them (dladdr).
    file: String,
}

impl Drop for RdmaCore {
    fn drop(&mut self) {
        // SAFETY: the handle came from dlopen (RTLD_NOLOAD took a reference).
        unsafe { libc::dlclose(self.handle) };
    }
}

fn lookup(handle: *mut c_void, name: &CStr, version: &CStr) -> Option<*mut c_void> {
    // SAFETY: a live handle and NUL-terminated strings.
    let p = unsafe { libc::dlvsym(handle, name.as_ptr(), version.as_ptr()) };
    (!p.is_null()).then_some(p)
}

impl RdmaCore {
    fn find() -> Result<RdmaCore, String> {
        // SAFETY: NUL-terminated name; RTLD_NOLOAD loads nothing.
        let handle = unsafe { libc::dlopen(c"libibverbs.so.1".as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY) };
        if handle.is_null() {
            return Err("libibverbs.so.1 is not loaded".into());
        }
        let need = |name: &CStr| lookup(handle, name, c"IBVERBS_1.1").ok_or_else(|| format!("libibverbs.so.1 has no {}@IBVERBS_1.1", name.to_string_lossy()));
        let (q, a, d) = match (need(c"ibv_query_gid"), need(c"ibv_attach_mcast"), need(c"ibv_detach_mcast")) {
            (Ok(q), Ok(a), Ok(d)) => (q, a, d),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                // SAFETY: the handle came from dlopen.
                unsafe { libc::dlclose(handle) };
                return Err(e);
            }
        };
        let ex = lookup(handle, c"_ibv_query_gid_ex", c"IBVERBS_1.11");
        let table = lookup(handle, c"_ibv_query_gid_table", c"IBVERBS_1.11");
        // SAFETY: each symbol is the function of that name and version,
        // whose prototype (verbs.h) is the type it becomes.
        let verbs = unsafe {
            Verbs {
                query_gid: core::mem::transmute::<*mut c_void, QueryGid>(q),
                query_gid_ex: ex.map(|p| core::mem::transmute::<*mut c_void, QueryGidEx>(p)),
                query_gid_table: table.map(|p| core::mem::transmute::<*mut c_void, QueryGidTable>(p)),
                attach: core::mem::transmute::<*mut c_void, Mcast>(a),
                detach: core::mem::transmute::<*mut c_void, Mcast>(d),
            }
        };
        // The file itself (libibverbs.so.1.14.44.0), not the soname's link.
        let file = object_of(q).map(|f| std::fs::canonicalize(&f).map_or(f, |p| p.to_string_lossy().into_owned()));
        Ok(RdmaCore { handle, verbs, file: file.unwrap_or_else(|| "?".into()) })
    }
}

/// The file of the loaded object that holds `addr` (dladdr).
fn object_of(addr: *const c_void) -> Option<String> {
    // SAFETY: Dl_info is plain data; dladdr fills it on success.
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    // SAFETY: info is writable.
    if unsafe { libc::dladdr(addr, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr's string is NUL-terminated.
    Some(unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned())
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn stopped() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// SIGINT, SIGTERM, SIGHUP: set the flag (SA_RESTART: a verb in flight
/// completes); the run stops after the case and tears down as usual.
fn catch_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction is valid; the handler only stores to an atomic.
        unsafe {
            let mut sa: libc::sigaction = core::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(c_int) as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, core::ptr::null_mut());
        }
    }
}

/// One call: the buffer filled with the pattern, `errno` seeded, the call,
/// then what it left.
fn call(buf: &mut [u8], f: impl FnOnce(*mut u8) -> i64) -> Answer {
    buf.fill(PATTERN);
    set_errno(SENTINEL);
    let ret = f(buf.as_mut_ptr());
    let errno = errno();
    Answer { ret, errno, bytes: buf.to_vec() }
}

/// The two libraries.
struct Pair {
    rdma_core: Verbs,
    rsverbs: Verbs,
}

impl Pair {
    /// A case of independent calls: the same steps through each library.
    fn case(&self, name: String, mut f: impl FnMut(&Verbs) -> Vec<Answer>) -> Case {
        let rdma_core = f(&self.rdma_core);
        let rsverbs = f(&self.rsverbs);
        Case { name, rdma_core, rsverbs }
    }
}

// ---- GID cases -----------------------------------------------------------

/// Bytes of a GID buffer: the 16 written and 16 after them that must not be.
const GID_BUF: usize = 32;
/// Bytes of an entry buffer: the largest entry_size tried (64) and as many after.
const ENTRY_BUF: usize = 128;
/// The entry sizes tried besides `sizeof(struct ibv_gid_entry)` (32).
const ENTRY_SIZES: [usize; 5] = [0, 16, 31, 33, 64];

fn query_gid(v: &Verbs, ctx: *mut ibv_context, port: u8, index: c_int) -> Answer {
    let mut buf = [0u8; GID_BUF];
    // SAFETY: ctx is open; the buffer is writable for 32 bytes.
    call(&mut buf, |p| i64::from(unsafe { (v.query_gid)(ctx, port, index, p.cast()) }))
}

fn query_gid_ex(f: QueryGidEx, ctx: *mut ibv_context, port: u32, index: u32, flags: u32, entry_size: usize) -> Answer {
    let mut buf = [0u8; ENTRY_BUF];
    // SAFETY: ctx is open; the buffer is writable for ENTRY_BUF >= entry_size bytes.
    call(&mut buf, |p| i64::from(unsafe { f(ctx, port, index, p.cast(), flags, entry_size) }))
}

/// Every index of `port`'s table, then the bad arguments, through
/// `ibv_query_gid` and `_ibv_query_gid_ex`.
fn gid_cases(pair: &Pair, ctx: *mut ibv_context, port: u8, nports: u8, len: i32, out: &mut Vec<Case>) {
    for i in 0..len.max(0) {
        if stopped() {
            return;
        }
        out.push(pair.case(format!("ibv_query_gid port {port} index {i}"), |v| vec![query_gid(v, ctx, port, i)]));
        if pair.rdma_core.query_gid_ex.is_some() {
            out.push(pair.case(format!("_ibv_query_gid_ex port {port} index {i}"), |v| {
                v.query_gid_ex.map(|f| query_gid_ex(f, ctx, port.into(), i as u32, 0, 32)).into_iter().collect()
            }));
        }
    }
    let mut bad_ports = vec![0u8];
    bad_ports.extend(nports.checked_add(1));
    for bp in &bad_ports {
        out.push(pair.case(format!("ibv_query_gid port {bp} (no such port) index 0"), |v| vec![query_gid(v, ctx, *bp, 0)]));
    }
    for bi in [len, -1] {
        out.push(pair.case(format!("ibv_query_gid port {port} index {bi} (out of the table)"), |v| vec![query_gid(v, ctx, port, bi)]));
    }
    if pair.rdma_core.query_gid_ex.is_none() {
        return;
    }
    let mut ex = |name: String, port: u32, index: u32, flags: u32, es: usize| {
        out.push(pair.case(format!("_ibv_query_gid_ex {name}"), |v| v.query_gid_ex.map(|f| query_gid_ex(f, ctx, port, index, flags, es)).into_iter().collect()));
    };
    for bp in bad_ports {
        ex(format!("port {bp} (no such port) index 0"), bp.into(), 0, 0, 32);
    }
    ex(format!("port {port} index {len} (out of the table)"), port.into(), len as u32, 0, 32);
    ex(format!("port {port} index {} (out of the table)", u32::MAX), port.into(), u32::MAX, 0, 32);
    ex(format!("port {port} index 0 flags 1"), port.into(), 0, 1, 32);
    for es in ENTRY_SIZES {
        ex(format!("port {port} index 0 entry_size {es}"), port.into(), 0, 0, es);
    }
}

fn query_gid_table(f: QueryGidTable, ctx: *mut ibv_context, buf: &mut [u8], max_entries: usize, flags: u32, entry_size: usize) -> Answer {
    // SAFETY: ctx is open; buf is writable for more than max_entries * entry_size bytes (the caller sizes it).
    call(buf, |p| unsafe { f(ctx, p.cast(), max_entries, flags, entry_size) } as i64)
}

/// `_ibv_query_gid_table` reads every port at once: its cases are the device's.
/// `total` is the sum of the ports' table lengths, more than the valid entries.
fn table_cases(pair: &Pair, ctx: *mut ibv_context, total: usize, out: &mut Vec<Case>) {
    if pair.rdma_core.query_gid_table.is_none() {
        return;
    }
    let mut buf = vec![0u8; (total + 2) * 64 + 64];
    let mut run = |name: String, max: usize, flags: u32, es: usize, out: &mut Vec<Case>| -> i64 {
        let c = pair.case(format!("_ibv_query_gid_table {name}"), |v| v.query_gid_table.map(|f| query_gid_table(f, ctx, &mut buf, max, flags, es)).into_iter().collect());
        let n = c.rdma_core.first().map_or(-1, |a| a.ret);
        out.push(c);
        n
    };
    let n = run(format!("max_entries {total} (every table's length)"), total, 0, 32, out);
    let n = usize::try_from(n).unwrap_or(0);
    let mut sizes = vec![0, 1, n.saturating_sub(1), n, n + 1];
    sizes.dedup();
    for m in sizes {
        if stopped() {
            return;
        }
        run(format!("max_entries {m} ({n} valid)"), m, 0, 32, out);
    }
    for es in ENTRY_SIZES {
        run(format!("max_entries {n} entry_size {es}"), n, 0, es, out);
    }
    run(format!("max_entries {n} flags 1"), n, 1, 32, out);
}

// ---- attach and detach ------------------------------------------------------

#[repr(C)]
struct QpCap {
    max_send_wr: u32,
    max_recv_wr: u32,
    max_send_sge: u32,
    max_recv_sge: u32,
    max_inline_data: u32,
}

/// `struct ibv_qp_init_attr` (verbs.h), its tail padding a field of its
/// own so that it is zero (docs/rdma-core-releases.md D5: rdma-core 31 to
/// 37 read it as the comp_mask of an `ibv_qp_init_attr_ex`).
#[repr(C)]
struct QpInitAttr {
    qp_context: *mut c_void,
    send_cq: *mut c_void,
    recv_cq: *mut c_void,
    srq: *mut c_void,
    cap: QpCap,
    qp_type: c_int,
    sq_sig_all: c_int,
    padding: u32,
}

/// The CQ's size, as ctest/vm/conform.c's.
const CQE: c_int = 64;
const QPT_RC: c_int = 2;
const QPT_UD: c_int = 4;

#[link(name = "ibverbs")]
unsafe extern "C" {
    fn ibv_alloc_pd(ctx: *mut ibv_context) -> *mut c_void;
    fn ibv_dealloc_pd(pd: *mut c_void) -> c_int;
    fn ibv_create_cq(ctx: *mut ibv_context, cqe: c_int, cq_context: *mut c_void, channel: *mut c_void, vector: c_int) -> *mut c_void;
    fn ibv_destroy_cq(cq: *mut c_void) -> c_int;
    fn ibv_create_qp(pd: *mut c_void, attr: *mut QpInitAttr) -> *mut ibv_qp;
    fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int;
}

/// The command's own PD, CQ and QPs on one device, and what is attached
/// now; Drop detaches it all (rdma-core's detach) and destroys them.
struct Objects {
    pd: *mut c_void,
    cq: *mut c_void,
    ud: *mut ibv_qp,
    /// An RC QP, where the provider makes one: attach must refuse it.
    rc: Option<*mut ibv_qp>,
    attached: Vec<(*mut ibv_qp, [u8; 16], u16)>,
    /// The QPs of the QPs-per-group limit (--limits).
    more: Vec<*mut ibv_qp>,
    detach: Mcast,
    /// The provider made no UD QP (siw: iWARP has none): why, and the
    /// cases run on the RC QP instead (a provider without a multicast op
    /// answers before any QP type matters; one with it refuses the RC QP).
    no_ud: Option<String>,
}

/// Why the objects could not be made, in words an operator acts on.
fn refusal(what: &str, err: std::io::Error) -> String {
    let hint = match err.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => ": no permission to create RDMA objects (the uverbs device's permissions, or run as root)",
        Some(libc::ENOMEM) => ": out of memory, or the locked-memory limit is too low (ulimit -l)",
        _ => "",
    };
    format!("attach and detach cases: {what}: {err}{hint}")
}

impl Objects {
    fn new(ctx: *mut ibv_context, detach: Mcast) -> Result<Objects, String> {
        let mut o = Objects { pd: core::ptr::null_mut(), cq: core::ptr::null_mut(), ud: core::ptr::null_mut(), rc: None, attached: Vec::new(), more: Vec::new(), detach, no_ud: None };
        // SAFETY: ctx is open.
        o.pd = unsafe { ibv_alloc_pd(ctx) };
        if o.pd.is_null() {
            return Err(refusal("ibv_alloc_pd", std::io::Error::last_os_error()));
        }
        // SAFETY: ctx is open.
        o.cq = unsafe { ibv_create_cq(ctx, CQE, core::ptr::null_mut(), core::ptr::null_mut(), 0) };
        if o.cq.is_null() {
            return Err(refusal("ibv_create_cq", std::io::Error::last_os_error()));
        }
        o.ud = o.qp(QPT_UD);
        if o.ud.is_null() {
            let err = std::io::Error::last_os_error();
            o.ud = o.qp(QPT_RC);
            if o.ud.is_null() {
                return Err(refusal("ibv_create_qp (UD)", err));
            }
            o.no_ud = Some(format!("the provider made no UD QP (ibv_create_qp: {err}): the attach and detach cases ran on an RC QP"));
            return Ok(o);
        }
        let rc = o.qp(QPT_RC);
        o.rc = (!rc.is_null()).then_some(rc);
        Ok(o)
    }

    fn qp(&self, qp_type: c_int) -> *mut ibv_qp {
        let cap = QpCap { max_send_wr: 1, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
        let mut attr = QpInitAttr { qp_context: core::ptr::null_mut(), send_cq: self.cq, recv_cq: self.cq, srq: core::ptr::null_mut(), cap, qp_type, sq_sig_all: 0, padding: 0 };
        // SAFETY: a live PD and CQ, a filled attr.
        unsafe { ibv_create_qp(self.pd, &mut attr) }
    }

    /// Detaches what is still attached (a case whose detach failed).
    fn release(&mut self) {
        for (qp, raw, lid) in core::mem::take(&mut self.attached) {
            let g = ibv_gid { raw };
            // SAFETY: a live QP of ours and a 16-byte GID.
            unsafe { (self.detach)(qp, &g, lid) };
        }
    }
}

impl Drop for Objects {
    fn drop(&mut self) {
        self.release();
        // SAFETY: each object is ours, live, destroyed once, QPs before the CQ and PD.
        unsafe {
            for qp in [Some(self.ud), self.rc].into_iter().flatten().chain(self.more.iter().copied()).filter(|q| !q.is_null()) {
                ibv_destroy_qp(qp);
            }
            if !self.cq.is_null() {
                ibv_destroy_cq(self.cq);
            }
            if !self.pd.is_null() {
                ibv_dealloc_pd(self.pd);
            }
        }
    }
}

/// The groups of a case: a fresh one per case and library.
#[derive(Clone, Copy)]
enum G {
    /// ::ffff:239.255.77.N
    V4,
    /// ff1e::77:N
    V6,
    Fixed([u8; 16]),
}

#[derive(Clone, Copy)]
enum Lid {
    /// 0 on RoCE; a multicast LID (0xC000 + N) on InfiniBand.
    Valid,
    Fixed(u16),
}

#[derive(Clone, Copy)]
enum Qp {
    Ud,
    Rc,
}

/// One step: attach (true) or detach, a group, a LID, a QP.
type Step = (bool, G, Lid, Qp);

pub fn v4_group(n: u8) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&[239, 255, 77, n]);
    g
}

pub fn v6_group(n: u8) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[0] = 0xff;
    g[1] = 0x1e;
    g[13] = 0x77;
    g[15] = n;
    g
}

/// The cases of attach and detach: (name, steps).
fn mcast_script(rc: bool) -> Vec<(String, Vec<Step>)> {
    use G::*;
    let (a, d) = (true, false);
    let (v, u) = (Lid::Valid, Qp::Ud);
    let mut s = vec![
        ("attach and detach ::ffff:239.255.77.N".to_string(), vec![(a, V4, v, u), (d, V4, v, u)]),
        ("attach and detach ff1e::77:N".to_string(), vec![(a, V6, v, u), (d, V6, v, u)]),
        ("attach twice, detach twice".to_string(), vec![(a, V6, v, u), (a, V6, v, u), (d, V6, v, u), (d, V6, v, u)]),
        ("detach of a group not attached".to_string(), vec![(d, V6, v, u)]),
    ];
    let nonmc: [(&str, [u8; 16]); 3] = [("fe80::1", [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]), ("::ffff:192.0.2.1", [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1]), ("::", [0; 16])];
    for (name, g) in nonmc {
        s.push((format!("attach and detach {name} (not multicast)"), vec![(a, Fixed(g), v, u), (d, Fixed(g), v, u)]));
    }
    for lid in [0xbfffu16, 0xc000, 0xfffe, 0xffff] {
        s.push((format!("attach and detach ff1e::77:N with LID {lid:#06x}"), vec![(a, V6, Lid::Fixed(lid), u), (d, V6, Lid::Fixed(lid), u)]));
    }
    if rc {
        s.push(("attach and detach on an RC QP".to_string(), vec![(a, V6, v, Qp::Rc), (d, V6, v, Qp::Rc)]));
    }
    s
}

/// Runs the script on one port's objects; `next` numbers the groups.
fn mcast_cases(pair: &Pair, o: &mut Objects, ib: bool, next: &mut u8, out: &mut Vec<Case>) {
    for (name, steps) in mcast_script(o.rc.is_some()) {
        if stopped() {
            return;
        }
        let mut side = |v: &Verbs| -> Vec<Answer> {
            *next = next.wrapping_add(1).max(1);
            let n = *next;
            let answers = steps
                .iter()
                .map(|&(attach, g, lid, qp)| {
                    let raw = match g {
                        G::V4 => v4_group(n),
                        G::V6 => v6_group(n),
                        G::Fixed(raw) => raw,
                    };
                    let lid = match lid {
                        Lid::Valid if ib => 0xc000 | u16::from(n),
                        Lid::Valid => 0,
                        Lid::Fixed(l) => l,
                    };
                    let qp = match qp {
                        Qp::Ud => o.ud,
                        Qp::Rc => o.rc.unwrap_or(o.ud),
                    };
                    let g = ibv_gid { raw };
                    let f = if attach { v.attach } else { v.detach };
                    // SAFETY: a live QP of ours and a 16-byte GID.
                    let a = call(&mut [], |_| i64::from(unsafe { f(qp, &g, lid) }));
                    if a.ret == 0 {
                        let key = (qp, raw, lid);
                        if attach && !o.attached.contains(&key) {
                            o.attached.push(key);
                        } else if !attach {
                            o.attached.retain(|k| *k != key);
                        }
                    }
                    a
                })
                .collect();
            o.release();
            answers
        };
        let rdma_core = side(&pair.rdma_core);
        let rsverbs = side(&pair.rsverbs);
        out.push(Case { name, rdma_core, rsverbs });
    }
}

// ---- the device's limits (--limits) ----------------------------------------------

/// At most this many groups on one QP: the whole of ff1e::77:0/112 (a
/// device whose max_mcast_grp is larger is not driven to its refusal).
const MAX_LIMIT_GROUPS: usize = 0xffff;
/// At most this many QPs made for the QPs-per-group limit.
const MAX_LIMIT_QPS: usize = 1024;

/// ff1e::77:N with a 16-bit N (the limits' groups).
fn v6_group_wide(n: u16) -> [u8; 16] {
    let mut g = v6_group(0);
    g[14..].copy_from_slice(&n.to_be_bytes());
    g
}

/// A progress line on stderr, when it is a terminal, every 1,024 attaches.
fn progress(what: &str, n: usize) {
    // SAFETY: isatty has no preconditions.
    if n.is_multiple_of(1024) && unsafe { libc::isatty(2) } == 1 {
        eprint!("\rrsverbs: selftest --limits: {what}: {n} attached ");
    }
}

/// Attaches `(qp, group)` for each of `targets` in turn until one is
/// refused, then detaches what was attached, as ctest/vm/conform.c's limit
/// cases do. Its answers, as steps: 1 the number attached before the refusal
/// (ret; errno the sentinel), 2 the refusal (ret 0 and the sentinel when
/// none came within `targets`), 3 the number detached again (errno that of
/// the last detach refused, else the sentinel).
fn until_refused(v: &Verbs, o: &mut Objects, targets: &[(*mut ibv_qp, [u8; 16])], lid: u16, what: &str) -> Vec<Answer> {
    let mut ok = 0usize;
    let mut refusal = Answer { ret: 0, errno: SENTINEL, bytes: Vec::new() };
    for &(qp, raw) in targets {
        if stopped() {
            break;
        }
        let g = ibv_gid { raw };
        // SAFETY: a live QP of ours and a 16-byte GID.
        let a = call(&mut [], |_| i64::from(unsafe { (v.attach)(qp, &g, lid) }));
        if a.ret != 0 {
            refusal = a;
            break;
        }
        o.attached.push((qp, raw, lid));
        ok += 1;
        progress(what, ok);
    }
    let (mut detached, mut last_err) = (0i64, SENTINEL);
    for (qp, raw, lid) in core::mem::take(&mut o.attached) {
        let g = ibv_gid { raw };
        // SAFETY: as above.
        let a = call(&mut [], |_| i64::from(unsafe { (v.detach)(qp, &g, lid) }));
        if a.ret == 0 {
            detached += 1;
        } else {
            last_err = a.errno;
        }
    }
    // SAFETY: isatty has no preconditions.
    if ok >= 1024 && unsafe { libc::isatty(2) } == 1 {
        eprint!("\r\x1b[K");
    }
    vec![Answer { ret: ok as i64, errno: SENTINEL, bytes: Vec::new() }, refusal, Answer { ret: detached, errno: last_err, bytes: Vec::new() }]
}

/// What both libraries found at a limit, when they agree (a difference
/// is reported with both answers instead).
fn reached(what: &str, c: &Case) -> Option<String> {
    let [ok, refusal, detached] = c.rdma_core.as_slice() else { return None };
    let then = if refusal.ret == 0 { "no refusal".to_string() } else { format!("refused: ret={} errno={}", refusal.ret, crate::report::errno_text(refusal.errno)) };
    c.identical().then(|| format!("{what}: {} attached, then {then}; {} detached again", ok.ret, detached.ret))
}

/// The device's multicast limits, each through rdma-core and then rsverbs
/// on the same objects (everything detached between them): groups on one
/// QP up to `max_mcast_grp` + 1, then QPs on one group up to
/// `max_mcast_qp_attach` + 1.
fn limit_cases(pair: &Pair, o: &mut Objects, limits: &crate::ffi::DeviceLimits, lid: u16, s: &mut Section) {
    let grp = usize::try_from(limits.max_mcast_grp).unwrap_or(0);
    let n = (grp + 1).min(MAX_LIMIT_GROUPS);
    let targets: Vec<_> = (1..=n as u16).map(|i| (o.ud, v6_group_wide(i))).collect();
    let name = format!("groups on one QP until refused (max_mcast_grp {grp}, {n} tried)");
    let case = pair.case(name, |v| until_refused(v, o, &targets, lid, "groups on one QP"));
    s.notes.extend(reached("groups on one QP", &case));
    s.cases.push(case);
    if n <= grp {
        s.skipped.push(format!("max_mcast_grp {grp}: only {n} groups tried (ff1e::77:0/112), its refusal not reached"));
    }
    if stopped() {
        return;
    }
    let per = usize::try_from(limits.max_mcast_qp_attach).unwrap_or(0);
    let want = (per + 1).min(MAX_LIMIT_QPS);
    while o.more.len() + 1 < want {
        let qp = o.qp(if o.no_ud.is_some() { QPT_RC } else { QPT_UD });
        if qp.is_null() {
            s.skipped.push(format!("QPs on one group: only {} QPs made ({})", o.more.len() + 1, std::io::Error::last_os_error()));
            break;
        }
        o.more.push(qp);
    }
    let g = v6_group_wide(0xffff);
    let targets: Vec<_> = core::iter::once(o.ud).chain(o.more.iter().copied()).map(|qp| (qp, g)).collect();
    let name = format!("QPs on one group until refused (max_mcast_qp_attach {per}, {} tried)", targets.len());
    let case = pair.case(name, |v| until_refused(v, o, &targets, lid, "QPs on one group"));
    s.notes.extend(reached("QPs on one group", &case));
    s.cases.push(case);
    if targets.len() <= per {
        s.skipped.push(format!("max_mcast_qp_attach {per}: only {} QPs tried, its refusal not reached", targets.len()));
    }
}

// ---- the host's facts ---------------------------------------------------------

fn kernel() -> String {
    // SAFETY: utsname is plain data; uname fills it.
    let mut u: libc::utsname = unsafe { core::mem::zeroed() };
    // SAFETY: u is writable.
    if unsafe { libc::uname(&mut u) } != 0 {
        return "?".into();
    }
    // SAFETY: uname's fields are NUL-terminated.
    unsafe { CStr::from_ptr(u.release.as_ptr() as *const c_char) }.to_string_lossy().into_owned()
}

fn host_facts(rc: &RdmaCore) -> Vec<(&'static str, String)> {
    let release = rsverbs::rdma_core::release::installed().map_or_else(|| "unknown (the file name carries no release)".to_string(), |r| format!("{}.{}", r.major, r.minor));
    let mut h = vec![
        ("kernel", kernel()),
        ("rdma-core", release),
        ("libibverbs", rc.file.clone()),
        ("rsverbs", format!("{} commit {} (its engine, linked into this command)", env!("CARGO_PKG_VERSION"), COMMIT)),
    ];
    if let Ok(p) = std::env::var("LD_PRELOAD") {
        h.push(("LD_PRELOAD", p));
    }
    h
}

/// The source tree's commit the command was built from (build.rs: `git
/// rev-parse`, "-dirty" when its sources differ from the commit), or "unknown" for a build
/// outside a git checkout.
const COMMIT: &str = match option_env!("RSVERBS_COMMIT") {
    Some(c) if !c.is_empty() => c,
    _ => "unknown",
};

/// The process's open file descriptors, each with what it is, from
/// `/proc/self/fd` (the directory's own, open while it is read, left out);
/// None when it cannot be read.
fn open_fds() -> Option<Vec<(i32, String)>> {
    let dir = std::fs::read_dir("/proc/self/fd").ok()?;
    // SAFETY: getpid has no preconditions.
    let own = format!("/proc/{}/fd", unsafe { libc::getpid() });
    let mut fds: Vec<(i32, String)> = dir
        .filter_map(|e| {
            let e = e.ok()?;
            let fd = e.file_name().to_str()?.parse().ok()?;
            let target = std::fs::read_link(e.path()).ok()?.to_string_lossy().into_owned();
            (target != own).then_some((fd, target))
        })
        .collect();
    fds.sort();
    Some(fds)
}

fn sysfs(dev: &str, file: &str) -> Option<String> {
    let s = std::fs::read_to_string(format!("/sys/class/infiniband/{dev}/{file}")).ok()?;
    let s = s.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn device_facts(d: &Device, nports: u8) -> Vec<(&'static str, String)> {
    let driver = std::fs::read_link(format!("/sys/class/infiniband/{}/device/driver", d.name)).ok().and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()));
    // ibv_context_ops.poll_cq (index 11) is the provider's own function.
    // SAFETY: ctx is open; ops is its public, frozen table.
    let poll_cq = unsafe { (*d.ctx).ops[11] };
    let provider = object_of(poll_cq).map(|f| f.rsplit('/').next().unwrap_or(&f).to_string());
    let mut f = vec![("provider", provider.unwrap_or_else(|| "-".into())), ("driver", driver.unwrap_or_else(|| "-".into()))];
    for (k, file) in [("node_type", "node_type"), ("fw_ver", "fw_ver"), ("board_id", "board_id"), ("hca_type", "hca_type"), ("hw_rev", "hw_rev"), ("parent", "parent")] {
        f.push((k, sysfs(&d.name, file).unwrap_or_else(|| "-".into())));
    }
    f.push(("ports", nports.to_string()));
    f
}

fn link_layer_name(ll: u8) -> &'static str {
    match ll {
        LINK_LAYER_ETHERNET => "Ethernet",
        rsverbs::abi::IBV_LINK_LAYER_INFINIBAND => "InfiniBand",
        // IBV_LINK_LAYER_UNSPECIFIED: InfiniBand (ibv_devinfo).
        _ => "unspecified (InfiniBand)",
    }
}

// ---- the run ------------------------------------------------------------------

/// `--join GROUP`'s librdmacm, group, and each port's plan (found before
/// the run: join.rs).
struct Join<'a> {
    cm: &'a join::RdmaCm,
    group: Ipv4Addr,
    plans: Vec<(u8, Result<join::Plan, String>)>,
}

fn device(pair: &Pair, d: &Device, port: Option<u8>, with_limits: bool, join: Option<&Join>) -> DeviceReport {
    let mut r = DeviceReport { name: d.name.clone(), ..Default::default() };
    let Some(limits) = d.limits() else {
        r.facts.push(("error", "ibv_query_device failed".into()));
        return r;
    };
    let nports = limits.phys_port_cnt;
    r.facts = device_facts(d, nports);
    let mut objects: Option<Result<Objects, String>> = None;
    let mut total = 0usize;
    let mut next = 0u8;
    // The multicast LID of the limits' attaches: 0 on RoCE, a valid one
    // on InfiniBand (the last port run's link layer).
    let mut limits_lid = 0u16;
    for p in 1..=nports {
        let Some(info) = d.port(p) else {
            r.sections.push(Section { port: Some(p), link_layer: "?".into(), skipped: vec!["ibv_query_port failed".into()], ..Default::default() });
            continue;
        };
        total += info.gid_tbl_len.max(0) as usize;
        if port.is_some_and(|want| want != p) || stopped() {
            continue;
        }
        let start = Instant::now();
        let ib = info.link_layer != LINK_LAYER_ETHERNET;
        limits_lid = if ib { 0xc000 } else { 0 };
        let mut s = Section { port: Some(p), link_layer: link_layer_name(info.link_layer).into(), ..Default::default() };
        gid_cases(pair, d.ctx, p, nports, info.gid_tbl_len, &mut s.cases);
        let o = objects.get_or_insert_with(|| Objects::new(d.ctx, pair.rdma_core.detach));
        match o {
            Ok(o) => {
                mcast_cases(pair, o, ib, &mut next, &mut s.cases);
                if let Some(j) = join
                    && !stopped()
                {
                    match j.plans.iter().find(|(pp, _)| *pp == p).map(|(_, plan)| plan) {
                        Some(Ok(plan)) => {
                            let qp = o.no_ud.is_none().then_some(o.ud);
                            let (cases, notes) = join::cases(j.cm, plan, d.ctx, p, j.group, qp, (pair.rdma_core.attach, pair.rdma_core.detach));
                            s.cases.extend(cases);
                            s.notes.extend(notes);
                        }
                        Some(Err(e)) => s.skipped.push(format!("--join {}: {e}", j.group)),
                        None => {}
                    }
                }
                if let Some(why) = &o.no_ud {
                    s.skipped.push(why.clone());
                } else if o.rc.is_none() {
                    s.skipped.push("attach on a non-UD QP: the provider made no RC QP".into());
                }
            }
            Err(e) => s.skipped.push(e.clone()),
        }
        s.millis = start.elapsed().as_millis();
        r.sections.push(s);
    }
    if with_limits
        && !stopped()
        && let Some(Ok(o)) = objects.as_mut()
    {
        let start = Instant::now();
        let mut s = Section { title: Some("limits (--limits)".into()), link_layer: "-".into(), ..Default::default() };
        limit_cases(pair, o, &limits, limits_lid, &mut s);
        s.millis = start.elapsed().as_millis();
        r.sections.push(s);
    }
    drop(objects);
    if !stopped() {
        let start = Instant::now();
        let mut s = Section { port: None, link_layer: "-".into(), ..Default::default() };
        table_cases(pair, d.ctx, total, &mut s.cases);
        if pair.rdma_core.query_gid_table.is_none() {
            s.skipped.push("_ibv_query_gid_table: this libibverbs has no IBVERBS_1.11".into());
        }
        s.millis = start.elapsed().as_millis();
        r.sections.push(s);
    }
    r
}

/// `rsverbs selftest`: returns the exit status. `opened` is false when a
/// device chosen could not be opened (then at best exit 2).
/// What `rsverbs selftest` was asked for besides its devices.
pub struct Options<'a> {
    pub port: Option<u8>,
    pub json: bool,
    pub report: Option<&'a str>,
    pub limits: bool,
    /// `--join GROUP`: an IPv4 multicast group (cli.rs checks it).
    pub join: Option<Ipv4Addr>,
}

pub fn run(devs: &[Device], opts: &Options, opened: bool) -> i32 {
    let Options { port, json, report: report_file, limits, .. } = *opts;
    catch_signals();
    let rc = match RdmaCore::find() {
        Ok(rc) => rc,
        Err(e) => {
            eprintln!("rsverbs: selftest: {e}");
            return EXIT_ENV;
        }
    };
    let pair = Pair { rsverbs: rsverbs_verbs(&rc.verbs), rdma_core: rc.verbs };
    let mut report = Report { host: host_facts(&rc), ..Default::default() };
    // --join: librdmacm loaded and each port's address bound once, before
    // the fds are counted (librdmacm keeps what it opened: join.rs).
    let cm = match opts.join.map(|_| join::RdmaCm::open()).transpose() {
        Ok(cm) => cm,
        Err(e) => {
            eprintln!("rsverbs: selftest: {e}");
            return EXIT_ENV;
        }
    };
    let joins: Vec<Option<Join>> = devs
        .iter()
        .map(|d| {
            let (cm, group) = (cm.as_ref()?, opts.join?);
            let nports = d.limits().map_or(0, |l| l.phys_port_cnt);
            let plans = (1..=nports)
                .filter(|p| port.is_none_or(|want| want == *p))
                .map(|p| (p, crate::gids::read_port(d, p).ok_or_else(|| "ibv_query_port failed".to_string()).and_then(|pp| join::plan(cm, d, &pp))))
                .collect();
            Some(Join { cm, group, plans })
        })
        .collect();
    // The devices are open already (main.rs); every fd the run opens
    // (objects, the engine's own) must be closed again by its end.
    let fds_before = open_fds();
    for (d, j) in devs.iter().zip(&joins) {
        if stopped() {
            break;
        }
        report.devices.push(device(&pair, d, port, limits, j.as_ref()));
    }
    report.interrupted = stopped();
    // rsverbs' join engine keeps its sockets and rdma_cm fd for the
    // process's life, as the C library does until its unload: released
    // here as the unload releases them, then every fd must be as before.
    rsverbs::release_as_at_unload();
    report.fds = fds_before.zip(open_fds()).map(|(b, a)| Fds::compare(&b, &a));
    let text = if json {
        let mut s = String::new();
        report.json().write(&mut s);
        s.push('\n');
        s
    } else {
        report.text()
    };
    print!("{text}");
    let mut code = report.exit_code();
    if let Some(f) = report_file
        && let Err(e) = std::fs::write(f, &text)
    {
        eprintln!("rsverbs: selftest: cannot write the report to {f}: {e}");
        code = code.max(EXIT_ENV);
    }
    if !opened && code == 0 {
        code = EXIT_ENV;
    }
    if report.interrupted {
        eprintln!("rsverbs: selftest: interrupted; every object made was released");
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_in_the_documented_ranges() {
        assert_eq!(crate::table::gid_text(&v4_group(7)), "0000:0000:0000:0000:0000:ffff:efff:4d07");
        assert_eq!(crate::table::gid_text(&v6_group(7)), "ff1e:0000:0000:0000:0000:0000:0077:0007");
        assert_eq!(crate::table::v4_mapped(&v4_group(9)), Some(core::net::Ipv4Addr::new(239, 255, 77, 9)));
    }

    #[test]
    fn every_case_ends_detached() {
        // Each script detaches what it attaches, on the same QP, group and LID.
        for (name, steps) in mcast_script(true) {
            let attaches = steps.iter().filter(|s| s.0).count();
            let detaches = steps.iter().filter(|s| !s.0).count();
            assert!(detaches >= attaches, "{name}");
        }
        assert_eq!(mcast_script(false).len() + 1, mcast_script(true).len());
    }

    #[test]
    fn a_call_seeds_errno_and_fills_the_buffer() {
        let mut buf = [0u8; 8];
        let a = call(&mut buf, |p| {
            // SAFETY: p is the buffer.
            unsafe { *p.add(2) = 7 };
            3
        });
        assert_eq!(a, Answer { ret: 3, errno: SENTINEL, bytes: vec![PATTERN, PATTERN, 7, PATTERN, PATTERN, PATTERN, PATTERN, PATTERN] });
        let b = call(&mut buf, |_| {
            set_errno(libc::EINVAL);
            -1
        });
        assert_eq!((b.ret, b.errno, b.bytes), (-1, libc::EINVAL, vec![PATTERN; 8]));
    }
}
