//! `RSVERBS_TRACE`: one line per call of the three verbs, and hints
//! (docs/trace.md).
//!
//! The exports test one static, [`crate::hooks::wanted`], with a Relaxed
//! load: with tracing (and `RSVERBS_MCAST_IPJOIN`) off that is the whole
//! cost (no syscall, lock or allocation). A
//! library constructor reads `RSVERBS_TRACE` with `secure_getenv` (ignored
//! in setuid and setgid programs); a call that comes before it (another
//! library's constructor) reads it itself. Everything else is out of line
//! and runs only with tracing on, and restores `errno` before returning,
//! so return values and `errno` are the same with tracing on or off.

mod collapse;
mod facts;
pub mod format;
mod hints;
mod sink;

use crate::abi::{ibv_context, ibv_device};
use crate::env::{FIRST_STATE, Switch};
use crate::error::ErrnoGuard;
use crate::gid::GidQuery;
use crate::mcast::McastCall;
use crate::registry::{self, Attachment, QpKey};
use crate::uverbs::route::{self, Key};
use core::ffi::c_int;
use core::fmt::Write;
use crate::abi::c_field;
use crate::mgid::Mgid;
use format::{Line, Res};

const OFF: u8 = FIRST_STATE;
/// `1` or a path: the call lines.
const LINES: u8 = FIRST_STATE + 1;
/// `hints` or `hints:PATH`: the call lines and the hints.
const HINTS: u8 = FIRST_STATE + 2;

static MODE: Switch = Switch::new(c"RSVERBS_TRACE");

/// Whether tracing is on (reads `RSVERBS_TRACE` on first use). The
/// exports' one check is [`crate::hooks::wanted`].
pub fn on() -> bool {
    mode() != OFF
}

/// Whether the attachment registry is kept (any tracing on).
pub fn registry_on() -> bool {
    matches!(mode(), LINES | HINTS)
}

/// A line from another opt-in feature (`RSVERBS_MCAST_IPJOIN`'s joins and
/// leaves), when tracing is on.
pub fn note(args: core::fmt::Arguments<'_>) {
    if !registry_on() {
        return;
    }
    let pid = std::process::id();
    collapse::flush(pid);
    let mut l = Line::new(pid);
    let _ = l.write_fmt(args);
    sink::emit(l.finish());
}

/// The mode; the first call reads `RSVERBS_TRACE` and opens the sink. A
/// thread that comes while another reads it, and waits too long, goes
/// untraced.
fn mode() -> u8 {
    MODE.get(configure, OFF)
}

/// Parses `RSVERBS_TRACE` and opens the sink. Unset, empty or `0`: off.
fn configure(value: &[u8]) -> u8 {
    let (m, dest) = match value {
        b"" | b"0" => return OFF,
        b"1" => (LINES, None),
        b"hints" => (HINTS, None),
        v if v.starts_with(b"hints:/") => (HINTS, Some(&v[6..])),
        v if v.starts_with(b"/") => (LINES, Some(v)),
        _ => {
            MODE.warn(value, "not 1, hints, an absolute path or hints:PATH", "tracing");
            return OFF;
        }
    };
    match dest {
        None => sink::to_stderr(),
        Some(path) if sink::to_file(path) => {}
        Some(_) => {
            MODE.warn(value, "cannot open the file", "tracing");
            return OFF;
        }
    }
    m
}

/// At load: read `RSVERBS_TRACE` and open the sink (lifecycle.rs).
pub fn at_load() {
    mode();
}

/// At exit (or dlclose; lifecycle.rs): the pending ENODATA run, and
/// `still-attached`.
pub fn at_unload() {
    let m = MODE.peek();
    if m != Some(LINES) && m != Some(HINTS) {
        return;
    }
    let _errno = ErrnoGuard::save();
    let pid = std::process::id();
    collapse::flush(pid);
    if m == Some(HINTS) {
        hints::at_exit(pid);
    }
}

fn now_ns() -> u64 {
    // SAFETY: an all-zero timespec is valid; clock_gettime fills it (vDSO).
    let mut ts: libc::timespec = unsafe { core::mem::zeroed() };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}

/// The C body of attach/detach: check → call → map.
pub type McastFn = unsafe fn(&McastCall) -> c_int;
/// The C body of `_ibv_query_gid_ex`.
pub type GidFn = unsafe fn(&GidQuery) -> c_int;

/// Attach (`attach`) or detach through `call`, traced.
///
/// # Safety
/// As the export's: non-NULL pointers point at live rdma-core objects.
#[cold]
#[inline(never)]
pub unsafe fn mcast(c: &McastCall, call: McastFn) -> c_int {
    let m = mode();
    if m == OFF {
        // SAFETY: forwarded from our caller.
        return unsafe { call(c) };
    }
    let t0 = now_ns();
    // SAFETY: forwarded from our caller.
    let rc = unsafe { call(c) };
    let us = now_ns().wrapping_sub(t0) / 1000;
    let _errno = ErrnoGuard::save();
    // SAFETY: forwarded from our caller.
    unsafe { after_mcast(m, c, rc, us) };
    rc
}

/// The device of a context, if both pointers are set.
///
/// # Safety
/// `ctx` is NULL or a live rdma-core context.
unsafe fn device<'a>(ctx: *const ibv_context) -> Option<&'a ibv_device> {
    if ctx.is_null() {
        return None;
    }
    // SAFETY: ctx is live; device is a public field set by rdma-core.
    let dev = unsafe { (*ctx).device };
    // SAFETY: NULL or a live device.
    unsafe { dev.as_ref() }
}

/// # Safety
/// As [`mcast`].
unsafe fn after_mcast(m: u8, c: &McastCall, rc: c_int, us: u64) {
    let McastCall { qp, gid, lid, .. } = *c;
    let attach = c.attach();
    let pid = std::process::id();
    collapse::flush(pid);
    let mut l = Line::new(pid);
    let _ = l.write_str(if attach { "ibv_attach_mcast " } else { "ibv_detach_mcast " });
    // SAFETY: NULL or a live QP.
    let q = unsafe { qp.as_ref() };
    let ctx = q.map_or(core::ptr::null_mut(), |q| q.context);
    // SAFETY: NULL or a live context.
    let dev = unsafe { device(ctx) };
    let mut port = None;
    match (q, dev) {
        (None, _) => {
            let _ = l.write_str("qp=NULL");
        }
        (Some(_), None) if ctx.is_null() => {
            let _ = l.write_str("qp.context=NULL");
        }
        (Some(q), d) => {
            // SAFETY: ctx is live (non-NULL here).
            let fd = unsafe { (*ctx).cmd_fd };
            let key = Key { ctx: ctx as usize, fd };
            // Only for a context whose route is known: the trace never
            // makes rsverbs discover a route the call itself did not.
            port = match d {
                Some(d) if route::peek(key).is_some() => facts::qp_port(key, q.handle, d),
                _ => None,
            };
            let _ = write!(l, "dev={}", d.map_or("?", |d| c_field(&d.name)));
            match port {
                Some(p) => {
                    let _ = write!(l, " port={p}");
                }
                None => {
                    let _ = l.write_str(" port=?");
                }
            }
            let _ = write!(l, " qpn={:#x} qp_type={}", q.qp_num, crate::abi::qp_type(q.qp_type));
        }
    }
    // SAFETY: NULL or 16 readable bytes.
    let raw = unsafe { gid.as_ref() }.map(|g| {
        // SAFETY: every bit pattern is a valid [u8; 16].
        unsafe { g.raw }
    });
    match &raw {
        Some(r) => {
            let _ = write!(l, " {}", Mgid(*r));
        }
        None => {
            let _ = l.write_str(" mgid=NULL");
        }
    }
    let _ = write!(l, " lid={lid:#06x} result={} us={us}", Res(rc));
    sink::emit(l.finish());

    let (Some(q), Some(d), Some(raw)) = (q, dev, raw) else { return };
    let qk = QpKey { ctx: ctx as usize, handle: q.handle };
    let before = registry::lids(qk, &raw);
    if rc == 0 {
        if attach {
            let mut name = [0u8; 16];
            for (n, c) in name.iter_mut().zip(c_field(&d.name).bytes()) {
                *n = c;
            }
            registry::insert(&Attachment { qp: qk, pid, qpn: q.qp_num, gid: raw, lid, dev: name });
        } else {
            registry::remove(qk, &raw, lid);
        }
    }
    if m == HINTS {
        // SAFETY: ctx is live.
        let route = Key { ctx: ctx as usize, fd: unsafe { (*ctx).cmd_fd } };
        let call = hints::Call {
            pid,
            attach,
            dev: d,
            dev_name: c_field(&d.name),
            port,
            route,
            qp: qk,
            qpn: q.qp_num,
            qp_type: q.qp_type,
            gid: raw,
            lid,
            rc,
        };
        hints::after_mcast(&call, &before);
    }
}

/// `_ibv_query_gid_ex` through `call`, traced.
///
/// # Safety
/// As the export's.
#[cold]
#[inline(never)]
pub unsafe fn query_gid(q: GidQuery, call: GidFn) -> c_int {
    let m = mode();
    // SAFETY: forwarded from our caller.
    let rc = unsafe { call(&q) };
    let GidQuery { ctx, port_num: port, gid_index: index, entry, flags, entry_size } = q;
    if m == OFF {
        return rc;
    }
    let _errno = ErrnoGuard::save();
    let pid = std::process::id();
    // SAFETY: NULL or a live context.
    let dev = unsafe { device(ctx) };
    let name = dev.map_or("?", |d| c_field(&d.name));
    if rc == libc::ENODATA && !ctx.is_null() {
        let mut dn = [0u8; 64];
        for (n, c) in dn.iter_mut().zip(name.bytes()) {
            *n = c;
        }
        let key = collapse::RunKey { pid, ctx: ctx as usize, port, flags, entry_size, dev: dn };
        collapse::enodata(key, index);
    } else {
        collapse::flush(pid);
        let mut l = Line::new(pid);
        if ctx.is_null() {
            let _ = write!(l, "_ibv_query_gid_ex context=NULL port={port} index={index}");
        } else {
            let _ = write!(l, "_ibv_query_gid_ex dev={name} port={port} index={index}");
        }
        let _ = write!(l, " flags={flags:#x} entry_size={entry_size} result={}", Res(rc));
        if rc == 0 && !entry.is_null() {
            // SAFETY: the call succeeded, so entry is writable (hence
            // readable) for entry_size bytes; only that many are read.
            let bytes = unsafe { core::slice::from_raw_parts(entry.cast::<u8>(), entry_size.min(32)) };
            if let Some(g) = bytes.get(..16) {
                let mut raw = [0u8; 16];
                raw.copy_from_slice(g);
                let _ = write!(l, " gid={}", core::net::Ipv6Addr::from(raw));
            }
            if let Some(t) = bytes.get(24..28) {
                let _ = write!(l, " gid_type={}", crate::abi::gid_type(u32::from_ne_bytes([t[0], t[1], t[2], t[3]])));
            }
            if let Some(i) = bytes.get(28..32) {
                let ifindex = u32::from_ne_bytes([i[0], i[1], i[2], i[3]]);
                let nd = match (ifindex, dev) {
                    (0, _) | (_, None) => None,
                    (_, Some(d)) => facts::gid_netdev(d, port, index),
                };
                let _ = write!(l, " netdev={}", nd.as_deref().unwrap_or("-"));
            }
        }
        sink::emit(l.finish());
    }
    rc
}

/// `rsverbs_mcast_attachments`: the recorded (MGID, LID) pairs of `qp`.
/// Returns their number, or None when the registry is off.
pub fn attachments(qp: QpKey, mut out: impl FnMut(usize, [u8; 16], u16)) -> Option<usize> {
    if !registry_on() {
        return None;
    }
    let mut n = 0;
    registry::each(|a| {
        if a.qp == qp {
            out(n, a.gid, a.lid);
            n += 1;
        }
    });
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configure_values() {
        assert_eq!(configure(b""), OFF);
        assert_eq!(configure(b"0"), OFF);
        assert_eq!(configure(b"yes"), OFF);
        assert_eq!(configure(b"relative/path"), OFF);
        assert_eq!(configure(b"/nonexistent-dir/x/trace"), OFF);
        let p = std::env::temp_dir().join(format!("rsverbs-trace-test-{}", std::process::id()));
        let mut v = b"hints:".to_vec();
        v.extend_from_slice(p.to_str().expect("utf-8 temp path").as_bytes());
        assert_eq!(configure(&v), HINTS);
        sink::emit(b"one line\n");
        assert_eq!(std::fs::read(&p).expect("trace file"), b"one line\n");
        let _ = std::fs::remove_file(&p);
        assert_eq!(configure(b"1"), LINES);
        assert_eq!(configure(b"hints"), HINTS);
    }
}
