//! Where trace lines go: stderr, or a file opened `O_APPEND|O_CLOEXEC`.
//! Each line is one `write()`, so lines of concurrent threads and
//! processes never interleave (write(2): O_APPEND makes the seek and the
//! write one atomic step; a pipe write of at most PIPE_BUF bytes is atomic).

use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering::Relaxed};
use std::ffi::CString;
use std::sync::OnceLock;

/// The fd lines go to; -1 when there is none.
static FD: AtomicI32 = AtomicI32::new(-1);
/// For a file: its path, and the (st_dev, st_ino) the fd was opened on.
static PATH: OnceLock<CString> = OnceLock::new();
static DEV: AtomicU64 = AtomicU64::new(0);
static INO: AtomicU64 = AtomicU64::new(0);
/// Lines go to the file at PATH (else to stderr).
static TO_FILE: AtomicBool = AtomicBool::new(false);

/// Lines go to stderr.
pub fn to_stderr() {
    TO_FILE.store(false, Relaxed);
    FD.store(libc::STDERR_FILENO, Relaxed);
}

/// Lines are appended to `path` (created 0644 if missing). Returns false
/// when it cannot be opened (errno set).
pub fn to_file(path: &[u8]) -> bool {
    let Ok(c) = CString::new(path) else { return false };
    let ok = reopen(&c);
    if ok {
        // Set once per process (RSVERBS_TRACE is read once).
        let _ = PATH.set(c);
    }
    TO_FILE.store(ok && PATH.get().is_some(), Relaxed);
    ok
}

fn reopen(path: &CString) -> bool {
    let flags = libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT | libc::O_CLOEXEC;
    // SAFETY: path is NUL-terminated.
    let fd = unsafe { libc::open(path.as_ptr(), flags, 0o644) };
    if fd < 0 {
        return false;
    }
    if let Some((dev, ino)) = identity(fd) {
        DEV.store(dev, Relaxed);
        INO.store(ino, Relaxed);
    }
    FD.store(fd, Relaxed);
    true
}

fn identity(fd: i32) -> Option<(u64, u64)> {
    // SAFETY: an all-zero stat is valid; fstat fills it or fails.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: st is a valid out-pointer.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some((st.st_dev, st.st_ino))
}

/// Writes one line (the caller saves and restores `errno`). A file fd the
/// program closed or reused since (daemons close every fd) is noticed by
/// its inode and the file is opened again, so lines never land in the
/// program's own files.
pub fn emit(line: &[u8]) {
    let mut fd = FD.load(Relaxed);
    if fd < 0 {
        return;
    }
    if let Some(path) = PATH.get().filter(|_| TO_FILE.load(Relaxed)) {
        if identity(fd) != Some((DEV.load(Relaxed), INO.load(Relaxed))) {
            if !reopen(path) {
                return;
            }
            fd = FD.load(Relaxed);
        }
    }
    let mut done = 0;
    while done < line.len() {
        // SAFETY: the slice is readable for its length.
        let n = unsafe { libc::write(fd, line[done..].as_ptr().cast(), line.len() - done) };
        if n > 0 {
            done += n as usize;
        } else if n < 0 && crate::error::errno() == libc::EINTR {
            continue;
        } else {
            return;
        }
    }
}
