//! How to reach the kernel for one context: its ioctl `driver_id`, and which
//! routes the kernel offers. Discovered once per context, cached lock-free.
//!
//! rdma-core keeps this in private `verbs_ex_private` (`driver_id`,
//! `use_ioctl_write`, `unsupported_ioctls`). rsverbs does not read private
//! state; it asks the kernel, with probes that have no side effects:
//! - driver_id: an ioctl for a method that does not exist answers EINVAL when
//!   `hdr.driver_id != uapi->driver_id` and EPROTONOSUPPORT otherwise
//!   (uverbs_ioctl.c `ib_uverbs_cmd_verbs` checks the id before the lookup);
//!   ENOTTY means no ioctl framework at all.
//! - INVOKE_WRITE: rdma-core's `has_ioctl_write` (device.c), the same command.
//!
//! **Keyed by the context, as rdma-core's state is.** Routes are kept per
//! `struct ibv_context *`, never evicted (a lock-free direct-mapped table in
//! front of a map), and not keyed by `cmd_fd`: rdma-core reads `cmd_fd` on
//! every call but latches "unsupported" once per context (cmd_fallback.c
//! `_execute_ioctl_fallback`), so a latched context keeps using the fallback
//! whatever its fd says.
//!
//! **Why a stale entry can never produce a wrong result.** A context freed
//! and reallocated at the same address finds the old entry. A wrong
//! driver_id is always rejected with EINVAL before the kernel looks at the
//! command, so every EINVAL is re-checked with [`recheck`] (one probe) and the
//! command is retried after a rediscovery. The "unsupported" latches only
//! move from supported to unsupported and are properties of the running
//! kernel and the process's seccomp filter, the same for every context; the
//! one trace a reused address can show is on kernels without QUERY_GID_ENTRY
//! (before 5.10): the new context's first query skips the ioctl attempt that
//! rdma-core would make (and its EPROTONOSUPPORT in `errno`).

use super::exec;
use super::ioctl;
use crate::error::{Error, Result, errno, set_errno};
use core::ffi::c_int;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

/// Which kernel entry points one context may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    pub driver_id: u32,
    flags: u8,
}

/// No `RDMA_VERBS_IOCTL` at all (ENOTTY): every ioctl verb falls back.
const NO_IOCTL: u8 = 1;
/// `has_ioctl_write` said no: write commands go through `write()`.
const NO_INVOKE_WRITE: u8 = 2;
/// QUERY_GID_ENTRY answered ENOTTY/EPROTONOSUPPORT: use the sysfs fallback
/// (rdma-core's `query_gid_kernel_cap` bit, cmd_device.c).
pub const GID_FALLBACK: u8 = 4;

impl Route {
    pub fn invoke_write(self) -> bool {
        self.flags & (NO_IOCTL | NO_INVOKE_WRITE) == 0
    }
    pub fn gid_fallback(self) -> bool {
        self.flags & (NO_IOCTL | GID_FALLBACK) != 0
    }
}

/// The context a route belongs to, and the fd to probe it through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    pub ctx: usize,
    pub fd: c_int,
}

impl Key {
    /// The fast table's slot for this context.
    fn slot(self) -> &'static AtomicU64 {
        let h = (self.ctx as u64 >> 3).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        &FAST[(h >> 56) as usize % SLOTS]
    }
}

const SLOTS: usize = 256;
/// Lock-free front table. An entry packs the whole context address
/// ((ctx >> 3) in bits 16..63, exact for user addresses below 2^47), the
/// flags (bits 8..15) and the driver_id (bits 0..7).
static FAST: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
/// Every route, by context address: the table of record, never evicted, so
/// per-context latches survive collisions in [`FAST`]. It holds one small
/// entry per context address ever used; freed contexts' addresses are
/// reused by malloc, which keeps it small.
static ALL: LazyLock<Mutex<HashMap<usize, Route>>> = LazyLock::new(|| Mutex::new(HashMap::new()));
/// The driver_id found last: tried first by the next discovery.
static LAST_DRIVER_ID: AtomicU32 = AtomicU32::new(0);
/// Probe ids 0..MAX_DRIVER_ID (`enum rdma_driver_id` has 22 values in 2026).
const MAX_DRIVER_ID: u32 = 64;
/// Context addresses at or above this do not fit the fast table's packing.
const FAST_LIMIT: usize = 1 << 47;

fn pack(key: Key, r: Route) -> u64 {
    ((key.ctx as u64 >> 3) << 16) | (u64::from(r.flags) << 8) | u64::from(r.driver_id & 0xff)
}

fn unpack(key: Key, v: u64) -> Option<Route> {
    (v >> 16 == key.ctx as u64 >> 3 && v != 0).then_some(Route { driver_id: (v & 0xff) as u32, flags: (v >> 8) as u8 })
}

fn all() -> std::sync::MutexGuard<'static, HashMap<usize, Route>> {
    // A poisoned lock cannot happen (panic = "abort"); take the data anyway.
    ALL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Stores a route for `key` in both tables.
fn store(key: Key, r: Route) {
    all().insert(key.ctx, r);
    if key.ctx < FAST_LIMIT {
        key.slot().store(pack(key, r), Relaxed);
    }
}

/// The cached route, if any (no syscall).
pub fn peek(key: Key) -> Option<Route> {
    if key.ctx < FAST_LIMIT
        && let Some(r) = unpack(key, key.slot().load(Relaxed))
    {
        return Some(r);
    }
    let r = all().get(&key.ctx).copied()?;
    if key.ctx < FAST_LIMIT {
        key.slot().store(pack(key, r), Relaxed);
    }
    Some(r)
}

/// The route for `key`: cached, or discovered now.
pub fn get(key: Key) -> Result<Route> {
    match peek(key) {
        Some(r) => Ok(r),
        None => discover(key),
    }
}

/// Records that the kernel refused a route for this context.
pub fn latch(key: Key, flag: u8) -> Route {
    let mut map = all();
    let r = map.entry(key.ctx).or_insert(Route { driver_id: 0, flags: 0 });
    r.flags |= flag;
    let r = *r;
    drop(map);
    if key.ctx < FAST_LIMIT {
        key.slot().store(pack(key, r), Relaxed);
    }
    r
}

/// After a command answered EINVAL with `route`: was the driver_id stale?
/// `Ok(Some(new))` means yes, retry with `new`; `Ok(None)` means the EINVAL
/// was the kernel's real answer. `errno` is left as EINVAL either way.
pub fn recheck(key: Key, route: Route) -> Result<Option<Route>> {
    let stale = probe(key.fd, route.driver_id) == Err(libc::EINVAL);
    let out = if stale { discover(key).map(|r| (r.driver_id != route.driver_id).then_some(r)) } else { Ok(None) };
    set_errno(libc::EINVAL);
    out
}

/// One driver_id probe: Ok(()) for a match.
fn probe(fd: c_int, driver_id: u32) -> core::result::Result<(), c_int> {
    let mut cmd = ioctl::probe(driver_id);
    match exec::ioctl(fd, &mut cmd) {
        // No method answers the probe, so "success" cannot happen; a kernel
        // that accepted it has certainly accepted the id.
        Ok(()) => Ok(()),
        Err(e) if e.code == libc::EPROTONOSUPPORT => Ok(()),
        Err(e) => Err(e.code),
    }
}

/// Finds the driver_id and the routes, stores them, and leaves `errno` as it
/// was (the probes are rsverbs' own, not the caller's). Errors such as EBADF
/// (closed fd) are returned with `errno` set, as the caller's syscall would.
fn discover(key: Key) -> Result<Route> {
    let saved = errno();
    let hint = LAST_DRIVER_ID.load(Relaxed);
    let mut found = None;
    for id in core::iter::once(hint).chain((0..MAX_DRIVER_ID).filter(|&i| i != hint)) {
        match probe(key.fd, id) {
            Ok(()) => {
                found = Some(id);
                break;
            }
            Err(libc::EINVAL) => continue,
            Err(libc::ENOTTY) => {
                found = None;
                break;
            }
            Err(e) => return Err(Error::sys(e)),
        }
    }
    let route = match found {
        Some(driver_id) => {
            LAST_DRIVER_ID.store(driver_id, Relaxed);
            let flags = if has_ioctl_write(key.fd, driver_id) { 0 } else { NO_INVOKE_WRITE };
            Route { driver_id, flags }
        }
        // ENOTTY, or no id accepted: only the legacy routes remain. rdma-core
        // latches every ioctl as unsupported at context creation in that case
        // (cmd_fallback.c `_execute_ioctl_fallback`, ENOTTY → bitmap_fill).
        None => Route { driver_id: 0, flags: NO_IOCTL | NO_INVOKE_WRITE | GID_FALLBACK },
    };
    // A latch recorded meanwhile (or before a rediscovery) is kept.
    let route = match all().get(&key.ctx) {
        Some(old) => Route { flags: route.flags | (old.flags & GID_FALLBACK), ..route },
        None => route,
    };
    store(key, route);
    set_errno(saved);
    Ok(route)
}

/// rdma-core device.c `has_ioctl_write`: INVOKE_WRITE carrying only
/// `WRITE_CMD = QUERY_DEVICE` (the kernel answers ENOSPC for the missing
/// CORE_IN/OUT without running the handler). EPROTONOSUPPORT or ENOTTY mean
/// no; any other answer means yes.
fn has_ioctl_write(fd: c_int, driver_id: u32) -> bool {
    const CMD_QUERY_DEVICE: u64 = 1;
    let mut cmd = ioctl::invoke_write_probe(driver_id, CMD_QUERY_DEVICE);
    !matches!(exec::ioctl(fd, &mut cmd), Err(e) if e.code == libc::EPROTONOSUPPORT || e.code == libc::ENOTTY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_roundtrip_and_tag_mismatch() {
        let k = Key { ctx: 0x5555_0000_1230, fd: 3 };
        let r = Route { driver_id: 14, flags: NO_INVOKE_WRITE };
        assert_eq!(unpack(k, pack(k, r)), Some(r));
        let other = Key { ctx: 0x5555_0000_1240, fd: 3 };
        assert_eq!(unpack(other, pack(k, r)), None);
        assert_eq!(unpack(Key { ctx: 0x5555_0000_1230, fd: 9 }, pack(k, r)), Some(r), "the fd is not part of the key");
        assert_eq!(unpack(k, 0), None);
    }

    #[test]
    fn route_predicates() {
        let ok = Route { driver_id: 14, flags: 0 };
        assert!(ok.invoke_write() && !ok.gid_fallback());
        let legacy = Route { driver_id: 0, flags: NO_IOCTL };
        assert!(!legacy.invoke_write() && legacy.gid_fallback());
    }

    #[test]
    fn discovery_on_a_non_uverbs_fd_reports_the_kernel_errno() {
        // /dev/null has no such ioctl: ENOTTY, so only the legacy routes.
        // SAFETY: the path is a NUL-terminated C string literal.
        let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
        assert!(fd >= 0);
        let key = Key { ctx: 0x1000, fd };
        set_errno(1234);
        let r = get(key).expect("ENOTTY is not an error");
        assert!(r.gid_fallback() && !r.invoke_write());
        assert_eq!(errno(), 1234, "discovery leaves errno alone");
        // SAFETY: fd was opened above and is closed once.
        unsafe { libc::close(fd) };
        let bad = Key { ctx: 0x2000, fd: 1_000_000 };
        assert_eq!(get(bad), Err(Error::sys(libc::EBADF)));
    }

    /// Contexts that share a fast slot keep their own latches (the table
    /// of record never evicts).
    #[test]
    fn latches_survive_fast_table_collisions() {
        let a = Key { ctx: 0x7000_0000_0000, fd: -1 };
        let mut b = Key { ctx: a.ctx + 8, fd: -1 };
        while !core::ptr::eq(b.slot(), a.slot()) {
            b.ctx += 8;
        }
        store(a, Route { driver_id: 14, flags: 0 });
        latch(a, GID_FALLBACK);
        store(b, Route { driver_id: 14, flags: 0 });
        assert!(peek(a).is_some_and(|r| r.gid_fallback()), "a's latch survives b taking the slot");
        assert!(peek(b).is_some_and(|r| !r.gid_fallback()));
    }
}
