//! The exports' one check: whether an opt-in feature wants the call
//! (`RSVERBS_TRACE`, docs/trace.md; `RSVERBS_MCAST_IPJOIN`,
//! docs/ipjoin.md). One byte, loaded Relaxed: set until both variables are
//! read (a call before the constructor reads them itself), cleared for good
//! when both are off. The features' own code is out of line.

use crate::error::{ErrnoGuard, errno};
use crate::gid::{GidCall, GidQuery, TableCall};
use crate::mcast::McastCall;
use crate::view::{Context, GidView, McastView, QueryView, TableView};
use crate::{ipjoin, os, trace};
use core::ffi::c_int;
use core::sync::atomic::{AtomicBool, Ordering::Relaxed};

static WANTED: AtomicBool = AtomicBool::new(true);

/// Whether a call must go through [`mcast`] or the trace.
#[inline(always)]
pub fn wanted() -> bool {
    // make bench's "untraced" contender: the check compiled out, to
    // measure what it costs (Cargo.toml, --cfg rsverbs_bench_untraced).
    if cfg!(rsverbs_bench_untraced) {
        return false;
    }
    WANTED.load(Relaxed)
}

/// Reads both variables (each once per process) and clears [`WANTED`]
/// when neither is on. Called at load (lifecycle.rs) and by every hooked
/// call.
pub fn settle() {
    let t = trace::on();
    let j = ipjoin::on();
    if !t && !j {
        WANTED.store(false, Relaxed);
    }
}

/// The C body of attach/detach: check → call → map.
pub type McastFn = unsafe fn(&McastCall) -> c_int;
/// The C body of `_ibv_query_gid_ex`.
pub type GidExFn = unsafe fn(&GidQuery) -> c_int;
/// The C body of `ibv_query_gid`.
pub type GidFn = unsafe fn(&GidCall) -> c_int;
/// The C body of `_ibv_query_gid_table`.
pub type TableFn = unsafe fn(&TableCall) -> isize;

/// Attach or detach `c` through `call`, then, with the features on, the
/// trace's line and hints and the IP-level join or leave, each given the
/// call's objects as a [`McastView`]. With `RSVERBS_MCAST_IPJOIN` on, the
/// verb runs under the IP join's lock (ipjoin::exclusive). The result and
/// `errno` are `call`'s.
///
/// # Safety
/// As the exports': non-NULL pointers point at live rdma-core objects.
#[cold]
#[inline(never)]
pub unsafe fn mcast(c: McastCall, call: McastFn) -> c_int {
    settle();
    let traced = trace::on();
    if ipjoin::on() {
        // SAFETY: forwarded from our caller.
        if let Some(rc) = ipjoin::exclusive(|j| unsafe { run(&c, call, traced, Some(j)) }) {
            return rc;
        }
    }
    // SAFETY: forwarded from our caller.
    unsafe { run(&c, call, traced, None) }
}

/// # Safety
/// As [`mcast`].
unsafe fn run(c: &McastCall, call: McastFn, traced: bool, join: Option<&mut ipjoin::State>) -> c_int {
    let t0 = if traced { os::monotonic_us() } else { 0 };
    // SAFETY: forwarded from our caller.
    let rc = unsafe { call(c) };
    if !traced && join.is_none() {
        return rc;
    }
    let us = if traced { os::monotonic_us().wrapping_sub(t0) } else { 0 };
    // SAFETY: forwarded from our caller.
    unsafe { after_mcast(c, rc, us, traced, join) };
    rc
}

/// The features' part of [`run`], out of line: the view (a context's
/// device is 320 bytes) is never in the same frame as the verb's own
/// buffers (docs/security.md, the stack budget).
///
/// # Safety
/// As [`mcast`].
#[inline(never)]
unsafe fn after_mcast(c: &McastCall, rc: c_int, us: u64, traced: bool, join: Option<&mut ipjoin::State>) {
    let _errno = ErrnoGuard::save();
    // SAFETY: the exports' contract: NULL or live objects (the verb has
    // just run on them and does not free them).
    let view = unsafe { McastView::of(c.attach(), c.qp, c.gid, c.lid) };
    if traced {
        trace::after_mcast(&view, rc, us, join.is_some() && ipjoin::ip_level());
    }
    if let Some(j) = join {
        j.after_mcast(&view, rc);
    }
}

/// `_ibv_query_gid_ex` through `call`, then, with tracing on, its line.
///
/// # Safety
/// As the export's: `q.ctx` NULL or a live context; `q.entry` NULL or
/// writable (hence readable) for `q.entry_size` bytes.
#[cold]
#[inline(never)]
pub unsafe fn query_gid_ex(q: GidQuery, call: GidExFn) -> c_int {
    settle();
    // SAFETY: forwarded from our caller.
    let rc = unsafe { call(&q) };
    if trace::on() {
        // SAFETY: forwarded from our caller.
        unsafe { trace_query_gid_ex(&q, rc) };
    }
    rc
}

/// The trace of [`query_gid_ex`], out of line (docs/security.md, the stack
/// budget).
///
/// # Safety
/// As [`query_gid_ex`].
#[inline(never)]
unsafe fn trace_query_gid_ex(q: &GidQuery, rc: c_int) {
    let _errno = ErrnoGuard::save();
    let entry = (rc == 0 && !q.entry.is_null()).then(|| {
        let len = q.entry_size.min(32);
        let mut buf = [0u8; 32];
        // SAFETY: the call succeeded, so entry is writable (hence readable)
        // for entry_size bytes; only that many are read.
        buf[..len].copy_from_slice(unsafe { core::slice::from_raw_parts(q.entry.cast::<u8>(), len) });
        (buf, len)
    });
    let view = QueryView {
        // SAFETY: NULL or a live context.
        ctx: unsafe { Context::of(q.ctx) },
        port: q.port_num,
        index: q.gid_index,
        flags: q.flags,
        entry_size: q.entry_size,
        entry,
    };
    trace::after_query(&view, rc);
}

/// `ibv_query_gid` through `call`, then, with tracing on, its line.
///
/// # Safety
/// As the export's: `c.ctx` NULL or a live context; `c.gid` NULL or
/// writable (hence readable) for 16 bytes.
#[cold]
#[inline(never)]
pub unsafe fn query_gid(c: GidCall, call: GidFn) -> c_int {
    settle();
    // SAFETY: forwarded from our caller.
    let rc = unsafe { call(&c) };
    if trace::on() {
        // SAFETY: forwarded from our caller.
        unsafe { trace_query_gid(&c, rc) };
    }
    rc
}

/// The trace of [`query_gid`], out of line (docs/security.md, the stack
/// budget).
///
/// # Safety
/// As [`query_gid`].
#[inline(never)]
unsafe fn trace_query_gid(c: &GidCall, rc: c_int) {
    let after = errno();
    let _errno = ErrnoGuard::save();
    // SAFETY: the call returned 0, so it stored 16 bytes at gid.
    let gid = (rc == 0 && !c.gid.is_null()).then(|| unsafe { c.gid.cast::<[u8; 16]>().read_unaligned() });
    let view = GidView {
        // SAFETY: NULL or a live context.
        ctx: unsafe { Context::of(c.ctx) },
        port: c.port_num,
        index: c.index,
        gid_null: c.gid.is_null(),
        gid,
        errno: after,
    };
    trace::after_gid(&view, rc);
}

/// `_ibv_query_gid_table` through `call`, then, with tracing on, its line.
///
/// # Safety
/// As the export's: `t.ctx` NULL or a live context.
#[cold]
#[inline(never)]
pub unsafe fn query_gid_table(t: TableCall, call: TableFn) -> isize {
    settle();
    // SAFETY: forwarded from our caller.
    let rc = unsafe { call(&t) };
    if trace::on() {
        // SAFETY: forwarded from our caller.
        unsafe { trace_query_gid_table(&t, rc) };
    }
    rc
}

/// The trace of [`query_gid_table`], out of line (docs/security.md, the
/// stack budget).
///
/// # Safety
/// As [`query_gid_table`].
#[inline(never)]
unsafe fn trace_query_gid_table(t: &TableCall, rc: isize) {
    let _errno = ErrnoGuard::save();
    let view = TableView {
        // SAFETY: NULL or a live context.
        ctx: unsafe { Context::of(t.ctx) },
        entries_null: t.entries.is_null(),
        max_entries: t.max_entries,
        flags: t.flags,
        entry_size: t.entry_size,
    };
    trace::after_gid_table(&view, rc);
}
