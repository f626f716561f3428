//! What rsverbs took from `std`, made here over the C library: reading a
//! file or a directory, the process id, the monotonic clock, and a cell
//! written once; one place for each, so that librsverbs.so.1 can be
//! built without `std` (docs/building.md). The calls are the ones `std`
//! makes on Linux (library/std/src/sys: `File::open` and `read_to_end`
//! retry EINTR, `read_dir` is `opendir`/`readdir`, `process::id` is
//! `getpid`, `Instant` reads `CLOCK_MONOTONIC`). Nothing here yields or
//! spins: a wait sleeps on a futex (`crate::sys`). Callers keep `errno`
//! as they did around `std`'s calls.

use crate::error::{Error, Result, errno, set_errno};
use crate::sys;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::ffi::{CStr, c_int};
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicU8, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};

/// A file of rsverbs' own, open for reading; closed when dropped (its
/// result ignored, as `std`'s `File` and rdma-core's sysfs reads ignore it).
pub struct File(c_int);

impl File {
    /// `open(path, O_RDONLY | O_CLOEXEC)`, once: Err with the errno it set.
    /// Raw (`sys`): never a cancellation point.
    pub fn open(path: &CStr) -> Result<File> {
        let fd = sys::open(path, libc::O_RDONLY, 0).map_err(failed)?;
        Ok(File(fd))
    }

    /// One `read(2)` into `buf`: the bytes read, or Err with the errno it set.
    pub fn read(&self, buf: &mut [u8]) -> Result<usize> {
        sys::read(self.0, buf).map_err(failed)
    }
}

/// A failed raw call, with `errno` set as libc's wrapper would have set it:
/// the sysfs fallback's callers read it as rdma-core's do.
fn failed(code: c_int) -> Error {
    set_errno(code);
    Error::sys(code)
}

impl Drop for File {
    fn drop(&mut self) {
        // The fd was opened by File::open and is closed once, here.
        sys::close(self.0);
    }
}

/// Text built on the stack (no allocation), cut at `N` bytes: a message
/// that one `write()` sends.
pub struct Text<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> Text<N> {
    pub const fn new() -> Self {
        Text { buf: [0; N], len: 0 }
    }
    /// Appends `b`, cut at the capacity.
    pub fn push_bytes(&mut self, b: &[u8]) {
        push(&mut self.buf, &mut self.len, b);
    }
    /// The bytes so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
    /// The text so far (`?` if a cut split a character).
    pub fn as_str(&self) -> &str {
        core::str::from_utf8(self.as_bytes()).unwrap_or("?")
    }
    /// The text as a C string (a NUL appended): None when it does not fit,
    /// or holds a NUL already.
    pub fn cstr(&mut self) -> Option<&CStr> {
        if self.len == N {
            return None;
        }
        self.buf[self.len] = 0;
        CStr::from_bytes_with_nul(&self.buf[..=self.len]).ok()
    }
    /// Replaces every ASCII control byte (below 0x20, and DEL) so far by
    /// `?`: names the kernel or another process chose (a netdev named
    /// with an ESC by a CAP_NET_ADMIN holder, a device name) then cannot
    /// drive the terminal or split a line that others parse. Bytes of
    /// other UTF-8 characters stay.
    pub fn mask_controls(&mut self) {
        for b in &mut self.buf[..self.len] {
            if *b < 0x20 || *b == 0x7f {
                *b = b'?';
            }
        }
    }
    /// The bytes so far and a final newline (the last byte gives way to it
    /// when the text is full).
    pub fn line(&mut self) -> &[u8] {
        if N == 0 {
            return &[];
        }
        if self.len == N {
            self.len -= 1;
        }
        self.buf[self.len] = b'\n';
        &self.buf[..=self.len]
    }
}

impl<const N: usize> core::fmt::Write for Text<N> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.push_bytes(s.as_bytes());
        Ok(())
    }
    /// One character (a padding's fill, `{:#06x}`): the default method,
    /// `write_str` of the UTF-8 encoding, was compiled once per capacity
    /// `N` (8 copies, 1,901 bytes on x86_64 at fd0acb3); this one calls
    /// a single function for all of them.
    fn write_char(&mut self, c: char) -> core::fmt::Result {
        push_char(&mut self.buf, &mut self.len, c);
        Ok(())
    }
}

/// [`Text::write_char`]'s body, shared by every capacity.
#[inline(never)]
fn push_char(buf: &mut [u8], len: &mut usize, c: char) {
    let mut utf8 = [0; 4];
    push(buf, len, c.encode_utf8(&mut utf8).as_bytes());
}

/// [`Text::push_bytes`]' body (and so `write_str`'s), shared by every
/// capacity: compiled once per `N` it took 7 copies of about 90 bytes on
/// x86_64 at 592318d.
#[inline(never)]
fn push(buf: &mut [u8], len: &mut usize, b: &[u8]) {
    let n = b.len().min(buf.len() - *len);
    buf[*len..*len + n].copy_from_slice(&b[..n]);
    *len += n;
}

/// Retries `f` while it fails with EINTR, as `std`'s `cvt_r` does.
fn retried<T>(mut f: impl FnMut() -> Result<T>) -> Result<T> {
    loop {
        match f() {
            Err(e) if e.code == libc::EINTR => continue,
            r => return r,
        }
    }
}

/// The whole file at `path`, appended to `out`: `std::fs::read` (open with
/// `O_RDONLY | O_CLOEXEC`, `read(2)` to the end of the file, both retried on
/// EINTR). For sysfs attributes and /proc files, whose size `stat` does not
/// tell.
pub fn read_file(path: &CStr, out: &mut Vec<u8>) -> Result<()> {
    let f = retried(|| File::open(path))?;
    loop {
        let len = out.len();
        // At least 256 bytes to read into, doubling as the file grows; a
        // failed allocation ends the read (ENOMEM), never the process.
        let more = len.max(256);
        out.try_reserve(more).map_err(|_| Error::sys(libc::ENOMEM))?;
        out.resize(len + more, 0);
        let n = retried(|| f.read(&mut out[len..]));
        out.truncate(len + n.unwrap_or(0));
        match n? {
            0 => return Ok(()),
            _ => continue,
        }
    }
}

/// The text of the file at `path` (a sysfs attribute, a /proc or configfs
/// file), as `std::fs::read_to_string` gives it: None when it cannot be
/// read, or is not UTF-8.
pub fn read_text(path: &CStr) -> Option<String> {
    let mut bytes = Vec::new();
    read_file(path, &mut bytes).ok()?;
    String::from_utf8(bytes).ok()
}

/// `rsverbs[PID]: out of memory: WHAT skipped`, on stderr, once per
/// process (the features' failed allocations: docs/security.md, "Memory").
#[cold]
pub fn warn_once_no_memory(what: &str) {
    static SAID: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
    if cfg!(test) || SAID.swap(true, Relaxed) {
        return;
    }
    let mut l = Text::<192>::new();
    let _ = core::fmt::Write::write_fmt(&mut l, format_args!("rsverbs[{}]: out of memory: {what} skipped", pid()));
    crate::sys::write_all(libc::STDERR_FILENO, l.line());
}

/// `v.push(x)`, unless the allocation it needs fails: then false, and `v`
/// as it was. The features' collections grow only through this (no path
/// of rsverbs aborts on a failed malloc: docs/security.md).
pub fn try_push<T>(v: &mut Vec<T>, x: T) -> bool {
    if v.try_reserve(1).is_err() {
        return false;
    }
    v.push(x);
    true
}

/// `n` copies of `x`, or None when the allocation fails.
pub fn try_filled<T: Clone>(n: usize, x: T) -> Option<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).ok()?;
    v.resize(n, x);
    Some(v)
}

/// `s` copied into a new `String`, or None when the allocation fails.
pub fn try_string(s: &str) -> Option<String> {
    let mut out = String::new();
    out.try_reserve_exact(s.len()).ok()?;
    out.push_str(s);
    Some(out)
}

/// A directory stream (`opendir(3)`), closed when dropped.
pub struct Dir(core::ptr::NonNull<libc::DIR>);

impl Dir {
    /// `opendir(path)`: Err with the errno it set.
    pub fn open(path: &CStr) -> Result<Dir> {
        // SAFETY: path is NUL-terminated.
        let d = unsafe { libc::opendir(path.as_ptr()) };
        core::ptr::NonNull::new(d).map(Dir).ok_or_else(|| Error::sys(errno()))
    }

    /// Calls `f` with the name of each entry but `.` and `..`, as
    /// `std::fs::read_dir` lists them; stops at the end or at an error.
    pub fn each_name(&mut self, mut f: impl FnMut(&[u8])) {
        loop {
            // SAFETY: the stream is open and used by this thread only (&mut).
            let e = unsafe { libc::readdir(self.0.as_ptr()) };
            if e.is_null() {
                return;
            }
            // SAFETY: readdir returned an entry whose d_name is
            // NUL-terminated, valid until the next readdir on this stream.
            let name = unsafe { CStr::from_ptr((*e).d_name.as_ptr()) }.to_bytes();
            if name != b"." && name != b".." {
                f(name);
            }
        }
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        // SAFETY: the stream came from opendir and is closed once, here.
        unsafe { libc::closedir(self.0.as_ptr()) };
    }
}

/// The process id (`getpid(2)`, as `std::process::id`).
pub fn pid() -> u32 {
    // SAFETY: getpid cannot fail.
    unsafe { libc::getpid() as u32 }
}

/// `CLOCK_MONOTONIC` in microseconds, from an arbitrary start (the clock
/// `std::time::Instant` reads on Linux).
pub fn monotonic_us() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid out-pointer; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000).wrapping_add(ts.tv_nsec as u64 / 1000)
}

/// The calling thread's CPU time (microseconds) and its involuntary
/// context switches, for the tests of the sleeping waits (the IP join's
/// lock, a [`crate::env::Switch`] being read): a waiter that spins either
/// burns its CPU (an idle machine) or is preempted again and again (a
/// loaded one; `sched_yield` counts as involuntary, kernel/sched/core.c
/// `__schedule`); one asleep in the kernel does neither.
#[cfg(test)]
pub fn cpu_and_preemptions() -> (u64, u64) {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid out-pointer.
    assert_eq!(unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) }, 0);
    let status = std::fs::read_to_string("/proc/thread-self/status").expect("status");
    let n = status
        .lines()
        .find_map(|l| l.strip_prefix("nonvoluntary_ctxt_switches:"))
        .and_then(|v| v.trim_ascii().parse().ok())
        .expect("nonvoluntary_ctxt_switches");
    (ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000, n)
}

const EMPTY: u8 = 0;
const WRITING: u8 = 1;
const SET: u8 = 2;

/// A value stored once, by the first thread that comes with one, and read
/// with one Acquire load. No thread ever waits for another (a signal
/// handler may interrupt the one storing it, docs/security.md): one that
/// comes while another stores goes on without the cell.
pub struct Once<T> {
    state: AtomicU8,
    value: UnsafeCell<MaybeUninit<T>>,
}

// SAFETY: the value is written once, by the thread that moved the state
// from EMPTY to WRITING, and read only after the Release store of SET that
// follows; it is then shared (&T) between threads, and dropped with the cell.
unsafe impl<T: Send + Sync> Sync for Once<T> {}

impl<T> Once<T> {
    pub const fn new() -> Self {
        Once { state: AtomicU8::new(EMPTY), value: UnsafeCell::new(MaybeUninit::uninit()) }
    }

    /// The value, once stored.
    pub fn get(&self) -> Option<&T> {
        // SAFETY: SET is stored (Release) only after the value is written,
        // and the value is never written again.
        (self.state.load(Acquire) == SET).then(|| unsafe { (*self.value.get()).assume_init_ref() })
    }

    /// Stores `v`, unless a value is stored or being stored: then Err(v).
    pub fn set(&self, v: T) -> core::result::Result<(), T> {
        if self.state.compare_exchange(EMPTY, WRITING, Acquire, Relaxed).is_err() {
            return Err(v);
        }
        // SAFETY: this thread moved the state to WRITING: no other thread
        // writes the value or reads it before SET.
        unsafe { (*self.value.get()).write(v) };
        self.state.store(SET, Release);
        Ok(())
    }
}

impl<T: Copy> Once<T> {
    /// The stored value; else `f()`, stored for the next call. Threads that
    /// come before it is stored each run `f`, which must give them all the
    /// same answer.
    pub fn get_or_init(&self, f: impl FnOnce() -> T) -> T {
        if let Some(v) = self.get() {
            return *v;
        }
        let v = f();
        let _ = self.set(v);
        v
    }
}

impl<T> Drop for Once<T> {
    fn drop(&mut self) {
        if *self.state.get_mut() == SET {
            // SAFETY: SET: the value was written, and is dropped once, here.
            unsafe { self.value.get_mut().assume_init_drop() };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_file_reads_past_its_first_buffer() {
        let mut maps = Vec::new();
        assert_eq!(read_file(c"/proc/self/maps", &mut maps), Ok(()));
        assert!(maps.len() > 256 && maps.ends_with(b"\n"), "{} bytes", maps.len());
        let first = |b: &[u8]| b.split(|&c| c == b'\n').next().map(<[u8]>::to_vec);
        assert_eq!(first(&maps), first(&std::fs::read("/proc/self/maps").expect("maps")));
        assert_eq!(read_file(c"/nonexistent/rsverbs", &mut maps), Err(Error::sys(libc::ENOENT)));
        assert_eq!(read_text(c"/proc/sys/kernel/ostype").as_deref(), Some("Linux\n"));
        assert_eq!(read_text(c"/nonexistent"), None);
    }

    #[test]
    fn dir_lists_names_but_dot_and_dotdot() {
        let mut names = Vec::new();
        Dir::open(c"/proc/self").expect("opendir").each_name(|n| names.push(n.to_vec()));
        assert!(names.iter().any(|n| n == b"maps") && !names.iter().any(|n| n == b"." || n == b".."));
        assert_eq!(Dir::open(c"/nonexistent").map(|_| ()), Err(Error::sys(libc::ENOENT)));
    }

    #[test]
    fn pid_and_clock() {
        assert_eq!(pid(), std::process::id());
        let a = monotonic_us();
        std::thread::yield_now();
        assert!(monotonic_us() >= a);
    }

    #[test]
    fn once_is_stored_by_the_first_and_dropped() {
        let c = Once::new();
        assert_eq!(c.get(), None);
        assert_eq!(c.get_or_init(|| 7u32), 7);
        assert_eq!(c.get_or_init(|| 9), 7);
        assert_eq!(c.set(8), Err(8));
        let s: Once<std::ffi::CString> = Once::new();
        assert!(s.set(std::ffi::CString::new("a path").expect("no NUL")).is_ok());
        assert_eq!(s.get().map(|p| p.as_bytes()), Some(&b"a path"[..]));
        // Dropped with the cell (memcheck: ctest/sanitize.sh).
        drop(s);
    }

    #[test]
    fn once_under_racing_threads_holds_one_value() {
        let c: Once<usize> = Once::new();
        let got: Vec<(usize, usize)> = std::thread::scope(|s| {
            let c = &c;
            let hs: Vec<_> = (1..=4).map(|t| s.spawn(move || (t, c.get_or_init(|| t)))).collect();
            hs.into_iter().map(|h| h.join().expect("thread")).collect()
        });
        let stored = *c.get().expect("stored");
        // Each thread got the stored value, or its own while another stored.
        assert!(got.iter().all(|&(t, g)| g == stored || g == t), "{got:?}");
        assert_eq!(c.get_or_init(|| 0), stored);
    }
}
