//! GID selection (docs/gid-select.md): the index rdma_cm and perftest pick
//! on a port, and the first entry that passes a filter. A port's table is
//! read through rsverbs' own `_ibv_query_gid_table` (one QUERY_GID_TABLE
//! ioctl, or rdma-core's sysfs walk where the kernel lacks it), its link
//! layer through QUERY_PORT, as `ibv_query_port` asks; the rules are pure
//! ([`rules`]).

pub mod rules;

use crate::abi::{IBV_GID_TYPE_ROCE_V1, IBV_GID_TYPE_ROCE_V2, IBV_LINK_LAYER_ETHERNET, ibv_context, ibv_gid_entry};
use crate::error::{Error, Result};
use crate::gid::{TABLE_MAX, TableCall, query_gid_table_c, table_buffer};
use crate::port::name_here;
use crate::sysfs::query_port;
use crate::view::Context;
use alloc::vec::Vec;
use core::fmt::Write;
use rules::{Filter, Gid, NO_VLAN, Slot};

/// One port of a context, checked: the kernel knows the port, and its
/// link layer.
pub struct Port {
    ctx: Context,
    raw: *mut ibv_context,
    port: u8,
    ethernet: bool,
}

impl Port {
    /// # Safety
    /// `ctx` must be NULL or a live rdma-core context.
    ///
    /// NULL gives EINVAL; so does a port the kernel does not have (its
    /// QUERY_PORT answer, as `ibv_query_port` returns it).
    pub unsafe fn new(ctx: *mut ibv_context, port: u8) -> Result<Port> {
        // SAFETY: NULL or live (our caller's contract).
        let Some(c) = (unsafe { Context::of(ctx) }) else {
            return Err(Error::sys(libc::EINVAL));
        };
        let attr = query_port(c.key, u32::from(port))?;
        Ok(Port { ctx: c, raw: ctx, port, ethernet: attr.link_layer() == IBV_LINK_LAYER_ETHERNET })
    }

    /// Whether the port is RoCE (or iWARP): link layer Ethernet.
    pub fn ethernet(&self) -> bool {
        self.ethernet
    }

    /// The port's table in index order, up to its last valid entry: the
    /// device's whole table in one `_ibv_query_gid_table`, this port's
    /// entries placed at their indexes, every other index empty.
    pub fn table(&self) -> Result<Vec<Slot>> {
        let mut buf = table_buffer().ok_or(Error::sys(libc::ENOMEM))?;
        let call = TableCall { ctx: self.raw, entries: buf.as_mut_ptr(), max_entries: TABLE_MAX, flags: 0, entry_size: size_of::<ibv_gid_entry>() };
        // SAFETY: ctx is live (Port::new's contract); buf holds TABLE_MAX entries.
        let n = unsafe { query_gid_table_c(&call) }?.min(TABLE_MAX);
        place(&buf[..n], u32::from(self.port)).ok_or(Error::sys(libc::ENOMEM))
    }

    /// The RoCE type rdma_cm uses on this port: configfs
    /// `rdma_cm/DEV/ports/N/default_roce_mode` when an administrator created
    /// it (kernel cma_configfs.c), else RoCE v2 (cma.c `cma_add_one`:
    /// CMA_PREFERRED_ROCE_GID_TYPE).
    pub fn default_roce_type(&self) -> u32 {
        let name = self.ctx.dev.as_ref().map_or("", |d| d.name());
        default_roce_type(name, self.port)
    }

    /// [`rules::rdma_cm_for`] on this port: the index rdma_cm binds for an
    /// IP address on the netdev `ifindex` (None: any netdev). ENOENT when
    /// no entry has the address's GID with the default type there;
    /// EPROTONOSUPPORT on a port that is not Ethernet (rdma_cm's RoCE rule).
    pub fn rdma_cm(&self, ip: core::net::IpAddr, ifindex: Option<u32>) -> Result<u32> {
        if !self.ethernet {
            return Err(Error::sys(libc::EPROTONOSUPPORT));
        }
        // cma.c `rdma_ip2gid`: IPv4 as ::ffff:a.b.c.d, IPv6 as itself.
        let gid = match ip {
            core::net::IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
            core::net::IpAddr::V6(v6) => v6.octets(),
        };
        rules::rdma_cm_for(&self.table()?, &gid, ifindex, self.default_roce_type()).ok_or(Error::sys(libc::ENOENT))
    }

    /// [`rules::perftest`] on this port. EPROTONOSUPPORT on a port that is
    /// not Ethernet: perftest uses no GID index there (`-x` stays -1).
    pub fn perftest(&self) -> Result<u32> {
        if !self.ethernet {
            return Err(Error::sys(libc::EPROTONOSUPPORT));
        }
        Ok(rules::perftest(&self.table()?))
    }

    /// The lowest index at or after `start` that passes `f`; ENOENT when
    /// none does. /proc/net/vlan/config is read once, and only when the
    /// filter names a VLAN.
    pub fn find(&self, f: &Filter, start: u32) -> Result<u32> {
        let config = core::cell::OnceCell::new();
        let vlan_of = |ifindex| vlan_of(ifindex, config.get_or_init(|| crate::os::read_text(VLAN_CONFIG).unwrap_or_default()));
        f.first(&self.table()?, start, &vlan_of).ok_or(Error::sys(libc::ENOENT))
    }
}

/// The entries of `port` at their indexes, up to the last one; every other
/// index empty. None when the allocation fails.
pub fn place(entries: &[ibv_gid_entry], port: u32) -> Option<Vec<Slot>> {
    let mine = || entries.iter().filter(|e| e.port_num == port);
    let len = mine().map(|e| e.gid_index as usize + 1).max().unwrap_or(0);
    let mut slots = crate::os::try_filled(len, Slot::Empty)?;
    for e in mine() {
        // SAFETY: reading the raw view of a plain byte union.
        let raw = unsafe { e.gid.raw };
        slots[e.gid_index as usize] = Slot::Gid(Gid { index: e.gid_index, raw, gid_type: e.gid_type, ifindex: e.ndev_ifindex });
    }
    Some(slots)
}

/// configfs' answer for `dev`'s `port` (see [`Port::default_roce_type`]).
pub fn default_roce_type(dev: &str, port: u8) -> u32 {
    let mut path = crate::os::Text::<128>::new();
    let _ = write!(path, "/sys/kernel/config/rdma_cm/{dev}/ports/{port}/default_roce_mode");
    match path.cstr().and_then(crate::os::read_text).as_deref().map(str::trim_ascii) {
        // cma_configfs.c `default_roce_mode_store` takes ib_cache_gid_type_str's names.
        Some("IB/RoCE v1") => IBV_GID_TYPE_ROCE_V1,
        _ => IBV_GID_TYPE_ROCE_V2,
    }
}

/// The VLAN netdevs: "NAME | VID | REAL_DEV" rows (kernel
/// net/8021q/vlanproc.c `vlan_seq_show`), of the caller's network
/// namespace. The file exists once the 8021q module is loaded, which every
/// VLAN netdev needs.
const VLAN_CONFIG: &core::ffi::CStr = c"/proc/net/vlan/config";

/// The VLAN ID of the netdev `ifindex` (named in this namespace), or
/// [`NO_VLAN`]: its row in `config`, the text of [`VLAN_CONFIG`].
fn vlan_of(ifindex: u32, config: &str) -> u16 {
    let name = if ifindex == 0 { None } else { name_here(ifindex) };
    name.and_then(|n| vlan_in(config, n.as_bytes())).unwrap_or(NO_VLAN)
}

/// The VID of `name` in the text of /proc/net/vlan/config.
fn vlan_in(config: &str, name: &[u8]) -> Option<u16> {
    config.lines().skip(2).find_map(|l| {
        let mut f = l.split('|').map(str::trim_ascii);
        (f.next()?.as_bytes() == name).then(|| f.next()?.parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::ibv_gid;

    fn entry(port: u32, index: u32, last: u8) -> ibv_gid_entry {
        let mut raw = [0u8; 16];
        raw[15] = last;
        ibv_gid_entry { gid: ibv_gid { raw }, gid_index: index, port_num: port, gid_type: IBV_GID_TYPE_ROCE_V2, ndev_ifindex: 3 }
    }

    #[test]
    fn place_puts_one_port_s_entries_at_their_indexes() {
        let t = place(&[entry(1, 0, 1), entry(2, 0, 2), entry(1, 3, 3), entry(2, 5, 4)], 1).expect("alloc");
        assert_eq!(t.len(), 4);
        assert_eq!(t[0].gid().map(|g| g.raw[15]), Some(1));
        assert_eq!((&t[1], &t[2]), (&Slot::Empty, &Slot::Empty));
        assert_eq!(t[3].gid().map(|g| (g.index, g.raw[15], g.ifindex)), Some((3, 3, 3)));
        assert!(place(&[entry(2, 0, 2)], 1).expect("alloc").is_empty());
    }

    #[test]
    fn vlan_in_reads_vlanproc_rows() {
        let text = "VLAN Dev name\t | VLAN ID\nName-Type: VLAN_NAME_TYPE_RAW_PLUS_VID_NO_PAD\ndummy0.7       | 7  | dummy0\nv100           | 100  | eth0\n";
        assert_eq!(vlan_in(text, b"dummy0.7"), Some(7));
        assert_eq!(vlan_in(text, b"v100"), Some(100));
        assert_eq!(vlan_in(text, b"dummy0"), None);
        assert_eq!(vlan_in("", b"dummy0.7"), None);
    }
}
