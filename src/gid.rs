//! `_ibv_query_gid_ex` (rdma-core cmd_device.c `__ibv_query_gid_ex`): the
//! QUERY_GID_ENTRY ioctl, or the sysfs fallback when the kernel lacks it.

use crate::abi::{ibv_context, ibv_gid_entry};
use crate::error::{Error, Result};
use crate::sysfs;
use crate::uverbs::{after_einval, exec, ioctl, ioctl_checked, route};
use route::Key;

/// # Safety
/// `ctx` must be a valid rdma-core context and `entry` writable for
/// `entry_size` bytes (both checked non-NULL by capi).
#[inline]
pub unsafe fn query_gid_ex(
    ctx: *mut ibv_context,
    port_num: u32,
    gid_index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> Result<()> {
    // SAFETY: ctx is valid; cmd_fd is a public frozen field.
    let key = Key { ctx: ctx as usize, fd: unsafe { (*ctx).cmd_fd } };
    // The steady state: a known route, one ioctl, its answer.
    let first = match route::peek(key) {
        Some(route) if !route.gid_fallback() && entry_size <= MAX_ATTR_LEN => {
            let mut cmd = ioctl::query_gid_entry(route.driver_id, port_num, gid_index, flags, entry as u64, entry_size as u16);
            match exec::ioctl(key.fd, &mut cmd) {
                Err(e) if matches!(e.code, libc::EINVAL | libc::ENOTTY | libc::EPROTONOSUPPORT) => Some((route, e)),
                other => return other,
            }
        }
        _ => None,
    };
    // SAFETY: forwarded from our caller.
    unsafe { slow(ctx, key, port_num, gid_index, entry, flags, entry_size, first) }
}

/// cmd_ioctl.c `fill_attr_out`: a length that does not fit the attribute's
/// u16 is a `buffer_error`, answered EINVAL (errno set) with no syscall.
const MAX_ATTR_LEN: usize = u16::MAX as usize;

/// Everything but the steady state: discovery, the oversize check, the
/// EINVAL re-check, the fallback latch and the sysfs fallback. `first` is
/// the fast path's answer when it already sent the command.
///
/// # Safety
/// As [`query_gid_ex`].
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
unsafe fn slow(
    ctx: *mut ibv_context,
    key: Key,
    port_num: u32,
    gid_index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
    first: Option<(route::Route, Error)>,
) -> Result<()> {
    let too_big = entry_size > MAX_ATTR_LEN;
    let build = |id| ioctl::query_gid_entry(id, port_num, gid_index, flags, entry as u64, entry_size as u16);
    let result = match first {
        Some((route, e)) if e.code == libc::EINVAL => after_einval(key, route, e, &build),
        Some((_, e)) => Err(e),
        None => {
            let route = match route::get(key) {
                Ok(r) => r,
                // rdma-core would not have made a syscall at all.
                Err(_) if too_big => return Err(Error::sys(libc::EINVAL)),
                Err(e) => return Err(e),
            };
            // cmd_fallback.c `_execute_ioctl_fallback`: once latched, the
            // fallback is taken directly, without the buffer_error check.
            if route.gid_fallback() {
                return fallback(ctx, key, port_num, gid_index, entry, flags, entry_size);
            }
            if too_big {
                return Err(Error::sys(libc::EINVAL));
            }
            ioctl_checked(key, route, build)
        }
    };
    match result {
        // ENOTTY: no ioctl framework; EPROTONOSUPPORT: no such method
        // (kernels before 5.10). Either latches the fallback.
        Err(e) if e.code == libc::ENOTTY || e.code == libc::EPROTONOSUPPORT => {
            route::latch(key, route::GID_FALLBACK);
            fallback(ctx, key, port_num, gid_index, entry, flags, entry_size)
        }
        other => other,
    }
}

/// `__ibv_query_gid_ex`'s TRY_WRITE branch.
fn fallback(
    ctx: *mut ibv_context,
    key: Key,
    port_num: u32,
    gid_index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> Result<()> {
    if flags != 0 {
        return Err(Error::quiet(libc::EOPNOTSUPP));
    }
    // SAFETY: forwarded from query_gid_ex's caller.
    unsafe { sysfs::query_gid_entry(ctx, key, port_num, gid_index, entry, entry_size) }
}
