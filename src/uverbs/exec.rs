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
    let arg = (cmd as *mut Cmd<N>).cast::<libc::c_void>();
    // SAFETY: cmd is a valid, writable ib_uverbs_ioctl_hdr followed by exactly
    // hdr.num_attrs attributes; any pointers inside it were built by the
    // caller from live buffers that outlive this call.
    let rc = unsafe { sys_ioctl(fd, RDMA_VERBS_IOCTL, arg) };
    if rc >= 0 {
        Ok(())
    } else {
        let code = -rc as c_int;
        crate::error::set_errno(code);
        Err(Error::quiet(code))
    }
}

/// The ioctl syscall; returns the kernel's value (-errno on failure).
///
/// # Safety
/// As `ioctl(2)` with this request and argument.
#[cfg(target_arch = "x86_64")]
#[inline]
unsafe fn sys_ioctl(fd: c_int, request: libc::c_ulong, arg: *mut libc::c_void) -> isize {
    let ret: isize;
    // SAFETY: the x86_64 Linux syscall ABI: number in rax, arguments in
    // rdi/rsi/rdx, result in rax; the instruction clobbers rcx and r11.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") libc::SYS_ioctl as isize => ret,
            in("rdi") fd as isize,
            in("rsi") request,
            in("rdx") arg,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// Other architectures: libc's `ioctl()`, normalised to -errno.
///
/// # Safety
/// As `ioctl(2)` with this request and argument.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn sys_ioctl(fd: c_int, request: libc::c_ulong, arg: *mut libc::c_void) -> isize {
    // SAFETY: forwarded from the caller.
    let rc = unsafe { libc::ioctl(fd, request as _, arg) };
    if rc < 0 { -(crate::error::errno() as isize) } else { rc as isize }
}

/// A failure of a quiet syscall, now reported: `errno` set, as libc would.
#[cold]
pub fn report(code: c_int) -> Error {
    crate::error::set_errno(code);
    Error::quiet(code)
}

/// The attach/detach fast path: `write(fd, cmd, sizeof cmd)` as one raw
/// syscall that leaves `errno` alone; the caller decides what a failure
/// means (EACCES is retried through INVOKE_WRITE, see `route`). Returns the
/// kernel's errno on failure.
#[inline]
pub fn write_quiet<P>(fd: c_int, cmd: &WriteCmd<P>) -> core::result::Result<(), c_int> {
    let bytes = cmd.as_bytes();
    // SAFETY: bytes is a valid readable buffer of bytes.len() bytes.
    let rc = unsafe { sys_write(fd, bytes.as_ptr(), bytes.len()) };
    if rc == bytes.len() as isize {
        Ok(())
    } else if rc < 0 {
        Err(-rc as c_int)
    } else {
        // A short write of a uverbs command does not happen (see `write`).
        Err(libc::EIO)
    }
}

/// The write syscall; returns the kernel's value (-errno on failure).
///
/// # Safety
/// `buf` must be readable for `len` bytes.
#[cfg(target_arch = "x86_64")]
#[inline]
unsafe fn sys_write(fd: c_int, buf: *const u8, len: usize) -> isize {
    let ret: isize;
    // SAFETY: the x86_64 Linux syscall ABI, as in sys_ioctl.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") libc::SYS_write as isize => ret,
            in("rdi") fd as isize,
            in("rsi") buf,
            in("rdx") len,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack, readonly),
        );
    }
    ret
}

/// Other architectures: libc's `write()`, normalised to -errno with `errno`
/// restored.
///
/// # Safety
/// `buf` must be readable for `len` bytes.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn sys_write(fd: c_int, buf: *const u8, len: usize) -> isize {
    let saved = crate::error::errno();
    // SAFETY: forwarded from the caller.
    let rc = unsafe { libc::write(fd, buf.cast(), len) };
    let out = if rc < 0 { -(crate::error::errno() as isize) } else { rc };
    crate::error::set_errno(saved);
    out
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
