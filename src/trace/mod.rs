//! `RSVERBS_TRACE`: one line per call of the five verbs, and hints
//! (docs/trace.md).
//!
//! The exports test one static, `hooks::wanted`, with a Relaxed
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

use crate::abi::{gid_type, qp_type};
use crate::env::{FIRST_STATE, Switch};
use crate::error::ErrnoGuard;
use crate::os;
use crate::registry::{self, Attachment, Watch};
use crate::uverbs::route;
use crate::view::{GidView, McastView, QpKey, QueryView, TableView};
use core::ffi::c_int;
use core::fmt::Write;
use format::{Count, Line, Res};

const OFF: u8 = FIRST_STATE;
/// `1` or a path: the call lines.
const LINES: u8 = FIRST_STATE + 1;
/// `hints` or `hints:PATH`: the call lines and the hints.
const HINTS: u8 = FIRST_STATE + 2;

static MODE: Switch = Switch::new(c"RSVERBS_TRACE");

/// Whether tracing is on (reads `RSVERBS_TRACE` on first use). The
/// exports' one check is `hooks::wanted`.
pub fn on() -> bool {
    mode() != OFF
}

/// Whether the attachment registry is kept (any tracing on).
pub fn registry_on() -> bool {
    matches!(mode(), LINES | HINTS)
}

/// A line from another opt-in feature (`RSVERBS_MCAST_IPJOIN`'s joins and
/// leaves), when tracing is on.
#[inline(never)]
pub fn note(args: core::fmt::Arguments<'_>) {
    if !registry_on() {
        return;
    }
    let pid = os::pid();
    collapse::flush(pid);
    note_line(pid, args);
}

/// The line of [`note`], out of line: built after the pending run's line is
/// written (docs/security.md, the stack budget).
#[inline(never)]
fn note_line(pid: u32, args: core::fmt::Arguments<'_>) {
    let mut l = Line::new();
    l.start(pid);
    let _ = l.write_fmt(args);
    sink::emit(l.finish());
}

/// A `hint[ip-join-failed]` line (`RSVERBS_TRACE=hints`): the IP-level
/// join of `mgid` on `netdev` failed with `e`.
pub fn ip_join_failed(netdev: &str, mgid: &crate::mgid::Mgid, e: c_int) {
    if mode() == HINTS {
        hints::ip_join_failed(os::pid(), netdev, mgid, e);
    }
}

/// A `hint[fabric-join-failed]` line: the fabric join of `mgid` through
/// `netdev` failed (or, `lost`, ended later) with `e`.
pub fn fabric_join_failed(netdev: &str, mgid: &crate::mgid::Mgid, step: &str, e: c_int, lost: bool) {
    if mode() == HINTS {
        hints::fabric_join_failed(os::pid(), netdev, mgid, step, e, lost);
    }
}

/// A `hint[fabric-join-cred-change]` line: the fabric join's fd answered
/// EACCES after a credential change and was replaced.
pub fn fabric_cred_change(held: u32, rejoined: u32, errno: c_int) {
    if mode() == HINTS {
        hints::fabric_cred_change(os::pid(), held, rejoined, errno);
    }
}

/// A `hint[no-ipoib]` line: an attach on InfiniBand port `port`, whose
/// fabric join needs an IPoIB address to bind to, and there is none.
pub fn no_ipoib(ctx: &crate::view::Context, port: u32, mgid: &crate::mgid::Mgid) {
    if mode() == HINTS {
        let name = ctx.dev.as_ref().map_or("?", |d| d.name());
        hints::no_ipoib(os::pid(), name, port, mgid);
    }
}

/// A `hint[mlid-mismatch]` line: the SA gave `mgid` the MLID `mlid`, the
/// attach was given `lid`.
pub fn mlid_mismatch(mgid: &crate::mgid::Mgid, lid: u16, mlid: u16) {
    if mode() == HINTS {
        hints::mlid_mismatch(os::pid(), mgid, lid, mlid);
    }
}

/// A `hint[qkey-mismatch]` line: the fabric join says the group's Q_Key
/// is `group`, the QP's is `own`.
pub fn qkey_mismatch(mgid: &crate::mgid::Mgid, own: u32, group: u32) {
    if mode() == HINTS {
        hints::qkey_mismatch(os::pid(), mgid, own, group);
    }
}

/// The mode; the first call reads `RSVERBS_TRACE` and opens the sink. A
/// thread that comes while another reads it sleeps until it is read; a
/// signal handler on the reader's own thread goes untraced (env::Switch).
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
    let pid = os::pid();
    collapse::flush(pid);
    if m == Some(HINTS) {
        hints::at_exit(pid);
    }
    sink::close();
}

/// The line, the registry and the hints of one traced attach or detach
/// that returned `rc` after `us` microseconds. `ipjoin`: whether
/// `RSVERBS_MCAST_IPJOIN` joins right after (then no `no-ip-join` hint).
/// The caller keeps `errno`.
#[inline(never)]
pub fn after_mcast(v: &McastView, rc: c_int, us: u64, ipjoin: bool) {
    let m = mode();
    if m == OFF {
        return;
    }
    let attach = v.attach;
    let pid = os::pid();
    collapse::flush(pid);
    // Borrowed, never copied (a device is 320 bytes; docs/security.md,
    // the stack budget).
    let dev = v.ctx.as_ref().and_then(|c| c.dev.as_ref());
    // Only for a context whose route is known: the trace never makes
    // rsverbs discover a route the call itself did not. One QUERY_QP gives
    // the port and the Q_Key (src/port.rs).
    let f = match (v.qp, v.ctx.as_ref(), dev) {
        (Some(q), Some(ctx), Some(d)) if route::peek(ctx.key).is_some() => facts::qp_facts(ctx.key, q.key.handle, d),
        _ => facts::QpFacts::default(),
    };
    let port = f.port;
    // A Q_Key means something only to a UD QP (IBA 9.6.1.1).
    let qkey = f.qkey.filter(|_| v.qp.is_some_and(|q| q.qp_type == hints::IBV_QPT_UD));
    // The MGID's fields written apart, before the line's buffer is on the
    // stack (format::short).
    let mgid = v.mgid.map(|g| format::short::<128>(&g));
    mcast_line(v, mgid.as_ref().map(os::Text::as_str), pid, dev, (port, qkey), rc, us);

    let (Some(q), Some(ctx), Some(d), Some(g)) = (v.qp, v.ctx.as_ref(), dev, v.mgid) else { return };
    registry::forget_stale(q.key, q.qpn);
    let before = registry::lids(q.key, &g.0);
    // qkey-violations: the port's counter after the attach, kept with the
    // attachment; sampled again after its detach (one QUERY_PORT each, in
    // hints mode only; a duplicate attach keeps the first sample).
    let mut ended = None;
    if rc == 0 {
        if attach {
            let mut name = [0u8; 16];
            for (n, c) in name.iter_mut().zip(d.name().bytes()) {
                *n = c;
            }
            let watch = match (port, qkey) {
                (Some(p), Some(qkey)) if m == HINTS && p <= 0xff && !before.contains(&v.lid) => {
                    facts::qkey_viol(ctx.key, p).map(|viol| Watch { port: p as u8, qkey, viol, fd: ctx.key.fd })
                }
                _ => None,
            };
            registry::insert(&Attachment { qp: q.key, pid, qpn: q.qpn, gid: g.0, lid: v.lid, dev: name, watch });
        } else {
            let mut watch = None;
            if m == HINTS {
                registry::each(|a| {
                    if a.qp == q.key && a.gid == g.0 && a.lid == v.lid && watch.is_none() {
                        watch = a.watch;
                    }
                });
            }
            registry::remove(q.key, &g.0, v.lid);
            ended = watch.and_then(|w| facts::qkey_viol(ctx.key, u32::from(w.port)).map(|now| (w, now)));
        }
    }
    if m == HINTS {
        let call = hints::Call {
            pid,
            attach,
            dev: d,
            port,
            route: ctx.key,
            qp: q.key,
            qpn: q.qpn,
            qp_type: q.qp_type,
            gid: g.0,
            lid: v.lid,
            rc,
            ipjoin,
        };
        hints::after_mcast(&call, &before);
        if let Some((w, now)) = ended {
            hints::qkey_violations(pid, d.name(), q.qpn, &g, w, now, false);
        }
    }
}

/// The call line of one attach or detach: out of line, so that its buffer
/// is on the stack only while it is written, never beside a hint's
/// (docs/security.md, the stack budget).
#[inline(never)]
fn mcast_line(v: &McastView, mgid: Option<&str>, pid: u32, dev: Option<&crate::view::Device>, (port, qkey): (Option<u32>, Option<u32>), rc: c_int, us: u64) {
    let mut l = Line::new();
    l.start(pid);
    let _ = l.write_str(if v.attach { "ibv_attach_mcast " } else { "ibv_detach_mcast " });
    match (v.qp, v.ctx) {
        (None, _) => {
            let _ = l.write_str("qp=NULL");
        }
        (Some(_), None) => {
            let _ = l.write_str("qp.context=NULL");
        }
        (Some(q), Some(_)) => {
            let _ = write!(l, "dev={}", dev.map_or("?", |d| d.name()));
            match port {
                Some(p) => {
                    let _ = write!(l, " port={p}");
                }
                None => {
                    let _ = l.write_str(" port=?");
                }
            }
            let _ = write!(l, " qpn={:#x} qp_type={}", q.qpn, qp_type(q.qp_type));
            if let Some(k) = qkey {
                let _ = write!(l, " qkey={k:#x}");
            }
        }
    }
    match mgid {
        Some(g) => {
            let _ = write!(l, " {g}");
        }
        None => {
            let _ = l.write_str(" mgid=NULL");
        }
    }
    let _ = write!(l, " lid={:#06x} result={} us={us}", v.lid, Res(rc));
    sink::emit(l.finish());
}

/// The line of one traced `_ibv_query_gid_ex` that returned `rc` (ENODATA
/// answers collapse into runs). The caller keeps `errno`.
#[inline(never)]
pub fn after_query(q: &QueryView, rc: c_int) {
    if mode() == OFF {
        return;
    }
    let pid = os::pid();
    let dev = q.ctx.as_ref().and_then(|c| c.dev.as_ref());
    let name = dev.map_or("?", |d| d.name());
    match q.ctx.as_ref() {
        Some(c) if rc == libc::ENODATA => {
            empty(collapse::Verb::QueryGidEx, pid, c.key.ctx, q.port, q.flags, q.entry_size, name, q.index);
        }
        _ => {
            collapse::flush(pid);
            query_line(q, pid, dev, name, rc);
        }
    }
}

/// An empty entry for [`collapse`]: out of line, so that its key is not in
/// the frame that holds a line (docs/security.md, the stack budget).
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn empty(verb: collapse::Verb, pid: u32, ctx: usize, port: u32, flags: u32, entry_size: usize, name: &str, index: u32) {
    let mut dn = [0u8; 64];
    for (n, c) in dn.iter_mut().zip(name.bytes()) {
        *n = c;
    }
    collapse::empty(collapse::RunKey { verb, pid, ctx, port, flags, entry_size, dev: dn }, index);
}

/// The line of one `_ibv_query_gid_ex` (not a collapsed ENODATA run), out
/// of line (docs/security.md, the stack budget).
#[inline(never)]
fn query_line(q: &QueryView, pid: u32, dev: Option<&crate::view::Device>, name: &str, rc: c_int) {
    let QueryView { ctx, port, index, flags, entry_size, entry } = *q;
    let mut l = Line::new();
    l.start(pid);
    if ctx.is_none() {
        let _ = write!(l, "_ibv_query_gid_ex context=NULL port={port} index={index}");
    } else {
        let _ = write!(l, "_ibv_query_gid_ex dev={name} port={port} index={index}");
    }
    let _ = write!(l, " flags={flags:#x} entry_size={entry_size} result={}", Res(rc));
    if let Some((buf, len)) = entry {
        let bytes = &buf[..len];
        if let Some(g) = bytes.get(..16) {
            let mut raw = [0u8; 16];
            raw.copy_from_slice(g);
            let _ = write!(l, " gid={}", crate::mgid::Ip6(raw));
        }
        if let Some(t) = bytes.get(24..28) {
            let _ = write!(l, " gid_type={}", gid_type(u32::from_ne_bytes([t[0], t[1], t[2], t[3]])));
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

/// The line of one traced `ibv_query_gid` that returned `rc` (empty
/// entries, 0 with the zero GID, collapse into runs). The caller keeps
/// `errno`.
#[inline(never)]
pub fn after_gid(v: &GidView, rc: c_int) {
    if mode() == OFF {
        return;
    }
    let pid = os::pid();
    let name = v.ctx.as_ref().and_then(|c| c.dev.as_ref()).map_or("?", |d| d.name());
    if let (Some(c), true) = (v.ctx.as_ref(), v.gid == Some([0; 16])) {
        empty(collapse::Verb::QueryGid, pid, c.key.ctx, u32::from(v.port), 0, 16, name, v.index as u32);
        return;
    }
    collapse::flush(pid);
    gid_line(v, pid, name, rc);
}

/// The line of one `ibv_query_gid` (not a collapsed run), out of line
/// (docs/security.md, the stack budget).
#[inline(never)]
fn gid_line(v: &GidView, pid: u32, name: &str, rc: c_int) {
    let mut l = Line::new();
    l.start(pid);
    if v.ctx.is_none() {
        let _ = write!(l, "ibv_query_gid context=NULL port={} index={}", v.port, v.index);
    } else {
        let _ = write!(l, "ibv_query_gid dev={name} port={} index={}", v.port, v.index);
    }
    let _ = write!(l, " result={rc}");
    if rc != 0 {
        let _ = write!(l, " errno={}", Res(v.errno));
    }
    if v.gid_null {
        let _ = l.write_str(" gid=NULL");
    } else if let Some(g) = v.gid {
        let _ = write!(l, " gid={}", crate::mgid::Ip6(g));
    }
    sink::emit(l.finish());
}

/// The line of one traced `_ibv_query_gid_table` that returned `rc`. The
/// caller keeps `errno`.
#[inline(never)]
pub fn after_gid_table(v: &TableView, rc: isize) {
    if mode() == OFF {
        return;
    }
    let pid = os::pid();
    collapse::flush(pid);
    table_line(v, pid, rc);
}

/// The line of one `_ibv_query_gid_table`, out of line: the pending run's
/// line is written before this one is built (docs/security.md, the stack
/// budget).
#[inline(never)]
fn table_line(v: &TableView, pid: u32, rc: isize) {
    let mut l = Line::new();
    l.start(pid);
    match &v.ctx {
        None => {
            let _ = l.write_str("_ibv_query_gid_table context=NULL");
        }
        Some(c) => {
            let _ = write!(l, "_ibv_query_gid_table dev={}", c.dev.as_ref().map_or("?", |d| d.name()));
        }
    }
    if v.entries_null {
        let _ = l.write_str(" entries=NULL");
    }
    let _ = write!(l, " max_entries={} flags={:#x} entry_size={} result={}", v.max_entries, v.flags, v.entry_size, Count(rc));
    sink::emit(l.finish());
}

/// `rsverbs_mcast_attachments`: the recorded (MGID, LID) pairs of `qp`.
/// Returns their number, or None when the registry is off.
pub fn attachments(qp: QpKey, qpn: u32, mut out: impl FnMut(usize, [u8; 16], u16)) -> Option<usize> {
    if !registry_on() {
        return None;
    }
    let mut n = 0;
    registry::each(|a| {
        // Another QPN: a QP gone since, at the same address and handle.
        if a.qp == qp && a.qpn == qpn {
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
