//! Where trace lines go: stderr, or a file of rsverbs' own. Each line is one
//! `write()`, so lines of concurrent threads and processes never interleave
//! (write(2): O_APPEND makes the seek and the write one atomic step; a pipe
//! write of at most PIPE_BUF bytes is atomic).
//!
//! The file is opened `O_APPEND|O_CREAT|O_CLOEXEC|O_NOFOLLOW|O_NOCTTY`, mode
//! 0600, and must be a regular file: a symlink is refused (ELOOP), so are a
//! device, a socket and a FIFO (opened `O_NONBLOCK`, so that none can block
//! the program). The fd is known by its (st_dev, st_ino): when the
//! program has closed it or reused its number (daemons close every fd they
//! do not know), lines never land in the program's file, and the file is
//! opened again by its path, by one thread at a time (a second one drops its
//! line rather than wait: a signal handler may be the one tracing). There is
//! no re-open when the process runs with other credentials than it was
//! started with (setuid, setgid: AT_SECURE), nor when the file's directory is
//! world-writable and the process is root; there the first open also needs
//! the file to be the process's own (docs/security.md).

use crate::os::Once;
use alloc::ffi::CString;
use core::sync::atomic::{
    AtomicBool, AtomicI32, AtomicU64, Ordering::AcqRel, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};

/// One destination for lines.
pub struct Sink {
    /// The fd lines go to; -1 when there is none.
    fd: AtomicI32,
    /// For a file: its path, and the (st_dev, st_ino) the fd was opened on.
    path: Once<CString>,
    dev: AtomicU64,
    ino: AtomicU64,
    to_file: AtomicBool,
    /// The file may be opened again by its path.
    reopen: AtomicBool,
    /// A thread is opening it again.
    reopening: AtomicBool,
}

static SINK: Sink = Sink::new();

/// Lines go to stderr.
pub fn to_stderr() {
    SINK.to_stderr();
}

/// Lines are appended to `path`. Returns false when it cannot be opened.
pub fn to_file(path: &[u8]) -> bool {
    SINK.to_file(path)
}

/// At unload: the file's fd, when it is still ours, is closed (a plugin
/// loaded and unloaded a hundred times left a hundred fds before); lines
/// after it go nowhere.
pub fn close() {
    SINK.close();
}

/// Writes one line (the caller keeps `errno`).
pub fn emit(line: &[u8]) {
    SINK.emit(line);
}

impl Sink {
    pub const fn new() -> Self {
        Sink {
            fd: AtomicI32::new(-1),
            path: Once::new(),
            dev: AtomicU64::new(0),
            ino: AtomicU64::new(0),
            to_file: AtomicBool::new(false),
            reopen: AtomicBool::new(false),
            reopening: AtomicBool::new(false),
        }
    }

    fn to_stderr(&self) {
        self.to_file.store(false, Relaxed);
        self.fd.store(libc::STDERR_FILENO, Relaxed);
    }

    fn to_file(&self, path: &[u8]) -> bool {
        let Ok(c) = CString::new(path) else { return false };
        let guarded = guarded_dir(&c);
        let Some(fd) = open(&c, guarded) else { return false };
        // Set once per process (RSVERBS_TRACE is read once).
        let _ = self.path.set(c);
        self.reopen.store(!guarded && !secure(), Relaxed);
        self.install(fd);
        self.to_file.store(true, Relaxed);
        true
    }

    fn install(&self, fd: i32) {
        if let Some((dev, ino)) = identity(fd) {
            self.dev.store(dev, Relaxed);
            self.ino.store(ino, Relaxed);
        }
        self.fd.store(fd, Release);
    }

    fn close(&self) {
        self.reopen.store(false, Relaxed);
        let fd = self.fd.swap(-1, AcqRel);
        // Never stderr, never an fd the program has taken over.
        if fd >= 0
            && self.to_file.load(Relaxed)
            && identity(fd) == Some((self.dev.load(Relaxed), self.ino.load(Relaxed)))
        {
            crate::sys::close(fd);
        }
    }

    fn emit(&self, line: &[u8]) {
        let mut fd = self.fd.load(Acquire);
        if fd < 0 {
            return;
        }
        if self.to_file.load(Relaxed) && identity(fd) != Some((self.dev.load(Relaxed), self.ino.load(Relaxed))) {
            // The program closed our fd or reused its number: never write
            // to it, never close it (it is not ours any more).
            match self.reopened() {
                Some(new) => fd = new,
                None => return,
            }
        }
        // Raw: never a cancellation point (crate::sys).
        crate::sys::write_all(fd, line);
    }

    /// Opens the file again, when allowed, by one thread at a time; None
    /// when not allowed, busy or failed (then tracing to the file stops).
    #[cold]
    fn reopened(&self) -> Option<i32> {
        if !self.reopen.load(Relaxed) || self.reopening.compare_exchange(false, true, Acquire, Relaxed).is_err() {
            return None;
        }
        // Another thread may have done it just before us.
        let current = self.fd.load(Acquire);
        let out = if identity(current) == Some((self.dev.load(Relaxed), self.ino.load(Relaxed))) {
            Some(current)
        } else {
            match self.path.get().and_then(|p| open(p, false)) {
                Some(fd) => {
                    self.install(fd);
                    Some(fd)
                }
                None => {
                    self.fd.store(-1, Release);
                    None
                }
            }
        };
        self.reopening.store(false, Release);
        out
    }
}

/// Opens `path` for appending: a regular file, not through a symlink, and
/// when `own` the process's own (uid). None on any failure.
fn open(path: &CString, own: bool) -> Option<i32> {
    // O_NONBLOCK: a FIFO without a reader must not block the program's
    // constructor (it answers ENXIO; no effect on a regular file).
    let flags = libc::O_WRONLY
        | libc::O_APPEND
        | libc::O_CREAT
        | libc::O_CLOEXEC
        | libc::O_NOFOLLOW
        | libc::O_NOCTTY
        | libc::O_NONBLOCK;
    let fd = crate::sys::open(path, flags, 0o600).ok()?;
    // SAFETY: an all-zero stat is valid; fstat fills it or fails.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: fd is the file just opened; st is a valid out-pointer.
    let ok = unsafe { libc::fstat(fd, &mut st) } == 0
        && st.st_mode & libc::S_IFMT == libc::S_IFREG
        // SAFETY: geteuid cannot fail.
        && (!own || st.st_uid == unsafe { libc::geteuid() });
    if !ok {
        crate::sys::close(fd);
        return None;
    }
    Some(fd)
}

/// Root, and `path`'s directory is world-writable (a sticky /tmp): another
/// user may have put the name there.
fn guarded_dir(path: &CString) -> bool {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return false;
    }
    let bytes = path.as_bytes();
    let dir = match bytes.iter().rposition(|&b| b == b'/') {
        Some(0) => CString::new("/"),
        Some(i) => CString::new(&bytes[..i]),
        None => CString::new("."),
    };
    let Ok(dir) = dir else { return true };
    // SAFETY: an all-zero stat is valid; stat fills it or fails.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: dir is NUL-terminated; st is a valid out-pointer.
    unsafe { libc::stat(dir.as_ptr(), &mut st) != 0 || st.st_mode & libc::S_IWOTH != 0 }
}

/// The process runs with other credentials than its caller's (AT_SECURE:
/// setuid, setgid, file capabilities).
fn secure() -> bool {
    // SAFETY: getauxval is always safe to call.
    unsafe { libc::getauxval(libc::AT_SECURE) != 0 }
}

fn identity(fd: i32) -> Option<(u64, u64)> {
    // SAFETY: an all-zero stat is valid; fstat fills it or fails.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: st is a valid out-pointer.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some((st.st_dev, st.st_ino))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, symlink};

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("rsverbs-sink-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir(&d).expect("temp dir");
        d
    }

    fn fds_on(path: &std::path::Path) -> usize {
        std::fs::read_dir("/proc/self/fd")
            .expect("/proc/self/fd")
            .filter(|e| e.as_ref().is_ok_and(|e| std::fs::read_link(e.path()).is_ok_and(|t| t == path)))
            .count()
    }

    /// docs/security.md: a symlink is never followed, and a new file is
    /// the owner's only.
    #[test]
    fn a_symlink_is_refused_and_the_file_is_0600() {
        let d = dir("link");
        let target = d.join("target");
        let link = d.join("link");
        symlink(&target, &link).expect("symlink");
        let s = Sink::new();
        assert!(!s.to_file(link.as_os_str().as_encoded_bytes()), "followed a symlink");
        assert!(!target.exists(), "created the link's target");
        let f = d.join("trace");
        assert!(s.to_file(f.as_os_str().as_encoded_bytes()));
        s.emit(b"a line\n");
        let m = std::fs::metadata(&f).expect("trace file");
        assert_eq!(m.mode() & 0o777, 0o600);
        assert_eq!(std::fs::read(&f).expect("read"), b"a line\n");
        let fifo = CString::new(d.join("fifo").as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert!(!Sink::new().to_file(fifo.as_bytes()), "opened a FIFO");
        let _ = std::fs::remove_dir_all(&d);
    }

    /// The program closes our fd and opens its own file at the same number:
    /// the line goes to a re-opened trace file, never into the program's
    /// file, and threads that notice it at once open one fd, not several.
    #[test]
    fn a_reused_fd_is_never_written_and_reopened_once() {
        let d = dir("reuse");
        let f = d.join("trace");
        let s = Sink::new();
        assert!(s.to_file(f.as_os_str().as_encoded_bytes()));
        let ours = s.fd.load(Relaxed);
        let theirs = d.join("theirs");
        let p = CString::new(theirs.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: the program's side: a file of its own, put at our fd's number.
        unsafe {
            let fd = libc::open(p.as_ptr(), libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC, 0o600);
            assert!(fd >= 0);
            assert_eq!(libc::dup2(fd, ours), ours);
            libc::close(fd);
        }
        std::thread::scope(|t| {
            for _ in 0..8 {
                t.spawn(|| s.emit(b"after\n"));
            }
        });
        assert_eq!(std::fs::read(&theirs).expect("read"), b"", "wrote into the program's file");
        let got = std::fs::read(&f).expect("read");
        assert!(!got.is_empty() && got.len().is_multiple_of(6) && got.len() <= 48, "{got:?}");
        assert_eq!(fds_on(&f), 1, "re-opened more than once");
        // SAFETY: the program's fd, closed by the program.
        unsafe { libc::close(ours) };
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Issue 29 item 6: closed at unload, and only when still ours.
    #[test]
    fn close_releases_the_file_once_and_never_stderr() {
        let d = dir("close");
        let f = d.join("trace");
        let s = Sink::new();
        assert!(s.to_file(f.as_os_str().as_encoded_bytes()));
        assert_eq!(fds_on(&f), 1);
        s.close();
        assert_eq!(fds_on(&f), 0, "the trace file's fd outlived the unload");
        s.emit(b"after\n");
        assert_eq!(fds_on(&f), 0, "re-opened after the unload");
        s.close();
        let e = Sink::new();
        e.to_stderr();
        e.close();
        // SAFETY: F_GETFD on stderr only reads its flags.
        assert!(unsafe { libc::fcntl(libc::STDERR_FILENO, libc::F_GETFD) } >= 0, "closed stderr");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn no_reopen_when_not_allowed() {
        let d = dir("noreopen");
        let f = d.join("trace");
        let s = Sink::new();
        assert!(s.to_file(f.as_os_str().as_encoded_bytes()));
        s.reopen.store(false, Relaxed);
        let ours = s.fd.load(Relaxed);
        // SAFETY: stands in for the program closing an fd it does not know.
        unsafe { libc::close(ours) };
        s.emit(b"lost\n");
        assert_eq!(std::fs::read(&f).expect("read"), b"");
        assert_eq!(fds_on(&f), 0);
        let _ = std::fs::remove_dir_all(&d);
    }
}
