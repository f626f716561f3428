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
//! Counting and sockets are in [`counts`] and [`sock`], behind one
//! sleeping lock (a futex), held across the verb itself ([`exclusive`], from hooks.rs): one
//! thread's attach and its join never cross another's detach and leave of
//! the same group. A thread never waits for itself (a signal handler), and
//! the lock is fork-safe: the atfork child handler ([`after_fork_in_child`])
//! takes it over, forgets the parent's counts and closes the inherited
//! sockets without ever leaving a group.

mod cm;
mod counts;
pub mod member;
mod sock;

use crate::error::ErrnoGuard;
use crate::mgid::Mgid;
use crate::trace::format::Res;
use crate::env::{FIRST_STATE, Switch};
use crate::view::{Context, McastView, Qp};
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::ffi::c_int;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering::Acquire, Ordering::Relaxed, Ordering::Release, Ordering::SeqCst};
use counts::{Counts, Members};
use sock::{Pool, Sock};

const OFF: u8 = FIRST_STATE;
const ON: u8 = FIRST_STATE + 1;

/// `RSVERBS_MCAST_FABRICJOIN=roce`: the fabric join on RoCE ports too
/// (IPv4 groups; docs/fabric-join.md: the test bed's way to run the
/// InfiniBand engine where it can run).
const ALL_PORTS: u8 = FIRST_STATE + 2;

static MODE: Switch = Switch::new(c"RSVERBS_MCAST_IPJOIN");
static FABRIC: Switch = Switch::new(c"RSVERBS_MCAST_FABRICJOIN");

/// Whether `RSVERBS_MCAST_IPJOIN` or `RSVERBS_MCAST_FABRICJOIN` is on
/// (reads them on first use).
pub fn on() -> bool {
    ip_on() | fabric_mode().is_some()
}

/// Whether an attach on a RoCE port is joined at IP level: by the
/// socket join, or by the fabric join forced onto RoCE (the trace's
/// `no-ip-join` hint stays silent then).
pub fn ip_level() -> bool {
    ip_on() || fabric_mode() == Some(true)
}

fn ip_on() -> bool {
    MODE.get(parse, OFF) == ON
}

/// The fabric join's mode: None (off), `Some(false)` on InfiniBand ports,
/// `Some(true)` on every port.
fn fabric_mode() -> Option<bool> {
    match FABRIC.get(parse_fabric, OFF) {
        ON => Some(false),
        ALL_PORTS => Some(true),
        _ => None,
    }
}

/// `1` (InfiniBand ports) or `roce` (every port); unset, empty or `0`
/// leave it off; anything else is ignored with one line on stderr.
fn parse_fabric(value: &[u8]) -> u8 {
    match value {
        b"1" => ON,
        b"roce" => ALL_PORTS,
        b"" | b"0" => OFF,
        _ => {
            FABRIC.warn(value, "not 1, roce or 0", "fabric join");
            OFF
        }
    }
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
    /// The fabric join's rdma_cm fd and its memberships, with their counts
    /// per (bound netdev, group), full and send-only apart (cm.rs).
    chan: cm::Channel,
    /// The explicit memberships (member.rs).
    members: Members,
}

/// The state, behind a sleeping lock (a futex) that a forked child can
/// take over. The lock word is the holder's thread id (0: free), so that a
/// thread never waits for itself (a signal handler that interrupts an
/// attach or detach and calls one itself gets no IP-level join rather than
/// a deadlock), and a waiter can tell that the holder is gone.
struct Locked {
    holder: AtomicU32,
    /// Threads asleep on `holder` (or about to be): the release wakes one
    /// only when there is one, so an uncontended lock costs no syscall.
    waiters: AtomicU32,
    state: UnsafeCell<State>,
}

// SAFETY: `state` is only reached through `exclusive`, which holds the lock.
unsafe impl Sync for Locked {}

static STATE: Locked = Locked {
    holder: AtomicU32::new(0),
    waiters: AtomicU32::new(0),
    state: UnsafeCell::new(State {
        counts: Counts::new(),
        pool: Pool::new(),
        chan: cm::Channel::new(),
        members: Members::new(),
    }),
};

/// How long a waiter sleeps before it looks whether the holder still
/// exists (a thread ended by `pthread_exit()` from a signal handler inside
/// the verb: nothing else releases the lock then).
const HOLDER_CHECK_MS: u32 = 100;

/// Runs `f` with the lock held: the verb and its join or leave run under
/// it (hooks.rs), so that a duplicate check, the kernel's answer and the
/// counts of one (QP, group) never cross another thread's
/// (docs/security.md). None when this thread holds the lock already.
///
/// A waiter sleeps in the kernel (`FUTEX_WAIT`, as glibc's mutexes do): it
/// never spins, so a SCHED_FIFO waiter on the holder's CPU lets the holder
/// run. Nothing inside is a cancellation point (crate::sys), so a
/// cancelled thread never leaves it held; a holder that ends otherwise
/// (`pthread_exit()` from a signal handler) is found gone by the next
/// waiter within [`HOLDER_CHECK_MS`], which takes the lock over as the
/// fork child does ([`after_fork_in_child`]).
///
/// A fabric join that `f` started waits for its answer after `f`, with
/// the lock released ([`wait_unlocked`]): no other call waits for the SA
/// meanwhile; the fabric join's failures then are trace lines.
pub fn exclusive<R>(f: impl FnOnce(&mut State) -> R) -> Option<R> {
    exclusive_then(f, |st, token, r| {
        // The verb's errno stays (the answers' trace lines and hints may
        // read files and allocate: `make faults` failed an allocation here).
        let _errno = ErrnoGuard::save();
        st.fabric_waits_told(token);
        r
    })
}

/// [`exclusive`], whose work ends in `then`, with the lock held again
/// after the waits for the fabric joins `f` started (`then` takes their
/// results: [`cm::Channel::take_waits`] with the token it is given).
///
/// The lock is released only across the wait itself (`ppoll` on the
/// rdma_cm fd, at most [`cm::WAIT_SLICE_MS`] at a time): everything that
/// changes the kernel's state or the counts (the verb, the join or leave
/// commands, the counting) runs under it, so the ordering promises hold
/// (docs/security.md, promise 7); another call may read the answer, end
/// the membership, leave it, or replace the fd meanwhile, and tells the
/// wait in the channel (an explicit join waiting up to
/// 1 s for the SA stalled every attach, detach, join and leave).
pub fn exclusive_then<R, T>(f: impl FnOnce(&mut State) -> R, then: impl FnOnce(&mut State, u64, R) -> T) -> Option<T> {
    let me = crate::sys::gettid() as u32;
    if !lock(me) {
        note_skipped();
        return None;
    }
    // The caller's errno before `f` and `f`'s after it: what the channel
    // does around them (recording the call's waits, reading the answers)
    // may allocate or fail a syscall, and is nobody's errno. (`make faults`
    // at 7cfe1a4: a failed allocation of the fabric join's bookkeeping left
    // ENOMEM in errno after an attach that answered 0.)
    let token = {
        let _errno = ErrnoGuard::save();
        // SAFETY: the lock is ours, and this borrow (as each below) ends
        // before it is released (wait_unlocked); panics abort.
        unsafe { &mut *STATE.state.get() }.chan.begin()
    };
    // SAFETY: as above.
    let r = f(unsafe { &mut *STATE.state.get() });
    {
        let _errno = ErrnoGuard::save();
        wait_unlocked(me, token);
    }
    // SAFETY: as above.
    let t = then(unsafe { &mut *STATE.state.get() }, token, r);
    unlock();
    Some(t)
}

/// Waits for the answers of the fabric joins call `token` started, each
/// `ppoll` with the lock released: the state is borrowed only under the
/// lock ([`cm::Channel::next_wait`] reads the events and says how long
/// still), never across the wait. Returns with the lock held.
fn wait_unlocked(me: u32, token: u64) {
    loop {
        // SAFETY: the lock is ours; the borrow ends here.
        let next = unsafe { &mut *STATE.state.get() }.chan.next_wait(token);
        let Some((fd, ms)) = next else { return };
        unlock();
        // The fd may be closed and its number reused meanwhile: ppoll only
        // looks, and the fd's identity is checked before the next read.
        crate::sys::readable_within(fd, ms);
        // False only when this thread holds it already (it cannot: it was
        // released above): held either way.
        let _ = lock(me);
    }
}

/// Takes the lock for thread `me`; false when `me` holds it already.
fn lock(me: u32) -> bool {
    loop {
        let holder = match STATE.holder.compare_exchange(0, me, Acquire, Relaxed) {
            Ok(_) => return true,
            Err(h) if h == me => return false,
            Err(h) => h,
        };
        // SeqCst with unlock()'s store and load: either the holder sees
        // this waiter and wakes it, or the kernel sees the word changed.
        STATE.waiters.fetch_add(1, SeqCst);
        crate::sys::futex_wait(&STATE.holder, holder, HOLDER_CHECK_MS);
        STATE.waiters.fetch_sub(1, SeqCst);
        if STATE.holder.load(Relaxed) == holder && !crate::sys::thread_alive(holder as i32) {
            // The holder's thread is gone: take its lock over (once, if
            // several waiters find it).
            if STATE.holder.compare_exchange(holder, me, Acquire, Relaxed).is_ok() {
                return true;
            }
        }
    }
}

fn unlock() {
    STATE.holder.store(0, SeqCst);
    if STATE.waiters.load(SeqCst) != 0 {
        crate::sys::futex_wake_one(&STATE.holder);
    }
}

/// The atfork child handler's part (lifecycle.rs): the parent's counts are
/// not the child's, and the inherited sockets are the parent's (close
/// those still rsverbs', never drop their memberships). Another parent
/// thread may have held the lock at fork time: it does not exist in the
/// child, so the lock is taken over; the counts it may have left half
/// changed are leaked, not freed. No allocation or free.
#[cfg_attr(not(rsverbs_clib), allow(dead_code))] // lifecycle.rs is the C library's only
pub fn after_fork_in_child() {
    if !in_use() {
        return;
    }
    // SAFETY: the child has one thread, this one, and it is not inside
    // `exclusive` (fork is not called from there).
    let st = unsafe { &mut *STATE.state.get() };
    st.pool.close_ours();
    core::mem::forget(core::mem::replace(&mut st.counts, Counts::new()));
    st.chan.close_in_child();
    core::mem::forget(core::mem::replace(&mut st.members, Members::new()));
    STATE.holder.store(0, Release);
}

/// Whether a join of any kind may have been made: a switch was read on, or
/// an explicit membership asked for (no switch is read here).
#[cfg_attr(not(rsverbs_clib), allow(dead_code))] // lifecycle.rs' two calls
fn in_use() -> bool {
    MODE.peek() == Some(ON) || matches!(FABRIC.peek(), Some(ON | ALL_PORTS)) || EXPLICIT.load(Relaxed)
}

/// Whether an explicit membership was ever asked for (member.rs): the
/// atfork child and unload then have something to forget or close.
static EXPLICIT: AtomicBool = AtomicBool::new(false);

/// At unload (lifecycle.rs): the sockets are closed, their memberships
/// ending with them (a plugin loaded and unloaded with groups joined
/// orphaned them before), and the counts freed. Only when the lock is free:
/// a thread inside a verb at exit is not waited for. The lock is kept, so
/// that nothing joins after.
#[cfg_attr(not(rsverbs_clib), allow(dead_code))] // lifecycle.rs is the C library's only caller
pub fn at_unload() {
    if !in_use() {
        return;
    }
    let me = crate::sys::gettid() as u32;
    if STATE.holder.compare_exchange(0, me, Acquire, Relaxed).is_err() {
        return;
    }
    // SAFETY: the lock is ours, for good.
    let st = unsafe { &mut *STATE.state.get() };
    st.pool.close_ours();
    st.counts = Counts::new();
    st.chan.close();
    st.members = Members::new();
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
        if ip_on() {
            self.ip_after_mcast(v, q, mgid);
        }
        if let Some(all_ports) = fabric_mode() {
            self.fabric_after_mcast(v, q, mgid, all_ports);
        }
    }

    /// The fabric join's part of [`State::after_mcast`] (cm.rs,
    /// docs/fabric-join.md): join through rdma_cm after the first attach of
    /// a group on the port (per bound netdev), leave after its last detach.
    /// A membership of the group that was lost (an error event, a
    /// DEVICE_REMOVAL, the fd gone) and is still used is joined again at
    /// any attach or detach of the group.
    #[inline(never)]
    fn fabric_after_mcast(&mut self, v: &McastView, q: Qp, mgid: Mgid, all_ports: bool) {
        let key = q.key;
        let Ok(stale) = self.chan.counts(cm::JOIN_FULL).forget_stale(key, q.qpn) else { return no_memory() };
        for (_, h) in stale {
            let _ = self.chan.leave(h);
        }
        let dup = v.attach && self.chan.counts(cm::JOIN_FULL).has(key, &mgid);
        if !v.attach {
            let Ok(to_leave) = self.chan.counts(cm::JOIN_FULL).detach(key, &mgid) else { return no_memory() };
            for (i, h) in to_leave {
                let r = self.chan.leave(h).err().unwrap_or(0);
                note_fabric("leave", "leave", i, &mgid, r);
            }
        }
        // The events and outcomes of this call are traced after its work,
        // with the lock held again (exclusive's fabric_waits_told): never
        // beneath the engine's and this function's frames (docs/security.md,
        // the stack budget).
        // A detach, or a duplicate attach (one attachment in the kernel),
        // joins only a lost membership of the group.
        let again = !v.attach || dup;
        if again {
            // A loss queued since the last call is read now (cm.rs refresh).
            self.chan.refresh();
            if !self.chan.counts(cm::JOIN_FULL).any_unheld(&mgid) {
                return;
            }
        }
        let Some(ctx) = &v.ctx else { return };
        let Some(t) = fabric_target(ctx, q.key.handle, &mgid, all_ports) else { return };
        let (ifindex, bind, group, qkey) = match t {
            Ok(t) => t,
            Err(port) => return crate::trace::no_ipoib(ctx, port, &mgid),
        };
        let asked = cm::Asked { lid: Some(v.lid), qkey };
        // The answers are waited for after this call, with the lock
        // released (exclusive), and their failures told then.
        let one = [ifindex];
        let attached;
        let to_join: &[u32] = if again {
            if !self.chan.counts(cm::JOIN_FULL).unheld(ifindex, &mgid) {
                return;
            }
            &one
        } else {
            let Ok(j) = self.chan.counts(cm::JOIN_FULL).attach(key, q.qpn, &mgid, &[ifindex]) else { return no_memory() };
            attached = j;
            &attached
        };
        for &i in to_join {
            let want = cm::Want { ifindex: i, bind, group, mgid, asked, flags: cm::JOIN_FULL, wait_ms: cm::JOIN_WAIT_MS };
            if let Err((step, e)) = self.chan.join_start(&want) {
                self.chan.tell(cm::Outcome::Failed { ifindex: i, mgid, step, errno: e });
            }
        }
    }

    /// After the waits of call `token` (an attach's or detach's joins): a
    /// join refused within its wait is a trace line and a hint, and the
    /// events read meanwhile are reported.
    #[inline(never)]
    fn fabric_waits_told(&mut self, token: u64) {
        self.chan.take_waits(token, |(w, _), r| {
            if let Err(errno) = r {
                fabric_note(cm::Outcome::Failed { ifindex: w.ifindex, mgid: w.mgid, step: "event", errno });
            }
        });
        self.chan.report(fabric_note);
    }

    /// The IP-level join's part of [`State::after_mcast`].
    #[inline(never)]
    fn ip_after_mcast(&mut self, v: &McastView, q: Qp, mgid: Mgid) {
        let key = q.key;
        // Attachments of an older QP at this key (its context closed with
        // groups attached): left before this call is counted.
        let Ok(stale) = self.counts.forget_stale(key, q.qpn) else { return no_memory() };
        for ((i, old), s) in stale {
            let r = self.pool.leave(s, i, &old).err().unwrap_or(0);
            note("leave", i, &old, r);
        }
        if v.attach {
            if self.counts.has(key, &mgid) {
                return; // a duplicate: one attachment in the kernel
            }
            // Borrowed: a context (its device) is 340 bytes (docs/security.md,
            // the stack budget).
            let ifindexes = v.ctx.as_ref().map_or_else(Vec::new, |ctx| netdevs(ctx, key.handle));
            self.counts.forget_held(|s| !s.is_ours());
            let Ok(to_join) = self.counts.attach(key, q.qpn, &mgid, &ifindexes) else { return no_memory() };
            for i in to_join {
                match self.pool.join(i, &mgid) {
                    Ok(s) => {
                        self.counts.joined(i, &mgid, s);
                        note("join", i, &mgid, 0);
                    }
                    Err(e) => note("join", i, &mgid, e),
                }
            }
        } else {
            let Ok(to_leave) = self.counts.detach(key, &mgid) else { return no_memory() };
            for (i, s) in to_leave {
                let r = self.pool.leave(s, i, &mgid).err().unwrap_or(0);
                note("leave", i, &mgid, r);
            }
        }
    }
}

/// An allocation failed: this call gets no IP-level join or leave (the
/// verb's answer is the kernel's all the same); one line on stderr, once.
#[cold]
fn no_memory() {
    crate::os::warn_once_no_memory("the IP-level join or leave of an attach or detach");
}

/// Where the fabric join of `mgid` for the QP `handle` goes: its port's
/// netdev, the address to bind there and the group's address. On an
/// InfiniBand port the IPoIB netdev and the MGID itself (`AF_IB`, as
/// mckey's `-M`); on a RoCE port (with `all_ports` only) the first netdev
/// with an IPv4 address and the IPv4 group (the kernel refuses an `AF_IB`
/// bind on RoCE, cma.c `cma_validate_port`, and joins IPv6 groups there
/// with ENOTSUPP, 524: those keep the socket join). None when there is
/// nothing to join; Err(port) when an InfiniBand port has no IPoIB
/// address (the `no-ipoib` hint). With the QP's Q_Key, from the same
/// QUERY_QP.
type Target = (u32, cm::Addr, cm::Addr, Option<u32>);
#[inline(never)]
fn fabric_target(ctx: &Context, handle: u32, mgid: &Mgid, all_ports: bool) -> Option<Result<Target, u32>> {
    let dev = ctx.dev.as_ref()?;
    let facts = crate::port::qp_facts(ctx.key, handle, dev);
    let (port, qkey) = (facts.port?, facts.qkey);
    let eth = crate::port::is_ethernet(dev, port);
    if eth && !all_ports {
        return None;
    }
    Some(fabric_place(ctx, dev, port, mgid, eth)?.map(|(i, bind, group)| (i, bind, group, qkey)))
}

/// [`fabric_target`]'s place on a known port (also an explicit join's,
/// member.rs): the netdev, the address to bind and the group's address.
type Place = (u32, cm::Addr, cm::Addr);
#[inline(never)]
fn fabric_place(ctx: &Context, dev: &crate::view::Device, port: u32, mgid: &Mgid, eth: bool) -> Option<Result<Place, u32>> {
    if eth {
        let group = mgid.v4_group()?;
        let found = crate::port::netdevs(ctx.key, dev, port).into_iter().find_map(|i| Some((i, cm::ipv4_of(i)?)));
        return found.map(|(i, a)| Ok((i, cm::Addr::V4(a), cm::Addr::V4(group.octets()))));
    }
    let Some(i) = crate::port::ipoib_netdev(dev, port, None) else { return Some(Err(port)) };
    let Some(a) = cm::ipv4_of(i) else { return Some(Err(port)) };
    Some(Ok((i, cm::Addr::V4(a), cm::Addr::Ib(0, mgid.0))))
}

/// A trace line (and a hint) for one outcome of the fabric join: an
/// InfiniBand MLID the SA chose other than the attach's LID is a
/// `mlid-mismatch` hint, a group Q_Key other than the QP's a
/// `qkey-mismatch` one (rdma_cm senders use the group's: mckey.c takes
/// `remote_qkey` from the join event).
#[inline(never)]
fn fabric_note(o: cm::Outcome) {
    if !crate::trace::registry_on() {
        return;
    }
    match o {
        cm::Outcome::Joined { ifindex, mgid, qkey, mlid, asked } => {
            let name = crate::port::name_here(ifindex);
            let g = crate::trace::format::short::<128>(&mgid);
            crate::trace::note(format_args!(
                "fabricjoin joined netdev={} ifindex={ifindex} {} mlid={mlid:#06x} qkey={qkey:#010x}",
                name.as_deref().unwrap_or("?"),
                g.as_str()
            ));
            if let Some(lid) = asked.lid.filter(|&l| mlid != 0 && l != mlid) {
                crate::trace::mlid_mismatch(&mgid, lid, mlid);
            }
            if let Some(own) = asked.qkey.filter(|&q| q != qkey) {
                crate::trace::qkey_mismatch(&mgid, own, qkey);
            }
        }
        cm::Outcome::Failed { ifindex, mgid, step, errno } => {
            note_fabric("join", step, ifindex, &mgid, errno);
        }
        cm::Outcome::Lost { ifindex, mgid, step, errno } => {
            note_fabric("lost", step, ifindex, &mgid, errno);
        }
        cm::Outcome::Replaced { held, rejoined, errno } => {
            crate::trace::note(format_args!(
                "fabricjoin replaced the rdma_cm fd: cause=cred-change (EACCES after a privilege drop) held={held} rejoined={rejoined} result={}",
                Res(errno)
            ));
            crate::trace::fabric_cred_change(held, rejoined, errno);
        }
    }
}

/// `fabricjoin join|leave|lost netdev=NAME ifindex=N mgid=… [step=S]
/// result=R` (`step`: where a failed join stopped, see cm::Outcome); a
/// failed join or a lost one is also a `fabric-join-failed` hint.
#[inline(never)]
fn note_fabric(what: &str, step: &str, ifindex: u32, mgid: &Mgid, rc: c_int) {
    if !crate::trace::registry_on() {
        return;
    }
    let name = crate::port::name_here(ifindex);
    let name = name.as_deref().unwrap_or("?");
    // The MGID written apart, before the line's buffer is on the stack
    // (docs/security.md, the stack budget).
    let g = crate::trace::format::short::<128>(mgid);
    let g = g.as_str();
    if rc == 0 {
        crate::trace::note(format_args!("fabricjoin {what} netdev={name} ifindex={ifindex} {g} result=0"));
        return;
    }
    crate::trace::note(format_args!("fabricjoin {what} netdev={name} ifindex={ifindex} {g} step={step} result={}", Res(rc)));
    // A membership lost to a credential change is told by the one
    // hint[fabric-join-cred-change] of its fd's replacement, after it.
    if what != "leave" && step != "cred-change" {
        crate::trace::fabric_join_failed(name, mgid, step, rc, what == "lost");
    }
}

/// The netdevs of the QP's port (QUERY_QP, then the port's GID table).
/// Out of line: its lookups' buffers are not in the frame under the joins'
/// trace lines (docs/security.md, the stack budget).
#[inline(never)]
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
    // The MGID written apart (docs/security.md, the stack budget).
    let m = crate::trace::format::short::<128>(mgid);
    crate::trace::note(format_args!("ipjoin {what} netdev={name} ifindex={ifindex} {} result={}", m.as_str(), Res(rc)));
    if rc != 0 && what == "join" {
        crate::trace::ip_join_failed(name, mgid, rc);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::os::cpu_and_preemptions;

    /// One test, so that nothing else takes the process's one lock
    /// meanwhile: a waiter sleeps instead of spinning (docs/security.md, promise 8:
    /// the spin lock burned its CPU), gets the lock when it is released,
    /// a thread never waits for itself, and a holder whose thread ended
    /// without releasing is taken over.
    /// The tests that take the process's one lock, one at a time.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn the_lock_sleeps_never_waits_for_itself_and_outlives_its_holder() {
        let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        use std::sync::mpsc::channel;
        let (held_tx, held_rx) = channel();
        let (go_tx, go_rx) = channel::<()>();
        let (waited_tx, waited_rx) = channel();
        std::thread::scope(|s| {
            s.spawn(move || {
                exclusive(|_| {
                    held_tx.send(()).expect("send");
                    go_rx.recv().expect("recv");
                })
                .expect("lock");
            });
            held_rx.recv().expect("held");
            s.spawn(move || {
                let (c0, p0) = cpu_and_preemptions();
                let inner = exclusive(|_| exclusive(|_| ()).is_none()).expect("lock after release");
                let (c1, p1) = cpu_and_preemptions();
                waited_tx.send((c1 - c0, p1 - p0, inner)).expect("send");
            });
            // The waiter waits: it has not returned after 300 ms of holding.
            assert!(waited_rx.recv_timeout(std::time::Duration::from_millis(300)).is_err(), "did not wait");
            go_tx.send(()).expect("release");
            let (cpu, preempted, inner) = waited_rx.recv().expect("waiter");
            assert!(inner, "a thread waited for itself");
            assert!(cpu < 30_000 && preempted < 50, "waiter: {cpu} us of CPU, preempted {preempted} times in 300 ms");
        });
        // A holder whose thread ends inside (pthread_exit from a signal
        // handler, here a thread that never unlocks): the next one takes over.
        let dead = std::thread::spawn(|| {
            let me = crate::sys::gettid() as u32;
            assert!(lock(me));
            me
        })
        .join()
        .expect("holder");
        assert_eq!(STATE.holder.load(Relaxed), dead);
        assert_eq!(exclusive(|_| 7), Some(7));
        assert_eq!(STATE.holder.load(Relaxed), 0);
    }

    /// A LOGIC TEST OF THE LIBRARY, NOT OF THE KERNEL
    /// (cm.rs' stand-in rdma_cm, a pipe, shared by two threads): while an
    /// explicit join waits up to 1 s for its answer (the SA's, on
    /// InfiniBand), another thread's call takes the lock at once and uses
    /// the same fd (a join of its own); the waiter still gets its own
    /// answer when it comes, and returns then, not at the end of its wait.
    /// Before, the lock was held across the wait: the other call waited
    /// for the whole second.
    #[test]
    fn a_join_waiting_for_its_answer_does_not_hold_the_lock() {
        use super::cm::fake::{self, Fake, event};
        use std::time::{Duration, Instant};
        let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let g = |last: u8| Mgid([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 1, 2, last]);
        let want = move |last: u8, wait_ms: u32| cm::Want {
            ifindex: 3,
            bind: cm::Addr::V4([192, 0, 2, 1]),
            group: cm::Addr::V4([239, 1, 2, last]),
            mgid: g(last),
            asked: cm::Asked { lid: None, qkey: None },
            flags: cm::JOIN_FULL,
            wait_ms,
        };
        fake::install(Fake::default()); // no answer until the test queues one
        let shared = fake::share();
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            fake::adopt(shared);
            let t0 = Instant::now();
            let r = exclusive_then(
                |st| {
                    let r = st.chan.join_start(&want(1, 1000)).map(|_| ()).map_err(|e| e.1);
                    started_tx.send(()).expect("send");
                    r
                },
                |st, token, mut r| {
                    st.chan.take_waits(token, |_, x| r = r.and(x));
                    r
                },
            );
            (r, t0.elapsed())
        });
        started_rx.recv().expect("the join started");
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiter.is_finished(), "the join waits for its answer");
        let t0 = Instant::now();
        let other = exclusive(|st| st.chan.join_start(&want(2, 0)).map(|h| h.0).map_err(|e| e.1));
        let took = t0.elapsed();
        assert_eq!(other, Some(Ok(1)), "the other call's join, on the same fd");
        assert!(took < Duration::from_millis(200), "the other call waited {took:?} for the lock");
        assert!(!waiter.is_finished(), "still waiting");
        fake::with(|f| f.queue_last(&event(crate::uverbs::cm::EVENT_MULTICAST_JOIN, 0, 0)));
        let (r, spent) = waiter.join().expect("waiter");
        assert_eq!(r, Some(Ok(())));
        assert!(spent < Duration::from_millis(800), "the waiter returned after {spent:?}, not at its answer");
        assert_eq!(fake::with(|f| f.sent(crate::uverbs::cm::CMD_JOIN_MCAST)), vec![0, 1]);
        exclusive(|st| st.chan.close()).expect("lock");
    }

    #[test]
    fn parse_values() {
        assert_eq!(parse(b"1"), ON);
        assert_eq!(parse(b""), OFF);
        assert_eq!(parse(b"0"), OFF);
        assert_eq!(parse(b"yes"), OFF);
        assert_eq!(parse(b"10"), OFF);
    }
}
