//! The IP-level join counts, without syscalls: which (QP, MGID) pairs are
//! attached through rsverbs, on which netdevs, and how many of them use
//! each (netdev, group). The caller joins a group on a netdev when
//! [`Counts::attach`] names it and leaves it when [`Counts::detach`] does.
//!
//! One attachment per distinct (QP, MGID), whatever the LID: uverbs keeps
//! one entry per (MGID, LID) and a duplicate attach is a no-op (kernel
//! uverbs_cmd.c `ib_uverbs_attach_mcast`), and on RoCE the LID plays no
//! part: `ib_attach_mcast` checks it only on InfiniBand (verbs.c), rxe
//! ignores it and a detach with any LID takes the QP out of the group
//! (rxe_mcast.c `rxe_detach_mcast`). So a second attach of a pair adds
//! nothing, and the first successful detach of the pair ends it.
#![forbid(unsafe_code)]

use crate::registry::QpKey;

use crate::mgid::Mgid;
use alloc::vec::Vec;
use core::marker::PhantomData;

/// An allocation failed: the call's counting was skipped.
#[derive(Debug, PartialEq, Eq)]
pub struct NoMemory;

struct Member {
    qp: QpKey,
    /// The QP's number: a QP at the same (context address, handle) with
    /// another number is a new QP of a new context (the old one closed with
    /// groups attached), not this one ([`Counts::forget_stale`]).
    qpn: u32,
    mgid: Mgid,
    /// The netdevs this attachment counts on (fixed at attach time, so a
    /// detach leaves exactly what the attach counted).
    ifindexes: Vec<u32>,
}

struct Group {
    ifindex: u32,
    mgid: Mgid,
    users: u32,
    /// What holds the membership (the socket), packed ([`Holder`]); None
    /// while not joined (the join failed, has not been made yet, or its
    /// socket is gone).
    held: Option<Packed>,
}

/// A holder's bits as [`Counts`] keeps them: opaque, so that the counting
/// is compiled once and not once per holder type (two copies of `attach`
/// and `detach`, about 1.4 KB of s390x's text at 592318d:
/// docs/building.md, the size against libibverbs).
pub type Packed = [u64; 2];

/// What holds a (netdev, group) membership: a socket, an rdma_cm handle.
pub trait Holder: Copy {
    fn pack(self) -> Packed;
    /// The holder [`Holder::pack`] gave `p`.
    fn unpack(p: Packed) -> Self;
}

/// What to leave ([`Counts::detach`], [`Counts::forget_stale`]): each item
/// with its holder, unpacked as it is taken.
pub struct Left<T, H> {
    items: Vec<(T, Packed)>,
    _holder: PhantomData<H>,
}

#[cfg(test)]
impl<T, H: Holder> Left<T, H> {
    fn into_vec(self) -> Vec<(T, H)> {
        self.into_iter().collect()
    }
}

impl<T, H: Holder> IntoIterator for Left<T, H> {
    type Item = (T, H);
    type IntoIter = core::iter::Map<alloc::vec::IntoIter<(T, Packed)>, fn((T, Packed)) -> (T, H)>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.into_iter().map(|(t, p)| (t, H::unpack(p)))
    }
}

/// Every attachment and (netdev, group) count of the process, held by
/// `H`s.
pub struct Counts<H> {
    raw: Raw,
    _holder: PhantomData<H>,
}

impl<H: Holder> Counts<H> {
    pub const fn new() -> Self {
        Counts { raw: Raw { members: Vec::new(), groups: Vec::new() }, _holder: PhantomData }
    }

    /// Whether (qp, mgid) is attached already.
    pub fn has(&self, qp: QpKey, mgid: &Mgid) -> bool {
        self.raw.has(qp, mgid)
    }

    /// A successful attach of (qp, mgid), counted on `ifindexes`. Returns the
    /// netdevs where the group is not joined yet (its first user, or an
    /// earlier join that failed): the caller joins there and reports each
    /// with [`Counts::joined`]. A duplicate attach returns nothing.
    ///
    /// Every allocation is made first, and fallibly: when one fails, the
    /// attach is not counted and nothing is joined (no abort; the caller
    /// says so once on stderr), as if the feature were off for this call.
    pub fn attach(&mut self, qp: QpKey, qpn: u32, mgid: &Mgid, ifindexes: &[u32]) -> Result<Vec<u32>, NoMemory> {
        self.raw.attach(qp, qpn, mgid, ifindexes)
    }

    /// Ends the attachments of a QP that is gone: those counted for `qp`
    /// (its context's address and handle) under another QP number than
    /// `qpn`. A context closed with groups still attached (failover after
    /// `IBV_EVENT_DEVICE_FATAL`) and a new one at the same address whose QP
    /// has the same handle would otherwise be taken for the old QP: its
    /// attach for a duplicate, never joined (the registry's rule,
    /// `registry::forget_stale`). Returns what to leave, as [`Counts::detach`]
    /// does, with each one's group.
    pub fn forget_stale(&mut self, qp: QpKey, qpn: u32) -> Result<Left<(u32, Mgid), H>, NoMemory> {
        self.raw.forget_stale(qp, qpn).map(|items| Left { items, _holder: PhantomData })
    }

    /// The group is now joined on `ifindex`, held by `h`.
    pub fn joined(&mut self, ifindex: u32, mgid: &Mgid, h: H) {
        self.raw.joined(ifindex, mgid, h.pack());
    }

    /// A successful detach of (qp, mgid). Returns the (netdev, holder) pairs
    /// whose last user this was and that are joined: the caller leaves them.
    /// A detach of a pair not attached through rsverbs (or attached before
    /// a fork, in the child) returns nothing.
    /// When the list cannot be allocated, the pair stays counted and
    /// nothing is left (Err: a later detach cannot come, the kernel has
    /// none; the membership stays until unload closes its socket).
    pub fn detach(&mut self, qp: QpKey, mgid: &Mgid) -> Result<Left<u32, H>, NoMemory> {
        self.raw.detach(qp, mgid).map(|items| Left { items, _holder: PhantomData })
    }

    /// Forgets the memberships whose holder is `gone` (a socket the program
    /// closed: they ended with it): the next attach of the group joins again.
    pub fn forget_held(&mut self, gone: impl Fn(&H) -> bool) {
        self.raw.forget_held(&|p| gone(&H::unpack(p)));
    }

    /// Whether (ifindex, mgid) is counted (used) and not held: its join
    /// failed or was lost; the next call that touches it joins again.
    pub fn unheld(&self, ifindex: u32, mgid: &Mgid) -> bool {
        self.raw.groups.iter().any(|g| g.ifindex == ifindex && g.mgid == *mgid && g.held.is_none())
    }

    /// Whether `mgid` is counted and not held on some netdev.
    pub fn any_unheld(&self, mgid: &Mgid) -> bool {
        self.raw.groups.iter().any(|g| g.mgid == *mgid && g.held.is_none())
    }

    /// The holder of (ifindex, mgid), if it is joined.
    #[cfg(test)]
    pub fn holder(&self, ifindex: u32, mgid: &Mgid) -> Option<H> {
        self.raw.groups.iter().find(|g| g.ifindex == ifindex && g.mgid == *mgid).and_then(|g| g.held).map(H::unpack)
    }

    /// The users of (ifindex, mgid).
    #[cfg(test)]
    pub fn users(&self, ifindex: u32, mgid: &Mgid) -> u32 {
        self.raw.groups.iter().find(|g| g.ifindex == ifindex && g.mgid == *mgid).map_or(0, |g| g.users)
    }
}

/// A stale attachment's (netdev, group) to leave, and its holder.
type Stale = ((u32, Mgid), Packed);

/// [`Counts`]' state and work, whatever holds the memberships.
struct Raw {
    members: Vec<Member>,
    groups: Vec<Group>,
}

impl Raw {
    fn has(&self, qp: QpKey, mgid: &Mgid) -> bool {
        self.members.iter().any(|m| m.qp == qp && m.mgid == *mgid)
    }

    fn attach(&mut self, qp: QpKey, qpn: u32, mgid: &Mgid, ifindexes: &[u32]) -> Result<Vec<u32>, NoMemory> {
        if self.has(qp, mgid) {
            return Ok(Vec::new());
        }
        let n = ifindexes.len();
        let mut to_join = Vec::new();
        let mut mine = Vec::new();
        if to_join.try_reserve_exact(n).is_err()
            || mine.try_reserve_exact(n).is_err()
            || self.groups.try_reserve(n).is_err()
            || self.members.try_reserve(1).is_err()
        {
            return Err(NoMemory);
        }
        for &i in ifindexes {
            if mine.contains(&i) {
                continue;
            }
            mine.push(i);
            match self.groups.iter_mut().find(|g| g.ifindex == i && g.mgid == *mgid) {
                Some(g) => {
                    g.users += 1;
                    if g.held.is_none() {
                        to_join.push(i);
                    }
                }
                None => {
                    self.groups.push(Group { ifindex: i, mgid: *mgid, users: 1, held: None });
                    to_join.push(i);
                }
            }
        }
        self.members.push(Member { qp, qpn, mgid: *mgid, ifindexes: mine });
        Ok(to_join)
    }

    fn forget_stale(&mut self, qp: QpKey, qpn: u32) -> Result<Vec<Stale>, NoMemory> {
        let mut to_leave = Vec::new();
        while let Some(m) = self.members.iter().find(|m| m.qp == qp && m.qpn != qpn) {
            let mgid = m.mgid;
            let left = self.detach(qp, &mgid)?;
            to_leave.try_reserve(left.len()).map_err(|_| NoMemory)?;
            to_leave.extend(left.into_iter().map(|(i, h)| ((i, mgid), h)));
        }
        Ok(to_leave)
    }

    fn joined(&mut self, ifindex: u32, mgid: &Mgid, h: Packed) {
        if let Some(g) = self.groups.iter_mut().find(|g| g.ifindex == ifindex && g.mgid == *mgid) {
            g.held = Some(h);
        }
    }

    fn detach(&mut self, qp: QpKey, mgid: &Mgid) -> Result<Vec<(u32, Packed)>, NoMemory> {
        let Some(at) = self.members.iter().position(|m| m.qp == qp && m.mgid == *mgid) else {
            return Ok(Vec::new());
        };
        let mut to_leave = Vec::new();
        to_leave.try_reserve_exact(self.members[at].ifindexes.len()).map_err(|_| NoMemory)?;
        let m = self.members.swap_remove(at);
        for i in m.ifindexes {
            let Some(gi) = self.groups.iter().position(|g| g.ifindex == i && g.mgid == *mgid) else { continue };
            let g = &mut self.groups[gi];
            g.users -= 1;
            if g.users == 0 {
                let g = self.groups.swap_remove(gi);
                if let Some(h) = g.held {
                    to_leave.push((g.ifindex, h));
                }
            }
        }
        Ok(to_leave)
    }

    fn forget_held(&mut self, gone: &dyn Fn(Packed) -> bool) {
        for g in &mut self.groups {
            if g.held.is_some_and(gone) {
                g.held = None;
            }
        }
    }

}

/// The join state of an explicit membership (member.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A full member: receives and sends.
    Full,
    /// A send-only full member: sends, receives nothing.
    SendOnly,
}

/// What holds an explicit membership's joins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    /// Socket joins on the port's netdevs, counted in the IP join's
    /// [`Counts`] under the membership's key.
    Sockets,
    /// rdma_cm joins, counted in the fabric join's [`Counts`] (the full or
    /// the send-only one) under its key.
    Fabric,
    /// A send-only member on RoCE: nothing to send, nothing held.
    Nothing,
}

/// A device's name (`ibv_device.name`, at most `IBV_SYSFS_NAME_MAX` 64
/// bytes with its NUL), copied: a membership outlives the call's context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevName {
    len: u8,
    bytes: [u8; 64],
}

impl DevName {
    pub fn of(name: &str) -> Self {
        let mut bytes = [0u8; 64];
        let n = name.len().min(64);
        bytes[..n].copy_from_slice(&name.as_bytes()[..n]);
        DevName { len: n as u8, bytes }
    }
}

/// One explicit membership: whose, how many joins it counts, what holds
/// it, and its key in the [`Counts`] (`ctx` 0, which no context's address
/// is: never a QP's).
struct Entry {
    dev: DevName,
    port: u32,
    mgid: Mgid,
    kind: Kind,
    users: u32,
    key: QpKey,
    how: How,
}

/// What a leave of an explicit membership comes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leave {
    /// Counted down; other joins of it remain.
    Fewer,
    /// Its last join: the caller ends what `key` holds (`how`), then
    /// [`Members::remove`]s it.
    Last(QpKey, How),
}

/// The process's explicit memberships, one per (device, port, group,
/// kind), each with its count of joins.
pub struct Members {
    entries: Vec<Entry>,
    serial: u32,
}

impl Members {
    pub const fn new() -> Self {
        Members { entries: Vec::new(), serial: 0 }
    }

    fn at(&self, dev: &DevName, port: u32, mgid: &Mgid, kind: Kind) -> Option<usize> {
        self.entries.iter().position(|e| e.dev == *dev && e.port == port && e.mgid == *mgid && e.kind == kind)
    }

    /// One more join of a membership held already: Some(true) when it was
    /// counted, Some(false) when its count is full (u32::MAX joins); None
    /// when it is not held.
    pub fn join_again(&mut self, dev: &DevName, port: u32, mgid: &Mgid, kind: Kind) -> Option<bool> {
        let i = self.at(dev, port, mgid, kind)?;
        let e = &mut self.entries[i];
        Some(e.users.checked_add(1).map(|u| e.users = u).is_some())
    }

    /// Room for one more membership, and a key no membership holds.
    pub fn prepare(&mut self) -> Result<QpKey, NoMemory> {
        self.entries.try_reserve(1).map_err(|_| NoMemory)?;
        loop {
            self.serial = self.serial.wrapping_add(1);
            let key = QpKey { ctx: 0, handle: self.serial };
            if !self.entries.iter().any(|e| e.key == key) {
                return Ok(key);
            }
        }
    }

    /// A new membership, its first join made; [`Members::prepare`] made
    /// room for it and gave `key`.
    pub fn add(&mut self, dev: DevName, port: u32, mgid: Mgid, kind: Kind, key: QpKey, how: How) {
        self.entries.push(Entry { dev, port, mgid, kind, users: 1, key, how });
    }

    /// How membership (dev, port, mgid, kind) is held, if it is.
    pub fn how(&self, dev: &DevName, port: u32, mgid: &Mgid, kind: Kind) -> Option<How> {
        self.at(dev, port, mgid, kind).map(|i| self.entries[i].how)
    }

    /// One leave; None when no such membership is held.
    pub fn leave(&mut self, dev: &DevName, port: u32, mgid: &Mgid, kind: Kind) -> Option<Leave> {
        let i = self.at(dev, port, mgid, kind)?;
        let e = &mut self.entries[i];
        if e.users > 1 {
            e.users -= 1;
            return Some(Leave::Fewer);
        }
        Some(Leave::Last(e.key, e.how))
    }

    /// Forgets the membership of `key` (its last leave is done).
    pub fn remove(&mut self, key: QpKey) {
        self.entries.retain(|e| e.key != key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Holder for i32 {
        fn pack(self) -> Packed {
            [self as u64, 0]
        }
        fn unpack(p: Packed) -> Self {
            p[0] as i32
        }
    }

    const QP1: QpKey = QpKey { ctx: 0x1000, handle: 1 };
    const QP2: QpKey = QpKey { ctx: 0x1000, handle: 2 };
    const QP3: QpKey = QpKey { ctx: 0x2000, handle: 1 };

    fn g(last: u8) -> Mgid {
        let mut m = [0u8; 16];
        m[10] = 0xff;
        m[11] = 0xff;
        m[12] = 239;
        m[15] = last;
        Mgid(m)
    }

    #[test]
    fn explicit_memberships_are_counted_per_device_port_group_and_kind() {
        let mut m = Members::new();
        let (d0, d1) = (DevName::of("rxe0"), DevName::of("rxe1"));
        assert_eq!(m.join_again(&d0, 1, &g(1), Kind::Full), None);
        assert_eq!(m.leave(&d0, 1, &g(1), Kind::Full), None);
        let k1 = m.prepare().expect("room");
        m.add(d0, 1, g(1), Kind::Full, k1, How::Sockets);
        let k2 = m.prepare().expect("room");
        assert_ne!(k1, k2);
        assert_eq!(k1.ctx, 0, "no QP's key");
        m.add(d0, 1, g(1), Kind::SendOnly, k2, How::Nothing);
        // Another device, port, group or kind is another membership.
        assert_eq!(m.join_again(&d1, 1, &g(1), Kind::Full), None);
        assert_eq!(m.join_again(&d0, 2, &g(1), Kind::Full), None);
        assert_eq!(m.join_again(&d0, 1, &g(2), Kind::Full), None);
        assert_eq!(m.join_again(&d0, 1, &g(1), Kind::Full), Some(true));
        assert_eq!(m.leave(&d0, 1, &g(1), Kind::Full), Some(Leave::Fewer));
        assert_eq!(m.leave(&d0, 1, &g(1), Kind::Full), Some(Leave::Last(k1, How::Sockets)));
        // Not removed until asked: a leave that could not be made is asked again.
        assert_eq!(m.leave(&d0, 1, &g(1), Kind::Full), Some(Leave::Last(k1, How::Sockets)));
        m.remove(k1);
        assert_eq!(m.leave(&d0, 1, &g(1), Kind::Full), None);
        assert_eq!(m.leave(&d0, 1, &g(1), Kind::SendOnly), Some(Leave::Last(k2, How::Nothing)));
        // A long name is cut at IBV_SYSFS_NAME_MAX, never a panic.
        assert_eq!(DevName::of(&"x".repeat(100)), DevName::of(&"x".repeat(64)));
    }

    #[test]
    fn a_membership_whose_socket_is_gone_is_joined_again() {
        let mut c = Counts::new();
        assert_eq!(c.attach(QP1, QP1.handle, &g(9), &[3]).expect("alloc"), vec![3]);
        c.joined(3, &g(9), 10);
        assert_eq!(c.attach(QP2, QP2.handle, &g(9), &[3]).expect("alloc"), vec![]);
        c.forget_held(|&fd| fd == 10);
        assert_eq!(c.attach(QP3, QP3.handle, &g(9), &[3]).expect("alloc"), vec![3]);
        c.joined(3, &g(9), 11);
        assert_eq!(c.detach(QP1, &g(9)).expect("alloc").into_vec(), vec![]);
        assert_eq!(c.detach(QP2, &g(9)).expect("alloc").into_vec(), vec![]);
        assert_eq!(c.detach(QP3, &g(9)).expect("alloc").into_vec(), vec![(3, 11)]);
    }

    #[test]
    fn first_attach_joins_last_detach_leaves() {
        let mut c = Counts::new();
        assert_eq!(c.attach(QP1, QP1.handle, &g(1), &[3]).expect("alloc"), vec![3]);
        c.joined(3, &g(1), 10);
        assert_eq!(c.attach(QP2, QP2.handle, &g(1), &[3]).expect("alloc"), Vec::<u32>::new());
        assert_eq!(c.attach(QP3, QP3.handle, &g(1), &[3]).expect("alloc"), Vec::<u32>::new());
        assert_eq!(c.users(3, &g(1)), 3);
        assert_eq!(c.detach(QP2, &g(1)).expect("alloc").into_vec(), vec![]);
        assert_eq!(c.detach(QP1, &g(1)).expect("alloc").into_vec(), vec![]);
        assert_eq!(c.detach(QP3, &g(1)).expect("alloc").into_vec(), vec![(3, 10)]);
        assert_eq!(c.users(3, &g(1)), 0);
    }

    #[test]
    fn duplicate_attach_then_one_detach_leaves() {
        let mut c = Counts::new();
        assert_eq!(c.attach(QP1, QP1.handle, &g(2), &[3]).expect("alloc"), vec![3]);
        c.joined(3, &g(2), 10);
        assert_eq!(c.attach(QP1, QP1.handle, &g(2), &[3]).expect("alloc"), Vec::<u32>::new());
        assert_eq!(c.users(3, &g(2)), 1);
        assert_eq!(c.detach(QP1, &g(2)).expect("alloc").into_vec(), vec![(3, 10)]);
        // A second detach (the kernel answers EINVAL, so it never comes
        // here; and if it did) leaves nothing twice.
        assert_eq!(c.detach(QP1, &g(2)).expect("alloc").into_vec(), vec![]);
    }

    #[test]
    fn groups_and_netdevs_are_apart() {
        let mut c = Counts::new();
        assert_eq!(c.attach(QP1, QP1.handle, &g(1), &[3, 7, 3]).expect("alloc"), vec![3, 7]);
        c.joined(3, &g(1), 10);
        c.joined(7, &g(1), 10);
        assert_eq!(c.attach(QP2, QP2.handle, &g(2), &[3]).expect("alloc"), vec![3]);
        c.joined(3, &g(2), 11);
        assert_eq!(c.attach(QP2, QP2.handle, &g(1), &[7]).expect("alloc"), Vec::<u32>::new());
        assert_eq!(c.detach(QP1, &g(1)).expect("alloc").into_vec(), vec![(3, 10)]);
        assert_eq!(c.detach(QP2, &g(1)).expect("alloc").into_vec(), vec![(7, 10)]);
        assert_eq!(c.detach(QP2, &g(2)).expect("alloc").into_vec(), vec![(3, 11)]);
    }

    #[test]
    fn a_failed_join_is_retried_and_never_left() {
        let mut c = Counts::new();
        assert_eq!(c.attach(QP1, QP1.handle, &g(4), &[3]).expect("alloc"), vec![3]);
        // no joined(): the join failed
        assert_eq!(c.attach(QP2, QP2.handle, &g(4), &[3]).expect("alloc"), vec![3]);
        assert_eq!(c.detach(QP1, &g(4)).expect("alloc").into_vec(), vec![]);
        assert_eq!(c.detach(QP2, &g(4)).expect("alloc").into_vec(), vec![]);
        assert_eq!(c.attach(QP1, QP1.handle, &g(4), &[3]).expect("alloc"), vec![3]);
        c.joined(3, &g(4), 12);
        assert_eq!(c.detach(QP1, &g(4)).expect("alloc").into_vec(), vec![(3, 12)]);
    }

    /// A new context at the address of one closed with a
    /// group attached, whose QP has the same handle but another number,
    /// is joined again (before: taken for a duplicate, never joined).
    #[test]
    fn a_new_qp_at_an_old_qps_key_is_joined() {
        let mut c = Counts::new();
        assert_eq!(c.attach(QP1, 0x11, &g(6), &[3]).expect("alloc"), vec![3]);
        c.joined(3, &g(6), 10);
        // The old context is gone; the new QP 0x12 at QP1's key attaches.
        assert_eq!(c.forget_stale(QP1, 0x12).expect("alloc").into_vec(), vec![((3, g(6)), 10)]);
        assert_eq!(c.attach(QP1, 0x12, &g(6), &[4]).expect("alloc"), vec![4]);
        assert_eq!(c.forget_stale(QP1, 0x12).expect("alloc").into_vec(), vec![]);
        c.joined(4, &g(6), 10);
        assert_eq!(c.detach(QP1, &g(6)).expect("alloc").into_vec(), vec![(4, 10)]);
    }

    #[test]
    fn unknown_detach_and_no_netdev() {
        let mut c: Counts<i32> = Counts::new();
        assert_eq!(c.detach(QP1, &g(5)).expect("alloc").into_vec(), vec![]);
        assert_eq!(c.attach(QP1, QP1.handle, &g(5), &[]).expect("alloc"), Vec::<u32>::new());
        assert!(c.has(QP1, &g(5)));
        assert_eq!(c.detach(QP1, &g(5)).expect("alloc").into_vec(), vec![]);
        assert!(!c.has(QP1, &g(5)));
    }
}
