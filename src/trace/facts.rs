//! What the trace and the hints look up, on the trace path only: a
//! device's multicast limits (asked of the kernel through the context's own
//! route, as rdma-core's `ibv_query_device` would) and /proc facts about
//! IP-level membership; a QP's port and the port's netdevs are in
//! [`crate::port`] (shared with `RSVERBS_MCAST_IPJOIN`). The caller saves
//! and restores `errno`.
#![forbid(unsafe_code)]

pub use crate::port::{QpFacts, gid_netdev, is_ethernet, port_netdev, qp_facts};
use crate::uverbs::write::{CMD_QUERY_DEVICE, QueryDeviceReq, QueryDeviceResp};
use crate::uverbs::{self, route::Key};
use core::fmt::Write;

/// The device's (`max_mcast_grp`, `max_mcast_qp_attach`,
/// `max_total_mcast_qp_attach`), from QUERY_DEVICE.
pub fn mcast_limits(key: Key) -> Option<(u32, u32, u32)> {
    if key.fd < 0 {
        return None;
    }
    let mut resp = QueryDeviceResp { bytes: [0; 176] };
    let addr = (&mut resp as *mut QueryDeviceResp) as u64;
    uverbs::run_write_cmd(key, CMD_QUERY_DEVICE, QueryDeviceReq { response: addr }, Some((addr, 176))).ok()?;
    // `max_mcast_grp`, `max_mcast_qp_attach`, `max_total_mcast_qp_attach`:
    // the u32 at 132, 136 and 140 of `struct ib_uverbs_query_device_resp`.
    Some((resp.u32_at(132), resp.u32_at(136), resp.u32_at(140)))
}

/// The port's `qkey_viol_cntr` (QUERY_PORT, as rdma-core's
/// `ibv_query_port` asks it): the datagrams the port dropped for a Q_Key
/// other than the receiving QP's (rxe_recv.c `check_keys` →
/// `set_qkey_viol_cntr`).
pub fn qkey_viol(key: Key, port: u32) -> Option<u32> {
    if key.fd < 0 {
        return None;
    }
    crate::sysfs::query_port(key, port).ok().map(|r| r.qkey_viol_cntr())
}

/// [`qkey_viol`] at exit, through the fd the context had at the attach:
/// only when the context's route is still known and the fd is still a
/// uverbs device (a program may have closed the context, and the number
/// may name another file since).
pub fn qkey_viol_at_exit(ctx: usize, fd: i32, port: u32) -> Option<u32> {
    let key = Key { ctx, fd };
    if fd < 0 || crate::uverbs::route::peek(key).is_none() || !crate::uverbs::route::is_uverbs_chardev(fd) {
        return None;
    }
    qkey_viol(key, port)
}

/// Whether `netdev` has joined the group of `mgid` at IP level: for a
/// v4-mapped MGID `/proc/net/igmp` (kernel igmp.c `igmp_mc_seq_show`:
/// a device line, then one line per group, the address as `%08X` of the
/// __be32), else `/proc/net/igmp6` (mcast.c `igmp6_mc_seq_show`: index,
/// device, the address as 32 hex digits). None when neither can be read.
pub fn ip_joined(netdev: &str, mgid: &[u8; 16]) -> Option<bool> {
    match crate::mgid::v4_mapped(mgid) {
        Some(v4) => Some(igmp_has(&crate::os::read_text(c"/proc/net/igmp")?, netdev, v4.octets())),
        None => Some(igmp6_has(&crate::os::read_text(c"/proc/net/igmp6")?, netdev, mgid)),
    }
}

/// `/proc/net/igmp` lists `group` under `netdev`.
pub fn igmp_has(text: &str, netdev: &str, group: [u8; 4]) -> bool {
    let mut in_dev = false;
    for line in text.lines().skip(1) {
        if !line.starts_with(['\t', ' ']) {
            in_dev = line.split_ascii_whitespace().nth(1) == Some(netdev);
        } else if in_dev {
            let hex = line.split_ascii_whitespace().next().and_then(|h| u32::from_str_radix(h, 16).ok());
            if hex.is_some_and(|v| v.to_ne_bytes() == group) {
                return true;
            }
        }
    }
    false
}

/// `/proc/net/igmp6` lists `group` on `netdev`.
pub fn igmp6_has(text: &str, netdev: &str, group: &[u8; 16]) -> bool {
    let mut want = crate::os::Text::<32>::new();
    for b in group {
        let _ = write!(want, "{b:02x}");
    }
    let want = want.as_bytes();
    text.lines().any(|l| {
        let mut f = l.split_ascii_whitespace();
        f.nth(1) == Some(netdev) && f.next().is_some_and(|g| g.as_bytes().eq_ignore_ascii_case(want))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured in the test bed (6.1): dummy0 with 224.0.0.1 and 239.1.1.1.
    const IGMP: &str = "Idx\tDevice    : Count Querier\tGroup    Users Timer\tReporter\n\
        1\tlo        :     1      V3\n\
        \t\t\t\t010000E0     1 0:00000000\t\t0\n\
        3\tdummy0    :     2      V3\n\
        \t\t\t\t010101EF     1 0:00000000\t\t0\n\
        \t\t\t\t010000E0     1 0:00000000\t\t0\n";
    const IGMP6: &str = "1    lo              ff020000000000000000000000000001     1 0000000C 0\n\
        3    dummy0          ff0e0000000000000000000000000101     1 00000004 0\n";

    #[test]
    fn igmp_membership_per_device() {
        assert!(igmp_has(IGMP, "dummy0", [239, 1, 1, 1]));
        assert!(!igmp_has(IGMP, "lo", [239, 1, 1, 1]));
        assert!(igmp_has(IGMP, "lo", [224, 0, 0, 1]));
        assert!(!igmp_has(IGMP, "dummy0", [239, 1, 1, 2]));
    }

    #[test]
    fn igmp6_membership_per_device() {
        let g: [u8; 16] = "ff0e::101".parse::<core::net::Ipv6Addr>().expect("address").octets();
        assert!(igmp6_has(IGMP6, "dummy0", &g));
        assert!(!igmp6_has(IGMP6, "lo", &g));
    }
}
