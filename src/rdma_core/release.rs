//! The release of the loaded libibverbs, from its file name.
//!
//! rdma-core installs libibverbs as `libibverbs.so.1.<ABI>.<PACKAGE_VERSION>`
//! (libibverbs/CMakeLists.txt: `rdma_library(ibverbs ... 1 1.<ABI>.${PACKAGE_VERSION}`):
//! `libibverbs.so.1.11.33.2` is rdma-core 33.2, `.1.14.44.0` is 44.0,
//! `.1.18.65.0` is 65.0. The file is found through the object that defines
//! `ibv_get_device_list` (dladdr), its symlinks resolved. A library whose
//! file name carries no release (a custom install, a static libibverbs) is
//! `None`: rsverbs then follows the newest release it knows.

use core::ffi::{CStr, c_char};

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

/// The release in a libibverbs file name (a path's last component counts):
/// `libibverbs.so.1.<abi>.<major>.<minor>`.
pub fn parse_file_name(path: &[u8]) -> Option<Release> {
    let name = path.rsplit(|&b| b == b'/').next()?;
    let rest = name.strip_prefix(b"libibverbs.so.")?;
    let parts: Vec<&[u8]> = rest.split(|&b| b == b'.').collect();
    let [_soversion, _abi, major, minor] = parts.as_slice() else { return None };
    Some(Release::new(number(major)?, number(minor)?))
}

fn number(digits: &[u8]) -> Option<u32> {
    if digits.is_empty() || digits.len() > 9 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    core::str::from_utf8(digits).ok()?.parse().ok()
}

/// The loaded libibverbs' release, found once per process.
pub fn installed() -> Option<Release> {
    static FOUND: std::sync::OnceLock<Option<Release>> = std::sync::OnceLock::new();
    *FOUND.get_or_init(|| {
        // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name.
        let sym = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"ibv_get_device_list".as_ptr()) };
        parse_file_name(&path_of(sym)?)
    })
}

/// The resolved path of the object that contains `sym`. Leaves `errno` as
/// it was: it runs in the middle of a verb (the first detach that meets
/// EIO), and glibc's realpath leaves EINVAL in `errno` even when it
/// succeeds (its readlink of every component that is not a link).
fn path_of(sym: *const core::ffi::c_void) -> Option<Vec<u8>> {
    let _errno = crate::error::ErrnoGuard::save();
    resolve(sym)
}

fn resolve(sym: *const core::ffi::c_void) -> Option<Vec<u8>> {
    if sym.is_null() {
        return None;
    }
    // SAFETY: Dl_info is plain data; dladdr fills it on success.
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    // SAFETY: sym is an address inside a loaded object; info is writable.
    if unsafe { libc::dladdr(sym, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: realpath with a NUL-terminated path and a NULL buffer returns
    // a malloc'ed string or NULL.
    let real: *mut c_char = unsafe { libc::realpath(info.dli_fname, core::ptr::null_mut()) };
    let path = if real.is_null() { info.dli_fname } else { real.cast_const() };
    // SAFETY: path is a NUL-terminated string (dladdr's or realpath's).
    let bytes = unsafe { CStr::from_ptr(path) }.to_bytes().to_vec();
    // SAFETY: real came from realpath's malloc (free(NULL) is a no-op).
    unsafe { libc::free(real.cast()) };
    Some(bytes)
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
