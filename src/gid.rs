//! `_ibv_query_gid_ex` (rdma-core cmd_device.c `__ibv_query_gid_ex`): the
//! QUERY_GID_ENTRY ioctl, or the sysfs fallback when the kernel lacks it.

use crate::abi::{ibv_context, ibv_gid_entry};
use crate::error::{Error, Result};
use crate::sysfs;
use crate::uverbs::{ioctl, ioctl_checked, route};
use route::Key;

/// # Safety
/// `ctx` must be a valid rdma-core context and `entry` writable for
/// `entry_size` bytes (both checked non-NULL by capi).
pub unsafe fn query_gid_ex(
    ctx: *mut ibv_context,
    port_num: u32,
    gid_index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> Result<()> {
    // cmd_ioctl.c `fill_attr_out`: a length that does not fit the attribute's
    // u16 is a `buffer_error`, answered EINVAL (errno set) with no syscall.
    let too_big = entry_size > usize::from(u16::MAX);
    // SAFETY: ctx is valid; cmd_fd is a public frozen field.
    let key = Key { ctx: ctx as usize, fd: unsafe { (*ctx).cmd_fd } };
    let route = match route::get(key) {
        Ok(r) => r,
        // rdma-core would not have made a syscall at all.
        Err(_) if too_big => return Err(Error::sys(libc::EINVAL)),
        Err(e) => return Err(e),
    };
    // cmd_fallback.c `_execute_ioctl_fallback`: once latched, the fallback is
    // taken directly, without the buffer_error check.
    if !route.gid_fallback() {
        if too_big {
            return Err(Error::sys(libc::EINVAL));
        }
        let build = |id| ioctl::query_gid_entry(id, port_num, gid_index, flags, entry as u64, entry_size as u16);
        match ioctl_checked(key, route, build) {
            // ENOTTY: no ioctl framework; EPROTONOSUPPORT: no such method
            // (kernels before 5.10). Either latches the fallback.
            Err(e) if e.code == libc::ENOTTY || e.code == libc::EPROTONOSUPPORT => {
                route::latch(key, route::GID_FALLBACK);
            }
            other => return other,
        }
    }
    if flags != 0 {
        return Err(Error::quiet(libc::EOPNOTSUPP));
    }
    // SAFETY: forwarded from our caller.
    unsafe { sysfs::query_gid_entry(ctx, key, port_num, gid_index, entry, entry_size) }
}
