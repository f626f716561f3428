//! A fixed-size, lock-free, insert-only map from a context address to a
//! packed `u32` (its route). No lock anywhere, so it is safe in a child
//! forked while another thread was inside it, and entries are never evicted,
//! so per-context latches last as long as rdma-core's do.
//!
//! A key is claimed once with a CAS from 0 and never removed; a context
//! freed and reallocated at the same address finds its old entry (see
//! `route` for why that is safe). When the table is full (more than `CAP`
//! distinct context addresses with long probe chains), routes are simply not
//! cached: every call then pays the discovery probes, results are unchanged.
#![forbid(unsafe_code)]

use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering::AcqRel, Ordering::Acquire};

const CAP: usize = 8192;
const MAX_PROBE: usize = 64;
/// Set in a value once it has been written (a claimed key may briefly have
/// no value yet; readers then see "absent" and rediscover).
const PRESENT: u32 = 1 << 31;

static KEYS: [AtomicUsize; CAP] = [const { AtomicUsize::new(0) }; CAP];
static VALS: [AtomicU32; CAP] = [const { AtomicU32::new(0) }; CAP];

fn start(key: usize) -> usize {
    ((key as u64 >> 3).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 51) as usize % CAP
}

fn probe(key: usize) -> impl Iterator<Item = usize> {
    let s = start(key);
    (0..MAX_PROBE).map(move |i| (s + i) % CAP)
}

/// The value stored for `key`, if any.
#[inline]
pub fn get(key: usize) -> Option<u32> {
    for i in probe(key) {
        match KEYS[i].load(Acquire) {
            k if k == key => {
                let v = VALS[i].load(Acquire);
                return (v & PRESENT != 0).then_some(v & !PRESENT);
            }
            0 => return None,
            _ => {}
        }
    }
    None
}

/// Sets `key`'s value to `f(old)`, atomically with respect to other updates
/// of the same key. Returns the new value, or `None` when the table is full.
pub fn update(key: usize, f: impl Fn(Option<u32>) -> u32) -> Option<u32> {
    debug_assert!(key != 0);
    let slot = probe(key).find(|&i| match KEYS[i].compare_exchange(0, key, AcqRel, Acquire) {
        Ok(_) => true,
        Err(k) => k == key,
    })?;
    let mut cur = VALS[slot].load(Acquire);
    loop {
        let old = (cur & PRESENT != 0).then_some(cur & !PRESENT);
        let new = f(old) | PRESENT;
        match VALS[slot].compare_exchange(cur, new, AcqRel, Acquire) {
            Ok(_) => return Some(new & !PRESENT),
            Err(now) => cur = now,
        }
    }
}

/// Applies `f` to every stored value. Lock-free like the rest; used after
/// fork() (in the child, before any other call) and rarely otherwise.
pub fn update_all(f: impl Fn(u32) -> u32) {
    for slot in VALS.iter() {
        let mut cur = slot.load(Acquire);
        while cur & PRESENT != 0 {
            match slot.compare_exchange(cur, f(cur & !PRESENT) | PRESENT, AcqRel, Acquire) {
                Ok(_) => break,
                Err(now) => cur = now,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_update_and_collisions() {
        // Keys chosen to share a start slot: their chains must stay apart.
        let a = 0x6000_0000_0008usize;
        let mut b = a + 8;
        while start(b) != start(a) {
            b += 8;
        }
        assert_eq!(get(a), None);
        assert_eq!(update(a, |_| 5), Some(5));
        assert_eq!(update(b, |_| 7), Some(7));
        assert_eq!(update(a, |old| old.unwrap_or(0) | 0x100), Some(0x105));
        assert_eq!((get(a), get(b)), (Some(0x105), Some(7)));
    }
}
