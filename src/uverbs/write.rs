//! Pure builders for the legacy `write(cmd_fd, …)` commands.
//!
//! Layouts: kernel uapi `ib_user_verbs.h`. The same payloads (without the
//! 8-byte header) are what `INVOKE_WRITE` carries in `CORE_IN`.

use core::mem::size_of;

/// `enum ib_uverbs_write_cmds`.
pub const CMD_QUERY_DEVICE: u32 = 1;
pub const CMD_QUERY_PORT: u32 = 2;
pub const CMD_ATTACH_MCAST: u32 = 30;
pub const CMD_DETACH_MCAST: u32 = 31;

/// `struct ib_uverbs_cmd_hdr` (8 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CmdHdr {
    pub command: u32,
    pub in_words: u16,
    pub out_words: u16,
}

/// `struct ib_uverbs_attach_mcast` == `struct ib_uverbs_detach_mcast` (24 bytes).
/// `mlid` is host order (rdma-core cmd.c `ibv_cmd_attach_mcast`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct McastReq {
    pub gid: [u8; 16],
    pub qp_handle: u32,
    pub mlid: u16,
    pub reserved: u16,
}

/// `struct ib_uverbs_query_device` (8 bytes): only the address the kernel
/// writes the 176-byte response to on the write() route.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueryDeviceReq {
    pub response: u64,
}

/// `struct ib_uverbs_query_device_resp` (176 bytes), read by offset.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueryDeviceResp {
    pub bytes: [u8; 176],
}

impl QueryDeviceResp {
    /// `phys_port_cnt` is the u8 at byte 171 (kernel:
    /// include/uapi/rdma/ib_user_verbs.h `struct ib_uverbs_query_device_resp`:
    /// five u64, 32 u32, `max_pkeys`, `local_ca_ack_delay`).
    pub const PHYS_PORT_CNT: usize = 171;
    pub fn phys_port_cnt(&self) -> u8 {
        self.bytes[Self::PHYS_PORT_CNT]
    }
    /// The u32 at byte `at` (`max_mcast_grp` is at 132).
    pub fn u32_at(&self, at: usize) -> u32 {
        let b = &self.bytes[at..at + 4];
        u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
    }
}

/// `struct ib_uverbs_query_port` (16 bytes). `response` is the user address
/// the kernel writes the 40-byte response to on the write() route.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueryPortReq {
    pub response: u64,
    pub port_num: u8,
    pub reserved: [u8; 7],
}

/// `struct ib_uverbs_query_port_resp` (40 bytes); `qkey_viol_cntr`,
/// `gid_tbl_len` and `link_layer` are read.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueryPortResp {
    pub bytes: [u8; 40],
}

impl QueryPortResp {
    /// `link_layer` is at byte 37 (kernel: include/uapi/rdma/ib_user_verbs.h
    /// `struct ib_uverbs_query_port_resp`).
    pub const LINK_LAYER: usize = 37;
    pub fn link_layer(&self) -> u8 {
        self.bytes[Self::LINK_LAYER]
    }
    /// `gid_tbl_len`, the u32 at byte 16.
    pub fn gid_tbl_len(&self) -> u32 {
        self.u32_at(16)
    }
    /// `qkey_viol_cntr`, the u32 at byte 12 (after `port_cap_flags`,
    /// `max_msg_sz`, `bad_pkey_cntr`); the kernel copies it from
    /// `ib_port_attr` (uverbs_cmd.c `ib_uverbs_query_port` →
    /// `copy_port_attr_to_resp`).
    pub const QKEY_VIOL_CNTR: usize = 12;
    pub fn qkey_viol_cntr(&self) -> u32 {
        self.u32_at(Self::QKEY_VIOL_CNTR)
    }
    fn u32_at(&self, at: usize) -> u32 {
        let b = &self.bytes[at..at + 4];
        u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
    }
}

/// A header and its payload, as one `write()` buffer.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteCmd<P> {
    pub hdr: CmdHdr,
    pub payload: P,
}

const _: () = {
    assert!(size_of::<CmdHdr>() == 8);
    assert!(size_of::<McastReq>() == 24);
    assert!(size_of::<QueryDeviceReq>() == 8);
    assert!(size_of::<QueryDeviceResp>() == 176);
    assert!(size_of::<QueryPortReq>() == 16);
    assert!(size_of::<QueryPortResp>() == 40);
    assert!(size_of::<WriteCmd<McastReq>>() == 32);
    assert!(size_of::<WriteCmd<QueryPortReq>>() == 24);
};

/// A write command: `in_words`/`out_words` are sizes in 4-byte words, the
/// header included in `in_words` (cmd_fallback.c `_execute_cmd_write`).
pub fn new_cmd<P>(command: u32, payload: P, resp_len: usize) -> WriteCmd<P> {
    WriteCmd {
        hdr: CmdHdr { command, in_words: (size_of::<WriteCmd<P>>() / 4) as u16, out_words: (resp_len / 4) as u16 },
        payload,
    }
}

impl<P> WriteCmd<P> {
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: WriteCmd<P> is repr(C) over integer-only repr(C) payloads
        // with no padding (sizes asserted above).
        unsafe { core::slice::from_raw_parts((self as *const Self).cast::<u8>(), size_of::<Self>()) }
    }
}

/// The attach/detach payload.
pub fn mcast_req(gid: [u8; 16], qp_handle: u32, mlid: u16) -> McastReq {
    McastReq { gid, qp_handle, mlid, reserved: 0 }
}

/// The QUERY_PORT payload; `resp` is where the kernel writes on the write() route.
pub fn query_port_req(port_num: u8, resp: u64) -> QueryPortReq {
    QueryPortReq { response: resp, port_num, reserved: [0; 7] }
}

/// The 32-byte `write()` for attach (30) or detach (31).
pub fn mcast(command: u32, req: McastReq) -> WriteCmd<McastReq> {
    new_cmd(command, req, 0)
}

/// The 24-byte `write()` for QUERY_PORT, answering into `resp`.
pub fn query_port(port_num: u8, resp: u64) -> WriteCmd<QueryPortReq> {
    new_cmd(CMD_QUERY_PORT, query_port_req(port_num, resp), size_of::<QueryPortResp>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uverbs::capture::host;

    /// docs/kernel-abi.md §1: captured `1e 00 00 00 08 00 00 00 | a0..af | 44 33 22 11 | 0d c0 | 00 00`.
    #[test]
    fn attach_write_matches_rdma_core_capture() {
        let gid: [u8; 16] = core::array::from_fn(|i| 0xa0 + i as u8);
        let cmd = mcast(CMD_ATTACH_MCAST, mcast_req(gid, 0x1122_3344, 0xc00d));
        let mut le = vec![0x1e, 0, 0, 0, 8, 0, 0, 0];
        le.extend_from_slice(&gid);
        le.extend_from_slice(&[0x44, 0x33, 0x22, 0x11, 0x0d, 0xc0, 0, 0]);
        // The GID is bytes in network order; every integer is host order.
        let want = host(&le, &[4, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4, 2, 2]);
        assert_eq!(cmd.as_bytes(), &want[..]);
        assert_eq!(&cmd.as_bytes()[8..24], &gid);
    }

    #[test]
    fn detach_write_differs_only_in_command() {
        let req = mcast_req([0xff; 16], 7, 0);
        let a = mcast(CMD_ATTACH_MCAST, req);
        let d = mcast(CMD_DETACH_MCAST, req);
        assert_eq!(d.as_bytes()[..4], 31u32.to_ne_bytes());
        assert_eq!(a.as_bytes()[4..], d.as_bytes()[4..]);
    }

    /// kernel `ib_uverbs_write` + `verify_hdr`: in_words*4 == count,
    /// out_words*4 >= sizeof(struct ib_uverbs_query_port_resp).
    #[test]
    fn query_port_write_words() {
        let cmd = query_port(1, 0xdead_beef_0000);
        let b = cmd.as_bytes();
        assert_eq!(b.len(), 24);
        assert_eq!(&b[0..8], &host(&[2, 0, 0, 0, 6, 0, 10, 0], &[4, 2, 2])[..]);
        assert_eq!(&b[8..16], &0xdead_beef_0000u64.to_ne_bytes());
        assert_eq!(&b[16..24], &[1, 0, 0, 0, 0, 0, 0, 0]);
    }

    /// A response as the kernel writes it, in host order: port_cap_flags
    /// 0x04010000, max_msg_sz 0x80000000, bad_pkey_cntr 0, qkey_viol_cntr
    /// 0x1234, gid_tbl_len 1024, pkey_tbl_len 64, ...
    #[test]
    fn query_port_resp_fields() {
        let mut le = vec![0x00, 0x00, 0x01, 0x04, 0x00, 0x00, 0x00, 0x80, 0, 0, 0, 0, 0x34, 0x12, 0, 0, 0x00, 0x04, 0, 0, 0x40, 0];
        le.resize(40, 0);
        le[37] = 2;
        let mut widths = vec![4, 4, 4, 4, 4, 2];
        widths.extend([1; 18]);
        let mut resp = QueryPortResp { bytes: [0; 40] };
        resp.bytes.copy_from_slice(&host(&le, &widths));
        assert_eq!(resp.qkey_viol_cntr(), 0x1234);
        assert_eq!(resp.gid_tbl_len(), 1024);
        assert_eq!(resp.link_layer(), 2);
    }
}
