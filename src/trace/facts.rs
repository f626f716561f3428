//! What the trace and the hints look up, on the trace path only: a QP's
//! port, a device's multicast limits (both asked of the kernel through the
//! context's own route, as rdma-core's `ibv_query_qp`/`ibv_query_device`
//! would), and sysfs and /proc facts about ports and netdevs. The caller
//! saves and restores `errno`.

use crate::abi::ibv_device;
use crate::trace::format::c_field;
use crate::uverbs::{self, route::Key};

/// `enum ib_uverbs_write_cmds` (kernel include/uapi/rdma/ib_user_verbs.h).
const CMD_QUERY_DEVICE: u32 = 1;
const CMD_QUERY_QP: u32 = 25;
/// `IBV_QP_PORT` (verbs.h `enum ibv_qp_attr_mask`).
const IBV_QP_PORT: u32 = 1 << 5;

/// `struct ib_uverbs_query_qp` (16 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
struct QueryQpReq {
    response: u64,
    qp_handle: u32,
    attr_mask: u32,
}

/// `struct ib_uverbs_query_device` (8 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
struct QueryDeviceReq {
    response: u64,
}

/// `struct ib_uverbs_query_qp_resp` is 128 bytes; `port_num` is byte 116.
const QP_RESP_LEN: usize = 128;
const QP_RESP_PORT: usize = 116;
/// `struct ib_uverbs_query_device_resp` is 176 bytes; `max_mcast_grp`,
/// `max_mcast_qp_attach` and `max_total_mcast_qp_attach` are u32 at 132,
/// 136 and 140.
const DEV_RESP_LEN: usize = 176;

/// The port a QP is bound to: the kernel's `port_num` (QUERY_QP), which
/// is set from INIT on (kernel uverbs_cmd.c `ib_uverbs_query_qp`); for a
/// QP still in RESET (port 0) the device's only port when it has one.
pub fn qp_port(key: Key, handle: u32, dev: &ibv_device) -> Option<u32> {
    if key.fd >= 0 {
        let mut resp = [0u8; QP_RESP_LEN];
        let addr = resp.as_mut_ptr() as u64;
        let req = QueryQpReq { response: addr, qp_handle: handle, attr_mask: IBV_QP_PORT };
        if uverbs::run_write_cmd(key, CMD_QUERY_QP, req, Some((addr, QP_RESP_LEN as u16))).is_ok()
            && resp[QP_RESP_PORT] != 0
        {
            return Some(u32::from(resp[QP_RESP_PORT]));
        }
    }
    only_port(dev)
}

/// The device's port when `ports/` lists exactly one.
fn only_port(dev: &ibv_device) -> Option<u32> {
    let dir = std::fs::read_dir(format!("{}/ports", c_field(&dev.ibdev_path))).ok()?;
    let ports: Vec<u32> = dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
    (ports.len() == 1).then(|| ports[0])
}

/// The device's (`max_mcast_grp`, `max_mcast_qp_attach`,
/// `max_total_mcast_qp_attach`), from QUERY_DEVICE.
pub fn mcast_limits(key: Key) -> Option<(u32, u32, u32)> {
    if key.fd < 0 {
        return None;
    }
    let mut resp = [0u8; DEV_RESP_LEN];
    let addr = resp.as_mut_ptr() as u64;
    uverbs::run_write_cmd(key, CMD_QUERY_DEVICE, QueryDeviceReq { response: addr }, Some((addr, DEV_RESP_LEN as u16)))
        .ok()?;
    let at = |o: usize| u32::from_ne_bytes([resp[o], resp[o + 1], resp[o + 2], resp[o + 3]]);
    Some((at(132), at(136), at(140)))
}

/// A sysfs attribute below the device, trimmed.
fn attr(dev: &ibv_device, rel: &str) -> Option<String> {
    let s = std::fs::read_to_string(format!("{}/{rel}", c_field(&dev.ibdev_path))).ok()?;
    let t = s.trim();
    (!t.is_empty()).then(|| t.to_owned())
}

/// `ports/N/link_layer` is `Ethernet` (RoCE, iWARP) or `InfiniBand`
/// (kernel sysfs.c `show_port_link_layer`).
pub fn is_ethernet(dev: &ibv_device, port: u32) -> bool {
    attr(dev, &format!("ports/{port}/link_layer")).is_some_and(|l| l == "Ethernet")
}

/// The netdev of GID `index` (kernel sysfs.c `print_ndev`: empty entries
/// and IB ports have none).
pub fn gid_netdev(dev: &ibv_device, port: u32, index: u32) -> Option<String> {
    attr(dev, &format!("ports/{port}/gid_attrs/ndevs/{index}"))
}

/// The netdev of the port's GIDs: that of the first populated entry (a
/// RoCE port's default GIDs come first, kernel roce_gid_mgmt.c).
pub fn port_netdev(dev: &ibv_device, port: u32) -> Option<String> {
    (0..16).find_map(|i| gid_netdev(dev, port, i))
}

/// Whether `netdev` has joined the group of `mgid` at IP level: for a
/// v4-mapped MGID `/proc/net/igmp` (kernel igmp.c `igmp_mc_seq_show`:
/// a device line, then one line per group, the address as `%08X` of the
/// __be32), else `/proc/net/igmp6` (mcast.c `igmp6_mc_seq_show`: index,
/// device, the address as 32 hex digits). None when neither can be read.
pub fn ip_joined(netdev: &str, mgid: &[u8; 16]) -> Option<bool> {
    match crate::trace::format::v4_mapped(mgid) {
        Some(v4) => Some(igmp_has(&std::fs::read_to_string("/proc/net/igmp").ok()?, netdev, v4.octets())),
        None => Some(igmp6_has(&std::fs::read_to_string("/proc/net/igmp6").ok()?, netdev, mgid)),
    }
}

/// `/proc/net/igmp` lists `group` under `netdev`.
pub fn igmp_has(text: &str, netdev: &str, group: [u8; 4]) -> bool {
    let mut in_dev = false;
    for line in text.lines().skip(1) {
        if !line.starts_with(['\t', ' ']) {
            in_dev = line.split_whitespace().nth(1) == Some(netdev);
        } else if in_dev {
            let hex = line.split_whitespace().next().and_then(|h| u32::from_str_radix(h, 16).ok());
            if hex.is_some_and(|v| v.to_ne_bytes() == group) {
                return true;
            }
        }
    }
    false
}

/// `/proc/net/igmp6` lists `group` on `netdev`.
pub fn igmp6_has(text: &str, netdev: &str, group: &[u8; 16]) -> bool {
    let want: String = group.iter().map(|b| format!("{b:02x}")).collect();
    text.lines().any(|l| {
        let mut f = l.split_whitespace();
        f.nth(1) == Some(netdev) && f.next().is_some_and(|g| g.eq_ignore_ascii_case(&want))
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
