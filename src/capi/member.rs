//! Explicit multicast membership in the C ABI (rsverbs_mcast_join(3),
//! docs/fabric-join.md "Explicit membership"): rsverbs' own functions, for
//! programs that send to a group without attaching a QP (a send-only full
//! member) or want the fabric's membership without an attach. Each returns
//! 0, or -1 with `errno` set, as librdmacm's `rdma_join_multicast` and
//! `rdma_leave_multicast` do; a success leaves `errno` as it was.

use crate::abi::{ibv_context, ibv_gid};
use crate::error::{ErrnoGuard, set_errno};
use crate::ipjoin::member::{self, Kind};
use crate::mgid::Mgid;
use crate::view::Context;
use core::ffi::c_int;

/// `RDMA_MC_JOIN_FLAG_FULLMEMBER` (librdmacm's `enum
/// rdma_multicast_join_flags`, the kernel's `join_flags` 0): a member that
/// receives and sends.
pub const RSVERBS_MCAST_FULLMEMBER: c_int = 0;
/// `RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER` (1): a member that only sends.
pub const RSVERBS_MCAST_SENDONLY_FULLMEMBER: c_int = 1;

/// The arguments both functions check the same way: EINVAL for a NULL
/// `context` or `mgid`, a `flags` other than the two above, or a port 0.
///
/// # Safety
/// `context` NULL or a live rdma-core context; `mgid` NULL or 16 readable
/// bytes.
unsafe fn args(context: *mut ibv_context, port_num: u8, mgid: *const ibv_gid, flags: c_int) -> Result<(Context, Mgid, Kind), c_int> {
    let kind = match flags {
        RSVERBS_MCAST_FULLMEMBER => Kind::Full,
        RSVERBS_MCAST_SENDONLY_FULLMEMBER => Kind::SendOnly,
        _ => return Err(libc::EINVAL),
    };
    if mgid.is_null() || port_num == 0 {
        return Err(libc::EINVAL);
    }
    // SAFETY: NULL or live (our caller's contract).
    let ctx = unsafe { Context::of(context) }.ok_or(libc::EINVAL)?;
    // SAFETY: non-NULL, 16 readable bytes (our caller's contract); every
    // bit pattern is a valid [u8; 16].
    let m = Mgid(unsafe { (*mgid).raw });
    Ok((ctx, m, kind))
}

/// The C convention of both functions.
fn status_c(r: Result<(), c_int>) -> c_int {
    let saved = ErrnoGuard::save();
    match r {
        Ok(()) => 0,
        Err(e) => {
            saved.keep_current();
            set_errno(e);
            -1
        }
    }
}

/// `rsverbs_mcast_join`: makes the process a member of the multicast group
/// `mgid` on port `port_num` of `context`'s device, as a full member
/// (`RSVERBS_MCAST_FULLMEMBER`) or a send-only full member
/// (`RSVERBS_MCAST_SENDONLY_FULLMEMBER`), without a QP. On InfiniBand the
/// kernel's rdma_cm asks the Subnet Administrator (through the port's
/// IPoIB address); on RoCE a full member is joined at IP level on the
/// port's netdevs and a send-only one needs nothing on the wire (no IGMP
/// report, as the kernel's rdma_cm). Memberships are counted per (device,
/// port, group, flags): each join needs one [`rsverbs_mcast_leave`].
///
/// Returns 0, or -1 with `errno`: EINVAL for a NULL `context` or `mgid`,
/// `flags` other than the two, a group that is not multicast, or a port
/// the device does not have; ENODEV when the port has no netdev (RoCE) or
/// no IPoIB address (InfiniBand); EDEADLK when called from a signal handler
/// that interrupted this thread inside rsverbs' attach, detach, join or
/// leave; ENOMEM; or the socket's or rdma_cm's error.
///
/// # Safety
/// `context` must be NULL or a live rdma-core context; `mgid` NULL or 16
/// readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rsverbs_mcast_join(context: *mut ibv_context, port_num: u8, mgid: *const ibv_gid, flags: c_int) -> c_int {
    // SAFETY: our caller's contract.
    status_c(unsafe { args(context, port_num, mgid, flags) }.and_then(|(c, m, k)| member::join(&c, u32::from(port_num), m, k)))
}

/// `rsverbs_mcast_leave`: ends one membership that [`rsverbs_mcast_join`]
/// made with the same `context`'s device, `port_num`, `mgid` and `flags`;
/// the last leave of it ends the joins it made.
///
/// Returns 0, or -1 with `errno`: EINVAL as for the join; EADDRNOTAVAIL
/// when no such membership is held (librdmacm's `rdma_leave_multicast`);
/// EDEADLK as for the join; ENOMEM.
///
/// # Safety
/// As [`rsverbs_mcast_join`]'s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rsverbs_mcast_leave(context: *mut ibv_context, port_num: u8, mgid: *const ibv_gid, flags: c_int) -> c_int {
    // SAFETY: our caller's contract.
    status_c(unsafe { args(context, port_num, mgid, flags) }.and_then(|(c, m, k)| member::leave(&c, u32::from(port_num), m, k)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::errno;

    #[test]
    fn bad_arguments_are_einval_and_set_errno() {
        let g = ibv_gid { raw: [0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 1, 1, 1] };
        // SAFETY: an all-zero context is a valid value (NULL device).
        let mut ctx: ibv_context = unsafe { core::mem::zeroed() };
        for f in [rsverbs_mcast_join, rsverbs_mcast_leave] {
            for (c, port, gid, flags) in [
                (core::ptr::null_mut(), 1, &g as *const ibv_gid, 0),
                (&mut ctx as *mut ibv_context, 1, core::ptr::null(), 0),
                (&mut ctx as *mut ibv_context, 1, &g as *const ibv_gid, 2),
                (&mut ctx as *mut ibv_context, 1, &g as *const ibv_gid, -1),
                (&mut ctx as *mut ibv_context, 0, &g as *const ibv_gid, 1),
                // A context without a device.
                (&mut ctx as *mut ibv_context, 1, &g as *const ibv_gid, 0),
            ] {
                set_errno(0);
                // SAFETY: NULL or valid pointers, checked at the door.
                assert_eq!(unsafe { f(c, port, gid, flags) }, -1);
                assert_eq!(errno(), libc::EINVAL, "port {port} flags {flags}");
            }
        }
    }

    #[test]
    fn success_leaves_errno_and_failure_sets_it() {
        set_errno(libc::EAGAIN);
        assert_eq!(status_c(Ok(())), 0);
        assert_eq!(errno(), libc::EAGAIN);
        assert_eq!(status_c(Err(libc::EADDRNOTAVAIL)), -1);
        assert_eq!(errno(), libc::EADDRNOTAVAIL);
    }
}
