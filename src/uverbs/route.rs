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
//! - The write() fast path for attach/detach: where rdma-core sends
//!   INVOKE_WRITE, the kernel's legacy `write()` of the same 32 bytes reaches
//!   the same handler more cheaply (docs/write-path.md). It is used only on
//!   the fd it was checked on (a uverbs character device), never in a forked
//!   child, and is given up for the whole process at the first EACCES (the
//!   kernel's `ib_safe_file_access`: credentials changed since the open).
//!
//! **Keyed by the context, as rdma-core's state is.** Routes are kept per
//! `struct ibv_context *`, never evicted (the lock-free table in `table`),
//! and not keyed by `cmd_fd`: rdma-core reads `cmd_fd` on
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
use super::table;
use crate::error::{ErrnoGuard, Error, Result, set_errno};
use core::fmt::Write;
use core::ffi::c_int;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};

/// Which kernel entry points one context may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    pub driver_id: u32,
    flags: u8,
    /// The fd (plus one) that attach/detach may `write()` to; 0: none.
    fast_fd: u16,
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
    /// Whether attach/detach on `fd` may take the write() fast path.
    #[inline]
    pub fn writes_to(self, fd: c_int) -> bool {
        self.fast_fd != 0 && i32::from(self.fast_fd) == fd.wrapping_add(1)
    }
}

/// The context a route belongs to, and the fd to probe it through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    pub ctx: usize,
    pub fd: c_int,
}

/// The driver_id found last: tried first by the next discovery.
static LAST_DRIVER_ID: AtomicU32 = AtomicU32::new(0);
/// Probe ids 0..MAX_DRIVER_ID (`enum rdma_driver_id` has 22 values in 2026).
const MAX_DRIVER_ID: u32 = 64;

/// A route as the table stores it: driver_id in bits 0..7, flags in 8..15,
/// the fast-path fd plus one in 16..30 (bit 31 is the table's).
fn pack(r: Route) -> u32 {
    (u32::from(r.fast_fd & 0x7fff) << 16) | (u32::from(r.flags) << 8) | (r.driver_id & 0xff)
}

fn unpack(v: u32) -> Route {
    Route { driver_id: v & 0xff, flags: (v >> 8) as u8, fast_fd: ((v >> 16) & 0x7fff) as u16 }
}

const FAST_FD_BITS: u32 = 0x7fff << 16;

/// Set for good once this process may no longer write() to fds it did not
/// open itself: in a forked child, and after an EACCES.
static NO_FAST_WRITE: AtomicBool = AtomicBool::new(false);

/// Turns the write() fast path off in this process, for every context.
pub fn no_fast_write() {
    NO_FAST_WRITE.store(true, Relaxed);
    table::update_all(|v| v & !FAST_FD_BITS);
}

/// Set once the library's atfork child handler is registered
/// (lifecycle.rs): only then may a context take the write() fast path,
/// which a forked child must give up ([`no_fast_write`]).
static FORKS_WATCHED: AtomicBool = AtomicBool::new(false);

/// Called by the library's constructor once its atfork handler is in place.
pub fn forks_watched() {
    FORKS_WATCHED.store(true, Relaxed);
}

/// The cached route, if any (no syscall, no lock).
#[inline]
pub fn peek(key: Key) -> Option<Route> {
    table::get(key.ctx).map(unpack)
}

/// The route for `key`: cached, or discovered now.
#[inline]
pub fn get(key: Key) -> Result<Route> {
    match peek(key) {
        Some(r) => Ok(r),
        None => discover(key),
    }
}

/// Records that the kernel refused a route for this context.
pub fn latch(key: Key, flag: u8) -> Route {
    let latched = Route { driver_id: 0, flags: flag, fast_fd: 0 };
    table::update(key.ctx, |old| old.unwrap_or(0) | pack(latched)).map_or(latched, unpack)
}

/// After a command answered EINVAL with `route`: was the driver_id stale?
/// `Ok(Some(new))` means yes, retry with `new`; `Ok(None)` means the EINVAL
/// was the kernel's real answer. `errno` is left as EINVAL either way.
#[cold]
#[inline(never)]
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
#[cold]
#[inline(never)]
fn discover(key: Key) -> Result<Route> {
    // The probes' errno is not the caller's; but a probe that fails for
    // good leaves its errno set, as rdma-core's failed ioctl does (a detach
    // that then counts as done keeps EIO: cmd_write.h `verbs_is_destroy_err`).
    let saved = ErrnoGuard::save();
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
            Err(e) => {
                saved.keep_current();
                return Err(Error::sys(e));
            }
        }
    }
    let route = match found {
        Some(driver_id) => {
            LAST_DRIVER_ID.store(driver_id, Relaxed);
            let invoke_write = has_ioctl_write(key.fd, driver_id);
            let flags = if invoke_write { 0 } else { NO_INVOKE_WRITE };
            Route { driver_id, flags, fast_fd: if invoke_write { fast_fd(key.fd) } else { 0 } }
        }
        // ENOTTY, or no id accepted: only the legacy routes remain. rdma-core
        // latches every ioctl as unsupported at context creation in that case
        // (cmd_fallback.c `_execute_ioctl_fallback`, ENOTTY → bitmap_fill).
        None => Route { driver_id: 0, flags: NO_IOCTL | NO_INVOKE_WRITE | GID_FALLBACK, fast_fd: 0 },
    };
    // A route seen through ENOTTY is cached only for a real uverbs device:
    // an ENOTTY from some other file (a stand-in fd) must not outlive this
    // context in the table, where a later context at the same address would
    // inherit it while rdma-core starts that one afresh.
    let cacheable = found.is_some() || is_uverbs_chardev(key.fd);
    // A latch recorded meanwhile (or before a rediscovery) is kept.
    let route = if cacheable {
        let kept = pack(Route { driver_id: 0, flags: GID_FALLBACK, fast_fd: 0 });
        table::update(key.ctx, |old| pack(route) | old.map_or(0, |v| v & kept))
            .map_or(route, unpack)
    } else {
        route
    };
    drop(saved);
    Ok(route)
}

/// The fast-path fd field for `fd`: `fd + 1` when this process may write()
/// attach/detach to it, else 0.
fn fast_fd(fd: c_int) -> u16 {
    let ok = FORKS_WATCHED.load(Relaxed)
        && !NO_FAST_WRITE.load(Relaxed) && (0..0x7ffe).contains(&fd) && is_uverbs_chardev(fd);
    if ok { (fd + 1) as u16 } else { 0 }
}

/// Whether `fd` is a uverbs character device: `/sys/dev/char/M:N/subsystem`
/// links to `.../infiniband_verbs` (kernel uverbs_main.c class "infiniband_verbs").
pub fn is_uverbs_chardev(fd: c_int) -> bool {
    // SAFETY: an all-zero stat is valid; fstat fills it or fails.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: st is a valid out-pointer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFCHR {
        return false;
    }
    // On the stack: the first call of a verb on a context comes here, and
    // allocates nothing (a failed malloc must not abort a verb that
    // rdma-core answers without allocating).
    let mut path = crate::os::Text::<64>::new();
    let _ = write!(path, "/sys/dev/char/{}:{}/subsystem", libc::major(st.st_rdev), libc::minor(st.st_rdev));
    let Some(path) = path.cstr() else { return false };
    let mut buf = [0u8; 256];
    // SAFETY: path is NUL-terminated; buf is writable for its length.
    let n = unsafe { libc::readlink(path.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    n > 0 && buf[..n as usize].ends_with(b"/infiniband_verbs")
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
    use crate::error::errno;

    #[test]
    fn pack_roundtrip() {
        let r = Route { driver_id: 14, flags: NO_INVOKE_WRITE | GID_FALLBACK, fast_fd: 0x7fff };
        assert_eq!(unpack(pack(r)), r);
        assert_eq!(pack(r) & (1 << 31), 0, "bit 31 is the table's");
    }

    #[test]
    fn route_predicates() {
        let ok = Route { driver_id: 14, flags: 0, fast_fd: 6 };
        assert!(ok.invoke_write() && !ok.gid_fallback());
        assert!(ok.writes_to(5) && !ok.writes_to(6) && !ok.writes_to(-1));
        let none = Route { fast_fd: 0, ..ok };
        assert!(!none.writes_to(-1) && !none.writes_to(0));
        let legacy = Route { driver_id: 0, flags: NO_IOCTL, fast_fd: 0 };
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

    /// A latch belongs to one context: another context's route is untouched.
    #[test]
    fn latch_is_per_context() {
        let (a, b) = (Key { ctx: 0x7100_0000_0000, fd: -1 }, Key { ctx: 0x7100_0000_0040, fd: -1 });
        table::update(a.ctx, |_| pack(Route { driver_id: 3, flags: 0, fast_fd: 0 }));
        table::update(b.ctx, |_| pack(Route { driver_id: 3, flags: 0, fast_fd: 0 }));
        latch(a, GID_FALLBACK);
        assert!(peek(a).is_some_and(|r| r.gid_fallback()) && peek(b).is_some_and(|r| !r.gid_fallback()));
    }

    /// After fork or an EACCES, no context keeps the write() fast path, and
    /// no new one gets it; the other route facts stay.
    #[test]
    fn no_fast_write_clears_every_route() {
        let k = Key { ctx: 0x7300_0000_0000, fd: 5 };
        let r = Route { driver_id: 14, flags: GID_FALLBACK, fast_fd: 6 };
        table::update(k.ctx, |_| pack(r));
        assert!(peek(k).is_some_and(|r| r.writes_to(5)));
        no_fast_write();
        assert_eq!(peek(k), Some(Route { fast_fd: 0, ..r }));
        assert_eq!(fast_fd(5), 0);
    }

    /// An ENOTTY route from a file that is not a uverbs device is not cached.
    #[test]
    fn enotty_from_a_non_uverbs_fd_is_not_cached() {
        // SAFETY: opening a path with a NUL-terminated literal.
        let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
        let k = Key { ctx: 0x7200_0000_0000, fd };
        assert!(get(k).is_ok_and(|r| r.gid_fallback()));
        assert_eq!(peek(k), None);
        // SAFETY: fd is ours.
        unsafe { libc::close(fd) };
    }
}
