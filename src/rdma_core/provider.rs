//! Does a context's provider have a multicast op?
//!
//! rdma-core's `ibv_attach_mcast` calls the provider's op. Providers without
//! one (bnxt_re, efa, hns, qedr, siw, vmw_pvrdma; erdma and mana from 44;
//! ionic in 65; i40iw in 33; mlx5 VFIO contexts) get the dummy op of
//! libibverbs/dummy_ops.c, which returns EOPNOTSUPP with no syscall and
//! `errno` untouched. rsverbs must answer the same, without private state.
//!
//! The detector reads public state only: `verbs_set_ops` (dummy_ops.c,
//! `SET_PRIV_OP`, every release 33–65) stores the op it installs into the
//! public `ctx->ops._compat_attach_mcast` / `_compat_detach_mcast`, first the
//! dummy (device.c `verbs_init_context`), then the provider's if it has one.
//! So the pointer found there is:
//! - `ibv_cmd_attach_mcast` / `ibv_cmd_detach_mcast`, exported by
//!   libibverbs (mlx4, mthca, rxe, hfi1verbs, ipathverbs): the kernel command;
//! - a function of the provider's own library (mlx5, ocrdma, irdma, cxgb4):
//!   a wrapper around the same kernel command;
//! - any other address inside libibverbs: the static dummy.
//!
//! docs/providers-mcast-ops.tsv lists every provider's op in rdma-core 33.2,
//! 44.0, 56.1 and 65.0; the tests below classify each of them.

use core::ffi::{CStr, c_void};
use core::sync::atomic::{AtomicU8, AtomicUsize, Ordering::{AcqRel, Acquire, Release}};

/// Which of the two ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    Attach,
    Detach,
}

impl Verb {
    /// libibverbs' exported kernel-command implementation of the op.
    fn command_symbol(self) -> &'static [u8] {
        match self {
            Verb::Attach => b"ibv_cmd_attach_mcast",
            Verb::Detach => b"ibv_cmd_detach_mcast",
        }
    }
}

/// What `dladdr` says of an op pointer.
#[derive(Clone, Copy, Debug)]
pub struct Located<'a> {
    /// The containing object's path.
    pub object: &'a [u8],
    /// The nearest dynamic symbol at or below the pointer, and its address.
    pub symbol: Option<(&'a [u8], usize)>,
}

/// True when `op` is rdma-core's dummy: inside libibverbs, and not its
/// exported kernel command. Pure: `located` is what dladdr found.
pub fn is_dummy(verb: Verb, op: usize, located: Option<Located<'_>>) -> bool {
    let Some(at) = located else { return false };
    let object = at.object.rsplit(|&b| b == b'/').next().unwrap_or(at.object);
    // libibverbs.so…, or a renamed copy (auditwheel's libibverbs-<tag>.so…).
    if super::release::libibverbs_suffix(object).is_none() {
        return false;
    }
    !matches!(at.symbol, Some((name, addr)) if addr == op && name == verb.command_symbol())
}

/// Op pointers already classified. A process sees one or two (one per
/// provider library), so a short array searched in order serves the hot
/// path with one or two loads.
const SLOTS: usize = 8;
const UNKNOWN: u8 = 0;
const NOT_DUMMY: u8 = 1;
const DUMMY: u8 = 2;

struct Known {
    ops: [AtomicUsize; SLOTS],
    class: [AtomicU8; SLOTS],
}

impl Known {
    const fn new() -> Self {
        Known { ops: [const { AtomicUsize::new(0) }; SLOTS], class: [const { AtomicU8::new(UNKNOWN) }; SLOTS] }
    }

    /// The class remembered for `op`, if any.
    #[inline]
    fn recall(&self, op: usize) -> Option<bool> {
        for (slot, class) in self.ops.iter().zip(&self.class) {
            match slot.load(Acquire) {
                p if p == op => {
                    return match class.load(Acquire) {
                        DUMMY => Some(true),
                        NOT_DUMMY => Some(false),
                        // Claimed, its class not stored yet: classify again.
                        _ => None,
                    };
                }
                0 => return None,
                _ => {}
            }
        }
        None
    }

    /// Remembers `op`'s class: a slot is claimed first and only its
    /// claimer stores the class, so no op can carry another's class. A full
    /// table only means `op` is classified again next time.
    fn remember(&self, op: usize, dummy: bool) {
        for (slot, class) in self.ops.iter().zip(&self.class) {
            match slot.compare_exchange(0, op, AcqRel, Acquire) {
                Ok(_) => {
                    class.store(if dummy { DUMMY } else { NOT_DUMMY }, Release);
                    return;
                }
                Err(p) if p == op => return,
                Err(_) => {}
            }
        }
    }
}

static KNOWN: Known = Known::new();

/// Whether the op pointer `op` read from a context is rdma-core's dummy.
/// A NULL op (a context not set up by `verbs_init_context`) is not.
#[inline]
pub fn has_no_op(verb: Verb, op: usize) -> bool {
    if op == 0 {
        return false;
    }
    match KNOWN.recall(op) {
        Some(dummy) => dummy,
        None => classify_and_remember(verb, op),
    }
}

#[cold]
#[inline(never)]
fn classify_and_remember(verb: Verb, op: usize) -> bool {
    let dummy = {
        // dladdr runs in the middle of a verb: errno stays the caller's.
        let _errno = crate::error::ErrnoGuard::save();
        dladdr(op as *const c_void, |located| is_dummy(verb, op, located))
    };
    KNOWN.remember(op, dummy);
    dummy
}

/// Runs `f` on what dladdr(3) says of `addr`.
fn dladdr<R>(addr: *const c_void, f: impl FnOnce(Option<Located<'_>>) -> R) -> R {
    // SAFETY: Dl_info is plain data; dladdr fills it on success.
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    // SAFETY: dladdr accepts any address; info is writable.
    if unsafe { libc::dladdr(addr, &mut info) } == 0 || info.dli_fname.is_null() {
        return f(None);
    }
    // SAFETY: dladdr's strings are NUL-terminated and live while the object
    // stays loaded, which outlasts this call.
    let object = unsafe { CStr::from_ptr(info.dli_fname) }.to_bytes();
    let symbol = (!info.dli_sname.is_null())
        // SAFETY: as above.
        .then(|| (unsafe { CStr::from_ptr(info.dli_sname) }.to_bytes(), info.dli_saddr as usize));
    f(Some(Located { object, symbol }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIBIBVERBS: &[u8] = b"/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0";
    const CMD: usize = 0x7000_1000;

    /// Where each kind of op in docs/providers-mcast-ops.tsv lives.
    fn located(verb: Verb, op_name: &'static str) -> (usize, Located<'static>) {
        let cmd = verb.command_symbol();
        if op_name == "none" {
            // The static dummy: inside libibverbs, and the nearest export
            // below it may be the command itself (dladdr's dli_sname).
            (CMD + 0x40, Located { object: LIBIBVERBS, symbol: Some((cmd, CMD)) })
        } else if op_name.as_bytes() == cmd {
            (CMD, Located { object: LIBIBVERBS, symbol: Some((cmd, CMD)) })
        } else {
            let lib = b"/usr/lib/x86_64-linux-gnu/libibverbs/libmlx5-rdmav34.so";
            (0x7100_0040, Located { object: lib, symbol: Some((op_name.as_bytes(), 0x7100_0040)) })
        }
    }

    #[test]
    fn every_provider_op_of_every_release() {
        let table: &'static str = include_str!("../../docs/providers-mcast-ops.tsv");
        let mut rows = 0;
        for line in table.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
            let f: Vec<&str> = line.split('\t').collect();
            let [release, provider, attach, detach] = f.as_slice() else { panic!("bad row {line:?}") };
            for (verb, op) in [(Verb::Attach, *attach), (Verb::Detach, *detach)] {
                let (ptr, at) = located(verb, op);
                assert_eq!(is_dummy(verb, ptr, Some(at)), op == "none", "{release} {provider} {verb:?} {op}");
            }
            rows += 1;
        }
        assert!(rows >= 60, "only {rows} rows");
    }

    /// docs/security.md: a renamed copy's dummy is still the dummy.
    #[test]
    fn a_dummy_in_a_renamed_libibverbs() {
        let at = Located { object: b"/venv/x.libs/libibverbs-07e4f8a1.so.1.14.44.0", symbol: None };
        assert!(is_dummy(Verb::Attach, CMD + 0x40, Some(at)));
        let cmd = Located { object: b"/venv/x.libs/libibverbs-07e4f8a1.so.1.14.44.0", symbol: Some((b"ibv_cmd_attach_mcast", CMD)) };
        assert!(!is_dummy(Verb::Attach, CMD, Some(cmd)));
    }

    #[test]
    fn a_dummy_with_no_export_below_it() {
        let at = Located { object: LIBIBVERBS, symbol: None };
        assert!(is_dummy(Verb::Attach, CMD + 0x40, Some(at)));
    }

    #[test]
    fn unknown_objects_and_null_go_to_the_kernel() {
        assert!(!is_dummy(Verb::Attach, 0x1234, None));
        assert!(!has_no_op(Verb::Attach, 0));
        let exe = Located { object: b"/usr/bin/ib_send_bw", symbol: None };
        assert!(!is_dummy(Verb::Attach, 0x1234, Some(exe)));
    }

    #[test]
    fn a_pointer_in_this_test_binary_is_classified_once() {
        let op = a_pointer_in_this_test_binary as *const () as usize;
        assert!(!has_no_op(Verb::Detach, op));
        assert!(KNOWN.ops.iter().any(|s| s.load(Acquire) == op));
        assert!(!has_no_op(Verb::Detach, op));
    }

    fn a_pointer_in_this_test_binary() {}

    /// docs/security.md: threads that remember different ops at once
    /// must never leave an op with another's class. Each trial starts the
    /// threads together on a fresh table (a spin barrier), each with its
    /// own op and class; afterwards every op recalls its own class or none.
    /// With the class stored before the slot was claimed (b97736c) it
    /// fails: ops are left with the other thread's class.
    #[test]
    fn racing_threads_never_swap_classes() {
        use core::sync::atomic::AtomicUsize;
        const THREADS: usize = 2;
        const TRIALS: usize = 50_000;
        let tables: Vec<Known> = (0..TRIALS).map(|_| Known::new()).collect();
        let gates: Vec<AtomicUsize> = (0..TRIALS).map(|_| AtomicUsize::new(0)).collect();
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (tables, gates) = (&tables, &gates);
                s.spawn(move || {
                    for (k, gate) in tables.iter().zip(gates) {
                        gate.fetch_add(1, AcqRel);
                        // Spin (both cores race), yielding now and then
                        // (one core, or valgrind's one thread at a time).
                        let mut spins = 0u32;
                        while gate.load(Acquire) < THREADS {
                            spins += 1;
                            if spins.is_multiple_of(1024) {
                                std::thread::yield_now();
                            } else {
                                core::hint::spin_loop();
                            }
                        }
                        k.remember(0x1000 + 0x40 * t, t % 2 == 0);
                    }
                });
            }
        });
        let mut wrong = 0;
        for k in &tables {
            for t in 0..THREADS {
                if k.recall(0x1000 + 0x40 * t).is_some_and(|d| d != (t % 2 == 0)) {
                    wrong += 1;
                }
            }
        }
        assert_eq!(wrong, 0, "ops remembered with another op's class in {TRIALS} trials");
    }

    #[test]
    fn a_claimed_slot_without_its_class_is_classified_again() {
        let k = Known::new();
        k.ops[0].store(0x1000, Release);
        assert_eq!(k.recall(0x1000), None);
        k.remember(0x1000, true);
        assert_eq!(k.recall(0x1000), None, "only the claimer stores the class");
        k.remember(0x2000, true);
        assert_eq!((k.recall(0x2000), k.recall(0x3000)), (Some(true), None));
    }
}
