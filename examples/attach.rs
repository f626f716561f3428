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

use rsverbs::safe::{Context, GidEntry, GidType, Qp, mgid_for_group};
use std::ffi::c_void;
use std::net::{IpAddr, Ipv4Addr};
use std::process::exit;

mod common;
use common::{ibv_close_device, ibv_dealloc_pd, ibv_destroy_cq, ibv_destroy_qp, ibv_detach_mcast, ibv_free_device_list};

fn main() {
    let wait = std::env::args().skip(1).any(|a| a == "--wait");
    let want = std::env::args().skip(1).find(|a| a != "--wait");
    let d = common::open("attach", want.as_deref());
    let raw_qp = common::ud_qp("attach", &d);
    // SAFETY: a live context and a live UD QP of it, destroyed only after
    // run; then everything rdma-core gave us, once, in reverse order.
    unsafe {
        let failed = run(d.ctx, raw_qp, &d.name, wait);
        ibv_destroy_qp(raw_qp);
        ibv_destroy_cq(d.cq);
        ibv_dealloc_pd(d.pd);
        ibv_close_device(d.ctx);
        ibv_free_device_list(d.list);
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
    let mut failed = false;
    let mut step = |ok: bool, what: String| {
        println!("attach: {} {what}", if ok { "ok" } else { "WRONG" });
        failed |= !ok;
    };
    let errno = || std::io::Error::last_os_error().raw_os_error().unwrap_or(0);

    // The groups 239.5.7.1 and .2, as the MGIDs rdma_cm uses for the type of
    // perftest's source GID (::ffff:239.5.7.1 on RoCE v2).
    let mut gid_type = GidType::RoceV2;
    match (ctx.gid_table(), ctx.gid_index_perftest(1)) {
        (Ok(t), Ok(i)) => {
            gid_type = t.iter().find(|e| e.port == 1 && e.index == i).and_then(GidEntry::kind).unwrap_or(gid_type);
            step(!t.is_empty(), format!("{dev}: {} GID entries; perftest's index on port 1: {i} ({gid_type:?})", t.len()));
        }
        (t, i) => step(false, format!("{dev}: gid_table {:?}, gid_index_perftest {:?}", t.map(|t| t.len()), i)),
    }
    let mgid = |d: u8| mgid_for_group(IpAddr::V4(Ipv4Addr::new(239, 5, 7, d)), gid_type).expect("a multicast group");
    let (group, other) = (mgid(1), mgid(2));

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
