//! The only place that makes syscalls on `cmd_fd`.
//!
//! Each function is one syscall; on failure `errno` is left as the kernel set
//! it, exactly as rdma-core's `execute_ioctl` / `_execute_cmd_write` leave it.

use super::ioctl::{ATTR_F_VALID_OUTPUT, Cmd, RDMA_VERBS_IOCTL};
use super::write::WriteCmd;
use crate::error::{Error, Result};
use crate::sys::syscall3;
use core::ffi::c_int;

/// `ioctl(fd, RDMA_VERBS_IOCTL, cmd)`. The kernel writes attribute flags back
/// into `cmd`, hence `&mut`.
///
/// Issued as a raw `syscall` instruction rather than through libc's
/// variadic `ioctl()`: it is the hot path of every verb, and the raw call
/// halves rsverbs' user-space instructions (BENCHMARKS.md). On failure
/// `errno` is set here, exactly as libc would, and the error is returned as
/// already reported. The kernel sees the same syscall either way (seccomp
/// filters and strace included); only a user-space `ioctl` interposer would
/// not see it.
#[inline]
pub fn ioctl<const N: usize>(fd: c_int, cmd: &mut Cmd<N>) -> Result<()> {
    let arg = (cmd as *mut Cmd<N>) as usize;
    // SAFETY: cmd is a valid, writable ib_uverbs_ioctl_hdr followed by exactly
    // hdr.num_attrs attributes; any pointers inside it were built by the
    // caller from live buffers that outlive this call.
    let rc = unsafe { syscall3(libc::SYS_ioctl, fd as usize, RDMA_VERBS_IOCTL as usize, arg) };
    if rc < 0 {
        return Err(report(-rc as c_int));
    }
    // What the kernel wrote, for valgrind, as rdma-core does
    // (cmd_ioctl.c `finalize_attr`).
    for a in &cmd.attrs {
        if a.flags & ATTR_F_VALID_OUTPUT != 0 && a.len != 0 {
            crate::memcheck::mem_defined(a.data, u64::from(a.len));
        }
    }
    Ok(())
}

/// The attach/detach fast path: `write(fd, cmd, sizeof cmd)` as one raw
/// syscall that leaves `errno` alone; the caller decides what a failure
/// means (EACCES is retried through INVOKE_WRITE, see `route`). Returns the
/// kernel's errno on failure.
#[inline]
pub fn write_quiet<P>(fd: c_int, cmd: &WriteCmd<P>) -> core::result::Result<(), c_int> {
    let bytes = cmd.as_bytes();
    // SAFETY: bytes is a valid readable buffer of bytes.len() bytes.
    let rc = unsafe { syscall3(libc::SYS_write, fd as usize, bytes.as_ptr() as usize, bytes.len()) };
    if rc == bytes.len() as isize {
        Ok(())
    } else if rc < 0 {
        Err(-rc as c_int)
    } else {
        // A short write of a uverbs command does not happen; rdma-core would
        // return whatever errno holds (cmd_fallback.c `_execute_cmd_write`:
        // `if (write(...) != req_size) return errno`). Report it as EIO.
        Err(libc::EIO)
    }
}

/// `write(fd, cmd, sizeof cmd)` with `errno` set on failure, as libc's
/// `write()` would: the write path of kernels without the ioctl
/// (docs/kernel-abi.md).
#[inline]
pub fn write<P>(fd: c_int, cmd: &WriteCmd<P>) -> Result<()> {
    write_quiet(fd, cmd).map_err(report)
}

/// A failure of a quiet syscall, now reported: `errno` set, as libc would.
#[cold]
pub fn report(code: c_int) -> Error {
    crate::error::set_errno(code);
    Error::quiet(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{errno, set_errno};
    use crate::uverbs::write::{CMD_ATTACH_MCAST, mcast, mcast_req};

    /// This architecture's raw syscall (`syscall3`) against a real pipe: the
    /// whole command arrives, a bad fd gives the kernel's EBADF, and `errno`
    /// is left alone either way (ctest/crossarch.sh runs it on aarch64,
    /// powerpc64le and s390x too, under qemu-user).
    #[test]
    fn the_raw_write_reaches_the_kernel_and_leaves_errno() {
        let cmd = mcast(CMD_ATTACH_MCAST, mcast_req([7; 16], 3, 0xc001));
        let mut fds: [c_int; 2] = [-1; 2];
        // SAFETY: fds is two writable ints.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        set_errno(libc::EINTR);
        assert_eq!(write_quiet(fds[1], &cmd), Ok(()));
        assert_eq!(errno(), libc::EINTR);
        let mut got = [0u8; 64];
        // SAFETY: got is writable for its length; fds[0] is our pipe.
        let n = unsafe { libc::read(fds[0], got.as_mut_ptr().cast(), got.len()) };
        assert_eq!(&got[..n as usize], cmd.as_bytes());
        // SAFETY: our own pipe's two ends.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        // -1, never the closed numbers: another test's thread may own them by now.
        assert_eq!(write_quiet(-1, &cmd), Err(libc::EBADF));
        assert_eq!(errno(), libc::EINTR);
    }
}
