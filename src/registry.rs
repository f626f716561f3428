//! The attachment registry: per QP, the (MGID, LID) pairs attached through
//! rsverbs and not yet detached. uverbs keeps the same list per QP
//! (kernel uverbs_cmd.c `ib_uverbs_attach_mcast`: one entry per (MGID,
//! LID), a duplicate attach is a no-op; `ib_uverbs_detach_mcast` removes
//! it), but never shows it to user space.
//!
//! Maintained only while `RSVERBS_TRACE` is on (docs/trace.md): with it off
//! the verbs never touch it. A QP is keyed as the kernel keys it, by its
//! context and its handle (`ibv_qp.handle` is scoped to the context's fd),
//! so a copy of a `struct ibv_qp` is the same QP.
//!
//! Lock-free and fork-safe, like the route table (uverbs/table.rs): a fixed
//! array of slots, each claimed with a CAS and published with a release
//! store; readers check a slot's generation before and after reading it
//! (a seqlock without a writer lock). A forked child inherits the entries
//! and their pid; at exit each process reports only its own. When all
//! `CAP` slots are taken, further attachments are not recorded.
#![forbid(unsafe_code)]

use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release, fence};

/// Slots (80 bytes each, in .bss: untouched pages cost nothing).
pub const CAP: usize = 4096;

const FREE: u64 = 0;
const BUSY: u64 = 1;
const LIVE: u64 = 2;

struct Slot {
    /// `generation << 2 | state`; every transition bumps the generation.
    state: AtomicU64,
    ctx: AtomicU64,
    /// handle | pid << 32
    handle_pid: AtomicU64,
    gid: [AtomicU64; 2],
    /// lid | qpn << 16
    lid_qpn: AtomicU64,
    dev: [AtomicU64; 2],
    /// [`Watch`]: qkey | port << 32 | WATCHED, then the counter | fd << 32;
    /// 0 when none.
    watch: [AtomicU64; 2],
}

/// The bit of `watch[0]` that says a [`Watch`] is kept.
const WATCHED: u64 = 1 << 40;

static SLOTS: [Slot; CAP] = [const {
    Slot {
        state: AtomicU64::new(0),
        ctx: AtomicU64::new(0),
        handle_pid: AtomicU64::new(0),
        gid: [AtomicU64::new(0), AtomicU64::new(0)],
        lid_qpn: AtomicU64::new(0),
        dev: [AtomicU64::new(0), AtomicU64::new(0)],
        watch: [AtomicU64::new(0), AtomicU64::new(0)],
    }
}; CAP];

pub use crate::view::QpKey;

/// One recorded attachment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attachment {
    pub qp: QpKey,
    /// The process that attached it.
    pub pid: u32,
    pub qpn: u32,
    pub gid: [u8; 16],
    pub lid: u16,
    /// The device name, cut at 16 bytes, NUL-padded.
    pub dev: [u8; 16],
    /// `RSVERBS_TRACE=hints`: the port's Q_Key violation counter when the
    /// QP was attached (the `qkey-violations` hint).
    pub watch: Option<Watch>,
}

/// The QP's port and Q_Key, and the port's `qkey_viol_cntr` sampled right
/// after the attach (docs/trace.md, `qkey-violations`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Watch {
    pub port: u8,
    pub qkey: u32,
    pub viol: u32,
    /// The context's `cmd_fd` at the attach, to sample the counter again
    /// at exit (checked to be a uverbs device first).
    pub fd: i32,
}

impl Attachment {
    pub fn dev_name(&self) -> &str {
        let end = self.dev.iter().position(|&c| c == 0).unwrap_or(16);
        core::str::from_utf8(&self.dev[..end]).unwrap_or("?")
    }
}

fn halves(b: &[u8; 16]) -> [u64; 2] {
    let mut lo = [0u8; 8];
    let mut hi = [0u8; 8];
    lo.copy_from_slice(&b[..8]);
    hi.copy_from_slice(&b[8..]);
    [u64::from_ne_bytes(lo), u64::from_ne_bytes(hi)]
}

fn join(h: [u64; 2]) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&h[0].to_ne_bytes());
    b[8..].copy_from_slice(&h[1].to_ne_bytes());
    b
}

/// A consistent copy of a live slot, or None.
fn read(s: &Slot) -> Option<Attachment> {
    let s1 = s.state.load(Acquire);
    if s1 & 3 != LIVE {
        return None;
    }
    let ctx = s.ctx.load(Relaxed) as usize;
    let hp = s.handle_pid.load(Relaxed);
    let gid = join([s.gid[0].load(Relaxed), s.gid[1].load(Relaxed)]);
    let lq = s.lid_qpn.load(Relaxed);
    let dev = join([s.dev[0].load(Relaxed), s.dev[1].load(Relaxed)]);
    let w = [s.watch[0].load(Relaxed), s.watch[1].load(Relaxed)];
    fence(Acquire);
    (s.state.load(Relaxed) == s1).then_some(Attachment {
        qp: QpKey { ctx, handle: hp as u32 },
        pid: (hp >> 32) as u32,
        qpn: (lq >> 16) as u32,
        gid,
        lid: lq as u16,
        dev,
        watch: (w[0] & WATCHED != 0).then_some(Watch { port: (w[0] >> 32) as u8, qkey: w[0] as u32, viol: w[1] as u32, fd: (w[1] >> 32) as i32 }),
    })
}

/// Every live attachment.
pub fn each(mut f: impl FnMut(&Attachment)) {
    for s in &SLOTS {
        if let Some(a) = read(s) {
            f(&a);
        }
    }
}

/// The LIDs `qp` has `gid` attached with, in ascending order.
pub fn lids(qp: QpKey, gid: &[u8; 16]) -> Vec<u16> {
    let mut v = Vec::new();
    each(|a| {
        // In LID order, not the table's slot order, which depends on what
        // else the table holds (the lid-mismatch hint lists them); kept in
        // order as it grows, so that no sort is linked for a list this short.
        if a.qp == qp && a.gid == *gid {
            // A failed allocation leaves the LID out (no abort).
            if let Err(at) = v.binary_search(&a.lid)
                && v.try_reserve(1).is_ok()
            {
                v.insert(at, a.lid);
            }
        }
    });
    v
}

/// The result of [`insert`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Insert {
    Added,
    /// Already recorded: a duplicate attach is one entry.
    Duplicate,
    /// Every slot is taken: not recorded.
    Full,
}

/// Records a successful attach.
pub fn insert(a: &Attachment) -> Insert {
    if lids(a.qp, &a.gid).contains(&a.lid) {
        return Insert::Duplicate;
    }
    for s in &SLOTS {
        let cur = s.state.load(Acquire);
        if cur & 3 != FREE {
            continue;
        }
        let generation = cur >> 2;
        if s.state.compare_exchange(cur, ((generation + 1) << 2) | BUSY, Acquire, Relaxed).is_err() {
            continue;
        }
        // The seqlock writer's fence (Boehm, "Can seqlocks get along with
        // programming language memory models?", MSPC 2012, fig. 6; Linux
        // seqlock.h `do_write_seqcount_begin_nested`: the increment, then
        // smp_wmb()): the claim must be visible before any of the data
        // stores below. A reader that loaded an older generation and then
        // read one of these stores has its fence(Acquire) (`read`)
        // synchronize with this fence, so its second state load sees the
        // claim or later and it discards the copy. The CAS's Acquire orders
        // nothing after it for other threads: on POWER (not multi-copy
        // atomic; lwsync here) a reader could see new data with the old
        // state. On x86 (TSO) this compiles to nothing.
        fence(Release);
        s.ctx.store(a.qp.ctx as u64, Relaxed);
        s.handle_pid.store(u64::from(a.qp.handle) | (u64::from(a.pid) << 32), Relaxed);
        let g = halves(&a.gid);
        s.gid[0].store(g[0], Relaxed);
        s.gid[1].store(g[1], Relaxed);
        s.lid_qpn.store(u64::from(a.lid) | (u64::from(a.qpn) << 16), Relaxed);
        let d = halves(&a.dev);
        s.dev[0].store(d[0], Relaxed);
        s.dev[1].store(d[1], Relaxed);
        let w = a.watch.map_or([0, 0], |w| [u64::from(w.qkey) | (u64::from(w.port) << 32) | WATCHED, u64::from(w.viol) | (u64::from(w.fd as u32) << 32)]);
        s.watch[0].store(w[0], Relaxed);
        s.watch[1].store(w[1], Relaxed);
        s.state.store(((generation + 2) << 2) | LIVE, Release);
        return Insert::Added;
    }
    Insert::Full
}

/// Records a successful detach: removes every entry of (qp, gid, lid).
/// Returns how many were removed (more than one only after two threads
/// raced to record the same attach).
pub fn remove(qp: QpKey, gid: &[u8; 16], lid: u16) -> usize {
    remove_where(|a| a.qp == qp && a.gid == *gid && a.lid == lid)
}

/// A call on `qp` whose QP number is `qpn`: entries of the same (context
/// address, handle) with another QP number belong to a QP destroyed since,
/// or to a closed context whose address and handle were reused
/// (docs/security.md): forget them. Returns how many were removed.
pub fn forget_stale(qp: QpKey, qpn: u32) -> usize {
    remove_where(|a| a.qp == qp && a.qpn != qpn)
}

fn remove_where(matches: impl Fn(&Attachment) -> bool) -> usize {
    let mut n = 0;
    for s in &SLOTS {
        let cur = s.state.load(Acquire);
        match read(s) {
            Some(a) if matches(&a) => {}
            _ => continue,
        }
        let generation = cur >> 2;
        if s.state.compare_exchange(cur, ((generation + 1) << 2) | BUSY, Acquire, Relaxed).is_ok() {
            s.state.store(((generation + 2) << 2) | FREE, Release);
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reused_context_address_and_handle_do_not_inherit_groups() {
        let mut old = att(0x7e00_0000_0000, 3, 1, 0);
        old.qpn = 0x11;
        assert_eq!(insert(&old), Insert::Added);
        // A new QP (another QPN) at the same context address and handle.
        assert_eq!(forget_stale(old.qp, 0x11), 0, "the same QP keeps its groups");
        assert_eq!(forget_stale(old.qp, 0x12), 1);
        assert!(lids(old.qp, &old.gid).is_empty());
    }

    fn att(ctx: usize, handle: u32, g: u8, lid: u16) -> Attachment {
        let mut gid = [0u8; 16];
        gid[0] = 0xff;
        gid[15] = g;
        Attachment { qp: QpKey { ctx, handle }, pid: 1, qpn: 17, gid, lid, dev: *b"rxe1\0\0\0\0\0\0\0\0\0\0\0\0", watch: None }
    }

    #[test]
    fn a_watch_is_kept_with_its_attachment() {
        let mut a = att(0x6100, 4, 9, 0);
        a.watch = Some(Watch { port: 2, qkey: 0x8000_0001, viol: 0xffff, fd: -1 });
        assert_eq!(insert(&a), Insert::Added);
        let mut got = None;
        each(|x| {
            if x.qp == a.qp {
                got = Some(*x);
            }
        });
        assert_eq!(got, Some(a));
        assert_eq!(remove(a.qp, &a.gid, 0), 1);
        let b = att(0x6100, 4, 9, 0);
        assert_eq!(insert(&b), Insert::Added);
        each(|x| {
            if x.qp == b.qp {
                assert_eq!(x.watch, None, "a reused slot has no stale watch");
            }
        });
        assert_eq!(remove(b.qp, &b.gid, 0), 1);
    }

    #[test]
    fn duplicate_is_one_entry_and_detach_removes_it() {
        let a = att(0x5000, 3, 1, 0);
        assert_eq!(insert(&a), Insert::Added);
        assert_eq!(insert(&a), Insert::Duplicate);
        assert_eq!(lids(a.qp, &a.gid), vec![0]);
        let b = att(0x5000, 3, 1, 0xc001);
        assert_eq!(insert(&b), Insert::Added);
        assert_eq!(lids(a.qp, &a.gid), vec![0, 0xc001]);
        assert_eq!(remove(a.qp, &a.gid, 0), 1);
        assert_eq!(remove(a.qp, &a.gid, 0), 0);
        assert_eq!(lids(a.qp, &a.gid), vec![0xc001]);
        assert_eq!(remove(b.qp, &b.gid, 0xc001), 1);
        let mut n = 0;
        each(|x| n += usize::from(x.qp == a.qp));
        assert_eq!(n, 0);
        assert_eq!(a.dev_name(), "rxe1");
    }

    #[test]
    fn qps_are_apart_and_threads_agree() {
        let threads: Vec<_> = (0..4u32)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..200u8 {
                        let a = att(0x9000, 100 + t, i, 0);
                        assert_eq!(insert(&a), Insert::Added);
                    }
                    for i in (0..200u8).step_by(2) {
                        assert_eq!(remove(QpKey { ctx: 0x9000, handle: 100 + t }, &att(0, 0, i, 0).gid, 0), 1);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        for t in 0..4u32 {
            let mut n = 0;
            each(|x| n += usize::from(x.qp == QpKey { ctx: 0x9000, handle: 100 + t }));
            assert_eq!(n, 100);
        }
    }
}
