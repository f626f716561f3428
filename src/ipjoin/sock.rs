//! The sockets that hold rsverbs' IP-level memberships: UDP sockets of
//! their own, opened `SOCK_CLOEXEC` when first needed, never bound, used
//! only for `setsockopt`. A membership belongs to the socket (kernel
//! igmp.c `ip_mc_join_group` puts it on `inet->mc_list`; mcast.c
//! `ipv6_sock_mc_join` on `np->ipv6_mc_list`) and ends when it is dropped
//! or the socket's last reference is closed (`ip_mc_drop_socket`,
//! `ipv6_sock_mc_close`).
//!
//! An IPv4 socket holds at most `net.ipv4.igmp_max_memberships` groups
//! (default 20; ENOBUFS beyond, `ip_mc_join_group`), so there is a pool:
//! a join that meets ENOBUFS moves on to the next socket. Every call is
//! made under the caller's lock ([`super`]).

use crate::mgid::Mgid;
use core::ffi::c_int;
use core::sync::atomic::{AtomicI32, Ordering::Relaxed};

/// Sockets per family: 64 × 20 IPv4 groups at the default limit.
const POOL: usize = 64;

static V4: [AtomicI32; POOL] = [const { AtomicI32::new(-1) }; POOL];
static V6: [AtomicI32; POOL] = [const { AtomicI32::new(-1) }; POOL];

/// Joins `mgid` on `ifindex`; returns the socket that holds it, or errno.
pub fn join(ifindex: u32, mgid: &Mgid) -> Result<c_int, c_int> {
    let (pool, family) = match mgid.v4_group() {
        Some(_) => (&V4, libc::AF_INET),
        None => (&V6, libc::AF_INET6),
    };
    for slot in pool {
        let mut fd = slot.load(Relaxed);
        let fresh = fd < 0;
        if fresh {
            // SAFETY: plain socket(2).
            fd = unsafe { libc::socket(family, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
            if fd < 0 {
                return Err(crate::error::errno());
            }
            slot.store(fd, Relaxed);
        }
        match membership(fd, true, ifindex, mgid) {
            // EADDRINUSE: this socket has it already (only a membership
            // rsverbs did not count could do that): it is held.
            Ok(()) | Err(libc::EADDRINUSE) => return Ok(fd),
            // This socket is full; a new one that is full at once means
            // the limit is 0 (or memory is short): no socket will do.
            Err(libc::ENOBUFS) if !fresh => {}
            Err(e) => return Err(e),
        }
    }
    Err(libc::ENOBUFS)
}

/// Leaves `mgid` on `ifindex` through `fd`, the socket [`join`] returned.
pub fn leave(fd: c_int, ifindex: u32, mgid: &Mgid) -> Result<(), c_int> {
    membership(fd, false, ifindex, mgid)
}

/// `IP_ADD_MEMBERSHIP`/`IP_DROP_MEMBERSHIP` with a `struct ip_mreqn`
/// (ifindex set, address 0), or `IPV6_ADD_MEMBERSHIP`/`IPV6_DROP_MEMBERSHIP`
/// (alias `IPV6_JOIN_GROUP`/`IPV6_LEAVE_GROUP`) with a `struct ipv6_mreq`.
fn membership(fd: c_int, add: bool, ifindex: u32, mgid: &Mgid) -> Result<(), c_int> {
    let rc = match mgid.v4_group() {
        Some(v4) => {
            let m = libc::ip_mreqn {
                // s_addr is in network order: the address's bytes as they are.
                imr_multiaddr: libc::in_addr { s_addr: u32::from_ne_bytes(v4.octets()) },
                imr_address: libc::in_addr { s_addr: 0 },
                imr_ifindex: ifindex as c_int,
            };
            let opt = if add { libc::IP_ADD_MEMBERSHIP } else { libc::IP_DROP_MEMBERSHIP };
            // SAFETY: m is a valid ip_mreqn of the length passed.
            unsafe { libc::setsockopt(fd, libc::IPPROTO_IP, opt, (&m as *const libc::ip_mreqn).cast(), size_of_val(&m) as u32) }
        }
        None => {
            let m = libc::ipv6_mreq { ipv6mr_multiaddr: libc::in6_addr { s6_addr: mgid.0 }, ipv6mr_interface: ifindex };
            let opt = if add { libc::IPV6_ADD_MEMBERSHIP } else { libc::IPV6_DROP_MEMBERSHIP };
            // SAFETY: m is a valid ipv6_mreq of the length passed.
            unsafe { libc::setsockopt(fd, libc::IPPROTO_IPV6, opt, (&m as *const libc::ipv6_mreq).cast(), size_of_val(&m) as u32) }
        }
    };
    if rc == 0 { Ok(()) } else { Err(crate::error::errno()) }
}

/// In a forked child: close the inherited sockets. The memberships stay
/// with the parent, which shares the open file descriptions (close(2) of
/// one reference does not release the socket), so the child never drops
/// them (an IP_DROP_MEMBERSHIP on a shared socket would end the parent's).
/// Only atomics and close(2): async-signal-safe, as an atfork child
/// handler must be.
pub fn close_inherited() {
    for slot in V4.iter().chain(V6.iter()) {
        let fd = slot.swap(-1, Relaxed);
        if fd >= 0 {
            // SAFETY: fd is a socket this process inherited and nothing else
            // in it uses.
            unsafe { libc::close(fd) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapped(a: [u8; 4]) -> Mgid {
        let mut m = [0u8; 16];
        m[10] = 0xff;
        m[11] = 0xff;
        m[12..].copy_from_slice(&a);
        Mgid(m)
    }

    /// A real join and leave on the loopback netdev, through the pool (the
    /// test bed's ipjoin suite checks /proc/net/igmp{,6}).
    #[test]
    fn join_and_leave_on_lo() {
        // SAFETY: a NUL-terminated literal.
        let lo = unsafe { libc::if_nametoindex(c"lo".as_ptr()) };
        assert!(lo > 0);
        let g = mapped([239, 254, 77, 1]);
        let fd = join(lo, &g).expect("join 239.254.77.1 on lo");
        // SAFETY: fcntl(2) on an fd of ours.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        assert_eq!(flags & libc::FD_CLOEXEC, libc::FD_CLOEXEC);
        // Held: the same join again on this socket is EADDRINUSE (taken as
        // held, same fd); the leave works once, then EADDRNOTAVAIL.
        assert_eq!(join(lo, &g), Ok(fd));
        assert_eq!(leave(fd, lo, &g), Ok(()));
        assert_eq!(leave(fd, lo, &g), Err(libc::EADDRNOTAVAIL));
    }
}
