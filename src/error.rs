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
/// rdma-core's would be set. With [`to_c_gid`] and [`to_c_count`], the
/// only place that maps errors to C.
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

/// `ibv_query_gid`'s convention (rdma-core verbs.c): 0 and the GID to
/// store; for ENODATA (an empty entry) 0 and the zero GID; else -1 and
/// nothing to store. `errno` as [`to_c`] leaves it, ENODATA's included.
pub fn to_c_gid(result: Result<[u8; 16]>) -> (c_int, Option<[u8; 16]>) {
    match result {
        Ok(gid) => (0, Some(gid)),
        Err(e) => {
            if to_c(Err(e)) == libc::ENODATA { (0, Some([0; 16])) } else { (-1, None) }
        }
    }
}

/// `_ibv_query_gid_table`'s convention (rdma-core cmd_device.c): the
/// number of entries, or the negative errno; `errno` as [`to_c`] leaves it.
pub fn to_c_count(result: Result<usize>) -> isize {
    match result {
        Ok(n) => isize::try_from(n).unwrap_or(isize::MAX),
        Err(e) => -(to_c(Err(e)) as isize),
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

    #[test]
    fn the_gid_family_conventions() {
        set_errno(4242);
        assert_eq!(to_c_gid(Ok([7; 16])), (0, Some([7; 16])));
        assert_eq!(errno(), 4242);
        // An empty entry from the kernel: 0, the zero GID, errno ENODATA.
        assert_eq!(to_c_gid(Err(Error::sys(libc::ENODATA))), (0, Some([0; 16])));
        assert_eq!(errno(), libc::ENODATA);
        set_errno(4242);
        assert_eq!(to_c_gid(Err(Error::quiet(libc::ENODATA))), (0, Some([0; 16])));
        assert_eq!(to_c_gid(Err(Error::quiet(libc::EINVAL))), (-1, None));
        assert_eq!(errno(), 4242);
        assert_eq!(to_c_gid(Err(Error::sys(libc::EBADF))), (-1, None));
        assert_eq!(errno(), libc::EBADF);
        assert_eq!(to_c_count(Ok(4)), 4);
        set_errno(4242);
        assert_eq!(to_c_count(Err(Error::quiet(libc::EOPNOTSUPP))), -(libc::EOPNOTSUPP as isize));
        assert_eq!(errno(), 4242);
        assert_eq!(to_c_count(Err(Error::sys(libc::EINVAL))), -22);
        assert_eq!(errno(), libc::EINVAL);
    }
}
