//! `rsverbs doctor GROUP`: can this host receive GROUP on a RoCE port?
//! Each check gives a status and, for a problem, the fix. On an InfiniBand
//! port the RoCE checks say `skip` with the reason (they do not apply, or
//! are not checked there yet); port, limits and qkey apply to both.

use crate::ffi::{self, Device, LINK_LAYER_ETHERNET, PORT_ACTIVE};
use crate::gids::{self, Port};
use crate::group::{Group, perftest_arg};
use crate::json::Json;
use crate::net;
use crate::table::{Slot, printable, type_name};
use rsverbs::select::rules::{Family, Filter, NO_VLAN};
use core::net::Ipv6Addr;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    Warn,
    Fail,
    /// The check does not apply to the port, or cannot be made there yet
    /// (InfiniBand); the detail says which and why. Not a failure.
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
    pub checks: Vec<Check>,
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

/// The checks of a RoCE port that say `skip` on an InfiniBand port, and why:
/// "n/a" when the check does not apply there, "not checked" when it would,
/// but this command does not make it yet.
pub const IB_SKIPS: [(&str, &str); 5] = [
    ("gid", "n/a on InfiniBand: the port GID is not an IP address, and RoCE GID types and netdev addresses do not apply"),
    (
        "mgid",
        "not checked on InfiniBand yet: rdma_cm derives an IPv4 group's MGID from the IPoIB broadcast address and the P_Key (cma.c cma_set_mgid)",
    ),
    (
        "membership",
        "not checked on InfiniBand yet: the subnet manager admits members (rdma_cm join: an SA MCMemberRecord), which this command does not query",
    ),
    ("filter", "n/a on InfiniBand: no Ethernet MAC filter on the path of a datagram to a QP"),
    ("rp_filter", "n/a on InfiniBand: the IP layer does not see datagrams received by a QP"),
];

/// Every check for GROUP on one port of device `dev`.
pub fn port_verdict(dev: &str, limits: &ffi::DeviceLimits, p: &Port, group: Group, given: &str) -> Verdict {
    let netdev = netdev_of(dev, p);
    let nd = netdev.clone().unwrap_or_else(|| "NETDEV".into());
    let mut checks = Vec::new();

    // Port state and link layer.
    let roce = p.info.link_layer == LINK_LAYER_ETHERNET;
    let ll = if roce { "Ethernet" } else { "InfiniBand" };
    let state = ffi::port_state_name(p.info.state);
    let nd_state = netdev.as_deref().map_or("?".to_string(), net::operstate);
    let detail = format!("{state}, link layer {ll}, {nd} operstate {nd_state}");
    checks.push(if p.info.state == PORT_ACTIVE {
        check("port", Status::Ok, detail, vec![])
    } else if roce {
        check("port", Status::Fail, format!("{detail}: the port must be ACTIVE"), vec![format!("ip link set {nd} up")])
    } else {
        check(
            "port",
            Status::Fail,
            format!("{detail}: the port must be ACTIVE (INIT: no subnet manager has configured it)"),
            vec![format!("ibstat {dev} {}; for INIT, run a subnet manager (opensm) on the fabric", p.port)],
        )
    });

    if roce {
        checks.extend(roce_checks(p, group, given, netdev.as_deref(), &nd));
    } else {
        checks.extend(IB_SKIPS.iter().map(|&(name, why)| check(name, Status::Skip, why.into(), vec![])));
    }
    checks.extend(device_checks(limits, p));
    Verdict { dev: dev.to_string(), port: p.port, netdev, link_layer: ll, qkey_viol: limits.bad_qkey_cntr.then_some(p.info.qkey_viol_cntr), checks }
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
            Json::Obj(vec![
                ("device", Json::str(v.dev.clone())),
                ("port", Json::Num(i64::from(v.port))),
                ("netdev", Json::opt(v.netdev.clone())),
                ("link_layer", Json::str(v.link_layer)),
                ("qkey_viol_cntr", v.qkey_viol.map_or(Json::Null, |n| Json::Num(i64::from(n)))),
                ("ready", Json::Bool(v.ready())),
                ("skipped", Json::Num(v.skipped() as i64)),
                ("checks", Json::Arr(checks)),
            ])
        })
        .collect();
    Json::Obj(vec![("group", Json::str(group.text())), ("ready", Json::Bool(ready)), ("ports", Json::Arr(ports))])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::{DeviceLimits, PortInfo};
    use crate::table::{BY_ENTRY, Gid, Table};
    use rsverbs::abi::{IBV_GID_TYPE_IB, IBV_GID_TYPE_ROCE_V2, IBV_LINK_LAYER_INFINIBAND};

    const LIMITS: DeviceLimits =
        DeviceLimits { max_mcast_grp: 8192, max_mcast_qp_attach: 56, max_total_mcast_qp_attach: 458752, phys_port_cnt: 1, bad_qkey_cntr: true };

    /// A port with one GID at index 0; no netdev (ifindex 0), as on InfiniBand.
    fn port(link_layer: u8, state: u32, qkey_viol_cntr: u32) -> Port {
        let mut raw = [0u8; 16];
        raw[0] = 0xfe;
        raw[1] = 0x80;
        raw[15] = 1;
        let gid_type = if link_layer == LINK_LAYER_ETHERNET { IBV_GID_TYPE_ROCE_V2 } else { IBV_GID_TYPE_IB };
        Port {
            port: 1,
            info: PortInfo { state, gid_tbl_len: 1, link_layer, qkey_viol_cntr },
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

    #[test]
    fn an_active_infiniband_port_fails_no_check_and_says_what_it_skips() {
        let g = Group::parse("239.1.1.1").unwrap();
        let v = port_verdict(DEV, &LIMITS, &port(IBV_LINK_LAYER_INFINIBAND, PORT_ACTIVE, 0), g, "239.1.1.1");
        assert_eq!(
            statuses(&v),
            [("port", "ok"), ("gid", "skip"), ("mgid", "skip"), ("membership", "skip"), ("filter", "skip"), ("rp_filter", "skip"), ("limits", "ok"), ("qkey", "ok")]
        );
        assert!(v.ready());
        assert_eq!(v.skipped(), 5);
        assert_eq!(v.link_layer, "InfiniBand");
        for c in v.checks.iter().filter(|c| c.status == Status::Skip) {
            assert!(c.detail.starts_with("n/a on InfiniBand: ") || c.detail.starts_with("not checked on InfiniBand yet: "), "{}", c.detail);
        }
        assert!(v.checks[0].detail.starts_with("ACTIVE, link layer InfiniBand"), "{}", v.checks[0].detail);

        let mut s = String::new();
        to_json(&[v], g, true).write(&mut s);
        assert!(s.contains(r#""link_layer":"InfiniBand","qkey_viol_cntr":0,"ready":true,"skipped":5,"checks":[{"name":"port","status":"ok""#), "{s}");
        assert!(s.contains(r#"{"name":"gid","status":"skip","detail":"n/a on InfiniBand: "#), "{s}");
    }

    #[test]
    fn infiniband_checks_that_apply_still_fail_or_warn() {
        let g = Group::parse("ff0e::1:6").unwrap();
        // INIT: no subnet manager; the fix says so.
        let v = port_verdict(DEV, &LIMITS, &port(IBV_LINK_LAYER_INFINIBAND, 2, 0), g, "ff0e::1:6");
        assert_eq!(v.checks[0].status.text(), "FAIL");
        assert!(v.checks[0].fix[0].contains("opensm"), "{:?}", v.checks[0].fix);
        assert!(!v.ready());
        // Q_Key violations and a device without multicast count on InfiniBand too.
        let none = DeviceLimits { max_mcast_grp: 0, ..LIMITS };
        let v = port_verdict(DEV, &none, &port(IBV_LINK_LAYER_INFINIBAND, PORT_ACTIVE, 3), g, "ff0e::1:6");
        assert_eq!(statuses(&v)[6..], [("limits", "FAIL"), ("qkey", "warn")]);
        assert_eq!(v.qkey_viol, Some(3));
        assert!(!v.ready());
    }

    #[test]
    fn a_roce_port_skips_nothing() {
        let g = Group::parse("239.1.1.1").unwrap();
        let v = port_verdict(DEV, &LIMITS, &port(LINK_LAYER_ETHERNET, PORT_ACTIVE, 0), g, "239.1.1.1");
        assert_eq!(v.skipped(), 0);
        assert_eq!(v.link_layer, "Ethernet");
        let names: Vec<&str> = v.checks.iter().map(|c| c.name).collect();
        assert_eq!(names, ["port", "gid", "mgid", "membership", "filter", "rp_filter", "limits", "qkey"]);
        // No netdev: no GID with an address, no membership; the port is not ready.
        assert_eq!(v.checks[1].status.text(), "FAIL");
        assert!(!v.ready());
    }
}
