//! # rsverbs
//!
//! `ibv_attach_mcast`, `ibv_detach_mcast`, `ibv_query_gid`,
//! `_ibv_query_gid_ex` and `_ibv_query_gid_table` of libibverbs,
//! reimplemented directly on the kernel's uverbs device, with the same C
//! signatures, return values and `errno` as the installed rdma-core (33 to
//! 65). They work on objects created by the real rdma-core, reading only its
//! public, frozen struct ABI.
//!
//! Two ways to use it, with no source change:
//! - `LD_PRELOAD=librsverbs.so.1 program` on top of rdma-core;
//! - relink: `cc app.c $(pkg-config --cflags --libs rsverbs)`, which puts
//!   `-lrsverbs` before `-libverbs`.
//!
//! Module map, lowest layer first; a module imports only from its own
//! layer or below, with no cycle (tests/layering.rs checks both):
//! - [`abi`]: mirrors of the public rdma-core structs, and the words for
//!   their fields; [`error`]: the one error type, `errno` and its guard;
//!   [`mgid`]: multicast GIDs (v4-mapped, the kernel's multicast test,
//!   scope); `memcheck`: valgrind client requests for what the kernel wrote;
//!   `os`: the C library's calls where a Rust program would use `std`
//!   (files, pid, clock, a cell written once);
//! - [`uverbs`]: command encoding (`ioctl`, `write`), the only syscalls on
//!   `cmd_fd` (`exec`), driver_id discovery and per-context routes (`route`);
//! - [`rdma_core`]: what differs by rdma-core release and provider; `env`:
//!   the environment switches, rsverbs' and rdma-core's;
//! - [`view`]: the safe views of rdma-core objects that the features get;
//! - [`sysfs`], [`gid`], [`mcast`]: the verbs (`sysfs`: the GID family's
//!   fallback for old kernels, `sysfs::table` the table's walk);
//! - `port`: a QP's port and its netdevs, for the features; [`select`]:
//!   GID selection (the index rdma_cm and perftest pick, a filter);
//! - [`registry`], [`trace`]: `RSVERBS_TRACE`, its hints, and the attachment
//!   registry they read (docs/trace.md); `ipjoin`: `RSVERBS_MCAST_IPJOIN`,
//!   the opt-in IP-level join (docs/ipjoin.md);
//! - `hooks`: the exports' one check, and the one path from the exports to
//!   the features;
//! - `lifecycle`: load, fork and unload (the one constructor, destructor
//!   and atfork handler), in the C library's build only (`rsverbs_clib`);
//!   [`capi`]: the exports, pointer checks, symbol
//!   versions; [`safe`]: the safe Rust API over them (docs/rust.md), with
//!   the feature `std` (on by default);
//! - `runtime`: in the C library's build only (`--cfg rsverbs_clib`,
//!   docs/building.md), the panic handler (abort) and the allocator
//!   (malloc); a Rust dependent, with or without `std`, never gets them.
#![cfg_attr(not(any(test, feature = "std")), no_std)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

extern crate alloc;

// The C library's build (the Makefile's --cfg rsverbs_clib) brings its own
// panic handler and allocator (src/runtime.rs): never beside std's.
#[cfg(all(rsverbs_clib, feature = "std", not(test)))]
compile_error!("--cfg rsverbs_clib is the C library's no_std build: pass --no-default-features too");

pub mod abi;
pub mod capi;
mod env;
pub mod error;
pub mod gid;
mod hooks;
mod ipjoin;
// The constructor, destructor and atfork handler: the C library's only. A
// Rust program that depends on the crate gets none of them (docs/rust.md).
#[cfg(rsverbs_clib)]
mod lifecycle;
pub mod mcast;
mod memcheck;
pub mod mgid;
mod os;
mod port;
pub mod rdma_core;
pub mod registry;
#[cfg(all(rsverbs_clib, not(test)))]
mod runtime;
#[cfg(feature = "std")]
pub mod safe;
pub mod select;
pub mod sysfs;
pub mod trace;
pub mod uverbs;
pub mod view;
