//! The only place that makes syscalls on `cmd_fd`.
//!
//! Each function is one syscall; on failure `errno` is left as the kernel set
//! it, exactly as rdma-core's `execute_ioctl` / `_execute_cmd_write` leave it.

use super::ioctl::{ATTR_F_VALID_OUTPUT, Cmd, RDMA_VERBS_IOCTL};
use super::write::WriteCmd;
use crate::error::{Error, Result};
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

/// One three-argument syscall; returns the kernel's value (-errno on
/// failure) and leaves `errno` alone.
///
/// # Safety
/// As the syscall `nr` with these arguments.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn syscall3(nr: libc::c_long, a: usize, b: usize, c: usize) -> isize {
    let ret: isize;
    // SAFETY: the x86_64 Linux syscall ABI: number in rax, arguments in
    // rdi/rsi/rdx, result in rax; the instruction clobbers rcx and r11.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") a,
            in("rsi") b,
            in("rdx") c,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// The same on aarch64: `svc #0` (ARMv8.0, every core), as the kernel's
/// syscall ABI (arch/arm64/kernel/syscall.c `invoke_syscall`): number in
/// x8, arguments in x0-x2, result in x0; nothing else is clobbered. libc's
/// `syscall()` would cost three `__errno_location` calls per verb here,
/// because it sets `errno` that the caller must then restore.
///
/// # Safety
/// As the syscall `nr` with these arguments.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
unsafe fn syscall3(nr: libc::c_long, a: usize, b: usize, c: usize) -> isize {
    let ret: isize;
    // SAFETY: the aarch64 Linux syscall ABI above.
    unsafe {
        core::arch::asm!(
            "svc #0",
            in("x8") nr,
            inlateout("x0") a as isize => ret,
            in("x1") b,
            in("x2") c,
            options(nostack),
        );
    }
    ret
}

/// Other architectures: libc's `syscall()`, normalised to -errno with
/// `errno` restored.
///
/// # Safety
/// As the syscall `nr` with these arguments.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
unsafe fn syscall3(nr: libc::c_long, a: usize, b: usize, c: usize) -> isize {
    let _errno = crate::error::ErrnoGuard::save();
    // SAFETY: forwarded from the caller.
    let rc = unsafe { libc::syscall(nr, a, b, c) };
    if rc < 0 { -(crate::error::errno() as isize) } else { rc as isize }
}
