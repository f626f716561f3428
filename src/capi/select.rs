//! GID selection in the C ABI (docs/gid-select.md, rsverbs_gid_index(3)):
//! rsverbs' own functions, with no rdma-core counterpart. Each returns the
//! index, or -1 with `errno` set; a success leaves `errno` as it was.

use crate::abi::{IBV_GID_TYPE_IB, IBV_GID_TYPE_ROCE_V1, IBV_GID_TYPE_ROCE_V2, ibv_context};
use crate::error::{ErrnoGuard, Error, Result, set_errno};
use crate::select::Port;
use crate::select::rules::{Family, Filter, NO_VLAN};
use core::ffi::{c_int, c_uint};
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The C convention of the three functions.
fn index_c(result: impl FnOnce() -> Result<u32>) -> c_int {
    let saved = ErrnoGuard::save();
    match result().and_then(|i| c_int::try_from(i).map_err(|_| Error::sys(libc::EOVERFLOW))) {
        Ok(i) => i,
        Err(e) => {
            saved.keep_current();
            set_errno(e.code);
            -1
        }
    }
}

/// `rsverbs_gid_index_rdma_cm`: the GID index rdma_cm binds for the IP
/// address `addr` on the netdev `ifindex` of RoCE port `port_num`: the
/// lowest index whose entry holds the address's GID (IPv4 as
/// ::ffff:a.b.c.d), on that netdev, of the port's default RoCE type
/// (configfs `default_roce_mode`, else RoCE v2). `ifindex` 0: any netdev.
///
/// Returns the index, or -1 with `errno`: EINVAL for a NULL `context` or
/// `addr`, or a port the kernel does not have; EAFNOSUPPORT for a family
/// other than AF_INET and AF_INET6; EPROTONOSUPPORT for a port whose link
/// layer is not Ethernet; ENOENT when no entry matches; or the error of
/// the table query.
///
/// # Safety
/// `context` must be NULL or a live rdma-core context; `addr` NULL or a
/// `struct sockaddr_in` (AF_INET) or `struct sockaddr_in6` (AF_INET6).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rsverbs_gid_index_rdma_cm(
    context: *mut ibv_context,
    port_num: u8,
    addr: *const libc::sockaddr,
    ifindex: c_uint,
) -> c_int {
    index_c(|| {
        // SAFETY: NULL or a sockaddr of its family (our caller's contract).
        let ip = unsafe { ip_of(addr) }?;
        // SAFETY: NULL or live (our caller's contract).
        let port = unsafe { Port::new(context, port_num) }?;
        port.rdma_cm(ip, (ifindex != 0).then_some(ifindex))
    })
}

/// `rsverbs_gid_index_perftest`: the GID index perftest's `ib_send_bw` and
/// the other tests use on RoCE port `port_num` without `-x`
/// (perftest_resources.c `get_best_gid_index`).
///
/// Returns the index, or -1 with `errno`: EINVAL for a NULL `context` or a
/// port the kernel does not have; EPROTONOSUPPORT for a port whose link
/// layer is not Ethernet (perftest uses no GID index there); or the error
/// of the table query.
///
/// # Safety
/// `context` must be NULL or a live rdma-core context.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rsverbs_gid_index_perftest(context: *mut ibv_context, port_num: u8) -> c_int {
    // SAFETY: NULL or live (our caller's contract).
    index_c(|| unsafe { Port::new(context, port_num) }?.perftest())
}

/// `rsverbs_gid_index_find`: the lowest GID index at or after `start` on
/// port `port_num` whose entry passes every filter:
/// - `gid_type`: `IBV_GID_TYPE_IB`, `IBV_GID_TYPE_ROCE_V1` or
///   `IBV_GID_TYPE_ROCE_V2`; -1 for any;
/// - `family`: `AF_INET` (an IPv4-mapped GID), `AF_INET6` (any other);
///   `AF_UNSPEC` (0) for any;
/// - `ifindex`: the entry's netdev; 0 for any;
/// - `vlan`: the VLAN ID (0 to 4095) of the entry's netdev, or 0xffff for a
///   netdev that is not a VLAN; -1 for any.
///
/// Returns the index, or -1 with `errno`: EINVAL for a NULL `context`, a
/// port the kernel does not have, a negative `start` or a value out of the
/// ranges above; ENOENT when no entry passes; or the error of the table
/// query. Empty entries never pass.
///
/// # Safety
/// `context` must be NULL or a live rdma-core context.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rsverbs_gid_index_find(
    context: *mut ibv_context,
    port_num: u8,
    gid_type: c_int,
    family: c_int,
    ifindex: c_uint,
    vlan: c_int,
    start: c_int,
) -> c_int {
    index_c(|| {
        let (filter, start) = filter_of(gid_type, family, ifindex, vlan, start)?;
        // SAFETY: NULL or live (our caller's contract).
        unsafe { Port::new(context, port_num) }?.find(&filter, start)
    })
}

/// The arguments of `rsverbs_gid_index_find`, checked.
fn filter_of(gid_type: c_int, family: c_int, ifindex: c_uint, vlan: c_int, start: c_int) -> Result<(Filter, u32)> {
    let bad = Error::sys(libc::EINVAL);
    let gid_type = match gid_type {
        -1 => None,
        t if [IBV_GID_TYPE_IB, IBV_GID_TYPE_ROCE_V1, IBV_GID_TYPE_ROCE_V2].iter().any(|&k| k as c_int == t) => Some(t as u32),
        _ => return Err(bad),
    };
    let family = match family {
        libc::AF_UNSPEC => None,
        libc::AF_INET => Some(Family::V4),
        libc::AF_INET6 => Some(Family::V6),
        _ => return Err(bad),
    };
    let vlan = match vlan {
        -1 => None,
        0..=4095 => Some(vlan as u16),
        v if v == c_int::from(NO_VLAN) => Some(NO_VLAN),
        _ => return Err(bad),
    };
    let start = u32::try_from(start).map_err(|_| bad)?;
    Ok((Filter { gid_type, family, ifindex: (ifindex != 0).then_some(ifindex), vlan }, start))
}

/// The IP address of a `struct sockaddr_in` or `sockaddr_in6`.
///
/// # Safety
/// `addr` NULL or a sockaddr of its family.
unsafe fn ip_of(addr: *const libc::sockaddr) -> Result<IpAddr> {
    if addr.is_null() {
        return Err(Error::sys(libc::EINVAL));
    }
    // SAFETY: non-NULL; every sockaddr starts with sa_family.
    match c_int::from(unsafe { (*addr).sa_family }) {
        libc::AF_INET => {
            // SAFETY: an AF_INET sockaddr is a sockaddr_in.
            let sin = unsafe { addr.cast::<libc::sockaddr_in>().read_unaligned() };
            // s_addr is in network order: its bytes are the address's.
            Ok(IpAddr::V4(Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes())))
        }
        libc::AF_INET6 => {
            // SAFETY: an AF_INET6 sockaddr is a sockaddr_in6.
            let sin6 = unsafe { addr.cast::<libc::sockaddr_in6>().read_unaligned() };
            Ok(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)))
        }
        _ => Err(Error::sys(libc::EAFNOSUPPORT)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_arguments_are_checked() {
        let (f, s) = filter_of(-1, 0, 0, -1, 0).expect("any");
        assert_eq!((f, s), (Filter::default(), 0));
        let (f, s) = filter_of(2, libc::AF_INET, 7, 0xffff, 3).expect("all set");
        assert_eq!(f, Filter { gid_type: Some(2), family: Some(Family::V4), ifindex: Some(7), vlan: Some(NO_VLAN) });
        assert_eq!(s, 3);
        assert_eq!(filter_of(-1, libc::AF_INET6, 0, 4095, 0).expect("v6").0.vlan, Some(4095));
        for (t, fam, v, s) in [(3, 0, -1, 0), (-2, 0, -1, 0), (-1, libc::AF_UNIX, -1, 0), (-1, 0, 4096, 0), (-1, 0, -2, 0), (-1, 0, -1, -1)] {
            assert_eq!(filter_of(t, fam, 0, v, s).map(|_| ()), Err(Error::sys(libc::EINVAL)), "{t} {fam} {v} {s}");
        }
    }

    #[test]
    fn ip_of_reads_both_families_in_network_order() {
        // SAFETY: all-zero sockaddrs are valid.
        let mut sin: libc::sockaddr_in = unsafe { core::mem::zeroed() };
        sin.sin_family = libc::AF_INET as libc::sa_family_t;
        sin.sin_addr.s_addr = u32::from_ne_bytes([192, 0, 2, 7]);
        // SAFETY: a sockaddr_in.
        let ip = unsafe { ip_of((&sin as *const libc::sockaddr_in).cast()) };
        assert_eq!(ip, Ok(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7))));
        // SAFETY: all-zero sockaddrs are valid.
        let mut sin6: libc::sockaddr_in6 = unsafe { core::mem::zeroed() };
        sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
        sin6.sin6_addr.s6_addr = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        // SAFETY: a sockaddr_in6.
        let ip = unsafe { ip_of((&sin6 as *const libc::sockaddr_in6).cast()) };
        assert_eq!(ip, Ok(IpAddr::V6("2001:db8::2".parse().expect("v6"))));
        sin.sin_family = libc::AF_UNIX as libc::sa_family_t;
        // SAFETY: as above.
        assert_eq!(unsafe { ip_of((&sin as *const libc::sockaddr_in).cast()) }, Err(Error::sys(libc::EAFNOSUPPORT)));
        // SAFETY: NULL is checked.
        assert_eq!(unsafe { ip_of(core::ptr::null()) }, Err(Error::sys(libc::EINVAL)));
    }
}
