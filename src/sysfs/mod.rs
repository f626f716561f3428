//! The sysfs fallback of the GID family, for kernels without the
//! QUERY_GID_ENTRY and QUERY_GID_TABLE ioctls (rdma-core cmd_device.c
//! `query_sysfs_gid_entry`, and [`table`]: `query_gid_table_fb`).
//!
//! It reproduces rdma-core step by step (the text is the same from 33.0 to
//! 65.0, docs/rdma-core-releases.md), including the side effects a caller
//! can see: which entry fields are written before a failure, and what
//! `errno` holds (the same libc calls, in the same order). Paths are built
//! only from `ibv_device::ibdev_path` (set by rdma-core) and numbers.
//!
//! One deliberate difference: rdma-core writes all 32 bytes of an entry
//! whatever `entry_size` says; rsverbs never writes past the caller's
//! buffer.

pub mod parse;
pub mod table;

use crate::abi::*;
use crate::error::{Error, Result, errno, set_errno};
use crate::os;
use crate::uverbs::{self, route::Key, write};
use core::ffi::{CStr, c_char};
use parse::SysfsGidType;

/// A NUL-terminated path on the stack: `ibdev_path` (< 256) plus a short
/// suffix of fixed words and numbers.
struct Path {
    buf: [u8; IBV_SYSFS_PATH_MAX + 64],
    len: usize,
}

impl Path {
    /// `ibdev_path` up to its NUL (at most 256 bytes).
    fn new(ibdev_path: &[c_char; IBV_SYSFS_PATH_MAX]) -> Self {
        let mut p = Path { buf: [0; IBV_SYSFS_PATH_MAX + 64], len: 0 };
        for &c in ibdev_path.iter().take_while(|&&c| c != 0) {
            p.push(&c.to_ne_bytes()); // c_char: i8 or u8 by target
        }
        p
    }
    fn push(&mut self, s: &[u8]) -> &mut Self {
        // Leave room for the NUL; the suffixes used here always fit.
        let n = s.len().min(self.buf.len() - 1 - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
        self
    }
    /// `%d` of an int.
    fn num(&mut self, v: i32) -> &mut Self {
        let mut tmp = [0u8; 12];
        let mut i = tmp.len();
        let mut u = i64::from(v).unsigned_abs();
        loop {
            i -= 1;
            tmp[i] = b'0' + (u % 10) as u8;
            u /= 10;
            if u == 0 {
                break;
            }
        }
        if v < 0 {
            i -= 1;
            tmp[i] = b'-';
        }
        self.push(&tmp[i..])
    }
    fn as_cstr(&self) -> &CStr {
        // The buffer always holds a NUL at self.len (it starts zeroed and
        // push never writes the last byte), and no interior NUL: ibdev_path
        // was cut at its first NUL and the suffixes contain none.
        CStr::from_bytes_until_nul(&self.buf[..=self.len]).unwrap_or(c"")
    }
}

/// `ibdev_path/ports/<port>/<dir>/<index>`, with rdma-core's formats: the
/// port is a `uint8_t` and the index is printed with `%d`.
fn entry_path(dev: &ibv_device, port: u32, dir: &[u8], index: u32) -> Path {
    let mut p = Path::new(&dev.ibdev_path);
    p.push(b"/ports/").num(i32::from(port as u8)).push(b"/").push(dir).push(b"/").num(index as i32);
    p
}

/// rdma-core sysfs.c `ibv_read_sysfs_file`: open (not retried on EINTR),
/// one read, close; then [`parse::finish_read`]. Returns the string length
/// or -1 (errno set by the failing call: close() of a regular sysfs file
/// does not fail, and rdma-core ignores its result too).
fn read_sysfs_file(path: &Path, buf: &mut [u8]) -> isize {
    let Ok(file) = os::File::open(path.as_cstr()) else { return -1 };
    let n = file.read(buf);
    drop(file);
    match n {
        Ok(n) => parse::finish_read(buf, n),
        Err(_) => -1,
    }
}

/// rdma-core `query_sysfs_gid_type`, errno effects included.
fn gid_type(dev: &ibv_device, port: u32, index: u32) -> core::result::Result<SysfsGidType, ()> {
    let mut buf = [0u8; 11];
    set_errno(0);
    if read_sysfs_file(&entry_path(dev, port, b"gid_attrs/types", index), &mut buf) <= 0 {
        // The kernel answers EINVAL for IB ports and empty entries.
        if errno() == libc::EINVAL {
            return Ok(SysfsGidType::IbRoceV1);
        }
        let mut dir = Path::new(&dev.ibdev_path);
        dir.push(b"/ports/").num(i32::from(port as u8)).push(b"/gid_attrs/");
        if let Err(e) = os::Dir::open(dir.as_cstr()) {
            // No gid_attrs at all: an old kernel, everything is IB/RoCE v1.
            return if e.code == libc::ENOENT { Ok(SysfsGidType::IbRoceV1) } else { Err(()) };
        }
        set_errno(libc::EFAULT);
        return Err(());
    }
    parse::parse_type(&buf).ok_or_else(|| set_errno(libc::ENOTSUP))
}

/// rdma-core `query_sysfs_gid_ndev_ifindex`.
fn ndev_ifindex(dev: &ibv_device, port: u32, index: u32, out: &mut u32) -> Result<()> {
    let mut buf = [0u8; libc::IF_NAMESIZE];
    if read_sysfs_file(&entry_path(dev, port, b"gid_attrs/ndevs", index), &mut buf) <= 0 {
        *out = 0;
        return Ok(());
    }
    // SAFETY: finish_read NUL-terminated buf.
    *out = unsafe { libc::if_nametoindex(buf.as_ptr().cast()) };
    match (*out, errno()) {
        (0, e) if e != 0 => Err(Error::quiet(e)),
        _ => Ok(()),
    }
}

/// `ibv_query_port(ctx, (uint8_t)port)`, through the same route as
/// rdma-core's `ibv_cmd_query_port` legacy command.
pub fn query_port(key: Key, port: u32) -> Result<write::QueryPortResp> {
    let mut resp = write::QueryPortResp { bytes: [0; 40] };
    let addr = (&mut resp as *mut write::QueryPortResp) as u64;
    let req = write::query_port_req(port as u8, addr);
    uverbs::run_write_cmd(key, write::CMD_QUERY_PORT, req, Some((addr, 40)))?;
    Ok(resp)
}

/// What `query_sysfs_gid_entry` is asked for (rdma-core's `attr_mask` and
/// `link_layer` arguments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Want {
    /// `VERBS_QUERY_GID_ATTR_TYPE | VERBS_QUERY_GID_ATTR_NDEV_IFINDEX` as
    /// well as `..._GID`: false for `ibv_query_gid`, which asks for the GID
    /// alone.
    pub all: bool,
    /// The port's link layer when the caller has it (`query_gid_table_fb`);
    /// None: `ibv_query_port` when a type needs it (`link_layer` -1).
    pub link_layer: Option<u8>,
}

impl Want {
    /// `_ibv_query_gid_ex`: every field, the link layer asked when needed.
    pub const ALL: Want = Want { all: true, link_layer: None };
    /// `ibv_query_gid`: `VERBS_QUERY_GID_ATTR_GID` alone.
    pub const GID: Want = Want { all: false, link_layer: None };
}

/// The fallback proper (`query_sysfs_gid_entry` + the zero-GID check of
/// `__ibv_query_gid_ex`): ENODATA for an empty entry.
///
/// # Safety
/// `ctx` valid; `entry` writable for `entry_size` bytes.
#[cold]
#[inline(never)]
pub unsafe fn query_gid_entry(
    ctx: *mut ibv_context,
    key: Key,
    port: u32,
    index: u32,
    entry: *mut ibv_gid_entry,
    entry_size: usize,
    want: Want,
) -> Result<()> {
    // SAFETY: ctx is valid.
    let dev = unsafe { device(ctx) }?;
    // SAFETY: entry is writable for entry_size >= n bytes.
    let gid = unsafe { fill_at(dev, key, port, index, entry.cast(), entry_size.min(size_of::<ibv_gid_entry>()), want) }?;
    if gid == [0; 16] {
        return Err(Error::quiet(libc::ENODATA));
    }
    Ok(())
}

/// The context's device: EINVAL for none (rdma-core would dereference it).
///
/// # Safety
/// `ctx` valid; its device NULL or live while it is.
unsafe fn device<'a>(ctx: *mut ibv_context) -> Result<&'a ibv_device> {
    // SAFETY: ctx is valid; device is set by rdma-core for every context.
    unsafe { (*ctx).device.as_ref() }.ok_or(Error::sys(libc::EINVAL))
}

/// `query_sysfs_gid_entry` into the entry at `at`, of which only the first
/// `n` (at most 32) bytes are the caller's to write: the fields are filled
/// in a copy of those bytes, so that every field rdma-core leaves untouched
/// keeps its bytes, and the copy's first `n` bytes are written back, failed
/// or not. Returns the GID read (all of it, whatever `n`).
///
/// # Safety
/// `at` readable and writable for `n` bytes.
unsafe fn fill_at(dev: &ibv_device, key: Key, port: u32, index: u32, at: *mut u8, n: usize, want: Want) -> Result<[u8; 16]> {
    let n = n.min(size_of::<ibv_gid_entry>());
    let mut e = core::mem::MaybeUninit::<ibv_gid_entry>::zeroed();
    // SAFETY: at is readable for n bytes; e has 32 >= n.
    unsafe { core::ptr::copy_nonoverlapping(at, e.as_mut_ptr().cast::<u8>(), n) };
    // SAFETY: all-zero or copied bytes are a valid ibv_gid_entry (integers).
    let mut e = unsafe { e.assume_init() };
    let result = fill(dev, key, port, index, &mut e, want);
    // SAFETY: at is writable for n bytes.
    unsafe { core::ptr::copy_nonoverlapping((&e as *const ibv_gid_entry).cast::<u8>(), at, n) };
    result?;
    // SAFETY: reading the raw view of a plain byte union.
    Ok(unsafe { e.gid.raw })
}

/// `query_sysfs_gid_entry`'s body, on an entry of rsverbs' own.
fn fill(dev: &ibv_device, key: Key, port: u32, index: u32, e: &mut ibv_gid_entry, want: Want) -> Result<()> {
    e.gid_index = index;
    e.port_num = port;
    let mut text = [0u8; 41];
    if read_sysfs_file(&entry_path(dev, port, b"gids", index), &mut text) < 0 {
        return Err(Error::quiet(libc::EINVAL));
    }
    // SAFETY: writing the raw view of a plain byte union.
    let (_, ok) = parse::parse_gid(&text, unsafe { &mut e.gid.raw });
    if !ok {
        return Err(Error::quiet(libc::EINVAL));
    }
    if !want.all {
        return Ok(());
    }
    e.gid_type = match gid_type(dev, port, index).map_err(|()| Error::quiet(libc::EINVAL))? {
        SysfsGidType::RoceV2 => IBV_GID_TYPE_ROCE_V2,
        SysfsGidType::IbRoceV1 => match want.link_layer.map_or_else(|| query_port(key, port).map(|r| r.link_layer()), Ok)? {
            IBV_LINK_LAYER_ETHERNET => IBV_GID_TYPE_ROCE_V1,
            // INFINIBAND, and "unspecified is IB by default".
            _ => IBV_GID_TYPE_IB,
        },
    };
    ndev_ifindex(dev, port, index, &mut e.ndev_ifindex)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(path: &str) -> Box<ibv_device> {
        // SAFETY: ibv_device is plain data; all-zero is valid.
        let mut d: Box<ibv_device> = Box::new(unsafe { core::mem::zeroed() });
        for (i, b) in path.bytes().enumerate() {
            d.ibdev_path[i] = b as c_char;
        }
        d
    }

    #[test]
    fn paths_use_rdma_core_formats() {
        let d = dev("/sys/class/infiniband/rxe0");
        let p = entry_path(&d, 257, b"gids", 0x8000_0000);
        assert_eq!(p.as_cstr().to_bytes(), b"/sys/class/infiniband/rxe0/ports/1/gids/-2147483648");
        let p = entry_path(&d, 1, b"gid_attrs/ndevs", 7);
        assert_eq!(p.as_cstr().to_bytes(), b"/sys/class/infiniband/rxe0/ports/1/gid_attrs/ndevs/7");
    }

    #[test]
    fn an_overlong_ibdev_path_is_cut_not_overrun() {
        let d = dev(&"x".repeat(255));
        let p = entry_path(&d, 1, b"gid_attrs/types", u32::MAX);
        assert!(p.as_cstr().to_bytes().len() < IBV_SYSFS_PATH_MAX + 64);
    }

    #[test]
    fn fallback_reads_a_fake_tree() {
        let dir = std::env::temp_dir().join(format!("rsverbs-sysfs-{}", std::process::id()));
        let port = dir.join("ports/1");
        std::fs::create_dir_all(port.join("gids")).unwrap();
        std::fs::create_dir_all(port.join("gid_attrs/types")).unwrap();
        std::fs::create_dir_all(port.join("gid_attrs/ndevs")).unwrap();
        std::fs::write(port.join("gids/0"), "fe80:0000:0000:0000:0200:00ff:fe00:0000\n").unwrap();
        std::fs::write(port.join("gid_attrs/types/0"), "RoCE v2\n").unwrap();
        std::fs::write(port.join("gid_attrs/ndevs/0"), "lo\n").unwrap();
        std::fs::write(port.join("gids/1"), "0000:0000:0000:0000:0000:0000:0000:0000\n").unwrap();
        std::fs::write(port.join("gid_attrs/types/1"), "bogus\n").unwrap();
        let d = dev(dir.to_str().unwrap());
        let key = Key { ctx: 1, fd: -1 };
        // SAFETY: zeroed plain data.
        let mut e: ibv_gid_entry = unsafe { core::mem::zeroed() };
        assert_eq!(fill(&d, key, 1, 0, &mut e, Want::ALL), Ok(()));
        assert_eq!((e.gid_index, e.port_num, e.gid_type), (0, 1, IBV_GID_TYPE_ROCE_V2));
        assert_eq!(e.ndev_ifindex, 1, "lo is ifindex 1");
        assert_eq!(fill(&d, key, 1, 1, &mut e, Want::ALL), Err(Error::quiet(libc::EINVAL)));
        assert_eq!(errno(), libc::ENOTSUP);
        // The GID alone (ibv_query_gid): the bad type file is not read.
        set_errno(4242);
        assert_eq!(fill(&d, key, 1, 1, &mut e, Want::GID), Ok(()));
        assert_eq!((e.gid_index, errno()), (1, 4242));
        assert_eq!(fill(&d, key, 1, 9, &mut e, Want::ALL), Err(Error::quiet(libc::EINVAL)));
        assert_eq!((e.gid_index, errno()), (9, libc::ENOENT));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
