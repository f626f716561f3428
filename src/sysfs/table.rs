//! The sysfs fallback of `_ibv_query_gid_table` (rdma-core cmd_device.c
//! `query_gid_table_fb`, the same text from 33.0 to 65.0): the device's
//! port count (`ibv_query_device`), then for each port its GID table length
//! and link layer (`ibv_query_port`), then every index of the port through
//! `query_sysfs_gid_entry`.
//!
//! rdma-core fills each entry in place, at `entries + n * entry_size`,
//! whether or not it turns out valid; an empty one (the zero GID) is left
//! there for the next valid entry to overwrite. Once `max_entries` valid
//! entries are in, it reads the rest into an entry of its own, and a
//! further valid entry fails the call with EINVAL. rsverbs does the same,
//! and writes nothing past `max_entries * entry_size` bytes (rdma-core
//! writes whole 32-byte entries, past the end when `entry_size` < 32).

use super::{Want, device, fill_at, query_port};
use crate::abi::{ibv_context, ibv_gid_entry};
use crate::error::{Error, Result};
use crate::uverbs::route::Key;
use crate::uverbs::{self, write};

/// `ibv_query_device(ctx).phys_port_cnt`, through the same route as
/// rdma-core's `ibv_cmd_query_device_any` legacy command (the provider's
/// `query_device_ex` with the size of `struct ibv_device_attr`).
fn port_count(key: Key) -> Result<u8> {
    let mut resp = write::QueryDeviceResp { bytes: [0; 176] };
    let addr = (&mut resp as *mut write::QueryDeviceResp) as u64;
    uverbs::run_write_cmd(key, write::CMD_QUERY_DEVICE, write::QueryDeviceReq { response: addr }, Some((addr, 176)))?;
    Ok(resp.phys_port_cnt())
}

/// `(gid_tbl_len, link_layer)` of a port: `ibv_query_port`.
fn port_info(key: Key, port: u8) -> Result<(i32, u8)> {
    let r = query_port(key, u32::from(port))?;
    // `struct ibv_port_attr.gid_tbl_len` is an int.
    Ok((r.gid_tbl_len() as i32, r.link_layer()))
}

/// `query_gid_table_fb`. Returns the number of valid entries.
///
/// # Safety
/// `ctx` valid; `entries` NULL or writable for `max_entries * entry_size`
/// bytes.
#[cold]
#[inline(never)]
pub unsafe fn query_gid_table(
    ctx: *mut ibv_context,
    key: Key,
    entries: *mut ibv_gid_entry,
    max_entries: usize,
    entry_size: usize,
) -> Result<usize> {
    let ports = port_count(key)?;
    let fill = |p: u8, link_layer: u8, j: u32, at: *mut u8, n: usize| {
        // SAFETY: ctx is valid.
        let dev = unsafe { device(ctx) }?;
        let want = Want { all: true, link_layer: Some(link_layer) };
        // SAFETY: walk gives `n` writable bytes at `at`.
        unsafe { fill_at(dev, key, u32::from(p), j, at, n, want) }
    };
    // SAFETY: forwarded from our caller.
    unsafe { walk(ports, |p| port_info(key, p), fill, entries, max_entries, entry_size) }
}

/// The walk of `query_gid_table_fb` over `ports` ports, with `port` giving
/// a port's `(gid_tbl_len, link_layer)` and `fill(port, link_layer, index,
/// at, n)` filling the entry at `at` (`n` bytes of it the caller's) and
/// returning its GID (rdma-core passes `port_attr.link_layer` down).
///
/// # Safety
/// `entries` NULL or writable for `max_entries * entry_size` bytes; `fill`
/// writes at most `n` bytes at `at`.
unsafe fn walk(
    ports: u8,
    mut port: impl FnMut(u8) -> Result<(i32, u8)>,
    mut fill: impl FnMut(u8, u8, u32, *mut u8, usize) -> Result<[u8; 16]>,
    entries: *mut ibv_gid_entry,
    max_entries: usize,
    entry_size: usize,
) -> Result<usize> {
    let end = entry_size.saturating_mul(max_entries);
    // rdma-core's `struct ibv_gid_entry entry`, where the entries past
    // max_entries are read.
    // SAFETY: all-zero is a valid ibv_gid_entry (integers).
    let mut spare: ibv_gid_entry = unsafe { core::mem::zeroed() };
    let mut num = 0usize;
    for i in 0..ports {
        let p = i + 1;
        let (tbl_len, link_layer) = port(p)?;
        for j in 0..tbl_len.max(0) {
            let (at, n) = if num == max_entries {
                ((&mut spare as *mut ibv_gid_entry).cast::<u8>(), size_of::<ibv_gid_entry>())
            } else if entries.is_null() {
                // rdma-core would write the entry through NULL.
                return Err(Error::sys(libc::EINVAL));
            } else {
                // num < max_entries, so off < end: no overflow.
                let off = num * entry_size;
                (entries.cast::<u8>().wrapping_add(off), end - off)
            };
            let gid = fill(p, link_layer, j as u32, at, n)?;
            if gid == [0; 16] {
                continue;
            }
            if num == max_entries {
                return Err(Error::quiet(libc::EINVAL));
            }
            num += 1;
        }
    }
    Ok(num)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake device: port 1 has `gids` (index → last GID byte, 0 for an
    /// empty entry) and `tbl_len` slots; `fill` writes, as rdma-core does,
    /// gid_index, port_num and the GID (and type 2, ifindex 7 for a valid
    /// one), clipped to n bytes.
    fn run(gids: &[u8], max: usize, esz: usize, buf: &mut [u8]) -> Result<usize> {
        let tbl = gids.len() as i32;
        let fill = |p: u8, _: u8, j: u32, at: *mut u8, n: usize| {
            let last = gids[j as usize];
            let mut e = [0u8; 32];
            e[15] = last;
            e[16..20].copy_from_slice(&j.to_ne_bytes());
            e[20..24].copy_from_slice(&u32::from(p).to_ne_bytes());
            if last != 0 {
                e[24..28].copy_from_slice(&2u32.to_ne_bytes());
                e[28..32].copy_from_slice(&7u32.to_ne_bytes());
            }
            let n = n.min(32);
            // SAFETY: the walk gives n writable bytes at at.
            unsafe { core::ptr::copy_nonoverlapping(e.as_ptr(), at, n) };
            let mut g = [0u8; 16];
            g[15] = last;
            Ok(g)
        };
        // SAFETY: buf is writable for its length, which the tests make
        // max * esz.
        unsafe { walk(1, |_| Ok((tbl, 2)), fill, buf.as_mut_ptr().cast(), max, esz) }
    }

    /// The u32 at byte `at` of `buf`, in host order (as the entry's fields).
    fn u32_at(buf: &[u8], at: usize) -> u32 {
        u32::from_ne_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
    }

    #[test]
    fn valid_entries_are_packed_and_empty_ones_skipped() {
        let mut buf = [0xa5u8; 4 * 32];
        assert_eq!(run(&[1, 0, 3, 0, 0], 4, 32, &mut buf), Ok(2));
        assert_eq!((buf[15], u32_at(&buf, 16), buf[32 + 15], u32_at(&buf, 32 + 16)), (1, 0, 3, 2));
        // The empty entries after the last valid one are left in slot 2,
        // as rdma-core leaves them: index 4, the zero GID.
        assert_eq!((buf[64 + 15], u32_at(&buf, 64 + 16), u32_at(&buf, 64 + 24)), (0, 4, 0));
        assert!(buf[96..].iter().all(|&b| b == 0xa5));
    }

    #[test]
    fn more_valid_entries_than_max_entries_is_einval() {
        let mut buf = [0xa5u8; 2 * 32];
        assert_eq!(run(&[1, 2, 0, 3], 2, 32, &mut buf), Err(Error::quiet(libc::EINVAL)));
        // Empty entries past max_entries are not counted.
        assert_eq!(run(&[1, 2, 0, 0], 2, 32, &mut buf), Ok(2));
        assert_eq!(run(&[0, 0], 0, 32, &mut []), Ok(0));
        assert_eq!(run(&[0, 5], 0, 32, &mut []), Err(Error::quiet(libc::EINVAL)));
    }

    #[test]
    fn small_entry_sizes_overlap_and_stop_at_the_end() {
        // entry_size 8: each entry's 32 bytes overlap the next ones; only
        // 3 * 8 bytes are the caller's.
        let mut buf = [0xa5u8; 3 * 8 + 8];
        assert_eq!(run(&[9, 8, 7], 3, 8, &mut buf[..24]), Ok(3));
        assert!(buf[24..].iter().all(|&b| b == 0xa5), "nothing past max_entries * entry_size");
        // Large strides leave the bytes between entries alone.
        let mut buf = [0xa5u8; 2 * 48];
        assert_eq!(run(&[9, 8], 2, 48, &mut buf), Ok(2));
        assert!(buf[32..48].iter().all(|&b| b == 0xa5) && buf[48 + 15] == 8);
    }

    #[test]
    fn null_entries_fail_where_rdma_core_would_write() {
        let fill = |_: u8, _: u8, _: u32, _: *mut u8, _: usize| Ok([0u8; 16]);
        // SAFETY: entries is NULL; walk never writes through it.
        let r = unsafe { walk(1, |_| Ok((4, 2)), fill, core::ptr::null_mut(), 1, 32) };
        assert_eq!(r, Err(Error::sys(libc::EINVAL)));
        // With max_entries 0 every entry goes to the spare one.
        // SAFETY: as above.
        let r = unsafe { walk(1, |_| Ok((4, 2)), fill, core::ptr::null_mut(), 0, 32) };
        assert_eq!(r, Ok(0));
    }

    #[test]
    fn a_port_error_ends_the_walk_with_it() {
        let fill = |_: u8, _: u8, _: u32, _: *mut u8, _: usize| Ok([1u8; 16]);
        let mut buf = [0u8; 64];
        let port = |p: u8| if p == 2 { Err(Error::sys(libc::EBADF)) } else { Ok((1, 2)) };
        // SAFETY: buf is writable for 2 * 32 bytes.
        let r = unsafe { walk(2, port, fill, buf.as_mut_ptr().cast(), 2, 32) };
        assert_eq!(r, Err(Error::sys(libc::EBADF)));
    }
}
