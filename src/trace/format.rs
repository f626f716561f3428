//! The words of a trace line: errno names, MGIDs and their scope, QP and
//! GID types, and [`Line`], a fixed buffer that one `write()` sends.

use core::fmt::{self, Write};
use core::net::{Ipv4Addr, Ipv6Addr};

/// One line, built on the stack (no allocation) and cut at its capacity:
/// a line is written with one `write()`, atomic below PIPE_BUF (4096).
pub struct Line {
    buf: [u8; 1536],
    len: usize,
}

impl Line {
    /// A line that starts `rsverbs[PID]: `.
    pub fn new(pid: u32) -> Self {
        let mut l = Line { buf: [0; 1536], len: 0 };
        let _ = write!(l, "rsverbs[{pid}]: ");
        l
    }
    /// The bytes so far, with the final newline.
    pub fn finish(&mut self) -> &[u8] {
        if self.len == self.buf.len() {
            self.len -= 1;
        }
        self.buf[self.len] = b'\n';
        &self.buf[..=self.len]
    }
    /// The bytes so far, without a newline.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Write for Line {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// errno names, as glibc's `strerrorname_np` spells them (asm-generic/errno*.h).
const ERRNO_NAMES: [&str; 134] = [
    "", "EPERM", "ENOENT", "ESRCH", "EINTR", "EIO", "ENXIO", "E2BIG", "ENOEXEC", "EBADF", "ECHILD",
    "EAGAIN", "ENOMEM", "EACCES", "EFAULT", "ENOTBLK", "EBUSY", "EEXIST", "EXDEV", "ENODEV",
    "ENOTDIR", "EISDIR", "EINVAL", "ENFILE", "EMFILE", "ENOTTY", "ETXTBSY", "EFBIG", "ENOSPC",
    "ESPIPE", "EROFS", "EMLINK", "EPIPE", "EDOM", "ERANGE", "EDEADLK", "ENAMETOOLONG", "ENOLCK",
    "ENOSYS", "ENOTEMPTY", "ELOOP", "", "ENOMSG", "EIDRM", "ECHRNG", "EL2NSYNC", "EL3HLT",
    "EL3RST", "ELNRNG", "EUNATCH", "ENOCSI", "EL2HLT", "EBADE", "EBADR", "EXFULL", "ENOANO",
    "EBADRQC", "EBADSLT", "", "EBFONT", "ENOSTR", "ENODATA", "ETIME", "ENOSR", "ENONET", "ENOPKG",
    "EREMOTE", "ENOLINK", "EADV", "ESRMNT", "ECOMM", "EPROTO", "EMULTIHOP", "EDOTDOT", "EBADMSG",
    "EOVERFLOW", "ENOTUNIQ", "EBADFD", "EREMCHG", "ELIBACC", "ELIBBAD", "ELIBSCN", "ELIBMAX",
    "ELIBEXEC", "EILSEQ", "ERESTART", "ESTRPIPE", "EUSERS", "ENOTSOCK", "EDESTADDRREQ", "EMSGSIZE",
    "EPROTOTYPE", "ENOPROTOOPT", "EPROTONOSUPPORT", "ESOCKTNOSUPPORT", "EOPNOTSUPP",
    "EPFNOSUPPORT", "EAFNOSUPPORT", "EADDRINUSE", "EADDRNOTAVAIL", "ENETDOWN", "ENETUNREACH",
    "ENETRESET", "ECONNABORTED", "ECONNRESET", "ENOBUFS", "EISCONN", "ENOTCONN", "ESHUTDOWN",
    "ETOOMANYREFS", "ETIMEDOUT", "ECONNREFUSED", "EHOSTDOWN", "EHOSTUNREACH", "EALREADY",
    "EINPROGRESS", "ESTALE", "EUCLEAN", "ENOTNAM", "ENAVAIL", "EISNAM", "EREMOTEIO", "EDQUOT",
    "ENOMEDIUM", "EMEDIUMTYPE", "ECANCELED", "ENOKEY", "EKEYEXPIRED", "EKEYREVOKED",
    "EKEYREJECTED", "EOWNERDEAD", "ENOTRECOVERABLE", "ERFKILL", "EHWPOISON",
];

/// `0`, or an errno's name and number: `EINVAL(22)`.
pub struct Res(pub i32);

impl fmt::Display for Res {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => f.write_str("0"),
            e => match usize::try_from(e).ok().and_then(|i| ERRNO_NAMES.get(i)).filter(|n| !n.is_empty()) {
                Some(name) => write!(f, "{name}({e})"),
                None => write!(f, "E?({e})"),
            },
        }
    }
}

/// The IPv4 address of a v4-mapped GID (`::ffff:a.b.c.d`).
pub fn v4_mapped(gid: &[u8; 16]) -> Option<Ipv4Addr> {
    (gid[..10] == [0; 10] && gid[10..12] == [0xff, 0xff]).then(|| Ipv4Addr::new(gid[12], gid[13], gid[14], gid[15]))
}

/// kernel include/rdma/ib_addr.h `rdma_is_multicast_addr`: `ff00::/8`, or
/// v4-mapped `224.0.0.0/4`.
pub fn is_multicast(gid: &[u8; 16]) -> bool {
    match v4_mapped(gid) {
        Some(v4) => v4.is_multicast(),
        None => gid[0] == 0xff,
    }
}

/// The MGID's scope: RFC 4291 §2.7 for `ff00::/8` (the low nibble of byte
/// 1); RFC 5771/2365 for IPv4 (224.0.0.0/24 link-local, 239/8
/// administratively scoped); `unicast` for anything else.
pub fn scope(gid: &[u8; 16]) -> &'static str {
    if let Some(v4) = v4_mapped(gid) {
        let o = v4.octets();
        return match o[0] {
            224 if o[1] == 0 && o[2] == 0 => "link-local",
            239 => "admin-local",
            224..=239 => "global",
            _ => "unicast",
        };
    }
    if gid[0] != 0xff {
        return "unicast";
    }
    match gid[1] & 0xf {
        1 => "interface-local",
        2 => "link-local",
        3 => "realm-local",
        4 => "admin-local",
        5 => "site-local",
        8 => "organization-local",
        0xe => "global",
        _ => "reserved",
    }
}

/// `mgid=<IPv6> [ipv4=<a.b.c.d>] scope=<scope>`.
pub struct Mgid<'a>(pub &'a [u8; 16]);

impl fmt::Display for Mgid<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "mgid={}", Ipv6Addr::from(*self.0))?;
        if let Some(v4) = v4_mapped(self.0) {
            write!(f, " ipv4={v4}")?;
        }
        write!(f, " scope={}", scope(self.0))
    }
}

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

    fn gid(s: &str) -> [u8; 16] {
        s.parse::<Ipv6Addr>().expect("test address").octets()
    }

    #[test]
    fn errno_names() {
        assert_eq!(Res(0).to_string(), "0");
        assert_eq!(Res(22).to_string(), "EINVAL(22)");
        assert_eq!(Res(61).to_string(), "ENODATA(61)");
        assert_eq!(Res(95).to_string(), "EOPNOTSUPP(95)");
        assert_eq!(Res(12).to_string(), "ENOMEM(12)");
        assert_eq!(Res(9999).to_string(), "E?(9999)");
    }

    #[test]
    fn mgids_and_scopes() {
        assert_eq!(Mgid(&gid("::ffff:239.1.1.1")).to_string(), "mgid=::ffff:239.1.1.1 ipv4=239.1.1.1 scope=admin-local");
        assert_eq!(Mgid(&gid("ff0e::1")).to_string(), "mgid=ff0e::1 scope=global");
        assert_eq!(scope(&gid("ff02::1")), "link-local");
        assert_eq!(scope(&gid("::ffff:224.0.0.251")), "link-local");
        assert_eq!(scope(&gid("::ffff:225.1.2.3")), "global");
        assert_eq!(scope(&gid("::ffff:192.168.3.146")), "unicast");
        assert!(is_multicast(&gid("ff05::2")) && is_multicast(&gid("::ffff:224.0.0.1")));
        assert!(!is_multicast(&gid("::ffff:192.168.3.146")) && !is_multicast(&gid("fe80::1")) && !is_multicast(&gid("::")));
    }

    #[test]
    fn a_line_is_cut_at_its_capacity_and_ends_with_a_newline() {
        let mut l = Line::new(7);
        assert_eq!(l.as_bytes(), b"rsverbs[7]: ");
        for _ in 0..400 {
            let _ = l.write_str("abcdefgh");
        }
        let b = l.finish();
        assert_eq!(b.len(), 1536);
        assert_eq!(b[1535], b'\n');
    }
}
