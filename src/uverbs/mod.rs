//! The uverbs command layer: pure encoders (`ioctl`, `write`), the only
//! syscalls on `cmd_fd` (`exec`), the per-context route (`route`), and the two
//! ways a verb sends a command: [`ioctl_checked`] and [`run_write_cmd`].

#[cfg(test)]
pub mod capture;
pub mod cm;
pub mod exec;
pub mod ioctl;
pub mod route;
mod table;
pub mod write;

use crate::error::{Error, Result};
use core::mem::size_of;
use ioctl::Cmd;
use route::{Key, Route};

/// Sends the ioctl that `build` makes for a driver_id. An EINVAL is checked
/// once against a stale cached driver_id (see `route`); if it was stale the
/// command is rebuilt and sent again, which is safe because the kernel
/// rejected the first one before looking at it.
#[inline]
pub fn ioctl_checked<const N: usize>(key: Key, route: Route, build: impl Fn(u32) -> Cmd<N>) -> Result<()> {
    match exec::ioctl(key.fd, &mut build(route.driver_id)) {
        Err(e) if e.code == libc::EINVAL => after_einval(key, route, e, &build),
        other => other,
    }
}

/// The EINVAL half of [`ioctl_checked`], for callers that sent the first
/// command themselves: re-check the driver_id and resend if it was stale.
#[cold]
#[inline(never)]
pub fn after_einval<const N: usize>(key: Key, route: Route, e: Error, build: &dyn Fn(u32) -> Cmd<N>) -> Result<()> {
    match route::recheck(key, route)? {
        Some(fresh) => exec::ioctl(key.fd, &mut build(fresh.driver_id)),
        None => Err(e),
    }
}

/// Sends a legacy write command (`command`, `payload`, optional response
/// buffer `(address, length)`) as rdma-core's `_execute_cmd_write` does:
/// through ioctl INVOKE_WRITE when the context's `has_ioctl_write` probe said
/// so, else through `write()` (cmd_fallback.c). Both reach the same handler.
#[inline]
pub fn run_write_cmd<P: Copy>(key: Key, command: u32, payload: P, resp: Option<(u64, u16)>) -> Result<()> {
    let route = route::get(key)?;
    if !route.invoke_write() {
        let cmd = write::new_cmd(command, payload, resp.map_or(0, |r| usize::from(r.1)));
        return exec::write(key.fd, &cmd);
    }
    let core_in = (&payload as *const P) as u64;
    let in_len = size_of::<P>() as u16;
    match resp {
        None => ioctl_checked(key, route, |id| ioctl::invoke_write(id, command, core_in, in_len)),
        Some((out, out_len)) => ioctl_checked(key, route, |id| {
            ioctl::invoke_write_resp(id, command, core_in, in_len, out, out_len)
        }),
    }
}
