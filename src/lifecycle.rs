//! Load, fork and unload: the library's one constructor, its one
//! destructor and its one atfork handler. Each calls the features' own
//! hooks, in this order:
//!
//! - **load** (`.init_array`, ELF gABI; run for a preloaded, linked or
//!   dlopen'ed librsverbs alike): the fork watch first, so that a child
//!   forked before any verb call is covered; then the switches
//!   (`RSVERBS_TRACE` opens its sink, `RSVERBS_MCAST_IPJOIN`), which settle
//!   the exports' one check ([`hooks::settle`]).
//! - **fork**, in the child: the route gives up the write() fast path
//!   ([`route::no_fast_write`]); the IP join forgets the parent's counts
//!   and closes its inherited sockets ([`ipjoin::after_fork_in_child`]).
//! - **unload** (`.fini_array`, at exit or dlclose): the trace's last lines
//!   and its file closed ([`trace::at_unload`]), the IP join's sockets
//!   closed ([`ipjoin::at_unload`]), then this object's atfork handler is dropped
//!   (`__cxa_finalize`, below).
//!
//! No other module registers a constructor, a destructor or an atfork
//! handler (ctest/layering checks it).

use crate::uverbs::route;
use crate::{hooks, ipjoin, trace};
use core::ffi::{c_int, c_void};

unsafe extern "C" {
    /// glibc's registration behind `pthread_atfork` (the libc_nonshared.a
    /// wrapper passes the caller's `__dso_handle`, so that unloading the
    /// object can drop its handlers). Exported since glibc 2.3.2.
    fn __register_atfork(
        prepare: Option<extern "C" fn()>,
        parent: Option<extern "C" fn()>,
        child: Option<extern "C" fn()>,
        dso_handle: *const c_void,
    ) -> c_int;
    /// glibc stdlib/cxa_finalize.c: runs the `__cxa_atexit` handlers of
    /// `d` and drops its atfork handlers (`__unregister_atfork (d)`).
    fn __cxa_finalize(d: *const c_void);
    /// This object's handle, defined by the linker's crtbegin.
    static __dso_handle: u8;
}

#[used]
#[unsafe(link_section = ".init_array")]
static AT_LOAD: extern "C" fn() = at_load;

#[used]
#[unsafe(link_section = ".fini_array")]
static AT_UNLOAD: extern "C" fn() = at_unload;

fn dso_handle() -> *const c_void {
    (&raw const __dso_handle).cast()
}

extern "C" fn at_load() {
    // SAFETY: registering a handler that only touches atomics and closes
    // rsverbs' own sockets, with this object's own handle (what
    // pthread_atfork would pass).
    if unsafe { __register_atfork(None, None, Some(in_child), dso_handle()) } == 0 {
        route::forks_watched();
    }
    hooks::settle();
    trace::at_load();
}

/// The atfork child handler: the child's credentials are a new object, so
/// its write()s would meet the kernel's `ib_safe_file_access` (EACCES, and
/// one kernel log line): it switches to INVOKE_WRITE before its first call.
extern "C" fn in_child() {
    route::no_fast_write();
    ipjoin::after_fork_in_child();
}

/// At exit or dlclose. crtbegin's own destructor (`__do_global_dtors_aux`)
/// calls `__cxa_finalize(__dso_handle)` in a GNU ld link, but not in zig's:
/// there the atfork handler outlived a dlclose, and the next fork() called
/// into the unmapped object (SIGSEGV in the child; ctest/unload.sh). A
/// second call finds nothing left to run.
extern "C" fn at_unload() {
    trace::at_unload();
    ipjoin::at_unload();
    // SAFETY: this object's own handle; runs its remaining __cxa_atexit
    // handlers (none are registered by rsverbs) and drops its atfork handler.
    unsafe { __cxa_finalize(dso_handle()) };
}
