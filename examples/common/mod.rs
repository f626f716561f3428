//! rdma-core's C calls and structs that the examples (examples/attach.rs,
//! examples/receiver.rs) need to make a UD QP of their own, as a program
//! over any binding has one: written once here. ctest/consumer builds
//! receiver.rs from this directory, so its `mod common` finds this file too.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::process::exit;

/// rdma-core's `struct ibv_qp_cap` and `struct ibv_qp_init_attr` (verbs.h).
#[repr(C)]
pub struct QpCap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}
#[repr(C)]
pub struct QpInitAttr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut c_void,
    pub recv_cq: *mut c_void,
    pub srq: *mut c_void,
    pub cap: QpCap,
    pub qp_type: c_int,
    pub sq_sig_all: c_int,
    /// The tail padding of `struct ibv_qp_init_attr` on 64-bit targets, a
    /// field so that it is zero: rdma-core 31 to 37 copy the whole struct
    /// into an `ibv_qp_init_attr_ex`, whose `comp_mask` lies there, and
    /// keep its bits (libibverbs/cmd_qp.c `ibv_cmd_create_qp`; fixed in 38,
    /// 74af92ae5): a Rust struct literal leaves padding undefined, and
    /// `ibv_create_qp` then fails with EINVAL now and then
    /// (docs/rdma-core-releases.md D5).
    pub padding: u32,
}
/// `IBV_QPT_UD`.
pub const QPT_UD: c_int = 4;

#[link(name = "ibverbs")]
unsafe extern "C" {
    pub fn ibv_get_device_list(n: *mut c_int) -> *mut *mut c_void;
    pub fn ibv_free_device_list(list: *mut *mut c_void);
    pub fn ibv_get_device_name(dev: *mut c_void) -> *const c_char;
    pub fn ibv_open_device(dev: *mut c_void) -> *mut c_void;
    pub fn ibv_close_device(ctx: *mut c_void) -> c_int;
    pub fn ibv_alloc_pd(ctx: *mut c_void) -> *mut c_void;
    pub fn ibv_dealloc_pd(pd: *mut c_void) -> c_int;
    pub fn ibv_create_cq(ctx: *mut c_void, cqe: c_int, cq_context: *mut c_void, channel: *mut c_void, vector: c_int) -> *mut c_void;
    pub fn ibv_destroy_cq(cq: *mut c_void) -> c_int;
    pub fn ibv_create_qp(pd: *mut c_void, attr: *mut QpInitAttr) -> *mut c_void;
    pub fn ibv_destroy_qp(qp: *mut c_void) -> c_int;
    pub fn ibv_detach_mcast(qp: *mut c_void, gid: *const [u8; 16], lid: u16) -> c_int;
}

/// `PROG: WHAT: the last OS error` on stderr, and exit status 2: a setup
/// error, not a test's failure.
pub fn setup_error(prog: &str, what: &str) -> ! {
    eprintln!("{prog}: {what}: {}", std::io::Error::last_os_error());
    exit(2)
}

/// A device opened with a PD and a CQ of 2 entries.
pub struct Device {
    pub list: *mut *mut c_void,
    pub name: String,
    pub ctx: *mut c_void,
    pub pd: *mut c_void,
    pub cq: *mut c_void,
}

/// The device named `want` (the first one when None), opened; exits 2
/// through [`setup_error`] when anything fails.
pub fn open(prog: &str, want: Option<&str>) -> Device {
    let mut n = 0;
    // SAFETY: rdma-core's documented calls, each checked before use.
    unsafe {
        let list = ibv_get_device_list(&mut n);
        if list.is_null() || n == 0 {
            setup_error(prog, "no RDMA device");
        }
        let devs = std::slice::from_raw_parts(list, n as usize);
        let name = |d: *mut c_void| CStr::from_ptr(ibv_get_device_name(d)).to_string_lossy().into_owned();
        let Some(&dev) = devs.iter().find(|&&d| want.is_none_or(|w| w == name(d))) else {
            setup_error(prog, "no such device")
        };
        let ctx = ibv_open_device(dev);
        let pd = if ctx.is_null() { setup_error(prog, "ibv_open_device") } else { ibv_alloc_pd(ctx) };
        let cq = if pd.is_null() { setup_error(prog, "ibv_alloc_pd") } else { ibv_create_cq(ctx, 2, std::ptr::null_mut(), std::ptr::null_mut(), 0) };
        if cq.is_null() {
            setup_error(prog, "ibv_create_cq");
        }
        Device { list, name: name(dev), ctx, pd, cq }
    }
}

/// A UD QP on the device's PD and CQ; exits 2 through [`setup_error`] when
/// rdma-core refuses it.
pub fn ud_qp(prog: &str, d: &Device) -> *mut c_void {
    let cap = QpCap { max_send_wr: 1, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let mut attr = QpInitAttr { qp_context: std::ptr::null_mut(), send_cq: d.cq, recv_cq: d.cq, srq: std::ptr::null_mut(), cap, qp_type: QPT_UD, sq_sig_all: 0, padding: 0 };
    // SAFETY: a live PD and a filled attr.
    let qp = unsafe { ibv_create_qp(d.pd, &mut attr) };
    if qp.is_null() {
        setup_error(prog, "ibv_create_qp");
    }
    qp
}
