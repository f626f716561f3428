//! Consecutive empty entries for one context and port (a full GID-table
//! walk, as perftest and rdma_cm do) collapse into one line: the ENODATA
//! answers of `_ibv_query_gid_ex`, `index=3..1023 ... result=ENODATA(61)
//! ×1021`, and the zero GIDs of `ibv_query_gid`, `index=3..1023 result=0
//! gid=:: ×1021`.
//!
//! One pending run for the process, behind a try-lock that is never waited
//! on: a thread that finds it taken (another thread inside, or a child
//! forked while a thread was inside) writes its line uncollapsed. A run
//! belongs to the process that started it, so a forked child never prints
//! its parent's run. The run is written before any other traced call's
//! line and at exit.

use super::format::{Line, Res};
use core::cell::UnsafeCell;
use core::fmt::Write;
use core::sync::atomic::{AtomicBool, Ordering::Acquire, Ordering::Release};

/// The verb of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// `_ibv_query_gid_ex` answering ENODATA.
    QueryGidEx,
    /// `ibv_query_gid` answering 0 with the zero GID.
    QueryGid,
}

/// The query's arguments that a run shares, and its device name.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct RunKey {
    pub verb: Verb,
    pub pid: u32,
    pub ctx: usize,
    pub port: u32,
    pub flags: u32,
    pub entry_size: usize,
    pub dev: [u8; 64],
}

#[derive(Clone, Copy)]
struct Run {
    key: RunKey,
    first: u32,
    last: u32,
    count: u64,
}

struct Pending {
    busy: AtomicBool,
    run: UnsafeCell<Option<Run>>,
}

// SAFETY: `run` is only touched by the thread that set `busy`.
unsafe impl Sync for Pending {}

static PENDING: Pending = Pending { busy: AtomicBool::new(false), run: UnsafeCell::new(None) };

/// Runs `f` on the pending run when the try-lock is free; None otherwise.
fn with<R>(f: impl FnOnce(&mut Option<Run>) -> R) -> Option<R> {
    if PENDING.busy.compare_exchange(false, true, Acquire, Acquire).is_err() {
        return None;
    }
    // SAFETY: we hold `busy`.
    let r = f(unsafe { &mut *PENDING.run.get() });
    PENDING.busy.store(false, Release);
    Some(r)
}

/// The line of a run (or of one uncollapsed empty entry), written into
/// `l` (a caller's, so that a line is never copied out of its frame:
/// docs/security.md, the stack budget).
pub fn line(l: &mut Line, key: &RunKey, first: u32, last: u32, count: u64) {
    let end = key.dev.iter().position(|&c| c == 0).unwrap_or(key.dev.len());
    let dev = core::str::from_utf8(&key.dev[..end]).unwrap_or("?");
    match key.verb {
        Verb::QueryGidEx => {
            let _ = write!(l, "_ibv_query_gid_ex dev={dev} port={} index={first}", key.port);
            if count > 1 {
                let _ = write!(l, "..{last}");
            }
            let _ = write!(l, " flags={:#x} entry_size={} result={}", key.flags, key.entry_size, Res(libc::ENODATA));
        }
        Verb::QueryGid => {
            // ibv_query_gid's index is an int.
            let _ = write!(l, "ibv_query_gid dev={dev} port={} index={}", key.port, first as i32);
            if count > 1 {
                let _ = write!(l, "..{}", last as i32);
            }
            let _ = l.write_str(" result=0 gid=::");
        }
    }
    if count > 1 {
        let _ = write!(l, " ×{count}");
    }
}

/// Writes one run's line: out of line, so that its buffer is on the stack
/// only while it is written.
#[inline(never)]
fn emit_line(key: &RunKey, first: u32, last: u32, count: u64) {
    let mut l = Line::new();
    l.start(key.pid);
    line(&mut l, key, first, last, count);
    super::sink::emit(l.finish());
}

fn emit(r: &Run) {
    emit_line(&r.key, r.first, r.last, r.count);
}

/// An empty entry: extends the pending run, or writes the pending run and
/// starts a new one. Without the try-lock, writes it alone.
pub fn empty(key: RunKey, index: u32) {
    let done = with(|pending| {
        match pending {
            Some(r) if r.key == key && index == r.last.wrapping_add(1) => {
                r.last = index;
                r.count += 1;
                return;
            }
            Some(r) if r.key.pid == key.pid => emit(r),
            _ => {}
        }
        *pending = Some(Run { key, first: index, last: index, count: 1 });
    });
    if done.is_none() {
        emit_line(&key, index, index, 1);
    }
}

/// Writes the pending run of this process, if any.
pub fn flush(pid: u32) {
    with(|pending| {
        if let Some(r) = pending.take()
            && r.key.pid == pid
        {
            emit(&r);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(key: &RunKey, first: u32, last: u32, count: u64) -> Line {
        let mut l = Line::new();
        l.start(key.pid);
        line(&mut l, key, first, last, count);
        l
    }

    #[test]
    fn run_lines() {
        let mut dev = [0u8; 64];
        dev[..4].copy_from_slice(b"rxe1");
        let key = RunKey { verb: Verb::QueryGidEx, pid: 42, ctx: 1, port: 1, flags: 0, entry_size: 32, dev };
        assert_eq!(
            of(&key, 3, 1023, 1021).as_bytes(),
            "rsverbs[42]: _ibv_query_gid_ex dev=rxe1 port=1 index=3..1023 flags=0x0 entry_size=32 result=ENODATA(61) ×1021"
                .as_bytes()
        );
        assert_eq!(
            of(&key, 5, 5, 1).as_bytes(),
            b"rsverbs[42]: _ibv_query_gid_ex dev=rxe1 port=1 index=5 flags=0x0 entry_size=32 result=ENODATA(61)"
        );
        let key = RunKey { verb: Verb::QueryGid, entry_size: 16, ..key };
        assert_eq!(
            of(&key, 3, 1023, 1021).as_bytes(),
            "rsverbs[42]: ibv_query_gid dev=rxe1 port=1 index=3..1023 result=0 gid=:: ×1021".as_bytes()
        );
        assert_eq!(of(&key, u32::MAX, u32::MAX, 1).as_bytes(), b"rsverbs[42]: ibv_query_gid dev=rxe1 port=1 index=-1 result=0 gid=::");
    }
}
