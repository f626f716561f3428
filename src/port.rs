//! A QP's port and what that port sits on: its link layer and its netdevs.
//! Read by the trace (its `port=` field and hints) and by
//! `RSVERBS_MCAST_IPJOIN` (the netdevs to join a group on). The kernel is
//! asked through the context's own route, as rdma-core's `ibv_query_qp` and
//! `ibv_query_gid_table` would; sysfs where the kernel has no command. The
//! caller saves and restores `errno`.

use crate::abi::ibv_gid_entry;
use crate::os;
use crate::uverbs::{self, route, route::Key};
use crate::view::Device;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

/// `enum ib_uverbs_write_cmds` (kernel include/uapi/rdma/ib_user_verbs.h).
const CMD_QUERY_QP: u32 = 25;
/// `IBV_QP_PORT`, `IBV_QP_QKEY` (verbs.h `enum ibv_qp_attr_mask`).
const IBV_QP_PORT: u32 = 1 << 5;
const IBV_QP_QKEY: u32 = 1 << 6;

/// `struct ib_uverbs_query_qp` (16 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
struct QueryQpReq {
    response: u64,
    qp_handle: u32,
    attr_mask: u32,
}

/// `struct ib_uverbs_query_qp_resp` is 128 bytes; `qkey` is the u32 at
/// byte 84, `port_num` the u8 at 116 (kernel ib_user_verbs.h; offsetof
/// checked with gcc on the 6.1 and 6.18 headers).
const QP_RESP_LEN: usize = 128;
const QP_RESP_QKEY: usize = 84;
const QP_RESP_PORT: usize = 116;

/// What one QUERY_QP tells of a QP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpFacts {
    pub port: Option<u32>,
    /// The QP's Q_Key, when the kernel answered (0 for a QP never given
    /// one: the kernel's `ib_qp_attr` starts zeroed).
    pub qkey: Option<u32>,
}

/// The port a QP is bound to: the kernel's `port_num` (QUERY_QP), which
/// is set from INIT on (kernel uverbs_cmd.c `ib_uverbs_query_qp`); for a
/// QP still in RESET (port 0) the device's only port when it has one.
pub fn qp_port(key: Key, handle: u32, dev: &Device) -> Option<u32> {
    qp_facts(key, handle, dev).port
}

/// [`qp_port`] and the QP's Q_Key, from the same QUERY_QP. The kernel
/// copies every field of `ib_query_qp`'s answer into the response, `qkey`
/// too (uverbs_cmd.c `ib_uverbs_query_qp`), as rdma-core's
/// `ibv_cmd_query_qp` reads it (`attr->qkey = resp.qkey`); `IBV_QP_QKEY`
/// is asked as well, for a driver that fills only what the mask names.
pub fn qp_facts(key: Key, handle: u32, dev: &Device) -> QpFacts {
    let mut f = QpFacts::default();
    if key.fd >= 0 {
        let mut resp = [0u8; QP_RESP_LEN];
        let addr = resp.as_mut_ptr() as u64;
        let req = QueryQpReq { response: addr, qp_handle: handle, attr_mask: IBV_QP_PORT | IBV_QP_QKEY };
        if uverbs::run_write_cmd(key, CMD_QUERY_QP, req, Some((addr, QP_RESP_LEN as u16))).is_ok() {
            f = decode_qp_resp(&resp);
        }
    }
    if f.port.is_none() {
        f.port = only_port(dev);
    }
    f
}

/// The port (None for 0) and the Q_Key of a QUERY_QP response, in host order.
fn decode_qp_resp(resp: &[u8; QP_RESP_LEN]) -> QpFacts {
    let q = &resp[QP_RESP_QKEY..QP_RESP_QKEY + 4];
    let port = resp[QP_RESP_PORT];
    QpFacts { port: (port != 0).then_some(u32::from(port)), qkey: Some(u32::from_ne_bytes([q[0], q[1], q[2], q[3]])) }
}

/// The device's port when `ports/` lists exactly one.
fn only_port(dev: &Device) -> Option<u32> {
    let mut path = Path::new();
    let _ = write!(path, "{}/ports", dev.sysfs());
    let (mut count, mut first) = (0, 0);
    os::Dir::open(path.cstr()?).ok()?.each_name(|n| {
        if let Some(p) = core::str::from_utf8(n).ok().and_then(|n| n.parse::<u32>().ok()) {
            count += 1;
            first = p;
        }
    });
    (count == 1).then_some(first)
}

/// A sysfs path, on the stack (no allocation: docs/security.md); a path
/// that does not fit is not read.
type Path = os::Text<256>;

/// A sysfs attribute below the device, trimmed; None also when the
/// allocation of its text fails.
fn attr(dev: &Device, rel: core::fmt::Arguments<'_>) -> Option<String> {
    let mut path = Path::new();
    let _ = write!(path, "{}/{rel}", dev.sysfs());
    let s = os::read_text(path.cstr()?)?;
    let t = s.trim_ascii();
    if t.is_empty() {
        None
    } else if t.len() == s.len() {
        Some(s)
    } else {
        os::try_string(t)
    }
}

/// `ports/N/link_layer` is `Ethernet` (RoCE, iWARP) or `InfiniBand`
/// (kernel sysfs.c `show_port_link_layer`).
pub fn is_ethernet(dev: &Device, port: u32) -> bool {
    link_layer(dev, port) == Some(LinkLayer::Ethernet)
}

/// A port's link layer (sysfs.c `show_port_link_layer`: `InfiniBand`,
/// `Ethernet` or `Unknown`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkLayer {
    InfiniBand,
    Ethernet,
    Unknown,
}

/// The link layer of `port`; None when the device has no such port (no
/// `ports/N` directory: sysfs.c makes one per valid port, from 1) or the
/// file cannot be read.
pub fn link_layer(dev: &Device, port: u32) -> Option<LinkLayer> {
    port_link_layer(dev.sysfs(), port).ok()
}

/// The link layer of `port` of the device whose sysfs directory is
/// `sysfs`, read into a buffer on the stack: no allocation, so a caller
/// under memory pressure is never told its port is wrong (the text was a
/// `String`, and a failed allocation read as "no such port", EINVAL).
/// Err(EINVAL) only when the device has no such port (port 0, or no
/// `ports/N/link_layer`: ENOENT, ENOTDIR); any other failure is
/// the kernel's errno (ENOMEM, EMFILE, ...), as librdmacm passes it on.
pub fn port_link_layer(sysfs: &str, port: u32) -> Result<LinkLayer, libc::c_int> {
    if port == 0 {
        return Err(libc::EINVAL);
    }
    let mut path = Path::new();
    let _ = write!(path, "{sysfs}/ports/{port}/link_layer");
    let Some(p) = path.cstr() else { return Err(libc::EINVAL) };
    let f = match os::File::open(p) {
        Ok(f) => f,
        Err(e) => {
            let e = e.code;
            return Err(if e == libc::ENOENT || e == libc::ENOTDIR { libc::EINVAL } else { e });
        }
    };
    // "InfiniBand\n" is the longest value (sysfs.c show_port_link_layer).
    let mut buf = [0u8; 32];
    let n = f.read(&mut buf).map_err(|e| e.code)?;
    Ok(match buf[..n].trim_ascii() {
        b"Ethernet" => LinkLayer::Ethernet,
        b"InfiniBand" => LinkLayer::InfiniBand,
        _ => LinkLayer::Unknown,
    })
}

/// The netdev of GID `index` (kernel sysfs.c `print_ndev`: empty entries
/// and IB ports have none).
pub fn gid_netdev(dev: &Device, port: u32, index: u32) -> Option<String> {
    attr(dev, format_args!("ports/{port}/gid_attrs/ndevs/{index}"))
}

/// The netdev of the port's GIDs: that of the first populated entry (a
/// RoCE port's default GIDs come first, kernel roce_gid_mgmt.c).
pub fn port_netdev(dev: &Device, port: u32) -> Option<String> {
    (0..16).find_map(|i| gid_netdev(dev, port, i))
}


/// The distinct netdevs (ifindexes) of `port`'s GID entries, in table
/// order. An InfiniBand port has none (its entries carry ifindex 0, kernel
/// uverbs_std_types_device.c `copy_gid_entries_to_user` via
/// `rdma_read_gid_attr_ndev_rcu`). QUERY_GID_TABLE (Linux 5.10 on) gives
/// every valid entry in one call; on older kernels, sysfs: the netdev of the
/// port's first populated entry, its default GID's (roce_gid_mgmt.c).
pub fn netdevs(key: Key, dev: &Device, port: u32) -> Vec<u32> {
    if let Some(v) = table_netdevs(key, dev, port) {
        return v;
    }
    if !is_ethernet(dev, port) {
        return Vec::new();
    }
    let Some(netdev) = port_netdev(dev, port) else { return Vec::new() };
    let mut name = os::Text::<{ libc::IF_NAMESIZE + 1 }>::new();
    let _ = name.write_str(&netdev);
    let Some(name) = name.cstr() else { return Vec::new() };
    // SAFETY: name is NUL-terminated.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    let mut v = Vec::new();
    if index != 0 {
        os::try_push(&mut v, index);
    }
    v
}

/// [`netdevs`] from QUERY_GID_TABLE; None when the kernel lacks it.
fn table_netdevs(key: Key, dev: &Device, port: u32) -> Option<Vec<u32>> {
    let route = route::get(key).ok()?;
    if route.gid_fallback() {
        return None;
    }
    let mut entries = crate::gid::table_buffer()?;
    let n = crate::gid::query_gid_table(key, &mut entries).ok()?;
    let mut here = Vec::new();
    for (ifindex, index) in distinct_netdevs(&entries[..n], port) {
        if named_alike(gid_netdev(dev, port, index).as_deref(), &name_here(ifindex)) && !os::try_push(&mut here, ifindex) {
            break;
        }
    }
    Some(here)
}

/// `ARPHRD_INFINIBAND` (include/uapi/linux/if_arp.h): an IPoIB netdev's
/// `/sys/class/net/NAME/type`.
const ARPHRD_INFINIBAND: u32 = 32;

/// The IPoIB netdev of InfiniBand `port` for the P_Key `pkey` (None: any),
/// as its ifindex. An IB port's GID entries carry no netdev, so the
/// netdev is found as rdma_cm's address translation would find it from
/// the other side: type 32, a 20-byte hardware address that is the QPN and
/// the port's GID (drivers/infiniband/ulp/ipoib/ipoib_main.c
/// `ipoib_intf_init`: `dev_addr[4..20]` = the port GID 0), and, for a
/// child interface, its `pkey` attribute (ipoib_vlan.c; the parent has
/// the port's P_Key at index 0). The full member bit (0x8000) is compared
/// as IPoIB sets it (`priv->pkey |= 0x8000`). Read, not run: there is no
/// InfiniBand port here (docs/fabric-join.md).
pub fn ipoib_netdev(dev: &Device, port: u32, pkey: Option<u16>) -> Option<u32> {
    let gid0 = attr(dev, format_args!("ports/{port}/gids/0"))?;
    let mut gid = [0u8; 16];
    let mut text = [0u8; 41];
    for (t, c) in text.iter_mut().zip(gid0.bytes()) {
        *t = c;
    }
    if !crate::sysfs::parse::parse_gid(&text, &mut gid).1 {
        return None;
    }
    let mut found = None;
    os::Dir::open(c"/sys/class/net").ok()?.each_name(|name| {
        if found.is_some() || name.len() >= libc::IF_NAMESIZE {
            return;
        }
        let Ok(name) = core::str::from_utf8(name) else { return };
        let net = |rel: &str| {
            let mut p = Path::new();
            let _ = write!(p, "/sys/class/net/{name}/{rel}");
            os::read_text(p.cstr()?)
        };
        if net("type").and_then(|t| t.trim_ascii().parse::<u32>().ok()) != Some(ARPHRD_INFINIBAND) {
            return;
        }
        let Some(addr) = net("address") else { return };
        if !hw_has_gid(addr.trim_ascii(), &gid) {
            return;
        }
        if let Some(want) = pkey {
            let has = net("pkey").and_then(|p| u16::from_str_radix(p.trim_ascii().trim_start_matches("0x"), 16).ok());
            if has.map(|h| h | 0x8000) != Some(want | 0x8000) {
                return;
            }
        }
        let mut n = os::Text::<{ libc::IF_NAMESIZE + 1 }>::new();
        let _ = n.write_str(name);
        if let Some(c) = n.cstr() {
            // SAFETY: c is NUL-terminated.
            let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
            if i != 0 {
                found = Some(i);
            }
        }
    });
    found
}

/// Whether the IPoIB hardware address `addr` (`80:00:04:04:fe:80:…`, 20
/// bytes) carries `gid` in its bytes 4 to 19.
fn hw_has_gid(addr: &str, gid: &[u8; 16]) -> bool {
    let mut n = 0;
    for (i, b) in addr.split(':').enumerate() {
        let Ok(v) = u8::from_str_radix(b, 16) else { return false };
        if i >= 20 || (i >= 4 && v != gid[i - 4]) {
            return false;
        }
        n = i + 1;
    }
    n == 20
}

/// The name of `ifindex` in this process's network namespace, if any.
pub fn name_here(ifindex: u32) -> Option<String> {
    let mut name = [0 as core::ffi::c_char; libc::IF_NAMESIZE];
    // SAFETY: name has IF_NAMESIZE bytes, as if_indextoname requires.
    let p = unsafe { libc::if_indextoname(ifindex, name.as_mut_ptr()) };
    if p.is_null() { None } else { os::try_string(crate::abi::c_field(&name)) }
}

/// The kernel gives a GID's netdev as an ifindex of the netdev's own
/// network namespace (uverbs_std_types_device.c `copy_gid_entries_to_user`);
/// in another namespace the same number may name another device, or none
/// (docs/security.md). Kept only when it names, here, the netdev that
/// sysfs names for the GID (kernel sysfs.c `print_ndev`); when sysfs cannot
/// tell, the kernel's number is taken as it is.
fn named_alike(sysfs: Option<&str>, here: &Option<String>) -> bool {
    match (sysfs, here) {
        (None, _) => true,
        (Some(s), Some(h)) => s == h,
        (Some(_), None) => false,
    }
}

/// The distinct non-zero ifindexes of `port`'s entries, first seen first,
/// each with the index of its first entry.
pub fn distinct_netdevs(entries: &[ibv_gid_entry], port: u32) -> Vec<(u32, u32)> {
    let mut v: Vec<(u32, u32)> = Vec::new();
    for e in entries {
        if e.port_num == port
            && e.ndev_ifindex != 0
            && !v.iter().any(|&(i, _)| i == e.ndev_ifindex)
            && !os::try_push(&mut v, (e.ndev_ifindex, e.gid_index))
        {
            break;
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(port: u32, index: u32, ifindex: u32) -> ibv_gid_entry {
        ibv_gid_entry { gid: crate::abi::ibv_gid { raw: [0; 16] }, gid_index: index, port_num: port, gid_type: 2, ndev_ifindex: ifindex }
    }

    /// An IPoIB hardware address is the QPN and the port GID.
    #[test]
    fn an_ipoib_address_carries_the_port_gid() {
        let gid = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x0c, 0x42, 0xa1, 0x03, 0, 0x5e, 0x7f, 0x01];
        let a = "80:00:00:48:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:5e:7f:01";
        assert!(hw_has_gid(a, &gid));
        assert!(!hw_has_gid("80:00:00:48:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:5e:7f:02", &gid));
        assert!(!hw_has_gid("0c:42:a1:03:00:5e", &gid));
        assert!(!hw_has_gid(&format!("{a}:00"), &gid));
        assert!(!hw_has_gid("80:00:00:48:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:5e:7f:zz", &gid));
    }

    #[test]
    fn netdevs_of_one_port_once_each() {
        let t = [entry(1, 0, 3), entry(1, 1, 3), entry(2, 0, 4), entry(1, 2, 7), entry(1, 3, 3), entry(1, 4, 0)];
        assert_eq!(distinct_netdevs(&t, 1), vec![(3, 0), (7, 2)]);
        assert_eq!(distinct_netdevs(&t, 2), vec![(4, 0)]);
        assert_eq!(distinct_netdevs(&t, 3), Vec::<(u32, u32)>::new());
    }

    /// A response with qkey 0x01234567 at 84 and port_num 1 at 116, host
    /// order (holds on big-endian: the crossarch run on s390x).
    #[test]
    fn query_qp_resp_qkey_and_port() {
        let mut le = [0u8; QP_RESP_LEN];
        le[84..88].copy_from_slice(&[0x67, 0x45, 0x23, 0x01]);
        le[116] = 1;
        le[108] = 2; // qp_state INIT, a neighbour that must not leak in
        let mut widths = vec![1; 84];
        widths.push(4);
        widths.extend([1; 40]);
        let mut resp = [0u8; QP_RESP_LEN];
        resp.copy_from_slice(&crate::uverbs::capture::host(&le, &widths));
        assert_eq!(decode_qp_resp(&resp), QpFacts { port: Some(1), qkey: Some(0x0123_4567) });
        resp[116] = 0;
        assert_eq!(decode_qp_resp(&resp).port, None, "port 0: a QP in RESET");
    }

    /// Counts this thread's allocations (the test binary's allocator:
    /// the system's, counted per thread so that parallel tests do not
    /// mix).
    mod counting {
        use std::alloc::{GlobalAlloc, Layout, System};
        use std::cell::Cell;
        thread_local! { static N: Cell<u64> = const { Cell::new(0) }; }
        struct Counting;
        // SAFETY: every call is System's; the count is a thread-local Cell
        // with a const initialiser (no allocation on access).
        unsafe impl GlobalAlloc for Counting {
            unsafe fn alloc(&self, l: Layout) -> *mut u8 {
                let _ = N.try_with(|n| n.set(n.get() + 1));
                // SAFETY: GlobalAlloc's contract, passed on.
                unsafe { System.alloc(l) }
            }
            unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
                // SAFETY: p came from System.alloc.
                unsafe { System.dealloc(p, l) }
            }
            unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
                let _ = N.try_with(|c| c.set(c.get() + 1));
                // SAFETY: GlobalAlloc's contract, passed on.
                unsafe { System.realloc(p, l, n) }
            }
        }
        #[global_allocator]
        static A: Counting = Counting;
        pub fn allocations() -> u64 {
            N.with(Cell::get)
        }
    }

    /// The port check allocates nothing (a failed
    /// allocation can no longer read as "no such port"), and EINVAL is
    /// only the absent port's answer.
    #[test]
    fn the_link_layer_is_read_without_allocating_and_einval_is_only_no_such_port() {
        let dir = std::env::temp_dir().join(format!("rsverbs-ll-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("ports/1")).expect("mkdir");
        std::fs::create_dir_all(dir.join("ports/2")).expect("mkdir");
        std::fs::write(dir.join("ports/1/link_layer"), "Ethernet\n").expect("write");
        std::fs::write(dir.join("ports/2/link_layer"), "InfiniBand\n").expect("write");
        let d = dir.to_str().expect("utf-8");
        let before = counting::allocations();
        assert_eq!(port_link_layer(d, 1), Ok(LinkLayer::Ethernet));
        assert_eq!(port_link_layer(d, 2), Ok(LinkLayer::InfiniBand));
        assert_eq!(port_link_layer(d, 3), Err(libc::EINVAL), "no such port");
        assert_eq!(port_link_layer(d, 0), Err(libc::EINVAL), "port 0");
        assert_eq!(counting::allocations(), before, "the port check allocated");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_ifindex_of_another_namespace_is_not_taken() {
        let here = |s: &str| Some(s.to_owned());
        assert!(named_alike(Some("eth0"), &here("eth0")));
        assert!(!named_alike(Some("eth0"), &here("veth7")), "the number names another device here");
        assert!(!named_alike(Some("eth0"), &None), "the number names nothing here");
        assert!(named_alike(None, &None), "sysfs cannot tell: the kernel's number");
    }
}
