//! The GID index that rdma_cm and perftest pick by default.

use crate::table::{Gid, Slot, v4_mapped};
use rsverbs::abi::{IBV_GID_TYPE_ROCE_V1, IBV_GID_TYPE_ROCE_V2};

/// rdma_cm, for each address of a netdev: cma.c `cma_validate_port` asks
/// cache.c `rdma_find_gid_by_port` for the address's GID (`rdma_ip2gid`:
/// ::ffff:a.b.c.d for IPv4), of the port's default RoCE type and on that
/// netdev; `find_gid` scans from index 0, so the lowest such index wins.
/// The default type is RoCE v2 (cma.c `cma_add_one`:
/// CMA_PREFERRED_ROCE_GID_TYPE) unless configfs `default_roce_mode` says
/// otherwise. Returns the indexes rdma_cm would pick.
pub fn rdma_cm(slots: &[Slot], default_type: u32) -> Vec<u32> {
    let gids: Vec<&Gid> = slots.iter().filter_map(|s| if let Slot::Gid(g) = s { Some(g) } else { None }).collect();
    let mut out = Vec::new();
    for g in &gids {
        if g.gid_type != default_type {
            continue;
        }
        let first = gids.iter().find(|o| o.raw == g.raw && o.ifindex == g.ifindex && o.gid_type == default_type);
        if first.is_some_and(|f| f.index == g.index) {
            out.push(g.index);
        }
    }
    out
}

/// perftest without `-x` on an Ethernet port (perftest_resources.c
/// `get_best_gid_index`, called from `set_up_connection`): one index per
/// port. From index 0 it moves to a later entry that is IPv4-mapped when the
/// current one is not, else to one of a better RoCE version (v2 > v1); an
/// empty slot reads as the zero GID and its type query fails (skipped).
pub fn perftest(slots: &[Slot]) -> u32 {
    let mut best = 0usize;
    for i in 1..slots.len() {
        let cur4 = is_v4(&slots[best]);
        let riv4 = is_v4(&slots[i]);
        if riv4 && !cur4 {
            best = i;
        } else if let (Slot::Gid(c), Slot::Gid(r)) = (&slots[best], &slots[i]) {
            if rate(r.gid_type) > rate(c.gid_type) {
                best = i;
            }
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

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn perftest_prefers_v4_then_v2_and_skips_holes() {
        let v1 = IBV_GID_TYPE_ROCE_V1;
        let v2 = IBV_GID_TYPE_ROCE_V2;
        let t = [gid(0, 1, false, v1, 2), gid(1, 1, false, v2, 2), Slot::Empty, gid(3, 9, true, v1, 2), gid(4, 9, true, v2, 2)];
        assert_eq!(perftest(&t), 4);
        // A v4-mapped v1 entry is left for a later v2 entry, even a link-local one.
        let t = [gid(0, 9, true, v1, 2), gid(1, 1, false, v2, 2)];
        assert_eq!(perftest(&t), 1);
        let t = [gid(0, 1, false, v1, 2), Slot::Empty];
        assert_eq!(perftest(&t), 0);
    }

    #[test]
    fn rdma_cm_takes_the_first_match_per_address_and_netdev() {
        let v1 = IBV_GID_TYPE_ROCE_V1;
        let v2 = IBV_GID_TYPE_ROCE_V2;
        let t = [gid(0, 1, false, v1, 2), gid(1, 1, false, v2, 2), gid(2, 9, true, v2, 2), gid(3, 9, true, v2, 2), gid(4, 9, true, v2, 3)];
        assert_eq!(rdma_cm(&t, v2), vec![1, 2, 4]);
        assert_eq!(rdma_cm(&t, v1), vec![0]);
    }
}
