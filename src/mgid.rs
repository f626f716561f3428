//! Multicast GIDs: the one place that knows a v4-mapped GID, the kernel's
//! multicast test and an MGID's scope. Used by the trace, the IP-level join
//! and the `rsverbs` command.
#![forbid(unsafe_code)]

use core::fmt;
use core::net::{Ipv4Addr, Ipv6Addr};

/// A GID as the kernel carries it: 16 bytes in network order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mgid(pub [u8; 16]);

/// The IPv4 address of a v4-mapped GID (`::ffff:a.b.c.d`, RFC 4291 §2.5.5.2).
pub fn v4_mapped(gid: &[u8; 16]) -> Option<Ipv4Addr> {
    (gid[..10] == [0; 10] && gid[10..12] == [0xff, 0xff]).then(|| Ipv4Addr::new(gid[12], gid[13], gid[14], gid[15]))
}

impl Mgid {
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
            Some(v4) => write!(f, "{v4}"),
            None => write!(f, "{}", Ipv6Addr::from(m.0)),
        })
    }
}

/// As a trace field: `mgid=<IPv6> [ipv4=<a.b.c.d>] scope=<scope>`.
impl fmt::Display for Mgid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "mgid={}", Ipv6Addr::from(self.0))?;
        if let Some(v4) = self.v4() {
            write!(f, " ipv4={v4}")?;
        }
        write!(f, " scope={}", self.scope())
    }
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

    fn gid(s: &str) -> Mgid {
        Mgid(s.parse::<Ipv6Addr>().expect("test address").octets())
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

    #[test]
    fn groups_as_users_write_them() {
        assert_eq!(gid("::ffff:239.1.1.1").group().to_string(), "239.1.1.1");
        assert_eq!(gid("ff0e::1").group().to_string(), "ff0e::1");
    }
}
