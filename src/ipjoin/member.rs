//! Explicit membership (`rsverbs_mcast_join`, `rsverbs_mcast_leave`,
//! rsverbs_mcast_join(3), docs/fabric-join.md "Explicit membership"): a
//! process joins a group on a port as a full member or as a send-only
//! full member, without a QP and without attaching, and leaves it again.
//! Interposition never sees a sender (senders do not attach), and on
//! InfiniBand a sender must be a member too (perftest's send_bw.c joins
//! "the Send side port" though it never attaches; the SA routes a group's
//! packets only from members).
//!
//! What a join makes, by the port's link layer:
//! - InfiniBand: the fabric join through rdma_cm (cm.rs), in the join state
//!   asked (`JOIN_MCAST` `join_flags`, Linux 4.9 ab15c95a17b3): the kernel
//!   sends the SA JoinState 0x1 or 0x8 (cma.c `cma_join_ib_multicast`).
//! - RoCE, full member: the IP-level join on the port's netdevs, as
//!   `RSVERBS_MCAST_IPJOIN` makes it after an attach (sock.rs): IPv4 and
//!   IPv6 alike.
//! - RoCE, send-only: nothing on the wire. The kernel's own rdma_cm sends
//!   no IGMP report for a send-only member (cma.c `cma_iboe_join_multicast`,
//!   `if (!send_only) cma_igmp_send(...)`) and, since 2cc74e1ee31d (5.15 and
//!   the stable branches), no IGMP leave either (`destroy_mc`): a send-only
//!   leave that sent one ended a full member's subscription on the same
//!   host. The membership is only counted here, so its leave can never end
//!   anyone's.
//!   With `RSVERBS_MCAST_FABRICJOIN=roce` (the test bed's switch) an IPv4
//!   group on RoCE goes through rdma_cm as on InfiniBand, so that the
//!   kernel's send-only path runs where it can run.
//!
//! Memberships are the process's, counted per (device, port, group, join
//! state): each join needs one leave, the last leave ends it; a leave of
//! one not joined is EADDRNOTAVAIL (librdmacm's `rdma_leave_multicast`).
//! A full membership shares its (netdev, group) counts with the attaches'
//! joins, so neither ends the other's; a send-only one is counted apart
//! (a full attach after it must still make the full join). They end at the
//! last leave, at unload, or at exit (the kernel closes the sockets and the
//! rdma_cm fd); a forked child has none of its parent's. Everything runs
//! under the IP join's lock ([`super::exclusive`]); the counting itself is
//! [`super::counts::Members`], without syscalls.
#![forbid(unsafe_code)]

use super::counts::{DevName, How, Leave};
pub use super::counts::Kind;
use super::{EXPLICIT, State, cm, fabric_mode, fabric_note, note, note_fabric};
use crate::mgid::Mgid;
use crate::registry::QpKey;
use crate::view::{Context, Device};
use core::ffi::c_int;
use core::sync::atomic::Ordering::Relaxed;

/// How long an explicit join waits for rdma_cm's answer (RoCE answers at
/// once, InfiniBand after the SA): the caller asked for the membership and
/// gets its result, where an attach waits only [`cm::JOIN_WAIT_MS`]. An
/// answer later than this is read lazily, as an attach's is.
const EXPLICIT_WAIT_MS: u32 = 1000;

/// The port's link layer: Ok(true) for Ethernet (RoCE, iWARP), Ok(false)
/// for InfiniBand; EINVAL when the device has no such port (its sysfs
/// `ports/N` is absent: the kernel's own answer to a bad port is EINVAL,
/// device.c `rdma_is_port_valid`), any other failure its own errno (read
/// without allocating: a caller under memory pressure is never told its
/// port is wrong).
fn ethernet(dev: &Device, port: u32) -> Result<bool, c_int> {
    crate::port::port_link_layer(dev.sysfs(), port).map(|l| l == crate::port::LinkLayer::Ethernet)
}

/// Whether `mgid` names a group on a port of this link layer: on RoCE
/// ff00::/8 or ::ffff:224.0.0.0/4 (the kernel's `rdma_is_multicast_addr`);
/// on InfiniBand ff00::/8 only, the MGIDs an SA accepts (IBA 4.1.1: an MGID
/// starts with 0xFF; opensm refuses any other, and its refusal would come
/// back as the join's EINVAL after a round trip). RoCE's ::ffff:a.b.c.d
/// form of an IPv4 group is rdma_cm's ff12:4001:ffff::... there
/// (`Mgid::for_group`).
fn group_on(eth: bool, mgid: &Mgid) -> bool {
    mgid.is_multicast() && (eth || mgid.0[0] == 0xff)
}

/// `rsverbs_mcast_join`'s work: `Err(errno)` as the C function reports it.
pub fn join(ctx: &Context, port: u32, mgid: Mgid, kind: Kind) -> Result<(), c_int> {
    let Some(dev) = ctx.dev else { return Err(libc::EINVAL) };
    if !mgid.is_multicast() {
        return Err(libc::EINVAL);
    }
    let eth = ethernet(&dev, port)?;
    if !group_on(eth, &mgid) {
        return Err(libc::EINVAL);
    }
    EXPLICIT.store(true, Relaxed);
    // The rdma_cm join's answer is waited for between the two, with the
    // lock released (super::exclusive_then): counted at once, taken back
    // when it is refused.
    super::exclusive_then(
        |st| st.member_join(ctx, &dev, port, eth, mgid, kind),
        |st, token, r| st.member_join_done(&dev, port, mgid, kind, token, r),
    )
    .unwrap_or(Err(libc::EDEADLK))
}

/// `rsverbs_mcast_leave`'s work: the arguments checked as the join's.
pub fn leave(ctx: &Context, port: u32, mgid: Mgid, kind: Kind) -> Result<(), c_int> {
    let Some(dev) = ctx.dev else { return Err(libc::EINVAL) };
    if !mgid.is_multicast() {
        return Err(libc::EINVAL);
    }
    if !group_on(ethernet(&dev, port)?, &mgid) {
        return Err(libc::EINVAL);
    }
    super::exclusive(|st| st.member_leave(&dev, port, mgid, kind)).unwrap_or(Err(libc::EDEADLK))
}

impl State {
    #[inline(never)]
    fn member_join(&mut self, ctx: &Context, dev: &Device, port: u32, eth: bool, mgid: Mgid, kind: Kind) -> Result<(), c_int> {
        let name = DevName::of(dev.name());
        match self.members.join_again(&name, port, &mgid, kind) {
            Some(true) => self.member_join_again(&name, port, mgid, kind, || super::fabric_place(ctx, dev, port, &mgid, eth)),
            Some(false) => Err(libc::EOVERFLOW),
            None => self.member_first_join(ctx, dev, port, eth, mgid, kind),
        }
    }

    /// After the wait for the answers of the joins call `token` started
    /// (super::exclusive_then): the call's result, and its trace line.
    #[inline(never)]
    fn member_join_done(&mut self, dev: &Device, port: u32, mgid: Mgid, kind: Kind, token: u64, r: Result<(), c_int>) -> Result<(), c_int> {
        let r = self.member_settle(&DevName::of(dev.name()), port, mgid, kind, token, r);
        note_member("join", dev, port, &mgid, kind, r.err().unwrap_or(0));
        r
    }

    /// A join refused within its wait (its own answer, matched by handle)
    /// is the call's failure: each refusal a trace line, and the call's
    /// count taken back (its membership ended when it was the last: other
    /// calls may have joined or left it while this one waited).
    fn member_settle(&mut self, name: &DevName, port: u32, mgid: Mgid, kind: Kind, token: u64, r: Result<(), c_int>) -> Result<(), c_int> {
        let mut failed = 0;
        self.chan.take_waits(token, |(w, _), res| {
            if let Err(errno) = res {
                fabric_note(cm::Outcome::Failed { ifindex: w.ifindex, mgid: w.mgid, step: "event", errno });
                if failed == 0 {
                    failed = errno;
                }
            }
        });
        self.chan.report(fabric_note);
        if r.is_err() || failed == 0 {
            return r;
        }
        if let Some(Leave::Last(key, how)) = self.members.leave(name, port, &mgid, kind) {
            // Still counted when this fails (no memory), as a leave's.
            if self.end(how, key, kind, &mgid).is_ok() {
                self.members.remove(key);
            }
        }
        Err(failed)
    }

    /// A join of a membership held already (counted by the caller): its
    /// fabric join, lost since (an error event such as `-ENETRESET`, a late
    /// refusal, a DEVICE_REMOVAL, the fd gone: forgotten in the counts), is
    /// made again at `place` (computed only then), and its failure is the
    /// call's, the count taken back.
    #[inline(never)]
    fn member_join_again(
        &mut self,
        name: &DevName,
        port: u32,
        mgid: Mgid,
        kind: Kind,
        place: impl FnOnce() -> Option<Result<super::Place, u32>>,
    ) -> Result<(), c_int> {
        let flags = flags_of(kind);
        if self.members.how(name, port, &mgid, kind) != Some(How::Fabric) {
            return Ok(());
        }
        // A loss queued since the last call is read now (cm.rs refresh).
        self.chan.refresh();
        if !self.chan.counts(flags).any_unheld(&mgid) {
            return Ok(());
        }
        let Some(Ok((ifindex, bind, group))) = place() else { return Ok(()) };
        if !self.chan.counts(flags).unheld(ifindex, &mgid) {
            return Ok(());
        }
        let asked = cm::Asked { lid: None, qkey: None };
        let w = cm::Want { ifindex, bind, group, mgid, asked, flags, wait_ms: EXPLICIT_WAIT_MS };
        let r = self.chan.join_start(&w);
        let Err((step, e)) = r else { return Ok(()) };
        // Traced after the call's work (member_settle): never beneath the
        // engine's frames (docs/security.md, the stack budget).
        self.chan.tell(cm::Outcome::Failed { ifindex, mgid, step, errno: e });
        // Not one more join: the count goes back.
        let _ = self.members.leave(name, port, &mgid, kind);
        Err(e)
    }

    /// The first join of a membership: what its port needs, by link layer
    /// (the module's comment), all of it or nothing.
    fn member_first_join(&mut self, ctx: &Context, dev: &Device, port: u32, eth: bool, mgid: Mgid, kind: Kind) -> Result<(), c_int> {
        let key = self.members.prepare().map_err(|_| libc::ENOMEM)?;
        let place = if !eth || (fabric_mode() == Some(true) && mgid.v4_group().is_some()) {
            super::fabric_place(ctx, dev, port, &mgid, eth)
        } else {
            None
        };
        let how = match place {
            Some(Ok((ifindex, bind, group))) => {
                let flags = flags_of(kind);
                let asked = cm::Asked { lid: None, qkey: None };
                let w = cm::Want { ifindex, bind, group, mgid, asked, flags, wait_ms: EXPLICIT_WAIT_MS };
                self.member_fabric_join(key, kind, w)?
            }
            Some(Err(port)) => {
                crate::trace::no_ipoib(ctx, port, &mgid);
                return Err(libc::ENODEV);
            }
            // An InfiniBand port always has a place, or no IPoIB: this is RoCE.
            None if kind == Kind::Full => self.member_socket_join(ctx, dev, port, key, mgid)?,
            None => How::Nothing,
        };
        self.members.add(DevName::of(dev.name()), port, mgid, kind, key, how);
        Ok(())
    }

    /// The socket joins of a full member on RoCE: every netdev of the port,
    /// or none (those made are left again when one fails).
    #[inline(never)]
    fn member_socket_join(&mut self, ctx: &Context, dev: &Device, port: u32, key: QpKey, mgid: Mgid) -> Result<How, c_int> {
        let ifindexes = crate::port::netdevs(ctx.key, dev, port);
        if ifindexes.is_empty() {
            return Err(libc::ENODEV);
        }
        self.counts.forget_held(|s| !s.is_ours());
        let to_join = self.counts.attach(key, 0, &mgid, &ifindexes).map_err(|_| libc::ENOMEM)?;
        let mut failed = 0;
        for i in to_join {
            match self.pool.join(i, &mgid) {
                Ok(s) => {
                    self.counts.joined(i, &mgid, s);
                    note("join", i, &mgid, 0);
                }
                Err(e) => {
                    note("join", i, &mgid, e);
                    if failed == 0 {
                        failed = e;
                    }
                }
            }
        }
        if failed != 0 {
            self.end(How::Sockets, key, Kind::Full, &mgid)?;
            return Err(failed);
        }
        Ok(How::Sockets)
    }

    /// The rdma_cm join of `w`, answered within [`EXPLICIT_WAIT_MS`] or
    /// left pending; refused: left again and its errno returned.
    #[inline(never)]
    fn member_fabric_join(&mut self, key: QpKey, kind: Kind, w: cm::Want) -> Result<How, c_int> {
        let to_join = self.chan.counts(w.flags).attach(key, 0, &w.mgid, &[w.ifindex]).map_err(|_| libc::ENOMEM)?;
        let mut failed = 0;
        for i in to_join {
            let want = cm::Want { ifindex: i, ..w };
            // Its own answer only (matched by handle, after this call:
            // member_settle): another membership's refusal read meanwhile
            // is that one's.
            let r = self.chan.join_start(&want);
            if let Err((step, e)) = r {
                // Traced in member_settle, as above.
                self.chan.tell(cm::Outcome::Failed { ifindex: i, mgid: w.mgid, step, errno: e });
                failed = e;
            }
        }
        if failed != 0 {
            self.end(How::Fabric, key, kind, &w.mgid)?;
            return Err(failed);
        }
        Ok(How::Fabric)
    }

    #[inline(never)]
    fn member_leave(&mut self, dev: &Device, port: u32, mgid: Mgid, kind: Kind) -> Result<(), c_int> {
        let r = match self.members.leave(&DevName::of(dev.name()), port, &mgid, kind) {
            None => Err(libc::EADDRNOTAVAIL),
            Some(Leave::Fewer) => Ok(()),
            // Still counted when this fails (no memory): the leave can be
            // asked again.
            Some(Leave::Last(key, how)) => self.end(how, key, kind, &mgid).map(|()| self.members.remove(key)),
        };
        note_member("leave", dev, port, &mgid, kind, r.err().unwrap_or(0));
        r
    }

    /// Ends what `key` counts of `mgid`: the (netdev, group) joins whose
    /// last user it was are left. A membership whose socket or rdma_cm fd
    /// the program closed ended with it: nothing to do, no error.
    fn end(&mut self, how: How, key: QpKey, kind: Kind, mgid: &Mgid) -> Result<(), c_int> {
        match how {
            How::Nothing => {}
            How::Sockets => {
                let to_leave = self.counts.detach(key, mgid).map_err(|_| libc::ENOMEM)?;
                for (i, s) in to_leave {
                    let r = self.pool.leave(s, i, mgid).err().unwrap_or(0);
                    note("leave", i, mgid, r);
                }
            }
            How::Fabric => {
                let to_leave = self.chan.counts(flags_of(kind)).detach(key, mgid).map_err(|_| libc::ENOMEM)?;
                for (i, h) in to_leave {
                    let r = self.chan.leave(h).err().unwrap_or(0);
                    // The events read meanwhile: reported after the call's
                    // work (super::exclusive).
                    note_fabric("leave", "leave", i, mgid, r);
                }
            }
        }
        Ok(())
    }
}

/// The rdma_cm join state of a membership of `kind`.
fn flags_of(kind: Kind) -> u16 {
    if kind == Kind::Full { cm::JOIN_FULL } else { cm::JOIN_SENDONLY }
}

/// `member join|leave dev=NAME port=N GROUP as=full|sendonly result=R`
/// (with `RSVERBS_TRACE` on).
#[inline(never)]
fn note_member(what: &str, dev: &Device, port: u32, mgid: &Mgid, kind: Kind, rc: c_int) {
    if !crate::trace::registry_on() {
        return;
    }
    let g = crate::trace::format::short::<128>(mgid);
    let kind = if kind == Kind::Full { "full" } else { "sendonly" };
    crate::trace::note(format_args!(
        "member {what} dev={} port={port} {} as={kind} result={}",
        dev.name(),
        g.as_str(),
        crate::trace::format::Res(rc)
    ));
}

#[cfg(test)]
mod tests {
    use super::super::cm::fake::{self, Fake, event};
    use super::super::counts::{Counts, Members};
    use super::super::sock::Pool;
    use super::*;

    #[test]
    fn an_infiniband_group_is_an_ff00_mgid_and_a_roce_group_an_ipv4_mapped_one_too() {
        let v4 = Mgid::for_group("239.1.2.3".parse().expect("address"), crate::abi::IBV_GID_TYPE_ROCE_V2).expect("multicast");
        let ib = Mgid::for_group("239.1.2.3".parse().expect("address"), crate::abi::IBV_GID_TYPE_IB).expect("multicast");
        assert!(group_on(true, &v4) && group_on(true, &ib));
        assert!(!group_on(false, &v4), "::ffff:239.1.2.3 on InfiniBand: the SA refuses it");
        assert!(group_on(false, &ib));
        assert!(!group_on(true, &Mgid([0; 16])) && !group_on(false, &Mgid([0; 16])));
    }

    /// The wait of call `token`, as super::exclusive_then makes it (here
    /// with nothing else running, so without releasing anything).
    fn settle(st: &mut State, token: u64) {
        while let Some((fd, ms)) = st.chan.next_wait(token) {
            crate::sys::readable_within(fd, ms);
        }
    }

    fn settle_member(st: &mut State, name: &DevName, mgid: Mgid, token: u64, r: Result<(), c_int>) -> Result<(), c_int> {
        settle(st, token);
        st.member_settle(name, 1, mgid, Kind::Full, token, r)
    }

    /// A LOGIC TEST OF THE LIBRARY, NOT OF THE KERNEL (cm.rs' stand-in
    /// rdma_cm, a pipe): an explicit full membership whose fabric join is
    /// lost (`-ENETRESET` after an SM client re-register, queued and read
    /// by no call in between) is joined again by the next
    /// `rsverbs_mcast_join` of it;
    /// one whose re-join is refused is not counted one more.
    #[test]
    fn a_lost_explicit_membership_joins_again_at_its_next_join() {
        fake::install(Fake { answer: true, ..Fake::default() });
        let mut st = State { counts: Counts::new(), pool: Pool::new(), chan: cm::Channel::new(), members: Members::new() };
        let name = DevName::of("mlx5_0");
        let mgid = Mgid([0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xe0, 0, 0, 9]);
        let place = (3, cm::Addr::V4([192, 0, 2, 1]), cm::Addr::Ib(0, mgid.0));
        let key = st.members.prepare().expect("room");
        let asked = cm::Asked { lid: None, qkey: None };
        let w = cm::Want { ifindex: 3, bind: place.1, group: place.2, mgid, asked, flags: cm::JOIN_FULL, wait_ms: 100 };
        let token = st.chan.begin();
        assert_eq!(st.member_fabric_join(key, Kind::Full, w), Ok(How::Fabric));
        settle(&mut st, token);
        st.chan.take_waits(token, |_, r| assert_eq!(r, Ok(())));
        st.members.add(name, 1, mgid, Kind::Full, key, How::Fabric);
        assert_eq!(st.chan.counts(cm::JOIN_FULL).holder(3, &mgid), Some(cm::Handle(0)));

        // The loss is queued and not read by any call before the next
        // join, which reads it and joins again (before: the first call only
        // read it, and the one after joined).
        fake::with(|f| f.queue_last(&event(crate::uverbs::cm::EVENT_MULTICAST_ERROR, 0, -libc::ENETRESET)));
        assert!(!st.chan.counts(cm::JOIN_FULL).unheld(3, &mgid), "not read yet");

        // The next join of it joins again (before: counted, nothing joined).
        assert_eq!(st.members.join_again(&name, 1, &mgid, Kind::Full), Some(true));
        let token = st.chan.begin();
        let r = st.member_join_again(&name, 1, mgid, Kind::Full, || Some(Ok(place)));
        assert_eq!(settle_member(&mut st, &name, mgid, token, r), Ok(()));
        assert_eq!(st.chan.counts(cm::JOIN_FULL).holder(3, &mgid), Some(cm::Handle(1)));
        assert_eq!(fake::with(|f| f.sent(crate::uverbs::cm::CMD_JOIN_MCAST)), vec![0, 1]);
        // A held one is not joined twice.
        assert_eq!(st.members.join_again(&name, 1, &mgid, Kind::Full), Some(true));
        assert_eq!(st.member_join_again(&name, 1, mgid, Kind::Full, || panic!("no place needed")), Ok(()));

        // Lost again, and the SA refuses the re-join: the call fails and
        // is not counted (three joins, three leaves end it).
        fake::with(|f| {
            f.queue_last(&event(crate::uverbs::cm::EVENT_MULTICAST_ERROR, 1, -libc::ENETRESET));
            f.refuse = Some(-libc::EINVAL);
        });
        st.chan.poll();
        assert_eq!(st.members.join_again(&name, 1, &mgid, Kind::Full), Some(true));
        let token = st.chan.begin();
        let r = st.member_join_again(&name, 1, mgid, Kind::Full, || Some(Ok(place)));
        assert_eq!(settle_member(&mut st, &name, mgid, token, r), Err(libc::EINVAL));
        assert_eq!(st.members.leave(&name, 1, &mgid, Kind::Full), Some(Leave::Fewer));
        assert_eq!(st.members.leave(&name, 1, &mgid, Kind::Full), Some(Leave::Fewer));
        assert_eq!(st.members.leave(&name, 1, &mgid, Kind::Full), Some(Leave::Last(key, How::Fabric)));
        fake::install(Fake::default());
    }
}
