//! Property and differential fuzzing of every rsverbs parser and encoder that
//! takes outside data, on stable Rust (cargo-fuzz needs nightly).
//!
//! Targets (`fuzz/corpus/<target>/` holds each one's corpus):
//! - `finish_read`: sysfs read termination, checked against its contract;
//! - `scan_hx`: differential against glibc `sscanf(s, "%hx")` via libc;
//! - `parse_gid`: differential against rdma-core's loop of 8 `sscanf(buf +
//!   i*5, "%hx")` (over a zero-filled 41-byte buffer, as read from sysfs);
//! - `parse_type`: against `strcmp` with the two kernel strings;
//! - `sysfs_fallback`: the whole `_ibv_query_gid_ex` sysfs fallback
//!   (`rsverbs::sysfs::query_gid_entry`) over a fake sysfs tree with fuzzed
//!   gids / types / ndevs files (netdev names included): never writes past
//!   `entry_size`, answers only the errnos rdma-core can, and a success
//!   carries exactly the GID the differential parser reads;
//! - `ioctl_encoders`, `write_encoders`: every byte of every uverbs command
//!   decodes back to its inputs, with the reserved fields zero.
//!
//! rsverbs parses no netlink replies (its driver_id comes from an ioctl
//! probe), so there is no netlink target.
//!
//! Modes:
//! - `cargo test` runs `corpus_replay` (every corpus file through its target)
//!   and `fuzz_smoke` (a few thousand deterministic inputs per target);
//! - `cargo test --release --test fuzz_parsers -- --ignored --nocapture
//!   fuzz_long` fuzzes for `RSVERBS_FUZZ_SECS` seconds (default 600), split
//!   over the targets, seeded by `RSVERBS_FUZZ_SEED` (default: the clock);
//!   with `RSVERBS_FUZZ_SAVE=1` inputs showing a behaviour not yet in the
//!   corpus are added to `fuzz/corpus/`. Failing inputs go to
//!   `fuzz/crashes/` and fail the test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rsverbs::abi::{ibv_context, ibv_device, ibv_gid_entry};
use rsverbs::sysfs::parse::{SysfsGidType, c_str, finish_read, parse_gid, parse_type, scan_hx};
use rsverbs::uverbs::{ioctl, route::Key, write};
use std::collections::HashSet;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

// ---- a small deterministic PRNG (splitmix64) --------------------------------

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn byte(&mut self) -> u8 {
        self.next() as u8
    }
}

/// Bytes that matter to these parsers, favoured by the generator.
const TOKENS: &[&[u8]] = &[
    b"0", b"f", b"F", b"a", b"9", b"0x", b"0X", b"-", b"+", b" ", b"\t", b"\n", b"\x0b", b"\x0c", b"\r", b":",
    b"\0", b"ffff", b"fe80", b"0000", b"\xff", b"\x80", b"g", b"x", b"IB/RoCE v1", b"RoCE v2", b"lo", b"dummy0",
    b"fe80:0000:0000:0000:0200:00ff:fe00:0000", b"0000:0000:0000:0000:0000:ffff:c000:0201", b"ffffffffffffffffff",
];

/// A new input: a mutated corpus entry, or a fresh one from tokens.
fn generate(rng: &mut Rng, corpus: &[Vec<u8>], max: usize) -> Vec<u8> {
    let mut v = if !corpus.is_empty() && rng.below(4) != 0 {
        corpus[rng.below(corpus.len())].clone()
    } else {
        let mut v = Vec::new();
        for _ in 0..rng.below(8) {
            v.extend_from_slice(TOKENS[rng.below(TOKENS.len())]);
        }
        v
    };
    for _ in 0..1 + rng.below(4) {
        match rng.below(7) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = rng.byte();
            }
            2 => {
                let i = rng.below(v.len() + 1);
                v.insert(i, rng.byte());
            }
            3 if !v.is_empty() => {
                let i = rng.below(v.len());
                v.remove(i);
            }
            4 => {
                let i = rng.below(v.len() + 1);
                let t = TOKENS[rng.below(TOKENS.len())];
                v.splice(i..i, t.iter().copied());
            }
            5 if !corpus.is_empty() => {
                // splice a piece of another entry
                let o = &corpus[rng.below(corpus.len())];
                if !o.is_empty() {
                    let a = rng.below(o.len());
                    let b = a + rng.below(o.len() - a + 1);
                    let i = rng.below(v.len() + 1);
                    v.splice(i..i, o[a..b].iter().copied());
                }
            }
            _ => {
                if !v.is_empty() {
                    let n = rng.below(v.len());
                    v.truncate(n.max(1));
                }
            }
        }
    }
    v.truncate(max);
    v
}

// ---- the targets -------------------------------------------------------------
// Each returns Ok(signature of the behaviour seen) or Err(what went wrong).

type Outcome = Result<u64, String>;

fn sig(parts: &[u64]) -> u64 {
    parts.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &p| (h ^ p).wrapping_mul(0x0000_0100_0000_01b3))
}

fn glibc_hx(s: &[u8]) -> Option<u16> {
    let cs = CString::new(c_str(s)).unwrap();
    let mut v: u16 = 0;
    // SAFETY: cs is NUL-terminated; "%hx" stores one unsigned short into v.
    let r = unsafe { libc::sscanf(cs.as_ptr(), c"%hx".as_ptr(), &mut v as *mut u16) };
    (r == 1).then_some(v)
}

/// finish_read(buf, len) for a buffer of 1..=64 bytes and len <= buf.len()
/// (a read() never returns more): input = [buf size, len, bytes...].
fn t_finish_read(d: &[u8]) -> Outcome {
    let size = 1 + usize::from(*d.first().unwrap_or(&0)) % 64;
    let mut buf = vec![0xa5u8; size];
    let body = d.get(2..).unwrap_or(&[]);
    let n = body.len().min(size);
    buf[..n].copy_from_slice(&body[..n]);
    let len = usize::from(*d.get(1).unwrap_or(&0)) % (n + 1);
    let orig = buf.clone();
    let r = finish_read(&mut buf, len);
    let want = if len == 0 {
        0
    } else if orig[len - 1] == b'\n' {
        len as isize - 1
    } else if len < size {
        len as isize
    } else {
        -1
    };
    if r != want {
        return Err(format!("finish_read(size {size}, len {len}) = {r}, contract says {want}"));
    }
    // (len 0: nothing read, nothing terminated -- as in rdma-core)
    if r >= 0 && len > 0 && buf[r as usize] != 0 {
        return Err(format!("finish_read returned {r} without a NUL there"));
    }
    let touched: Vec<usize> = (0..size).filter(|&i| buf[i] != orig[i]).collect();
    if touched.len() > 1 || touched.iter().any(|&i| r < 0 || i != r as usize) {
        return Err(format!("finish_read changed bytes {touched:?}"));
    }
    Ok(sig(&[(r + 1).min(3) as u64, (len == size) as u64]))
}

fn t_scan_hx(d: &[u8]) -> Outcome {
    let s = c_str(d);
    let (ours, theirs) = (scan_hx(s), glibc_hx(s));
    if ours != theirs {
        return Err(format!("scan_hx({:?}) = {ours:?}, glibc sscanf(\"%hx\") = {theirs:?}", String::from_utf8_lossy(s)));
    }
    let lead = s.iter().take_while(|b| b.is_ascii_whitespace() || **b == 0x0b).count();
    let sign = s.get(lead).map_or(0, |&b| u64::from(b == b'-') * 2 + u64::from(b == b'+'));
    let digits = s.iter().skip(lead).filter(|b| b.is_ascii_hexdigit()).count().min(6) as u64;
    Ok(sig(&[ours.is_some() as u64, (lead > 0) as u64, sign, digits, s.windows(2).any(|w| w.eq_ignore_ascii_case(b"0x")) as u64]))
}

/// rdma-core query_sysfs_gid after ibv_read_sysfs_file: the text is in a
/// char[41], NUL-terminated; sscanf(attr + i*5, "%hx") for i in 0..8.
fn rdma_core_gid(attr: &[u8; 41], raw: &mut [u8; 16]) -> (usize, bool) {
    for i in 0..8 {
        let Some(v) = glibc_hx(&attr[i * 5..]) else { return (i * 2, false) };
        raw[i * 2] = (v >> 8) as u8;
        raw[i * 2 + 1] = v as u8;
    }
    (16, true)
}

fn t_parse_gid(d: &[u8]) -> Outcome {
    // What finish_read leaves in the 41-byte buffer (zero-filled here; the
    // bytes after the NUL are stale stack in rdma-core, see parse_gid).
    //
    // A file with an embedded NUL is where the two differ by design: sscanf
    // at attr + i*5 past that NUL reads the file's later bytes in rdma-core,
    // while parse_gid stops at the first NUL (its doc). The model therefore
    // sees the C string only: everything after the first NUL is zero.
    let mut attr = [0u8; 41];
    let n = c_str(d).len().min(40);
    attr[..n].copy_from_slice(&d[..n]);
    let (mut a, mut b) = ([0xaau8; 16], [0xaau8; 16]);
    let ours = parse_gid(&attr, &mut a);
    let theirs = rdma_core_gid(&attr, &mut b);
    if ours != theirs || a != b {
        return Err(format!(
            "parse_gid({:?}) = {ours:?} {a:02x?}, rdma-core's sscanf loop = {theirs:?} {b:02x?}",
            String::from_utf8_lossy(c_str(&attr))
        ));
    }
    Ok(sig(&[ours.0 as u64, ours.1 as u64]))
}

fn t_parse_type(d: &[u8]) -> Outcome {
    let mut buf = [0u8; 11];
    let n = d.len().min(10);
    buf[..n].copy_from_slice(&d[..n]);
    let s = c_str(&buf);
    let want = if s == b"IB/RoCE v1" {
        Some(SysfsGidType::IbRoceV1)
    } else if s == b"RoCE v2" {
        Some(SysfsGidType::RoceV2)
    } else {
        None
    };
    let got = parse_type(&buf);
    if got != want {
        return Err(format!("parse_type({:?}) = {got:?}, strcmp says {want:?}", String::from_utf8_lossy(s)));
    }
    Ok(sig(&[match got {
        None => 0,
        Some(SysfsGidType::IbRoceV1) => 1,
        Some(SysfsGidType::RoceV2) => 2,
    }]))
}

/// rdma-core 44's query_sysfs_gid_entry + the zero-GID check of
/// _ibv_query_gid_ex (cmd_device.c), step by step, over the fake tree's file
/// contents (`mask`: which files exist; the gid_attrs directory always
/// does), for an entry pre-filled with 0xa5 and a QUERY_PORT that fails with
/// EBADF (cmd_fd -1). Returns the errno and the 32 entry bytes.
fn rdma_core_fallback(mask: usize, gid: &[u8], typ: &[u8], ndev: &[u8], index: u32) -> (i32, [u8; 32]) {
    let mut e = [0xa5u8; 32];
    e[16..20].copy_from_slice(&index.to_le_bytes());
    e[20..24].copy_from_slice(&1u32.to_le_bytes());
    // ibv_read_sysfs_file: one read() of at most the buffer size, then the
    // termination rules; -1 when the file is missing.
    let read = |present: bool, content: &[u8], size: usize| -> (isize, Vec<u8>) {
        let mut buf = vec![0u8; size];
        if !present {
            return (-1, buf);
        }
        let n = content.len().min(size);
        buf[..n].copy_from_slice(&content[..n]);
        let r = finish_read(&mut buf, n);
        (r, buf)
    };
    // query_sysfs_gid into the entry's gid, stopping at the first failure
    // (the C string only: see t_parse_gid).
    let (r, mut attr) = read(mask & 1 != 0, gid, 41);
    if r < 0 {
        return (libc::EINVAL, e);
    }
    let len = c_str(&attr).len();
    attr[len..].iter_mut().for_each(|b| *b = 0);
    let mut raw: [u8; 16] = e[..16].try_into().unwrap();
    let attr: [u8; 41] = attr.try_into().unwrap();
    let ok = rdma_core_gid(&attr, &mut raw).1;
    e[..16].copy_from_slice(&raw);
    if !ok {
        return (libc::EINVAL, e);
    }
    // query_sysfs_gid_type: a failed or empty read with errno != EINVAL
    // finds the gid_attrs directory: EFAULT, so EINVAL.
    let (r, t) = read(mask & 2 != 0, typ, 11);
    let t = if r <= 0 { None } else { parse_type(&t) };
    match t {
        None => return (libc::EINVAL, e),
        Some(SysfsGidType::IbRoceV1) => return (libc::EBADF, e), // ibv_query_port on fd -1
        Some(SysfsGidType::RoceV2) => e[24..28].copy_from_slice(&2u32.to_le_bytes()),
    }
    // query_sysfs_gid_ndev_ifindex
    let (r, name) = read(mask & 4 != 0, ndev, libc::IF_NAMESIZE);
    let mut ret = 0;
    let ifindex = if r <= 0 {
        0
    } else {
        let cname = CString::new(c_str(&name)).unwrap();
        // SAFETY: cname is NUL-terminated.
        let i = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if i == 0 {
            ret = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        }
        i
    };
    e[28..32].copy_from_slice(&ifindex.to_le_bytes());
    if ret != 0 {
        return (ret, e);
    }
    (if e[..16] == [0; 16] { libc::ENODATA } else { 0 }, e)
}

/// input: [present-mask, entry_size, index, len gid, len type, len ndev, bytes...]
fn t_sysfs(d: &[u8]) -> Outcome {
    /// The fake sysfs tree of one thread, removed when the thread ends.
    struct Tree(PathBuf);
    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    thread_local! {
        static DIR: Tree = {
            let id = format!("{:?}", std::thread::current().id()).replace(|c: char| !c.is_ascii_alphanumeric(), "");
            let dir = std::env::temp_dir().join(format!("rsverbs-fuzz-{}-{id}", std::process::id()));
            for sub in ["ports/1/gids", "ports/1/gid_attrs/types", "ports/1/gid_attrs/ndevs"] {
                std::fs::create_dir_all(dir.join(sub)).unwrap();
            }
            Tree(dir)
        };
    }
    let h = |i: usize| usize::from(*d.get(i).unwrap_or(&0));
    let (mask, entry_size, index) = (h(0), h(1) % 65, (h(2) % 3) as u32);
    let mut rest = d.get(6..).unwrap_or(&[]);
    let mut take = |n: usize| {
        let n = n.min(rest.len());
        let (a, b) = rest.split_at(n);
        rest = b;
        a.to_vec()
    };
    let (gid, typ, ndev) = (take(h(3) % 48), take(h(4) % 16), take(h(5) % 24));
    DIR.with(|Tree(dir)| {
        let port = dir.join("ports/1");
        for (bit, sub, content) in [(1, "gids", &gid), (2, "gid_attrs/types", &typ), (4, "gid_attrs/ndevs", &ndev)] {
            let f = port.join(sub).join(index.to_string());
            if mask & bit != 0 {
                std::fs::write(&f, content).unwrap();
            } else {
                let _ = std::fs::remove_file(&f);
            }
        }
        // SAFETY: ibv_device is plain data; all-zero is a valid value.
        let mut dev: Box<ibv_device> = Box::new(unsafe { core::mem::zeroed() });
        for (i, b) in dir.to_str().unwrap().bytes().enumerate() {
            dev.ibdev_path[i] = b as core::ffi::c_char;
        }
        // SAFETY: as above; only `device` and `cmd_fd` are read.
        let mut ctx: Box<ibv_context> = Box::new(unsafe { core::mem::zeroed() });
        ctx.device = &mut *dev;
        ctx.cmd_fd = -1;
        let key = Key { ctx: (&*ctx as *const ibv_context) as usize, fd: -1 };
        let mut buf = [0xa5u8; 96];
        // SAFETY: ctx and dev are live; buf holds 96 >= entry_size bytes.
        let r = unsafe {
            rsverbs::sysfs::query_gid_entry(&mut *ctx, key, 1, index, buf.as_mut_ptr().cast::<ibv_gid_entry>(), entry_size, rsverbs::sysfs::Want::ALL)
        };
        if buf[entry_size..].iter().any(|&b| b != 0xa5) {
            return Err(format!("wrote past entry_size {entry_size}: {:02x?}", &buf[..48]));
        }
        let code = match r {
            Ok(()) => 0,
            Err(e) => e.code,
        };
        let (want, model) = rdma_core_fallback(mask, &gid, &typ, &ndev, index);
        let n = entry_size.min(32);
        if code != want || buf[..n] != model[..n] {
            return Err(format!(
                "rsverbs {code} {:02x?}, rdma-core model {want} {:02x?} (gid {:?} type {:?} ndev {:?} mask {mask} size {entry_size})",
                &buf[..n],
                &model[..n],
                String::from_utf8_lossy(&gid),
                String::from_utf8_lossy(&typ),
                String::from_utf8_lossy(&ndev)
            ));
        }
        let parsed = code == 0 || code == libc::ENODATA;
        Ok(sig(&[code as u64, mask as u64 & 7, parsed as u64, (entry_size.min(33) / 4) as u64]))
    })
}

fn le(b: &[u8], off: usize, n: usize) -> u64 {
    b[off..off + n].iter().rev().fold(0u64, |a, &x| (a << 8) | u64::from(x))
}

fn words(d: &[u8]) -> impl FnMut() -> u64 + '_ {
    let mut i = 0;
    move || {
        let v = (0..8).fold(0u64, |a, k| (a << 8) | u64::from(*d.get(i + k).unwrap_or(&0)));
        i += 8;
        v
    }
}

/// Checks a header + attrs buffer; attrs given as (id, len, data).
fn check_ioctl(b: &[u8], method: u16, driver: u32, attrs: &[(u16, u16, u64)]) -> Result<(), String> {
    let want_len = 24 + 16 * attrs.len();
    if b.len() != want_len || le(b, 0, 2) != want_len as u64 {
        return Err(format!("length {} / hdr.length {}, want {want_len}", b.len(), le(b, 0, 2)));
    }
    if le(b, 2, 2) != 0 || le(b, 4, 2) != u64::from(method) || le(b, 6, 2) != attrs.len() as u64 {
        return Err("object/method/num_attrs".into());
    }
    if le(b, 8, 8) != 0 || le(b, 16, 4) != u64::from(driver) || le(b, 20, 4) != 0 {
        return Err("reserved1/driver_id/reserved2".into());
    }
    for (i, &(id, len, data)) in attrs.iter().enumerate() {
        let a = 24 + 16 * i;
        let got = (le(b, a, 2), le(b, a + 2, 2), le(b, a + 4, 2), le(b, a + 6, 2), le(b, a + 8, 8));
        if got != (u64::from(id), u64::from(len), 1, 0, data) {
            return Err(format!("attr {i}: {got:?}, want ({id}, {len}, 1, 0, {data:#x})"));
        }
    }
    Ok(())
}

fn t_ioctl(d: &[u8]) -> Outcome {
    let mut w = words(d);
    let (driver, a, b, c, e) = (w() as u32, w(), w(), w(), w());
    let (port, idx, flags, size) = (a as u32, (a >> 32) as u32, b as u32, (b >> 32) as u16);
    let q = ioctl::query_gid_entry(driver, port, idx, flags, c, size);
    check_ioctl(q.as_bytes(), 6, driver, &[(0, 8, port.into()), (1, 8, idx.into()), (2, 4, flags.into()), (3, size, c)])
        .map_err(|m| format!("query_gid_entry: {m}"))?;
    let (cmd, len) = (e as u32, (e >> 32) as u16);
    let iw = ioctl::invoke_write(driver, cmd, c, len);
    check_ioctl(iw.as_bytes(), 0, driver, &[(2, 8, cmd.into()), (0, len, c)]).map_err(|m| format!("invoke_write: {m}"))?;
    let ir = ioctl::invoke_write_resp(driver, cmd, c, len, a, size);
    check_ioctl(ir.as_bytes(), 0, driver, &[(2, 8, cmd.into()), (0, len, c), (1, size, a)])
        .map_err(|m| format!("invoke_write_resp: {m}"))?;
    let ip = ioctl::invoke_write_probe(driver, b);
    check_ioctl(ip.as_bytes(), 0, driver, &[(2, 8, b)]).map_err(|m| format!("invoke_write_probe: {m}"))?;
    let p = ioctl::probe(driver);
    check_ioctl(p.as_bytes(), ioctl::METHOD_NONEXISTENT, driver, &[]).map_err(|m| format!("probe: {m}"))?;
    Ok(sig(&[(size >= 32) as u64, (driver == 14) as u64]))
}

fn t_write(d: &[u8]) -> Outcome {
    let mut w = words(d);
    let (a, b, c) = (w(), w(), w());
    let mut gid = [0u8; 16];
    gid[..8].copy_from_slice(&a.to_le_bytes());
    gid[8..].copy_from_slice(&b.to_le_bytes());
    let (command, handle, mlid) = (c as u32, (c >> 32) as u32, (b >> 48) as u16);
    let m = write::mcast(command, write::mcast_req(gid, handle, mlid));
    let x = m.as_bytes();
    if x.len() != 32
        || le(x, 0, 4) != u64::from(command)
        || le(x, 4, 2) != 8
        || le(x, 6, 2) != 0
        || x[8..24] != gid
        || le(x, 24, 4) != u64::from(handle)
        || le(x, 28, 2) != u64::from(mlid)
        || le(x, 30, 2) != 0
    {
        return Err(format!("mcast({command}, handle {handle:#x}, mlid {mlid:#x}) = {x:02x?}"));
    }
    let port = a as u8;
    let q = write::query_port(port, b);
    let y = q.as_bytes();
    if y.len() != 24 || le(y, 0, 4) != 2 || le(y, 4, 2) != 6 || le(y, 6, 2) != 10 || le(y, 8, 8) != b || y[16] != port || y[17..] != [0; 7] {
        return Err(format!("query_port({port}, {b:#x}) = {y:02x?}"));
    }
    let resp_len = (c as usize) % (4 * 65536);
    let n = write::new_cmd(command, [0u8; 24], resp_len);
    if n.hdr.in_words != 8 || usize::from(n.hdr.out_words) != resp_len / 4 {
        return Err(format!("new_cmd words {} {} for resp {resp_len}", n.hdr.in_words, n.hdr.out_words));
    }
    let mut r = write::QueryPortResp { bytes: [0; 40] };
    r.bytes[write::QueryPortResp::LINK_LAYER] = port;
    if r.link_layer() != port {
        return Err("link_layer".into());
    }
    Ok(sig(&[(command <= 31) as u64]))
}

// ---- the driver -------------------------------------------------------------

struct Target {
    name: &'static str,
    run: fn(&[u8]) -> Outcome,
    max: usize,
    /// share of the long run's time
    weight: u32,
}

const TARGETS: &[Target] = &[
    Target { name: "finish_read", run: t_finish_read, max: 80, weight: 1 },
    Target { name: "scan_hx", run: t_scan_hx, max: 48, weight: 3 },
    Target { name: "parse_gid", run: t_parse_gid, max: 48, weight: 3 },
    Target { name: "parse_type", run: t_parse_type, max: 16, weight: 1 },
    Target { name: "sysfs_fallback", run: t_sysfs, max: 96, weight: 4 },
    Target { name: "ioctl_encoders", run: t_ioctl, max: 48, weight: 1 },
    Target { name: "write_encoders", run: t_write, max: 32, weight: 1 },
];

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus")
}

fn load_corpus(name: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(corpus_dir().join(name))
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v.into_iter().filter_map(|p| std::fs::read(&p).ok().map(|d| (p, d))).collect()
}

/// One input through one target; a panic is a failure too.
fn exec(t: &Target, d: &[u8]) -> Outcome {
    match std::panic::catch_unwind(|| (t.run)(d)) {
        Ok(r) => r,
        Err(p) => Err(format!(
            "panic: {}",
            p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
        )),
    }
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn corpus_replay() {
    let mut failures = Vec::new();
    let mut total = 0;
    for t in TARGETS {
        let corpus = load_corpus(t.name);
        assert!(!corpus.is_empty(), "fuzz/corpus/{} is empty", t.name);
        for (path, d) in &corpus {
            total += 1;
            if let Err(e) = exec(t, d) {
                failures.push(format!("{}: {}: {e}", t.name, path.file_name().unwrap().to_string_lossy()));
            }
        }
    }
    eprintln!("corpus_replay: {total} inputs");
    assert!(failures.is_empty(), "{} corpus inputs fail:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn fuzz_smoke() {
    let mut rng = Rng(0x5eed_0000_0000_0006);
    let mut failures = Vec::new();
    for t in TARGETS {
        let corpus: Vec<Vec<u8>> = load_corpus(t.name).into_iter().map(|(_, d)| d).collect();
        let n = if t.name == "sysfs_fallback" { 300 } else { 5000 };
        for _ in 0..n {
            let d = generate(&mut rng, &corpus, t.max);
            if let Err(e) = exec(t, &d) {
                failures.push(format!("{}: input {}: {e}", t.name, hex(&d)));
            }
        }
    }
    failures.truncate(20);
    assert!(failures.is_empty(), "fuzz_smoke:\n{}", failures.join("\n"));
}

#[test]
#[ignore = "long run: RSVERBS_FUZZ_SECS (default 600)"]
fn fuzz_long() {
    let secs: u64 = std::env::var("RSVERBS_FUZZ_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(600);
    let seed: u64 = std::env::var("RSVERBS_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    let save = std::env::var_os("RSVERBS_FUZZ_SAVE").is_some();
    let crashes = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/crashes");
    let total_weight: u32 = TARGETS.iter().map(|t| t.weight).sum();
    let mut rng = Rng(seed);
    let mut failures = 0usize;
    let mut report = Vec::new();
    let start = Instant::now();
    for t in TARGETS {
        let budget = Duration::from_secs(secs) * t.weight / total_weight;
        let loaded = load_corpus(t.name);
        let mut seen: HashSet<u64> = loaded.iter().filter_map(|(_, d)| exec(t, d).ok()).collect();
        let mut corpus: Vec<Vec<u8>> = loaded.into_iter().map(|(_, d)| d).collect();
        let (t0, mut execs, mut added, mut fails) = (Instant::now(), 0u64, 0, 0);
        while t0.elapsed() < budget {
            for _ in 0..256 {
                let d = generate(&mut rng, &corpus, t.max);
                execs += 1;
                match exec(t, &d) {
                    Ok(s) => {
                        if seen.insert(s) {
                            corpus.push(d.clone());
                            if save && added < 64 {
                                let dir = corpus_dir().join(t.name);
                                std::fs::create_dir_all(&dir).unwrap();
                                std::fs::write(dir.join(format!("gen-{s:016x}")), &d).unwrap();
                                added += 1;
                            }
                        }
                    }
                    Err(e) => {
                        fails += 1;
                        if fails <= 5 {
                            eprintln!("fuzz_long: {}: input {}: {e}", t.name, hex(&d));
                            std::fs::create_dir_all(&crashes).unwrap();
                            std::fs::write(crashes.join(format!("{}-{:016x}", t.name, sig(&[execs, seed]))), &d).unwrap();
                        }
                    }
                }
            }
        }
        failures += fails;
        report.push(format!(
            "  {:<15} {:>10} executions in {:>6.1} s, {} behaviours, {} new corpus files, {} failing",
            t.name,
            execs,
            t0.elapsed().as_secs_f64(),
            seen.len(),
            added,
            fails
        ));
    }
    let execs: u64 = report.iter().filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok()).sum();
    eprintln!(
        "fuzz_long: seed {seed}, {:.0} s, {execs} executions:\n{}",
        start.elapsed().as_secs_f64(),
        report.join("\n")
    );
    assert_eq!(failures, 0, "fuzz_long: {failures} failing inputs (see fuzz/crashes/)");
}
