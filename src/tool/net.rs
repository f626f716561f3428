//! What the IP layer and the netdev say: names, state, flags, multicast
//! memberships and MAC filter entries, rp_filter. Read from /sys and /proc
//! only (no netlink), so it works unprivileged.

use std::fs;

/// The netdev's name for an ifindex (`if_indextoname`).
pub fn name(ifindex: u32) -> Option<String> {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: buf holds IF_NAMESIZE bytes, as if_indextoname requires.
    let p = unsafe { libc::if_indextoname(ifindex, buf.as_mut_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: if_indextoname wrote a NUL-terminated name into buf.
    Some(unsafe { core::ffi::CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned())
}

fn sys(dev: &str, attr: &str) -> Option<String> {
    fs::read_to_string(format!("/sys/class/net/{dev}/{attr}")).ok().map(|s| s.trim().to_string())
}

/// /sys/class/net/DEV/operstate ("up", "down", "unknown" for lo and dummy).
pub fn operstate(dev: &str) -> String {
    sys(dev, "operstate").unwrap_or_else(|| "?".into())
}

/// The interface flags (/sys/class/net/DEV/flags, IFF_*).
pub fn flags(dev: &str) -> u32 {
    sys(dev, "flags").and_then(|s| u32::from_str_radix(s.trim_start_matches("0x"), 16).ok()).unwrap_or(0)
}

pub const IFF_UP: u32 = libc::IFF_UP as u32;
pub const IFF_PROMISC: u32 = libc::IFF_PROMISC as u32;
pub const IFF_ALLMULTI: u32 = libc::IFF_ALLMULTI as u32;
pub const IFF_MULTICAST: u32 = libc::IFF_MULTICAST as u32;

/// Whether DEV has joined the IPv4 group at IP level: /proc/net/igmp lists
/// each device ("IDX\tDEV : ...") and then its groups as the raw __be32 in
/// host order, "%08X" (net/ipv4/igmp.c `igmp_mc_seq_show`).
pub fn igmp_joined(text: &str, dev: &str, group: [u8; 4]) -> bool {
    let want = u32::from_ne_bytes(group);
    let mut cur = "";
    for line in text.lines().skip(1) {
        if line.starts_with(|c: char| c.is_ascii_digit()) {
            cur = line.split_whitespace().nth(1).unwrap_or("");
        } else if cur == dev {
            let hex = line.split_whitespace().next().unwrap_or("");
            if u32::from_str_radix(hex, 16).ok() == Some(want) {
                return true;
            }
        }
    }
    false
}

/// Whether DEV has joined the IPv6 group: /proc/net/igmp6 has one line per
/// membership, "IDX DEV GROUP(32 hex) USERS FLAGS TIMER"
/// (net/ipv6/mcast.c `igmp6_mc_seq_show`).
pub fn igmp6_joined(text: &str, dev: &str, group: &[u8; 16]) -> bool {
    let want = hex(group);
    text.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() >= 3 && f[1] == dev && f[2] == want
    })
}

/// Whether DEV's multicast MAC filter holds MAC: /proc/net/dev_mcast, "IDX
/// DEV REFS GLOBAL MAC(12 hex)" (net/core/dev_addr_lists.c `dev_mc_seq_show`),
/// the list `ip maddr` shows.
pub fn mac_listed(text: &str, dev: &str, mac: &[u8; 6]) -> bool {
    let want = hex(mac);
    text.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() >= 5 && f[1] == dev && f[4] == want
    })
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub fn mac_text(m: &[u8; 6]) -> String {
    m.iter().map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(":")
}

pub fn read(path: &str) -> String {
    fs::read_to_string(path).unwrap_or_default()
}

/// rp_filter of `all` and of DEV: the kernel applies the larger
/// (net/ipv4/fib_frontend.c `__fib_validate_source`: IN_DEV_RPFILTER is
/// IN_DEV_MAXCONF(in_dev, RP_FILTER)).
pub fn rp_filter(dev: &str) -> (u32, u32) {
    let get = |d: &str| read(&format!("/proc/sys/net/ipv4/conf/{d}/rp_filter")).trim().parse().unwrap_or(0);
    (get("all"), get(dev))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_net_igmp() {
        let t = "Idx\tDevice    : Count Querier\tGroup    Users Timer\tReporter\n\
                 1\tlo        :     1      V3\n\t\t\t\t010000E0     1 0:00000000\t\t0\n\
                 3\tdummy0    :     2      V3\n\t\t\t\t010101EF     1 0:00000000\t\t0\n\t\t\t\t010000E0     1 0:00000000\t\t0\n";
        let g = [239, 1, 1, 1];
        // The file is in host byte order; this test reads it as the kernel wrote it on little-endian.
        if cfg!(target_endian = "little") {
            assert!(igmp_joined(t, "dummy0", g));
            assert!(!igmp_joined(t, "lo", g));
            assert!(igmp_joined(t, "lo", [224, 0, 0, 1]));
        }
    }

    #[test]
    fn parses_igmp6_and_dev_mcast() {
        let t = "3    dummy0          ff0e0000000000000000000000010006     1 00000004 0\n";
        let mut g = [0u8; 16];
        g[0] = 0xff;
        g[1] = 0x0e;
        g[13] = 1;
        g[15] = 6;
        assert!(igmp6_joined(t, "dummy0", &g));
        assert!(!igmp6_joined(t, "lo", &g));
        let m = "3    dummy0          1     0     01005e010101\n";
        assert!(mac_listed(m, "dummy0", &[1, 0, 0x5e, 1, 1, 1]));
        assert!(!mac_listed(m, "dummy0", &[0x33, 0x33, 0, 0, 0, 1]));
    }
}
