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
//! **Why a stale entry can never produce a wrong result.** The cache is keyed
//! by `(context address, cmd_fd)`; a context freed and reallocated at the
//! same address with the same fd number may hit an old entry. A wrong
//! driver_id is always rejected with EINVAL before the kernel looks at the
//! command, so every EINVAL is re-checked with [`recheck`] (one probe) and the
//! command is retried after a rediscovery. The "unsupported" latches only
//! ever move from supported to unsupported, and both are properties of the
//! running kernel and the process's seccomp filter, which are the same for
//! every context of the process.

use super::exec;
use super::ioctl;
use crate::error::{Error, Result, errno, set_errno};
use core::ffi::c_int;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

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

/// The identity a cache entry is valid for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    pub ctx: usize,
    pub fd: c_int,
}

impl Key {
    /// A non-zero 32-bit tag of (ctx, fd).
    fn tag(self) -> u32 {
        let x = (self.ctx as u64) ^ (u64::from(self.fd as u32) << 48);
        ((x.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as u32) | 1
    }
    fn slot(self) -> &'static AtomicU64 {
        &CACHE[(self.fd as u32 as usize) % SLOTS]
    }
}

const SLOTS: usize = 256;
/// Direct-mapped by fd. An entry packs tag:32 | flags:8 | driver_id:16.
static CACHE: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
/// The driver_id found last: tried first by the next discovery.
static LAST_DRIVER_ID: AtomicU32 = AtomicU32::new(0);
/// Probe ids 0..MAX_DRIVER_ID (`enum rdma_driver_id` has 22 values in 2026).
const MAX_DRIVER_ID: u32 = 64;

fn pack(key: Key, r: Route) -> u64 {
    (u64::from(key.tag()) << 32) | (u64::from(r.flags) << 16) | u64::from(r.driver_id & 0xffff)
}

fn unpack(key: Key, v: u64) -> Option<Route> {
    ((v >> 32) as u32 == key.tag()).then_some(Route { driver_id: (v & 0xffff) as u32, flags: (v >> 16) as u8 })
}

/// The cached route, if any (no syscall).
pub fn peek(key: Key) -> Option<Route> {
    unpack(key, key.slot().load(Relaxed))
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
    let slot = key.slot();
    let mut cur = slot.load(Relaxed);
    loop {
        let Some(mut r) = unpack(key, cur) else {
            // Replaced meanwhile by another context on this fd: nothing to latch.
            return Route { driver_id: 0, flags: flag };
        };
        r.flags |= flag;
        match slot.compare_exchange_weak(cur, pack(key, r), Relaxed, Relaxed) {
            Ok(_) => return r,
            Err(now) => cur = now,
        }
    }
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
    key.slot().store(pack(key, route), Relaxed);
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
        assert_eq!(unpack(k, 0), None, "an empty slot never matches (tags are odd)");
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
        let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
        assert!(fd >= 0);
        let key = Key { ctx: 0x1000, fd };
        set_errno(1234);
        let r = get(key).expect("ENOTTY is not an error");
        assert!(r.gid_fallback() && !r.invoke_write());
        assert_eq!(errno(), 1234, "discovery leaves errno alone");
        unsafe { libc::close(fd) };
        let bad = Key { ctx: 0x2000, fd: 1_000_000 };
        assert_eq!(get(bad), Err(Error::sys(libc::EBADF)));
    }
}
