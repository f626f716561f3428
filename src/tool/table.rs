//! One port's GID table, read through rsverbs' own engine: the whole
//! device's table in one QUERY_GID_TABLE ioctl (`rsverbs::gid::query_gid_table`),
//! else entry by entry (`rsverbs::gid::query_gid_ex`: QUERY_GID_ENTRY, or
//! the sysfs fallback when the kernel lacks the ioctl). Empty slots are holes.

use crate::ffi::Device;
use rsverbs::abi::{IBV_GID_TYPE_IB, IBV_GID_TYPE_ROCE_V1, IBV_GID_TYPE_ROCE_V2, ibv_gid_entry};
use rsverbs::gid::{GidQuery, query_gid_ex, query_gid_table, table_buffer};
use rsverbs::select::place;
use rsverbs::uverbs::route;

/// An entry and a slot of the table: the library's (`rsverbs::select::rules`),
/// which the rdma_cm and perftest rules read.
pub use rsverbs::select::rules::{Gid, Slot};

/// A port's table, in index order, and the route the engine took.
pub struct Table {
    pub slots: Vec<Slot>,
    pub route: &'static str,
}

pub const BY_TABLE: &str = "ioctl QUERY_GID_TABLE";
pub const BY_ENTRY: &str = "ioctl QUERY_GID_ENTRY";
pub const BY_SYSFS: &str = "sysfs (fallback)";

/// Reads every index below `len` of `port`.
pub fn read(dev: &Device, port: u8, len: u32) -> Table {
    if let Some(slots) = read_table(dev, port, len) {
        return Table { slots, route: BY_TABLE };
    }
    let slots = (0..len).map(|i| read_one(dev, port, i)).collect();
    let fallback = route::peek(key(dev)).is_some_and(|r| r.gid_fallback());
    Table { slots, route: if fallback { BY_SYSFS } else { BY_ENTRY } }
}

/// The route key of the device's context.
fn key(dev: &Device) -> route::Key {
    // SAFETY: ctx is an open rdma-core context.
    route::Key { ctx: dev.ctx as usize, fd: unsafe { (*dev.ctx).cmd_fd } }
}

/// One QUERY_GID_TABLE for the whole device, this port's entries placed at
/// their indexes (the library's `select::place`), `len` slots; None when the
/// kernel refuses it.
fn read_table(dev: &Device, port: u8, len: u32) -> Option<Vec<Slot>> {
    let mut buf = table_buffer()?;
    let n = query_gid_table(key(dev), &mut buf).ok()?;
    let mut slots = place(&buf[..n], u32::from(port))?;
    slots.resize(len as usize, Slot::Empty);
    Some(slots)
}

fn read_one(dev: &Device, port: u8, index: u32) -> Slot {
    // SAFETY: all-zero is a valid ibv_gid_entry (integers).
    let mut e: ibv_gid_entry = unsafe { core::mem::zeroed() };
    let q = GidQuery {
        ctx: dev.ctx,
        port_num: u32::from(port),
        gid_index: index,
        entry: &mut e,
        flags: 0,
        entry_size: size_of::<ibv_gid_entry>(),
    };
    // SAFETY: ctx is open and e is writable for entry_size bytes.
    match unsafe { query_gid_ex(&q) } {
        // SAFETY: reading the raw view of a plain byte union.
        Ok(()) => Slot::Gid(Gid { index, raw: unsafe { e.gid.raw }, gid_type: e.gid_type, ifindex: e.ndev_ifindex }),
        Err(err) if err.code == libc::ENODATA => Slot::Empty,
        Err(err) => Slot::Error(err.code),
    }
}

/// The type as ibv_devinfo names it (ibv_devinfo.c `gid_type_str`).
pub fn type_name(t: u32) -> &'static str {
    match t {
        IBV_GID_TYPE_IB => "IB",
        IBV_GID_TYPE_ROCE_V1 => "RoCE v1",
        IBV_GID_TYPE_ROCE_V2 => "RoCE v2",
        _ => "unknown",
    }
}

/// `s` for a terminal or a line-oriented reader: every ASCII control
/// character (below 0x20, and DEL) becomes `?`. Names the kernel keeps for
/// others (a netdev named with an ESC by a CAP_NET_ADMIN holder: the kernel's
/// `dev_valid_name` refuses only '/', ':' and white space) then cannot drive
/// the terminal or split a row; the library's trace lines do the same
/// (`os::Text::mask_controls`). JSON escapes them instead (json.rs).
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    if s.chars().any(|c| c.is_ascii_control()) {
        s.chars().map(|c| if c.is_ascii_control() { '?' } else { c }).collect::<String>().into()
    } else {
        s.into()
    }
}

/// The GID as sysfs and ibv_devinfo print it: eight groups of four digits.
pub fn gid_text(raw: &[u8; 16]) -> String {
    let g: Vec<String> = raw.chunks(2).map(|c| format!("{:02x}{:02x}", c[0], c[1])).collect();
    g.join(":")
}

/// The IPv4 address of a v4-mapped GID (::ffff:a.b.c.d): the library's.
pub use rsverbs::mgid::v4_mapped;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_masks_control_characters_only() {
        assert_eq!(printable("eth0"), "eth0");
        assert_eq!(printable("ev\u{1b}[31mil\tx\u{7f}"), "ev?[31mil?x?");
        assert_eq!(printable("réseau"), "réseau");
    }

    #[test]
    fn gid_text_is_sysfs_form() {
        let mut raw = [0u8; 16];
        raw[10] = 0xff;
        raw[11] = 0xff;
        raw[12..].copy_from_slice(&[192, 0, 2, 1]);
        assert_eq!(gid_text(&raw), "0000:0000:0000:0000:0000:ffff:c000:0201");
        assert_eq!(v4_mapped(&raw), Some(core::net::Ipv4Addr::new(192, 0, 2, 1)));
        raw[0] = 0xfe;
        assert_eq!(v4_mapped(&raw), None);
    }
}
