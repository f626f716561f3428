//! A QP created by rdma-core's C library, attached to a multicast group with
//! `rsverbs::safe`, and detached by dropping the guard (docs/rust.md).
//!
//!     cargo run --release --example attach [--wait] [DEVICE]
//!
//! With `--wait` it waits for a line on standard input once while it holds
//! the attachment and once after the drop, so that the kernel's side can be
//! looked at meanwhile (rxe adds the group's multicast MAC to its netdev:
//! `ip maddr`, /proc/net/dev_mcast).
//! Then it shows what the kernel says: rdma-core's own `ibv_detach_mcast`
//! of the same group fails with EINVAL, as the kernel answers for a group
//! the QP is not attached to. As a control, a group left attached on
//! purpose (`std::mem::forget`) is detached by rdma-core with 0.
//! Prints one line per step; exits 1 when a step differs, 2 without a device.

use rsverbs::safe::{Context, Qp};
use std::ffi::{CStr, c_char, c_int, c_void};
use std::process::exit;

/// rdma-core's `struct ibv_qp_cap` and `struct ibv_qp_init_attr` (verbs.h).
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
/// `IBV_QPT_UD`.
const QPT_UD: c_int = 4;

#[link(name = "ibverbs")]
unsafe extern "C" {
    fn ibv_get_device_list(n: *mut c_int) -> *mut *mut c_void;
    fn ibv_free_device_list(list: *mut *mut c_void);
    fn ibv_get_device_name(dev: *mut c_void) -> *const c_char;
    fn ibv_open_device(dev: *mut c_void) -> *mut c_void;
    fn ibv_close_device(ctx: *mut c_void) -> c_int;
    fn ibv_alloc_pd(ctx: *mut c_void) -> *mut c_void;
    fn ibv_dealloc_pd(pd: *mut c_void) -> c_int;
    fn ibv_create_cq(ctx: *mut c_void, cqe: c_int, cq_context: *mut c_void, channel: *mut c_void, vector: c_int) -> *mut c_void;
    fn ibv_destroy_cq(cq: *mut c_void) -> c_int;
    fn ibv_create_qp(pd: *mut c_void, attr: *mut QpInitAttr) -> *mut c_void;
    fn ibv_destroy_qp(qp: *mut c_void) -> c_int;
    fn ibv_detach_mcast(qp: *mut c_void, gid: *const [u8; 16], lid: u16) -> c_int;
}

fn setup_error(what: &str) -> ! {
    eprintln!("attach: {what}: {}", std::io::Error::last_os_error());
    exit(2)
}

fn main() {
    let wait = std::env::args().skip(1).any(|a| a == "--wait");
    let want = std::env::args().skip(1).find(|a| a != "--wait");
    let mut n = 0;
    // SAFETY: rdma-core's documented calls, each checked before use.
    unsafe {
        let list = ibv_get_device_list(&mut n);
        if list.is_null() || n == 0 {
            setup_error("no RDMA device");
        }
        let devs = std::slice::from_raw_parts(list, n as usize);
        let name = |d: *mut c_void| CStr::from_ptr(ibv_get_device_name(d)).to_string_lossy().into_owned();
        let Some(&dev) = devs.iter().find(|&&d| want.as_ref().is_none_or(|w| *w == name(d))) else {
            setup_error("no such device")
        };
        let ctx = ibv_open_device(dev);
        let pd = if ctx.is_null() { setup_error("ibv_open_device") } else { ibv_alloc_pd(ctx) };
        let cq = if pd.is_null() { setup_error("ibv_alloc_pd") } else { ibv_create_cq(ctx, 2, std::ptr::null_mut(), std::ptr::null_mut(), 0) };
        if cq.is_null() {
            setup_error("ibv_create_cq");
        }
        let cap = QpCap { max_send_wr: 1, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
        let mut attr = QpInitAttr { qp_context: std::ptr::null_mut(), send_cq: cq, recv_cq: cq, srq: std::ptr::null_mut(), cap, qp_type: QPT_UD, sq_sig_all: 0 };
        let raw_qp = ibv_create_qp(pd, &mut attr);
        if raw_qp.is_null() {
            setup_error("ibv_create_qp");
        }
        let failed = run(ctx, raw_qp, &name(dev), wait);
        ibv_destroy_qp(raw_qp);
        ibv_destroy_cq(cq);
        ibv_dealloc_pd(pd);
        ibv_close_device(ctx);
        ibv_free_device_list(list);
        exit(if failed { 1 } else { 0 });
    }
}

/// The steps; true when one differs from what it should be.
///
/// # Safety
/// `raw_ctx` is a live context and `raw_qp` a live UD QP of it.
unsafe fn run(raw_ctx: *mut c_void, raw_qp: *mut c_void, dev: &str, wait: bool) -> bool {
    // SAFETY: live until main destroys them, after run.
    let (ctx, qp) = unsafe { (Context::from_raw(raw_ctx).expect("non-NULL"), Qp::from_raw(raw_qp).expect("non-NULL")) };
    let group: [u8; 16] = "ff0e::ffff:ef05:0701".parse::<std::net::Ipv6Addr>().expect("an IPv6 address").octets();
    let other: [u8; 16] = "ff0e::ffff:ef05:0702".parse::<std::net::Ipv6Addr>().expect("an IPv6 address").octets();
    let mut failed = false;
    let mut step = |ok: bool, what: String| {
        println!("attach: {} {what}", if ok { "ok" } else { "WRONG" });
        failed |= !ok;
    };
    let errno = || std::io::Error::last_os_error().raw_os_error().unwrap_or(0);

    match (ctx.gid_table(), ctx.gid_index_perftest(1)) {
        (Ok(t), Ok(i)) => step(!t.is_empty(), format!("{dev}: {} GID entries; perftest's index on port 1: {i}", t.len())),
        (t, i) => step(false, format!("{dev}: gid_table {:?}, gid_index_perftest {:?}", t.map(|t| t.len()), i)),
    }

    match qp.attach(&group, 0) {
        Ok(member) => {
            step(true, format!("{dev}: {member:?} attached through rsverbs::safe"));
            if wait {
                println!("attach: holding it; a line on standard input drops it");
                let mut line = String::new();
                let _ = std::io::stdin().read_line(&mut line);
            }
            drop(member);
            if wait {
                println!("attach: dropped; a line on standard input goes on");
                let mut line = String::new();
                let _ = std::io::stdin().read_line(&mut line);
            }
            // SAFETY: a live QP and a 16-byte GID.
            let rc = unsafe { ibv_detach_mcast(raw_qp, &group, 0) };
            let e = errno();
            step(rc == libc::EINVAL && e == libc::EINVAL, format!("after the drop, rdma-core's ibv_detach_mcast: {rc} (errno {e}): the kernel has no such attachment"));
        }
        Err(e) => step(false, format!("{dev}: attach: {e}")),
    }
    match qp.attach(&other, 0) {
        Ok(member) => {
            core::mem::forget(member);
            // SAFETY: as above.
            let rc = unsafe { ibv_detach_mcast(raw_qp, &other, 0) };
            step(rc == 0, format!("control: a forgotten attachment stays; rdma-core detaches it: {rc}"));
        }
        Err(e) => step(false, format!("control attach: {e}")),
    }
    failed
}
