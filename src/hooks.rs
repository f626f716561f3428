//! The exports' one check: whether an opt-in feature wants the call
//! (`RSVERBS_TRACE`, docs/trace.md; `RSVERBS_MCAST_IPJOIN`,
//! docs/ipjoin.md). One byte, loaded Relaxed: set until both variables are
//! read (a call before the constructor reads them itself), cleared for good
//! when both are off. The features' own code is out of line.

use crate::error::{errno, set_errno};
use crate::mcast::McastCall;
use crate::{ipjoin, trace};
use core::ffi::c_int;
use core::sync::atomic::{AtomicBool, Ordering::Relaxed};

static WANTED: AtomicBool = AtomicBool::new(true);

/// Whether a call must go through [`mcast`] or the trace.
#[inline(always)]
pub fn wanted() -> bool {
    // make bench's "untraced" contender: the check compiled out, to
    // measure what it costs (Cargo.toml, feature bench-untraced).
    if cfg!(feature = "bench-untraced") {
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

/// Attach or detach `c` through `call`: traced when tracing is on,
/// then the IP-level join or leave when `RSVERBS_MCAST_IPJOIN` is on. The
/// result and `errno` are `call`'s.
///
/// # Safety
/// As the exports': non-NULL pointers point at live rdma-core objects.
#[cold]
#[inline(never)]
pub unsafe fn mcast(c: McastCall, call: trace::McastFn) -> c_int {
    settle();
    // SAFETY: forwarded from our caller; the trace calls `call` when off.
    let rc = unsafe { trace::mcast(&c, call) };
    if ipjoin::on() {
        let saved = errno();
        // SAFETY: forwarded from our caller.
        unsafe { ipjoin::after_mcast(&c, rc) };
        set_errno(saved);
    }
    rc
}
