//! Multicast GIDs: the one place that knows a v4-mapped GID, the kernel's
//! multicast test, an MGID's scope, and the MGID rdma_cm builds for an IP
//! group ([`Mgid::for_group`]). Used by the trace, the IP-level join, the
//! safe API (`safe::mgid_for_group`) and the `rsverbs` command.
#![forbid(unsafe_code)]

use crate::abi::{IBV_GID_TYPE_IB, IBV_GID_TYPE_ROCE_V1, IBV_GID_TYPE_ROCE_V2};
use core::fmt;
use core::net::{IpAddr, Ipv4Addr};

/// A GID as the kernel carries it: 16 bytes in network order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mgid(pub [u8; 16]);

/// The first six bytes of rdma_cm's InfiniBand MGID of an IPv4 group
/// (`ip_ib_mc_map` from byte 4 of the map): `0xff`, `0x10 | scope` (2,
/// link-local, the default IPoIB broadcast's), `0x40` with `0x01` in place
/// of `0x1b` (`RDMA_PS_UDP`), the default partition's P_Key.
const IB_PREFIX_V4: [u8; 6] = [0xff, 0x12, 0x40, 0x01, 0xff, 0xff];
/// The same for an IPv6 group (`ipv6_ib_mc_map`: signature `0x60`).
const IB_PREFIX_V6: [u8; 6] = [0xff, 0x12, 0x60, 0x01, 0xff, 0xff];

/// The IPv4 address of a v4-mapped GID (`::ffff:a.b.c.d`, RFC 4291 §2.5.5.2).
pub fn v4_mapped(gid: &[u8; 16]) -> Option<Ipv4Addr> {
    (gid[..10] == [0; 10] && gid[10..12] == [0xff, 0xff]).then(|| Ipv4Addr::new(gid[12], gid[13], gid[14], gid[15]))
}

impl Mgid {
    /// The MGID the kernel's rdma_cm attaches a UD QP to for the IP group
    /// `group` on a port whose GID type is `gid_type` (`IBV_GID_TYPE_*`),
    /// byte for byte (drivers/infiniband/core/cma.c):
    ///
    /// - RoCE (`cma_iboe_set_mgid`): an IPv6 group as it is; an IPv4 group
    ///   `a.b.c.d` as `::ffff:a.b.c.d` on RoCE v2 (`IB_GID_TYPE_ROCE_UDP_ENCAP`)
    ///   and `ff0e::ffff:a.b.c.d` on RoCE v1 (kernels older than RoCE v2's
    ///   multicast support built the v1 form on every port);
    /// - InfiniBand (`cma_set_mgid`, for an ID in the `RDMA_PS_UDP` port
    ///   space, as mckey and most UD programs create it, on the default
    ///   partition): IPv4 `ff12:4001:ffff::` and the group's low 28 bits
    ///   (`ip_ib_mc_map`: scope 2 and P_Key 0xffff from IPoIB's default
    ///   broadcast address `ff12:401b:ffff::ffff:ffff`, bytes 2 and 3
    ///   `0x4001`, "Use RDMA CM signature"); IPv6 `ff12:6001:ffff:` and the
    ///   group's last 10 bytes (`ipv6_ib_mc_map`); an IPv6 group that is
    ///   already an SA-assigned MGID (`ff1x:a01b::/32`) as it is.
    ///
    /// None for a group that is not multicast (`224.0.0.0/4`, `ff00::/8`),
    /// and for an unknown GID type.
    pub fn for_group(group: IpAddr, gid_type: u32) -> Option<Mgid> {
        let mut m = [0u8; 16];
        match (group, gid_type) {
            (IpAddr::V4(a), _) if !a.is_multicast() => return None,
            (IpAddr::V6(a), _) if !a.is_multicast() => return None,
            (IpAddr::V6(a), IBV_GID_TYPE_ROCE_V1 | IBV_GID_TYPE_ROCE_V2) => m = a.octets(),
            (IpAddr::V4(a), IBV_GID_TYPE_ROCE_V1 | IBV_GID_TYPE_ROCE_V2) => {
                if gid_type == IBV_GID_TYPE_ROCE_V1 {
                    m[..2].copy_from_slice(&[0xff, 0x0e]);
                }
                m[10..12].copy_from_slice(&[0xff, 0xff]);
                m[12..].copy_from_slice(&a.octets());
            }
            (IpAddr::V6(a), IBV_GID_TYPE_IB) => {
                let o = a.octets();
                // cma_set_mgid: (s6_addr32[0] in host order & 0xFFF0FFFF) ==
                // 0xFF10A01B, compared here byte by byte.
                if o[0] == 0xff && o[1] & 0xf0 == 0x10 && o[2..4] == [0xa0, 0x1b] {
                    m = o;
                } else {
                    m[..6].copy_from_slice(&IB_PREFIX_V6);
                    m[6..].copy_from_slice(&o[6..]);
                }
            }
            (IpAddr::V4(a), IBV_GID_TYPE_IB) => {
                m[..6].copy_from_slice(&IB_PREFIX_V4);
                m[12..].copy_from_slice(&a.octets());
                m[12] &= 0x0f;
            }
            _ => return None,
        }
        Some(Mgid(m))
    }

    /// The IPv4 address, when the GID is v4-mapped.
    pub fn v4(&self) -> Option<Ipv4Addr> {
        v4_mapped(&self.0)
    }

    /// The IPv4 group of a v4-mapped multicast GID (`::ffff:224.0.0.0/4`).
    pub fn v4_group(&self) -> Option<Ipv4Addr> {
        self.v4().filter(Ipv4Addr::is_multicast)
    }

    /// kernel include/rdma/ib_addr.h `rdma_is_multicast_addr`: `ff00::/8`,
    /// or v4-mapped `224.0.0.0/4`. Exactly the groups the IP layer can join.
    pub fn is_multicast(&self) -> bool {
        match self.v4() {
            Some(v4) => v4.is_multicast(),
            None => self.0[0] == 0xff,
        }
    }

    /// The scope: RFC 4291 §2.7 for `ff00::/8` (the low nibble of byte 1);
    /// RFC 5771/2365 for IPv4 (224.0.0.0/24 link-local, 239/8
    /// administratively scoped); `unicast` for anything else.
    pub fn scope(&self) -> &'static str {
        if let Some(v4) = self.v4() {
            let o = v4.octets();
            return match o[0] {
                224 if o[1] == 0 && o[2] == 0 => "link-local",
                239 => "admin-local",
                224..=239 => "global",
                _ => "unicast",
            };
        }
        if self.0[0] != 0xff {
            return "unicast";
        }
        match self.0[1] & 0xf {
            1 => "interface-local",
            2 => "link-local",
            3 => "realm-local",
            4 => "admin-local",
            5 => "site-local",
            8 => "organization-local",
            0xe => "global",
            _ => "reserved",
        }
    }

    /// The group as users write it: `239.1.1.1` for a v4-mapped GID, else
    /// the IPv6 address.
    pub fn group(self) -> impl fmt::Display {
        let m = self;
        Fmt(move |f: &mut fmt::Formatter<'_>| match m.v4() {
            Some(v4) => write_v4(f, v4.octets()),
            None => fmt::Display::fmt(&Ip6(m.0), f),
        })
    }
}

/// As a trace field: `mgid=<IPv6> [ipv4=<a.b.c.d>] scope=<scope>`.
impl fmt::Display for Mgid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("mgid=")?;
        fmt::Display::fmt(&Ip6(self.0), f)?;
        if let Some(v4) = self.v4() {
            f.write_str(" ipv4=")?;
            write_v4(f, v4.octets())?;
        }
        f.write_str(" scope=")?;
        f.write_str(self.scope())
    }
}

/// An IPv6 address (16 bytes in network order) as core's `Ipv6Addr`
/// writes it without width or precision: RFC 5952 (lowercase hex without
/// leading zeros, the longest run of two or more zero groups, the first of
/// equals, as `::`), and a v4-mapped address as `::ffff:a.b.c.d`. Written
/// here with `write_str` alone: core's implementation pads through
/// `Formatter::pad` and formats each group with `{:x}`, 1,879 bytes of
/// code on x86_64 (`make size`); the trace never pads an address.
#[derive(Clone, Copy)]
pub struct Ip6(pub [u8; 16]);

impl fmt::Display for Ip6 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(v4) = v4_mapped(&self.0) {
            f.write_str("::ffff:")?;
            return write_v4(f, v4.octets());
        }
        let g: [u16; 8] = core::array::from_fn(|i| u16::from_be_bytes([self.0[2 * i], self.0[2 * i + 1]]));
        // The longest run of zero groups (the first of equal ones), if
        // longer than one group.
        let (mut best, mut best_len, mut at, mut len) = (0, 0, 0, 0);
        for (i, &x) in g.iter().enumerate() {
            if x == 0 {
                if len == 0 {
                    at = i;
                }
                len += 1;
                if len > best_len {
                    (best, best_len) = (at, len);
                }
            } else {
                len = 0;
            }
        }
        let groups = |f: &mut fmt::Formatter<'_>, part: &[u16]| -> fmt::Result {
            for (i, &x) in part.iter().enumerate() {
                if i > 0 {
                    f.write_str(":")?;
                }
                write_hex(f, x)?;
            }
            Ok(())
        };
        if best_len > 1 {
            groups(f, &g[..best])?;
            f.write_str("::")?;
            groups(f, &g[best + best_len..])
        } else {
            groups(f, &g)
        }
    }
}

/// `x` in lowercase hex without leading zeros.
fn write_hex(f: &mut fmt::Formatter<'_>, x: u16) -> fmt::Result {
    let mut buf = [0u8; 4];
    let mut n = 0;
    for shift in [12, 8, 4, 0] {
        let d = (x >> shift) & 0xf;
        if d != 0 || n > 0 || shift == 0 {
            buf[n] = b"0123456789abcdef"[usize::from(d)];
            n += 1;
        }
    }
    f.write_str(core::str::from_utf8(&buf[..n]).unwrap_or("?"))
}

/// `a.b.c.d`, as core's `Ipv4Addr` writes it without width or precision.
fn write_v4(f: &mut fmt::Formatter<'_>, o: [u8; 4]) -> fmt::Result {
    for (i, &x) in o.iter().enumerate() {
        if i > 0 {
            f.write_str(".")?;
        }
        let mut buf = [0u8; 3];
        let mut n = 0;
        if x >= 100 {
            buf[n] = b'0' + x / 100;
            n += 1;
        }
        if x >= 10 {
            buf[n] = b'0' + x / 10 % 10;
            n += 1;
        }
        buf[n] = b'0' + x % 10;
        n += 1;
        f.write_str(core::str::from_utf8(&buf[..n]).unwrap_or("?"))?;
    }
    Ok(())
}

struct Fmt<F>(F);

impl<F: Fn(&mut fmt::Formatter<'_>) -> fmt::Result> fmt::Display for Fmt<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (self.0)(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use core::net::Ipv6Addr;

    fn gid(s: &str) -> Mgid {
        Mgid(s.parse::<Ipv6Addr>().expect("test address").octets())
    }

    /// Ip6 writes what core's Ipv6Addr writes: every address made of the
    /// groups 0, 1, 0xffff and 0xab0 in each position (4^8 of them: every
    /// pattern of zero runs, v4-mapped and v4-compatible forms included),
    /// and a spread of others.
    #[test]
    fn ip6_writes_what_core_writes() {
        let vals = [0u16, 1, 0xffff, 0xab0];
        for n in 0..4usize.pow(8) {
            let g: [u16; 8] = core::array::from_fn(|i| vals[n / 4usize.pow(i as u32) % 4]);
            let a = Ipv6Addr::from(g);
            assert_eq!(Ip6(a.octets()).to_string(), a.to_string());
        }
        let mut x: u128 = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210;
        for _ in 0..10_000 {
            x = x.rotate_left(7) ^ x.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let a = Ipv6Addr::from(x);
            assert_eq!(Ip6(a.octets()).to_string(), a.to_string());
            let m = Ipv6Addr::from(x & 0xffff_ffff | 0xffff_0000_0000);
            assert_eq!(Ip6(m.octets()).to_string(), m.to_string());
        }
    }

    #[test]
    fn fields_and_scopes() {
        assert_eq!(gid("::ffff:239.1.1.1").to_string(), "mgid=::ffff:239.1.1.1 ipv4=239.1.1.1 scope=admin-local");
        assert_eq!(gid("ff0e::1").to_string(), "mgid=ff0e::1 scope=global");
        assert_eq!(gid("ff02::1").scope(), "link-local");
        assert_eq!(gid("::ffff:224.0.0.251").scope(), "link-local");
        assert_eq!(gid("::ffff:225.1.2.3").scope(), "global");
        assert_eq!(gid("::ffff:192.168.3.146").scope(), "unicast");
        assert_eq!(gid("ff15::1").scope(), "site-local");
        assert_eq!(gid("ff03::1").scope(), "realm-local");
        assert_eq!(gid("ff06::1").scope(), "reserved");
    }

    #[test]
    fn the_kernels_multicast_test() {
        assert!(gid("ff05::2").is_multicast() && gid("::ffff:224.0.0.1").is_multicast());
        assert!(!gid("::ffff:192.168.3.146").is_multicast() && !gid("fe80::1").is_multicast() && !gid("::").is_multicast());
        // Not v4-mapped: a 0xff in byte 10 alone is not enough.
        assert!(!gid("::ff:e001:203").is_multicast() && gid("::ff:e001:203").v4().is_none());
    }

    #[test]
    fn v4_groups() {
        assert_eq!(gid("::ffff:239.1.2.3").v4_group(), Some(Ipv4Addr::new(239, 1, 2, 3)));
        assert_eq!(gid("::ffff:224.0.0.1").v4_group(), Some(Ipv4Addr::new(224, 0, 0, 1)));
        assert_eq!(gid("::ffff:192.0.2.1").v4_group(), None);
        assert_eq!(gid("::ffff:192.0.2.1").v4(), Some(Ipv4Addr::new(192, 0, 2, 1)));
        assert_eq!(gid("ff0e::1:2").v4_group(), None);
    }

    fn for_group(group: &str, gid_type: u32) -> Option<[u8; 16]> {
        Mgid::for_group(group.parse().expect("test address"), gid_type).map(|m| m.0)
    }

    /// Every form, as the bytes the kernel builds, written out in network
    /// order (no integer conversion that depends on the host's byte order);
    /// then the same checked through `u128::from_be_bytes` against the
    /// address as written, which means the same on either byte order.
    #[test]
    fn rdma_cms_mgid_for_a_group() {
        let (ib, v1, v2) = (IBV_GID_TYPE_IB, IBV_GID_TYPE_ROCE_V1, IBV_GID_TYPE_ROCE_V2);
        // cma_iboe_set_mgid, IPv4: ::ffff:a.b.c.d on v2, ff0e::ffff:a.b.c.d on v1.
        assert_eq!(for_group("239.1.1.1", v2), Some([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 1, 1, 1]));
        assert_eq!(for_group("239.1.1.1", v1), Some([0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 1, 1, 1]));
        // IPv6 on RoCE: the address itself, v1 and v2.
        let v6 = [0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x02, 0x03];
        assert_eq!(for_group("ff0e::1:203", v2), Some(v6));
        assert_eq!(for_group("ff0e::1:203", v1), Some(v6));
        // cma_set_mgid, IPv4 (ip_ib_mc_map, RDMA_PS_UDP): the top nibble of
        // the address is dropped (239 = 0xef: 0x0f).
        assert_eq!(for_group("239.1.1.1", ib), Some([0xff, 0x12, 0x40, 0x01, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0x0f, 1, 1, 1]));
        assert_eq!(for_group("224.0.0.1", ib), Some([0xff, 0x12, 0x40, 0x01, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]));
        // IPv6 (ipv6_ib_mc_map): the prefix, then the group's bytes 6 to 15.
        let g = "ff0e:1:2:3:4:5:6:7";
        assert_eq!(for_group(g, ib), Some([0xff, 0x12, 0x60, 0x01, 0xff, 0xff, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7]));
        // An SA-assigned MGID (ff1x:a01b::/32) is the MGID itself.
        let sa = "ff15:a01b:ffff::1";
        assert_eq!(for_group(sa, ib), Some(sa.parse::<core::net::Ipv6Addr>().expect("address").octets()));
        assert_ne!(for_group("ff15:a01c:ffff::1", ib), for_group("ff15:a01c:ffff::1", v2));

        let be = |g: &str, t| for_group(g, t).map(u128::from_be_bytes);
        assert_eq!(be("239.1.1.1", v2), Some(0x0000_0000_0000_0000_0000_ffff_ef01_0101));
        assert_eq!(be("239.1.1.1", v1), Some(0xff0e_0000_0000_0000_0000_ffff_ef01_0101));
        assert_eq!(be("239.1.1.1", ib), Some(0xff12_4001_ffff_0000_0000_0000_0f01_0101));
        for (t, text) in [(v2, "::ffff:239.1.2.3"), (v1, "ff0e::ffff:ef01:203"), (ib, "ff12:4001:ffff::f01:203")] {
            let m = Mgid::for_group("239.1.2.3".parse().expect("address"), t).expect("multicast");
            assert_eq!(Ip6(m.0).to_string(), text);
            assert_eq!(m.0, text.parse::<core::net::Ipv6Addr>().expect("address").octets());
        }
        // What the trace and the command read back: the group, on RoCE.
        let m = Mgid::for_group("239.1.2.3".parse().expect("address"), v2).expect("multicast");
        assert_eq!(m.v4_group(), Some(Ipv4Addr::new(239, 1, 2, 3)));
    }

    #[test]
    fn no_mgid_for_what_is_not_a_group() {
        for t in [IBV_GID_TYPE_IB, IBV_GID_TYPE_ROCE_V1, IBV_GID_TYPE_ROCE_V2] {
            for g in ["192.0.2.1", "0.0.0.0", "255.255.255.255", "::", "fe80::1", "::ffff:239.1.1.1", "2001:db8::1"] {
                assert_eq!(for_group(g, t), None, "{g} type {t}");
            }
        }
        assert_eq!(for_group("239.1.1.1", 3), None);
        assert_eq!(for_group("ff0e::1", 7), None);
    }

    #[test]
    fn groups_as_users_write_them() {
        assert_eq!(gid("::ffff:239.1.1.1").group().to_string(), "239.1.1.1");
        assert_eq!(gid("ff0e::1").group().to_string(), "ff0e::1");
    }
}
