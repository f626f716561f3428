//! The environment: rsverbs' own `RSVERBS_*` switches, each read once
//! through [`Switch`], and the switches rdma-core reads, read the way the
//! loaded release reads them (docs/rdma-core-releases.md).

use crate::error::ErrnoGuard;
use crate::os::{self, Once};
use crate::rdma_core::release::{self, Release};
use core::ffi::{CStr, c_char};
use core::fmt::Write;
use core::sync::atomic::{AtomicU32, Ordering::Acquire, Ordering::Relaxed, Ordering::SeqCst};

unsafe extern "C" {
    /// glibc 2.17 `secure_getenv`: NULL in setuid/setgid (AT_SECURE) processes.
    fn secure_getenv(name: *const c_char) -> *mut c_char;
}

/// Not read yet, or being read by one thread.
const UNREAD: u32 = 0;
/// The first value a [`Switch`]'s parser may return; 0 and 1 are its own.
pub const FIRST_STATE: u8 = 2;

/// One `RSVERBS_*` variable, read once per process with `secure_getenv`
/// (ignored in setuid and setgid programs), `errno` kept, and turned by its
/// feature's parser into a state (a u8 from [`FIRST_STATE`] on). The state
/// is one word, loaded Acquire: cheap enough for the exports' one check.
///
/// The first thread reads it; one that comes meanwhile sleeps on the state
/// (a futex, as the IP join's lock: src/ipjoin/mod.rs) until the reader
/// stores it, never spinning. A thread never waits for itself (a signal
/// handler that interrupts the reader on its own thread), nor for a reader
/// whose thread is gone: both take `busy`.
pub struct Switch {
    name: &'static CStr,
    /// UNREAD, or the parsed state; the futex word the waiters sleep on.
    state: AtomicU32,
    /// The reading thread's id (0 until one claims the read; never reset:
    /// the variable is read once).
    reader: AtomicU32,
    /// Threads asleep on `state` (or about to be): the reader wakes them
    /// only when there is one, so an uncontended read costs no syscall.
    waiters: AtomicU32,
}

/// How long a waiter sleeps before it checks that the reader's thread
/// still exists (milliseconds).
const READER_CHECK_MS: u32 = 100;

impl Switch {
    pub const fn new(name: &'static CStr) -> Self {
        Switch { name, state: AtomicU32::new(UNREAD), reader: AtomicU32::new(0), waiters: AtomicU32::new(0) }
    }

    /// The state; the first call reads the variable and gives its value
    /// (empty when unset) to `parse`. A thread that comes while another is
    /// reading sleeps until it is read, unless it is the reader's own
    /// thread or the reader's thread is gone: then it takes `busy`.
    #[inline]
    pub fn get(&self, parse: impl Fn(&[u8]) -> u8, busy: u8) -> u8 {
        match self.state.load(Acquire) {
            UNREAD => self.read(&parse, busy),
            s => s as u8,
        }
    }

    /// The state if the variable has been read, without reading it (for
    /// atfork and exit handlers).
    pub fn peek(&self) -> Option<u8> {
        Some(self.state.load(Acquire) as u8).filter(|&s| s >= FIRST_STATE)
    }

    /// One function for every switch (`parse` through a `dyn Fn`): generic
    /// over it, it was compiled once per switch (3 copies, 1,921 bytes on
    /// x86_64 at fd0acb3).
    #[cold]
    #[inline(never)]
    fn read(&self, parse: &dyn Fn(&[u8]) -> u8, busy: u8) -> u8 {
        let me = crate::sys::gettid() as u32;
        // The claim is the reader's id itself, so that a signal handler
        // that interrupts the reader, on its thread, knows it is the reader.
        if self.reader.compare_exchange(0, me, Acquire, Relaxed).is_err() {
            return self.wait(me, busy);
        }
        let _errno = ErrnoGuard::save();
        // SAFETY: the name is NUL-terminated; the result is NULL or a
        // NUL-terminated string in the environment.
        let value = unsafe { secure_getenv(self.name.as_ptr()) };
        let value = if value.is_null() {
            &b""[..]
        } else {
            // SAFETY: as above.
            unsafe { CStr::from_ptr(value) }.to_bytes()
        };
        let s = parse(value).max(FIRST_STATE);
        // SeqCst, as the waiters' count: a waiter that counted itself
        // before this store is woken; one that counts itself after it sees
        // the state (its futex_wait returns at once).
        self.state.store(u32::from(s), SeqCst);
        if self.waiters.load(SeqCst) != 0 {
            crate::sys::futex_wake_all(&self.state);
        }
        s
    }

    /// Another thread claimed the read: sleep until its state is stored.
    #[cold]
    fn wait(&self, me: u32, busy: u8) -> u8 {
        loop {
            let s = self.state.load(Acquire);
            if s != UNREAD {
                return s as u8;
            }
            let reader = self.reader.load(Relaxed);
            // A handler on the reader's own thread, or a reader whose
            // thread ended (pthread_exit from a handler) or does not exist
            // here (a child forked while another thread read): no wait.
            if reader == me || !crate::sys::thread_alive(reader as i32) {
                return busy;
            }
            self.waiters.fetch_add(1, SeqCst);
            crate::sys::futex_wait(&self.state, UNREAD, READER_CHECK_MS);
            self.waiters.fetch_sub(1, SeqCst);
        }
    }

    /// `NAME=VALUE ignored: WHY; OFF_WHAT off` on stderr, one write, for a
    /// value the feature's parser refuses (not in the unit tests, whose
    /// output is parsed line by line: ctest/unit.sh).
    pub fn warn(&self, value: &[u8], why: &str, off_what: &str) {
        if cfg!(test) {
            return;
        }
        // On the stack (no allocation): the name, the value cut at the
        // buffer's end, and the reason.
        let mut msg = os::Text::<512>::new();
        let _ = write!(
            msg,
            "rsverbs[{}]: {}={} ignored: {why}; {off_what} off",
            os::pid(),
            self.name.to_str().unwrap_or("?"),
            core::str::from_utf8(value).unwrap_or("(not UTF-8)")
        );
        crate::sys::write_all(libc::STDERR_FILENO, msg.line());
    }
}

/// rdma-core init.c `ibverbs_init`: `verbs_allow_disassociate_destroy`, from
/// `RDMAV_ALLOW_DISASSOC_DESTROY` and the legacy `MLX4_DEVICE_FATAL_CLEANUP`
/// (plain getenv). rdma-core reads it once at init; rsverbs once, at the
/// first detach that meets EIO.
pub fn allow_disassoc_destroy() -> bool {
    static FLAG: Once<bool> = Once::new();
    FLAG.get_or_init(|| {
        let rdmav = getenv(c"RDMAV_ALLOW_DISASSOC_DESTROY");
        let mlx4 = getenv(c"MLX4_DEVICE_FATAL_CLEANUP");
        disassoc_flag(release::installed(), rdmav.as_ref().map(os::Text::as_bytes), mlx4.as_ref().map(os::Text::as_bytes))
    })
}

/// `getenv(3)`, its first 32 bytes copied to the stack (no allocation on
/// a verb path; the flag only asks whether the value is `0`, which a cut
/// never makes it): rdma-core reads these two with plain getenv.
fn getenv(name: &CStr) -> Option<os::Text<32>> {
    // SAFETY: name is NUL-terminated; the result is NULL or a
    // NUL-terminated string in the environment, copied at once.
    let value = unsafe { libc::getenv(name.as_ptr()) };
    if value.is_null() {
        return None;
    }
    let mut t = os::Text::new();
    // SAFETY: as above.
    t.push_bytes(unsafe { CStr::from_ptr(value) }.to_bytes());
    Some(t)
}

/// rdma-core 40.0 (commit 5a0210036, "consistently parse environment
/// variables") made both variables "set and not 0" (util.c `check_env`).
const CHECK_ENV: Release = Release::new(40, 0);

/// The flag as `release` computes it; an unknown release reads like the
/// newest.
pub fn disassoc_flag(release: Option<Release>, rdmav: Option<&[u8]>, mlx4: Option<&[u8]>) -> bool {
    let set_not_zero = |v: Option<&[u8]>| v.is_some_and(|v| v != b"0");
    match release {
        // v33.2 init.c:613-618: MLX4_... is "not 0"; RDMAV_... is any value,
        // "0" included, and wins.
        Some(r) if r < CHECK_ENV => rdmav.is_some() || set_not_zero(mlx4),
        _ => set_not_zero(rdmav) || set_not_zero(mlx4),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static PARSED: Switch = Switch::new(c"RSVERBS_TEST_SWITCH_NEVER_SET");

    #[test]
    fn a_switch_is_read_once_and_keeps_errno() {
        assert_eq!(PARSED.peek(), None);
        crate::error::set_errno(4321);
        assert_eq!(PARSED.get(|v| if v.is_empty() { 7 } else { 9 }, 3), 7);
        assert_eq!(crate::error::errno(), 4321);
        assert_eq!(PARSED.get(|_| panic!("read twice"), 3), 7);
        assert_eq!(PARSED.peek(), Some(7));
    }

    /// A thread that comes while another reads the switch sleeps until
    /// it is read and gets its state (the bounded sched_yield loop before
    /// burned its CPU, then answered `busy`); the reader's own thread (a
    /// signal handler that interrupted it) gets `busy` at once.
    #[test]
    fn a_waiter_sleeps_until_the_switch_is_read_and_the_reader_never_waits_for_itself() {
        static SLOW: Switch = Switch::new(c"RSVERBS_TEST_SWITCH_SLOW_NEVER_SET");
        let (inside_tx, inside_rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            let reader = s.spawn(move || {
                SLOW.get(
                    |_| {
                        // As a handler on the reader's thread would.
                        inside_tx.send(SLOW.get(|_| panic!("read twice"), 3)).expect("send");
                        std::thread::sleep(std::time::Duration::from_millis(300));
                        7
                    },
                    3,
                )
            });
            assert_eq!(inside_rx.recv().expect("inside"), 3, "the reader's own thread waited for itself");
            let (c0, p0) = crate::os::cpu_and_preemptions();
            let got = SLOW.get(|_| panic!("read twice"), 3);
            let (c1, p1) = crate::os::cpu_and_preemptions();
            assert_eq!(got, 7, "the waiter went on without the reader's state");
            assert_eq!(reader.join().expect("reader"), 7);
            assert!(c1 - c0 < 30_000 && p1 - p0 < 20, "the waiter spun: {} us of CPU, {} preemptions", c1 - c0, p1 - p0);
        });
    }

    #[test]
    fn before_40_any_rdmav_value_turns_it_on() {
        let v33 = Some(Release::new(33, 2));
        let v39 = Some(Release::new(39, 13));
        for r in [v33, v39] {
            assert!(disassoc_flag(r, Some("0".as_ref()), None));
            assert!(disassoc_flag(r, Some("".as_ref()), None));
            assert!(disassoc_flag(r, Some("0".as_ref()), Some("0".as_ref())));
            assert!(!disassoc_flag(r, None, Some("0".as_ref())));
            assert!(disassoc_flag(r, None, Some("1".as_ref())));
            assert!(!disassoc_flag(r, None, None));
        }
    }

    #[test]
    fn from_40_both_are_set_and_not_zero() {
        for r in [Some(Release::new(40, 0)), Some(Release::new(44, 0)), Some(Release::new(65, 0)), None] {
            assert!(!disassoc_flag(r, Some("0".as_ref()), None), "{r:?}");
            assert!(disassoc_flag(r, Some("".as_ref()), None), "{r:?}");
            assert!(disassoc_flag(r, Some("yes".as_ref()), Some("0".as_ref())), "{r:?}");
            assert!(!disassoc_flag(r, Some("0".as_ref()), Some("0".as_ref())), "{r:?}");
            assert!(disassoc_flag(r, None, Some("1".as_ref())), "{r:?}");
            assert!(!disassoc_flag(r, None, None), "{r:?}");
        }
    }
}
