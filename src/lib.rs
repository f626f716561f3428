//! # rsverbs
//!
//! Multicast attach and detach that undo themselves, and the GID table with
//! the index rdma_cm and perftest would pick, for Rust programs that already
//! have rdma-core objects from any binding (sideway, ibverbs, rrddmma,
//! rdma-sys, or their own FFI). The API is [`safe`]:
//!
//! - [`safe::Qp::attach`] is `ibv_attach_mcast`; the [`safe::Attachment`] it
//!   returns is `ibv_detach_mcast` when dropped (or [`safe::Attachment::detach`]);
//! - [`safe::Context::gid_table`] is `ibv_query_gid_table`, and
//!   [`safe::Context::gid_index_rdma_cm`], [`safe::Context::gid_index_perftest`]
//!   and [`safe::Context::gid_index_find`] choose a GID index;
//! - [`safe::Context::join`] makes the process a full or send-only member
//!   of a group without a QP (a sender's membership); the
//!   [`safe::Membership`] it returns leaves when dropped;
//! - [`safe::mgid_for_group`] is the MGID of an IPv4 or IPv6 group for a
//!   [`safe::GidType`] (RoCE v2, RoCE v1, InfiniBand), the one rdma_cm
//!   attaches, and [`safe::Context::gid_type`] the type of a GID index.
//!
//! ```no_run
//! use rsverbs::safe::{Attachment, Context, Qp, mgid_for_group};
//! use std::ffi::c_void;
//!
//! /// Attaches a UD QP to the group 239.1.1.1, under the MGID that rdma_cm
//! /// uses for the type of the source GID perftest would pick (RoCE v2
//! /// where the port has both: `::ffff:239.1.1.1`, not v1's
//! /// `ff0e::ffff:239.1.1.1`).
//! ///
//! /// `raw_ctx` and `raw_qp` are the `struct ibv_context *` and
//! /// `struct ibv_qp *` of any binding (sideway's `DeviceContext::context()`
//! /// and `QueuePair::qp()`, rrddmma's `as_raw()`, rdma-sys, ...).
//! ///
//! /// # Safety
//! /// Both are live, and the QP stays live as long as the attachment.
//! unsafe fn join<'q>(raw_ctx: *mut c_void, raw_qp: *mut c_void) -> std::io::Result<Attachment<'q>> {
//!     // SAFETY: the caller's promise.
//!     let (ctx, qp) = unsafe { (Context::from_raw(raw_ctx), Qp::<'q>::from_raw(raw_qp)) };
//!     let (ctx, qp) = (ctx.expect("a context"), qp.expect("a QP"));
//!     let sgid_index = ctx.gid_index_perftest(1)?; // or gid_index_rdma_cm, gid_index_find
//!     let mgid = mgid_for_group("239.1.1.1".parse().unwrap(), ctx.gid_type(1, sgid_index)?)?;
//!     qp.attach(&mgid, 0) // ibv_attach_mcast
//! }
//!
//! # let (raw_ctx, raw_qp) = (std::ptr::null_mut(), std::ptr::null_mut());
//! // SAFETY: raw_ctx and raw_qp from the binding, live meanwhile.
//! let member = unsafe { join(raw_ctx, raw_qp) }?;
//! // ... post receives: the group's datagrams arrive on the QP ...
//! member.detach()?; // ibv_detach_mcast; dropping it does the same
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! A whole program: examples/receiver.rs in the repository (`make example`
//! builds it), a receiver that keeps its attachments beside its QP in one
//! struct, so that they are detached before the QP is destroyed.
//!
//! The verbs run directly on the kernel's uverbs device, with the same
//! results and `errno` as rdma-core's `ibv_attach_mcast`,
//! `ibv_detach_mcast`, `ibv_query_gid`, `_ibv_query_gid_ex` and
//! `_ibv_query_gid_table` (rdma-core 33 to 65), reading only rdma-core's
//! public, frozen struct ABI. The same sources build `librsverbs.so.1`, a
//! versioned C-ABI drop-in for those five functions (`LD_PRELOAD` or
//! `-lrsverbs`); that library is built by the repository's Makefile, not by
//! Cargo, and a Rust dependent never builds it (docs/building.md).
//!
//! Features: `std` (default) gives [`safe`]. Without it the crate is a
//! `no_std` rlib with no public API beyond the unmangled `rsverbs_*` C
//! functions. A Rust program gets no constructor, destructor or atfork
//! handler from the crate (docs/rust.md). The modules not shown here are
//! internals, not part of the semver API.

// Module map, lowest layer first; a module imports only from its own
// layer or below, with no cycle (tests/layering.rs checks both):
// - [`abi`]: mirrors of the public rdma-core structs, and the words for
//   their fields; [`error`]: the one error type, `errno` and its guard;
//   [`mgid`]: multicast GIDs (v4-mapped, the kernel's multicast test,
//   scope); `memcheck`: valgrind client requests for what the kernel wrote;
//   `os`: the C library's calls where a Rust program would use `std`
//   (files, pid, clock, a cell written once); `sys`: the raw syscalls,
//   never a cancellation point (open, read, write, close, futex);
// - [`uverbs`]: command encoding (`ioctl`, `write`), the only syscalls on
//   `cmd_fd` (`exec`), driver_id discovery and per-context routes (`route`);
// - [`rdma_core`]: what differs by rdma-core release and provider; `env`:
//   the environment switches, rsverbs' and rdma-core's;
// - [`view`]: the safe views of rdma-core objects that the features get;
// - [`sysfs`], [`gid`], [`mcast`]: the verbs (`sysfs`: the GID family's
//   fallback for old kernels, `sysfs::table` the table's walk);
// - `port`: a QP's port and its netdevs, for the features; [`select`]:
//   GID selection (the index rdma_cm and perftest pick, a filter);
// - [`registry`], [`trace`]: `RSVERBS_TRACE`, its hints, and the attachment
//   registry they read (docs/trace.md); `ipjoin`: `RSVERBS_MCAST_IPJOIN`,
//   the opt-in IP-level join (docs/ipjoin.md);
// - `hooks`: the exports' one check, and the one path from the exports to
//   the features;
// - `lifecycle`: load, fork and unload (the one constructor, destructor
//   and atfork handler), in the C library's build only (`rsverbs_clib`);
//   [`capi`]: the exports, pointer checks, symbol
//   versions; [`safe`]: the safe Rust API over them (docs/rust.md), with
//   the feature `std` (on by default);
// - `runtime`: in the C library's build only (`--cfg rsverbs_clib`,
//   docs/building.md), the panic handler (abort) and the allocator
//   (malloc); a Rust dependent, with or without `std`, never gets them.
#![cfg_attr(not(any(test, feature = "std")), no_std)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

extern crate alloc;

// The C library's build (the Makefile's --cfg rsverbs_clib) brings its own
// panic handler and allocator (src/runtime.rs): never beside std's.
#[cfg(all(rsverbs_clib, feature = "std", not(test)))]
compile_error!("--cfg rsverbs_clib is the C library's no_std build: pass --no-default-features too");

#[doc(hidden)]
pub mod abi;
#[doc(hidden)]
pub mod capi;
mod env;
#[doc(hidden)]
pub mod error;
#[doc(hidden)]
pub mod gid;
mod hooks;
mod ipjoin;
// The constructor, destructor and atfork handler: the C library's only. A
// Rust program that depends on the crate gets none of them (docs/rust.md).
#[cfg(rsverbs_clib)]
mod lifecycle;
#[doc(hidden)]
pub mod mcast;
mod memcheck;
#[doc(hidden)]
pub mod mgid;
mod os;
mod port;
#[doc(hidden)]
pub mod rdma_core;
#[doc(hidden)]
pub mod registry;
#[cfg(all(rsverbs_clib, not(test)))]
mod runtime;
#[cfg(feature = "std")]
pub mod safe;
#[doc(hidden)]
pub mod select;
mod sys;
#[doc(hidden)]
pub mod sysfs;
#[doc(hidden)]
pub mod trace;
#[doc(hidden)]
pub mod uverbs;
#[doc(hidden)]
pub mod view;

/// Releases what the C library's unload releases (src/lifecycle.rs
/// `at_unload`): the trace file, the IP join's sockets and the fabric
/// join's rdma_cm fd, which the engine keeps for the process's life
/// otherwise. For `rsverbs selftest` (src/tool), which links the crate and
/// checks after its run that the process's fds are as before it; nothing
/// joins in the process after it.
#[doc(hidden)]
pub fn release_as_at_unload() {
    trace::at_unload();
    ipjoin::at_unload();
}

// The crate's README (Cargo.toml readme) is compiled as a doctest.
#[cfg(all(doctest, feature = "std"))]
#[doc = include_str!("../README.crate.md")]
struct ReadmeDoctest;

// docs/rust.md too: its example and its recipes for each Rust RDMA binding
// (compiled against stand-ins of the bindings' accessors, docs/rust.md
// "Recipes"). Cargo.toml's include ships it, for the packaged crate's tests.
#[cfg(all(doctest, feature = "std"))]
#[doc = include_str!("../docs/rust.md")]
struct RustMdDoctest;
