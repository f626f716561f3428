//! `rsverbs doctor GROUP`: can this host receive GROUP on a RoCE port?
//! Each check gives a status and, for a problem, the fix.

use crate::ffi::{self, Device, LINK_LAYER_ETHERNET, PORT_ACTIVE};
use crate::gids::{self, Port};
use crate::group::{Group, perftest_arg};
use crate::json::Json;
use crate::net;
use crate::table::{Slot, type_name};
use rsverbs::select::rules::{Family, Filter, NO_VLAN};
use core::net::Ipv6Addr;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

impl Status {
    fn text(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
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
    /// The port's `qkey_viol_cntr`, when the device counts (BAD_QKEY_CNTR).
    pub qkey_viol: Option<u32>,
    pub checks: Vec<Check>,
}

impl Verdict {
    pub fn ready(&self) -> bool {
        self.checks.iter().all(|c| c.status != Status::Fail)
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

/// Every check for GROUP on one port.
pub fn port_verdict(d: &Device, limits: &ffi::DeviceLimits, p: &Port, group: Group, given: &str) -> Verdict {
    let netdev = netdev_of(&d.name, p);
    let nd = netdev.clone().unwrap_or_else(|| "NETDEV".into());
    let mut checks = Vec::new();

    // Port state and link layer.
    let ll = if p.info.link_layer == LINK_LAYER_ETHERNET { "Ethernet" } else { "InfiniBand" };
    let state = ffi::port_state_name(p.info.state);
    let nd_state = netdev.as_deref().map_or("?".to_string(), net::operstate);
    let detail = format!("{state}, link layer {ll}, {nd} operstate {nd_state}");
    checks.push(if p.info.link_layer != LINK_LAYER_ETHERNET {
        check("port", Status::Fail, format!("{detail}: doctor checks RoCE (Ethernet) ports; on InfiniBand the SM admits members (rdma_cm join)"), vec![])
    } else if p.info.state != PORT_ACTIVE {
        check("port", Status::Fail, format!("{detail}: the port must be ACTIVE"), vec![format!("ip link set {nd} up")])
    } else {
        check("port", Status::Ok, detail, vec![])
    });

    // A GID of the default RoCE type, of the group's family, on the netdev.
    let want_v4 = matches!(group, Group::V4(_));
    let ifindex = netdev.as_deref().map(ifindex_of).unwrap_or(0);
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
        Group::V4(a) => (netdev.as_deref().is_some_and(|n| net::igmp_joined(&net::read("/proc/net/igmp"), n, a)), "/proc/net/igmp"),
        Group::V6(o) => (netdev.as_deref().is_some_and(|n| net::igmp6_joined(&net::read("/proc/net/igmp6"), n, &o)), "/proc/net/igmp6"),
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
    let flags = netdev.as_deref().map_or(0, net::flags);
    let mac = group.mac();
    let mtxt = net::mac_text(&mac);
    let listed = netdev.as_deref().is_some_and(|n| net::mac_listed(&net::read("/proc/net/dev_mcast"), n, &mac));
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
            let (a, dv) = net::rp_filter(&nd);
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
    let qkey_viol = limits.bad_qkey_cntr.then_some(n);
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

    Verdict { dev: d.name.clone(), port: p.port, netdev, qkey_viol, checks }
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
                verdicts.push(port_verdict(d, &limits, &pt, group, given));
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
    for v in verdicts {
        println!("{} port {} (netdev {}), group {}:", v.dev, v.port, v.netdev.as_deref().unwrap_or("?"), group.text());
        for c in &v.checks {
            println!("  {:<5} {:<11} {}", c.status.text(), c.name, c.detail);
            for f in &c.fix {
                println!("        fix: {f}");
            }
        }
        println!("  => {}", if v.ready() { "ready" } else { "not ready" });
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
                ("qkey_viol_cntr", v.qkey_viol.map_or(Json::Null, |n| Json::Num(i64::from(n)))),
                ("ready", Json::Bool(v.ready())),
                ("checks", Json::Arr(checks)),
            ])
        })
        .collect();
    Json::Obj(vec![("group", Json::str(group.text())), ("ready", Json::Bool(ready)), ("ports", Json::Arr(ports))])
}
