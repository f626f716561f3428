//! `#[repr(C)]` mirrors of the public rdma-core structs that rsverbs reads.
//!
//! Only the frozen public ABI of `<infiniband/verbs.h>` (rdma-core 44, x86_64)
//! is mirrored, and only up to the last field we read. Offsets are asserted at
//! compile time here, and against the installed `verbs.h` by `ctest/abi_layout.c`.
//! The type names are the C tag names so that cbindgen emits `struct ibv_qp`,
//! `union ibv_gid`, … and `include/rsverbs.h` matches `verbs.h` exactly.
#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_int, c_void};
use core::mem::{offset_of, size_of};

/// `IBV_SYSFS_NAME_MAX` (verbs.h).
pub const IBV_SYSFS_NAME_MAX: usize = 64;
/// `IBV_SYSFS_PATH_MAX` (verbs.h).
pub const IBV_SYSFS_PATH_MAX: usize = 256;

/// `struct ibv_device`, complete (664 bytes).
#[repr(C)]
pub struct ibv_device {
    pub _ops: [*mut c_void; 2],
    pub node_type: c_int,
    pub transport_type: c_int,
    pub name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_path: [c_char; IBV_SYSFS_PATH_MAX],
    /// `"$SYSFS_PATH or /sys" + "/class/infiniband/<name>"`, set by rdma-core's
    /// `try_driver` (init.c); the sysfs fallback reads below it.
    pub ibdev_path: [c_char; IBV_SYSFS_PATH_MAX],
}

/// `struct ibv_context`, up to and including `cmd_fd` (the rest is not read).
#[repr(C)]
pub struct ibv_context {
    pub device: *mut ibv_device,
    /// `struct ibv_context_ops`: 32 function pointers, never called by
    /// rsverbs; the multicast ones are read (rdma_core::provider).
    pub ops: [*mut c_void; 32],
    /// The uverbs char-device fd; -1 for contexts without one (mlx5 VFIO).
    pub cmd_fd: c_int,
}

/// Index in `ibv_context.ops` of `_compat_attach_mcast` (offset 240).
pub const OPS_ATTACH_MCAST: usize = 29;
/// Index in `ibv_context.ops` of `_compat_detach_mcast` (offset 248).
pub const OPS_DETACH_MCAST: usize = 30;

/// `struct ibv_qp`, up to and including `qp_type`.
#[repr(C)]
pub struct ibv_qp {
    pub context: *mut ibv_context,
    pub qp_context: *mut c_void,
    pub pd: *mut c_void,
    pub send_cq: *mut c_void,
    pub recv_cq: *mut c_void,
    pub srq: *mut c_void,
    /// Kernel uobject id, scoped to `context->cmd_fd`.
    pub handle: u32,
    pub qp_num: u32,
    pub state: c_int,
    pub qp_type: c_int,
}

/// `union ibv_gid` (16 bytes, network order).
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_gid {
    pub raw: [u8; 16],
    pub global: ibv_gid_global,
}

/// The `global` member of `union ibv_gid`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_gid_global {
    pub subnet_prefix: u64,
    pub interface_id: u64,
}

/// `struct ibv_gid_entry` (32 bytes); byte-identical to the kernel's
/// `struct ib_uverbs_gid_entry` (ib_user_ioctl_verbs.h).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_gid_entry {
    pub gid: ibv_gid,
    pub gid_index: u32,
    pub port_num: u32,
    pub gid_type: u32,
    pub ndev_ifindex: u32,
}

/// `enum ibv_gid_type` values.
pub const IBV_GID_TYPE_IB: u32 = 0;
pub const IBV_GID_TYPE_ROCE_V1: u32 = 1;
pub const IBV_GID_TYPE_ROCE_V2: u32 = 2;

/// `enum ibv_link_layer` values.
pub const IBV_LINK_LAYER_INFINIBAND: u8 = 1;
pub const IBV_LINK_LAYER_ETHERNET: u8 = 2;

// Layout facts (docs/kernel-abi.md: offsetof on rdma-core 44's verbs.h, the
// same in 33.2 to 65.0). A mismatch fails the build.
const _: () = {
    assert!(size_of::<ibv_device>() == 664);
    assert!(offset_of!(ibv_device, name) == 24);
    assert!(offset_of!(ibv_device, ibdev_path) == 408);
    assert!(offset_of!(ibv_context, device) == 0);
    assert!(offset_of!(ibv_context, cmd_fd) == 264);
    assert!(offset_of!(ibv_context, ops) + OPS_ATTACH_MCAST * size_of::<*mut c_void>() == 240);
    assert!(offset_of!(ibv_context, ops) + OPS_DETACH_MCAST * size_of::<*mut c_void>() == 248);
    assert!(offset_of!(ibv_qp, context) == 0);
    assert!(offset_of!(ibv_qp, handle) == 48);
    assert!(offset_of!(ibv_qp, qp_type) == 60);
    assert!(size_of::<ibv_gid>() == 16);
    assert!(size_of::<ibv_gid_entry>() == 32);
    assert!(offset_of!(ibv_gid_entry, gid_index) == 16);
    assert!(offset_of!(ibv_gid_entry, port_num) == 20);
    assert!(offset_of!(ibv_gid_entry, gid_type) == 24);
    assert!(offset_of!(ibv_gid_entry, ndev_ifindex) == 28);
};

// The words for what the mirrors hold, for the trace and the command.

/// `enum ibv_qp_type` (verbs.h).
pub fn qp_type(t: i32) -> &'static str {
    match t {
        2 => "RC",
        3 => "UC",
        4 => "UD",
        8 => "RAW_PACKET",
        9 => "XRC_SEND",
        10 => "XRC_RECV",
        0xff => "DRIVER",
        _ => "?",
    }
}

/// `enum ibv_gid_type` (verbs.h).
pub fn gid_type(t: u32) -> &'static str {
    match t {
        0 => "IB",
        1 => "RoCEv1",
        2 => "RoCEv2",
        _ => "?",
    }
}

/// A C string field (`char name[64]`) up to its NUL, lossy UTF-8.
pub fn c_field(bytes: &[core::ffi::c_char]) -> &str {
    // SAFETY: c_char and u8 have the same size and alignment.
    let b = unsafe { core::slice::from_raw_parts(bytes.as_ptr().cast::<u8>(), bytes.len()) };
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    core::str::from_utf8(&b[..end]).unwrap_or("?")
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_fields_stop_at_the_nul_whatever_the_sign_of_char() {
        // c_char is i8 on x86_64 and u8 on aarch64, ppc64el and s390x.
        let mut name = [0 as c_char; IBV_SYSFS_NAME_MAX];
        for (n, b) in name.iter_mut().zip("rxe\u{e9}0".bytes()) {
            *n = b as c_char;
        }
        assert_eq!(c_field(&name), "rxe\u{e9}0");
        let full = [b'x' as c_char; 4];
        assert_eq!(c_field(&full), "xxxx");
        let bad = [0xff_u8 as c_char, 0];
        assert_eq!(c_field(&bad), "?");
    }

    #[test]
    fn type_names() {
        assert_eq!((qp_type(4), qp_type(2), qp_type(77)), ("UD", "RC", "?"));
        assert_eq!((gid_type(0), gid_type(2), gid_type(9)), ("IB", "RoCEv2", "?"));
    }
}
