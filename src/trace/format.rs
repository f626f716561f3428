//! The words of a trace line: errno names, and [`Line`], a fixed buffer
//! that one `write()` sends. MGIDs are in [`crate::mgid`]; QP and GID
//! type names and C string fields in [`crate::abi`].
#![forbid(unsafe_code)]

use core::fmt::{self, Write};

/// A line's capacity: the longest line, a `still-attached` hint listing 8
/// IPv6 groups, is about 750 bytes; one line is on the stack at a time,
/// within the 4 KiB budget (docs/security.md).
pub const CAPACITY: usize = 1024;

/// One line, built on the stack (no allocation) and cut at [`CAPACITY`]
/// ([`crate::os::Text`]): a line is written with one `write()`, atomic
/// below PIPE_BUF (4096).
pub struct Line(crate::os::Text<CAPACITY>);

impl Line {
    /// An empty line, built where it is declared; [`Line::start`] writes
    /// its prefix in place. (A constructor that wrote the prefix and
    /// returned the line made rustc copy it out: two 1,536-byte buffers
    /// per frame; docs/security.md, the stack budget.)
    pub const fn new() -> Self {
        Line(crate::os::Text::new())
    }
    /// Starts the line: `rsverbs[PID]: `.
    pub fn start(&mut self, pid: u32) {
        let _ = write!(self, "rsverbs[{pid}]: ");
    }
    /// The bytes so far, with the final newline; control bytes in them
    /// (from a device or netdev name: rsverbs' own words have none) are
    /// `?` ([`crate::os::Text::mask_controls`]).
    pub fn finish(&mut self) -> &[u8] {
        self.0.mask_controls();
        self.0.line()
    }
    /// The bytes so far, without a newline.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl Default for Line {
    fn default() -> Self {
        Self::new()
    }
}

impl Write for Line {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.write_str(s)
    }
}

/// `v` written apart into a small buffer, out of line: the nested
/// formatting of an address (an MGID's IPv6 and IPv4 forms, their
/// integers) runs in this frame, before a line's buffer is on the stack,
/// not below it (docs/security.md, the stack budget).
#[inline(never)]
pub fn short<const N: usize>(v: &dyn fmt::Display) -> crate::os::Text<N> {
    let mut t = crate::os::Text::new();
    let _ = write!(t, "{v}");
    t
}

/// errno names, as glibc's `strerrorname_np` spells them (asm-generic/errno*.h),
/// by number ("" where the number has none). A compile-time constant only:
/// the file holds [`NAME_BYTES`] and [`NAME_ENDS`], which carry no pointer.
/// A `static` array of `&str` costs a pointer and a dynamic relocation per
/// entry in a shared library (16 bytes of `.data.rel.ro` and a 24-byte
/// `R_*_RELATIVE`, 5,360 bytes for 134 names on every 64-bit target).
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

/// The names' bytes, one after another.
static NAME_BYTES: [u8; names_len(&ERRNO_NAMES)] = concat(&ERRNO_NAMES);
/// Where each name ends in [`NAME_BYTES`]; name `i` starts where name
/// `i - 1` ends (name 0 at 0).
static NAME_ENDS: [u16; ERRNO_NAMES.len()] = ends(&ERRNO_NAMES);
const _: () = assert!(names_len(&ERRNO_NAMES) <= u16::MAX as usize);

const fn names_len(names: &[&str]) -> usize {
    let (mut i, mut n) = (0, 0);
    while i < names.len() {
        n += names[i].len();
        i += 1;
    }
    n
}

const fn concat<const L: usize>(names: &[&str]) -> [u8; L] {
    let mut out = [0; L];
    let (mut i, mut at) = (0, 0);
    while i < names.len() {
        let b = names[i].as_bytes();
        let mut j = 0;
        while j < b.len() {
            out[at] = b[j];
            at += 1;
            j += 1;
        }
        i += 1;
    }
    out
}

const fn ends<const N: usize>(names: &[&str; N]) -> [u16; N] {
    let mut out = [0; N];
    let (mut i, mut at) = (0, 0);
    while i < N {
        at += names[i].len();
        out[i] = at as u16;
        i += 1;
    }
    out
}

/// Errno `e`'s name, None when it has none.
fn errno_name(e: usize) -> Option<&'static str> {
    let end = usize::from(*NAME_ENDS.get(e)?);
    let start = match e {
        0 => 0,
        _ => usize::from(NAME_ENDS[e - 1]),
    };
    core::str::from_utf8(NAME_BYTES.get(start..end)?).ok().filter(|n| !n.is_empty())
}

/// `0`, or an errno's name and number: `EINVAL(22)`.
pub struct Res(pub i32);

impl fmt::Display for Res {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => f.write_str("0"),
            e => match usize::try_from(e).ok().and_then(errno_name) {
                Some(name) => write!(f, "{name}({e})"),
                None => write!(f, "E?({e})"),
            },
        }
    }
}

/// `_ibv_query_gid_table`'s return value: a count, or a negative errno as
/// its name and value, `-EINVAL(-22)`.
pub struct Count(pub isize);

impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            n if n >= 0 => write!(f, "{n}"),
            n => match errno_name(n.unsigned_abs()) {
                Some(name) => write!(f, "-{name}({n})"),
                None => write!(f, "-E?({n})"),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_names() {
        assert_eq!(Res(0).to_string(), "0");
        assert_eq!(Res(22).to_string(), "EINVAL(22)");
        assert_eq!(Res(61).to_string(), "ENODATA(61)");
        assert_eq!(Res(95).to_string(), "EOPNOTSUPP(95)");
        assert_eq!(Res(12).to_string(), "ENOMEM(12)");
        assert_eq!(Res(9999).to_string(), "E?(9999)");
        assert_eq!(Count(4).to_string(), "4");
        assert_eq!(Count(0).to_string(), "0");
        assert_eq!(Count(-22).to_string(), "-EINVAL(-22)");
        assert_eq!(Count(-95).to_string(), "-EOPNOTSUPP(-95)");
        assert_eq!(Count(-9999).to_string(), "-E?(-9999)");
        assert_eq!(Count(isize::MIN).to_string(), format!("-E?({})", isize::MIN));
    }

    #[test]
    fn every_errno_name_is_read_back_from_the_packed_table() {
        for (i, name) in ERRNO_NAMES.iter().enumerate() {
            assert_eq!(errno_name(i), Some(*name).filter(|n| !n.is_empty()), "errno {i}");
        }
        assert_eq!(errno_name(ERRNO_NAMES.len()), None);
        assert_eq!(errno_name(usize::MAX), None);
    }

    #[test]
    fn a_line_is_cut_at_its_capacity_and_ends_with_a_newline() {
        let mut l = Line::new();
        l.start(7);
        assert_eq!(l.as_bytes(), b"rsverbs[7]: ");
        for _ in 0..400 {
            let _ = l.write_str("abcdefgh");
        }
        let b = l.finish();
        assert_eq!(b.len(), CAPACITY);
        assert_eq!(b[CAPACITY - 1], b'\n');
    }

    #[test]
    fn a_name_with_control_bytes_cannot_reach_the_terminal() {
        // A netdev renamed by a CAP_NET_ADMIN holder to carry an ANSI
        // escape and a newline: the line keeps its other bytes (UTF-8
        // included) and ends with its one newline.
        let mut l = Line::new();
        l.start(7);
        let name = "e\x1b[2Jth\n0\u{7f}\u{e9}";
        let _ = write!(l, "ipjoin join netdev={name} result=0");
        let b = l.finish();
        assert_eq!(b, "rsverbs[7]: ipjoin join netdev=e?[2Jth?0?\u{e9} result=0\n".as_bytes());
        assert!(!b[..b.len() - 1].iter().any(|&c| c < 0x20 || c == 0x7f));
    }
}
