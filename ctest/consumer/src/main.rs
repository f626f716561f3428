//! A receiver that holds its QP and its multicast attachments in one
//! struct, as a Rust program over any binding would (docs/rust.md):
//!
//!     receiver [--wait] [DEVICE]
//!
//! 1. joins two groups through `rsverbs::safe` and keeps both
//!    `Attachment`s in the struct beside the QP (with `--wait`, it waits
//!    for a line on standard input while it holds them);
//! 2. drops the first attachment (`Vec::remove`): rdma-core's own
//!    `ibv_detach_mcast` of that group then fails with EINVAL, the kernel's
//!    word that the QP is no longer attached;
//! 3. drops the struct: its fields drop in order, the second group is
//!    detached, then the QP is destroyed, and `ibv_destroy_qp` returns 0
//!    (the kernel refuses to destroy a QP still attached: EBUSY);
//! 4. control: a struct whose attachment is `forget`-ten: `ibv_destroy_qp`
//!    is EBUSY, as the kernel says for an attached QP.
//!
//! One line per step, "receiver: ok ..." or "receiver: WRONG ..."; exits 1
//! when a step is wrong, 2 without a device.

use rsverbs::safe::{Attachment, Qp};
use std::ffi::{CStr, c_char, c_int, c_void};
use std::process::exit;

#[repr(C)]
struct QpCap {
    max_send_wr: u32,
    max_recv_wr: u32,
    max_send_sge: u32,
    max_recv_sge: u32,
    max_inline_data: u32,
}
#[repr(C)]
struct QpInitAttr {
    qp_context: *mut c_void,
    send_cq: *mut c_void,
    recv_cq: *mut c_void,
    srq: *mut c_void,
    cap: QpCap,
    qp_type: c_int,
    sq_sig_all: c_int,
}
const QPT_UD: c_int = 4;
const EINVAL: c_int = 22;
const EBUSY: c_int = 16;

#[link(name = "ibverbs")]
unsafe extern "C" {
    fn ibv_get_device_list(n: *mut c_int) -> *mut *mut c_void;
    fn ibv_get_device_name(dev: *mut c_void) -> *const c_char;
    fn ibv_open_device(dev: *mut c_void) -> *mut c_void;
    fn ibv_alloc_pd(ctx: *mut c_void) -> *mut c_void;
    fn ibv_create_cq(ctx: *mut c_void, cqe: c_int, cq_context: *mut c_void, channel: *mut c_void, vector: c_int) -> *mut c_void;
    fn ibv_create_qp(pd: *mut c_void, attr: *mut QpInitAttr) -> *mut c_void;
    fn ibv_destroy_qp(qp: *mut c_void) -> c_int;
    fn ibv_detach_mcast(qp: *mut c_void, gid: *const [u8; 16], lid: u16) -> c_int;
}

/// A UD QP this program owns, as a binding's QP type would: destroyed on
/// drop, with what `ibv_destroy_qp` returned written to `destroyed`.
struct UdQp {
    raw: *mut c_void,
    destroyed: &'static std::sync::atomic::AtomicI32,
}

impl Drop for UdQp {
    fn drop(&mut self) {
        // SAFETY: a QP this program created and destroys once.
        let rc = unsafe { ibv_destroy_qp(self.raw) };
        self.destroyed.store(rc, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The QP and its groups in one value. The attachments are declared first:
/// they drop (detach) before the QP is destroyed.
struct Receiver {
    groups: Vec<Attachment<'static>>,
    qp: UdQp,
}

impl Receiver {
    fn new(qp: UdQp) -> Receiver {
        Receiver { groups: Vec::new(), qp }
    }

    fn join(&mut self, gid: [u8; 16]) -> std::io::Result<()> {
        // SAFETY: self.qp outlives every attachment in self.groups (field
        // order above), and nothing else destroys it: 'static is the
        // struct's promise, not the borrow checker's.
        let qp: Qp<'static> = unsafe { Qp::from_raw(self.qp.raw) }.expect("non-NULL");
        self.groups.push(qp.attach(&gid, 0)?);
        Ok(())
    }
}

fn group(s: &str) -> [u8; 16] {
    s.parse::<std::net::Ipv6Addr>().expect("an IPv6 address").octets()
}

fn main() {
    let wait = std::env::args().skip(1).any(|a| a == "--wait");
    let want = std::env::args().skip(1).find(|a| a != "--wait");
    let mut failed = false;
    let mut step = |ok: bool, what: String| {
        println!("receiver: {} {what}", if ok { "ok" } else { "WRONG" });
        failed |= !ok;
    };
    // SAFETY: rdma-core's documented calls, each checked before use; the
    // device, context, PD and CQ live until exit.
    let (pd, cq) = unsafe {
        let mut n = 0;
        let list = ibv_get_device_list(&mut n);
        if list.is_null() || n == 0 {
            eprintln!("receiver: no RDMA device");
            exit(2);
        }
        let devs = std::slice::from_raw_parts(list, n as usize);
        let name = |d: *mut c_void| CStr::from_ptr(ibv_get_device_name(d)).to_string_lossy().into_owned();
        let Some(&dev) = devs.iter().find(|&&d| want.as_ref().is_none_or(|w| *w == name(d))) else {
            eprintln!("receiver: no such device");
            exit(2)
        };
        let ctx = ibv_open_device(dev);
        let pd = if ctx.is_null() { std::ptr::null_mut() } else { ibv_alloc_pd(ctx) };
        let cq = if pd.is_null() { std::ptr::null_mut() } else { ibv_create_cq(ctx, 2, std::ptr::null_mut(), std::ptr::null_mut(), 0) };
        if cq.is_null() {
            eprintln!("receiver: setup failed: {}", std::io::Error::last_os_error());
            exit(2);
        }
        (pd, cq)
    };
    let new_qp = |destroyed: &'static std::sync::atomic::AtomicI32| {
        let cap = QpCap { max_send_wr: 1, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
        let mut attr = QpInitAttr { qp_context: std::ptr::null_mut(), send_cq: cq, recv_cq: cq, srq: std::ptr::null_mut(), cap, qp_type: QPT_UD, sq_sig_all: 0 };
        // SAFETY: a live PD and a filled attr.
        let raw = unsafe { ibv_create_qp(pd, &mut attr) };
        if raw.is_null() {
            eprintln!("receiver: ibv_create_qp: {}", std::io::Error::last_os_error());
            exit(2);
        }
        UdQp { raw, destroyed }
    };
    let (a, b) = (group("ff0e::ffff:ef05:0711"), group("ff0e::ffff:ef05:0712"));

    static DESTROYED: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);
    let mut r = Receiver::new(new_qp(&DESTROYED));
    let raw = r.qp.raw;
    let joined = r.join(a).and_then(|()| r.join(b));
    step(joined.is_ok() && r.groups.len() == 2, format!("two groups held in the struct beside the QP: {joined:?}, {:?}", r.groups));
    if wait {
        println!("receiver: holding them; a line on standard input goes on");
        let _ = std::io::stdin().read_line(&mut String::new());
    }
    drop(r.groups.remove(0));
    // SAFETY: a live QP and a 16-byte GID.
    let rc = unsafe { ibv_detach_mcast(raw, &a, 0) };
    step(rc == EINVAL, format!("after dropping the first attachment, rdma-core's ibv_detach_mcast of it: {rc} (EINVAL: the kernel has no such attachment)"));
    drop(r);
    let rc = DESTROYED.load(std::sync::atomic::Ordering::Relaxed);
    step(rc == 0, format!("dropping the struct detached the second group, then ibv_destroy_qp: {rc}"));
    if wait {
        println!("receiver: dropped; a line on standard input goes on");
        let _ = std::io::stdin().read_line(&mut String::new());
    }

    static CONTROL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);
    let mut c = Receiver::new(new_qp(&CONTROL));
    let raw = c.qp.raw;
    match c.join(b) {
        Ok(()) => {
            c.groups.drain(..).for_each(std::mem::forget);
            // SAFETY: as above; the QP is still live (c holds it).
            let rc = unsafe { ibv_destroy_qp(raw) };
            step(rc == EBUSY, format!("control: a forgotten attachment stays, and ibv_destroy_qp is {rc} (EBUSY)"));
            // SAFETY: as above.
            let rc = unsafe { ibv_detach_mcast(raw, &b, 0) };
            step(rc == 0, format!("control: rdma-core detaches it: {rc}"));
            drop(c);
            let rc = CONTROL.load(std::sync::atomic::Ordering::Relaxed);
            step(rc == 0, format!("control: then ibv_destroy_qp: {rc}"));
        }
        Err(e) => step(false, format!("control attach: {e}")),
    }
    exit(if failed { 1 } else { 0 });
}
