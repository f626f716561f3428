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
//! attach or detach and at exit. Every event is a trace line; a failed join
//! is also a hint (`fabric-join-failed`), and the group is joined again at
//! its next attach.
//!
//! The fd is known by identity, never by number (the program may close it
//! and open its own rdma_cm fd at the same number, as librdmacm does): its
//! open file description carries a mark, `F_SETSIG` [`MARK`], that no
//! rdma_cm fd of the program's has (rdma_cm has no `fasync`, so no signal
//! is ever sent: ucma.c `ucma_fops`), and the device number of the
//! `rdma_cm` node. An fd that lost either is forgotten, never written to
//! or closed; the kernel ended our memberships with it.

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

/// A join whose event has not been read yet, with what the attach that
/// asked for it knew: its LID and its QP's Q_Key, for the hints.
struct Pending {
    handle: u32,
    ifindex: u32,
    mgid: Mgid,
    asked: Asked,
}

/// One join to make: the netdev, the address to bind there, the group's
/// address, its MGID, what the attach knew, the join state (`JOIN_FULL`
/// or `JOIN_SENDONLY`, ucma.c `ucma_process_join`) and how long to wait
/// for the answer.
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
    /// A later error event (`-ENETRESET` after a client re-register): the
    /// group was left and is joined again at its next attach.
    Lost { ifindex: u32, mgid: Mgid, errno: c_int },
}

/// The process's rdma_cm fd, its IDs, the joins not yet answered, and the
/// outcomes not yet reported.
pub struct Channel {
    fd: c_int,
    rdev: u64,
    ids: Vec<Bound>,
    pending: Vec<Pending>,
    /// Kept until [`Channel::report`]: the trace's lines are written after
    /// the engine's frames are gone, never beside its command buffers
    /// (docs/security.md, the stack budget). An outcome that cannot be
    /// kept (no memory) goes unreported.
    outcomes: Vec<Outcome>,
}

impl Channel {
    pub const fn new() -> Self {
        Channel { fd: -1, rdev: 0, ids: Vec::new(), pending: Vec::new(), outcomes: Vec::new() }
    }

    /// The errno of the failed answer to a join of `mgid` on `ifindex`
    /// among the outcomes not yet reported (an explicit join's result).
    pub fn refused(&self, ifindex: u32, mgid: &Mgid) -> Option<c_int> {
        self.outcomes.iter().find_map(|o| match *o {
            Outcome::Failed { ifindex: i, mgid: m, step: "event", errno } if i == ifindex && m == *mgid => Some(errno),
            _ => None,
        })
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

    /// Whether the fd is still rsverbs' (see the module's comment); false
    /// when there is none.
    fn is_ours(&self) -> bool {
        self.fd >= 0 && crate::sys::fcntl(self.fd, F_GETSIG, 0) == Ok(MARK) && rdev(self.fd) == Some(self.rdev)
    }

    /// The fd, opened on first use; a lost one is forgotten first (and the
    /// memberships it held with it: `counts` are told).
    fn fd(&mut self, counts: &mut Counts<Handle>) -> Result<c_int, c_int> {
        if self.fd >= 0 && !self.is_ours() {
            self.forget(counts);
        }
        // Checked once here for the whole join: its event reads (drain) trust it.
        if self.fd >= 0 {
            return Ok(self.fd);
        }
        let fd = crate::sys::open(c"/dev/infiniband/rdma_cm", libc::O_RDWR | libc::O_NONBLOCK, 0)?;
        let Some(r) = rdev(fd) else {
            crate::sys::close(fd);
            return Err(libc::ENODEV);
        };
        if let Err(e) = crate::sys::fcntl(fd, F_SETSIG, MARK) {
            crate::sys::close(fd);
            return Err(e);
        }
        self.fd = fd;
        self.rdev = r;
        Ok(fd)
    }

    /// Forgets the fd and everything on it, without a syscall on it.
    fn forget(&mut self, counts: &mut Counts<Handle>) {
        self.fd = -1;
        self.ids.clear();
        self.pending.clear();
        counts.forget_held(|_| true);
    }

    /// The ID bound to `ifindex`'s address `addr` for joins in the state
    /// `flags`, created and bound on first use (an ID whose bind failed is
    /// destroyed at once).
    #[inline(never)]
    fn id_for(&mut self, fd: c_int, ifindex: u32, addr: &Addr, flags: u16) -> Result<u32, (&'static str, c_int)> {
        if let Some(b) = self.ids.iter().find(|b| b.ifindex == ifindex && b.flags == flags) {
            return Ok(b.id);
        }
        if self.ids.try_reserve(1).is_err() {
            return Err(("create", libc::ENOMEM));
        }
        let mut resp = [0u8; cm::ID_RESP_LEN];
        cm::send(fd, &cm::create_id(u64::from(ifindex), resp.as_mut_ptr() as u64)).map_err(|e| ("create", e))?;
        let id = u32::from_ne_bytes(resp);
        if let Err(e) = cm::send(fd, &cm::bind(id, addr)) {
            destroy(fd, id);
            return Err(("bind", e));
        }
        self.ids.push(Bound { ifindex, flags, id });
        Ok(id)
    }

    /// Joins `w.mgid` on `w.ifindex` (bound to `w.bind`, joined as
    /// `w.group`, in the join state `w.flags`) and waits at most
    /// `w.wait_ms` for the answer. The events read meanwhile, this join's included, are kept
    /// for [`Channel::report`].
    #[inline(never)]
    pub fn join(&mut self, counts: &mut Counts<Handle>, w: &Want) -> Result<Handle, (&'static str, c_int)> {
        let (ifindex, bind, group, mgid, asked) = (w.ifindex, &w.bind, &w.group, &w.mgid, w.asked);
        let fd = self.fd(counts).map_err(|e| ("open", e))?;
        self.drain(counts, 0);
        if self.pending.try_reserve(1).is_err() {
            return Err(("join", libc::ENOMEM));
        }
        let id = self.id_for(fd, ifindex, bind, w.flags)?;
        let mut resp = [0u8; cm::ID_RESP_LEN];
        cm::send(fd, &cm::join(resp.as_mut_ptr() as u64, u64::from(ifindex), id, group, w.flags))
            .map_err(|e| ("join", e))?;
        let handle = u32::from_ne_bytes(resp);
        self.pending.push(Pending { handle, ifindex, mgid: *mgid, asked });
        let t0 = crate::os::monotonic_us();
        while self.pending.iter().any(|p| p.handle == handle) {
            let spent = (crate::os::monotonic_us().saturating_sub(t0) / 1000) as u32;
            if spent >= w.wait_ms || !crate::sys::readable_within(fd, w.wait_ms - spent) {
                break;
            }
            self.drain(counts, handle);
        }
        Ok(Handle(handle))
    }

    /// Leaves the membership `h` holds (the kernel's answer; EINVAL or
    /// ENOENT when the handle is not this fd's: ucma.c
    /// `ucma_leave_multicast` checks the owner, so nothing of another
    /// file's is ever left).
    #[inline(never)]
    pub fn leave(&mut self, counts: &mut Counts<Handle>, h: Handle) -> Result<(), c_int> {
        if !self.is_ours() {
            self.forget(counts);
            return Err(libc::EBADF);
        }
        self.pending.retain(|p| p.handle != h.0);
        let mut resp = [0u8; cm::ID_RESP_LEN];
        let r = cm::send(self.fd, &cm::leave(resp.as_mut_ptr() as u64, h.0));
        self.drain(counts, 0);
        r
    }

    /// Reads every queued event (none blocks: the fd is O_NONBLOCK) and
    /// keeps its outcome; stops after the event of join `until` when it is
    /// not 0. The caller (join, leave) has just found the fd ours. Out of
    /// line: its 336-byte event is on the stack only here.
    #[inline(never)]
    fn drain(&mut self, counts: &mut Counts<Handle>, until: u32) {
        loop {
            let mut resp = [0u8; cm::EVENT_RESP_LEN];
            if cm::send(self.fd, &cm::get_event(resp.as_mut_ptr() as u64)).is_err() {
                return; // EAGAIN: none left
            }
            let e = Event::decode(&resp);
            self.on_event(counts, &e);
            if until != 0 && e.id == until {
                return;
            }
        }
    }

    fn on_event(&mut self, counts: &mut Counts<Handle>, e: &Event) {
        let pending = self.pending.iter().position(|p| p.handle == e.id);
        let (ifindex, mgid, asked) = match pending {
            Some(i) => {
                let p = self.pending.swap_remove(i);
                (p.ifindex, p.mgid, Some(p.asked))
            }
            None => match counts.held_by(|h| h.0 == e.id) {
                Some((i, m)) => (i, m, None),
                None => return, // a group left meanwhile
            },
        };
        if e.event == cm::EVENT_MULTICAST_JOIN && e.status == 0 {
            if let Some(asked) = asked {
                self.outcome(Outcome::Joined { ifindex, mgid, qkey: e.qkey, mlid: e.mlid, asked });
            }
            return;
        }
        // An error: the kernel's membership is gone or never was; free the
        // handle and let the group be joined again at its next attach.
        let mut resp = [0u8; cm::ID_RESP_LEN];
        let _ = cm::send(self.fd, &cm::leave(resp.as_mut_ptr() as u64, e.id));
        counts.forget_held(|h| h.0 == e.id);
        let errno = if e.status < 0 { -e.status } else { libc::EIO };
        self.outcome(if pending.is_some() {
            Outcome::Failed { ifindex, mgid, step: "event", errno }
        } else {
            Outcome::Lost { ifindex, mgid, errno }
        });
    }

    /// The atfork child: the fd is the parent's (its memberships too):
    /// closed if still ours, nothing left. No allocation or free.
    pub fn close_in_child(&mut self) {
        self.close_fd();
        core::mem::forget(core::mem::take(&mut self.ids));
        core::mem::forget(core::mem::take(&mut self.pending));
        core::mem::forget(core::mem::take(&mut self.outcomes));
    }

    /// At unload: closing the fd leaves every group (the kernel's
    /// `ucma_close`).
    pub fn close(&mut self) {
        self.close_fd();
        self.ids = Vec::new();
        self.pending = Vec::new();
        self.outcomes = Vec::new();
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

fn destroy(fd: c_int, id: u32) {
    let mut resp = [0u8; cm::ID_RESP_LEN];
    let _ = cm::send(fd, &cm::destroy_id(resp.as_mut_ptr() as u64, id));
}

/// The device number of the character device `fd` names.
fn rdev(fd: c_int) -> Option<u64> {
    // SAFETY: an all-zero stat is valid; fstat fills it or fails.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: st is a valid out-pointer.
    let ok = unsafe { libc::fstat(fd, &mut st) } == 0 && st.st_mode & libc::S_IFMT == libc::S_IFCHR;
    ok.then_some(st.st_rdev)
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
