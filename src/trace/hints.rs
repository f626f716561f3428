//! The hints (`RSVERBS_TRACE=hints`): `rsverbs[PID]: hint[ID]: ...` lines
//! that name the probable cause of a result and the fix. The IDs are
//! stable; docs/trace.md shows each with an example.
#![forbid(unsafe_code)]

use super::facts;
use super::format::{Line, Res, short};
use crate::abi::qp_type;
use crate::mgid::{Ip6, Mgid};
use crate::registry::{self, Watch};
use crate::uverbs::route::Key;
use crate::view::{Device, QpKey};
use alloc::vec::Vec;
use core::fmt::Write;

/// `IBV_QPT_UD` (verbs.h).
pub const IBV_QPT_UD: i32 = 4;

/// One traced attach or detach, with what the trace already knows.
pub struct Call<'a> {
    pub pid: u32,
    pub attach: bool,
    pub dev: &'a Device,
    pub port: Option<u32>,
    pub route: Key,
    pub qp: QpKey,
    pub qpn: u32,
    pub qp_type: i32,
    pub gid: [u8; 16],
    pub lid: u16,
    pub rc: i32,
    /// `RSVERBS_MCAST_IPJOIN` joins the group right after this call.
    pub ipjoin: bool,
}

/// Out of line: one hint's buffer is on the stack only while it is
/// written, never beside the call line's or another hint's
/// (docs/security.md, the stack budget).
#[inline(never)]
fn hint(pid: u32, id: &str, body: impl FnOnce(&mut Line)) {
    let mut l = Line::new();
    begin(&mut l, pid, id);
    body(&mut l);
    super::sink::emit(l.finish());
}

/// A hint line's head, written once for every hint: `hint` is compiled
/// once per body (13 copies), and with the head inline each copy carried
/// its own (about 1.3 KB on s390x at 592318d, docs/building.md's size
/// table). Out of line, its frame is gone before the body runs.
#[inline(never)]
fn begin(l: &mut Line, pid: u32, id: &str) {
    l.start(pid);
    let _ = write!(l, "hint[{id}]: ");
}

/// The hints of one attach or detach. `before`: the LIDs the registry had
/// for this QP and MGID before the call.
#[inline(never)]
pub fn after_mcast(c: &Call<'_>, before: &[u16]) {
    let g = short::<48>(&Mgid(c.gid).group());
    let g = g.as_str();
    if c.rc == libc::EINVAL && !Mgid(c.gid).is_multicast() {
        hint(c.pid, "not-multicast", |l| {
            let _ = write!(
                l,
                "{}: the MGID {} is not a multicast address: the kernel accepts only ff00::/8, or ::ffff:224.0.0.0/4 \
                 for an IPv4 group (rdma_is_multicast_addr). For the IPv4 group G the MGID is ::ffff:G, \
                 e.g. ::ffff:239.1.1.1; a unicast address such as a host's own IP is a common slip.",
                Res(c.rc),
                Ip6(c.gid)
            );
        });
    }
    if c.rc == libc::EINVAL && c.qp_type != IBV_QPT_UD {
        hint(c.pid, "not-ud", |l| {
            let _ = write!(
                l,
                "{}: QP {:#x} on {} is {}: only UD QPs can be attached to multicast groups (kernel \
                 ib_attach_mcast). Create the QP with qp_type IBV_QPT_UD (rdma_cm: RDMA_PS_UDP).",
                Res(c.rc),
                c.qpn,
                c.dev.name(),
                qp_type(c.qp_type)
            );
        });
    }
    let other = lid_mismatch(c.attach, c.rc, c.lid, before);
    if let (true, Some(other)) = (c.attach, other) {
        hint(c.pid, "lid-mismatch", |l| {
            let _ = write!(
                l,
                "QP {:#x} on {} is now attached to {g} with LID {:#06x} and with LID {:#06x}: uverbs keeps one \
                 attachment per (MGID, LID), the driver may keep one per MGID (rxe does). On Linux 6.1 (and 5.10 \
                 to 7.2) detaching both then answers 0 and EINVAL, the QP can never be destroyed (EBUSY) and the \
                 kernel warns at exit. Attach each MGID once, with one LID (0 on RoCE; the SA's MLID on InfiniBand).",
                c.qpn, c.dev.name(), other, c.lid
            );
        });
    }
    if let (false, Some(other)) = (c.attach, other) {
        hint(c.pid, "lid-mismatch", |l| {
            let _ = write!(
                l,
                "detach of {g} from QP {:#x} on {} with LID {:#06x} ({}), but this QP attached it with LID {:#06x}: \
                 uverbs matches the (MGID, LID) pair, so the attachment stays and ibv_destroy_qp will fail with \
                 EBUSY. Detach with the LID used to attach. (On Linux 6.1 attaching one MGID with two LIDs and \
                 detaching both leaves the QP undestroyable and makes the kernel warn at exit.)",
                c.qpn,
                c.dev.name(),
                c.lid,
                Res(c.rc),
                other
            );
        });
    }
    if c.attach && c.rc == libc::ENOMEM {
        limit(c);
    }
    if c.attach && c.rc == 0 {
        no_ip_join(c);
    }
}

/// The LID that makes this call a `lid-mismatch`, if any: a successful
/// attach of an MGID the QP already has with another LID, or any detach of
/// an MGID the QP has only with other LIDs. `before`: the registry's LIDs
/// for (QP, MGID) before the call.
pub fn lid_mismatch(attach: bool, rc: i32, lid: u16, before: &[u16]) -> Option<u16> {
    if before.contains(&lid) || (attach && rc != 0) {
        return None;
    }
    before.first().copied()
}

fn limit(c: &Call<'_>) {
    let mut groups = 0;
    registry::each(|a| groups += usize::from(a.qp == c.qp));
    let limits = facts::mcast_limits(c.route);
    let g = short::<48>(&Mgid(c.gid).group());
    let g = g.as_str();
    hint(c.pid, "limit", |l| {
        let _ = write!(l, "ENOMEM(12) attaching {g} to QP {:#x} on {}: a multicast limit of the device is reached", c.qpn, c.dev.name());
        match limits {
            Some((grp, qp_attach, total)) => {
                let _ = write!(
                    l,
                    " (ibv_query_device: max_mcast_grp={grp} groups, max_mcast_qp_attach={qp_attach} QPs per group, \
                     max_total_mcast_qp_attach={total} attachments)"
                );
            }
            None => {
                let _ = write!(l, " (ibv_query_device: max_mcast_grp, max_mcast_qp_attach)");
            }
        }
        let _ = write!(
            l,
            "; this QP has {groups} groups attached through rsverbs. Detach groups and QPs no longer needed, or \
             spread the receivers: fewer QPs per group (one QP can serve several groups), or fewer groups per device."
        );
    });
}

fn no_ip_join(c: &Call<'_>) {
    // With RSVERBS_MCAST_IPJOIN=1 rsverbs joins right after this line (and
    // traces the join's result, docs/ipjoin.md): no hint.
    if c.ipjoin {
        return;
    }
    let Some(port) = c.port else { return };
    if !facts::is_ethernet(c.dev, port) {
        return;
    }
    let Some(netdev) = facts::port_netdev(c.dev, port) else { return };
    if facts::ip_joined(&netdev, &c.gid) != Some(false) {
        return;
    }
    let g = short::<48>(&Mgid(c.gid).group());
    let g = g.as_str();
    let v4 = Mgid(c.gid).v4().is_some();
    hint(c.pid, "no-ip-join", |l| {
        let _ = write!(
            l,
            "QP {:#x} on {} port {port} is attached to {g}, but {netdev}, the netdev of the port's GIDs, has not \
             joined {g} at IP level ({}): ibv_attach_mcast never does, so the NIC's multicast filter, \
             IGMP/MLD-snooping switches and the IP layer drop the group's traffic and nothing arrives. Join it on \
             {netdev}: ",
            c.qpn,
            c.dev.name(),
            if v4 { "/proc/net/igmp" } else { "/proc/net/igmp6" }
        );
        if v4 {
            let _ = write!(
                l,
                "'ip addr add {g}/32 dev {netdev} autojoin' (or IP_ADD_MEMBERSHIP on a socket), or join through \
                 rdma_cm (rdma_join_multicast), which joins IPv4 groups at IP level for you."
            );
        } else {
            let _ = write!(
                l,
                "'ip -6 addr add {g}/128 dev {netdev} autojoin' (or IPV6_ADD_MEMBERSHIP on a socket); rdma_cm does \
                 not join IPv6 groups at IP level."
            );
        }
    });
}

/// `RSVERBS_MCAST_IPJOIN`'s join of `mgid` on `netdev` failed with `e`.
pub fn ip_join_failed(pid: u32, netdev: &str, mgid: &Mgid, e: i32) {
    let g = short::<48>(&mgid.group());
    let g = g.as_str();
    hint(pid, "ip-join-failed", |l| {
        let _ = write!(l, "RSVERBS_MCAST_IPJOIN could not join {g} on {netdev}: {}", Res(e));
        let why = match e {
            libc::ENOBUFS => {
                " (each socket holds at most net.ipv4.igmp_max_memberships IPv4 groups, and a new socket could not take it either: the limit is 0?). Raise it: sysctl -w net.ipv4.igmp_max_memberships=N."
            }
            libc::ENOMEM => {
                " (a socket's group list lives in its option memory, net.core.optmem_max, and a new socket could not take it either). Raise it: sysctl -w net.core.optmem_max=N."
            }
            libc::EMFILE | libc::ENFILE => {
                " (no file descriptor left for another socket). Raise the process's limit (ulimit -n) or the system's (fs.file-max)."
            }
            _ => ".",
        };
        let _ = write!(
            l,
            "{why} The QP is attached, but the netdev drops the group's traffic until it is joined at IP level."
        );
    });
}

/// The fabric join (docs/fabric-join.md) of `mgid` through `netdev`
/// failed with `e`, or ended later (`lost`: an error event, e.g.
/// ENETRESET after the SM re-registered the port).
pub fn fabric_join_failed(pid: u32, netdev: &str, mgid: &Mgid, step: &str, e: i32, lost: bool) {
    let g = mgid.group();
    hint(pid, "fabric-join-failed", |l| {
        let _ = write!(
            l,
            "RSVERBS_MCAST_FABRICJOIN {} {g} through {netdev}: {} at {step}",
            if lost { "lost the membership of" } else { "could not join" },
            Res(e)
        );
        let why = match (step, e) {
            ("open", libc::ENOENT | libc::ENODEV | libc::ENXIO) => {
                " (no /dev/infiniband/rdma_cm: load the rdma_ucm module)."
            }
            ("bind", _) => {
                " (the kernel's rdma_cm found no RDMA device for the netdev's address: rdma_bind_addr, cma_acquire_dev_by_src_ip)."
            }
            ("join", libc::EINVAL) => {
                " (the ID has no device: the kernel bound the address without one, as for a loopback address, ucma_get_ctx_dev)."
            }
            (_, libc::EADDRNOTAVAIL) => {
                " (the kernel found no IPoIB broadcast group to take the join's template from: is IPoIB up and joined on the port?)."
            }
            // Any MAD status is EINVAL (sa_query.c recv_handler), and the
            // SM LID's port without an SA answers the join itself with one
            // (mad.c generate_unmatched_resp): run on the test bed.
            ("event", libc::EINVAL) => {
                " (the SA refused the record: the group exists with another Q_Key, SL, TClass or P_Key, e.g. made by perftest's own join, OpenSM's ERR 1B30; or no SA runs at the SM LID: saquery fails there too)."
            }
            (_, libc::ETIMEDOUT) => " (the SA did not answer: is a subnet manager running?).",
            (_, libc::ENETRESET) => " (the subnet manager re-registered the port; the group is joined again at its next attach).",
            _ => ".",
        };
        let _ = write!(l, "{why} The QP is attached, but the fabric does not route the group to this port until it is joined.");
    });
}

/// The fabric join's rdma_cm fd answered EACCES: the process changed its
/// credentials after rsverbs opened it, and the fd was replaced (cm.rs
/// `Channel::replace`). `held`: the memberships the old fd held;
/// `rejoined`: those joined again on the new one; `errno`: why no new fd
/// could be opened (0 when one was).
pub fn fabric_cred_change(pid: u32, held: u32, rejoined: u32, errno: i32) {
    hint(pid, "fabric-join-cred-change", |l| cred_change_text(l, held, rejoined, errno));
}

/// [`fabric_cred_change`]'s text (apart, for its unit test).
fn cred_change_text(l: &mut impl Write, held: u32, rejoined: u32, errno: i32) {
    let _ = write!(
        l,
        "RSVERBS_MCAST_FABRICJOIN's rdma_cm fd answered EACCES(13): this process changed its credentials \
         (a privilege drop: setuid, setgid, setgroups or capset) after rsverbs opened /dev/infiniband/rdma_cm \
         at its first join, and the kernel lets only the opener's credentials use that fd (ucma_write, \
         ib_safe_file_access; its log line \"changed security contexts after opening file descriptor\" is this \
         drop, not an attack). rsverbs closed the fd (the kernel left its {held} group{} with it)",
        if held == 1 { "" } else { "s" }
    );
    if errno != 0 {
        let _ = write!(
            l,
            " and could not open a new one ({}): the memberships are joined again at the next call that touches them.",
            Res(errno)
        );
        return;
    }
    let _ = write!(l, ", opened a new one with the new credentials and joined again {rejoined} of the {held} membership{} it held", if held == 1 { "" } else { "s" });
    if rejoined < held {
        let _ = write!(l, "; the others are joined again at the next call that touches them (their lines name each)");
    }
    let _ = write!(
        l,
        ". No membership the program asked for is lost and none it left comes back; to avoid the replacement, \
         make the first attach or rsverbs_mcast_join after the drop."
    );
}

/// An attach on InfiniBand with the fabric join on, and no IPoIB address
/// to bind its rdma_cm ID to.
pub fn no_ipoib(pid: u32, dev: &str, port: u32, mgid: &Mgid) {
    let g = mgid.group();
    hint(pid, "no-ipoib", |l| {
        let _ = write!(
            l,
            "RSVERBS_MCAST_FABRICJOIN cannot join {g} from {dev} port {port}: the port has no IPoIB netdev with an IPv4 \
             address, and the kernel's rdma_cm joins only from one (cma.c cma_join_ib_multicast takes the IPoIB broadcast \
             group as its template). Bring IPoIB up with an address on the port, or join with the SA yourself \
             (librdmacm rdma_join_multicast, perftest's umad join as root). Without a join the switches do not route \
             the group to this port."
        );
    });
}

/// The fabric join's event gave the group a Q_Key other than the QP's.
pub fn qkey_mismatch(pid: u32, mgid: &Mgid, own: u32, group: u32) {
    let g = mgid.group();
    hint(pid, "qkey-mismatch", |l| {
        let _ = write!(
            l,
            "{g}: the group's Q_Key is {group:#x} (the fabric join's answer; on InfiniBand the SA's record), but \
             the attached QP's is {own:#x}: a sender that takes the group's Q_Key (librdmacm's do, from the join \
             event) reaches the port and is dropped there (rxe_recv.c check_keys; counted in qkey_viol_cntr). \
             Give the QP the group's Q_Key (ibv_modify_qp IBV_QP_QKEY) or the senders the QP's."
        );
        for (q, whose) in [(own, "The QP's"), (group, "The group's")] {
            if let Some(o) = qkey_owner(q) {
                let _ = write!(l, " {whose} {q:#x} is {o}.");
            }
        }
    });
}

/// The SA gave the group another MLID than the attach's LID.
pub fn mlid_mismatch(pid: u32, mgid: &Mgid, lid: u16, mlid: u16) {
    let g = mgid.group();
    hint(pid, "mlid-mismatch", |l| {
        let _ = write!(
            l,
            "{g} was attached with LID {lid:#06x}, but the SA's MLID of the group is {mlid:#06x}: senders must address \
             the group with the SA's MLID (the switches route by it), and attaching with it keeps the kernel's entry \
             matching (uverbs keeps one per MGID and LID)."
        );
    });
}

/// How far the port's `qkey_viol_cntr` rose from `then` (after the attach)
/// to `now`: (count, whether it is a lower bound). The counter is 16 bits
/// wide in the IBA (PortInfo:Q_KeyViolations) and saturates there: rxe
/// stops at 0xffff (rxe_recv.c `set_qkey_viol_cntr`); uverbs carries it
/// as a u32. So: a counter at its cap now counts "at least"; one already
/// at its cap at the attach cannot show new drops (None); one that went
/// down was reset meanwhile (`ibv_modify_port` IB_PORT_RESET_QKEY_CNTR,
/// rxe_verbs.c `rxe_modify_port`), and `now` drops came at least since.
pub fn viol_rise(then: u32, now: u32) -> Option<(u32, bool)> {
    let capped = |v: u32| v == 0xffff || v == u32::MAX;
    match now.cmp(&then) {
        core::cmp::Ordering::Greater => Some((now - then, capped(now))),
        core::cmp::Ordering::Equal => None,
        core::cmp::Ordering::Less => (now > 0).then_some((now, true)),
    }
}

/// Who uses a Q_Key by default, for the well-known ones.
pub fn qkey_owner(qkey: u32) -> Option<&'static str> {
    match qkey {
        0x0123_4567 => Some("rdma_cm's (RDMA_UDP_QKEY, librdmacm rdma_cma.h)"),
        0x1111_1111 => Some("perftest's (DEF_QKEY)"),
        0x0b1b => Some("that of IPoIB broadcast groups (OpenSM OSM_IPOIB_BROADCAST_MGRP_QKEY)"),
        _ => None,
    }
}

/// `qkey-violations`: the port's counter rose from `w.viol` to `now` while
/// QP `qpn` had `mgid` attached (until its detach, or until exit).
pub fn qkey_violations(pid: u32, dev: &str, qpn: u32, mgid: &Mgid, w: Watch, now: u32, at_exit: bool) {
    let Some((n, at_least)) = viol_rise(w.viol, now) else { return };
    hint(pid, "qkey-violations", |l| {
        let _ = write!(
            l,
            "{}{n} datagram(s) reached port {} of {dev} with a Q_Key other than this QP's {:#x} while QP {qpn:#x} had \
             {} attached{} (qkey_viol_cntr {} -> {now}{}); the port dropped them silently (a UD datagram is taken only \
             with the receiving QP's Q_Key: rxe_recv.c check_keys). The counter is per port, not per QP: any QP on \
             this port may be the one that refused them. Give the senders this QP's Q_Key (wr.ud.remote_qkey) or \
             this QP theirs (ibv_modify_qp IBV_QP_QKEY). Well-known Q_Keys: 0x01234567 rdma_cm (RDMA_UDP_QKEY, \
             librdmacm rdma_cma.h), 0x11111111 perftest (DEF_QKEY), 0xb1b IPoIB broadcast groups (OpenSM \
             OSM_IPOIB_BROADCAST_MGRP_QKEY); ",
            if at_least { "at least " } else { "" },
            w.port,
            w.qkey,
            mgid.group(),
            if at_exit { " until exit" } else { " until its detach" },
            w.viol,
            if now < w.viol { ", reset meanwhile" } else if at_least { ", saturated" } else { "" },
        );
        match qkey_owner(w.qkey) {
            Some(o) => {
                let _ = write!(l, "this QP's {:#x} is {o}.", w.qkey);
            }
            None => {
                let _ = write!(l, "this QP's {:#x} is none of them.", w.qkey);
            }
        }
    });
}

/// At exit: `qkey-violations` for every group still attached whose
/// counter rose, then `still-attached` for every QP this process attached
/// and did not detach.
pub fn at_exit(pid: u32) {
    registry::each(|a| {
        if a.pid != pid {
            return;
        }
        let Some(w) = a.watch else { return };
        if let Some(now) = facts::qkey_viol_at_exit(a.qp.ctx, w.fd, u32::from(w.port)) {
            qkey_violations(pid, a.dev_name(), a.qpn, &Mgid(a.gid), w, now, true);
        }
    });
    // (QP, QPN, device, its groups)
    type Groups = Vec<([u8; 16], u16)>;
    let mut qps: Vec<(QpKey, u32, [u8; 16], Groups)> = Vec::new();
    registry::each(|a| {
        if a.pid != pid {
            return;
        }
        // A failed allocation leaves the group out of the hint (no abort).
        match qps.iter_mut().find(|q| q.0 == a.qp) {
            Some(q) => {
                crate::os::try_push(&mut q.3, (a.gid, a.lid));
            }
            None => {
                let mut groups = Vec::new();
                if crate::os::try_push(&mut groups, (a.gid, a.lid)) {
                    crate::os::try_push(&mut qps, (a.qp, a.qpn, a.dev, groups));
                }
            }
        }
    });
    for (_, qpn, dev, groups) in qps {
        let end = dev.iter().position(|&b| b == 0).unwrap_or(16);
        let dev = core::str::from_utf8(&dev[..end]).unwrap_or("?");
        hint(pid, "still-attached", |l| {
            let _ = write!(l, "at exit, QP {qpn:#x} on {dev} is still attached to {} group(s):", groups.len());
            for (i, (g, lid)) in groups.iter().enumerate().take(8) {
                let _ = write!(l, "{} {} lid {lid:#06x}", if i == 0 { "" } else { "," }, Mgid(*g).group());
            }
            if groups.len() > 8 {
                let _ = write!(l, ", and {} more", groups.len() - 8);
            }
            let _ = write!(
                l,
                ". ibv_destroy_qp on it fails with EBUSY (kernel uverbs_cmd.c: a QP with attachments is busy); \
                 detach each group first (ibv_detach_mcast, or rdma_leave_multicast), then destroy the QP."
            );
        });
    }
}

#[cfg(test)]
mod tests {
    use super::{cred_change_text, lid_mismatch, qkey_owner, viol_rise};

    #[test]
    fn qkey_counter_rise_wrap_and_saturation() {
        assert_eq!(viol_rise(3, 11), Some((8, false)));
        assert_eq!(viol_rise(5, 5), None, "no drop");
        assert_eq!(viol_rise(0xfff0, 0xffff), Some((15, true)), "capped now: at least");
        assert_eq!(viol_rise(0xffff, 0xffff), None, "capped at the attach: cannot tell");
        assert_eq!(viol_rise(40, 7), Some((7, true)), "reset meanwhile: at least since");
        assert_eq!(viol_rise(40, 0), None);
        assert_eq!(viol_rise(0, u32::MAX), Some((u32::MAX, true)));
    }

    /// The credential-change hint: the text names the privilege drop, the
    /// kernel's rule and log line, and what was done (fd replaced,
    /// memberships joined again), or why not.
    #[test]
    fn the_credential_change_hint_names_the_drop_and_what_was_done() {
        let mut s = alloc::string::String::new();
        cred_change_text(&mut s, 2, 2, 0);
        for w in ["EACCES(13)", "privilege drop", "setuid", "setgroups", "ib_safe_file_access", "changed security contexts",
            "closed the fd (the kernel left its 2 groups with it)", "opened a new one with the new credentials",
            "joined again 2 of the 2 memberships it held"] {
            assert!(s.contains(w), "{w:?} not in {s}");
        }
        assert!(!s.contains("the others"), "{s}");
        s.clear();
        cred_change_text(&mut s, 3, 1, 0);
        assert!(s.contains("joined again 1 of the 3 memberships it held; the others are joined again at the next call"), "{s}");
        s.clear();
        cred_change_text(&mut s, 1, 0, libc::EMFILE);
        assert!(s.contains("left its 1 group with it) and could not open a new one (EMFILE(24))"), "{s}");
        assert!(s.len() < 960, "fits a trace line (1,024 bytes with its head): {}", s.len());
    }

    #[test]
    fn well_known_qkeys() {
        assert!(qkey_owner(0x0123_4567).is_some_and(|o| o.starts_with("rdma_cm")));
        assert!(qkey_owner(0x1111_1111).is_some_and(|o| o.starts_with("perftest")));
        assert!(qkey_owner(0xb1b).is_some_and(|o| o.contains("IPoIB")));
        assert_eq!(qkey_owner(0x11), None);
    }

    #[test]
    fn lid_mismatch_cases() {
        // attach (G, 0) then (G, 0xc001): fires, naming 0.
        assert_eq!(lid_mismatch(true, 0, 0xc001, &[0]), Some(0));
        // duplicate attach, first attach, failed attach: silent.
        assert_eq!(lid_mismatch(true, 0, 0, &[0]), None);
        assert_eq!(lid_mismatch(true, 0, 0, &[]), None);
        assert_eq!(lid_mismatch(true, libc::EINVAL, 0xc001, &[0]), None);
        // detach with another LID (whatever the kernel answers): fires.
        assert_eq!(lid_mismatch(false, libc::EINVAL, 0x1234, &[0]), Some(0));
        // detach with the LID of the attach, or of a group never attached: silent.
        assert_eq!(lid_mismatch(false, 0, 0, &[0, 0xc001]), None);
        assert_eq!(lid_mismatch(false, libc::EINVAL, 7, &[]), None);
    }
}
