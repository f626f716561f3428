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

use crate::abi::ibv_qp;
use crate::mcast::McastCall;
use crate::registry::QpKey;
use crate::mgid::Mgid;
use crate::trace::format::Res;
use crate::uverbs::route::Key;
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

/// After an attach (`attach`) or detach that returned `rc`: join or leave.
/// The caller saves and restores `errno`.
///
/// # Safety
/// As the exports': non-NULL pointers point at live rdma-core objects.
#[cold]
#[inline(never)]
pub unsafe fn after_mcast(c: &McastCall, rc: c_int) {
    let McastCall { qp, gid, .. } = *c;
    let attach = c.attach();
    if rc != 0 || qp.is_null() || gid.is_null() {
        return;
    }
    // SAFETY: gid points at 16 readable bytes; every pattern is valid.
    let mgid = Mgid(unsafe { (*gid).raw });
    if !mgid.is_multicast() {
        return;
    }
    // SAFETY: qp is a live QP (the verb succeeded on it).
    let q = unsafe { &*qp };
    let key = QpKey { ctx: q.context as usize, handle: q.handle };
    if attach {
        if with(|c| c.has(key, &mgid)) {
            return; // a duplicate: one attachment in the kernel
        }
        // SAFETY: as above; the context is live and non-NULL (the verb
        // checked it), its device NULL or live.
        let ifindexes = unsafe { netdevs(q) };
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
///
/// # Safety
/// `q.context` is a live context; its `device` NULL or live.
unsafe fn netdevs(q: &ibv_qp) -> Vec<u32> {
    let ctx = q.context;
    // SAFETY: ctx is live.
    let (fd, dev) = unsafe { ((*ctx).cmd_fd, (*ctx).device) };
    // SAFETY: NULL or a live device.
    let Some(dev) = (unsafe { dev.as_ref() }) else { return Vec::new() };
    let key = Key { ctx: ctx as usize, fd };
    match crate::port::qp_port(key, q.handle, dev) {
        Some(port) => crate::port::netdevs(key, dev, port),
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
