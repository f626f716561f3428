//! Where trace lines go: stderr, or a file of rsverbs' own. Each line is one
//! `write()`, so lines of concurrent threads and processes never interleave
//! (write(2): O_APPEND makes the seek and the write one atomic step; a pipe
//! write of at most PIPE_BUF bytes is atomic).
//!
//! The file must be a regular file: its name is first opened `O_PATH|
//! O_NOFOLLOW` and `fstat`ed, so that a symlink, a FIFO, a device or a
//! socket is refused before anything opens it (no FIFO reader sees a
//! writer, no device's open runs); a regular file is then opened
//! `O_WRONLY|O_APPEND|O_NOFOLLOW|O_NOCTTY|O_NONBLOCK|O_CLOEXEC` at the same
//! directory fd and must be the same inode; a missing one is created
//! `O_EXCL`, mode 0600. As root or under AT_SECURE, the directory is reached
//! from "/" (or the cwd) one component at a time without following a
//! symlink, and every directory on the way must be root's or the euid's and
//! writable by no one else (unless sticky and root's, as /tmp); the file
//! must be the euid's, with one link. The fd is known by its (st_dev,
//! st_ino): when the program has closed it or reused its number (daemons
//! close every fd they do not know), lines never land in the program's
//! file, and the file is opened again by its path, with the same checks, by
//! one thread at a time (a second one drops its line rather than wait: a
//! signal handler may be the one tracing). There is no re-open when the
//! process runs with other credentials than it was started with (setuid,
//! setgid: AT_SECURE) (docs/security.md).

use crate::os::Once;
use alloc::vec::Vec;
use core::ffi::CStr;
use core::sync::atomic::{
    AtomicBool, AtomicI32, AtomicU64, Ordering::AcqRel, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};

/// One destination for lines.
pub struct Sink {
    /// The fd lines go to; -1 when there is none.
    fd: AtomicI32,
    /// For a file: its path, and the (st_dev, st_ino) the fd was opened on.
    path: Once<Path>,
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
        // The path's copy allocated fallibly (a failed allocation: no
        // trace file, never an abort).
        let Some(c) = Path::new(path) else { return false };
        let Some(fd) = open(&c, guarded()) else { return false };
        // Set once per process (RSVERBS_TRACE is read once).
        let _ = self.path.set(c);
        // A re-open walks and checks the path again as root (open's guard).
        self.reopen.store(!secure(), Relaxed);
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
            match self.path.get().and_then(|p| open(p, guarded())) {
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

/// Opens `path` for appending; None on any failure. Never opens for
/// writing what it has not looked at first (docs/security.md, promise 10): the name is
/// opened `O_PATH|O_NOFOLLOW` (no open of the object itself: no FIFO reader
/// sees a writer, no device's open runs: fs/open.c `do_dentry_open` returns
/// before `f_op->open` for O_PATH), `fstat`ed, and only a regular file is
/// opened again for writing, at the same directory fd, and must be the same
/// (st_dev, st_ino). A missing name is created `O_CREAT|O_EXCL`, mode 0600.
///
/// `guard` (root, AT_SECURE; docs/security.md, promise 10): the directory is reached from
/// "/" (or the cwd) one component at a time without following a symlink,
/// every directory on the way checked by [`trusted_dir`], no `..`; and the
/// file must be the euid's, with one link (a hard link another user made in
/// a sticky directory to a file of root's is refused).
fn open(path: &Path, guard: bool) -> Option<i32> {
    let name = path.name();
    if name.to_bytes().is_empty() || name == c"." || name == c".." || name.to_bytes().len() > NAME_MAX {
        return None;
    }
    let dir = path.dir();
    let dirfd = if guard { walk(dir.to_bytes().first() == Some(&b'/'), dir.to_bytes())? } else { open_dir(dir)? };
    let fd = open_in(dirfd, name, guard);
    crate::sys::close(dirfd);
    fd
}

/// A path component's longest name (NAME_MAX, linux/limits.h).
const NAME_MAX: usize = 255;

/// The trace file's path as [`open`] takes it: its directory and its name,
/// each NUL-terminated, in one buffer allocated (fallibly) when
/// `RSVERBS_TRACE` is read, so that opening the file again inside a verb
/// builds no path on the stack (docs/security.md, the stack budget).
struct Path {
    buf: Vec<u8>,
    /// Where the name starts in `buf`.
    name_at: usize,
}

impl Path {
    /// None for a path with a NUL, or when the buffer cannot be allocated.
    fn new(path: &[u8]) -> Option<Path> {
        if path.contains(&0) {
            return None;
        }
        let (dir, name) = match path.iter().rposition(|&b| b == b'/') {
            Some(i) => (&path[..i.max(1)], &path[i + 1..]),
            None => (&b"."[..], path),
        };
        let mut buf = Vec::new();
        buf.try_reserve_exact(dir.len() + name.len() + 2).ok()?;
        buf.extend_from_slice(dir);
        buf.push(0);
        let name_at = buf.len();
        buf.extend_from_slice(name);
        buf.push(0);
        Some(Path { buf, name_at })
    }

    fn dir(&self) -> &CStr {
        CStr::from_bytes_until_nul(&self.buf).unwrap_or(c".")
    }

    fn name(&self) -> &CStr {
        CStr::from_bytes_until_nul(&self.buf[self.name_at..]).unwrap_or(c"")
    }
}

/// The flags of the one open for writing. O_NONBLOCK: no open may block the
/// program's constructor (none does on a regular file, the only kind opened).
const WRITE: i32 = libc::O_WRONLY | libc::O_APPEND | libc::O_NOFOLLOW | libc::O_NOCTTY | libc::O_NONBLOCK;

/// The file `name` in `dirfd`, as [`open`] says.
fn open_in(dirfd: i32, name: &CStr, guard: bool) -> Option<i32> {
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { libc::geteuid() };
    // Twice at most: the name may appear between the look and the create.
    for _ in 0..2 {
        let seen = match crate::sys::openat(dirfd, name, libc::O_PATH | libc::O_NOFOLLOW, 0) {
            Ok(p) => {
                let st = stat(p);
                crate::sys::close(p);
                st?
            }
            Err(libc::ENOENT) => match crate::sys::openat(dirfd, name, WRITE | libc::O_CREAT | libc::O_EXCL, 0o600) {
                // New, ours, regular: nothing else can be at this fd.
                Ok(fd) => return Some(fd),
                Err(libc::EEXIST) => continue,
                Err(_) => return None,
            },
            Err(_) => return None,
        };
        // A symlink (O_PATH|O_NOFOLLOW opens the link itself), a FIFO, a
        // device, a socket, a directory: never opened for writing.
        if seen.st_mode & libc::S_IFMT != libc::S_IFREG || (guard && (seen.st_uid != euid || seen.st_nlink != 1)) {
            return None;
        }
        let fd = crate::sys::openat(dirfd, name, WRITE, 0).ok()?;
        // The name may have been replaced between the two opens.
        match stat(fd) {
            Some(st)
                if (st.st_dev, st.st_ino) == (seen.st_dev, seen.st_ino) && st.st_mode & libc::S_IFMT == libc::S_IFREG =>
            {
                return Some(fd);
            }
            _ => {
                crate::sys::close(fd);
                return None;
            }
        }
    }
    None
}

/// The directory `dir`, symlinks followed as the kernel does (the process
/// opens only what its caller could).
fn open_dir(dir: &CStr) -> Option<i32> {
    crate::sys::open(dir, libc::O_PATH | libc::O_DIRECTORY, 0).ok()
}

/// Root or AT_SECURE: `dir` reached from "/" (`absolute`) or the cwd one
/// component at a time with `openat(O_PATH|O_NOFOLLOW|O_DIRECTORY)` (a
/// symlink answers ENOTDIR; the walk needs no /proc and no openat2, so it
/// works on every kernel), each directory, the first included, checked by
/// [`trusted_dir`] before the next is looked up in it. `..` is refused.
fn walk(absolute: bool, dir: &[u8]) -> Option<i32> {
    let start: &CStr = if absolute { c"/" } else { c"." };
    let mut fd = crate::sys::open(start, libc::O_PATH | libc::O_DIRECTORY, 0).ok()?;
    for part in dir.split(|&b| b == b'/') {
        let mut n = Name::new();
        let ok = trusted_dir(fd)
            && match part {
                b"" | b"." => continue,
                b".." => false,
                _ => n.set(part),
            };
        let next = if ok {
            crate::sys::openat(fd, n.cstr(), libc::O_PATH | libc::O_NOFOLLOW | libc::O_DIRECTORY, 0).ok()
        } else {
            None
        };
        crate::sys::close(fd);
        fd = next?;
    }
    if !trusted_dir(fd) {
        crate::sys::close(fd);
        return None;
    }
    Some(fd)
}

/// A directory that no user but the euid and root can change: owned by one
/// of them, and writable by neither group nor others, unless it is sticky
/// and root's (`/tmp`: others may add names there but not replace ours;
/// the file's own checks in [`open_in`] do the rest).
fn trusted_dir(fd: i32) -> bool {
    let Some(st) = stat(fd) else { return false };
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { libc::geteuid() };
    let shared = st.st_mode & (libc::S_IWGRP | libc::S_IWOTH) != 0;
    st.st_mode & libc::S_IFMT == libc::S_IFDIR
        && (st.st_uid == euid || st.st_uid == 0)
        && (!shared || (st.st_mode & libc::S_ISVTX != 0 && st.st_uid == 0))
}

/// One path component, NUL-terminated, on the stack (NAME_MAX is 255).
struct Name([u8; 256]);

impl Name {
    fn new() -> Self {
        Name([0; 256])
    }

    /// False when `part` is too long or holds a NUL.
    fn set(&mut self, part: &[u8]) -> bool {
        if part.len() >= self.0.len() || part.contains(&0) {
            return false;
        }
        self.0[..part.len()].copy_from_slice(part);
        self.0[part.len()] = 0;
        true
    }

    fn cstr(&self) -> &CStr {
        CStr::from_bytes_until_nul(&self.0).unwrap_or(c"")
    }
}

/// The path needs the guard: the process is root, or runs with other
/// credentials than its caller's; other users may own directories on the
/// way.
fn guarded() -> bool {
    // SAFETY: geteuid cannot fail.
    (unsafe { libc::geteuid() } == 0) || secure()
}

/// The process runs with other credentials than its caller's (AT_SECURE:
/// setuid, setgid, file capabilities).
fn secure() -> bool {
    // SAFETY: getauxval is always safe to call.
    unsafe { libc::getauxval(libc::AT_SECURE) != 0 }
}

fn stat(fd: i32) -> Option<libc::stat> {
    // SAFETY: an all-zero stat is valid; fstat fills it or fails.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: st is a valid out-pointer.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some(st)
}

fn identity(fd: i32) -> Option<(u64, u64)> {
    stat(fd).map(|st| (st.st_dev, st.st_ino))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("rsverbs-sink-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir(&d).expect("temp dir");
        // Root's own, whatever the umask: the guard's walk accepts it.
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        d
    }

    /// The root guard's tests need root (the test bed runs them as root).
    fn root(test: &str) -> bool {
        // SAFETY: geteuid cannot fail.
        let r = unsafe { libc::geteuid() } == 0;
        if !r {
            println!("{test}: skipped, not root (the guard is root's)");
        }
        r
    }

    fn chown(p: &std::path::Path, uid: u32, mode: u32) {
        std::os::unix::fs::chown(p, Some(uid), Some(uid)).expect("chown");
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    const NOBODY: u32 = 65534;

    fn bytes(p: &std::path::Path) -> &[u8] {
        p.as_os_str().as_encoded_bytes()
    }

    /// docs/security.md, promise 10: root, RSVERBS_TRACE=/tmp/theirs/logs/trace, another
    /// user owns /tmp/theirs (0755) and made `logs` a symlink into a
    /// root-only directory: refused, nothing created there. So is the same
    /// symlink in a directory of root's (the walk never follows one).
    #[test]
    fn root_refuses_a_path_through_another_users_directory_or_a_symlink() {
        if !root("root_refuses_a_path_through_another_users_directory_or_a_symlink") {
            return;
        }
        let only = dir("rootonly");
        let theirs = dir("theirs");
        symlink(&only, theirs.join("logs")).expect("symlink");
        chown(&theirs, NOBODY, 0o755);
        assert!(!Sink::new().to_file(bytes(&theirs.join("logs/trace"))), "went through their directory");
        assert!(!only.join("trace").exists(), "created root's file where their symlink pointed");
        // Their directory without the symlink: refused as well (they may
        // rename and replace anything in it).
        std::fs::create_dir(theirs.join("real")).expect("mkdir");
        assert!(!Sink::new().to_file(bytes(&theirs.join("real/trace"))));
        assert!(!theirs.join("real/trace").exists());
        let ours = dir("ourlink");
        symlink(&only, ours.join("logs")).expect("symlink");
        assert!(!Sink::new().to_file(bytes(&ours.join("logs/trace"))), "followed a symlink in the directory path");
        assert!(!only.join("trace").exists());
        for d in [only, theirs, ours] {
            let _ = std::fs::remove_dir_all(&d);
        }
    }

    /// docs/security.md, promise 10: a file another user pre-created in their own
    /// directory never gets root's lines; nor, in a sticky directory, a
    /// file of theirs or a second link (a hard link they made) to a file of
    /// root's.
    #[test]
    fn root_never_appends_to_another_users_file_or_a_second_link() {
        if !root("root_never_appends_to_another_users_file_or_a_second_link") {
            return;
        }
        let theirs = dir("theirfile");
        let f = theirs.join("trace");
        std::fs::write(&f, b"theirs\n").expect("write");
        chown(&f, NOBODY, 0o666);
        chown(&theirs, NOBODY, 0o755);
        let s = Sink::new();
        if s.to_file(bytes(&f)) {
            s.emit(b"root's line\n");
        }
        assert_eq!(std::fs::read(&f).expect("read"), b"theirs\n", "root's line in their file");
        let sticky = dir("sticky");
        chown(&sticky, 0, 0o1777);
        let other = sticky.join("other");
        std::fs::write(&other, b"").expect("write");
        chown(&other, NOBODY, 0o666);
        assert!(!Sink::new().to_file(bytes(&other)), "appended to another user's file in a sticky directory");
        let mine = sticky.join("mine");
        std::fs::write(&mine, b"").expect("write");
        std::fs::hard_link(&mine, sticky.join("link")).expect("link");
        assert!(!Sink::new().to_file(bytes(&sticky.join("link"))), "appended through a second link");
        for d in [theirs, sticky] {
            let _ = std::fs::remove_dir_all(&d);
        }
    }

    /// docs/security.md, promise 10: the guard lets root's ordinary paths through: a new
    /// file in a directory of root's under /tmp (sticky, root's), and the
    /// same file again (appended to).
    #[test]
    fn root_writes_its_own_path() {
        if !root("root_writes_its_own_path") {
            return;
        }
        let d = dir("rootpath");
        let f = d.join("trace");
        let s = Sink::new();
        assert!(s.to_file(bytes(&f)), "refused root's own path");
        s.emit(b"one\n");
        let t = Sink::new();
        assert!(t.to_file(bytes(&f)), "refused root's own existing file");
        t.emit(b"two\n");
        assert_eq!(std::fs::read(&f).expect("read"), b"one\ntwo\n");
        assert_eq!(std::fs::metadata(&f).expect("stat").mode() & 0o7777, 0o600);
        s.close();
        t.close();
        let _ = std::fs::remove_dir_all(&d);
    }

    /// docs/security.md, promise 10: a FIFO's reader never sees a writer. A reader that
    /// saw a writer come and go is told POLLHUP (fs/pipe.c `pipe_poll`:
    /// no writers, and the writer counter moved since the reader opened);
    /// the parent commit opened the FIFO for writing, then refused it.
    #[test]
    fn a_fifo_never_sees_a_writer() {
        let d = dir("fifo");
        let fifo = CString::new(bytes(&d.join("fifo"))).expect("path");
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        // SAFETY: as above; the reader does not block (O_NONBLOCK).
        let reader = unsafe { libc::open(fifo.as_ptr(), libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC) };
        assert!(reader >= 0);
        assert!(!Sink::new().to_file(fifo.as_bytes()), "accepted a FIFO");
        let mut p = libc::pollfd { fd: reader, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd; no wait.
        assert!(unsafe { libc::poll(&mut p, 1, 0) } >= 0);
        assert_eq!(p.revents & libc::POLLHUP, 0, "the FIFO's reader saw a writer come and go");
        // SAFETY: our reader.
        unsafe { libc::close(reader) };
        let _ = std::fs::remove_dir_all(&d);
    }

    /// docs/security.md, promise 10: a device is never opened for writing (tape rewind,
    /// watchdog armed). A character device node of our own (1,3: the
    /// kernel's null device, at a path of this test's only), watched with
    /// inotify: a write-mode open's close is IN_CLOSE_WRITE
    /// (include/linux/fsnotify.h `fsnotify_close`); the parent commit's
    /// open-then-refuse made one.
    #[test]
    fn a_device_is_never_opened() {
        if !root("a_device_is_never_opened") {
            return;
        }
        let d = dir("dev");
        let node = CString::new(bytes(&d.join("null"))).expect("path");
        // SAFETY: a NUL-terminated path; mknod needs CAP_MKNOD (root).
        if unsafe { libc::mknod(node.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 3)) } != 0 {
            println!("a_device_is_never_opened: skipped, mknod failed ({})", std::io::Error::last_os_error());
            let _ = std::fs::remove_dir_all(&d);
            return;
        }
        // SAFETY: plain syscalls on our own fds and paths.
        let ino = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        assert!(ino >= 0);
        // SAFETY: as above.
        assert!(unsafe { libc::inotify_add_watch(ino, node.as_ptr(), libc::IN_CLOSE_WRITE) } >= 0);
        assert!(!Sink::new().to_file(node.as_bytes()), "accepted a device");
        let mut b = [0u8; 256];
        // SAFETY: b is writable for its length.
        let n = unsafe { libc::read(ino, b.as_mut_ptr().cast(), b.len()) };
        assert!(n < 0, "the device was opened for writing ({n} bytes of inotify events)");
        // SAFETY: our fd.
        unsafe { libc::close(ino) };
        let _ = std::fs::remove_dir_all(&d);
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

    /// docs/security.md, promise 17: closed at unload, and only when still ours.
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
