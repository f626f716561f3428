//! The C boundary. Each export is: check pointers → call the verb → map the
//! result with [`to_c`], the one place errors become C return values.
//!
//! The functions are exported under `rsverbs_*` names (declared in
//! `include/rsverbs.h`) and bound to rdma-core's versioned names with
//! `.symver` (below), so that they interpose exactly
//! `ibv_attach_mcast@IBVERBS_1.1`, `ibv_detach_mcast@IBVERBS_1.1`,
//! `ibv_query_gid@IBVERBS_1.1`, `_ibv_query_gid_ex@IBVERBS_1.11` and
//! `_ibv_query_gid_table@IBVERBS_1.11`, and never the `@IBVERBS_1.0` compat
//! symbols that take `struct ibv_qp_1_0 *` or `struct ibv_context_1_0 *`
//! (docs/kernel-abi.md §5).
//!
//! Each export first tests `hooks::wanted` (one Relaxed load); only
//! with `RSVERBS_TRACE` or `RSVERBS_MCAST_IPJOIN` set does the call go
//! through the hooks, which call the same body and restore `errno`
//! (docs/trace.md, docs/ipjoin.md).
//!
//! Panics cannot cross this boundary: the library is built with
//! `panic = "abort"`, and no code path below calls `unwrap`, `expect` or
//! indexing that can fail on caller data.

use crate::abi::{ibv_context, ibv_gid, ibv_gid_entry, ibv_qp};
use crate::error::{Error, to_c, to_c_count, to_c_gid};
use crate::registry::QpKey;
use crate::mcast::{McastCall, Op};
use crate::{gid, hooks, mcast, trace};
use core::ffi::c_int;

pub mod member;
pub mod select;

#[cfg(all(rsverbs_symver, not(test)))]
core::arch::global_asm!(
    ".symver rsverbs_attach_mcast, ibv_attach_mcast@@IBVERBS_1.1",
    ".symver rsverbs_detach_mcast, ibv_detach_mcast@@IBVERBS_1.1",
    ".symver rsverbs_query_gid_ex, _ibv_query_gid_ex@@IBVERBS_1.11",
    ".symver rsverbs_query_gid, ibv_query_gid@@IBVERBS_1.1",
    ".symver rsverbs_query_gid_table, _ibv_query_gid_table@@IBVERBS_1.11",
);

/// EINVAL with `errno` set: rsverbs' answer to NULL where rdma-core crashes.
const NULL_ARG: Error = Error::sys(libc::EINVAL);

/// `ibv_attach_mcast`: attach `qp` to the multicast group `gid`/`lid`.
///
/// Returns 0, or a positive errno (also left in `errno`). NULL `qp`,
/// `qp->context` or `gid` gives EINVAL.
///
/// # Safety
/// Non-NULL pointers must point at live objects created by rdma-core.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rsverbs_attach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    // The call's arguments travel as one value, through the hooks too; by
    // value, so that the copy is made only when the hooks are wanted.
    let call = McastCall { op: Op::Attach, qp, gid, lid };
    if hooks::wanted() {
        // SAFETY: forwarded; the hooks call mcast_c with the same call.
        return unsafe { hooks::mcast(call, mcast_c) };
    }
    // SAFETY: the caller's contract.
    unsafe { mcast_c(&call) }
}

/// `ibv_detach_mcast`: detach `qp` from the multicast group `gid`/`lid`.
///
/// Returns 0, or a positive errno (also left in `errno`). NULL `qp`,
/// `qp->context` or `gid` gives EINVAL.
///
/// # Safety
/// Non-NULL pointers must point at live objects created by rdma-core.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rsverbs_detach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    let call = McastCall { op: Op::Detach, qp, gid, lid };
    if hooks::wanted() {
        // SAFETY: as in rsverbs_attach_mcast.
        return unsafe { hooks::mcast(call, mcast_c) };
    }
    // SAFETY: the caller's contract.
    unsafe { mcast_c(&call) }
}

/// Attach or detach: check → call → map.
///
/// # Safety
/// As the exports'.
#[inline(always)]
unsafe fn mcast_c(c: &McastCall) -> c_int {
    // SAFETY: qp is checked non-NULL before it is read; the rest is the
    // caller's contract.
    if c.qp.is_null() || c.gid.is_null() || unsafe { (*c.qp).context }.is_null() {
        return to_c(Err(NULL_ARG));
    }
    // SAFETY: checked above; validity is the caller's contract.
    to_c(unsafe { mcast::run(c) })
}

/// `_ibv_query_gid_ex`: read GID table entry `gid_index` of `port_num`.
/// `ibv_query_gid_ex()` of `<infiniband/verbs.h>` calls it with
/// `entry_size = sizeof(struct ibv_gid_entry)`.
///
/// Returns 0, ENODATA for an empty entry, or another positive errno. NULL
/// `context` or `entry` gives EINVAL.
///
/// # Safety
/// `context` must be a live rdma-core context and `entry` writable for
/// `entry_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rsverbs_query_gid_ex(
    context: *mut ibv_context,
    port_num: u32,
    gid_index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    // The call's arguments travel as one value, through the trace too.
    let query = gid::GidQuery { ctx: context, port_num, gid_index, entry, flags, entry_size };
    if hooks::wanted() {
        // SAFETY: forwarded; the hooks call query_c with the same query.
        return unsafe { hooks::query_gid_ex(query, query_c) };
    }
    // SAFETY: the caller's contract.
    unsafe { query_c(&query) }
}

/// `_ibv_query_gid_ex`: check → call → map.
///
/// # Safety
/// As the export's.
#[inline(always)]
unsafe fn query_c(query: &gid::GidQuery) -> c_int {
    if query.ctx.is_null() || query.entry.is_null() {
        return to_c(Err(NULL_ARG));
    }
    // SAFETY: checked above; validity is the caller's contract.
    to_c(unsafe { gid::query_gid_ex(query) })
}

/// `ibv_query_gid`: the GID of table entry `index` of `port_num`.
///
/// Returns 0 (the zero GID for an empty entry), or -1 with `errno` as
/// rdma-core leaves it. NULL `context` gives -1 with `errno` EINVAL, and so
/// does NULL `gid` where rdma-core would store through it (a failed query
/// returns its own -1 and `errno` before).
///
/// # Safety
/// `context` must be NULL or a live rdma-core context, and `gid` NULL or
/// writable for 16 bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rsverbs_query_gid(
    context: *mut ibv_context,
    port_num: u8,
    index: c_int,
    gid: *mut ibv_gid,
) -> c_int {
    let call = gid::GidCall { ctx: context, port_num, index, gid };
    if hooks::wanted() {
        // SAFETY: forwarded; the hooks call gid_c with the same call.
        return unsafe { hooks::query_gid(call, gid_c) };
    }
    // SAFETY: the caller's contract.
    unsafe { gid_c(&call) }
}

/// `ibv_query_gid`: check → call → map → store.
///
/// # Safety
/// As the export's.
#[inline(always)]
unsafe fn gid_c(c: &gid::GidCall) -> c_int {
    if c.ctx.is_null() {
        to_c(Err(NULL_ARG));
        return -1;
    }
    // SAFETY: checked above; validity is the caller's contract.
    let (rc, stored) = to_c_gid(unsafe { gid::query_gid(c) });
    match stored {
        Some(_) if c.gid.is_null() => {
            to_c(Err(NULL_ARG));
            -1
        }
        Some(raw) => {
            // SAFETY: gid is non-NULL and writable for 16 bytes.
            unsafe { c.gid.write_unaligned(ibv_gid { raw }) };
            rc
        }
        None => rc,
    }
}

/// `_ibv_query_gid_table`: the valid entries of every port's GID table.
/// `ibv_query_gid_table()` of `<infiniband/verbs.h>` calls it with
/// `entry_size = sizeof(struct ibv_gid_entry)`.
///
/// Returns the number of entries, or a negative errno (`errno` as rdma-core
/// leaves it). NULL `context` gives -EINVAL with `errno` EINVAL; NULL
/// `entries` goes to the kernel as rdma-core sends it, and gives -EINVAL
/// with `errno` EINVAL in the sysfs fallback where rdma-core would store
/// through it.
///
/// # Safety
/// `context` must be NULL or a live rdma-core context, and `entries` NULL
/// or writable for `max_entries * entry_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rsverbs_query_gid_table(
    context: *mut ibv_context,
    entries: *mut ibv_gid_entry,
    max_entries: usize,
    flags: u32,
    entry_size: usize,
) -> libc::ssize_t {
    let call = gid::TableCall { ctx: context, entries, max_entries, flags, entry_size };
    if hooks::wanted() {
        // SAFETY: forwarded; the hooks call table_c with the same call.
        return unsafe { hooks::query_gid_table(call, table_c) };
    }
    // SAFETY: the caller's contract.
    unsafe { table_c(&call) }
}

/// `_ibv_query_gid_table`: check → call → map.
///
/// # Safety
/// As the export's.
#[inline(always)]
unsafe fn table_c(t: &gid::TableCall) -> isize {
    if t.ctx.is_null() {
        return to_c_count(Err(NULL_ARG));
    }
    // SAFETY: checked above; validity is the caller's contract.
    to_c_count(unsafe { gid::query_gid_table_c(t) })
}

/// `rsverbs_mcast_attachments`: the multicast groups `qp` is attached to
/// through rsverbs, as (MGID, LID) pairs, in the order of the registry.
/// Up to `max` pairs are copied to `gids[i]` and `lids[i]` (either may be
/// NULL, then that half is not copied).
///
/// Returns the number of pairs (which may exceed `max`), or -1 with `errno`
/// set: EINVAL for a NULL `qp` or `qp->context`; EOPNOTSUPP when the
/// registry is off. The registry is kept only while `RSVERBS_TRACE` is set
/// (docs/trace.md): it lists the attaches made through rsverbs, since the
/// library was loaded, by this process and its parents, not yet detached.
///
/// # Safety
/// `qp` must be NULL or a live rdma-core QP; non-NULL `gids` and `lids`
/// must be writable for `max` elements.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rsverbs_mcast_attachments(
    qp: *const ibv_qp,
    gids: *mut ibv_gid,
    lids: *mut u16,
    max: usize,
) -> c_int {
    // SAFETY: qp is checked non-NULL before it is read.
    if qp.is_null() || unsafe { (*qp).context }.is_null() {
        to_c(Err(NULL_ARG));
        return -1;
    }
    // SAFETY: checked above.
    let (key, qpn) = unsafe { (QpKey { ctx: (*qp).context as usize, handle: (*qp).handle }, (*qp).qp_num) };
    let n = trace::attachments(key, qpn, |i, gid, lid| {
        if i < max {
            if !gids.is_null() {
                // SAFETY: gids is writable for max elements and i < max.
                unsafe { gids.add(i).write(ibv_gid { raw: gid }) };
            }
            if !lids.is_null() {
                // SAFETY: as for gids.
                unsafe { lids.add(i).write(lid) };
            }
        }
    });
    match n {
        Some(n) => c_int::try_from(n).unwrap_or(c_int::MAX),
        None => {
            to_c(Err(Error::sys(libc::EOPNOTSUPP)));
            -1
        }
    }
}
