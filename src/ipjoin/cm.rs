//! The fabric join (`RSVERBS_MCAST_FABRICJOIN`, docs/fabric-join.md): the
//! membership an InfiniBand port needs from the Subnet Administrator,
//! asked of the kernel's rdma_cm (`/dev/infiniband/rdma_cm`, mode 0666)
//! as librdmacm's `mckey -M` asks it, with no librdmacm and no QP: one
//! rdma_cm ID per bound netdev (`CREATE_ID` in the UDP port space, `BIND`
//! to the netdev's IPv4 address), one `JOIN_MCAST` per (netdev, group).
//! The kernel then holds the membership: on InfiniBand it sends the SA
//! join and counts it with IPoIB's and other processes'
//! (multicast.c `ib_sa_join_multicast`), on RoCE it joins the group at IP
//! level (cma.c `cma_iboe_join_multicast` → `cma_igmp_send`); it leaves
//! when the ID is destroyed or the fd's last reference is closed, a
//! `kill -9` included (ucma.c `ucma_close` → `rdma_destroy_id` →
//! `cma_leave_mc_groups`).
//!
//! The join's answer comes as an event (`GET_EVENT`), at once on RoCE, after
//! the SA's on InfiniBand. The fd is `O_NONBLOCK`: an attach waits at most
//! [`JOIN_WAIT_MS`] for its join's event; later events are read at the next
//! attach or detach and at exit. Every event read is attributed by its type
//! and handle to the membership it belongs to, full or send-only, whatever
//! operation reads it ([`Channel`]'s map; docs/fabric-join.md "One event
//! model"). Every event is a trace line; a failed or lost join is also a
//! hint (`fabric-join-failed`), and the group is joined again at the next
//! call that touches it.
//!
//! The fd is known by identity, never by number (the program may close it
//! and open its own rdma_cm fd at the same number, as librdmacm does): its
//! open file description carries a mark, `F_SETSIG` [`MARK`], that no
//! rdma_cm fd of the program's has (rdma_cm has no `fasync`, so no signal
//! is ever sent: ucma.c `ucma_fops`), and the device number of the
//! `rdma_cm` node, both checked before every command and after every wait.
//! An fd that lost either is forgotten, never written to or closed; the
//! kernel ended our memberships with it. An fd that answers EACCES is lost
//! to a credential change: replaced ([`Channel::replace`]).

use super::counts::{Counts, Holder, Packed};
use crate::mgid::Mgid;
pub use crate::uverbs::cm::{Addr, JOIN_FULL, JOIN_SENDONLY};
use crate::uverbs::cm::{self, Event};
use alloc::vec::Vec;
use core::ffi::c_int;

/// How long an attach waits for its join's event (RoCE answers at once;
/// InfiniBand after the SA, usually within a few ms on an idle subnet).
/// Later events are read lazily.
pub const JOIN_WAIT_MS: u32 = 100;

/// The `F_SETSIG` mark of rsverbs' rdma_cm fd (a signal number no program
/// sets on an rdma_cm fd, never sent: see the module's comment).
const MARK: c_int = 63;
/// Linux `F_SETSIG` / `F_GETSIG` (include/uapi/asm-generic/fcntl.h; the
/// same on every architecture rsverbs builds for).
const F_SETSIG: c_int = 10;
const F_GETSIG: c_int = 11;

/// A multicast handle (the `id` JOIN_MCAST answered): what holds a
/// (netdev, group) membership in [`Counts`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handle(pub u32);

impl Holder for Handle {
    fn pack(self) -> Packed {
        [u64::from(self.0), 0]
    }
    fn unpack(p: Packed) -> Self {
        Handle(p[0] as u32)
    }
}

/// One rdma_cm ID, bound to a netdev's address, for the joins of one
/// join state: the kernel leaves a membership found by its address on the
/// ID (cma.c `rdma_leave_multicast` takes the first of the ID's `mc_list`
/// with that address, the newest), so a send-only and a full join of one
/// group on one ID could not be left apart (seen on 6.1: the send-only
/// leave ended the full member's IGMP membership).
struct Bound {
    ifindex: u32,
    flags: u16,
    id: u32,
}

/// One membership asked of this fd and not left: every handle JOIN_MCAST
/// answered, whatever its join state, with what it takes to join it again.
/// The kernel queues all of a file's events on one list (ucma.c
/// `ucma_event_handler` → `list_add_tail(&uevent->list,
/// &ctx->file->event_list)`), so an event read by one operation (a
/// send-only join) may be another membership's (a full one's
/// `-ENETRESET`): every event is matched here, by type and handle,
/// whichever operation reads it.
#[derive(Clone, Copy)]
struct Join {
    handle: u32,
    /// The ID it was made on: a DEVICE_REMOVAL names the ID.
    id: u32,
    /// Its `MULTICAST_JOIN` was read.
    answered: bool,
    want: Want,
}

/// One join to make: the netdev, the address to bind there, the group's
/// address, its MGID, what the attach knew, the join state (`JOIN_FULL`
/// or `JOIN_SENDONLY`, ucma.c `ucma_process_join`) and how long to wait
/// for the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Want {
    pub ifindex: u32,
    pub bind: Addr,
    pub group: Addr,
    pub mgid: Mgid,
    pub asked: Asked,
    pub flags: u16,
    pub wait_ms: u32,
}

/// The attach's LID and its QP's Q_Key (when the kernel told it); an
/// explicit join (member.rs) has neither.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Asked {
    pub lid: Option<u16>,
    pub qkey: Option<u32>,
}

/// What the engine reports about one event or failed step, for the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The kernel (and on InfiniBand the SA) granted the join: the group's
    /// Q_Key and MLID, and what the attach had.
    Joined { ifindex: u32, mgid: Mgid, qkey: u32, mlid: u16, asked: Asked },
    /// The join failed at `step` (`open`, `create`, `bind`, `join`, or
    /// `event`: the kernel's or the SA's answer) with `errno`.
    Failed { ifindex: u32, mgid: Mgid, step: &'static str, errno: c_int },
    /// A membership ended after it was granted, and is forgotten in the
    /// counts, so that the next call that touches its group joins again:
    /// `step` `event` (an error event: `-ENETRESET` after a client
    /// re-register), `removal` (DEVICE_REMOVAL on its ID), `fd` (the
    /// program closed rsverbs' rdma_cm fd), `cred-change` (the fd answered
    /// EACCES after a credential change: replaced, and joined again at once).
    Lost { ifindex: u32, mgid: Mgid, step: &'static str, errno: c_int },
    /// The fd answered EACCES after a credential change and was replaced
    /// ([`Channel::replace`]): `held` memberships were on it, `rejoined`
    /// of them joined again on the new fd; `errno` why no new fd could be
    /// opened (0 when one was). After the `Lost` outcomes of each.
    Replaced { held: u32, rejoined: u32, errno: c_int },
}

/// The process's rdma_cm fd, its IDs, its memberships (the joins asked and
/// not left, and their (netdev, group) counts, full and send-only apart),
/// and the outcomes not yet reported.
///
/// One fd for both join states, one map from handle to membership: the
/// kernel's handles are unique among the file's live memberships
/// (`multicast_table`), so a handle names one membership whatever its
/// kind, and the map answers for every event read; two fds (one per kind)
/// would need two waits and still one map per fd.
pub struct Channel {
    fd: c_int,
    rdev: u64,
    ids: Vec<Bound>,
    joins: Vec<Join>,
    /// Kept until [`Channel::report`]: the trace's lines are written after
    /// the engine's frames are gone, never beside its command buffers
    /// (docs/security.md, the stack budget). An outcome that cannot be
    /// kept (no memory) goes unreported.
    outcomes: Vec<Outcome>,
    /// The (netdev, group) counts of the full joins: the attaches' and the
    /// explicit full members' (member.rs).
    full: Counts<Handle>,
    /// The send-only joins', apart: a full join after a send-only one must
    /// still be made.
    sendonly: Counts<Handle>,
    /// A command answered EACCES: the fd is lost to this process
    /// ([`Channel::replace`]).
    revoked: bool,
    /// The joins whose answers calls wait for, each with its call's token:
    /// the waits run with the lock released (mod.rs `exclusive`), so
    /// another call may read the answer, end the membership, or replace
    /// the fd meanwhile, and tells it here.
    waits: Vec<Wait>,
    /// The token of the call holding the lock ([`Channel::begin`]).
    token: u64,
}

/// A join a call waits for: its handle (retargeted when a replacement
/// joins it again on a new fd), until when, and how it ended, once it has
/// (`Some(0)`: answered, or left by another call; `Some(errno)`: refused
/// or ended).
struct Wait {
    token: u64,
    handle: u32,
    deadline_us: u64,
    done: Option<c_int>,
    want: Want,
}

/// How long a wait for an answer sleeps before it looks again whether
/// another call read the answer meanwhile (the fd then stays unreadable).
pub const WAIT_SLICE_MS: u32 = 10;

impl Channel {
    pub const fn new() -> Self {
        Channel {
            fd: -1,
            rdev: 0,
            ids: Vec::new(),
            joins: Vec::new(),
            outcomes: Vec::new(),
            full: Counts::new(),
            sendonly: Counts::new(),
            revoked: false,
            waits: Vec::new(),
            token: 0,
        }
    }

    /// A new call under the lock: its token names the waits it starts.
    pub fn begin(&mut self) -> u64 {
        self.token = self.token.wrapping_add(1);
        self.token
    }

    /// The counts of the joins in state `flags` (`JOIN_FULL` or
    /// `JOIN_SENDONLY`).
    pub fn counts(&mut self, flags: u16) -> &mut Counts<Handle> {
        if flags == JOIN_FULL { &mut self.full } else { &mut self.sendonly }
    }

    /// Hands every outcome kept since the last call to `f`, oldest first.
    pub fn report(&mut self, mut f: impl FnMut(Outcome)) {
        for o in self.outcomes.drain(..) {
            f(o);
        }
    }

    fn outcome(&mut self, o: Outcome) {
        let _ = crate::os::try_push(&mut self.outcomes, o);
    }

    /// Keeps a caller's outcome (a join that failed before its answer)
    /// for [`Channel::report`], after the call's work.
    pub fn tell(&mut self, o: Outcome) {
        self.outcome(o);
    }

    /// Whether the fd is still rsverbs' (see the module's comment); false
    /// when there is none.
    fn is_ours(&self) -> bool {
        self.fd >= 0 && crate::sys::fcntl(self.fd, F_GETSIG, 0) == Ok(MARK) && ident(self.fd) == Some(self.rdev)
    }

    /// Writes a command, the fd's identity checked first, every time (the
    /// program may have closed it and opened its own rdma_cm fd at the
    /// same number during a wait): an fd no longer ours is forgotten,
    /// without a syscall on it, and the command fails with EBADF. EACCES
    /// marks the fd lost to this process ([`Channel::replace`]).
    fn cmd<const T: usize>(&mut self, c: &cm::Cmd<T>) -> Result<(), c_int> {
        if !self.is_ours() {
            self.forget();
            return Err(libc::EBADF);
        }
        let r = send(self.fd, c);
        if r == Err(libc::EACCES) {
            self.revoked = true;
        }
        r
    }

    /// The fd, opened on first use; a lost one is forgotten first (and the
    /// memberships it held with it).
    fn open(&mut self) -> Result<(), c_int> {
        if self.is_ours() {
            return Ok(());
        }
        if self.fd >= 0 {
            self.forget();
        }
        let fd = open_dev()?;
        let Some(r) = ident(fd) else {
            crate::sys::close(fd);
            return Err(libc::ENODEV);
        };
        if let Err(e) = crate::sys::fcntl(fd, F_SETSIG, MARK) {
            crate::sys::close(fd);
            return Err(e);
        }
        self.fd = fd;
        self.rdev = r;
        Ok(())
    }

    /// Ends every membership in the map (told as `Lost` at `step`, or to
    /// the join being waited for), forgets them in the counts and the IDs,
    /// and returns them. No syscall.
    fn end_all(&mut self, step: &'static str, errno: c_int) -> Vec<Join> {
        self.ids.clear();
        let old = core::mem::take(&mut self.joins);
        for j in &old {
            self.told(j, step, errno);
        }
        self.full.forget_held(|_| true);
        self.sendonly.forget_held(|_| true);
        old
    }

    /// Forgets the fd and everything on it, without a syscall on it (the
    /// program closed it: the kernel left our groups then).
    fn forget(&mut self) {
        self.fd = -1;
        let _ = self.end_all("fd", libc::EBADF);
    }

    /// The fd answered EACCES: the caller's credentials are no longer its
    /// opener's (ucma.c `ucma_write` → `ib_safe_file_access`: `filp->f_cred
    /// == current_cred()`, after setuid, setgid, setgroups, capset), so
    /// every command on it fails for the rest of the process. It is closed
    /// (the kernel leaves every group on it: `ucma_close`), its
    /// memberships told `Lost` at `cred-change` and forgotten, a new fd is
    /// opened with the new credentials and every membership held is joined
    /// again on it (its answer read lazily). An EACCES on the new fd too
    /// closes that one and leaves the rest to the next call.
    fn replace(&mut self) {
        let old = self.drop_revoked();
        let held = old.len() as u32;
        if let Err(errno) = self.open() {
            return self.outcome(Outcome::Replaced { held, rejoined: 0, errno });
        }
        let mut rejoined = 0;
        for j in &old {
            let w = Want { wait_ms: 0, ..j.want };
            if let Ok(h) = self.join_once(&w) {
                rejoined += 1;
                // A call waiting for the old join's answer waits for the new one's.
                for wt in self.waits.iter_mut().filter(|wt| wt.handle == j.handle) {
                    wt.handle = h.0;
                    wt.done = None;
                }
            }
            if self.revoked {
                let _ = self.drop_revoked();
                break;
            }
        }
        self.outcome(Outcome::Replaced { held, rejoined, errno: 0 });
    }

    /// Closes a revoked fd (still ours: its identity was checked before the
    /// command that got EACCES) and ends everything on it.
    fn drop_revoked(&mut self) -> Vec<Join> {
        self.revoked = false;
        self.close_fd();
        self.end_all("cred-change", libc::EACCES)
    }

    /// The ID bound to `ifindex`'s address `addr` for joins in the state
    /// `flags`, created and bound on first use (an ID whose bind failed is
    /// destroyed at once).
    #[inline(never)]
    fn id_for(&mut self, ifindex: u32, addr: &Addr, flags: u16) -> Result<u32, (&'static str, c_int)> {
        if let Some(b) = self.ids.iter().find(|b| b.ifindex == ifindex && b.flags == flags) {
            return Ok(b.id);
        }
        if self.ids.try_reserve(1).is_err() {
            return Err(("create", libc::ENOMEM));
        }
        let mut resp = [0u8; cm::ID_RESP_LEN];
        self.cmd(&cm::create_id(u64::from(ifindex), resp.as_mut_ptr() as u64)).map_err(|e| ("create", e))?;
        let id = u32::from_ne_bytes(resp);
        if let Err(e) = self.cmd(&cm::bind(id, addr)) {
            self.destroy(id);
            return Err(("bind", e));
        }
        self.ids.push(Bound { ifindex, flags, id });
        Ok(id)
    }

    /// Joins `w.mgid` on `w.ifindex` (bound to `w.bind`, joined as
    /// `w.group`, in the join state `w.flags`) and counts it held in
    /// `w.flags`' counts at once (a join not answered yet is held: its
    /// refusal, read later, forgets it). Its answer is awaited by the call
    /// (up to `w.wait_ms`, with the lock released: mod.rs `exclusive`,
    /// [`Channel::next_wait`], [`Channel::take_waits`]); the events read
    /// meanwhile are kept for [`Channel::report`]. An fd lost to a
    /// credential change is replaced ([`Channel::replace`]) and the join
    /// made on the new one. Err: the step that failed before the answer.
    #[inline(never)]
    pub fn join_start(&mut self, w: &Want) -> Result<Handle, (&'static str, c_int)> {
        let r = self.join_once(w);
        if !self.revoked {
            return r;
        }
        self.replace();
        let r = self.join_once(w);
        if self.revoked {
            let _ = self.drop_revoked();
        }
        r
    }

    /// [`Channel::join_start`] and its wait, with the lock held (the logic
    /// tests' way, and the attach's and explicit join's before the lock
    /// was released across the wait): its own refusal within the wait is
    /// its Err (`event`).
    #[cfg(test)]
    pub fn join(&mut self, w: &Want) -> Result<Handle, (&'static str, c_int)> {
        let token = self.begin();
        let h = self.join_start(w)?;
        while let Some((fd, ms)) = self.next_wait(token) {
            crate::sys::readable_within(fd, ms);
        }
        let mut r = Ok(h);
        self.take_waits(token, |wt, res| {
            if let Err(e) = res {
                r = Err(("event", e));
            } else {
                r = Ok(Handle(wt.1));
            }
        });
        r
    }

    fn join_once(&mut self, w: &Want) -> Result<Handle, (&'static str, c_int)> {
        self.open().map_err(|e| ("open", e))?;
        self.drain(None);
        if self.revoked {
            return Err(("event", libc::EACCES));
        }
        if self.joins.try_reserve(1).is_err() {
            return Err(("join", libc::ENOMEM));
        }
        let id = self.id_for(w.ifindex, &w.bind, w.flags)?;
        let mut resp = [0u8; cm::ID_RESP_LEN];
        self.cmd(&cm::join(resp.as_mut_ptr() as u64, u64::from(w.ifindex), id, &w.group, w.flags))
            .map_err(|e| ("join", e))?;
        let handle = u32::from_ne_bytes(resp);
        self.joins.push(Join { handle, id, answered: false, want: *w });
        self.counts(w.flags).joined(w.ifindex, &w.mgid, Handle(handle));
        if w.wait_ms > 0 {
            let deadline_us = crate::os::monotonic_us() + u64::from(w.wait_ms) * 1000;
            // No room to wait: the answer is read lazily, as after a wait.
            let _ = crate::os::try_push(&mut self.waits, Wait { token: self.token, handle, deadline_us, done: None, want: *w });
        }
        Ok(Handle(handle))
    }

    /// Reads the events queued (each attributed: the waits of every call
    /// are told), replaces an fd lost to a credential change, and says how
    /// long call `token` still waits for an answer and on which fd; None
    /// when it waits for none (each answered, ended, or past its time).
    /// Waits of calls long past their time (a thread that ended inside)
    /// are dropped.
    pub fn next_wait(&mut self, token: u64) -> Option<(c_int, u32)> {
        if self.waits.iter().all(|w| w.token != token) {
            return None;
        }
        self.drain(None);
        if self.revoked {
            self.replace();
        }
        let now = crate::os::monotonic_us();
        self.waits.retain(|w| w.token == token || now < w.deadline_us + 1_000_000);
        if self.fd < 0 {
            return None;
        }
        let left = self.waits.iter().filter(|w| w.token == token && w.done.is_none() && now < w.deadline_us).map(|w| w.deadline_us - now).min()?;
        Some((self.fd, left.div_ceil(1000).min(u64::from(WAIT_SLICE_MS)) as u32))
    }

    /// Hands each wait of call `token` to `f` with its result, and forgets
    /// them: Ok (answered, left by another call, or not answered yet: held,
    /// its answer read lazily), or the errno that ended it.
    pub fn take_waits(&mut self, token: u64, mut f: impl FnMut((Want, u32), Result<(), c_int>)) {
        let mut i = 0;
        while i < self.waits.len() {
            if self.waits[i].token != token {
                i += 1;
                continue;
            }
            let w = self.waits.swap_remove(i);
            let r = match w.done {
                Some(e) if e != 0 => Err(e),
                _ => Ok(()),
            };
            f((w.want, w.handle), r);
        }
    }

    /// Leaves the membership `h` holds (the kernel's answer; EINVAL or
    /// ENOENT when the handle is not this fd's: ucma.c
    /// `ucma_leave_multicast` checks the owner, so nothing of another
    /// file's is ever left). On an fd lost to a credential change the
    /// leave is made by closing it ([`Channel::replace`]): Ok.
    #[inline(never)]
    pub fn leave(&mut self, h: Handle) -> Result<(), c_int> {
        self.joins.retain(|j| j.handle != h.0);
        self.wait_done(h.0, 0);
        let mut resp = [0u8; cm::ID_RESP_LEN];
        let r = self.cmd(&cm::leave(resp.as_mut_ptr() as u64, h.0));
        if r.is_ok() {
            self.drain(None);
        }
        if self.revoked {
            self.replace();
            return Ok(());
        }
        r
    }

    /// Reads every queued event (none blocks: the fd is O_NONBLOCK) and
    /// acts on it; stops after the multicast event of handle `until`. The
    /// fd's identity is checked before each read (cmd). Out of line: its
    /// 336-byte event is on the stack only here.
    #[inline(never)]
    fn drain(&mut self, until: Option<u32>) {
        loop {
            let mut resp = [0u8; cm::EVENT_RESP_LEN];
            if self.cmd(&cm::get_event(resp.as_mut_ptr() as u64)).is_err() {
                return; // EAGAIN: none left (or the fd is gone)
            }
            let e = Event::decode(&resp);
            let mc = e.event == cm::EVENT_MULTICAST_JOIN || e.event == cm::EVENT_MULTICAST_ERROR;
            self.on_event(&e);
            if (mc && until == Some(e.id)) || self.revoked {
                return;
            }
        }
    }

    /// One event, attributed by its type and handle (uverbs/cm.rs: only
    /// MULTICAST_JOIN/ERROR carry a multicast handle).
    fn on_event(&mut self, e: &Event) {
        match e.event {
            cm::EVENT_MULTICAST_JOIN | cm::EVENT_MULTICAST_ERROR => {}
            cm::EVENT_DEVICE_REMOVAL => return self.on_removal(e.id),
            // ADDR_CHANGE and the rest: the ID's, no membership ended.
            _ => return,
        }
        let Some(at) = self.joins.iter().position(|j| j.handle == e.id) else {
            return; // left meanwhile (its queued events went with it: ucma_cleanup_mc_events)
        };
        if e.event == cm::EVENT_MULTICAST_JOIN && e.status == 0 {
            let j = &mut self.joins[at];
            if !j.answered {
                j.answered = true;
                let (ifindex, mgid, asked) = (j.want.ifindex, j.want.mgid, j.want.asked);
                self.outcome(Outcome::Joined { ifindex, mgid, qkey: e.qkey, mlid: e.mlid, asked });
                self.wait_done(e.id, 0);
            }
            return;
        }
        // An error: the kernel's membership is gone or never was; it is
        // forgotten (joined again at the next call that touches it) and
        // its handle freed.
        let errno = if e.status < 0 { -e.status } else { libc::EIO };
        self.end_join(at, "event", errno);
        let mut resp = [0u8; cm::ID_RESP_LEN];
        let _ = self.cmd(&cm::leave(resp.as_mut_ptr() as u64, e.id));
    }

    /// DEVICE_REMOVAL of ID `id`: every membership on it ended; the ID is
    /// destroyed (the next join makes a new one).
    fn on_removal(&mut self, id: u32) {
        let Some(b) = self.ids.iter().position(|b| b.id == id) else { return };
        self.ids.swap_remove(b);
        while let Some(at) = self.joins.iter().position(|j| j.id == id) {
            self.end_join(at, "removal", libc::ENODEV);
        }
        self.destroy(id);
    }

    /// Ends the membership at `at` in the map: forgotten in its counts,
    /// told.
    fn end_join(&mut self, at: usize, step: &'static str, errno: c_int) {
        let j = self.joins.swap_remove(at);
        self.counts(j.want.flags).forget_held(|h| h.0 == j.handle);
        self.told(&j, step, errno);
    }

    /// Tells how `j` ended: to the join waiting for it (its Err), or as an
    /// outcome (`Failed` before its answer, `Lost` after).
    fn told(&mut self, j: &Join, step: &'static str, errno: c_int) {
        if self.wait_done(j.handle, errno) {
            return;
        }
        let (ifindex, mgid) = (j.want.ifindex, j.want.mgid);
        self.outcome(if j.answered { Outcome::Lost { ifindex, mgid, step, errno } } else { Outcome::Failed { ifindex, mgid, step, errno } });
    }

    /// The wait for `handle`'s answer, if a call is still waiting, ends
    /// with `errno` (0: answered or left); true when there was one.
    fn wait_done(&mut self, handle: u32, errno: c_int) -> bool {
        let now = crate::os::monotonic_us();
        match self.waits.iter_mut().find(|w| w.handle == handle && w.done.is_none() && now < w.deadline_us) {
            Some(w) => {
                w.done = Some(errno);
                true
            }
            None => false,
        }
    }

    fn destroy(&mut self, id: u32) {
        let mut resp = [0u8; cm::ID_RESP_LEN];
        let _ = self.cmd(&cm::destroy_id(resp.as_mut_ptr() as u64, id));
    }

    /// Reads the events queued, if there is an fd: a call that decides
    /// from the counts whether a membership was lost (a detach, a duplicate
    /// attach, a join of one held) reads them first, so that a loss queued
    /// since the last call (`-ENETRESET` after an SM's client re-register)
    /// is joined again by this call, not the one after.
    pub fn refresh(&mut self) {
        if self.fd >= 0 {
            self.drain(None);
        }
    }

    /// Reads the events queued (the logic tests' "some later call").
    #[cfg(test)]
    pub fn poll(&mut self) {
        self.drain(None);
    }

    /// The atfork child: the fd is the parent's (its memberships too):
    /// closed if still ours, nothing left. No allocation or free.
    pub fn close_in_child(&mut self) {
        self.close_fd();
        core::mem::forget(core::mem::take(&mut self.ids));
        core::mem::forget(core::mem::take(&mut self.joins));
        core::mem::forget(core::mem::take(&mut self.outcomes));
        core::mem::forget(core::mem::take(&mut self.waits));
        core::mem::forget(core::mem::replace(&mut self.full, Counts::new()));
        core::mem::forget(core::mem::replace(&mut self.sendonly, Counts::new()));
        self.revoked = false;
    }

    /// At unload: closing the fd leaves every group (the kernel's
    /// `ucma_close`).
    pub fn close(&mut self) {
        self.close_fd();
        *self = Channel::new();
    }
}

impl Channel {
    /// Closes the fd if it is still ours (never the program's), and
    /// forgets it. fcntl, fstat and close only: async-signal-safe.
    fn close_fd(&mut self) {
        if self.is_ours() {
            crate::sys::close(self.fd);
        }
        self.fd = -1;
    }
}

/// One command to the rdma_cm fd (the logic tests' stand-in kernel
/// answers instead when one is installed on the thread).
fn send<const T: usize>(fd: c_int, c: &cm::Cmd<T>) -> Result<(), c_int> {
    #[cfg(test)]
    if let Some(r) = fake::send(fd, &c.bytes) {
        return r;
    }
    cm::send(fd, c)
}

/// A new rdma_cm fd (the logic tests' stand-in: a pipe).
fn open_dev() -> Result<c_int, c_int> {
    #[cfg(test)]
    if let Some(r) = fake::open() {
        return r;
    }
    crate::sys::open(c"/dev/infiniband/rdma_cm", libc::O_RDWR | libc::O_NONBLOCK, 0)
}

/// What identifies the rdma_cm node `fd` names: its device number (the
/// logic tests' stand-in, a pipe, by its inode). Out of line: its `stat`
/// is on the stack only here.
#[inline(never)]
fn ident(fd: c_int) -> Option<u64> {
    // SAFETY: an all-zero stat is valid; fstat fills it or fails.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: st is a valid out-pointer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return None;
    }
    match st.st_mode & libc::S_IFMT {
        libc::S_IFCHR => Some(st.st_rdev),
        #[cfg(test)]
        libc::S_IFIFO => Some(st.st_ino),
        _ => None,
    }
}

/// The primary IPv4 address of netdev `ifindex` (`SIOCGIFADDR`, as
/// `ip addr` lists it first), to bind an rdma_cm ID to.
pub fn ipv4_of(ifindex: u32) -> Option<[u8; 4]> {
    // SAFETY: zeroed ifreq is valid; ifr_name is filled by if_indextoname
    // (IF_NAMESIZE bytes, NUL-terminated).
    let mut ifr: libc::ifreq = unsafe { core::mem::zeroed() };
    // SAFETY: ifr_name has IF_NAMESIZE bytes.
    if unsafe { libc::if_indextoname(ifindex, ifr.ifr_name.as_mut_ptr()) }.is_null() {
        return None;
    }
    // SAFETY: plain socket(2); not a cancellation point.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return None;
    }
    // SAFETY: ifr is a valid ifreq for SIOCGIFADDR, which fills ifru_addr.
    let rc = unsafe { libc::ioctl(s, libc::SIOCGIFADDR, &mut ifr as *mut libc::ifreq) };
    crate::sys::close(s);
    if rc != 0 {
        return None;
    }
    // SAFETY: the kernel filled ifru_addr with a sockaddr_in (AF_INET).
    let sa = unsafe { ifr.ifr_ifru.ifru_addr };
    let sin = (&sa as *const libc::sockaddr).cast::<libc::sockaddr_in>();
    // SAFETY: sockaddr and sockaddr_in are both 16 bytes; read unaligned.
    let a = unsafe { sin.read_unaligned() };
    Some(a.sin_addr.s_addr.to_ne_bytes())
}

/// LOGIC TESTS OF THE LIBRARY, NOT OF THE KERNEL: the engine fed event
/// sequences through [`fake`]'s pipe standing in for the rdma_cm fd.
#[cfg(test)]
mod tests {
    use super::fake::{self, Fake, event};
    use super::*;
    use crate::registry::QpKey;
    use crate::uverbs::cm::{CMD_CREATE_ID, CMD_DESTROY_ID, CMD_GET_EVENT, CMD_JOIN_MCAST, CMD_LEAVE_MCAST};
    use crate::uverbs::cm::{EVENT_ADDR_CHANGE, EVENT_DEVICE_REMOVAL, EVENT_MULTICAST_ERROR};

    fn key(h: u32) -> QpKey {
        QpKey { ctx: 0, handle: h }
    }

    fn g(last: u8) -> Mgid {
        Mgid([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 1, 1, last])
    }

    fn want(flags: u16, last: u8, wait_ms: u32) -> Want {
        let asked = Asked { lid: None, qkey: None };
        Want { ifindex: 3, bind: Addr::V4([192, 0, 2, 1]), group: Addr::V4([239, 1, 1, last]), mgid: g(last), asked, flags, wait_ms }
    }

    /// Counted, then joined, as the callers do (mod.rs, member.rs).
    fn counted_join(ch: &mut Channel, k: u32, w: &Want) -> Result<Handle, (&'static str, c_int)> {
        assert_eq!(ch.counts(w.flags).attach(key(k), k, &w.mgid, &[w.ifindex]).expect("alloc"), vec![w.ifindex]);
        ch.join(w)
    }

    fn outcomes(ch: &mut Channel) -> Vec<Outcome> {
        let mut v = Vec::new();
        ch.report(|o| v.push(o));
        v
    }

    /// The SM re-registers the port and multicast.c
    /// sends `-ENETRESET` to every member; a send-only join reads the full
    /// membership's error. It is that membership's: left, forgotten in the
    /// full counts (before: not found in the send-only counts, dropped),
    /// told, and joined again by the next join of it.
    #[test]
    fn a_full_memberships_reset_read_during_a_sendonly_join_is_attributed_and_left() {
        fake::install(Fake { answer: true, ..Fake::default() });
        let mut ch = Channel::new();
        let full = want(JOIN_FULL, 1, 100);
        assert_eq!(counted_join(&mut ch, 1, &full), Ok(Handle(0)));
        assert_eq!(outcomes(&mut ch).len(), 1, "joined");
        fake::with(|f| f.queue_last(&event(EVENT_MULTICAST_ERROR, 0, -libc::ENETRESET)));
        assert_eq!(counted_join(&mut ch, 2, &want(JOIN_SENDONLY, 1, 100)), Ok(Handle(1)));
        assert_eq!(fake::with(|f| f.sent(CMD_LEAVE_MCAST)), vec![0]);
        assert!(ch.counts(JOIN_FULL).unheld(3, &g(1)));
        assert_eq!(ch.counts(JOIN_SENDONLY).holder(3, &g(1)), Some(Handle(1)));
        let o = outcomes(&mut ch);
        assert!(o.contains(&Outcome::Lost { ifindex: 3, mgid: g(1), step: "event", errno: libc::ENETRESET }), "{o:?}");
        assert_eq!(ch.join(&full), Ok(Handle(2)));
        assert_eq!(ch.counts(JOIN_FULL).holder(3, &g(1)), Some(Handle(2)));
    }

    /// A send-only join whose SA answer comes after its
    /// wait; its refusal is read by a later full join of the same group.
    /// The refusal is the send-only one's (matched by handle): the full
    /// join succeeds and is held (before: `refused(ifindex, group)` gave
    /// it the refusal, -1 ETIMEDOUT, and it was never tracked).
    #[test]
    fn a_late_sendonly_refusal_never_fails_a_later_full_join() {
        fake::install(Fake::default());
        let mut ch = Channel::new();
        assert_eq!(counted_join(&mut ch, 1, &want(JOIN_SENDONLY, 2, 0)), Ok(Handle(0)));
        assert_eq!(ch.counts(JOIN_SENDONLY).holder(3, &g(2)), Some(Handle(0)), "pending is held");
        fake::with(|f| {
            f.queue_last(&event(EVENT_MULTICAST_ERROR, 0, -libc::ETIMEDOUT));
            f.answer = true;
        });
        assert_eq!(counted_join(&mut ch, 2, &want(JOIN_FULL, 2, 100)), Ok(Handle(1)));
        assert_eq!(ch.counts(JOIN_FULL).holder(3, &g(2)), Some(Handle(1)));
        assert!(ch.counts(JOIN_SENDONLY).unheld(3, &g(2)));
        assert_eq!(fake::with(|f| f.sent(CMD_LEAVE_MCAST)), vec![0]);
        let o = outcomes(&mut ch);
        assert!(o.contains(&Outcome::Failed { ifindex: 3, mgid: g(2), step: "event", errno: libc::ETIMEDOUT }), "{o:?}");
    }

    /// ADDR_CHANGE and DEVICE_REMOVAL carry the ID's own
    /// id, which collides with multicast handles (both tables start at
    /// 0). ADDR_CHANGE ends nothing (before: it left handle 0's
    /// membership); DEVICE_REMOVAL ends every membership on that ID, and
    /// only those, and destroys the ID.
    #[test]
    fn id_events_with_a_colliding_id_are_the_ids() {
        fake::install(Fake { answer: true, ..Fake::default() });
        let mut ch = Channel::new();
        // ID 0 (send-only) holds handle 0; ID 1 (full) handles 1 and 2.
        assert_eq!(counted_join(&mut ch, 1, &want(JOIN_SENDONLY, 3, 100)), Ok(Handle(0)));
        assert_eq!(counted_join(&mut ch, 2, &want(JOIN_FULL, 3, 100)), Ok(Handle(1)));
        assert_eq!(counted_join(&mut ch, 3, &want(JOIN_FULL, 4, 100)), Ok(Handle(2)));
        assert_eq!(fake::with(|f| f.sent(CMD_CREATE_ID)), vec![0, 1]);
        let _ = outcomes(&mut ch);

        fake::with(|f| f.queue_last(&event(EVENT_ADDR_CHANGE, 0, 0)));
        ch.poll();
        assert_eq!(fake::with(|f| f.sent(CMD_LEAVE_MCAST)), Vec::<u32>::new());
        assert_eq!(ch.counts(JOIN_SENDONLY).holder(3, &g(3)), Some(Handle(0)));
        assert_eq!(outcomes(&mut ch), vec![]);

        fake::with(|f| f.queue_last(&event(EVENT_DEVICE_REMOVAL, 1, 0)));
        ch.poll();
        assert_eq!(ch.counts(JOIN_SENDONLY).holder(3, &g(3)), Some(Handle(0)), "another ID's");
        assert!(ch.counts(JOIN_FULL).unheld(3, &g(3)));
        assert!(ch.counts(JOIN_FULL).unheld(3, &g(4)));
        assert_eq!(fake::with(|f| f.sent(CMD_DESTROY_ID)), vec![1]);
        let o = outcomes(&mut ch);
        assert_eq!(o.len(), 2, "{o:?}");
        assert!(o.contains(&Outcome::Lost { ifindex: 3, mgid: g(4), step: "removal", errno: libc::ENODEV }), "{o:?}");
        // The next full join makes a new ID.
        assert_eq!(ch.join(&want(JOIN_FULL, 3, 100)), Ok(Handle(3)));
        assert_eq!(fake::with(|f| f.sent(CMD_CREATE_ID)), vec![0, 1, 2]);
    }

    /// During the join's wait the program closes
    /// rsverbs' fd and opens its own rdma_cm fd at the same number. After
    /// the wait the fd is found not ours and forgotten: no GET_EVENT (or
    /// anything) is written to it, the program's event stays unread
    /// (before: the engine's drain trusted the fd for the whole join).
    #[test]
    fn an_fd_replaced_at_its_number_during_the_wait_is_not_used() {
        fake::install(Fake { replace_at_join: true, ..Fake::default() });
        let mut ch = Channel::new();
        assert_eq!(counted_join(&mut ch, 1, &want(JOIN_FULL, 5, 100)), Err(("event", libc::EBADF)));
        let log = fake::with(|f| f.log.clone());
        assert_eq!(log.last().map(|l| l.0), Some(CMD_JOIN_MCAST), "{log:?}");
        assert!(!log.iter().any(|l| l.0 == CMD_GET_EVENT), "{log:?}");
        let (fd, _) = fake::with(|f| f.program).expect("replaced");
        let mut ev = [0u8; crate::uverbs::cm::EVENT_RESP_LEN];
        assert_eq!(crate::sys::read(fd, &mut ev), Ok(ev.len()), "the program's event is still there");
        assert!(ch.counts(JOIN_FULL).unheld(3, &g(5)));
        assert_eq!(ch.fd, -1);
        // The next join opens a new fd.
        assert_eq!(ch.join(&want(JOIN_FULL, 5, 0)), Ok(Handle(1)));
        assert_eq!(fake::with(|f| f.pipes.len()), 2);
    }

    /// After a credential change every command on the
    /// fd answers EACCES (ucma.c `ucma_write`, `ib_safe_file_access`). The
    /// fd is closed (the kernel leaves its groups), its memberships told
    /// lost at `cred-change`, a new fd opened and every membership held
    /// joined again on it, and the join asked is made there. A leave that
    /// meets EACCES is made by the close: Ok, the rest joined again.
    #[test]
    fn eacces_closes_the_fd_and_joins_again_on_a_new_one() {
        fake::install(Fake { answer: true, ..Fake::default() });
        let mut ch = Channel::new();
        assert_eq!(counted_join(&mut ch, 1, &want(JOIN_FULL, 6, 100)), Ok(Handle(0)));
        assert_eq!(counted_join(&mut ch, 2, &want(JOIN_SENDONLY, 7, 100)), Ok(Handle(1)));
        let _ = outcomes(&mut ch);
        fake::with(|f| f.eacces = Some(0));
        assert_eq!(counted_join(&mut ch, 3, &want(JOIN_FULL, 8, 100)), Ok(Handle(4)));
        assert_eq!(fake::with(|f| f.pipes.len()), 2, "a new fd");
        assert_eq!(ch.rdev, ident(fake::with(|f| f.pipes[1].0)).expect("a pipe"));
        assert_eq!(ch.counts(JOIN_FULL).holder(3, &g(6)), Some(Handle(2)));
        assert_eq!(ch.counts(JOIN_SENDONLY).holder(3, &g(7)), Some(Handle(3)));
        assert_eq!(ch.counts(JOIN_FULL).holder(3, &g(8)), Some(Handle(4)));
        let o = outcomes(&mut ch);
        for m in [6, 7] {
            let lost = Outcome::Lost { ifindex: 3, mgid: g(m), step: "cred-change", errno: libc::EACCES };
            assert!(o.contains(&lost), "{o:?}");
        }
        assert!(o.contains(&Outcome::Replaced { held: 2, rejoined: 2, errno: 0 }), "{o:?}");
        // Another change: a leave meets EACCES on the new fd.
        fake::with(|f| f.eacces = Some(1));
        let left = ch.counts(JOIN_FULL).detach(key(1), &g(6)).expect("alloc").into_iter().collect::<Vec<_>>();
        assert_eq!(left, vec![(3, Handle(2))]);
        assert_eq!(ch.leave(Handle(2)), Ok(()));
        assert_eq!(fake::with(|f| f.pipes.len()), 3);
        assert_eq!(ch.counts(JOIN_SENDONLY).holder(3, &g(7)), Some(Handle(5)));
        assert_eq!(ch.counts(JOIN_FULL).holder(3, &g(8)), Some(Handle(6)));
        assert_eq!(fake::with(|f| f.sent(CMD_JOIN_MCAST)), vec![0, 1, 2, 3, 4, 5, 6]);
    }
}

/// The logic tests' stand-in for the kernel's rdma_cm: a LOGIC TEST OF THE
/// LIBRARY, NOT OF THE KERNEL. Each "open" is a pipe whose read end is the
/// channel's fd (ppoll waits on it for real) and whose write end the test
/// queues 336-byte events into, recorded or synthetic (`-ENETRESET` to
/// every member, late refusals, ADDR_CHANGE, DEVICE_REMOVAL: what rxe
/// cannot produce). Commands are answered as ucma.c answers them: the
/// response written to the address inside the command, IDs and handles
/// numbered from 0 in two tables (so they collide, as `ctx_table` and
/// `multicast_table` do), GET_EVENT one queued event or EAGAIN.
#[cfg(test)]
pub(super) mod fake {
    use super::*;
    use std::cell::RefCell;

    #[derive(Default)]
    pub struct Fake {
        /// Each open's pipe: (read end: the channel's fd, write end).
        pub pipes: Vec<(c_int, c_int)>,
        pub next_id: u32,
        pub next_handle: u32,
        /// Answer each JOIN_MCAST at once with MULTICAST_JOIN, status 0
        /// (RoCE's way).
        pub answer: bool,
        /// Every command taken: (command, the ID or handle it names or
        /// was answered, the fd).
        pub log: Vec<(u32, u32, c_int)>,
        /// Answer each JOIN_MCAST at once with MULTICAST_ERROR and this
        /// status instead (the SA's refusal).
        pub refuse: Option<c_int>,
        /// Commands on the fd of this open (an index of `pipes`: a new fd
        /// may take the old one's number) answer EACCES (ucma.c
        /// `ucma_write` after a credential change).
        pub eacces: Option<usize>,
        /// At the next JOIN_MCAST the fd's number is taken over by the
        /// program's own pipe (closed and reopened at the same number),
        /// with one event of the program's queued: (read, write) ends.
        pub replace_at_join: bool,
        pub program: Option<(c_int, c_int)>,
    }

    /// Each thread's stand-in: its own, or one shared with another thread
    /// ([`share`], [`adopt`]: two calls of one process on one fd).
    type Shared = std::sync::Arc<std::sync::Mutex<Fake>>;

    thread_local! {
        static FAKE: RefCell<Option<Shared>> = const { RefCell::new(None) };
    }

    /// Installs a stand-in on this thread (each test its own).
    pub fn install(f: Fake) {
        FAKE.with(|x| *x.borrow_mut() = Some(std::sync::Arc::new(std::sync::Mutex::new(f))));
    }

    /// This thread's stand-in, for another thread to [`adopt`].
    pub fn share() -> Shared {
        FAKE.with(|x| x.borrow().clone().expect("a stand-in installed"))
    }

    pub fn adopt(s: Shared) {
        FAKE.with(|x| *x.borrow_mut() = Some(s));
    }

    fn get() -> Option<Shared> {
        FAKE.with(|x| x.borrow().clone())
    }

    pub fn with<R>(f: impl FnOnce(&mut Fake) -> R) -> R {
        let s = get().expect("a stand-in installed");
        let mut g = s.lock().expect("the stand-in");
        f(&mut g)
    }

    pub fn send(fd: c_int, b: &[u8]) -> Option<Result<(), c_int>> {
        get().map(|s| s.lock().expect("the stand-in").command(fd, b))
    }

    pub fn open() -> Option<Result<c_int, c_int>> {
        get().map(|s| Ok(s.lock().expect("the stand-in").open()))
    }

    /// A 336-byte event (`struct rdma_ucm_event_resp`): `id`, type,
    /// status, the Q_Key RoCE gives.
    pub fn event(ty: u32, id: u32, status: c_int) -> [u8; cm::EVENT_RESP_LEN] {
        let mut b = [0u8; cm::EVENT_RESP_LEN];
        b[8..12].copy_from_slice(&id.to_ne_bytes());
        b[12..16].copy_from_slice(&ty.to_ne_bytes());
        b[16..20].copy_from_slice(&status.to_ne_bytes());
        b[24..28].copy_from_slice(&0x0123_4567u32.to_ne_bytes());
        b
    }

    fn u32_at(b: &[u8], at: usize) -> u32 {
        u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
    }
    fn u64_at(b: &[u8], at: usize) -> u64 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[at..at + 8]);
        u64::from_ne_bytes(w)
    }

    /// Writes `v` to the response address `resp` of a command.
    fn respond(resp: u64, v: &[u8]) {
        // SAFETY: `resp` is the address of the engine's response buffer,
        // on its stack for the whole command (cm::send's contract), at
        // least `v.len()` bytes (the command's `out`).
        unsafe { core::ptr::copy_nonoverlapping(v.as_ptr(), resp as *mut u8, v.len()) };
    }

    impl Fake {
        pub fn open(&mut self) -> c_int {
            let mut p = [0 as c_int; 2];
            // SAFETY: p has room for the two fds.
            assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) }, 0);
            self.pipes.push((p[0], p[1]));
            p[0]
        }

        /// Queues `ev` on the pipe whose read end is `fd`.
        pub fn queue(&self, fd: c_int, ev: &[u8; cm::EVENT_RESP_LEN]) {
            let w = self.pipes.iter().rev().find(|p| p.0 == fd).expect("a stand-in fd").1;
            assert_eq!(crate::sys::write(w, ev), Ok(ev.len()));
        }

        /// Queues `ev` on the newest stand-in fd.
        pub fn queue_last(&self, ev: &[u8; cm::EVENT_RESP_LEN]) {
            let fd = self.pipes.last().expect("opened").0;
            self.queue(fd, ev);
        }

        pub fn sent(&self, cmd: u32) -> Vec<u32> {
            self.log.iter().filter(|l| l.0 == cmd).map(|l| l.1).collect()
        }

        fn command(&mut self, fd: c_int, b: &[u8]) -> Result<(), c_int> {
            let cmd = u32_at(b, 0);
            let s = &b[8..];
            if self.eacces.is_some() && self.eacces == self.pipes.iter().rposition(|p| p.0 == fd) {
                self.log.push((cmd, u32::MAX, fd));
                return Err(libc::EACCES);
            }
            let named = match cmd {
                cm::CMD_CREATE_ID => {
                    let id = self.next_id;
                    self.next_id += 1;
                    respond(u64_at(s, 8), &id.to_ne_bytes());
                    id
                }
                cm::CMD_BIND => u32_at(s, 0),
                cm::CMD_JOIN_MCAST => {
                    let h = self.next_handle;
                    self.next_handle += 1;
                    respond(u64_at(s, 0), &h.to_ne_bytes());
                    if let Some(st) = self.refuse {
                        self.queue(fd, &event(cm::EVENT_MULTICAST_ERROR, h, st));
                    } else if self.answer {
                        self.queue(fd, &event(cm::EVENT_MULTICAST_JOIN, h, 0));
                    }
                    if core::mem::take(&mut self.replace_at_join) {
                        let mut p = [0 as c_int; 2];
                        // SAFETY: p has room for the two fds.
                        assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) }, 0);
                        assert_eq!(crate::sys::write(p[1], &event(cm::EVENT_MULTICAST_JOIN, h, 0)), Ok(cm::EVENT_RESP_LEN));
                        // SAFETY: the program closes our fd and its new one takes the number.
                        assert_eq!(unsafe { libc::dup2(p[0], fd) }, fd);
                        crate::sys::close(p[0]);
                        self.program = Some((fd, p[1]));
                    }
                    h
                }
                cm::CMD_LEAVE_MCAST | cm::CMD_DESTROY_ID => {
                    respond(u64_at(s, 0), &0u32.to_ne_bytes());
                    u32_at(s, 8)
                }
                cm::CMD_GET_EVENT => {
                    let mut ev = [0u8; cm::EVENT_RESP_LEN];
                    match crate::sys::read(fd, &mut ev) {
                        Ok(n) if n == ev.len() => {}
                        Ok(_) => return Err(libc::EAGAIN),
                        Err(e) => return Err(e),
                    }
                    respond(u64_at(s, 0), &ev);
                    u32_at(&ev, 8)
                }
                _ => return Err(libc::EINVAL),
            };
            self.log.push((cmd, named, fd));
            Ok(())
        }
    }
}
