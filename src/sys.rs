//! The library's raw syscalls: one instruction into the kernel, `errno`
//! left alone, and never a cancellation point.
//!
//! glibc makes `open`, `read`, `write` and `close` cancellation points
//! (nptl/pthread_cancel.c; the wrappers' `SYSCALL_CANCEL`, sysdeps/unix/
//! sysv/linux/{open64,read,write,close}.c): a thread cancelled with
//! `pthread_cancel` while it blocks in one of them is unwound from inside
//! the wrapper, through rsverbs' frames, with whatever rsverbs held. Issued
//! here as the bare instruction, the same syscalls are not cancellation
//! points, as rdma-core's own fd work is not either (its `write()` and
//! `ioctl()` are; it holds no lock across them). A deferred cancellation
//! then acts at the program's next cancellation point, after the verb
//! returned (docs/security.md, "Thread cancellation").
//!
//! The kernel sees the same syscalls (seccomp, strace, `make faults`); only
//! a user-space interposer of `open()` or `write()` would not.
//!
//! Every function returns the kernel's answer (`Err(errno)` on failure) and
//! leaves the thread's `errno` as it was.

use core::ffi::{CStr, c_int, c_long, c_uint};
use core::sync::atomic::AtomicU32;

/// One three-argument syscall; returns the kernel's value (-errno on
/// failure) and leaves `errno` alone.
///
/// # Safety
/// As the syscall `nr` with these arguments.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub unsafe fn syscall3(nr: c_long, a: usize, b: usize, c: usize) -> isize {
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

/// One four-argument syscall, as [`syscall3`]; the fourth argument in r10
/// (the kernel's ABI; rcx is the C ABI's, clobbered by `syscall`).
///
/// # Safety
/// As the syscall `nr` with these arguments.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub unsafe fn syscall4(nr: c_long, a: usize, b: usize, c: usize, d: usize) -> isize {
    let ret: isize;
    // SAFETY: as syscall3, the fourth argument in r10.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") a,
            in("rsi") b,
            in("rdx") c,
            in("r10") d,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// The same on aarch64: `svc #0` (ARMv8.0, every core), as the kernel's
/// syscall ABI (arch/arm64/kernel/syscall.c `invoke_syscall`): number in
/// x8, arguments in x0-x5, result in x0; nothing else is clobbered. libc's
/// `syscall()` would cost three `__errno_location` calls per verb here,
/// because it sets `errno` that the caller must then restore.
///
/// # Safety
/// As the syscall `nr` with these arguments.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
pub unsafe fn syscall3(nr: c_long, a: usize, b: usize, c: usize) -> isize {
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

/// See the aarch64 [`syscall3`]; the fourth argument in x3.
///
/// # Safety
/// As the syscall `nr` with these arguments.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
pub unsafe fn syscall4(nr: c_long, a: usize, b: usize, c: usize, d: usize) -> isize {
    let ret: isize;
    // SAFETY: the aarch64 Linux syscall ABI above.
    unsafe {
        core::arch::asm!(
            "svc #0",
            in("x8") nr,
            inlateout("x0") a as isize => ret,
            in("x1") b,
            in("x2") c,
            in("x3") d,
            options(nostack),
        );
    }
    ret
}

/// The same on s390x: `svc 0` with the number in r1, as the kernel's
/// syscall ABI (arch/s390/kernel/syscall.c `__do_syscall`: a zero SVC code
/// takes the number from gpr 1), arguments in r2-r6, result in r2; nothing
/// else is clobbered (glibc's s390-64 `INTERNAL_SYSCALL_SVC0` names only
/// memory). Inline assembly is stable on s390x from Rust 1.84.
///
/// # Safety
/// As the syscall `nr` with these arguments.
#[cfg(target_arch = "s390x")]
#[inline(always)]
pub unsafe fn syscall3(nr: c_long, a: usize, b: usize, c: usize) -> isize {
    let ret: isize;
    // SAFETY: the s390x Linux syscall ABI above.
    unsafe {
        core::arch::asm!(
            "svc 0",
            in("r1") nr,
            inlateout("r2") a as isize => ret,
            in("r3") b,
            in("r4") c,
            options(nostack),
        );
    }
    ret
}

/// See the s390x [`syscall3`]; the fourth argument in r5.
///
/// # Safety
/// As the syscall `nr` with these arguments.
#[cfg(target_arch = "s390x")]
#[inline(always)]
pub unsafe fn syscall4(nr: c_long, a: usize, b: usize, c: usize, d: usize) -> isize {
    let ret: isize;
    // SAFETY: the s390x Linux syscall ABI above.
    unsafe {
        core::arch::asm!(
            "svc 0",
            in("r1") nr,
            inlateout("r2") a as isize => ret,
            in("r3") b,
            in("r4") c,
            in("r5") d,
            options(nostack),
        );
    }
    ret
}

/// The same on powerpc64 (both byte orders): `sc`, as the kernel's syscall
/// ABI (Documentation/arch/powerpc/syscall64-abi.rst): number in r0,
/// arguments in r3-r8, result in r3. On failure the kernel sets cr0's
/// summary-overflow bit and leaves the positive errno in r3, so `bns`
/// skips the `neg` on success: -errno on failure, as the other
/// architectures' raw paths return. Registers as glibc's `SYSCALL_SC`
/// (sysdeps/unix/sysv/linux/powerpc/sysdep.h): r0 and r3-r8 are outputs
/// (volatile across `sc`), r9-r12, cr0, ctr and xer are clobbered; lr,
/// cr1 and cr5-7 survive (the ABI doc's exceptions to the ELF ABI's
/// volatile set). `sc`, not `scv 0`: `scv` needs POWER9 and a kernel that
/// sets `PPC_FEATURE2_SCV`, and `sc` works on every POWER. Inline assembly
/// is stable on powerpc64 from Rust 1.95 (rust-lang/rust#147996), hence
/// the crate's rust-version (docs/building.md).
///
/// # Safety
/// As the syscall `nr` with these arguments.
#[cfg(target_arch = "powerpc64")]
#[inline(always)]
pub unsafe fn syscall3(nr: c_long, a: usize, b: usize, c: usize) -> isize {
    let ret: isize;
    // SAFETY: the powerpc64 Linux syscall ABI above.
    unsafe {
        core::arch::asm!(
            "sc",
            "bns+ 2f",
            "neg 3, 3",
            "2:",
            inlateout("r0") nr => _,
            inlateout("r3") a as isize => ret,
            inlateout("r4") b => _,
            inlateout("r5") c => _,
            lateout("r6") _,
            lateout("r7") _,
            lateout("r8") _,
            lateout("r9") _,
            lateout("r10") _,
            lateout("r11") _,
            lateout("r12") _,
            out("cr0") _,
            out("ctr") _,
            out("xer") _,
            options(nostack),
        );
    }
    ret
}

/// See the powerpc64 [`syscall3`]; the fourth argument in r6.
///
/// # Safety
/// As the syscall `nr` with these arguments.
#[cfg(target_arch = "powerpc64")]
#[inline(always)]
pub unsafe fn syscall4(nr: c_long, a: usize, b: usize, c: usize, d: usize) -> isize {
    let ret: isize;
    // SAFETY: the powerpc64 Linux syscall ABI above.
    unsafe {
        core::arch::asm!(
            "sc",
            "bns+ 2f",
            "neg 3, 3",
            "2:",
            inlateout("r0") nr => _,
            inlateout("r3") a as isize => ret,
            inlateout("r4") b => _,
            inlateout("r5") c => _,
            inlateout("r6") d => _,
            lateout("r7") _,
            lateout("r8") _,
            lateout("r9") _,
            lateout("r10") _,
            lateout("r11") _,
            lateout("r12") _,
            out("cr0") _,
            out("ctr") _,
            out("xer") _,
            options(nostack),
        );
    }
    ret
}

/// Other architectures: libc's `syscall()` (glibc's is plain assembly,
/// sysdeps/unix/sysv/linux/*/syscall.S: not a cancellation point),
/// normalised to -errno with `errno` restored.
///
/// # Safety
/// As the syscall `nr` with these arguments.
#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_arch = "s390x",
    target_arch = "powerpc64"
)))]
pub unsafe fn syscall4(nr: c_long, a: usize, b: usize, c: usize, d: usize) -> isize {
    let _errno = crate::error::ErrnoGuard::save();
    // SAFETY: forwarded from the caller.
    let rc = unsafe { libc::syscall(nr, a, b, c, d) };
    if rc < 0 { -(crate::error::errno() as isize) } else { rc as isize }
}

/// See the fallback [`syscall4`].
///
/// # Safety
/// As the syscall `nr` with these arguments.
#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_arch = "s390x",
    target_arch = "powerpc64"
)))]
#[inline(always)]
pub unsafe fn syscall3(nr: c_long, a: usize, b: usize, c: usize) -> isize {
    // SAFETY: forwarded from the caller.
    unsafe { syscall4(nr, a, b, c, 0) }
}

/// A raw result: the value, or `Err(errno)`.
fn done(rc: isize) -> Result<usize, c_int> {
    if rc < 0 { Err(-rc as c_int) } else { Ok(rc as usize) }
}

/// `openat(AT_FDCWD, path, flags | O_CLOEXEC, mode)`: the new fd.
pub fn open(path: &CStr, flags: c_int, mode: c_uint) -> Result<c_int, c_int> {
    openat(libc::AT_FDCWD, path, flags, mode)
}

/// `openat(dirfd, name, flags | O_CLOEXEC, mode)`: the new fd.
pub fn openat(dirfd: c_int, name: &CStr, flags: c_int, mode: c_uint) -> Result<c_int, c_int> {
    // SAFETY: name is NUL-terminated and outlives the call.
    let rc = unsafe {
        syscall4(
            libc::SYS_openat,
            dirfd as isize as usize,
            name.as_ptr() as usize,
            (flags | libc::O_CLOEXEC) as usize,
            mode as usize,
        )
    };
    done(rc).map(|fd| fd as c_int)
}

/// One `read(2)` into `buf`: the bytes read.
pub fn read(fd: c_int, buf: &mut [u8]) -> Result<usize, c_int> {
    // SAFETY: buf is writable for its length.
    done(unsafe { syscall3(libc::SYS_read, fd as usize, buf.as_mut_ptr() as usize, buf.len()) })
}

/// One `write(2)` of `buf`: the bytes written.
pub fn write(fd: c_int, buf: &[u8]) -> Result<usize, c_int> {
    // SAFETY: buf is readable for its length.
    done(unsafe { syscall3(libc::SYS_write, fd as usize, buf.as_ptr() as usize, buf.len()) })
}

/// All of `buf` to `fd`, retried after EINTR and short writes; stops at the
/// first other failure (the lines that rsverbs writes are its own, and a
/// lost one is never retried into a broken pipe).
pub fn write_all(fd: c_int, mut buf: &[u8]) {
    while !buf.is_empty() {
        match write(fd, buf) {
            Ok(0) => return,
            Ok(n) => buf = &buf[n.min(buf.len())..],
            Err(libc::EINTR) => continue,
            Err(_) => return,
        }
    }
}

/// `close(2)` of an fd of rsverbs' own; its result ignored (Linux frees the
/// number whatever it returns, even EINTR: fs/open.c `close_fd`).
pub fn close(fd: c_int) {
    // SAFETY: closing a number has no memory effect.
    let _ = unsafe { syscall3(libc::SYS_close, fd as usize, 0, 0) };
}

/// `fcntl(fd, cmd, arg)` with an integer argument (`F_GETSIG`,
/// `F_SETSIG`, `F_GETFL`): its answer. Never a cancellation point (glibc
/// makes only the blocking lock commands one).
pub fn fcntl(fd: c_int, cmd: c_int, arg: c_int) -> Result<c_int, c_int> {
    // SAFETY: integer arguments only.
    done(unsafe { syscall3(libc::SYS_fcntl, fd as usize, cmd as usize, arg as isize as usize) }).map(|v| v as c_int)
}

/// Waits at most `timeout_ms` for `fd` to be readable (`ppoll(2)` without
/// a signal mask, as glibc's `poll` on architectures without `poll(2)`),
/// raw, so not a cancellation point. True when it is.
pub fn readable_within(fd: c_int, timeout_ms: u32) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // Mutable: the kernel writes the time left back into it (fs/select.c
    // `poll_select_finish` → `put_timespec64`), so it must not be handed
    // over as a shared borrow's pointer.
    let mut ts = libc::timespec { tv_sec: (timeout_ms / 1000) as _, tv_nsec: ((timeout_ms % 1000) * 1_000_000) as _ };
    // SAFETY: p and ts outlive the call and are the kernel's to write; a
    // NULL signal mask makes the kernel ignore the fifth argument
    // (fs/select.c `do_ppoll`).
    let rc = unsafe { syscall4(libc::SYS_ppoll, &mut p as *mut libc::pollfd as usize, 1, &mut ts as *mut libc::timespec as usize, 0) };
    rc > 0 && p.revents & libc::POLLIN != 0
}

/// The calling thread's id (`gettid(2)`).
pub fn gettid() -> i32 {
    // SAFETY: gettid takes no argument and cannot fail.
    unsafe { syscall3(libc::SYS_gettid, 0, 0, 0) as i32 }
}

/// Whether the thread `tid` of this process still exists: `tgkill(pid,
/// tid, 0)` sends nothing and fails with ESRCH when it does not.
pub fn thread_alive(tid: i32) -> bool {
    // SAFETY: getpid cannot fail; signal 0 is only a check.
    let pid = unsafe { libc::getpid() };
    // SAFETY: signal 0 delivers nothing.
    let rc = unsafe { syscall3(libc::SYS_tgkill, pid as usize, tid as usize, 0) };
    rc != -(libc::ESRCH as isize)
}

/// `FUTEX_WAIT_PRIVATE` on `word` while it holds `expected`, at most
/// `timeout_ms` milliseconds: returns at once when the word differs, when
/// woken, on a signal, or at the timeout (all the same to the callers, which
/// look at the word again). Not a cancellation point (glibc's
/// `pthread_mutex_lock` waits with the same call).
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout_ms: u32) {
    let ts = libc::timespec { tv_sec: (timeout_ms / 1000) as _, tv_nsec: ((timeout_ms % 1000) * 1_000_000) as _ };
    // SAFETY: word is a live, aligned u32; ts outlives the call (a relative
    // timeout for FUTEX_WAIT).
    let _ = unsafe {
        syscall4(
            libc::SYS_futex,
            word.as_ptr() as usize,
            (libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG) as usize,
            expected as usize,
            &ts as *const libc::timespec as usize,
        )
    };
}

/// `FUTEX_WAKE_PRIVATE`: wakes every waiter on `word`.
pub fn futex_wake_all(word: &AtomicU32) {
    // SAFETY: word is a live, aligned u32.
    let _ = unsafe {
        syscall3(
            libc::SYS_futex,
            word.as_ptr() as usize,
            (libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG) as usize,
            i32::MAX as usize,
        )
    };
}

/// `FUTEX_WAKE_PRIVATE`: wakes one waiter on `word`.
pub fn futex_wake_one(word: &AtomicU32) {
    // SAFETY: word is a live, aligned u32.
    let _ = unsafe {
        syscall3(libc::SYS_futex, word.as_ptr() as usize, (libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG) as usize, 1)
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{errno, set_errno};

    /// This architecture's raw calls against the real kernel: a file
    /// opened close-on-exec, a pipe's bytes through write and read, the
    /// kernel's errno for a bad fd, and `errno` left alone throughout
    /// (ctest/crossarch.sh runs it on aarch64, powerpc64le and s390x too,
    /// under qemu-user).
    #[test]
    fn raw_calls_reach_the_kernel_and_leave_errno() {
        set_errno(libc::EINTR);
        // Not a /proc/self file: qemu-user fakes those (linux-user/syscall.c
        // `do_guest_openat`: an anonymous file, opened without our flags).
        let fd = open(c"/proc/sys/kernel/ostype", libc::O_RDONLY, 0).expect("open");
        // SAFETY: fd is ours.
        assert_eq!(unsafe { libc::fcntl(fd, libc::F_GETFD) } & libc::FD_CLOEXEC, libc::FD_CLOEXEC);
        let mut b = [0u8; 64];
        assert_eq!(read(fd, &mut b), Ok(6));
        assert_eq!(&b[..6], b"Linux\n");
        close(fd);
        assert_eq!(open(c"/nonexistent/rsverbs", libc::O_RDONLY, 0), Err(libc::ENOENT));
        let mut fds: [c_int; 2] = [-1; 2];
        // SAFETY: fds is two writable ints.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        write_all(fds[1], b"four");
        assert_eq!(read(fds[0], &mut b), Ok(4));
        assert_eq!(&b[..4], b"four");
        close(fds[0]);
        close(fds[1]);
        // -1, never the closed numbers: another test's thread may own them by now.
        assert_eq!(write(-1, b"x"), Err(libc::EBADF));
        assert_eq!(read(-1, &mut b), Err(libc::EBADF));
        // SAFETY: gettid takes no argument.
        assert_eq!(gettid(), unsafe { libc::syscall(libc::SYS_gettid) } as i32);
        assert!(thread_alive(gettid()));
        assert_eq!(errno(), libc::EINTR);
    }

    /// A waiter on a futex word returns when the word changes and it is
    /// woken, and at its timeout when nobody wakes it.
    #[test]
    fn futex_wait_and_wake() {
        let w = AtomicU32::new(1);
        std::thread::scope(|s| {
            s.spawn(|| {
                while w.load(core::sync::atomic::Ordering::Acquire) == 1 {
                    futex_wait(&w, 1, 10_000);
                }
            });
            w.store(2, core::sync::atomic::Ordering::Release);
            futex_wake_one(&w);
        });
        let t = std::time::Instant::now();
        futex_wait(&w, 2, 20);
        assert!(t.elapsed() >= std::time::Duration::from_millis(20), "{:?}", t.elapsed());
        futex_wait(&w, 9, 10_000); // the word differs: at once
    }
}
