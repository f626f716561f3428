//! What the opt-in features (the trace, the IP-level join) may know of one
//! call's rdma-core objects: read once from their public fields by
//! `hooks`, the one place past the C boundary that dereferences
//! them for a feature (a device's two strings are read in place, by
//! [`Device`], while the call lasts). The features and `port` take these
//! views and never touch an rdma-core pointer.

use crate::abi::{c_field, ibv_context, ibv_device, ibv_qp};
use crate::mgid::Mgid;
use crate::uverbs::route::Key;

/// A QP as the kernel knows it: its context and handle (`ibv_qp.handle` is
/// scoped to the context's fd), so a copy of a `struct ibv_qp` is the same QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpKey {
    pub ctx: usize,
    pub handle: u32,
}

/// A device: its name and its sysfs directory (`ibdev_path`), read from
/// rdma-core's `struct ibv_device` when asked. One pointer, not a copy of
/// the two strings (320 bytes): the views are on the stack of every traced
/// call (docs/security.md, the stack budget).
#[derive(Clone, Copy)]
pub struct Device {
    /// Live for as long as the view: a view lives only within the call
    /// that made it, whose context (hence device) is live (the exports'
    /// contract).
    dev: core::ptr::NonNull<ibv_device>,
}

impl Device {
    /// `ibv_device.name`, e.g. `rxe0`.
    pub fn name(&self) -> &str {
        c_field(&self.get().name)
    }
    /// `ibv_device.ibdev_path`, e.g. `/sys/class/infiniband/rxe0`.
    pub fn sysfs(&self) -> &str {
        c_field(&self.get().ibdev_path)
    }

    fn get(&self) -> &ibv_device {
        // SAFETY: live while the view is (the field's invariant).
        unsafe { self.dev.as_ref() }
    }

    /// # Safety
    /// `dev` is NULL or a live rdma-core device, which outlives every copy
    /// of the result (the call's views).
    pub unsafe fn of(dev: *const ibv_device) -> Option<Self> {
        core::ptr::NonNull::new(dev.cast_mut()).map(|dev| Device { dev })
    }
}

/// A context: the route key (its address and command fd) and its device.
#[derive(Clone, Copy)]
pub struct Context {
    pub key: Key,
    pub dev: Option<Device>,
}

impl Context {
    /// # Safety
    /// `ctx` is NULL or a live rdma-core context.
    pub unsafe fn of(ctx: *const ibv_context) -> Option<Self> {
        // SAFETY: NULL or live (our caller's contract).
        let c = unsafe { ctx.as_ref() }?;
        // SAFETY: the device is NULL or live while its context is.
        let dev = unsafe { Device::of(c.device) };
        Some(Context { key: Key { ctx: ctx as usize, fd: c.cmd_fd }, dev })
    }
}

/// A QP: its key, number and type.
#[derive(Clone, Copy)]
pub struct Qp {
    pub key: QpKey,
    pub qpn: u32,
    pub qp_type: i32,
}

/// One attach or detach, as the features see it.
#[derive(Clone, Copy)]
pub struct McastView {
    pub attach: bool,
    /// None for a NULL `qp`.
    pub qp: Option<Qp>,
    /// None for a NULL `qp` or `qp->context`.
    pub ctx: Option<Context>,
    /// None for a NULL `gid`.
    pub mgid: Option<Mgid>,
    pub lid: u16,
}

impl McastView {
    /// # Safety
    /// As the exports': `qp` and `gid` NULL or live; a live QP's context
    /// NULL or live.
    pub unsafe fn of(attach: bool, qp: *const ibv_qp, gid: *const crate::abi::ibv_gid, lid: u16) -> Self {
        // SAFETY: NULL or live.
        let q = unsafe { qp.as_ref() };
        // SAFETY: a live QP's context is NULL or live.
        let ctx = q.and_then(|q| unsafe { Context::of(q.context) });
        let qp = q.map(|q| Qp { key: QpKey { ctx: q.context as usize, handle: q.handle }, qpn: q.qp_num, qp_type: q.qp_type });
        // SAFETY: NULL or 16 readable bytes; every bit pattern is a valid [u8; 16].
        let mgid = unsafe { gid.as_ref() }.map(|g| Mgid(unsafe { g.raw }));
        McastView { attach, qp, ctx, mgid, lid }
    }
}

/// One `_ibv_query_gid_ex`, as the trace sees it, after the call.
#[derive(Clone, Copy)]
pub struct QueryView {
    /// None for a NULL `context`.
    pub ctx: Option<Context>,
    pub port: u32,
    pub index: u32,
    pub flags: u32,
    pub entry_size: usize,
    /// After a successful call: the first `min(entry_size, 32)` bytes of
    /// the entry, and how many they are.
    pub entry: Option<([u8; 32], usize)>,
}

/// One `ibv_query_gid`, as the trace sees it, after the call.
#[derive(Clone, Copy)]
pub struct GidView {
    /// None for a NULL `context`.
    pub ctx: Option<Context>,
    pub port: u8,
    pub index: i32,
    /// Whether `gid` was NULL.
    pub gid_null: bool,
    /// After a call that returned 0: the GID stored.
    pub gid: Option<[u8; 16]>,
    /// `errno` right after the call.
    pub errno: i32,
}

/// One `_ibv_query_gid_table`, as the trace sees it, after the call.
#[derive(Clone, Copy)]
pub struct TableView {
    /// None for a NULL `context`.
    pub ctx: Option<Context>,
    /// Whether `entries` was NULL.
    pub entries_null: bool,
    pub max_entries: usize,
    pub flags: u32,
    pub entry_size: usize,
}
