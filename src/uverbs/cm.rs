//! The kernel's rdma_cm user interface (`/dev/infiniband/rdma_cm`, the
//! `ucma` misc device) as far as a multicast join needs it: pure encoders of
//! the commands, the decoder of the join event, and the one place that
//! writes them to the fd. docs/fabric-join.md tells the whole story.
//!
//! Framing (kernel drivers/infiniband/core/ucma.c `ucma_write`): one
//! `write()` of `struct rdma_ucm_cmd_hdr {u32 cmd; u16 in; u16 out}` and the
//! command struct; a response goes to the user address inside the command.
//! Layouts: include/uapi/rdma/rdma_user_cm.h (ABI version 4, unchanged from
//! 4.9, where `join_flags` replaced a reserved field, to 7.2); the sizes and
//! offsets are checked against the installed header by ctest/abi.sh.
//! Integers are host order, addresses network order, as the kernel reads
//! them; every byte is written here by position, so no layout depends on
//! the compiler or the byte order.
#![forbid(unsafe_code)]

use core::ffi::c_int;

/// `enum` of rdma_user_cm.h: the commands used.
pub const CMD_CREATE_ID: u32 = 0;
pub const CMD_DESTROY_ID: u32 = 1;
pub const CMD_GET_EVENT: u32 = 12;
pub const CMD_LEAVE_MCAST: u32 = 17;
pub const CMD_QUERY: u32 = 19;
pub const CMD_BIND: u32 = 20;
pub const CMD_JOIN_MCAST: u32 = 22;

/// `RDMA_PS_UDP` (rdma_user_cm.h `enum rdma_ucm_port_space`): the port
/// space of librdmacm's UD IDs (mckey's default); its joins use the Q_Key
/// `RDMA_UDP_QKEY` 0x01234567 (cma.c `cma_set_default_qkey`).
pub const PS_UDP: u16 = 0x0111;
/// `IB_QPT_UD` (ib_verbs.h): the kernel joins only for UD IDs (cma.c
/// `rdma_join_multicast`, "RDMA/cma: Allow UD qp_type to join multicast only").
pub const QPT_UD: u8 = 4;
/// `RDMA_USER_CM_QUERY_ADDR` (the `option` of `struct rdma_ucm_query`).
pub const QUERY_ADDR: u32 = 0;
/// `RDMA_MC_JOIN_FLAG_FULLMEMBER` / `..._SENDONLY_FULLMEMBER` (ucma.c
/// `ucma_process_join`: any other value is EINVAL).
pub const JOIN_FULL: u16 = 0;
pub const JOIN_SENDONLY: u16 = 1;
/// `RDMA_CM_EVENT_MULTICAST_JOIN` / `_ERROR` (include/rdma/rdma_cm.h):
/// the only events about a membership. For these two alone the kernel puts
/// the multicast's `id` (the handle JOIN_MCAST answered) and the join's
/// `uid` in the event (ucma.c `ucma_create_uevent`: `uevent->mc =
/// event->param.ud.private_data; resp.id = mc->id`); every other event
/// carries the rdma_cm ID's own `id` and `uid` (`resp.id = ctx->id`), a
/// number from another table (`ctx_table`, not `multicast_table`) that
/// also starts at 0. So an event's `id` means a membership only when its
/// type says so.
pub const EVENT_MULTICAST_JOIN: u32 = 12;
pub const EVENT_MULTICAST_ERROR: u32 = 13;
/// `RDMA_CM_EVENT_DEVICE_REMOVAL`: the ID's device is gone (cma.c
/// `cma_process_remove` → `cma_send_device_removal_put`), and with it
/// every membership on the ID; `id` is the ID's.
pub const EVENT_DEVICE_REMOVAL: u32 = 11;
/// `RDMA_CM_EVENT_ADDR_CHANGE`: the bound netdev's address moved (a bond
/// failover, cma.c `cma_netdev_callback`); `id` is the ID's, and no
/// membership ended.
pub const EVENT_ADDR_CHANGE: u32 = 14;
/// `AF_IB` (include/linux/socket.h; not in every libc).
pub const AF_IB: u16 = 27;

/// The sizes of the command structs (without the 8-byte header) and of the
/// responses (rdma_user_cm.h).
pub const CREATE_ID_LEN: usize = 24;
pub const DESTROY_ID_LEN: usize = 16;
pub const BIND_LEN: usize = 136;
pub const QUERY_LEN: usize = 16;
pub const JOIN_LEN: usize = 152;
pub const GET_EVENT_LEN: usize = 8;
pub const ID_RESP_LEN: usize = 4;
pub const QUERY_ADDR_RESP_LEN: usize = 280;
pub const EVENT_RESP_LEN: usize = 336;

/// A socket address as the kernel reads it from a `sockaddr_storage`
/// (128 bytes) with its size (`rdma_addr_size`, addr.c: 16, 28 or 48).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Addr {
    /// `sockaddr_in`, the address in network order.
    V4([u8; 4]),
    /// `sockaddr_in6`, with its scope id (an interface index for link-local).
    V6([u8; 16], u32),
    /// `sockaddr_ib`: the P_Key and the GID (an MGID to join), as mckey's
    /// `-M` (librdmacm/examples/mckey.c `get_dst_addr`: flow info, service
    /// id and its mask zero).
    Ib(u16, [u8; 16]),
}

impl Addr {
    /// The 128 bytes of a `sockaddr_storage` holding the address, and its size.
    pub fn storage(&self) -> ([u8; 128], u16) {
        let mut s = [0u8; 128];
        let len = match *self {
            Addr::V4(a) => {
                s[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
                s[4..8].copy_from_slice(&a);
                16
            }
            Addr::V6(a, scope) => {
                s[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
                s[8..24].copy_from_slice(&a);
                s[24..28].copy_from_slice(&scope.to_ne_bytes());
                28
            }
            Addr::Ib(pkey, gid) => {
                s[..2].copy_from_slice(&AF_IB.to_ne_bytes());
                s[2..4].copy_from_slice(&pkey.to_be_bytes());
                s[8..24].copy_from_slice(&gid);
                48
            }
        };
        (s, len)
    }
}

/// A command: the 8-byte header and `N` bytes of the struct.
pub struct Cmd<const T: usize> {
    pub bytes: [u8; T],
}

impl<const T: usize> Cmd<T> {
    /// The header for command `cmd`, its struct `T - 8` bytes long and its
    /// response `out` bytes long.
    fn new(cmd: u32, out: usize) -> Self {
        let mut bytes = [0u8; T];
        bytes[..4].copy_from_slice(&cmd.to_ne_bytes());
        bytes[4..6].copy_from_slice(&((T - 8) as u16).to_ne_bytes());
        bytes[6..8].copy_from_slice(&(out as u16).to_ne_bytes());
        Cmd { bytes }
    }
    /// Puts `b` at byte `at` of the struct (after the header).
    fn put(&mut self, at: usize, b: &[u8]) {
        self.bytes[8 + at..8 + at + b.len()].copy_from_slice(b);
    }
}

/// `CREATE_ID`: a UD ID in the UDP port space; the kernel writes the new
/// ID's number (u32) to `response`. `uid` comes back in its events.
pub fn create_id(uid: u64, response: u64) -> Cmd<{ 8 + CREATE_ID_LEN }> {
    let mut c = Cmd::new(CMD_CREATE_ID, ID_RESP_LEN);
    c.put(0, &uid.to_ne_bytes());
    c.put(8, &response.to_ne_bytes());
    c.put(16, &PS_UDP.to_ne_bytes());
    c.put(18, &[QPT_UD]);
    c
}

/// `DESTROY_ID` (and `LEAVE_MCAST`, which takes the same struct with a
/// multicast handle): `struct rdma_ucm_destroy_id {response; id; reserved}`;
/// the kernel writes `events_reported` (u32) to `response`.
fn destroy(cmd: u32, response: u64, id: u32) -> Cmd<{ 8 + DESTROY_ID_LEN }> {
    let mut c = Cmd::new(cmd, ID_RESP_LEN);
    c.put(0, &response.to_ne_bytes());
    c.put(8, &id.to_ne_bytes());
    c
}

pub fn destroy_id(response: u64, id: u32) -> Cmd<{ 8 + DESTROY_ID_LEN }> {
    destroy(CMD_DESTROY_ID, response, id)
}

/// `LEAVE_MCAST` of the multicast `handle` (the `id` JOIN_MCAST answered).
pub fn leave(response: u64, handle: u32) -> Cmd<{ 8 + DESTROY_ID_LEN }> {
    destroy(CMD_LEAVE_MCAST, response, handle)
}

/// `BIND` of ID `id` to a source address (synchronous: cma.c
/// `rdma_bind_addr` acquires the device of the address).
pub fn bind(id: u32, addr: &Addr) -> Cmd<{ 8 + BIND_LEN }> {
    let mut c = Cmd::new(CMD_BIND, 0);
    let (s, len) = addr.storage();
    c.put(0, &id.to_ne_bytes());
    c.put(4, &len.to_ne_bytes());
    c.put(8, &s);
    c
}

/// `QUERY` with `RDMA_USER_CM_QUERY_ADDR`: the bound device's node GUID,
/// port and P_Key ([`QueryAddr`]).
pub fn query_addr(response: u64, id: u32) -> Cmd<{ 8 + QUERY_LEN }> {
    let mut c = Cmd::new(CMD_QUERY, QUERY_ADDR_RESP_LEN);
    c.put(0, &response.to_ne_bytes());
    c.put(8, &id.to_ne_bytes());
    c.put(12, &QUERY_ADDR.to_ne_bytes());
    c
}

/// `JOIN_MCAST` of group `addr` on ID `id` with `flags` ([`JOIN_FULL`] or
/// [`JOIN_SENDONLY`]); the kernel writes the multicast handle (u32) to
/// `response`, and `uid` comes back in the join's event.
pub fn join(response: u64, uid: u64, id: u32, addr: &Addr, flags: u16) -> Cmd<{ 8 + JOIN_LEN }> {
    let mut c = Cmd::new(CMD_JOIN_MCAST, ID_RESP_LEN);
    let (s, len) = addr.storage();
    c.put(0, &response.to_ne_bytes());
    c.put(8, &uid.to_ne_bytes());
    c.put(16, &id.to_ne_bytes());
    c.put(20, &len.to_ne_bytes());
    c.put(22, &flags.to_ne_bytes());
    c.put(24, &s);
    c
}

/// `GET_EVENT`: the next event (336 bytes) to `response`; EAGAIN at once
/// when there is none and the fd is `O_NONBLOCK` (ucma.c `ucma_get_event`).
pub fn get_event(response: u64) -> Cmd<{ 8 + GET_EVENT_LEN }> {
    let mut c = Cmd::new(CMD_GET_EVENT, EVENT_RESP_LEN);
    c.put(0, &response.to_ne_bytes());
    c
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// What `QUERY_ADDR` answers (`struct rdma_ucm_query_addr_resp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueryAddr {
    /// Network order, as the device's sysfs `node_guid` reads.
    pub node_guid: [u8; 8],
    pub port: u8,
    /// Host order (the kernel stores it big-endian: ucma.c
    /// `ucma_query_device_addr`, `cpu_to_be16`).
    pub pkey: u16,
}

impl QueryAddr {
    pub fn decode(b: &[u8; QUERY_ADDR_RESP_LEN]) -> Self {
        let mut node_guid = [0u8; 8];
        node_guid.copy_from_slice(&b[..8]);
        QueryAddr { node_guid, port: b[8], pkey: u16::from_be_bytes([b[10], b[11]]) }
    }
}

/// A multicast event (`struct rdma_ucm_event_resp`; the UD parameters at
/// `param`, byte 20: cma.c `cma_make_mc_event`, ucma.c `ucma_copy_ud_event`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// The join's `uid`.
    pub uid: u64,
    /// The multicast handle (for multicast events).
    pub id: u32,
    pub event: u32,
    /// 0, or a negative errno (the SA's or multicast.c's: `-ETIMEDOUT`,
    /// `-ENETRESET` after a client re-register, ...).
    pub status: c_int,
    /// The group's Q_Key (on InfiniBand the SA record's: cma.c
    /// `cma_ib_mc_handler` → `cma_set_qkey`; on RoCE `RDMA_UDP_QKEY`).
    pub qkey: u32,
    /// The MGID to attach (`ah_attr.grh.dgid`).
    pub mgid: [u8; 16],
    /// The MLID (InfiniBand, from the SA); 0 on RoCE.
    pub mlid: u16,
}

impl Event {
    pub fn decode(b: &[u8; EVENT_RESP_LEN]) -> Self {
        let mut mgid = [0u8; 16];
        mgid.copy_from_slice(&b[28..44]);
        let mut uid = [0u8; 8];
        uid.copy_from_slice(&b[..8]);
        Event {
            uid: u64::from_ne_bytes(uid),
            id: u32_at(b, 8),
            event: u32_at(b, 12),
            status: u32_at(b, 16) as c_int,
            qkey: u32_at(b, 24),
            mgid,
            mlid: u16::from_ne_bytes([b[52], b[53]]),
        }
    }
}

/// Writes command `c` to the rdma_cm fd: Ok when the kernel took all of it
/// (ucma.c `ucma_write` answers the length or a negative errno).
pub fn send<const T: usize>(fd: c_int, c: &Cmd<T>) -> Result<(), c_int> {
    match crate::sys::write(fd, &c.bytes) {
        Ok(n) if n == T => Ok(()),
        Ok(_) => Err(libc::ENODATA),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr(b: &[u8]) -> (u32, u16, u16) {
        (u32_at(b, 0), u16::from_ne_bytes([b[4], b[5]]), u16::from_ne_bytes([b[6], b[7]]))
    }

    /// Every command byte by byte, as the kernel reads it on any byte
    /// order (the numbers are written natively, the addresses big-endian;
    /// sizes: rdma_user_cm.h, and ctest/abi.sh against the installed one).
    #[test]
    fn commands_byte_for_byte() {
        let c = create_id(0x1122_3344_5566_7788, 0xdead_beef_0000_1000);
        assert_eq!(hdr(&c.bytes), (CMD_CREATE_ID, 24, 4));
        assert_eq!(&c.bytes[8..16], &0x1122_3344_5566_7788u64.to_ne_bytes());
        assert_eq!(&c.bytes[16..24], &0xdead_beef_0000_1000u64.to_ne_bytes());
        assert_eq!(&c.bytes[24..26], &0x0111u16.to_ne_bytes());
        assert_eq!(&c.bytes[26..], &[4, 0, 0, 0, 0, 0]);

        let c = bind(7, &Addr::V4([192, 0, 2, 1]));
        assert_eq!(hdr(&c.bytes), (CMD_BIND, 136, 0));
        assert_eq!(u32_at(&c.bytes, 8), 7);
        assert_eq!(&c.bytes[12..14], &16u16.to_ne_bytes());
        assert_eq!(&c.bytes[16..18], &(libc::AF_INET as u16).to_ne_bytes());
        assert_eq!(&c.bytes[18..24], &[0, 0, 192, 0, 2, 1]);
        assert!(c.bytes[24..].iter().all(|&b| b == 0));

        let mgid = [0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xe0, 0, 0, 1];
        let c = join(0x1000, 0x2000, 9, &Addr::Ib(0xffff, mgid), JOIN_SENDONLY);
        assert_eq!(hdr(&c.bytes), (CMD_JOIN_MCAST, 152, 4));
        assert_eq!(&c.bytes[8..16], &0x1000u64.to_ne_bytes());
        assert_eq!(&c.bytes[16..24], &0x2000u64.to_ne_bytes());
        assert_eq!(u32_at(&c.bytes, 24), 9);
        assert_eq!(&c.bytes[28..30], &48u16.to_ne_bytes());
        assert_eq!(&c.bytes[30..32], &1u16.to_ne_bytes());
        assert_eq!(&c.bytes[32..34], &27u16.to_ne_bytes());
        assert_eq!(&c.bytes[34..36], &[0xff, 0xff]);
        assert_eq!(&c.bytes[36..40], &[0; 4]);
        assert_eq!(&c.bytes[40..56], &mgid);
        assert!(c.bytes[56..].iter().all(|&b| b == 0));

        let c = join(0, 0, 1, &Addr::V6([0xff; 16], 3), JOIN_FULL);
        assert_eq!(&c.bytes[28..30], &28u16.to_ne_bytes());
        assert_eq!(&c.bytes[32..34], &(libc::AF_INET6 as u16).to_ne_bytes());
        assert_eq!(&c.bytes[40..56], &[0xff; 16]);
        assert_eq!(u32_at(&c.bytes, 56), 3);

        let c = leave(0x30, 5);
        assert_eq!(hdr(&c.bytes), (CMD_LEAVE_MCAST, 16, 4));
        assert_eq!(&c.bytes[8..16], &0x30u64.to_ne_bytes());
        assert_eq!(u32_at(&c.bytes, 16), 5);
        let c = destroy_id(0x30, 6);
        assert_eq!(hdr(&c.bytes), (CMD_DESTROY_ID, 16, 4));
        let c = query_addr(0x40, 2);
        assert_eq!(hdr(&c.bytes), (CMD_QUERY, 16, 280));
        assert_eq!(u32_at(&c.bytes, 16), 2);
        assert_eq!(u32_at(&c.bytes, 20), QUERY_ADDR);
        let c = get_event(0x50);
        assert_eq!(hdr(&c.bytes), (CMD_GET_EVENT, 8, 336));
    }

    /// The join event's fields at the kernel's offsets: `param` at 20, the
    /// Q_Key at 24, `ah_attr.grh.dgid` at 28, `dlid` at 52.
    #[test]
    fn the_join_event_decodes() {
        let mut b = [0u8; EVENT_RESP_LEN];
        b[..8].copy_from_slice(&0xabcdu64.to_ne_bytes());
        b[8..12].copy_from_slice(&3u32.to_ne_bytes());
        b[12..16].copy_from_slice(&EVENT_MULTICAST_ERROR.to_ne_bytes());
        b[16..20].copy_from_slice(&(-libc::ENETRESET).to_ne_bytes());
        b[24..28].copy_from_slice(&0x0123_4567u32.to_ne_bytes());
        b[28..44].copy_from_slice(&[0xff; 16]);
        b[52..54].copy_from_slice(&0xc001u16.to_ne_bytes());
        let e = Event::decode(&b);
        assert_eq!(
            e,
            Event {
                uid: 0xabcd,
                id: 3,
                event: EVENT_MULTICAST_ERROR,
                status: -libc::ENETRESET,
                qkey: 0x0123_4567,
                mgid: [0xff; 16],
                mlid: 0xc001
            }
        );
        let mut q = [0u8; QUERY_ADDR_RESP_LEN];
        q[..8].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        q[8] = 1;
        q[10..12].copy_from_slice(&[0x7f, 0xff]);
        assert_eq!(QueryAddr::decode(&q), QueryAddr { node_guid: [1, 2, 3, 4, 5, 6, 7, 8], port: 1, pkey: 0x7fff });
    }

    /// The InfiniBand join's command is librdmacm's for the same intent:
    /// `mckey -M ff12:401b:ffff::ef4d:10a -b ADDR`'s JOIN_MCAST, captured
    /// with strace in the test bed (rdma-core 44, x86_64; ctest/vm/ipjoin.sh
    /// `cm_bytes`, which also compares the RoCE join live), with its
    /// response pointer, uid and ID zeroed; put in this host's byte order.
    #[test]
    fn the_ib_join_is_mckeys() {
        let le = crate::uverbs::capture::hex_bytes("16000000980004000000000000000000000000000000000000000000300000001b00000000000000ff12401bffff000000000000ef4d010a", 160);
        let mut widths = alloc::vec![4, 2, 2, 8, 8, 4, 2, 2, 2];
        widths.extend([1; 126]);
        let want = crate::uverbs::capture::host(&le, &widths);
        let mgid = [0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xef, 0x4d, 0x01, 0x0a];
        assert_eq!(join(0, 0, 0, &Addr::Ib(0, mgid), JOIN_FULL).bytes.as_slice(), want.as_slice());
    }
}
