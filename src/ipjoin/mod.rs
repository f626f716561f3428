//! `RSVERBS_MCAST_IPJOIN=1`: after a successful `ibv_attach_mcast` of an IP
//! multicast MGID on an Ethernet (RoCE) port, join the group at IP level on
//! the port's netdevs; after the last successful detach of it in the
//! process, leave (docs/ipjoin.md).
//!
//! rxe's attach only adds the MGID's `33:33:…` MAC (`ipv6_eth_mc_map`) to
//! its netdev; IPv4 groups arrive on `01:00:5e:…`, the IP layer drops a
//! group the host has not joined (route.c `ip_check_mc_rcu`, ip6_input.c
//! `ip6_mc_input`), and snooping switches only forward a group that was
//! reported. The kernel sends the report only for rdma_cm IPv4 joins on
//! RoCE v2 (cma.c `cma_iboe_join_multicast` → `cma_igmp_send`).
//!
//! Off by default. A library constructor reads the variable once with
//! `secure_getenv` (as `RSVERBS_TRACE`); with it off the exports pay
//! nothing beyond their one flag load ([`crate::hooks`]). With it on, the
//! work happens after the verb, errno saved and restored by the caller, and
//! never changes the verb's result: a join that fails is reported in the
//! trace (when `RSVERBS_TRACE` is on) and otherwise ignored.
//!
//! Counting and sockets are in [`counts`] and [`sock`], behind one spin
//! lock, held across the verb itself ([`exclusive`], from hooks.rs): one
//! thread's attach and its join never cross another's detach and leave of
//! the same group. A thread never waits for itself (a signal handler), and
//! the lock is fork-safe: the atfork child handler ([`after_fork_in_child`])
//! takes it over, forgets the parent's counts and closes the inherited
//! sockets without ever leaving a group.

mod counts;
mod sock;

use crate::mgid::Mgid;
use crate::trace::format::Res;
use crate::env::{FIRST_STATE, Switch};
use crate::view::{Context, McastView};
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::ffi::c_int;
use core::sync::atomic::{AtomicI32, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};
use counts::Counts;
use sock::{Pool, Sock};

const OFF: u8 = FIRST_STATE;
const ON: u8 = FIRST_STATE + 1;

static MODE: Switch = Switch::new(c"RSVERBS_MCAST_IPJOIN");

/// Whether `RSVERBS_MCAST_IPJOIN` is on (reads it on first use).
pub fn on() -> bool {
    MODE.get(parse, OFF) == ON
}

/// `1` turns it on; unset, empty or `0` leave it off; anything else is
/// ignored with one line on stderr.
fn parse(value: &[u8]) -> u8 {
    match value {
        b"1" => ON,
        b"" | b"0" => OFF,
        _ => {
            MODE.warn(value, "not 1 or 0", "IP-level join");
            OFF
        }
    }
}

/// The process's IP-level memberships: the counts and the sockets.
pub struct State {
    counts: Counts<Sock>,
    pool: Pool,
}

/// The state, behind a spin lock that a forked child can take over. The
/// lock word is the holder's thread id (0: free), so that a thread never
/// waits for itself: a signal handler that interrupts an attach or detach
/// and calls one itself gets no IP-level join rather than a deadlock.
struct Locked {
    holder: AtomicI32,
    state: UnsafeCell<State>,
}

// SAFETY: `state` is only reached through `exclusive`, which holds the lock.
unsafe impl Sync for Locked {}

static STATE: Locked =
    Locked { holder: AtomicI32::new(0), state: UnsafeCell::new(State { counts: Counts::new(), pool: Pool::new() }) };

fn tid() -> i32 {
    // SAFETY: gettid(2) cannot fail (glibc's wrapper is newer than 2.17).
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Runs `f` with the lock held: the verb and its join or leave run under
/// it (hooks.rs), so that a duplicate check, the kernel's answer and the
/// counts of one (QP, group) never cross another thread's
/// (docs/security.md). None when this thread holds the lock already.
pub fn exclusive<R>(f: impl FnOnce(&mut State) -> R) -> Option<R> {
    let me = tid();
    while let Err(holder) = STATE.holder.compare_exchange_weak(0, me, Acquire, Relaxed) {
        if holder == me {
            note_skipped();
            return None;
        }
        crate::os::yield_now();
    }
    // SAFETY: the lock is ours until the store below; panics abort.
    let r = f(unsafe { &mut *STATE.state.get() });
    STATE.holder.store(0, Release);
    Some(r)
}

/// The atfork child handler's part (lifecycle.rs): the parent's counts are
/// not the child's, and the inherited sockets are the parent's (close
/// those still rsverbs', never drop their memberships). Another parent
/// thread may have held the lock at fork time: it does not exist in the
/// child, so the lock is taken over; the counts it may have left half
/// changed are leaked, not freed. No allocation or free.
#[cfg_attr(not(rsverbs_clib), allow(dead_code))] // lifecycle.rs is the C library's only
pub fn after_fork_in_child() {
    if MODE.peek() != Some(ON) {
        return;
    }
    // SAFETY: the child has one thread, this one, and it is not inside
    // `exclusive` (fork is not called from there).
    let st = unsafe { &mut *STATE.state.get() };
    st.pool.close_inherited();
    core::mem::forget(core::mem::replace(&mut st.counts, Counts::new()));
    STATE.holder.store(0, Release);
}

impl State {
    /// After an attach or detach that returned `rc`: join or leave. The
    /// caller keeps `errno`.
    #[cold]
    #[inline(never)]
    pub fn after_mcast(&mut self, v: &McastView, rc: c_int) {
        let (Some(q), Some(mgid)) = (v.qp, v.mgid) else { return };
        // A refused call changed nothing in the kernel: nothing to join or
        // leave (a refused detach keeps the membership).
        if rc != 0 || !mgid.is_multicast() {
            return;
        }
        let key = q.key;
        if v.attach {
            if self.counts.has(key, &mgid) {
                return; // a duplicate: one attachment in the kernel
            }
            let ifindexes = v.ctx.map_or_else(Vec::new, |ctx| netdevs(&ctx, key.handle));
            self.counts.forget_held(|s| !s.is_ours());
            for i in self.counts.attach(key, &mgid, &ifindexes) {
                match self.pool.join(i, &mgid) {
                    Ok(s) => {
                        self.counts.joined(i, &mgid, s);
                        note("join", i, &mgid, 0);
                    }
                    Err(e) => note("join", i, &mgid, e),
                }
            }
        } else {
            for (i, s) in self.counts.detach(key, &mgid) {
                let r = self.pool.leave(s, i, &mgid).err().unwrap_or(0);
                note("leave", i, &mgid, r);
            }
        }
    }
}

/// The netdevs of the QP's port (QUERY_QP, then the port's GID table).
fn netdevs(ctx: &Context, handle: u32) -> Vec<u32> {
    let Some(dev) = &ctx.dev else { return Vec::new() };
    match crate::port::qp_port(ctx.key, handle, dev) {
        Some(port) => crate::port::netdevs(ctx.key, dev, port),
        None => Vec::new(),
    }
}

/// A trace line: the call was made from a signal handler on the thread
/// that holds the lock, without its IP-level join or leave.
#[cold]
fn note_skipped() {
    crate::trace::note(format_args!("ipjoin skipped: called again on a thread inside ibv_attach_mcast/ibv_detach_mcast (a signal handler); no IP-level join or leave for this call"));
}

/// A trace line (with `RSVERBS_TRACE` on): `ipjoin join|leave
/// netdev=NAME ifindex=N mgid=… result=R`; a join that failed also gets a
/// hint (`RSVERBS_TRACE=hints`).
fn note(what: &str, ifindex: u32, mgid: &Mgid, rc: c_int) {
    if !crate::trace::registry_on() {
        return;
    }
    let name = crate::port::name_here(ifindex);
    let name = name.as_deref().unwrap_or("?");
    crate::trace::note(format_args!("ipjoin {what} netdev={name} ifindex={ifindex} {} result={}", mgid, Res(rc)));
    if rc != 0 && what == "join" {
        crate::trace::ip_join_failed(name, mgid, rc);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_values() {
        assert_eq!(parse(b"1"), ON);
        assert_eq!(parse(b""), OFF);
        assert_eq!(parse(b"0"), OFF);
        assert_eq!(parse(b"yes"), OFF);
        assert_eq!(parse(b"10"), OFF);
    }
}
