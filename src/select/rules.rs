//! The rules, pure: which GID index rdma_cm and perftest pick by default,
//! and which entries a filter keeps, over one port's table in index order.
//! The `rsverbs` command marks its rows with the same functions.

#![forbid(unsafe_code)]

use crate::abi::{IBV_GID_TYPE_ROCE_V1, IBV_GID_TYPE_ROCE_V2};
use crate::mgid::v4_mapped;
use alloc::vec::Vec;

/// A non-empty GID entry of one port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gid {
    pub index: u32,
    pub raw: [u8; 16],
    pub gid_type: u32,
    /// The netdev's ifindex (0: none, as on an InfiniBand port).
    pub ifindex: u32,
}

/// One slot of a port's table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Slot {
    Gid(Gid),
    Empty,
    /// Any other errno than ENODATA (an empty slot).
    Error(i32),
}

impl Slot {
    /// The entry, when the slot holds one.
    pub fn gid(&self) -> Option<&Gid> {
        match self {
            Slot::Gid(g) => Some(g),
            _ => None,
        }
    }
}

/// The kernel's word for "no VLAN" (kernel cache.c
/// `rdma_read_gid_l2_fields`: `*vlan_id = 0xffff` for a netdev that is not
/// a VLAN device).
pub const NO_VLAN: u16 = 0xffff;

/// rdma_cm, for one address on one netdev: cma.c `cma_validate_port` asks
/// cache.c `rdma_find_gid_by_port` for the address's GID (`rdma_ip2gid`:
/// ::ffff:a.b.c.d for IPv4), of the port's default RoCE type and on that
/// netdev; `find_gid` scans from index 0, so the lowest such index wins.
/// `ifindex` None: on any netdev (rsverbs' own extension).
pub fn rdma_cm_for(slots: &[Slot], gid: &[u8; 16], ifindex: Option<u32>, default_type: u32) -> Option<u32> {
    slots
        .iter()
        .filter_map(Slot::gid)
        .find(|g| g.raw == *gid && g.gid_type == default_type && ifindex.is_none_or(|i| i == g.ifindex))
        .map(|g| g.index)
}

/// Every index rdma_cm would pick, one per (address, netdev) of the
/// default RoCE type ([`rdma_cm_for`] for each). The default type is RoCE
/// v2 (cma.c `cma_add_one`: CMA_PREFERRED_ROCE_GID_TYPE) unless configfs
/// `default_roce_mode` says otherwise.
pub fn rdma_cm(slots: &[Slot], default_type: u32) -> Vec<u32> {
    let gids = slots.iter().filter_map(Slot::gid).filter(|g| g.gid_type == default_type);
    gids.filter(|g| rdma_cm_for(slots, &g.raw, Some(g.ifindex), default_type) == Some(g.index)).map(|g| g.index).collect()
}

/// perftest without `-x` on an Ethernet port (perftest_resources.c
/// `get_best_gid_index`, called from `set_up_connection`): one index per
/// port. From index 0 it moves to a later entry that is IPv4-mapped when the
/// current one is not, else to one of a better RoCE version (v2 > v1); an
/// empty slot reads as the zero GID and its type query fails (skipped).
/// An empty table gives 0, as perftest starts there.
pub fn perftest(slots: &[Slot]) -> u32 {
    let mut best = 0usize;
    for i in 1..slots.len() {
        let cur4 = is_v4(&slots[best]);
        let riv4 = is_v4(&slots[i]);
        if riv4 && !cur4 {
            best = i;
        } else if let (Slot::Gid(c), Slot::Gid(r)) = (&slots[best], &slots[i])
            && rate(r.gid_type) > rate(c.gid_type)
        {
            best = i;
        }
    }
    best as u32
}

/// perftest's `ipv6_addr_v4mapped`: also the IPv4-encoded multicast form.
fn is_v4(s: &Slot) -> bool {
    match s {
        Slot::Gid(g) => v4_mapped(&g.raw).is_some() || (g.raw[..2] == [0xff, 0x0e] && g.raw[2..10] == [0; 8] && g.raw[10..12] == [0xff, 0xff]),
        _ => false,
    }
}

/// perftest's `roce_versions_sorted`.
fn rate(t: u32) -> i32 {
    match t {
        IBV_GID_TYPE_ROCE_V1 => 1,
        IBV_GID_TYPE_ROCE_V2 => 2,
        _ => -1,
    }
}

/// The address family a filter asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// An IPv4-mapped GID (::ffff:a.b.c.d, RFC 4291 §2.5.5.2).
    V4,
    /// Any other GID (link-local, global IPv6; an IB port's GIDs).
    V6,
}

/// Which entries to keep; `None` keeps every value of that field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// The entry's type, as `struct ibv_gid_entry`'s `gid_type`:
    /// `IBV_GID_TYPE_IB` (0), `IBV_GID_TYPE_ROCE_V1` (1), `_V2` (2).
    pub gid_type: Option<u32>,
    /// IPv4-mapped or not.
    pub family: Option<Family>,
    /// The netdev's ifindex.
    pub ifindex: Option<u32>,
    /// The netdev's VLAN ID, or [`NO_VLAN`] for a netdev that is not a VLAN.
    pub vlan: Option<u16>,
}

impl Filter {
    /// Whether `g` passes; `vlan_of(ifindex)` is asked only when the filter
    /// names a VLAN.
    #[doc(hidden)]
    pub fn keeps(&self, g: &Gid, vlan_of: &dyn Fn(u32) -> u16) -> bool {
        let family = if v4_mapped(&g.raw).is_some() { Family::V4 } else { Family::V6 };
        self.gid_type.is_none_or(|t| t == g.gid_type)
            && self.family.is_none_or(|f| f == family)
            && self.ifindex.is_none_or(|i| i == g.ifindex)
            && self.vlan.is_none_or(|v| v == vlan_of(g.ifindex))
    }

    /// The lowest index at or after `start` whose entry passes.
    pub fn first(&self, slots: &[Slot], start: u32, vlan_of: &dyn Fn(u32) -> u16) -> Option<u32> {
        slots.iter().filter_map(Slot::gid).find(|g| g.index >= start && self.keeps(g, vlan_of)).map(|g| g.index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::IBV_GID_TYPE_IB;

    fn gid(index: u32, last: u8, v4: bool, t: u32, ifindex: u32) -> Slot {
        let mut raw = [0u8; 16];
        if v4 {
            raw[10] = 0xff;
            raw[11] = 0xff;
        } else {
            raw[0] = 0xfe;
            raw[1] = 0x80;
        }
        raw[15] = last;
        Slot::Gid(Gid { index, raw, gid_type: t, ifindex })
    }

    const V1: u32 = IBV_GID_TYPE_ROCE_V1;
    const V2: u32 = IBV_GID_TYPE_ROCE_V2;

    #[test]
    fn perftest_prefers_v4_then_v2_and_skips_holes() {
        let t = [gid(0, 1, false, V1, 2), gid(1, 1, false, V2, 2), Slot::Empty, gid(3, 9, true, V1, 2), gid(4, 9, true, V2, 2)];
        assert_eq!(perftest(&t), 4);
        // A v4-mapped v1 entry is left for a later v2 entry, even a link-local one.
        let t = [gid(0, 9, true, V1, 2), gid(1, 1, false, V2, 2)];
        assert_eq!(perftest(&t), 1);
        let t = [gid(0, 1, false, V1, 2), Slot::Empty];
        assert_eq!(perftest(&t), 0);
        // An error slot is skipped like an empty one.
        let t = [gid(0, 1, false, V1, 2), Slot::Error(libc::EIO), gid(2, 9, true, V1, 2)];
        assert_eq!(perftest(&t), 2);
        assert_eq!(perftest(&[]), 0);
    }

    #[test]
    fn rdma_cm_takes_the_first_match_per_address_and_netdev() {
        let t = [gid(0, 1, false, V1, 2), gid(1, 1, false, V2, 2), gid(2, 9, true, V2, 2), gid(3, 9, true, V2, 2), gid(4, 9, true, V2, 3)];
        assert_eq!(rdma_cm(&t, V2), vec![1, 2, 4]);
        assert_eq!(rdma_cm(&t, V1), vec![0]);
        let Slot::Gid(g9) = &t[2] else { unreachable!() };
        assert_eq!(rdma_cm_for(&t, &g9.raw, Some(2), V2), Some(2));
        assert_eq!(rdma_cm_for(&t, &g9.raw, Some(3), V2), Some(4));
        assert_eq!(rdma_cm_for(&t, &g9.raw, Some(7), V2), None);
        assert_eq!(rdma_cm_for(&t, &g9.raw, None, V2), Some(2));
        assert_eq!(rdma_cm_for(&t, &g9.raw, None, V1), None);
    }

    #[test]
    fn the_filter_keeps_what_each_field_names() {
        let t = [gid(0, 1, false, V1, 2), gid(1, 1, false, V2, 2), Slot::Empty, gid(3, 9, true, V2, 2), gid(4, 9, true, V2, 5), gid(5, 7, false, IBV_GID_TYPE_IB, 0)];
        let vlan = |ifindex: u32| if ifindex == 5 { 7 } else { NO_VLAN };
        let all = Filter::default();
        assert_eq!(all.first(&t, 0, &vlan), Some(0));
        assert_eq!(all.first(&t, 2, &vlan), Some(3), "an empty slot is never kept");
        assert_eq!(all.first(&t, 6, &vlan), None);
        let v4v2 = Filter { gid_type: Some(V2), family: Some(Family::V4), ..all };
        assert_eq!(v4v2.first(&t, 0, &vlan), Some(3));
        assert_eq!(v4v2.first(&t, 4, &vlan), Some(4));
        assert_eq!(Filter { family: Some(Family::V6), gid_type: Some(V2), ..all }.first(&t, 0, &vlan), Some(1));
        assert_eq!(Filter { vlan: Some(7), ..all }.first(&t, 0, &vlan), Some(4));
        assert_eq!(Filter { vlan: Some(NO_VLAN), ..v4v2 }.first(&t, 0, &vlan), Some(3));
        assert_eq!(Filter { vlan: Some(8), ..all }.first(&t, 0, &vlan), None);
        assert_eq!(Filter { ifindex: Some(5), ..all }.first(&t, 0, &vlan), Some(4));
        assert_eq!(Filter { gid_type: Some(IBV_GID_TYPE_IB), ..all }.first(&t, 0, &vlan), Some(5));
        // The VLAN lookup is made only when asked.
        let never = |_: u32| -> u16 { panic!("asked") };
        assert_eq!(v4v2.first(&t, 0, &never), Some(3));
    }
}
