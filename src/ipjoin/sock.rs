//! The sockets that hold rsverbs' IP-level memberships: UDP sockets of
//! their own, opened `SOCK_CLOEXEC` when first needed, never bound, used
//! only for `setsockopt`. A membership belongs to the socket (kernel
//! igmp.c `ip_mc_join_group` puts it on `inet->mc_list`; mcast.c
//! `ipv6_sock_mc_join` on `np->ipv6_mc_list`) and ends when it is dropped
//! or the socket's last reference is closed (`ip_mc_drop_socket`,
//! `ipv6_sock_mc_close`).
//!
//! A socket holds a limited number of groups: an IPv4 one at most
//! `net.ipv4.igmp_max_memberships` (default 20; ENOBUFS beyond, igmp.c
//! `ip_mc_join_group`), an IPv6 one as many as its option memory allows
//! (`net.core.optmem_max`; ENOMEM beyond, mcast.c `ipv6_sock_mc_join` →
//! `sock_kmalloc`). So each family has a pool, opened on demand with no
//! fixed cap: a join that meets ENOBUFS or ENOMEM on a socket moves on to
//! the next, and to a new one. A new socket that is full at once means the
//! limit is 0 (or memory is short): the join fails (reported by the caller).
//!
//! rsverbs knows its sockets by identity, never by number: the program may
//! close them (daemons close every fd they do not know) and open its own at
//! the same number. Before any use, a socket's fd must still name the same
//! socket inode ([`Sock::is_ours`]); one that does not is forgotten, never
//! used or closed (its memberships ended with it). Every call is made under
//! the caller's lock ([`super`]).

use super::counts::{Holder, Packed};
use crate::mgid::Mgid;
use alloc::vec::Vec;
use core::ffi::c_int;

/// One of rsverbs' sockets: its fd and the socket it was opened on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sock {
    pub fd: c_int,
    id: Id,
}

/// Which socket an fd names. The socket cookie (`SO_COOKIE`, Linux 4.13+:
/// net/core/sock_diag.c `sock_gen_cookie`, a 64-bit counter never reused
/// while the system runs) when the kernel has it; else the socket inode
/// (sockfs `get_next_ino`: reused once the socket is freed, so a new
/// socket of the program's may, rarely, carry a closed one's number).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Id {
    Cookie(u64),
    Inode(u64),
}

/// Packed for the counts: the fd, the kind of identity, the identity.
impl Holder for Sock {
    fn pack(self) -> Packed {
        let (kind, v) = match self.id {
            Id::Cookie(c) => (0, c),
            Id::Inode(i) => (1, i),
        };
        [u64::from(self.fd as u32) | kind << 32, v]
    }
    fn unpack(p: Packed) -> Self {
        let id = if p[0] >> 32 == 0 { Id::Cookie(p[1]) } else { Id::Inode(p[1]) };
        Sock { fd: p[0] as u32 as c_int, id }
    }
}

impl Sock {
    /// Whether `fd` still names this socket. getsockopt(2) or fstat(2)
    /// only: async-signal-safe, for the atfork child handler.
    pub fn is_ours(&self) -> bool {
        match self.id {
            Id::Cookie(c) => cookie(self.fd) == Some(c),
            Id::Inode(i) => inode(self.fd) == Some(i),
        }
    }
}

/// `SO_COOKIE` (asm-generic/socket.h: 57 on x86_64, aarch64, powerpc64le
/// and s390x alike; only alpha, mips, parisc and sparc differ).
const SO_COOKIE: c_int = 57;

/// The cookie of the socket `fd` names; None when `fd` is no socket
/// (ENOTSOCK, EBADF) or the kernel has no SO_COOKIE (ENOPROTOOPT, before
/// 4.13).
fn cookie(fd: c_int) -> Option<u64> {
    let mut c: u64 = 0;
    let mut len = size_of::<u64>() as libc::socklen_t;
    // SAFETY: c and len are valid out-pointers of the sizes passed.
    let rc = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, SO_COOKIE, (&mut c as *mut u64).cast(), &mut len) };
    (rc == 0 && len as usize == size_of::<u64>()).then_some(c)
}

/// The identity of the socket just opened at `fd`: its cookie, else its
/// inode; None when `fd` is no socket.
fn id(fd: c_int) -> Option<Id> {
    cookie(fd).map(Id::Cookie).or_else(|| inode(fd).map(Id::Inode))
}

/// The socket inode `fd` names, if it is a socket.
fn inode(fd: c_int) -> Option<u64> {
    // SAFETY: an all-zero stat is valid; fstat fills it or fails.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: st is a valid out-pointer.
    let ok = unsafe { libc::fstat(fd, &mut st) } == 0 && st.st_mode & libc::S_IFMT == libc::S_IFSOCK;
    ok.then_some(st.st_ino)
}

/// The sockets of both families.
pub struct Pool {
    v4: Family,
    v6: Family,
}

/// One family's sockets, and where the next join starts: the socket that
/// last had room (docs/ipjoin.md). The sockets before it were full when
/// the walk passed them; a leave moves the start back to the socket it
/// made room in. Without it, every join first tried every full socket:
/// 4,000 IPv4 groups cost about 402,000 setsockopt calls (200 sockets of
/// 20), 300 ms under the IP join's lock, quadratic in the groups; now about
/// one and a twentieth per group.
struct Family {
    socks: Vec<Sock>,
    next: usize,
    /// setsockopt calls made by joins (the unit test counts them).
    tried: usize,
}

impl Family {
    const fn new() -> Self {
        Family { socks: Vec::new(), next: 0, tried: 0 }
    }
}

/// A socket that has no room for one more group.
fn full(e: c_int) -> bool {
    e == libc::ENOBUFS || e == libc::ENOMEM
}

impl Pool {
    pub const fn new() -> Self {
        Pool { v4: Family::new(), v6: Family::new() }
    }

    fn family(&mut self, mgid: &Mgid) -> (&mut Family, c_int) {
        match mgid.v4_group() {
            Some(_) => (&mut self.v4, libc::AF_INET),
            None => (&mut self.v6, libc::AF_INET6),
        }
    }

    /// Joins `mgid` on `ifindex`; returns the socket that holds it, or errno.
    pub fn join(&mut self, ifindex: u32, mgid: &Mgid) -> Result<Sock, c_int> {
        let (f, family) = self.family(mgid);
        let mut i = f.next.min(f.socks.len());
        while i < f.socks.len() {
            let s = f.socks[i];
            // Sockets the program closed hold nothing any more: forgotten
            // when the walk meets them (never used, never closed).
            if !s.is_ours() {
                f.socks.remove(i);
                continue;
            }
            f.tried += 1;
            match membership(s.fd, true, ifindex, mgid) {
                // EADDRINUSE: this socket has it already (only a membership
                // rsverbs did not count could do that): it is held.
                Ok(()) | Err(libc::EADDRINUSE) => {
                    f.next = i;
                    return Ok(s);
                }
                Err(e) if full(e) => i += 1,
                Err(e) => return Err(e),
            }
        }
        // Room for the new socket first: a failed allocation is ENOMEM,
        // never an abort, and never a socket that nothing holds.
        if f.socks.try_reserve(1).is_err() {
            return Err(libc::ENOMEM);
        }
        // SAFETY: plain socket(2).
        let fd = unsafe { libc::socket(family, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(crate::error::errno());
        }
        f.tried += 1;
        let joined = match id(fd) {
            Some(id) => membership(fd, true, ifindex, mgid).map(|()| Sock { fd, id }),
            None => Err(libc::EBADF),
        };
        match joined {
            Ok(s) => {
                f.socks.push(s);
                f.next = f.socks.len() - 1;
                Ok(s)
            }
            Err(e) => {
                // fd was opened above and is not kept.
                crate::sys::close(fd);
                Err(e)
            }
        }
    }

    /// Leaves `mgid` on `ifindex` through `s`, the socket [`Pool::join`]
    /// returned. EBADF, and no syscall on the fd, when the program has
    /// closed it since (the membership ended with it).
    pub fn leave(&mut self, s: Sock, ifindex: u32, mgid: &Mgid) -> Result<(), c_int> {
        if !s.is_ours() {
            return Err(libc::EBADF);
        }
        membership(s.fd, false, ifindex, mgid)?;
        // Room again in s: the next join starts there at the latest.
        let (f, _) = self.family(mgid);
        if let Some(i) = f.socks.iter().position(|&t| t == s) {
            f.next = f.next.min(i);
        }
        Ok(())
    }

    /// Closes the sockets that are still rsverbs'. In a forked child (the
    /// inherited ones): the memberships stay with the parent, which shares
    /// the open file descriptions (close(2) of one reference does not
    /// release the socket), so the child never drops them (an
    /// IP_DROP_MEMBERSHIP on a shared socket would end the parent's). At
    /// unload: the memberships end with the sockets, which nothing could
    /// close after the library is gone. fstat, close and no allocation or
    /// free: async-signal-safe, as an atfork child handler must be.
    #[cfg_attr(not(rsverbs_clib), allow(dead_code))] // lifecycle.rs is the C library's only caller
    pub fn close_ours(&mut self) {
        for s in self.v4.socks.iter().chain(self.v6.socks.iter()) {
            if s.is_ours() {
                // The socket this process inherited, still ours.
                crate::sys::close(s.fd);
            }
        }
        // Sock is Copy: clear() frees nothing.
        self.v4.socks.clear();
        self.v6.socks.clear();
        self.v4.next = 0;
        self.v6.next = 0;
    }

    /// How many sockets each family has open.
    #[cfg(test)]
    pub fn sizes(&self) -> (usize, usize) {
        (self.v4.socks.len(), self.v6.socks.len())
    }

    /// How many setsockopt calls each family's joins made.
    #[cfg(test)]
    pub fn tried(&self) -> (usize, usize) {
        (self.v4.tried, self.v6.tried)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_is_packed_for_the_counts_and_back() {
        for s in [
            Sock { fd: 0, id: Id::Cookie(u64::MAX) },
            Sock { fd: 1023, id: Id::Inode(0) },
            Sock { fd: c_int::MAX, id: Id::Inode(1 << 40) },
            Sock { fd: -1, id: Id::Cookie(7) },
        ] {
            assert_eq!(Sock::unpack(s.pack()), s);
        }
    }

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
        let mut pool = Pool::new();
        let g = mapped([239, 254, 77, 1]);
        let s = pool.join(lo, &g).expect("join 239.254.77.1 on lo");
        // SAFETY: fcntl(2) on an fd of ours.
        let flags = unsafe { libc::fcntl(s.fd, libc::F_GETFD) };
        assert_eq!(flags & libc::FD_CLOEXEC, libc::FD_CLOEXEC);
        // Held: the same join again on this socket is EADDRINUSE (taken as
        // held, same socket); the leave works once, then EADDRNOTAVAIL.
        assert_eq!(pool.join(lo, &g), Ok(s));
        assert_eq!(pool.leave(s, lo, &g), Ok(()));
        assert_eq!(pool.leave(s, lo, &g), Err(libc::EADDRNOTAVAIL));
        pool.close_ours();
    }

    /// docs/security.md: past one socket's limit the pool opens
    /// more sockets, for IPv4 (ENOBUFS at igmp_max_memberships) and IPv6
    /// (ENOMEM at optmem_max) alike, with no fixed cap. Joins on lo.
    #[test]
    fn the_pool_grows_past_each_sockets_limit() {
        // SAFETY: a NUL-terminated literal.
        let lo = unsafe { libc::if_nametoindex(c"lo".as_ptr()) };
        let per_v4: usize = std::fs::read_to_string("/proc/sys/net/ipv4/igmp_max_memberships")
            .ok()
            .and_then(|s| s.trim_ascii().parse().ok())
            .unwrap_or(20);
        let mut pool = Pool::new();
        let n4 = per_v4 * 3 + 1;
        for i in 0..n4 {
            let g = mapped([239, 254, 78 + (i / 250) as u8, (i % 250) as u8]);
            assert!(pool.join(lo, &g).is_ok(), "IPv4 join {i} of {n4}");
        }
        assert!(pool.sizes().0 >= 4, "{n4} IPv4 groups on {:?} sockets", pool.sizes());
        // IPv6: a socket's groups take more than 32 bytes each of its option
        // memory (mcast.c: struct ipv6_mc_socklist), so optmem_max / 32
        // groups need more than one socket, whatever optmem_max is (20480
        // by default on Linux 6.1; later kernels raised the default).
        let optmem: usize = std::fs::read_to_string("/proc/sys/net/core/optmem_max")
            .ok()
            .and_then(|s| s.trim_ascii().parse().ok())
            .unwrap_or(20480);
        let n6 = (optmem / 32).min(60_000);
        for i in 0..n6 {
            let mut m = [0u8; 16];
            m[0] = 0xff;
            m[1] = 0x15;
            m[14] = (i >> 8) as u8;
            m[15] = i as u8;
            assert!(pool.join(lo, &Mgid(m)).is_ok(), "IPv6 join {i} of {n6}");
        }
        assert!(pool.sizes().1 >= 2, "{n6} IPv6 groups on {:?} sockets", pool.sizes());
        pool.close_ours();
    }

    /// docs/ipjoin.md: a join starts at the socket that last had room,
    /// so N IPv4 groups cost about N + N / igmp_max_memberships setsockopt
    /// calls, not N + (N / limit)^2 * limit / 2 (each join trying every
    /// full socket first: 1,100 calls for 200 groups at 20 per socket). A
    /// leave makes room that the next join takes, with no new socket.
    #[test]
    fn a_join_starts_at_the_socket_that_last_had_room() {
        // SAFETY: a NUL-terminated literal.
        let lo = unsafe { libc::if_nametoindex(c"lo".as_ptr()) };
        let per: usize = std::fs::read_to_string("/proc/sys/net/ipv4/igmp_max_memberships")
            .ok()
            .and_then(|s| s.trim_ascii().parse().ok())
            .unwrap_or(20);
        if per == 0 || per > 100 {
            println!("a_join_starts_at_the_socket_that_last_had_room: skipped, igmp_max_memberships is {per}");
            return;
        }
        let n = per * 10;
        let g = |i: usize| mapped([239, 254, 90 + (i / 250) as u8, (i % 250) as u8]);
        let mut pool = Pool::new();
        let joined: Vec<Sock> = (0..n).map(|i| pool.join(lo, &g(i)).expect("join")).collect();
        let (tried, _) = pool.tried();
        let sockets = pool.sizes().0;
        assert_eq!(sockets, 10, "{n} groups at {per} per socket");
        // One call per group, and one more on the full socket before each new one.
        assert!(tried <= n + sockets, "{tried} setsockopt calls for {n} groups on {sockets} sockets");
        // A leave in the first socket: the next join goes there.
        assert_eq!(pool.leave(joined[0], lo, &g(0)), Ok(()));
        assert_eq!(pool.join(lo, &g(0)), Ok(joined[0]));
        assert_eq!(pool.sizes().0, 10);
        pool.close_ours();
    }

    /// docs/security.md, promise 4: a socket is known by its cookie, which the kernel
    /// never reuses (an inode number is reused once its socket is freed);
    /// by its inode only on kernels before 4.13.
    #[test]
    fn a_socket_is_known_by_its_cookie() {
        // SAFETY: a NUL-terminated literal.
        let lo = unsafe { libc::if_nametoindex(c"lo".as_ptr()) };
        let mut pool = Pool::new();
        let s = pool.join(lo, &mapped([239, 254, 80, 1])).expect("join");
        let mut c: u64 = 0;
        let mut len = 8 as libc::socklen_t;
        // SAFETY: the kernel's own answer, asked directly: c and len are
        // valid out-pointers of the sizes passed.
        let has = unsafe { libc::getsockopt(s.fd, libc::SOL_SOCKET, 57, (&mut c as *mut u64).cast(), &mut len) } == 0;
        if !has {
            println!("a_socket_is_known_by_its_cookie: skipped, no SO_COOKIE (kernel before 4.13)");
            assert!(matches!(s.id, Id::Inode(_)));
            pool.close_ours();
            return;
        }
        assert_eq!(s.id, Id::Cookie(c));
        assert!(s.is_ours());
        // Another socket at the same number: another cookie, not ours.
        // SAFETY: plain socket calls standing in for the program's.
        unsafe {
            let t = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
            assert_ne!(cookie(t), Some(c));
            assert_eq!(libc::dup2(t, s.fd), s.fd);
            libc::close(t);
        }
        assert!(!s.is_ours());
        assert_eq!(cookie(-1), None);
        pool.close_ours();
        // SAFETY: the program's own fd, at our old number.
        unsafe { libc::close(s.fd) };
    }

    /// docs/security.md: a socket the program closed, whose number the
    /// program reused for a socket of its own, is never used or closed.
    #[test]
    fn a_socket_the_program_reused_is_not_touched() {
        // SAFETY: a NUL-terminated literal.
        let lo = unsafe { libc::if_nametoindex(c"lo".as_ptr()) };
        let mut pool = Pool::new();
        let g = mapped([239, 254, 79, 1]);
        let s = pool.join(lo, &g).expect("join");
        // The program: close rsverbs' socket, open its own at that number,
        // join the same group on it. dup2(2) does the close and the reuse in
        // one step: a close() first would free the number for the other test
        // threads of this process, whose fds a later dup2 would then replace.
        // SAFETY: plain socket calls standing in for the program's.
        let theirs = unsafe {
            let t = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
            assert!(t >= 0);
            assert_eq!(libc::dup2(t, s.fd), s.fd);
            libc::close(t);
            s.fd
        };
        assert_eq!(membership(theirs, true, lo, &g), Ok(()));
        assert!(!s.is_ours());
        assert_eq!(pool.leave(s, lo, &g), Err(libc::EBADF), "dropped the program's membership");
        pool.close_ours();
        // SAFETY: fcntl(2) on the program's fd.
        assert!(unsafe { libc::fcntl(theirs, libc::F_GETFD) } >= 0, "closed the program's fd");
        assert_eq!(membership(theirs, false, lo, &g), Ok(()), "the program's membership is gone");
        // SAFETY: the program's own fd.
        unsafe { libc::close(theirs) };
    }
}
