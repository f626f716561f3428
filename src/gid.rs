//! `_ibv_query_gid_ex` (rdma-core cmd_device.c `__ibv_query_gid_ex`): the
//! QUERY_GID_ENTRY ioctl, or the sysfs fallback when the kernel lacks it.
//! And [`query_gid_table`], the whole table in one QUERY_GID_TABLE ioctl,
//! for the `rsverbs` command (no C export).

use crate::abi::{ibv_context, ibv_gid_entry};
use crate::error::{Error, Result};
use crate::sysfs;
use crate::uverbs::{after_einval, exec, ioctl, ioctl_checked, route};
use route::{Key, Route};

/// One `_ibv_query_gid_ex` call: its arguments, as the caller gave them.
#[derive(Clone, Copy, Debug)]
pub struct GidQuery {
    pub ctx: *mut ibv_context,
    pub port_num: u32,
    pub gid_index: u32,
    pub entry: *mut ibv_gid_entry,
    pub flags: u32,
    pub entry_size: usize,
}

impl GidQuery {
    /// The route key: the context and its command fd.
    ///
    /// # Safety
    /// `ctx` must be a valid rdma-core context.
    #[inline]
    unsafe fn key(&self) -> Key {
        // SAFETY: ctx is valid; cmd_fd is a public frozen field.
        Key { ctx: self.ctx as usize, fd: unsafe { (*self.ctx).cmd_fd } }
    }

    /// The QUERY_GID_ENTRY ioctl for a driver_id.
    #[inline]
    fn command(&self, driver_id: u32) -> ioctl::Cmd<4> {
        ioctl::query_gid_entry(driver_id, self.port_num, self.gid_index, self.flags, self.entry as u64, self.entry_size as u16)
    }
}

/// # Safety
/// `q.ctx` must be a valid rdma-core context and `q.entry` writable for
/// `q.entry_size` bytes (both checked non-NULL by capi).
///
/// Always inlined: outlined (it has two callers, the export and the
/// hooks' query_c), the untraced call paid a call, a spill and a Result
/// return (BENCHMARKS.md, "What tracing costs when it is off").
#[inline(always)]
pub unsafe fn query_gid_ex(q: &GidQuery) -> Result<()> {
    // SAFETY: forwarded from our caller.
    let key = unsafe { q.key() };
    // The steady state: a known route, one ioctl, its answer.
    let first = match route::peek(key) {
        Some(route) if !route.gid_fallback() && q.entry_size <= MAX_ATTR_LEN => {
            match exec::ioctl(key.fd, &mut q.command(route.driver_id)) {
                Err(e) if matches!(e.code, libc::EINVAL | libc::ENOTTY | libc::EPROTONOSUPPORT) => Some((route, e)),
                other => return other,
            }
        }
        _ => None,
    };
    // SAFETY: forwarded from our caller.
    unsafe { slow(q, key, first) }
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
unsafe fn slow(q: &GidQuery, key: Key, first: Option<(Route, Error)>) -> Result<()> {
    let too_big = q.entry_size > MAX_ATTR_LEN;
    let build = |id| q.command(id);
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
                return fallback(q, key);
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
            fallback(q, key)
        }
        other => other,
    }
}

/// `__ibv_query_gid_ex`'s TRY_WRITE branch.
fn fallback(q: &GidQuery, key: Key) -> Result<()> {
    if q.flags != 0 {
        return Err(Error::quiet(libc::EOPNOTSUPP));
    }
    // SAFETY: forwarded from query_gid_ex's caller.
    unsafe { sysfs::query_gid_entry(q.ctx, key, q.port_num, q.gid_index, q.entry, q.entry_size) }
}

/// Every valid GID entry of every port of `ctx`'s device, in one
/// QUERY_GID_TABLE ioctl (rdma-core cmd_device.c `_ibv_query_gid_table`;
/// kernel uverbs_std_types_device.c, 5.10+), into `entries`; returns how
/// many it filled. Empty slots are simply absent. Err as the kernel answers:
/// ENOTTY or EPROTONOSUPPORT on kernels without the method, EINVAL when
/// `entries` is too small (the caller then reads entry by entry with
/// [`query_gid_ex`]).
///
/// `key` is the context's (its address and `cmd_fd`).
pub fn query_gid_table(key: Key, entries: &mut [ibv_gid_entry]) -> Result<usize> {
    let esz = size_of::<ibv_gid_entry>();
    // The attribute's length is a u16 (cmd_ioctl.c `fill_attr_out`).
    let n = entries.len().min(usize::from(u16::MAX) / esz);
    if n == 0 {
        return Err(Error::sys(libc::EINVAL));
    }
    let route = route::get(key)?;
    let mut num: u64 = 0;
    let addr = entries.as_mut_ptr() as u64;
    let num_addr = &mut num as *mut u64 as u64;
    let build = |id| ioctl::query_gid_table(id, esz as u64, 0, addr, (n * esz) as u16, num_addr);
    ioctl_checked(key, route, build)?;
    Ok((num as usize).min(n))
}
