//! `ibv_attach_mcast` / `ibv_detach_mcast` (rdma-core verbs.c → cmd.c
//! `ibv_cmd_attach_mcast`/`ibv_cmd_detach_mcast`).
//!
//! No user-space validation of QP type, GID or LID: the kernel decides, and
//! its errno order is the contract (uverbs_cmd.c `ib_uverbs_attach_mcast`).

use crate::abi::{OPS_ATTACH_MCAST, OPS_DETACH_MCAST, ibv_gid, ibv_qp};
use crate::env;
use crate::error::{Error, Result};
use crate::rdma_core::provider;
use crate::uverbs::{self, exec, ioctl, ioctl::Cmd, ioctl_checked, route, route::Key, route::Route, write};
use core::mem::size_of;

/// Which of the two commands.
pub use provider::Verb as Op;

/// One `ibv_attach_mcast` / `ibv_detach_mcast` call: its arguments, as the
/// caller gave them, from the export through the hooks to the verb.
#[derive(Clone, Copy, Debug)]
pub struct McastCall {
    pub op: Op,
    pub qp: *mut ibv_qp,
    pub gid: *const ibv_gid,
    pub lid: u16,
}

impl McastCall {
    /// Whether this is `ibv_attach_mcast`.
    #[inline]
    pub fn attach(&self) -> bool {
        self.op == Op::Attach
    }
}

/// Attach or detach `c.qp` to the group `(c.gid, c.lid)`.
///
/// # Safety
/// `c.qp`, `c.qp->context` and `c.gid` must be valid (checked non-NULL by
/// capi).
#[inline(always)]
pub unsafe fn run(c: &McastCall) -> Result<()> {
    let McastCall { op, qp, gid, lid } = *c;
    // SAFETY: the caller guarantees qp and qp->context are valid objects
    // created by rdma-core; we read public frozen fields only.
    let (ctx, handle) = unsafe { ((*qp).context, (*qp).handle) };
    // SAFETY: as above.
    let fd = unsafe { (*ctx).cmd_fd };
    // SAFETY: gid points at 16 readable bytes.
    let raw = unsafe { (*gid).raw };
    let slot = if op == Op::Attach { OPS_ATTACH_MCAST } else { OPS_DETACH_MCAST };
    // SAFETY: as above; `ops` is public and frozen (abi.rs).
    let op_ptr = unsafe { (*ctx).ops[slot] } as usize;
    if provider::has_no_op(op, op_ptr) {
        // dummy_ops.c `attach_mcast`/`detach_mcast`: EOPNOTSUPP, no syscall,
        // errno untouched.
        return Err(Error::quiet(libc::EOPNOTSUPP));
    }
    if fd < 0 {
        // No uverbs fd and yet an op that is not the dummy (mlx5 VFIO
        // contexts have the dummy, caught above): no command can be sent.
        return Err(Error::sys(libc::EOPNOTSUPP));
    }
    let command = match op {
        Op::Attach => write::CMD_ATTACH_MCAST,
        Op::Detach => write::CMD_DETACH_MCAST,
    };
    let key = Key { ctx: ctx as usize, fd };
    let req = write::mcast_req(raw, handle, lid);
    let build = |id| ioctl::invoke_write(id, command, (&req as *const write::McastReq) as u64, size_of::<write::McastReq>() as u16);
    // The steady state: a known route, one syscall, its answer. Where
    // rdma-core sends INVOKE_WRITE, the legacy write() of the same command
    // reaches the same handler (docs/write-path.md).
    let result = match route::peek(key) {
        Some(route) if route.writes_to(fd) => match exec::write_quiet(fd, &write::mcast(command, req)) {
            Ok(()) => Ok(()),
            Err(libc::EACCES) => write_refused(key, route, &build),
            Err(code) => Err(exec::report(code)),
        },
        Some(route) if route.invoke_write() => ioctl_checked(key, route, build),
        _ => uverbs::run_write_cmd(key, command, req, None),
    };
    match result {
        // cmd_write.h `verbs_is_destroy_err`: detach after device loss counts
        // as done when the user allowed it; errno stays EIO.
        Err(e) if op == Op::Detach && e.code == libc::EIO && env::allow_disassoc_destroy() => Ok(()),
        other => other,
    }
}

/// The kernel refused the write() because this process's credentials are
/// not the ones the fd was opened with (uverbs_main.c `ib_uverbs_write` →
/// `ib_safe_file_access`: setuid, or a fork the atfork handler missed).
/// rdma-core would have sent INVOKE_WRITE, which has no such check: give up
/// the fast path for the process and send that. `errno` was not touched.
#[cold]
#[inline(never)]
fn write_refused(key: Key, route: Route, build: &dyn Fn(u32) -> Cmd<2>) -> Result<()> {
    route::no_fast_write();
    ioctl_checked(key, route, build)
}
