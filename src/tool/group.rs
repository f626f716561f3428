//! GROUP as `doctor` takes it: an IPv4 or IPv6 multicast address, or an
//! MGID in IPv6 notation; and what rdma_cm and perftest make of it.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use rsverbs::abi::IBV_GID_TYPE_ROCE_V2;
use rsverbs::mgid::Mgid;

/// The IP group behind GROUP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    V4([u8; 4]),
    V6([u8; 16]),
}

impl Group {
    /// Parses GROUP; Err with the reason when it is not a multicast group.
    pub fn parse(s: &str) -> Result<Group, String> {
        if let Ok(a) = s.parse::<Ipv4Addr>() {
            return if a.is_multicast() { Ok(Group::V4(a.octets())) } else { Err(format!("{s} is not an IPv4 multicast address (224.0.0.0/4)")) };
        }
        let Ok(a) = s.parse::<Ipv6Addr>() else {
            return Err(format!("{s} is neither an IPv4/IPv6 address nor an MGID"));
        };
        let o = a.octets();
        // An MGID of an IPv4 group: rdma_cm's ::ffff:a.b.c.d (RoCE v2) or ff0e::ffff:a.b.c.d (RoCE v1).
        let v4_tail = o[2..10] == [0; 8] && o[10..12] == [0xff, 0xff];
        if v4_tail && (o[..2] == [0, 0] || o[..2] == [0xff, 0x0e]) {
            let v4 = [o[12], o[13], o[14], o[15]];
            return if Ipv4Addr::from(v4).is_multicast() { Ok(Group::V4(v4)) } else { Err(format!("{s}: the IPv4 address in it is not multicast")) };
        }
        if o[0] == 0xff { Ok(Group::V6(o)) } else { Err(format!("{s} is not an IPv6 multicast address (ff00::/8) or an MGID")) }
    }

    /// The MGID rdma_cm attaches for it on a port whose default GID type is
    /// `gid_type`: the library's own [`Mgid::for_group`] (cma.c
    /// `cma_iboe_set_mgid` on RoCE: IPv6 as is, IPv4 as ::ffff:a.b.c.d on
    /// v2, ff0e::ffff:a.b.c.d on v1; `cma_set_mgid` on InfiniBand: the
    /// IPoIB-style MGID). An unknown GID type gets RoCE v2's.
    pub fn mgid(self, gid_type: u32) -> [u8; 16] {
        let ip = match self {
            Group::V4(a) => IpAddr::V4(Ipv4Addr::from(a)),
            Group::V6(o) => IpAddr::V6(Ipv6Addr::from(o)),
        };
        Mgid::for_group(ip, gid_type)
            .or_else(|| Mgid::for_group(ip, IBV_GID_TYPE_ROCE_V2))
            .map_or([0; 16], |m| m.0)
    }

    /// The Ethernet address the group's IP packets are sent to
    /// (`ip_eth_mc_map`: 01:00:5e + low 23 bits; `ipv6_eth_mc_map`: 33:33 + low 32 bits).
    pub fn mac(self) -> [u8; 6] {
        match self {
            Group::V4(a) => [0x01, 0x00, 0x5e, a[1] & 0x7f, a[2], a[3]],
            Group::V6(o) => [0x33, 0x33, o[12], o[13], o[14], o[15]],
        }
    }

    pub fn text(self) -> String {
        match self {
            Group::V4(a) => Ipv4Addr::from(a).to_string(),
            Group::V6(o) => Ipv6Addr::from(o).to_string(),
        }
    }

    /// The prefix length `ip addr add GROUP/LEN dev DEV autojoin` takes.
    pub fn host_prefix(self) -> u8 {
        match self {
            Group::V4(_) => 32,
            Group::V6(_) => 128,
        }
    }
}

/// perftest's `-M` argument for an MGID: 16 colon-separated byte values
/// (multicast_resources.c `set_multicast_gid` parses each with strtoll).
pub fn perftest_arg(mgid: &[u8; 16]) -> String {
    mgid.iter().map(|b| b.to_string()).collect::<Vec<_>>().join(":")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rsverbs::abi::{IBV_GID_TYPE_IB, IBV_GID_TYPE_ROCE_V1};

    #[test]
    fn groups_mgids_and_macs() {
        let g = Group::parse("239.1.1.1").unwrap();
        assert_eq!(g, Group::V4([239, 1, 1, 1]));
        assert_eq!(Group::parse("::ffff:239.1.1.1").unwrap(), g);
        assert_eq!(Group::parse("ff0e::ffff:239.1.1.1").unwrap(), g);
        assert_eq!(Ipv6Addr::from(g.mgid(IBV_GID_TYPE_ROCE_V2)).to_string(), "::ffff:239.1.1.1");
        assert_eq!(Ipv6Addr::from(g.mgid(IBV_GID_TYPE_ROCE_V1)).to_string(), "ff0e::ffff:ef01:101");
        // InfiniBand: the MGID rdma_cm joins for a UDP ID (cma.c cma_set_mgid:
        // ip_ib_mc_map with the RDMA CM signature 0x01 in byte 3, P_Key
        // 0xffff, the group's low 28 bits).
        assert_eq!(Ipv6Addr::from(g.mgid(IBV_GID_TYPE_IB)).to_string(), "ff12:4001:ffff::f01:101");
        assert_eq!(g.mac(), [1, 0, 0x5e, 1, 1, 1]);
        assert_eq!(Group::parse("239.129.1.1").unwrap().mac(), [1, 0, 0x5e, 1, 1, 1]);
        let v6 = Group::parse("ff0e::1:6").unwrap();
        assert_eq!(v6.mac(), [0x33, 0x33, 0, 1, 0, 6]);
        assert_eq!(perftest_arg(&g.mgid(IBV_GID_TYPE_ROCE_V2)), "0:0:0:0:0:0:0:0:0:0:255:255:239:1:1:1");
        for bad in ["10.0.0.1", "fe80::1", "::ffff:10.0.0.1", "nonsense", "", "239.1.1"] {
            assert!(Group::parse(bad).is_err(), "{bad}");
        }
    }
}
