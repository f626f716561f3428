//! The one error type, and the thread's `errno`.
//!
//! rdma-core returns a positive errno and does not set `errno` itself: `errno`
//! is whatever the failed syscall left (cmd_ioctl.c `execute_ioctl`,
//! cmd_fallback.c `_execute_cmd_write`). A few returns are made without a
//! failed syscall (the sysfs fallback's EOPNOTSUPP, ENODATA and EINVAL) and
//! leave `errno` as it was. [`Error`] records which of the two it is, so that
//! the C boundary can reproduce `errno` exactly.

use core::ffi::c_int;

/// A failed verb: the positive errno to return, and whether `errno` must
/// equal it afterwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Error {
    pub code: c_int,
    pub sets_errno: bool,
}

impl Error {
    /// An error that a syscall reported (or rsverbs decided): `errno == code`.
    pub const fn sys(code: c_int) -> Self {
        Error { code, sets_errno: true }
    }
    /// An error rdma-core returns without touching `errno`.
    pub const fn quiet(code: c_int) -> Self {
        Error { code, sets_errno: false }
    }
}

pub type Result<T> = core::result::Result<T, Error>;

/// The calling thread's `errno`.
pub fn errno() -> c_int {
    // SAFETY: __errno_location returns a valid pointer to this thread's errno.
    unsafe { *libc::__errno_location() }
}

/// Sets the calling thread's `errno`.
pub fn set_errno(value: c_int) {
    // SAFETY: as in errno().
    unsafe { *libc::__errno_location() = value }
}

/// Saves the thread's `errno` when made and puts it back when dropped:
/// around rsverbs' own syscalls in the middle of a verb (route probes,
/// dladdr, realpath, the trace and the IP join), whose errno is not the
/// caller's.
#[must_use = "errno is restored when the guard is dropped"]
pub struct ErrnoGuard(c_int);

impl ErrnoGuard {
    pub fn save() -> Self {
        ErrnoGuard(errno())
    }

    /// Leaves `errno` as it is now: for an error path whose failed syscall
    /// set `errno` the way rdma-core's would.
    pub fn keep_current(self) {
        core::mem::forget(self);
    }
}

impl Drop for ErrnoGuard {
    fn drop(&mut self) {
        set_errno(self.0);
    }
}

/// Turns a verb's result into the C return value, setting `errno` where
/// rdma-core's would be set. The only place that maps errors to C.
pub fn to_c(result: Result<()>) -> c_int {
    match result {
        Ok(()) => 0,
        Err(e) => {
            if e.sets_errno {
                set_errno(e.code);
            }
            e.code
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_restores_errno_on_every_exit() {
        set_errno(1234);
        {
            let _g = ErrnoGuard::save();
            set_errno(libc::EINVAL);
        }
        assert_eq!(errno(), 1234);
        let early = |fail: bool| -> c_int {
            let _g = ErrnoGuard::save();
            set_errno(libc::EBADF);
            if fail {
                return -1;
            }
            0
        };
        assert_eq!((early(true), errno()), (-1, 1234));
        assert_eq!((early(false), errno()), (0, 1234));
    }
}
