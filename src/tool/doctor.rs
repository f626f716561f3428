//! `rsverbs doctor GROUP`: can this host receive GROUP on a port? Each
//! check gives a status and, for a problem, the fix. A RoCE port has its
//! checks (gid, mgid, IP membership, filter, rp_filter), an InfiniBand
//! port its own (the SM, IPoIB, the P_Key, the MGID, the SA's
//! MCMemberRecord); port, limits and qkey are on both.

use crate::ffi::{self, Device, LINK_LAYER_ETHERNET, PORT_ACTIVE};
use crate::gids::{self, Port};
use crate::group::{Group, perftest_arg};
use crate::ib;
use crate::json::Json;
use crate::net;
use crate::table::{Slot, printable, type_name};
use rsverbs::abi::IBV_GID_TYPE_IB;
use rsverbs::select::rules::{Family, Filter, NO_VLAN};
use core::net::Ipv6Addr;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    Warn,
    Fail,
    /// The check could not be made (InfiniBand: no SA to ask, no saquery);
    /// the detail says why. Not a failure.
    Skip,
}

impl Status {
    fn text(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
            Status::Skip => "skip",
        }
    }
}

pub struct Check {
    pub name: &'static str,
    pub status: Status,
    pub detail: String,
    pub fix: Vec<String>,
}

fn check(name: &'static str, status: Status, detail: String, fix: Vec<String>) -> Check {
    Check { name, status, detail, fix }
}

pub struct Verdict {
    pub dev: String,
    pub port: u8,
    pub netdev: Option<String>,
    /// "Ethernet" (RoCE) or "InfiniBand".
    pub link_layer: &'static str,
    /// The port's `qkey_viol_cntr`, when the device counts (BAD_QKEY_CNTR).
    pub qkey_viol: Option<u32>,
    /// InfiniBand: the MGID and what the SA said of it.
    pub sa: Option<IbSa>,
    pub checks: Vec<Check>,
}

/// What the SA said of the group, for `--json`.
pub struct IbSa {
    pub mgid: String,
    /// The port's record when it is a member, else the group's; None
    /// when there is none or the SA was not asked.
    pub record: Option<ib::Record>,
    /// Whether the port is a member; None when the SA was not asked.
    pub member: Option<bool>,
}

impl Verdict {
    /// No check failed: ready as far as checked (skipped checks aside).
    pub fn ready(&self) -> bool {
        self.checks.iter().all(|c| c.status != Status::Fail)
    }

    /// How many checks did not apply or could not be made.
    pub fn skipped(&self) -> usize {
        self.checks.iter().filter(|c| c.status == Status::Skip).count()
    }
}

/// The netdev behind a port: its GIDs' netdev, else rxe's `parent`, else
/// the PCI function's net/ directory.
fn netdev_of(dev: &str, p: &Port) -> Option<String> {
    let from_gid = p.table.slots.iter().find_map(|s| match s {
        Slot::Gid(g) if g.ifindex != 0 => net::name(g.ifindex),
        _ => None,
    });
    from_gid
        .or_else(|| Some(net::read(&format!("/sys/class/infiniband/{dev}/parent")).trim().to_string()).filter(|s| !s.is_empty()))
        .or_else(|| {
            let dir = std::fs::read_dir(format!("/sys/class/infiniband/{dev}/device/net")).ok()?;
            dir.flatten().next().map(|e| e.file_name().to_string_lossy().into_owned())
        })
}

/// Every check for GROUP on one port of device `dev`.
pub fn port_verdict(dev: &str, limits: &ffi::DeviceLimits, p: &Port, group: Group, given: &str) -> Verdict {
    if p.info.link_layer != LINK_LAYER_ETHERNET {
        let facts = ib_facts(dev, p, group, given);
        return ib_verdict(dev, limits, p, group, &facts);
    }
    let netdev = netdev_of(dev, p);
    let nd = netdev.clone().unwrap_or_else(|| "NETDEV".into());
    let mut checks = Vec::new();

    // Port state and link layer.
    let state = ffi::port_state_name(p.info.state);
    let nd_state = netdev.as_deref().map_or("?".to_string(), net::operstate);
    let detail = format!("{state}, link layer Ethernet, {nd} operstate {nd_state}");
    checks.push(if p.info.state == PORT_ACTIVE {
        check("port", Status::Ok, detail, vec![])
    } else {
        check("port", Status::Fail, format!("{detail}: the port must be ACTIVE"), vec![format!("ip link set {nd} up")])
    });

    checks.extend(roce_checks(p, group, given, netdev.as_deref(), &nd));
    checks.extend(device_checks(limits, p));
    Verdict { dev: dev.to_string(), port: p.port, netdev, link_layer: "Ethernet", qkey_viol: limits.bad_qkey_cntr.then_some(p.info.qkey_viol_cntr), sa: None, checks }
}

/// What doctor reads of an InfiniBand port and its host, gathered apart
/// from the checks so that the unit tests give made-up facts.
#[derive(Debug)]
pub struct IbFacts {
    /// The port's GID 0, None when sysfs does not say.
    pub gid: Option<[u8; 16]>,
    /// The port's IPoIB netdev in this network namespace.
    pub netdev: Option<String>,
    /// Its IFF_UP, operstate and IPv4 addresses.
    pub up: bool,
    pub operstate: String,
    pub ipv4: Vec<core::net::Ipv4Addr>,
    /// The P_Key at index 0.
    pub pkey: Option<u16>,
    /// The MGID rdma_cm joins for GROUP there, and how it was made.
    pub mgid: [u8; 16],
    pub mgid_how: String,
    /// The SA's answer; None when it was not asked (the port has no SM).
    pub sa: Option<ib::Sa>,
}

/// Reads the facts of InfiniBand port `p` (sysfs, getifaddrs, saquery).
pub fn ib_facts(dev: &str, p: &Port, group: Group, given: &str) -> IbFacts {
    let gid = ib::port_gid(dev, p.port);
    let netdev = gid.and_then(|g| ib::ipoib_netdevs(&g).into_iter().next());
    let (up, operstate, ipv4) = match netdev.as_deref() {
        Some(n) => (net::flags(n) & net::IFF_UP != 0, net::operstate(n), ib::ipv4_addrs(n)),
        None => (false, "?".into(), Vec::new()),
    };
    let given_mgid = given.parse::<Ipv6Addr>().ok().map(|a| a.octets()).filter(ib::is_ib_mgid);
    let (mgid, mgid_how) = match (given_mgid, netdev.as_deref().and_then(ib::broadcast)) {
        (Some(m), _) => (m, "the MGID given, as it is (AF_IB, as mckey -M)".to_string()),
        (None, Some(b)) => (
            ib::mgid_on(group.mgid(IBV_GID_TYPE_IB), &b),
            format!("rdma_cm's for {} on {}: the scope and P_Key of its broadcast address (cma.c cma_set_mgid)", group.text(), netdev.as_deref().unwrap_or("?")),
        ),
        (None, None) => (
            group.mgid(IBV_GID_TYPE_IB),
            format!("rdma_cm's for {} with the default IPoIB broadcast (scope 2, P_Key 0xffff; cma.c cma_set_mgid)", group.text()),
        ),
    };
    let sm = p.info.state == PORT_ACTIVE && p.info.sm_lid != 0;
    let sa = match gid {
        Some(g) if sm => Some(ib::ask_sa(dev, p.port, &mgid, &g)),
        _ => None,
    };
    IbFacts { gid, netdev, up, operstate, ipv4, pkey: ib::pkey0(dev, p.port), mgid, mgid_how, sa }
}

/// The fixes for a port that is not a member of the group at the SA.
fn join_fixes(mgid: &str, group: Group, nd: &str) -> Vec<String> {
    vec![
        format!("RSVERBS_MCAST_FABRICJOIN=1 PROGRAM: rsverbs joins {mgid} at the SA when the program attaches (docs/fabric-join.md)"),
        format!("rsverbs_mcast_join(3) of {mgid} from the program, on this port"),
        format!("a librdmacm member (rdma_join_multicast), e.g. mckey -m {} -b <{nd}'s IPv4 address>", group.text()),
    ]
}

/// The verdict of an InfiniBand port from its facts: port (ACTIVE, an SM),
/// ipoib, pkey, mgid, membership (the SA's MCMemberRecord), limits, qkey.
pub fn ib_verdict(dev: &str, limits: &ffi::DeviceLimits, p: &Port, group: Group, f: &IbFacts) -> Verdict {
    let mut checks = Vec::new();
    let nd = f.netdev.clone().unwrap_or_else(|| "ibN".into());

    // Port state and the subnet manager.
    let state = ffi::port_state_name(p.info.state);
    let detail = format!("{state}, link layer InfiniBand, LID {:#x}, SM LID {:#x}", p.info.lid, p.info.sm_lid);
    let sm_fix = format!("start a subnet manager on the fabric: opensm (systemctl start opensm); ibstat {dev} {}", p.port);
    checks.push(if p.info.state != PORT_ACTIVE {
        let why = match p.info.state {
            1 => "DOWN: no link (cable, or the port at the other end)",
            2 | 3 => "INIT/ARMED: no subnet manager has configured it",
            _ => "not ACTIVE",
        };
        let mut fix = vec![sm_fix];
        if p.info.state == 1 {
            fix.insert(0, format!("check the cable: ibstat {dev} {} (Physical state)", p.port));
        }
        check("port", Status::Fail, format!("{detail}: the port must be ACTIVE; {why}"), fix)
    } else if p.info.sm_lid == 0 {
        check("port", Status::Fail, format!("{detail}: no subnet manager (SM LID 0): no SA to join at"), vec![sm_fix])
    } else {
        check("port", Status::Ok, detail, vec![])
    });

    // The IPoIB netdev, up with an IPv4 address: rdma_cm binds by it and
    // joins with its broadcast group as the template (cma.c
    // cma_join_ib_multicast); so does rsverbs' fabric join.
    let gtext = f.gid.map_or("?".into(), |g| Ipv6Addr::from(g).to_string());
    checks.push(match &f.netdev {
        None => check(
            "ipoib",
            Status::Fail,
            format!("no IPoIB netdev of {dev} port {} in this network namespace (type 32, hardware address ending in the port GID {gtext}): rdma_cm cannot bind", p.port),
            vec!["modprobe ib_ipoib".into(), "ip link set ibN up; ip addr add ADDRESS/PREFIX dev ibN".into()],
        ),
        Some(n) if !f.up || f.ipv4.is_empty() => {
            let mut why = Vec::new();
            let mut fix = Vec::new();
            if !f.up {
                why.push("down".to_string());
                fix.push(format!("ip link set {n} up"));
            }
            if f.ipv4.is_empty() {
                why.push("no IPv4 address (rdma_cm binds by it)".to_string());
                fix.push(format!("ip addr add ADDRESS/PREFIX dev {n}"));
            }
            check("ipoib", Status::Fail, format!("{n} (operstate {}): {}", f.operstate, why.join(", ")), fix)
        }
        Some(n) => {
            let a = f.ipv4.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", ");
            if f.operstate == "up" {
                check("ipoib", Status::Ok, format!("{n}, operstate up, IPv4 {a}"), vec![])
            } else {
                // IPoIB turns its carrier on once it has joined its
                // broadcast group (ipoib_multicast.c ipoib_mcast_join_task).
                check(
                    "ipoib",
                    Status::Warn,
                    format!("{n}, IPv4 {a}, operstate {}: no carrier, IPoIB has not joined its broadcast group (an SM?)", f.operstate),
                    vec![format!("ip -d link show {n}; saquery -g (is the broadcast group there?)")],
                )
            }
        }
    });

    // The P_Key at index 0: rdma_cm's partition for the group (IPoIB's
    // parent interface uses it, ipoib_main.c), 0x8000 the full member bit.
    checks.push(match f.pkey {
        None => check("pkey", Status::Fail, format!("no P_Key at index 0 (/sys/class/infiniband/{dev}/ports/{}/pkeys/0)", p.port), vec![sm_fix_pkey()]),
        Some(k) if k & 0x7fff == 0 => check("pkey", Status::Fail, format!("P_Key {k:#06x} at index 0: no partition (invalid)"), vec![sm_fix_pkey()]),
        Some(k) if k & 0x8000 == 0 => check(
            "pkey",
            Status::Warn,
            format!("P_Key {k:#06x} at index 0: a limited member of partition {:#06x}; it receives from full members only, never from another limited one", k & 0x7fff),
            vec![sm_fix_pkey()],
        ),
        Some(k) => check("pkey", Status::Ok, format!("P_Key {k:#06x} at index 0: a full member of partition {:#06x}", k & 0x7fff), vec![]),
    });

    // The MGID.
    let mtext = Ipv6Addr::from(f.mgid).to_string();
    checks.push(check("mgid", Status::Ok, format!("{mtext}: {}", f.mgid_how), vec![]));

    // The SA's MCMemberRecord.
    let mut sa_json = None;
    checks.push(match &f.sa {
        None if f.gid.is_none() => check("membership", Status::Skip, format!("not checked: no GID 0 in /sys/class/infiniband/{dev}/ports/{}/gids/0", p.port), vec![]),
        None => check("membership", Status::Skip, "not checked: the port has no subnet manager, so there is no SA to ask (port, above)".into(), vec![]),
        Some(ib::Sa::NoTool) => check(
            "membership",
            Status::Skip,
            "not checked: doctor asks the SA for the group's MCMemberRecord through saquery (infiniband-diags), which is not installed".into(),
            vec!["apt install infiniband-diags".into()],
        ),
        Some(ib::Sa::Failed(e)) => check(
            "membership",
            Status::Skip,
            format!("not checked: the SA query failed: {e}"),
            vec!["saquery opens /dev/infiniband/umadN: run doctor as root (or with access to it)".into()],
        ),
        Some(ib::Sa::Answer { group: None, .. }) => {
            sa_json = Some((None, false));
            check(
                "membership",
                Status::Fail,
                format!("the SA has no MCMemberRecord of {mtext}: nobody has joined the group, nothing is routed to it"),
                join_fixes(&mtext, group, &nd),
            )
        }
        Some(ib::Sa::Answer { group: Some(g), port: None }) => {
            sa_json = Some((Some(*g), false));
            check(
                "membership",
                Status::Fail,
                format!(
                    "the SA has {mtext} (MLID {:#x}, Q_Key {:#x}), but {dev} port {} (GID {gtext}) is not a member: the fabric does not route the group to this port",
                    g.mlid, g.qkey, p.port
                ),
                join_fixes(&mtext, group, &nd),
            )
        }
        Some(ib::Sa::Answer { port: Some(r), .. }) => {
            sa_json = Some((Some(*r), true));
            check(
                "membership",
                Status::Ok,
                format!(
                    "the SA has this port's MCMemberRecord of {mtext}: MLID {:#x}, Q_Key {:#x}, the Q_Key a sender must use (wr.ud.remote_qkey) \
                     and the receiving QP must have (an unprivileged SA query does not show the JoinState: a send-only member answers the same)",
                    r.mlid, r.qkey
                ),
                vec![],
            )
        }
    });

    checks.extend(device_checks(limits, p));
    let sa = Some(IbSa { mgid: mtext, record: sa_json.and_then(|(r, _)| r), member: sa_json.map(|(_, m)| m) });
    Verdict { dev: dev.to_string(), port: p.port, netdev: f.netdev.clone(), link_layer: "InfiniBand", qkey_viol: limits.bad_qkey_cntr.then_some(p.info.qkey_viol_cntr), sa, checks }
}

fn sm_fix_pkey() -> String {
    "the subnet manager sets the P_Key table: opensm's partitions.conf (Default=0x7fff, ipoib : ALL=full ;)".into()
}

/// The checks of a RoCE (Ethernet) port: its GID, the MGID, the IP
/// membership, the netdev's filter, rp_filter.
fn roce_checks(p: &Port, group: Group, given: &str, netdev: Option<&str>, nd: &str) -> Vec<Check> {
    let mut checks = Vec::new();

    // A GID of the default RoCE type, of the group's family, on the netdev.
    let want_v4 = matches!(group, Group::V4(_));
    let ifindex = netdev.map(ifindex_of).unwrap_or(0);
    let fam = if want_v4 { "IPv4" } else { "IPv6" };
    let tname = type_name(p.default_type);
    let family = if want_v4 { Family::V4 } else { Family::V6 };
    let filter = Filter { gid_type: Some(p.default_type), family: Some(family), ifindex: Some(ifindex), vlan: None };
    let found = filter.first(&p.table.slots, 0, &|_| NO_VLAN);
    checks.push(match found {
        Some(i) => check(
            "gid",
            Status::Ok,
            format!("{tname} {fam} GID on {nd} at index {i}; perftest -x default {}", p.perftest.map_or("-".into(), |x| x.to_string())),
            vec![],
        ),
        None => check(
            "gid",
            Status::Fail,
            format!("no {tname} GID with an {fam} address on {nd}: rdma_cm cannot bind there and perftest has no such -x"),
            vec![if want_v4 { format!("ip addr add ADDRESS/PREFIX dev {nd}") } else { format!("ip -6 addr add ADDRESS/PREFIX dev {nd}") }],
        ),
    });

    // The MGID rdma_cm and perftest use for GROUP.
    let mgid = group.mgid(p.default_type);
    let mtext = Ipv6Addr::from(mgid).to_string();
    let detail = format!("rdma_cm attaches {mtext} ({tname}); perftest: --mcg -M {}", perftest_arg(&mgid));
    let given_mgid = given.parse::<Ipv6Addr>().ok().map(|a| a.octets());
    checks.push(match given_mgid {
        Some(g) if want_v4 && g != mgid => check(
            "mgid",
            Status::Warn,
            format!("{detail}; the MGID given, {given}, is the other RoCE type's: members and senders must use the same one"),
            vec![],
        ),
        _ => check("mgid", Status::Ok, detail, vec![]),
    });

    // IP-level membership: without it the IP layer drops the group
    // (ip_route_input → ip_check_mc_rcu; ip6_mc_input), and a switch
    // never hears a report.
    let (joined, file) = match group {
        Group::V4(a) => (netdev.is_some_and(|n| net::igmp_joined(&net::read("/proc/net/igmp"), n, a)), "/proc/net/igmp"),
        Group::V6(o) => (netdev.is_some_and(|n| net::igmp6_joined(&net::read("/proc/net/igmp6"), n, &o)), "/proc/net/igmp6"),
    };
    let gtext = group.text();
    checks.push(if joined {
        check("membership", Status::Ok, format!("{nd} is a member of {gtext} ({file})"), vec![])
    } else {
        check(
            "membership",
            Status::Fail,
            format!("{nd} has not joined {gtext} at IP level ({file}); ibv_attach_mcast never joins it, rdma_cm only for IPv4 on RoCE v2 while joined"),
            vec![format!("ip addr add {gtext}/{} dev {nd} autojoin", group.host_prefix())],
        )
    });

    // The netdev's multicast filter.
    let flags = netdev.map_or(0, net::flags);
    let mac = group.mac();
    let mtxt = net::mac_text(&mac);
    let listed = netdev.is_some_and(|n| net::mac_listed(&net::read("/proc/net/dev_mcast"), n, &mac));
    let all = flags & (net::IFF_ALLMULTI | net::IFF_PROMISC) != 0;
    let mut fix = Vec::new();
    let mut why = Vec::new();
    if flags & net::IFF_MULTICAST == 0 {
        why.push("multicast is off (IFF_MULTICAST)".to_string());
        fix.push(format!("ip link set {nd} multicast on"));
    }
    if !listed && !all {
        why.push(format!("{mtxt} is not in its filter (ip maddr show dev {nd}) and allmulticast is off"));
        fix.push(format!("ip maddr add {mtxt} dev {nd}"));
    }
    let how = if listed { format!("{mtxt} listed") } else if all { "allmulticast/promisc".to_string() } else { String::new() };
    checks.push(if why.is_empty() {
        check("filter", Status::Ok, format!("{nd}: multicast on, {how}"), vec![])
    } else {
        check("filter", Status::Fail, format!("{nd}: {}", why.join("; ")), fix)
    });

    // Reverse-path filtering of the group's IPv4 packets.
    checks.push(match group {
        Group::V6(_) => check("rp_filter", Status::Ok, "IPv6: no rp_filter".into(), vec![]),
        Group::V4(_) => {
            let (a, dv) = net::rp_filter(nd);
            let eff = a.max(dv);
            let d = format!("effective {eff} = max(all {a}, {nd} {dv})");
            if eff == 1 {
                let mut fix = vec![format!("sysctl -w net.ipv4.conf.{nd}.rp_filter=2")];
                if a == 1 {
                    fix.push("sysctl -w net.ipv4.conf.all.rp_filter=2".into());
                }
                check("rp_filter", Status::Fail, format!("{d}: strict, drops the group's packets from a source not routed back through {nd}"), fix)
            } else {
                check("rp_filter", Status::Ok, format!("{d} ({})", if eff == 0 { "off" } else { "loose" }), vec![])
            }
        }
    });

    checks
}

/// The checks of both link layers: the device's limits, the port's Q_Key violations.
fn device_checks(limits: &ffi::DeviceLimits, p: &Port) -> Vec<Check> {
    let mut checks = Vec::new();
    // The device limits.
    let lim = format!(
        "max_mcast_grp {}, max_mcast_qp_attach {}, max_total_mcast_qp_attach {}",
        limits.max_mcast_grp, limits.max_mcast_qp_attach, limits.max_total_mcast_qp_attach
    );
    checks.push(if limits.max_mcast_grp > 0 && limits.max_mcast_qp_attach > 0 {
        check("limits", Status::Ok, lim, vec![])
    } else {
        check("limits", Status::Fail, format!("{lim}: the device has no multicast"), vec![])
    });

    // Q_Key violations: datagrams dropped because the receiving QP's Q_Key
    // differs from the one the sender put in (rxe_recv.c check_keys →
    // set_qkey_viol_cntr); per port, not per QP, and not per group.
    let n = p.info.qkey_viol_cntr;
    checks.push(if !limits.bad_qkey_cntr {
        check("qkey", Status::Ok, format!("the device does not count Q_Key violations (no IBV_DEVICE_BAD_QKEY_CNTR; qkey_viol_cntr {n})"), vec![])
    } else if n == 0 {
        check("qkey", Status::Ok, "qkey_viol_cntr 0: no datagram dropped for its Q_Key on this port".into(), vec![])
    } else {
        check(
            "qkey",
            Status::Warn,
            format!(
                "qkey_viol_cntr {n}{}: datagrams reached this port with a Q_Key other than the receiving QP's and were dropped \
                 (per port, since the counter was last reset). Senders' wr.ud.remote_qkey must be the member QP's Q_Key: \
                 0x01234567 rdma_cm, 0x11111111 perftest, 0xb1b IPoIB broadcast groups",
                if n >= 0xffff { " (its cap: at least that many)" } else { "" }
            ),
            vec!["RSVERBS_TRACE=hints PROGRAM: hint[qkey-violations] names the receiving QP and its Q_Key".into()],
        )
    });

    checks
}

fn ifindex_of(name: &str) -> u32 {
    let Ok(c) = std::ffi::CString::new(name) else { return 0 };
    // SAFETY: c is a NUL-terminated string.
    unsafe { libc::if_nametoindex(c.as_ptr()) }
}

/// `rsverbs doctor`: prints the verdicts, returns the exit status.
pub fn run(devs: &[Device], port: Option<u8>, group: Group, given: &str, json: bool) -> i32 {
    let mut verdicts = Vec::new();
    for d in devs {
        let Some(limits) = d.limits() else { continue };
        for p in 1..=limits.phys_port_cnt {
            if port.is_some_and(|w| w != p) {
                continue;
            }
            if let Some(pt) = gids::read_port(d, p) {
                verdicts.push(port_verdict(&d.name, &limits, &pt, group, given));
            }
        }
    }
    let ready = verdicts.iter().any(Verdict::ready);
    if json {
        let mut s = String::new();
        to_json(&verdicts, group, ready).write(&mut s);
        println!("{s}");
    } else {
        print_text(&verdicts, group, ready);
    }
    if ready { 0 } else { 1 }
}

fn print_text(verdicts: &[Verdict], group: Group, ready: bool) {
    // Every line through printable: device and netdev names are the kernel's.
    let out = |l: String| println!("{}", printable(&l));
    for v in verdicts {
        out(format!("{} port {} (netdev {}), group {}:", v.dev, v.port, v.netdev.as_deref().unwrap_or("?"), group.text()));
        for c in &v.checks {
            out(format!("  {:<5} {:<11} {}", c.status.text(), c.name, c.detail));
            for f in &c.fix {
                out(format!("        fix: {f}"));
            }
        }
        let skipped = match v.skipped() {
            0 => String::new(),
            n => format!(" as far as checked ({n} checks skipped on {})", v.link_layer),
        };
        out(format!("  => {}", if v.ready() { format!("ready{skipped}") } else { "not ready".to_string() }));
    }
    if verdicts.is_empty() {
        println!("no RDMA port to check");
    }
    println!("ready: {}", if ready { "yes" } else { "no" });
}

fn to_json(verdicts: &[Verdict], group: Group, ready: bool) -> Json {
    let ports = verdicts
        .iter()
        .map(|v| {
            let checks = v
                .checks
                .iter()
                .map(|c| {
                    Json::Obj(vec![
                        ("name", Json::str(c.name)),
                        ("status", Json::str(c.status.text().to_ascii_lowercase())),
                        ("detail", Json::str(c.detail.clone())),
                        ("fix", Json::Arr(c.fix.iter().map(|f| Json::str(f.clone())).collect())),
                    ])
                })
                .collect();
            let mut fields = vec![
                ("device", Json::str(v.dev.clone())),
                ("port", Json::Num(i64::from(v.port))),
                ("netdev", Json::opt(v.netdev.clone())),
                ("link_layer", Json::str(v.link_layer)),
                ("qkey_viol_cntr", v.qkey_viol.map_or(Json::Null, |n| Json::Num(i64::from(n)))),
                ("ready", Json::Bool(v.ready())),
                ("skipped", Json::Num(v.skipped() as i64)),
                ("checks", Json::Arr(checks)),
            ];
            // InfiniBand only: a RoCE port's object is as it was.
            if let Some(sa) = &v.sa {
                let num = |n: Option<u32>| n.map_or(Json::Null, |n| Json::Num(i64::from(n)));
                fields.push((
                    "sa",
                    Json::Obj(vec![
                        ("mgid", Json::str(sa.mgid.clone())),
                        ("member", sa.member.map_or(Json::Null, Json::Bool)),
                        ("mlid", num(sa.record.map(|r| u32::from(r.mlid)))),
                        ("qkey", num(sa.record.map(|r| r.qkey))),
                    ]),
                ));
            }
            Json::Obj(fields)
        })
        .collect();
    Json::Obj(vec![("group", Json::str(group.text())), ("ready", Json::Bool(ready)), ("ports", Json::Arr(ports))])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::{DeviceLimits, PortInfo};
    use crate::table::{BY_ENTRY, Gid, Table};
    use rsverbs::abi::{IBV_GID_TYPE_ROCE_V2, IBV_LINK_LAYER_INFINIBAND};

    const LIMITS: DeviceLimits =
        DeviceLimits { max_mcast_grp: 8192, max_mcast_qp_attach: 56, max_total_mcast_qp_attach: 458752, phys_port_cnt: 1, bad_qkey_cntr: true };

    /// A port with one GID at index 0; no netdev (ifindex 0), as on InfiniBand.
    fn port(link_layer: u8, state: u32, qkey_viol_cntr: u32) -> Port {
        let mut raw = [0u8; 16];
        raw[0] = 0xfe;
        raw[1] = 0x80;
        raw[15] = 1;
        let gid_type = if link_layer == LINK_LAYER_ETHERNET { IBV_GID_TYPE_ROCE_V2 } else { IBV_GID_TYPE_IB };
        let sm_lid = u16::from(state == PORT_ACTIVE);
        Port {
            port: 1,
            info: PortInfo { state, gid_tbl_len: 1, link_layer, qkey_viol_cntr, lid: sm_lid, sm_lid },
            table: Table { slots: vec![Slot::Gid(Gid { index: 0, raw, gid_type, ifindex: 0 })], route: BY_ENTRY },
            default_type: IBV_GID_TYPE_ROCE_V2,
            rdma_cm: Vec::new(),
            perftest: None,
        }
    }

    fn statuses(v: &Verdict) -> Vec<(&'static str, &'static str)> {
        v.checks.iter().map(|c| (c.name, c.status.text())).collect()
    }

    /// A device name no machine has, so that netdev_of finds nothing in /sys.
    const DEV: &str = "rsverbs-test-ib0";

    const MGID: &str = "ff12:4001:ffff::f4d:a0a";

    /// An InfiniBand host where everything is in place: ib0 up with an
    /// address, P_Key 0xffff, and the SA has this port's record.
    fn healthy() -> IbFacts {
        let rec = ib::Record { mgid: MGID.parse::<Ipv6Addr>().unwrap().octets(), mlid: 0xc003, qkey: 0x0123_4567, pkey: 0xffff };
        IbFacts {
            gid: Some("fe80::1".parse::<Ipv6Addr>().unwrap().octets()),
            netdev: Some("ib0".into()),
            up: true,
            operstate: "up".into(),
            ipv4: vec![core::net::Ipv4Addr::new(10, 77, 0, 1)],
            pkey: Some(0xffff),
            mgid: rec.mgid,
            mgid_how: "rdma_cm's".into(),
            sa: Some(ib::Sa::Answer { group: Some(rec), port: Some(rec) }),
        }
    }

    fn ib(f: &IbFacts, state: u32) -> Verdict {
        let g = Group::parse("239.77.10.10").unwrap();
        ib_verdict(DEV, &LIMITS, &port(IBV_LINK_LAYER_INFINIBAND, state, 0), g, f)
    }

    #[test]
    fn an_infiniband_port_with_the_sa_record_is_ready_and_says_mlid_and_qkey() {
        let v = ib(&healthy(), PORT_ACTIVE);
        assert_eq!(
            statuses(&v),
            [("port", "ok"), ("ipoib", "ok"), ("pkey", "ok"), ("mgid", "ok"), ("membership", "ok"), ("limits", "ok"), ("qkey", "ok")]
        );
        assert!(v.ready());
        assert_eq!(v.skipped(), 0);
        assert_eq!(v.link_layer, "InfiniBand");
        assert!(v.checks[0].detail.starts_with("ACTIVE, link layer InfiniBand, LID 0x1, SM LID 0x1"), "{}", v.checks[0].detail);
        assert!(v.checks[4].detail.contains("MLID 0xc003, Q_Key 0x1234567, the Q_Key a sender must use"), "{}", v.checks[4].detail);

        let mut s = String::new();
        to_json(&[v], Group::parse("239.77.10.10").unwrap(), true).write(&mut s);
        assert!(s.contains(r#""link_layer":"InfiniBand","qkey_viol_cntr":0,"ready":true,"skipped":0,"checks":[{"name":"port","status":"ok""#), "{s}");
        assert!(s.contains(r#""sa":{"mgid":"ff12:4001:ffff::f4d:a0a","member":true,"mlid":49155,"qkey":19088743}}"#), "{s}");
    }

    #[test]
    fn each_infiniband_check_can_fail() {
        // No record at the SA; the group's record without this port.
        let mut f = healthy();
        f.sa = Some(ib::Sa::Answer { group: None, port: None });
        let v = ib(&f, PORT_ACTIVE);
        assert_eq!(statuses(&v)[4], ("membership", "FAIL"));
        assert!(v.checks[4].detail.contains("no MCMemberRecord") && v.checks[4].fix[0].contains("RSVERBS_MCAST_FABRICJOIN=1"), "{:?}", v.checks[4].fix);
        assert!(!v.ready());
        if let Some(ib::Sa::Answer { group, .. }) = &mut f.sa {
            *group = healthy().sa.and_then(|s| if let ib::Sa::Answer { group, .. } = s { group } else { None });
        }
        let v = ib(&f, PORT_ACTIVE);
        assert_eq!(statuses(&v)[4], ("membership", "FAIL"));
        assert!(v.checks[4].detail.contains("is not a member"), "{}", v.checks[4].detail);
        let mut s = String::new();
        to_json(&[v], Group::parse("239.77.10.10").unwrap(), false).write(&mut s);
        assert!(s.contains(r#""member":false,"mlid":49155"#), "{s}");

        // No IPoIB; down without an address; no carrier.
        let mut f = healthy();
        f.netdev = None;
        assert_eq!(statuses(&ib(&f, PORT_ACTIVE))[1], ("ipoib", "FAIL"));
        let mut f = healthy();
        f.up = false;
        f.ipv4.clear();
        let v = ib(&f, PORT_ACTIVE);
        assert_eq!(statuses(&v)[1], ("ipoib", "FAIL"));
        assert_eq!(v.checks[1].fix, ["ip link set ib0 up", "ip addr add ADDRESS/PREFIX dev ib0"]);
        let mut f = healthy();
        f.operstate = "down".into();
        assert_eq!(statuses(&ib(&f, PORT_ACTIVE))[1], ("ipoib", "warn"));

        // P_Keys: limited, invalid, unreadable.
        for (k, want) in [(Some(0x7fff), "warn"), (Some(0x8000), "FAIL"), (None, "FAIL"), (Some(0x8001), "ok")] {
            let mut f = healthy();
            f.pkey = k;
            assert_eq!(statuses(&ib(&f, PORT_ACTIVE))[2], ("pkey", want), "{k:?}");
        }

        // INIT: no subnet manager; the fix says so, and the SA is not asked.
        let mut f = healthy();
        f.sa = None;
        let v = ib(&f, 2);
        assert_eq!(statuses(&v)[0], ("port", "FAIL"));
        assert!(v.checks[0].fix[0].contains("opensm"), "{:?}", v.checks[0].fix);
        assert_eq!(statuses(&v)[4], ("membership", "skip"));
        // ACTIVE without an SM LID.
        let mut p = port(IBV_LINK_LAYER_INFINIBAND, PORT_ACTIVE, 0);
        p.info.sm_lid = 0;
        let v = ib_verdict(DEV, &LIMITS, &p, Group::parse("239.77.10.10").unwrap(), &f);
        assert_eq!(statuses(&v)[0], ("port", "FAIL"));
        assert!(v.checks[0].detail.contains("SM LID 0"), "{}", v.checks[0].detail);
    }

    #[test]
    fn without_saquery_membership_is_skipped_with_the_fix() {
        let mut f = healthy();
        f.sa = Some(ib::Sa::NoTool);
        let v = ib(&f, PORT_ACTIVE);
        assert_eq!(statuses(&v)[4], ("membership", "skip"));
        assert_eq!(v.checks[4].fix, ["apt install infiniband-diags"]);
        assert!(v.ready());
        assert_eq!(v.skipped(), 1);
        f.sa = Some(ib::Sa::Failed("saquery exited with 1: Failed to bind to the SA".into()));
        let v = ib(&f, PORT_ACTIVE);
        assert_eq!(statuses(&v)[4], ("membership", "skip"));
        assert!(v.checks[4].detail.contains("Failed to bind"), "{}", v.checks[4].detail);
    }

    #[test]
    fn infiniband_limits_and_qkey_still_count() {
        let g = Group::parse("ff0e::1:6").unwrap();
        // Through port_verdict on a device no machine has: no GID, no IPoIB.
        let none = DeviceLimits { max_mcast_grp: 0, ..LIMITS };
        let v = port_verdict(DEV, &none, &port(IBV_LINK_LAYER_INFINIBAND, PORT_ACTIVE, 3), g, "ff0e::1:6");
        assert_eq!(statuses(&v)[5..], [("limits", "FAIL"), ("qkey", "warn")]);
        assert_eq!(statuses(&v)[1], ("ipoib", "FAIL"));
        assert_eq!(statuses(&v)[4], ("membership", "skip"));
        assert_eq!(v.qkey_viol, Some(3));
        // The default broadcast's MGID for an IPv6 group (ipv6_ib_mc_map).
        assert!(v.checks[3].detail.starts_with("ff12:6001:ffff::1:6: "), "{}", v.checks[3].detail);
        assert!(!v.ready());
        // An IB MGID given is taken as it is.
        let v = port_verdict(DEV, &LIMITS, &port(IBV_LINK_LAYER_INFINIBAND, PORT_ACTIVE, 0), Group::parse(MGID).unwrap(), MGID);
        assert!(v.checks[3].detail.starts_with(&format!("{MGID}: the MGID given")), "{}", v.checks[3].detail);
    }

    #[test]
    fn a_roce_port_skips_nothing() {
        let g = Group::parse("239.1.1.1").unwrap();
        let v = port_verdict(DEV, &LIMITS, &port(LINK_LAYER_ETHERNET, PORT_ACTIVE, 0), g, "239.1.1.1");
        assert_eq!(v.skipped(), 0);
        assert_eq!(v.link_layer, "Ethernet");
        assert!(v.sa.is_none());
        let names: Vec<&str> = v.checks.iter().map(|c| c.name).collect();
        assert_eq!(names, ["port", "gid", "mgid", "membership", "filter", "rp_filter", "limits", "qkey"]);
        // No netdev: no GID with an address, no membership; the port is not ready.
        assert_eq!(v.checks[1].status.text(), "FAIL");
        assert!(!v.ready());
        let mut s = String::new();
        to_json(&[v], g, false).write(&mut s);
        assert!(!s.contains("\"sa\""), "{s}");
    }
}
