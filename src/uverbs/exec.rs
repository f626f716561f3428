//! The only place that makes syscalls on `cmd_fd`.
//!
//! Each function is one syscall; on failure `errno` is left as the kernel set
//! it, exactly as rdma-core's `execute_ioctl` / `_execute_cmd_write` leave it.

use super::ioctl::{Cmd, RDMA_VERBS_IOCTL};
use super::write::WriteCmd;
use crate::error::{Error, Result, last_os_error};
use core::ffi::c_int;

/// `ioctl(fd, RDMA_VERBS_IOCTL, cmd)`. The kernel writes attribute flags back
/// into `cmd`, hence `&mut`.
pub fn ioctl<const N: usize>(fd: c_int, cmd: &mut Cmd<N>) -> Result<()> {
    // SAFETY: cmd is a valid, writable ib_uverbs_ioctl_hdr followed by exactly
    // hdr.num_attrs attributes; any pointers inside it were built by the
    // caller from live buffers that outlive this call.
    let rc = unsafe { libc::ioctl(fd, RDMA_VERBS_IOCTL, (cmd as *mut Cmd<N>).cast::<libc::c_void>()) };
    if rc == 0 { Ok(()) } else { Err(last_os_error()) }
}

/// `write(fd, cmd, sizeof cmd)`; anything but a full write is an error
/// (cmd_fallback.c: `if (write(...) != req_size) return errno`).
pub fn write<P>(fd: c_int, cmd: &WriteCmd<P>) -> Result<()> {
    let bytes = cmd.as_bytes();
    // SAFETY: bytes is a valid readable buffer of bytes.len() bytes.
    let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
    if n == bytes.len() as isize {
        Ok(())
    } else if n < 0 {
        Err(last_os_error())
    } else {
        // A short write of a uverbs command does not happen; rdma-core would
        // return whatever errno holds. Report it as EIO rather than 0.
        Err(Error::sys(libc::EIO))
    }
}
