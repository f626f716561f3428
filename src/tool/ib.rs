//! What `doctor` reads of an InfiniBand port beyond `ibv_query_port`: its
//! IPoIB netdev and that netdev's IPv4 addresses and broadcast address, the
//! P_Key at index 0, and the SA's MCMemberRecords of a group, asked through
//! infiniband-diags' `saquery` (no MAD code and no new dependency here).

use crate::net;
use core::net::{Ipv4Addr, Ipv6Addr};
use std::process::Command;

/// `ARPHRD_INFINIBAND` (include/uapi/linux/if_arp.h): an IPoIB netdev's
/// /sys/class/net/NAME/type.
const ARPHRD_INFINIBAND: &str = "32";

/// The port's GID 0 (/sys/class/infiniband/DEV/ports/P/gids/0).
pub fn port_gid(dev: &str, port: u8) -> Option<[u8; 16]> {
    net::read(&format!("/sys/class/infiniband/{dev}/ports/{port}/gids/0")).trim().parse::<Ipv6Addr>().ok().map(|a| a.octets())
}

/// The P_Key at index 0 of the port's table (sysfs `pkeys/0`, "0xffff").
pub fn pkey0(dev: &str, port: u8) -> Option<u16> {
    let t = net::read(&format!("/sys/class/infiniband/{dev}/ports/{port}/pkeys/0"));
    u16::from_str_radix(t.trim().trim_start_matches("0x"), 16).ok()
}

/// Whether the IPoIB hardware address `addr` (`80:00:04:04:fe:80:…`, 20
/// bytes: the QPN, then the port GID, ipoib_main.c `ipoib_intf_init`
/// copying the GID to `dev_addr + 4`) carries `gid` in bytes 4 to 19.
pub fn hw_has_gid(addr: &str, gid: &[u8; 16]) -> bool {
    hw20(addr).is_some_and(|b| b[4..] == gid[..])
}

/// A 20-byte IPoIB address ("xx:xx:…") as bytes.
pub fn hw20(addr: &str) -> Option<[u8; 20]> {
    let mut b = [0u8; 20];
    let mut n = 0;
    for x in addr.trim().split(':') {
        *b.get_mut(n)? = u8::from_str_radix(x, 16).ok()?;
        n += 1;
    }
    (n == 20).then_some(b)
}

/// The IPoIB netdevs of the port whose GID is `gid`, in this network
/// namespace, by name: type 32 and a hardware address that ends in the GID,
/// as the library finds them (src/port.rs `ipoib_netdev`). A parent and its
/// P_Key children (ib0.8001) share the GID; the parent comes first.
pub fn ipoib_netdevs(gid: &[u8; 16]) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/sys/class/net") else { return Vec::new() };
    let mut v: Vec<String> = dir
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            net::read(&format!("/sys/class/net/{n}/type")).trim() == ARPHRD_INFINIBAND
                && hw_has_gid(&net::read(&format!("/sys/class/net/{n}/address")), gid)
        })
        .collect();
    v.sort_by(|a, b| (a.len(), a).cmp(&(b.len(), b)));
    v
}

/// The netdev's broadcast address (/sys/class/net/NAME/broadcast): for
/// IPoIB the QPN 0xffffff and the broadcast group's MGID, whose scope and
/// P_Key rdma_cm copies into an IP group's MGID.
pub fn broadcast(netdev: &str) -> Option<[u8; 20]> {
    hw20(&net::read(&format!("/sys/class/net/{netdev}/broadcast")))
}

/// The MGID rdma_cm builds on the IPoIB netdev whose broadcast address is
/// `bcast`: `mgid` (the library's, for the default partition and scope 2)
/// with the broadcast MGID's scope and P_Key (cma.c `cma_set_mgid` through
/// include/net/ip.h `ip_ib_mc_map` and include/net/if_inet6.h
/// `ipv6_ib_mc_map`: byte 5 of the map `0x10 | (broadcast[5] & 0xf)`,
/// bytes 8 and 9 the broadcast's P_Key; the MGID is the map from byte 4).
/// An SA-assigned MGID (`ff1x:a01b::`) is used as it is.
pub fn mgid_on(mut mgid: [u8; 16], bcast: &[u8; 20]) -> [u8; 16] {
    if mgid[0] == 0xff && matches!(mgid[2..4], [0x40, 0x01] | [0x60, 0x01]) {
        mgid[1] = 0x10 | (bcast[5] & 0xf);
        mgid[4] = bcast[8];
        mgid[5] = bcast[9];
    }
    mgid
}

/// Whether GROUP, as given, is itself an InfiniBand MGID (ff1x: with an
/// IPoIB or RDMA CM signature, 401b/4001 IPv4, 601b/6001 IPv6, or an
/// SA-assigned a01b): doctor takes it as it is, as `mckey -M` (AF_IB) does.
pub fn is_ib_mgid(o: &[u8; 16]) -> bool {
    o[0] == 0xff && o[1] & 0xf0 == 0x10 && matches!(o[2..4], [0x40, 0x1b] | [0x40, 0x01] | [0x60, 0x1b] | [0x60, 0x01] | [0xa0, 0x1b])
}

/// One MCMemberRecord as `saquery` prints it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    pub mgid: [u8; 16],
    pub mlid: u16,
    pub qkey: u32,
    pub pkey: u16,
}

/// The records of `saquery ... MCMR` ("MCMember Record dump:", then one
/// "\t\tNAME....VALUE" line per field: infiniband-diags saquery.c
/// `dump_one_mcmember_record`).
pub fn parse_mcmr(text: &str) -> Vec<Record> {
    let mut out = Vec::new();
    let mut cur: Option<Record> = None;
    let hex = |v: &str| u32::from_str_radix(v.trim_start_matches("0x"), 16).ok();
    for line in text.lines() {
        if line.starts_with("MCMember Record dump:") {
            out.extend(cur.take());
            cur = Some(Record { mgid: [0; 16], mlid: 0, qkey: 0, pkey: 0 });
            continue;
        }
        let Some(r) = cur.as_mut() else { continue };
        let l = line.trim();
        let Some(dots) = l.find("..") else { continue };
        let (k, v) = (&l[..dots], l[dots..].trim_start_matches('.').trim());
        match k {
            "MGID" => r.mgid = v.parse::<Ipv6Addr>().map_or([0; 16], |a| a.octets()),
            "mlid" => r.mlid = hex(v).unwrap_or(0) as u16,
            "qkey" => r.qkey = hex(v).unwrap_or(0),
            "pkey" => r.pkey = hex(v).unwrap_or(0) as u16,
            _ => {}
        }
    }
    out.extend(cur);
    out
}

/// What the SA says of a group, asked from one port.
#[derive(Debug, PartialEq, Eq)]
pub enum Sa {
    /// No saquery on this host.
    NoTool,
    /// saquery ran and failed: its exit status and first line on stderr.
    Failed(String),
    /// The group's record (None: no record, nobody joined), and the port's
    /// own (None: the port is not a member).
    Answer { group: Option<Record>, port: Option<Record> },
}

/// `saquery`: in PATH, else where infiniband-diags installs it (/usr/sbin
/// is not in every user's PATH).
pub fn saquery_path() -> Option<String> {
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':')
        .filter(|d| !d.is_empty())
        .chain(["/usr/sbin", "/sbin"])
        .map(|d| format!("{d}/saquery"))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()))
}

/// Asks the SA, from DEV's port, for the MCMemberRecords of `mgid`: the
/// group's, then the one of the port whose GID is `gid`. Both as an
/// untrusted requester (SM_Key 0, saquery's default): opensm answers such
/// a query with the group's record, and with a PortGID in the component
/// mask only when that port is a member, zeroing PortGID and JoinState in
/// what it returns (opensm osm_sa_mcmember_record.c `mcmr_by_comp_mask`,
/// `mcmr_query_mgrp`; IBA 15.2.5.17).
pub fn ask_sa(dev: &str, port: u8, mgid: &[u8; 16], gid: &[u8; 16]) -> Sa {
    let Some(sq) = saquery_path() else { return Sa::NoTool };
    let run = |extra: &[String]| -> Result<Vec<Record>, String> {
        let mut c = Command::new(&sq);
        c.args(["-C", dev, "-P", &port.to_string(), "--mgid", &Ipv6Addr::from(*mgid).to_string()]).args(extra).arg("MCMR");
        let o = c.output().map_err(|e| format!("{sq}: {e}"))?;
        if !o.status.success() {
            let err = String::from_utf8_lossy(&o.stderr);
            let first = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string();
            return Err(format!("{sq} exited with {}: {first}", o.status.code().map_or("a signal".into(), |c| c.to_string())));
        }
        Ok(parse_mcmr(&String::from_utf8_lossy(&o.stdout)).into_iter().filter(|r| r.mgid == *mgid).collect())
    };
    let group = match run(&[]) {
        Ok(v) => v.into_iter().next(),
        Err(e) => return Sa::Failed(e),
    };
    let port = match group {
        None => None,
        Some(_) => match run(&["--gid".into(), Ipv6Addr::from(*gid).to_string()]) {
            Ok(v) => v.into_iter().next(),
            Err(e) => return Sa::Failed(e),
        },
    };
    Sa::Answer { group, port }
}

/// The IPv4 addresses of `netdev` (getifaddrs: no privilege needed).
pub fn ipv4_addrs(netdev: &str) -> Vec<Ipv4Addr> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = core::ptr::null_mut();
    // SAFETY: head is writable; freed below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut p = head;
    while !p.is_null() {
        // SAFETY: p is an entry of the list getifaddrs returned, alive until freeifaddrs.
        let e = unsafe { &*p };
        p = e.ifa_next;
        if e.ifa_addr.is_null() || e.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string of the entry.
        let name = unsafe { core::ffi::CStr::from_ptr(e.ifa_name) };
        // SAFETY: ifa_addr is non-NULL and points to a sockaddr of the entry.
        if name.to_bytes() != netdev.as_bytes() || i32::from(unsafe { (*e.ifa_addr).sa_family }) != libc::AF_INET {
            continue;
        }
        // SAFETY: the family is AF_INET, so the address is a sockaddr_in.
        let sin = unsafe { &*e.ifa_addr.cast::<libc::sockaddr_in>() };
        out.push(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)));
    }
    // SAFETY: head came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipoib_address_carries_the_port_gid() {
        let gid: [u8; 16] = "fe80::200:53:4942:1".parse::<Ipv6Addr>().unwrap().octets();
        assert!(hw_has_gid("80:00:00:48:fe:80:00:00:00:00:00:00:02:00:00:53:49:42:00:01\n", &gid));
        assert!(!hw_has_gid("80:00:00:48:fe:80:00:00:00:00:00:00:02:00:00:53:49:42:01:01", &gid));
        assert!(!hw_has_gid("52:54:00:12:34:56", &gid));
        assert!(!hw_has_gid("80:00:00:48:fe:80:00:00:00:00:00:00:02:00:00:53:49:42:00:01:00", &gid));
    }

    #[test]
    fn the_mgid_takes_the_broadcast_scope_and_pkey() {
        let m: [u8; 16] = "ff12:4001:ffff::f4d:808".parse::<Ipv6Addr>().unwrap().octets();
        // IPoIB on P_Key 0x8001, scope 5 (site-local).
        let b = hw20("00:ff:ff:ff:ff:15:40:1b:80:01:00:00:00:00:00:00:ff:ff:ff:ff").unwrap();
        assert_eq!(Ipv6Addr::from(mgid_on(m, &b)).to_string(), "ff15:4001:8001::f4d:808");
        // The default broadcast leaves it as it is.
        let d = hw20("00:ff:ff:ff:ff:12:40:1b:ff:ff:00:00:00:00:00:00:ff:ff:ff:ff").unwrap();
        assert_eq!(mgid_on(m, &d), m);
        let sa: [u8; 16] = "ff12:a01b:ffff::1".parse::<Ipv6Addr>().unwrap().octets();
        assert_eq!(mgid_on(sa, &b), sa);
        assert!(is_ib_mgid(&m) && is_ib_mgid(&sa));
        assert!(!is_ib_mgid(&"ff0e::1:6".parse::<Ipv6Addr>().unwrap().octets()));
    }

    #[test]
    fn parses_saquery_mcmr() {
        let t = "MCMember Record dump:\n\t\tMGID....................ff12:4001:ffff::f4d:a0a\n\t\tPortGid.................::\n\
                 \t\tqkey....................0x1234567\n\t\tmlid....................0xc003\n\t\tmtu.....................0x84\n\
                 \t\tTClass..................0x0\n\t\tpkey....................0xffff\n\t\trate....................0x83\n\
                 MCMember Record dump:\n\t\tMGID....................ff12:401b:ffff::ffff:ffff\n\t\tqkey....................0xb1b\n\t\tmlid....................0xc000\n";
        let r = parse_mcmr(t);
        assert_eq!(r.len(), 2);
        assert_eq!(Ipv6Addr::from(r[0].mgid).to_string(), "ff12:4001:ffff::f4d:a0a");
        assert_eq!((r[0].mlid, r[0].qkey, r[0].pkey), (0xc003, 0x0123_4567, 0xffff));
        assert_eq!((r[1].mlid, r[1].qkey), (0xc000, 0xb1b));
        assert!(parse_mcmr("").is_empty());
    }
}
