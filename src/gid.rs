//! The GID family of rdma-core (libibverbs/cmd_device.c and verbs.c, the
//! same text from 33.0 to 65.0, docs/rdma-core-releases.md):
//! - `_ibv_query_gid_ex` (`__ibv_query_gid_ex`): the QUERY_GID_ENTRY ioctl,
//!   or the sysfs fallback when the kernel lacks it;
//! - `ibv_query_gid` ([`query_gid`]): the same command into an entry of its
//!   own, the GID alone in the fallback;
//! - `_ibv_query_gid_table` ([`query_gid_table_c`]): the QUERY_GID_TABLE
//!   ioctl, or the sysfs walk of `query_gid_table_fb` (`sysfs::table`).
//!
//! All three share rdma-core's one "the kernel has no GID methods" latch
//! per context (`query_gid_kernel_cap`): `send`.
//! And [`query_gid_table`], the whole table in one QUERY_GID_TABLE ioctl,
//! for the `rsverbs` command and the features.

use crate::abi::{ibv_context, ibv_gid, ibv_gid_entry};
use crate::error::{Error, Result};
use crate::sysfs::{self, Want};
use crate::uverbs::ioctl::Cmd;
use crate::uverbs::{after_einval, exec, ioctl, ioctl_checked, route};
use alloc::vec::Vec;
use core::ffi::c_int;
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
    unsafe { entry(q, Want::ALL) }
}

/// `__ibv_query_gid_ex` with rdma-core's `fallback_attr_mask`.
///
/// # Safety
/// As [`query_gid_ex`].
#[inline(always)]
unsafe fn entry(q: &GidQuery, want: Want) -> Result<()> {
    // SAFETY: forwarded from our caller.
    let key = unsafe { q.key() };
    let first = match fast(key, q.entry_size > MAX_ATTR_LEN, |id| q.command(id)) {
        Ok(done) => return done,
        Err(first) => first,
    };
    // SAFETY: forwarded from our caller.
    unsafe { entry_slow(q, key, first, want) }
}

/// [`entry`] past the steady state: [`slow`], then the fallback.
///
/// # Safety
/// As [`query_gid_ex`].
#[cold]
#[inline(never)]
unsafe fn entry_slow(q: &GidQuery, key: Key, first: Option<(Route, Error)>, want: Want) -> Result<()> {
    match slow(key, first, q.entry_size > MAX_ATTR_LEN, &|id| q.command(id)) {
        Sent::Kernel(result) => result,
        // SAFETY: forwarded from our caller.
        Sent::Fallback => unsafe { fallback(q, key, want) },
    }
}

/// cmd_ioctl.c `fill_attr_out`: a length that does not fit the attribute's
/// u16 is a `buffer_error`, answered EINVAL (errno set) with no syscall.
const MAX_ATTR_LEN: usize = u16::MAX as usize;

/// The most GID entries one QUERY_GID_TABLE answer can carry: the output
/// attribute's length is a u16, so 2047 entries of 32 bytes.
pub const TABLE_MAX: usize = MAX_ATTR_LEN / size_of::<ibv_gid_entry>();

/// A zeroed buffer of [`TABLE_MAX`] entries (64 KiB, on the heap: no verb
/// may need more than 4 KiB of stack, docs/security.md): room for any
/// device's whole table in one QUERY_GID_TABLE. None when the allocation
/// fails (its callers then answer ENOMEM or skip their work).
pub fn table_buffer() -> Option<Vec<ibv_gid_entry>> {
    let zero = ibv_gid_entry { gid: ibv_gid { raw: [0; 16] }, gid_index: 0, port_num: 0, gid_type: 0, ndev_ifindex: 0 };
    crate::os::try_filled(TABLE_MAX, zero)
}

/// What a GID-family command came to (cmd_fallback.c
/// `_execute_ioctl_fallback`): the kernel's answer (or rdma-core's own
/// EINVAL for a `buffer_error`), or TRY_WRITE: the sysfs fallback.
enum Sent {
    Kernel(Result<()>),
    Fallback,
}

/// Sends the GID-family command `build` makes for a driver_id, as
/// `execute_ioctl_fallback(ctx, query_gid_kernel_cap, …)` does. `too_big`:
/// the command has a `buffer_error` (an output longer than 65535 bytes).
#[inline(always)]
fn send(key: Key, too_big: bool, build: impl Fn(u32) -> Cmd<4>) -> Sent {
    match fast(key, too_big, &build) {
        Ok(done) => Sent::Kernel(done),
        Err(first) => slow(key, first, too_big, &build),
    }
}

/// The steady state: a known route, one ioctl, its answer (`Ok`). `Err`:
/// what [`slow`] needs, the fast path's answer when it sent the command.
/// The caller goes on to [`slow`] out of line, so that the steady state
/// stays as short as one export's (BENCHMARKS.md).
#[inline(always)]
fn fast(key: Key, too_big: bool, build: impl Fn(u32) -> Cmd<4>) -> core::result::Result<Result<()>, Option<(Route, Error)>> {
    match route::peek(key) {
        Some(route) if !route.gid_fallback() && !too_big => match exec::ioctl(key.fd, &mut build(route.driver_id)) {
            Err(e) if matches!(e.code, libc::EINVAL | libc::ENOTTY | libc::EPROTONOSUPPORT) => Err(Some((route, e))),
            other => Ok(other),
        },
        _ => Err(None),
    }
}

/// Everything but the steady state: discovery, the oversize check, the
/// EINVAL re-check, the fallback latch. `first` is the fast path's answer
/// when it already sent the command.
#[cold]
#[inline(never)]
fn slow(key: Key, first: Option<(Route, Error)>, too_big: bool, build: &dyn Fn(u32) -> Cmd<4>) -> Sent {
    let result = match first {
        Some((route, e)) if e.code == libc::EINVAL => after_einval(key, route, e, build),
        Some((_, e)) => Err(e),
        None => {
            let route = match route::get(key) {
                Ok(r) => r,
                // rdma-core would not have made a syscall at all.
                Err(_) if too_big => return Sent::Kernel(Err(Error::sys(libc::EINVAL))),
                Err(e) => return Sent::Kernel(Err(e)),
            };
            // cmd_fallback.c `_execute_ioctl_fallback`: once latched, the
            // fallback is taken directly, without the buffer_error check.
            if route.gid_fallback() {
                return Sent::Fallback;
            }
            if too_big {
                return Sent::Kernel(Err(Error::sys(libc::EINVAL)));
            }
            ioctl_checked(key, route, build)
        }
    };
    match result {
        // ENOTTY: no ioctl framework; EPROTONOSUPPORT: no such method
        // (kernels before 5.10). Either latches the fallback.
        Err(e) if e.code == libc::ENOTTY || e.code == libc::EPROTONOSUPPORT => {
            route::latch(key, route::GID_FALLBACK);
            Sent::Fallback
        }
        other => Sent::Kernel(other),
    }
}

/// `__ibv_query_gid_ex`'s TRY_WRITE branch.
///
/// # Safety
/// As [`query_gid_ex`].
#[cold]
#[inline(never)]
unsafe fn fallback(q: &GidQuery, key: Key, want: Want) -> Result<()> {
    if q.flags != 0 {
        return Err(Error::quiet(libc::EOPNOTSUPP));
    }
    // SAFETY: forwarded from query_gid_ex's caller.
    unsafe { sysfs::query_gid_entry(q.ctx, key, q.port_num, q.gid_index, q.entry, q.entry_size, want) }
}

/// One `ibv_query_gid` call: its arguments, as the caller gave them.
#[derive(Clone, Copy, Debug)]
pub struct GidCall {
    pub ctx: *mut ibv_context,
    pub port_num: u8,
    pub index: c_int,
    pub gid: *mut ibv_gid,
}

/// `ibv_query_gid` (rdma-core verbs.c): `__ibv_query_gid_ex(context,
/// port_num, index, &entry, 0, sizeof(entry), VERBS_QUERY_GID_ATTR_GID)`
/// into a zeroed entry of its own. Returns the GID, or the error that
/// `__ibv_query_gid_ex` returned: ENODATA for an empty entry, which
/// `ibv_query_gid` answers with 0 and the zero GID (error.rs `to_c_gid`).
/// `c.gid` is not touched.
///
/// # Safety
/// `c.ctx` must be a valid rdma-core context (checked non-NULL by capi).
#[inline(always)]
pub unsafe fn query_gid(c: &GidCall) -> Result<[u8; 16]> {
    // SAFETY: all-zero is a valid ibv_gid_entry (`struct ibv_gid_entry entry = {}`).
    let mut e: ibv_gid_entry = unsafe { core::mem::zeroed() };
    let q = GidQuery {
        ctx: c.ctx,
        port_num: u32::from(c.port_num),
        gid_index: c.index as u32,
        entry: &mut e,
        flags: 0,
        entry_size: size_of::<ibv_gid_entry>(),
    };
    // SAFETY: ctx is valid (our caller's contract); the entry is ours.
    unsafe { entry(&q, Want::GID) }?;
    // SAFETY: reading the raw view of a plain byte union.
    Ok(unsafe { e.gid.raw })
}

/// One `_ibv_query_gid_table` call: its arguments, as the caller gave them
/// (`ibv_query_gid_table()` of verbs.h passes `sizeof(*entries)`).
#[derive(Clone, Copy, Debug)]
pub struct TableCall {
    pub ctx: *mut ibv_context,
    pub entries: *mut ibv_gid_entry,
    pub max_entries: usize,
    pub flags: u32,
    pub entry_size: usize,
}

/// cmd_ioctl.h `_array_len`: `entry_size * max_entries`, or `SIZE_MAX`
/// when `SIZE_MAX / entry_size <= max_entries` (its overflow test, which
/// also takes the exact quotient for an overflow).
pub fn array_len(entry_size: usize, max_entries: usize) -> usize {
    if entry_size != 0 && usize::MAX / entry_size <= max_entries { usize::MAX } else { entry_size * max_entries }
}

/// `_ibv_query_gid_table` (rdma-core cmd_device.c): the QUERY_GID_TABLE
/// ioctl with `entries` as given (NULL included: the kernel answers it),
/// or, where the kernel has no GID methods, EOPNOTSUPP for `flags` != 0
/// and the sysfs walk. Returns the number of valid entries.
///
/// # Safety
/// `t.ctx` must be a valid rdma-core context (checked non-NULL by capi);
/// `t.entries` NULL or writable for `t.max_entries * t.entry_size` bytes.
#[inline(always)]
pub unsafe fn query_gid_table_c(t: &TableCall) -> Result<usize> {
    // SAFETY: ctx is valid; cmd_fd is a public frozen field.
    let key = Key { ctx: t.ctx as usize, fd: unsafe { (*t.ctx).cmd_fd } };
    let len = array_len(t.entry_size, t.max_entries);
    // The kernel writes it on success (rdma-core leaves it uninitialised).
    let mut num: u64 = 0;
    let num_addr = &mut num as *mut u64 as u64;
    let (esz, flags, addr) = (t.entry_size as u64, t.flags, t.entries as u64);
    let build = |id| ioctl::query_gid_table(id, esz, flags, addr, len as u16, num_addr);
    match send(key, len > MAX_ATTR_LEN, build) {
        Sent::Kernel(result) => result.map(|()| num as usize),
        Sent::Fallback => {
            if t.flags != 0 {
                return Err(Error::quiet(libc::EOPNOTSUPP));
            }
            // SAFETY: forwarded from our caller.
            unsafe { sysfs::table::query_gid_table(t.ctx, key, t.entries, t.max_entries, t.entry_size) }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// cmd_ioctl.h `_array_len`, its edge included.
    #[test]
    fn array_len_is_rdma_core_s() {
        assert_eq!(array_len(32, 4), 128);
        assert_eq!(array_len(0, usize::MAX), 0);
        assert_eq!(array_len(32, 0), 0);
        assert_eq!(array_len(32, usize::MAX / 32), usize::MAX, "the exact quotient counts as an overflow");
        assert_eq!(array_len(32, usize::MAX / 32 - 1), (usize::MAX / 32 - 1) * 32);
        assert_eq!(array_len(1, usize::MAX), usize::MAX);
        assert!(array_len(32, 2047) <= MAX_ATTR_LEN && array_len(32, 2048) > MAX_ATTR_LEN);
    }
}
