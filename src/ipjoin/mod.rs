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
//! lock: fork-safe, because the atfork child handler
//! ([`after_fork_in_child`]) takes it over, forgets the parent's counts
//! and closes the inherited sockets without ever leaving a group.

mod counts;
mod sock;

use crate::mgid::Mgid;
use crate::trace::format::Res;
use crate::view::{Context, McastView};
use core::cell::UnsafeCell;
use crate::env::{FIRST_STATE, Switch};
use core::ffi::{c_char, c_int};
use core::sync::atomic::{AtomicBool, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};
use counts::Counts;

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

/// The counts, behind a spin lock that a forked child can take over.
struct Locked {
    busy: AtomicBool,
    counts: UnsafeCell<Counts>,
}

// SAFETY: `counts` is only reached through `with`, which holds `busy`.
unsafe impl Sync for Locked {}

static STATE: Locked = Locked { busy: AtomicBool::new(false), counts: UnsafeCell::new(Counts::new()) };

/// Runs `f` on the counts with the lock held. The lock is held across the
/// joins' and leaves' setsockopt calls, so that a join and a leave of one
/// group never cross; attach/detach with the feature on is the only user.
fn with<R>(f: impl FnOnce(&mut Counts) -> R) -> R {
    while STATE.busy.compare_exchange_weak(false, true, Acquire, Relaxed).is_err() {
        std::thread::yield_now();
    }
    // SAFETY: busy is ours until the store below; panics abort.
    let r = f(unsafe { &mut *STATE.counts.get() });
    STATE.busy.store(false, Release);
    r
}

/// The atfork child handler's part (called from uverbs/route.rs): the
/// parent's counts are not the child's, and the inherited sockets are the
/// parent's (close them, never drop their memberships). Another parent
/// thread may have held the lock at fork time: it does not exist in the
/// child, so the lock is taken over; the counts it may have left half
/// changed are leaked, not freed.
pub fn after_fork_in_child() {
    if MODE.peek() != Some(ON) {
        return;
    }
    sock::close_inherited();
    // SAFETY: the child has one thread, this one, and it is not inside
    // `with` (fork is not called from there).
    core::mem::forget(unsafe { core::ptr::replace(STATE.counts.get(), Counts::new()) });
    STATE.busy.store(false, Release);
}

/// After an attach or detach that returned `rc`: join or leave. The
/// caller keeps `errno`.
#[cold]
#[inline(never)]
pub fn after_mcast(v: &McastView, rc: c_int) {
    let (Some(q), Some(mgid)) = (v.qp, v.mgid) else { return };
    if rc != 0 || !mgid.is_multicast() {
        return;
    }
    let key = q.key;
    if v.attach {
        if with(|c| c.has(key, &mgid)) {
            return; // a duplicate: one attachment in the kernel
        }
        let ifindexes = v.ctx.map_or_else(Vec::new, |ctx| netdevs(&ctx, key.handle));
        with(|c| {
            for i in c.attach(key, &mgid, &ifindexes) {
                match sock::join(i, &mgid) {
                    Ok(fd) => {
                        c.joined(i, &mgid, fd);
                        note("join", i, &mgid, 0);
                    }
                    Err(e) => note("join", i, &mgid, e),
                }
            }
        });
    } else {
        with(|c| {
            for (i, fd) in c.detach(key, &mgid) {
                note("leave", i, &mgid, sock::leave(fd, i, &mgid).err().unwrap_or(0));
            }
        });
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

/// A trace line (with `RSVERBS_TRACE` on): `ipjoin join|leave
/// netdev=NAME ifindex=N mgid=… result=R`.
fn note(what: &str, ifindex: u32, mgid: &Mgid, rc: c_int) {
    if !crate::trace::registry_on() {
        return;
    }
    let mut name = [0 as c_char; libc::IF_NAMESIZE];
    // SAFETY: name has IF_NAMESIZE bytes, as if_indextoname requires.
    let n = unsafe { libc::if_indextoname(ifindex, name.as_mut_ptr()) };
    let name = if n.is_null() { "?" } else { crate::abi::c_field(&name) };
    crate::trace::note(format_args!("ipjoin {what} netdev={name} ifindex={ifindex} {} result={}", mgid, Res(rc)));
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
