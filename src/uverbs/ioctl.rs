//! Pure builders for `ioctl(cmd_fd, RDMA_VERBS_IOCTL, …)` command buffers.
//!
//! Layouts: kernel uapi `rdma_user_ioctl_cmds.h` (`struct ib_uverbs_ioctl_hdr`,
//! `struct ib_uverbs_attr`); attribute and method ids: `ib_user_ioctl_cmds.h`.
//! Every buffer is what rdma-core 44's `DECLARE_COMMAND_BUFFER` + `fill_attr_*`
//! produce (cmd_ioctl.h); the unit tests compare the bytes with captures.

use core::mem::size_of;

/// `RDMA_VERBS_IOCTL = _IOWR(RDMA_IOCTL_MAGIC 0x1b, 1, struct ib_uverbs_ioctl_hdr)`.
pub const RDMA_VERBS_IOCTL: libc::c_ulong = iowr(0x1b, 1, size_of::<IoctlHdr>() as u32) as libc::c_ulong;

/// `_IOWR(type, nr, size)` of this architecture: the generic layout
/// (asm-generic/ioctl.h: 2 direction bits at 30, 14 size bits at 16), or
/// powerpc's (arch/powerpc/include/uapi/asm/ioctl.h: 3 direction bits at 29,
/// read 2 | write 4). Both give 0xc0181b01 for RDMA_VERBS_IOCTL.
const fn iowr(ty: u32, nr: u32, size: u32) -> u32 {
    let (dir, dir_shift) = if cfg!(any(target_arch = "powerpc", target_arch = "powerpc64")) { (2 | 4, 29) } else { (2 | 1, 30) };
    (dir << dir_shift) | (size << 16) | (ty << 8) | nr
}

/// `UVERBS_OBJECT_DEVICE`.
pub const OBJECT_DEVICE: u16 = 0;
/// `enum uverbs_methods_device`.
pub const METHOD_INVOKE_WRITE: u16 = 0;
pub const METHOD_QUERY_GID_TABLE: u16 = 5;
pub const METHOD_QUERY_GID_ENTRY: u16 = 6;
/// A method id no kernel defines: `uapi_key_ioctl_method()` maps ids above the
/// core range to `UVERBS_API_KEY_ERR`, so the lookup fails with
/// EPROTONOSUPPORT, *after* the driver_id check (uverbs_ioctl.c
/// `ib_uverbs_cmd_verbs`). Used by the side-effect-free driver_id probe.
pub const METHOD_NONEXISTENT: u16 = 0x0fff;

/// `UVERBS_ATTR_F_MANDATORY`.
const ATTR_F_MANDATORY: u16 = 1;
/// `UVERBS_ATTR_F_VALID_OUTPUT`: set by the kernel on an output attribute
/// it wrote (uverbs_ioctl.c `uverbs_set_output`).
pub const ATTR_F_VALID_OUTPUT: u16 = 2;

/// `enum uverbs_attrs_invoke_write_cmd_attr_ids`.
const ATTR_CORE_IN: u16 = 0;
const ATTR_CORE_OUT: u16 = 1;
const ATTR_WRITE_CMD: u16 = 2;

/// `enum uverbs_attrs_query_gid_entry_cmd_attr_ids`.
const ATTR_GID_ENTRY_PORT: u16 = 0;
const ATTR_GID_ENTRY_GID_INDEX: u16 = 1;
const ATTR_GID_ENTRY_FLAGS: u16 = 2;
const ATTR_GID_ENTRY_RESP_ENTRY: u16 = 3;

/// `enum uverbs_attrs_query_gid_table_cmd_attr_ids`.
const ATTR_GID_TABLE_ENTRY_SIZE: u16 = 0;
const ATTR_GID_TABLE_FLAGS: u16 = 1;
const ATTR_GID_TABLE_RESP_ENTRIES: u16 = 2;
const ATTR_GID_TABLE_RESP_NUM_ENTRIES: u16 = 3;

/// `struct ib_uverbs_ioctl_hdr` (24 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoctlHdr {
    pub length: u16,
    pub object_id: u16,
    pub method_id: u16,
    pub num_attrs: u16,
    pub reserved1: u64,
    pub driver_id: u32,
    pub reserved2: u32,
}

/// `struct ib_uverbs_attr` (16 bytes). `attr_data` is zero for every
/// attribute rsverbs sends (a non-zero reserved part gives EINVAL).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Attr {
    pub attr_id: u16,
    pub len: u16,
    pub flags: u16,
    pub attr_data: u16,
    pub data: u64,
}

/// A header followed by its `N` attributes, as the kernel reads them.
/// The kernel writes `UVERBS_ATTR_F_VALID_OUTPUT` back into `flags`, so the
/// buffer must live in writable memory.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cmd<const N: usize> {
    pub hdr: IoctlHdr,
    pub attrs: [Attr; N],
}

const _: () = {
    assert!(size_of::<IoctlHdr>() == 24);
    // The number rdma-core's ioctl() sends (captured on x86_64, and the
    // same on every architecture rsverbs builds for: see `iowr`).
    assert!(RDMA_VERBS_IOCTL == 0xc018_1b01);
    assert!(size_of::<Attr>() == 16);
    assert!(size_of::<Cmd<4>>() == 24 + 4 * 16);
};

impl<const N: usize> Cmd<N> {
    fn new(method_id: u16, driver_id: u32, attrs: [Attr; N]) -> Self {
        Cmd {
            hdr: IoctlHdr {
                length: size_of::<Self>() as u16,
                object_id: OBJECT_DEVICE,
                method_id,
                num_attrs: N as u16,
                reserved1: 0,
                driver_id,
                reserved2: 0,
            },
            attrs,
        }
    }

    /// The raw bytes (for tests and traces).
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: Cmd is repr(C), made only of integers, with no padding
        // (24 + 16*N bytes, all fields naturally aligned).
        unsafe { core::slice::from_raw_parts((self as *const Self).cast::<u8>(), size_of::<Self>()) }
    }
}

/// `fill_attr_const_in`: a u64 inline value, len 8.
fn const_in(attr_id: u16, value: u64) -> Attr {
    Attr { attr_id, len: 8, flags: ATTR_F_MANDATORY, attr_data: 0, data: value }
}

/// `fill_attr_in_uint32`: the 4 bytes are copied to the *start* of the 8-byte
/// `data` field (cmd_ioctl.h `_fill_attr_in`: `memcpy(&attr->data, data, len)`),
/// where the kernel reads them (uverbs_ioctl.h `uverbs_copy_from`). On a
/// big-endian host that is the high half of the u64, not `u64::from(value)`.
fn in_u32(attr_id: u16, value: u32) -> Attr {
    let v = value.to_ne_bytes();
    let data = u64::from_ne_bytes([v[0], v[1], v[2], v[3], 0, 0, 0, 0]);
    Attr { attr_id, len: 4, flags: ATTR_F_MANDATORY, attr_data: 0, data }
}

/// `fill_attr_in`/`fill_attr_out` for a buffer longer than 8 bytes: a pointer.
fn ptr(attr_id: u16, addr: u64, len: u16) -> Attr {
    Attr { attr_id, len, flags: ATTR_F_MANDATORY, attr_data: 0, data: addr }
}

/// The driver_id probe: a method that does not exist, no attributes.
pub fn probe(driver_id: u32) -> Cmd<0> {
    Cmd::new(METHOD_NONEXISTENT, driver_id, [])
}

/// `UVERBS_METHOD_INVOKE_WRITE` carrying a write command with no response
/// (attach/detach): `WRITE_CMD` then `CORE_IN` (cmd_fallback.c `ioctl_write`).
/// `core_in` must point at `core_in_len` (> 8) bytes.
pub fn invoke_write(driver_id: u32, write_cmd: u32, core_in: u64, core_in_len: u16) -> Cmd<2> {
    Cmd::new(
        METHOD_INVOKE_WRITE,
        driver_id,
        [const_in(ATTR_WRITE_CMD, u64::from(write_cmd)), ptr(ATTR_CORE_IN, core_in, core_in_len)],
    )
}

/// rdma-core's `has_ioctl_write` probe (device.c): INVOKE_WRITE with only
/// `WRITE_CMD`.
pub fn invoke_write_probe(driver_id: u32, write_cmd: u64) -> Cmd<1> {
    Cmd::new(METHOD_INVOKE_WRITE, driver_id, [const_in(ATTR_WRITE_CMD, write_cmd)])
}

/// `UVERBS_METHOD_INVOKE_WRITE` for a write command with a response:
/// `WRITE_CMD`, `CORE_IN`, `CORE_OUT`.
pub fn invoke_write_resp(
    driver_id: u32,
    write_cmd: u32,
    core_in: u64,
    core_in_len: u16,
    core_out: u64,
    core_out_len: u16,
) -> Cmd<3> {
    Cmd::new(
        METHOD_INVOKE_WRITE,
        driver_id,
        [
            const_in(ATTR_WRITE_CMD, u64::from(write_cmd)),
            ptr(ATTR_CORE_IN, core_in, core_in_len),
            ptr(ATTR_CORE_OUT, core_out, core_out_len),
        ],
    )
}

/// `UVERBS_METHOD_QUERY_GID_ENTRY` exactly as `_ibv_query_gid_ex` builds it
/// (cmd_device.c): PORT (8), GID_INDEX (8), FLAGS (4), RESP_ENTRY (entry_size).
/// The caller has already rejected `entry_size > u16::MAX` (rdma-core's
/// `buffer_error`).
pub fn query_gid_entry(
    driver_id: u32,
    port_num: u32,
    gid_index: u32,
    flags: u32,
    entry: u64,
    entry_size: u16,
) -> Cmd<4> {
    Cmd::new(
        METHOD_QUERY_GID_ENTRY,
        driver_id,
        [
            const_in(ATTR_GID_ENTRY_PORT, u64::from(port_num)),
            const_in(ATTR_GID_ENTRY_GID_INDEX, u64::from(gid_index)),
            in_u32(ATTR_GID_ENTRY_FLAGS, flags),
            ptr(ATTR_GID_ENTRY_RESP_ENTRY, entry, entry_size),
        ],
    )
}

/// `UVERBS_METHOD_QUERY_GID_TABLE` as rdma-core's `_ibv_query_gid_table`
/// builds it (cmd_device.c `ibv_cmd_query_gid_table`): ENTRY_SIZE (8),
/// FLAGS (4), RESP_ENTRIES (`entries_len` bytes at `entries`),
/// RESP_NUM_ENTRIES (a u64 at `num`). Kernels 5.10+ (uverbs_std_types_device.c).
pub fn query_gid_table(driver_id: u32, entry_size: u64, flags: u32, entries: u64, entries_len: u16, num: u64) -> Cmd<4> {
    Cmd::new(
        METHOD_QUERY_GID_TABLE,
        driver_id,
        [
            const_in(ATTR_GID_TABLE_ENTRY_SIZE, entry_size),
            in_u32(ATTR_GID_TABLE_FLAGS, flags),
            ptr(ATTR_GID_TABLE_RESP_ENTRIES, entries, entries_len),
            ptr(ATTR_GID_TABLE_RESP_NUM_ENTRIES, num, 8),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::uverbs::capture::host;

    /// An attribute as captured on x86_64: id, len, flags (MANDATORY),
    /// attr_data, then `data` as one u64, or for a 4-byte inline value
    /// (`in4`) the value's 4 bytes then 4 zero bytes.
    fn attr_bytes_as(id: u16, len: u16, data: u64, in4: bool) -> Vec<u8> {
        let mut le = Vec::new();
        for x in [id, len, 1, 0] {
            le.extend_from_slice(&x.to_le_bytes());
        }
        le.extend_from_slice(&data.to_le_bytes());
        host(&le, if in4 { &[2, 2, 2, 2, 4, 4] } else { &[2, 2, 2, 2, 8] })
    }

    fn attr_bytes(id: u16, len: u16, data: u64) -> Vec<u8> {
        attr_bytes_as(id, len, data, false)
    }

    fn in4_bytes(id: u16, value: u32) -> Vec<u8> {
        attr_bytes_as(id, 4, u64::from(value), true)
    }

    fn hdr_bytes(length: u16, method: u16, nattrs: u16, driver_id: u32) -> Vec<u8> {
        let mut le = Vec::new();
        for x in [length, 0, method, nattrs] {
            le.extend_from_slice(&x.to_le_bytes());
        }
        le.extend_from_slice(&0u64.to_le_bytes());
        le.extend_from_slice(&driver_id.to_le_bytes());
        le.extend_from_slice(&0u32.to_le_bytes());
        host(&le, &[2, 2, 2, 2, 8, 4, 4])
    }

    /// docs/kernel-abi.md §1: rdma-core 44 INVOKE_WRITE for attach, driver_id 14 (rxe).
    #[test]
    fn attach_invoke_write_matches_rdma_core_capture() {
        let payload = 0x7fff_1234_5678u64;
        let cmd = invoke_write(14, 30, payload, 24);
        let mut want = hdr_bytes(56, 0, 2, 14);
        want.extend(attr_bytes(2, 8, 30));
        want.extend(attr_bytes(0, 24, payload));
        assert_eq!(cmd.as_bytes(), &want[..]);
        assert_eq!(invoke_write(14, 31, payload, 24).attrs[0].data, 31);
    }

    /// docs/kernel-abi.md §2: rdma-core 44 QUERY_GID_ENTRY.
    #[test]
    fn query_gid_entry_matches_rdma_core_capture() {
        let entry = 0x5555_0000_1000u64;
        let cmd = query_gid_entry(14, 1, 3, 0x8000_0001, entry, 32);
        let mut want = hdr_bytes(88, 6, 4, 14);
        want.extend(attr_bytes(0, 8, 1));
        want.extend(attr_bytes(1, 8, 3));
        want.extend(in4_bytes(2, 0x8000_0001));
        want.extend(attr_bytes(3, 32, entry));
        assert_eq!(cmd.as_bytes(), &want[..]);
    }

    /// The kernel reads a 4-byte inline attribute from the first 4 bytes of
    /// `data` (uverbs_ioctl.h `uverbs_copy_from`), on either byte order.
    #[test]
    fn inline_u32_sits_in_the_first_four_bytes() {
        for flags in [1u32, 0x8000_0000, 0x8000_0001, u32::MAX] {
            let cmd = query_gid_entry(14, 1, 0, flags, 0x1000, 32);
            let b = &cmd.as_bytes()[24 + 2 * 16..24 + 3 * 16];
            assert_eq!(&b[8..12], &flags.to_ne_bytes(), "flags {flags:#x}");
            assert_eq!(&b[12..16], &[0; 4], "flags {flags:#x}");
            let cmd = query_gid_table(14, 32, flags, 0x7000, 64, 0x8000);
            let b = &cmd.as_bytes()[24 + 16..24 + 2 * 16];
            assert_eq!(&b[8..12], &flags.to_ne_bytes(), "table flags {flags:#x}");
        }
    }

    /// rdma-core 44 `_ibv_query_gid_table` (cmd_device.c): the same four attributes.
    #[test]
    fn query_gid_table_has_rdma_core_attributes() {
        let cmd = query_gid_table(14, 32, 0, 0x7000, 32 * 1024, 0x8000);
        let mut want = hdr_bytes(88, 5, 4, 14);
        want.extend(attr_bytes(0, 8, 32));
        want.extend(in4_bytes(1, 0));
        want.extend(attr_bytes(2, 32 * 1024, 0x7000));
        want.extend(attr_bytes(3, 8, 0x8000));
        assert_eq!(cmd.as_bytes(), &want[..]);
    }

    #[test]
    fn probe_is_a_bare_header_for_an_unknown_method() {
        assert_eq!(probe(7).as_bytes(), &hdr_bytes(24, 0x0fff, 0, 7)[..]);
    }

    #[test]
    fn invoke_write_with_response_has_core_out() {
        let cmd = invoke_write_resp(14, 2, 0x10, 16, 0x20, 40);
        let mut want = hdr_bytes(72, 0, 3, 14);
        want.extend(attr_bytes(2, 8, 2));
        want.extend(attr_bytes(0, 16, 0x10));
        want.extend(attr_bytes(1, 40, 0x20));
        assert_eq!(cmd.as_bytes(), &want[..]);
    }
}
