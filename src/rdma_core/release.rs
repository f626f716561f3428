//! The release of the loaded libibverbs, from its file name.
//!
//! rdma-core installs libibverbs as `libibverbs.so.1.<ABI>.<PACKAGE_VERSION>`
//! (libibverbs/CMakeLists.txt: `rdma_library(ibverbs ... 1 1.<ABI>.${PACKAGE_VERSION}`):
//! `libibverbs.so.1.11.33.2` is rdma-core 33.2, `.1.14.44.0` is 44.0,
//! `.1.18.65.0` is 65.0. Python wheels ship renamed copies
//! (auditwheel: `libibverbs-<hash>.so.1.14.44.0`), read the same way.
//!
//! The file is the one actually mapped (/proc/self/maps, which names the
//! mapped file even when its symlink, or the file, has been replaced since,
//! say by a package upgrade; realpath would name today's target): the
//! mapping that holds `ibv_get_device_list` as the program sees it
//! (dlsym RTLD_DEFAULT), else, for a libibverbs loaded RTLD_LOCAL (a Python
//! module, a plugin), the first libibverbs mapped. A library whose file
//! name carries no release (a custom install, a static libibverbs) is
//! `None`: rsverbs then follows the newest release it knows.

use crate::os::Once;
use alloc::vec::Vec;
#[cfg(test)]
use core::ffi::CStr;

/// An rdma-core release, `major.minor` (33.2, 44.0, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Release {
    pub major: u32,
    pub minor: u32,
}

impl Release {
    pub const fn new(major: u32, minor: u32) -> Self {
        Release { major, minor }
    }
}

/// What follows `.so` in a libibverbs file name (`libibverbs.so…`, or an
/// auditwheel copy `libibverbs-<tag>.so…`), if it is one.
pub fn libibverbs_suffix(name: &[u8]) -> Option<&[u8]> {
    let rest = name.strip_prefix(b"libibverbs")?;
    let rest = match rest.strip_prefix(b"-") {
        Some(tagged) => {
            let end = tagged.iter().position(|&b| b == b'.')?;
            let tag = &tagged[..end];
            if tag.is_empty() || !tag.iter().all(u8::is_ascii_alphanumeric) {
                return None;
            }
            &tagged[end..]
        }
        None => rest,
    };
    rest.strip_prefix(b".so")
}

/// The release in a libibverbs file name (a path's last component counts):
/// `libibverbs.so.1.<abi>.<major>.<minor>`, or `libibverbs-<tag>.so.…`.
pub fn parse_file_name(path: &[u8]) -> Option<Release> {
    let name = path.rsplit(|&b| b == b'/').next()?;
    let rest = libibverbs_suffix(name)?.strip_prefix(b".")?;
    let mut parts = rest.split(|&b| b == b'.');
    let (_soversion, _abi, major, minor) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    Some(Release::new(number(major)?, number(minor)?))
}

fn number(digits: &[u8]) -> Option<u32> {
    if digits.is_empty() || digits.len() > 9 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    core::str::from_utf8(digits).ok()?.parse().ok()
}

/// The loaded libibverbs' release, found once per process. Leaves
/// `errno` as it was: it runs in the middle of a verb (the first detach
/// that meets EIO).
pub fn installed() -> Option<Release> {
    static FOUND: Once<Option<Release>> = Once::new();
    FOUND.get_or_init(|| {
        let _errno = crate::error::ErrnoGuard::save();
        let mut maps = Vec::new();
        crate::os::read_file(c"/proc/self/maps", &mut maps).ok()?;
        // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name.
        let sym = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"ibv_get_device_list".as_ptr()) } as usize;
        let path = (sym != 0).then(|| mapped_file(&maps, sym)).flatten().or_else(|| first_libibverbs(&maps))?;
        parse_file_name(path)
    })
}

/// The lines of /proc/self/maps as (start, end, path) (kernel
/// fs/proc/task_mmu.c `show_map_vma`: `start-end perms offset dev inode
/// path`, the path padded; " (deleted)" after a file removed since).
fn mappings(maps: &[u8]) -> impl Iterator<Item = (usize, usize, &[u8])> {
    maps.split(|&b| b == b'\n').filter_map(|line| {
        let mut f = line.splitn(6, |&b| b == b' ');
        let range = f.next()?;
        let path = f.nth(4)?.trim_ascii_start();
        let path = path.strip_suffix(b" (deleted)").unwrap_or(path);
        let dash = range.iter().position(|&b| b == b'-')?;
        let hex = |h: &[u8]| usize::from_str_radix(core::str::from_utf8(h).ok()?, 16).ok();
        Some((hex(&range[..dash])?, hex(&range[dash + 1..])?, path))
    })
}

/// The file mapped at `addr`.
fn mapped_file(maps: &[u8], addr: usize) -> Option<&[u8]> {
    mappings(maps).find(|&(lo, hi, p)| (lo..hi).contains(&addr) && p.starts_with(b"/")).map(|m| m.2)
}

/// The first mapped file that is a libibverbs.
fn first_libibverbs(maps: &[u8]) -> Option<&[u8]> {
    mappings(maps)
        .map(|m| m.2)
        .find(|p| p.starts_with(b"/") && libibverbs_suffix(p.rsplit(|&b| b == b'/').next().unwrap_or(p)).is_some())
}

/// The path of the object that contains `sym` (dladdr), for the tests.
#[cfg(test)]
fn path_of(sym: *const core::ffi::c_void) -> Option<Vec<u8>> {
    let _errno = crate::error::ErrnoGuard::save();
    // SAFETY: Dl_info is plain data; dladdr fills it on success.
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    // SAFETY: sym is an address inside a loaded object; info is writable.
    if unsafe { libc::dladdr(sym, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr's string is NUL-terminated.
    Some(unsafe { CStr::from_ptr(info.dli_fname) }.to_bytes().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_debian_release_file_name() {
        for (name, want) in [
            ("libibverbs.so.1.11.33.2", (33, 2)),
            ("/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0", (44, 0)),
            ("libibverbs.so.1.14.56.1", (56, 1)),
            ("libibverbs.so.1.18.65.0", (65, 0)),
        ] {
            assert_eq!(parse_file_name(name.as_bytes()), Some(Release::new(want.0, want.1)), "{name}");
        }
    }

    #[test]
    fn renamed_copies_as_python_wheels_ship_them() {
        assert_eq!(parse_file_name(b"/site-packages/x.libs/libibverbs-07e4f8a1.so.1.14.44.0"), Some(Release::new(44, 0)));
        assert_eq!(parse_file_name(b"libibverbs-abc123.so.1.18.65.0"), Some(Release::new(65, 0)));
        for name in ["libibverbs-.so.1.14.44.0", "libibverbs-a/b.so.1.14.44.0", "libibverbsx.so.1.14.44.0", "libibverbs-abc.so"] {
            assert_eq!(parse_file_name(name.as_bytes()), None, "{name}");
        }
        assert!(libibverbs_suffix(b"libibverbs-abc.so.1").is_some() && libibverbs_suffix(b"libibverbs.so").is_some());
        assert!(libibverbs_suffix(b"libmlx5.so.1").is_none() && libibverbs_suffix(b"libibverbsx.so.1").is_none());
    }

    /// docs/security.md: the mapped file, not today's symlink target;
    /// the first libibverbs when the program cannot see its symbols.
    #[test]
    fn the_mapped_file_is_read_from_proc_self_maps() {
        let maps = b"55d0c0a00000-55d0c0a21000 r--p 00000000 fe:01 1234   /usr/bin/prog\n\
7f1000000000-7f1000010000 r--p 00000000 fe:01 777    /usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0 (deleted)\n\
7f1000010000-7f1000030000 r-xp 00010000 fe:01 777    /usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0 (deleted)\n\
7f2000000000-7f2000001000 rw-p 00000000 00:00 0 \n\
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0      [stack]\n";
        let lib = &b"/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0"[..];
        assert_eq!(mapped_file(maps, 0x7f1000012345), Some(lib));
        assert_eq!(mapped_file(maps, 0x7f2000000010), None);
        assert_eq!(mapped_file(maps, 0x1000), None);
        assert_eq!(first_libibverbs(maps), Some(lib));
        assert_eq!(parse_file_name(lib), Some(Release::new(44, 0)));
        let wheel = b"7f3000000000-7f3000010000 r--p 00000000 fe:01 9 /venv/lib/python3.12/site-packages/pyverbs.libs/libibverbs-5c1d2e3f.so.1.14.44.0\n";
        assert_eq!(first_libibverbs(wheel).and_then(parse_file_name), Some(Release::new(44, 0)));
        let real = std::fs::read("/proc/self/maps").expect("maps");
        let here = the_mapped_file_is_read_from_proc_self_maps as *const () as usize;
        assert!(mapped_file(&real, here).is_some_and(|p| p.starts_with(b"/")), "this test binary is mapped");
    }

    #[test]
    fn names_without_a_release() {
        for name in ["libibverbs.so.1", "libibverbs.so", "libibverbs.so.1.14", "libibverbs.so.1.14.44", "libibverbs.so.1.14.44.0.1",
            "libibverbs.so.1.14.x.0", "libibverbs.so.1.14..0", "libmlx5.so.1.24.44.0", "/a/libibverbs.so.1.14.44.0/b", ""]
        {
            assert_eq!(parse_file_name(name.as_bytes()), None, "{name}");
        }
    }

    #[test]
    fn finding_a_path_leaves_errno_alone() {
        crate::error::set_errno(4242);
        let path = path_of(libc::malloc as *const core::ffi::c_void).expect("malloc is in a loaded object");
        assert!(path.starts_with(b"/"), "{:?}", String::from_utf8_lossy(&path));
        assert_eq!(crate::error::errno(), 4242);
    }

    #[test]
    fn releases_order_by_major_then_minor() {
        assert!(Release::new(39, 13) < Release::new(40, 0));
        assert!(Release::new(33, 2) < Release::new(33, 10));
    }
}
