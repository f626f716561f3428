//! A receiver that holds its QP and its multicast attachments in one
//! struct, as a Rust program over any binding would (docs/rust.md):
//!
//!     cargo run --release --example receiver [--wait] [DEVICE]
//!
//! (`make example` builds it into build/examples/receiver; ctest/consumer
//! builds the same file as a crate that depends on rsverbs.)
//!
//! 1. takes the source GID index perftest would use on port 1 and its type,
//!    and the MGIDs rdma_cm uses for the groups 239.5.7.17 and 239.5.7.18
//!    with that type (`mgid_for_group`: `::ffff:239.5.7.17` on RoCE v2,
//!    `ff0e::ffff:239.5.7.17` on v1);
//! 2. joins both groups through `rsverbs::safe` and keeps both
//!    `Attachment`s in the struct beside the QP (with `--wait`, it waits
//!    for a line on standard input while it holds them);
//! 3. drops the first attachment (`Vec::remove`): rdma-core's own
//!    `ibv_detach_mcast` of that group then fails with EINVAL, the kernel's
//!    word that the QP is no longer attached;
//! 4. drops the struct: its fields drop in order, the second group is
//!    detached, then the QP is destroyed, and `ibv_destroy_qp` returns 0
//!    (the kernel refuses to destroy a QP still attached: EBUSY);
//! 5. control: a struct whose attachment is `forget`-ten: `ibv_destroy_qp`
//!    is EBUSY, as the kernel says for an attached QP.
//!
//! One line per step, "receiver: ok ..." or "receiver: WRONG ..."; exits 1
//! when a step is wrong, 2 without a device.

use rsverbs::safe::{Attachment, Context, GidType, Qp, mgid_for_group};
use std::ffi::{c_int, c_void};
use std::net::{IpAddr, Ipv4Addr};
use std::process::exit;

// rdma-core's calls, shared with examples/attach.rs; the receiver keeps its
// device open until exit, so the teardown calls and fields are attach's
// alone.
#[allow(dead_code)]
mod common;
use common::{ibv_destroy_qp, ibv_detach_mcast};

const EINVAL: c_int = 22;
const EBUSY: c_int = 16;

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

/// The type of the source GID perftest would use on port 1 of `ctx`.
fn source_gid_type(ctx: Context<'_>) -> std::io::Result<(u32, GidType)> {
    let index = ctx.gid_index_perftest(1)?;
    Ok((index, ctx.gid_type(1, index)?))
}

fn main() {
    let wait = std::env::args().skip(1).any(|a| a == "--wait");
    let want = std::env::args().skip(1).find(|a| a != "--wait");
    let mut failed = false;
    let mut step = |ok: bool, what: String| {
        println!("receiver: {} {what}", if ok { "ok" } else { "WRONG" });
        failed |= !ok;
    };
    // The device, context, PD and CQ live until exit.
    let d = common::open("receiver", want.as_deref());
    let new_qp = |destroyed: &'static std::sync::atomic::AtomicI32| UdQp { raw: common::ud_qp("receiver", &d), destroyed };
    // SAFETY: the context is open until exit.
    let ctx = unsafe { Context::from_raw(d.ctx) }.expect("non-NULL");
    let gid_type = match source_gid_type(ctx) {
        Ok((index, t)) => {
            step(true, format!("perftest's source GID index on port 1 of {}: {index}, {t:?}", d.name));
            t
        }
        Err(e) => {
            step(false, format!("perftest's source GID index on port 1 of {}: {e}; the groups as on RoCE v2", d.name));
            GidType::RoceV2
        }
    };
    let mgid = |g: Ipv4Addr| mgid_for_group(IpAddr::V4(g), gid_type).expect("a multicast group");
    let (a, b) = (mgid(Ipv4Addr::new(239, 5, 7, 17)), mgid(Ipv4Addr::new(239, 5, 7, 18)));

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
