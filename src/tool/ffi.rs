//! rdma-core (libibverbs), only to list and open devices and to query a
//! device and its ports; GIDs go through rsverbs' own engine (`gids`).

use core::ffi::{CStr, c_char, c_int, c_void};
use rsverbs::abi::{ibv_context, ibv_device};

#[link(name = "ibverbs")]
unsafe extern "C" {
    fn ibv_get_device_list(num: *mut c_int) -> *mut *mut ibv_device;
    fn ibv_free_device_list(list: *mut *mut ibv_device);
    fn ibv_get_device_name(dev: *mut ibv_device) -> *const c_char;
    fn ibv_open_device(dev: *mut ibv_device) -> *mut ibv_context;
    fn ibv_close_device(ctx: *mut ibv_context) -> c_int;
    fn ibv_query_device(ctx: *mut ibv_context, attr: *mut c_void) -> c_int;
    // The exported IBVERBS_1.1 symbol (verbs.c): the provider fills the
    // whole struct ibv_port_attr (52 bytes in rdma-core 44), so the buffer
    // below is larger than any release's.
    fn ibv_query_port(ctx: *mut ibv_context, port: u8, attr: *mut c_void) -> c_int;
}

/// `struct ibv_device_attr` offsets (verbs.h; 232 bytes, frozen ABI).
const DEV_ATTR_LEN: usize = 232;
const OFF_MAX_MCAST_GRP: usize = 188;
const OFF_MAX_MCAST_QP_ATTACH: usize = 192;
const OFF_MAX_TOTAL_MCAST_QP_ATTACH: usize = 196;
const OFF_PHYS_PORT_CNT: usize = 227;
const OFF_DEVICE_CAP_FLAGS: usize = 116;
/// `IBV_DEVICE_BAD_QKEY_CNTR` (verbs.h `enum ibv_device_cap_flags`): the
/// device counts Q_Key violations in `qkey_viol_cntr`.
const DEVICE_BAD_QKEY_CNTR: u32 = 1 << 2;
/// `struct ibv_port_attr` offsets (verbs.h).
const PORT_ATTR_BUF: usize = 128;
const OFF_STATE: usize = 0;
const OFF_GID_TBL_LEN: usize = 12;
const OFF_QKEY_VIOL_CNTR: usize = 28;
const OFF_LID: usize = 34;
const OFF_SM_LID: usize = 36;
const OFF_LINK_LAYER: usize = 46;

/// `enum ibv_port_state`.
pub const PORT_ACTIVE: u32 = 4;
pub const LINK_LAYER_ETHERNET: u8 = rsverbs::abi::IBV_LINK_LAYER_ETHERNET;

fn i32_at(b: &[u8], off: usize) -> i32 {
    i32::from_ne_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

/// The limits `doctor` reports.
#[derive(Clone, Copy, Debug)]
pub struct DeviceLimits {
    pub max_mcast_grp: i32,
    pub max_mcast_qp_attach: i32,
    pub max_total_mcast_qp_attach: i32,
    pub phys_port_cnt: u8,
    /// `IBV_DEVICE_BAD_QKEY_CNTR` is set (rxe: rxe_param.h).
    pub bad_qkey_cntr: bool,
}

#[derive(Clone, Copy, Debug)]
pub struct PortInfo {
    pub state: u32,
    pub gid_tbl_len: i32,
    pub link_layer: u8,
    /// Datagrams the port dropped for a Q_Key other than the receiving
    /// QP's (rxe_recv.c `check_keys`), since the last reset; 16 bits in
    /// the IBA, saturating (rxe: 0xffff).
    pub qkey_viol_cntr: u32,
    /// The port's LID and its subnet manager's (InfiniBand; 0 until an SM
    /// has configured the port).
    pub lid: u16,
    pub sm_lid: u16,
}

/// `enum ibv_port_state` names (verbs.c `ibv_port_state_str`).
pub fn port_state_name(state: u32) -> &'static str {
    match state {
        0 => "NOP",
        1 => "DOWN",
        2 => "INIT",
        3 => "ARMED",
        4 => "ACTIVE",
        5 => "ACTIVE_DEFER",
        _ => "unknown",
    }
}

/// An open device; closed on drop.
pub struct Device {
    pub name: String,
    pub ctx: *mut ibv_context,
}

impl Device {
    pub fn limits(&self) -> Option<DeviceLimits> {
        let mut b = [0u8; DEV_ATTR_LEN];
        // SAFETY: ctx is open; b has the struct's size.
        if unsafe { ibv_query_device(self.ctx, b.as_mut_ptr().cast()) } != 0 {
            return None;
        }
        Some(DeviceLimits {
            max_mcast_grp: i32_at(&b, OFF_MAX_MCAST_GRP),
            max_mcast_qp_attach: i32_at(&b, OFF_MAX_MCAST_QP_ATTACH),
            max_total_mcast_qp_attach: i32_at(&b, OFF_MAX_TOTAL_MCAST_QP_ATTACH),
            phys_port_cnt: b[OFF_PHYS_PORT_CNT],
            bad_qkey_cntr: i32_at(&b, OFF_DEVICE_CAP_FLAGS) as u32 & DEVICE_BAD_QKEY_CNTR != 0,
        })
    }

    pub fn port(&self, port: u8) -> Option<PortInfo> {
        let mut b = [0u8; PORT_ATTR_BUF];
        // SAFETY: ctx is open; b is larger than struct ibv_port_attr.
        if unsafe { ibv_query_port(self.ctx, port, b.as_mut_ptr().cast()) } != 0 {
            return None;
        }
        let u16_at = |off: usize| u16::from_ne_bytes([b[off], b[off + 1]]);
        Some(PortInfo {
            state: i32_at(&b, OFF_STATE) as u32,
            gid_tbl_len: i32_at(&b, OFF_GID_TBL_LEN),
            link_layer: b[OFF_LINK_LAYER],
            qkey_viol_cntr: i32_at(&b, OFF_QKEY_VIOL_CNTR) as u32,
            lid: u16_at(OFF_LID),
            sm_lid: u16_at(OFF_SM_LID),
        })
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: ctx came from ibv_open_device and is closed once.
        unsafe { ibv_close_device(self.ctx) };
    }
}

/// Every device's name, in rdma-core's order.
pub fn device_names() -> Vec<String> {
    with_list(|list| list.iter().map(|&d| name_of(d)).collect())
}

/// Opens the device called `name`; None when there is none or it fails.
pub fn open(name: &str) -> Option<Device> {
    with_list(|list| {
        let dev = *list.iter().find(|&&d| name_of(d) == name)?;
        // SAFETY: dev is an entry of the live device list.
        let ctx = unsafe { ibv_open_device(dev) };
        (!ctx.is_null()).then(|| Device { name: name.to_string(), ctx })
    })
}

fn name_of(dev: *mut ibv_device) -> String {
    // SAFETY: dev is a valid device; the name is a NUL-terminated string.
    let p = unsafe { ibv_get_device_name(dev) };
    if p.is_null() {
        return String::new();
    }
    // SAFETY: non-NULL, NUL-terminated (rdma-core's ibv_device.name).
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn with_list<T>(f: impl FnOnce(&[*mut ibv_device]) -> T) -> T {
    let mut n: c_int = 0;
    // SAFETY: n is writable.
    let list = unsafe { ibv_get_device_list(&mut n) };
    if list.is_null() || n <= 0 {
        if !list.is_null() {
            // SAFETY: list came from ibv_get_device_list.
            unsafe { ibv_free_device_list(list) };
        }
        return f(&[]);
    }
    // SAFETY: the list holds n entries.
    let slice = unsafe { core::slice::from_raw_parts(list, n as usize) };
    let out = f(slice);
    // SAFETY: list came from ibv_get_device_list; opened contexts outlive it.
    unsafe { ibv_free_device_list(list) };
    out
}

/// The name of the device of `ctx`, any library's context of it (selftest
/// --join: the device librdmacm bound an address to).
///
/// # Safety
/// `ctx` is a live context.
pub unsafe fn context_device_name(ctx: *mut ibv_context) -> String {
    // SAFETY: the caller's; the name is NUL-terminated.
    unsafe {
        let n = ibv_get_device_name((*ctx).device);
        if n.is_null() { "?".into() } else { CStr::from_ptr(n).to_string_lossy().into_owned() }
    }
}
