//! Pure parsers for the sysfs GID files, faithful to rdma-core's C parsing.
//! Fuzzed by `fuzz/` and unit-tested here.
#![forbid(unsafe_code)]

/// `ibv_read_sysfs_file_at` (rdma-core sysfs.c) after `read()` returned `len`
/// bytes into a buffer of `buf.len()`: strip one trailing '\n', or
/// NUL-terminate; a full buffer without '\n' is an error (-1). Returns the
/// string length, or -1.
pub fn finish_read(buf: &mut [u8], len: usize) -> isize {
    if len == 0 {
        return 0;
    }
    if buf[len - 1] == b'\n' {
        buf[len - 1] = 0;
        (len - 1) as isize
    } else if len < buf.len() {
        buf[len] = 0;
        len as isize
    } else {
        -1
    }
}

/// The bytes of a NUL-terminated buffer, up to the NUL.
pub fn c_str(buf: &[u8]) -> &[u8] {
    buf.iter().position(|&b| b == 0).map_or(buf, |n| &buf[..n])
}

/// glibc `sscanf(s, "%hx", &val)`: skip white space, optional sign, optional
/// "0x"/"0X", then at least one hex digit; the value wraps to u16, and a '-'
/// negates it. `None` when no digit was read (`sscanf` returned 0 or EOF).
pub fn scan_hx(s: &[u8]) -> Option<u16> {
    // C isspace(): Rust's is_ascii_whitespace() lacks the vertical tab.
    let mut i = s.iter().take_while(|&&b| b.is_ascii_whitespace() || b == 0x0b).count();
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    // "0x" is a prefix only when a hex digit follows; "0x" alone scans as 0.
    if s.get(i) == Some(&b'0') && matches!(s.get(i + 1), Some(b'x' | b'X')) && s.get(i + 2).is_some_and(u8::is_ascii_hexdigit) {
        i += 2;
    }
    let digits = s[i.min(s.len())..].iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return None;
    }
    let v = s[i..i + digits].iter().try_fold(0u64, |acc, &b| {
        let d = u64::from((b as char).to_digit(16).unwrap_or(0));
        acc.checked_mul(16)?.checked_add(d)
    });
    // strtoul: ULONG_MAX on overflow whatever the sign; scanf then stores
    // (unsigned short).
    let Some(v) = v else { return Some(u16::MAX) };
    let v = v as u16;
    Some(if neg { v.wrapping_neg() } else { v })
}

/// rdma-core `query_sysfs_gid`: `for i in 0..8: sscanf(attr + i*5, "%hx")`,
/// storing each group big-endian into `raw` as it goes. `text` is the
/// NUL-terminated content (buffer of 41). Returns how many bytes of `raw` were
/// written and whether the whole GID parsed (rdma-core leaves the partial
/// bytes in the caller's entry).
pub fn parse_gid(text: &[u8], raw: &mut [u8; 16]) -> (usize, bool) {
    let s = c_str(text);
    for i in 0..8 {
        // Past the terminator rdma-core would read stale bytes; rsverbs
        // treats that as a parse failure.
        let Some(group) = s.get(i * 5..) else { return (i * 2, false) };
        let Some(val) = scan_hx(group) else { return (i * 2, false) };
        raw[i * 2] = (val >> 8) as u8;
        raw[i * 2 + 1] = (val & 0xff) as u8;
    }
    (16, true)
}

/// The GID type strings of `gid_attrs/types/N` (rdma-core cmd_device.c
/// `V1_TYPE`/`V2_TYPE`, kernel sysfs.c).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SysfsGidType {
    IbRoceV1,
    RoceV2,
}

/// `strcmp` against the two known strings.
pub fn parse_type(text: &[u8]) -> Option<SysfsGidType> {
    match c_str(text) {
        b"IB/RoCE v1" => Some(SysfsGidType::IbRoceV1),
        b"RoCE v2" => Some(SysfsGidType::RoceV2),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gid_as_the_kernel_prints_it() {
        // kernel sysfs.c show_port_gid: "%pI6" + "\n", 40 bytes into char[41].
        let mut buf = [0u8; 41];
        let text = b"fe80:0000:0000:0000:0200:00ff:fe00:0000\n";
        buf[..40].copy_from_slice(text);
        assert_eq!(finish_read(&mut buf, 40), 39);
        let mut raw = [0u8; 16];
        assert_eq!(parse_gid(&buf, &mut raw), (16, true));
        assert_eq!(raw, [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0, 0, 0xff, 0xfe, 0, 0, 0]);
    }

    #[test]
    fn short_or_bad_gid_text_fails_after_partial_write() {
        let mut raw = [0xaau8; 16];
        assert_eq!(parse_gid(b"fe80:0000:zz\0", &mut raw), (4, false));
        assert_eq!(&raw[..4], &[0xfe, 0x80, 0, 0]);
        assert_eq!(raw[4], 0xaa, "bytes after the failure are untouched");
        assert_eq!(parse_gid(b"\0", &mut [0; 16]), (0, false));
    }

    #[test]
    fn scan_hx_follows_glibc() {
        assert_eq!(scan_hx(b"ffff:"), Some(0xffff));
        assert_eq!(scan_hx(b" 0x1f"), Some(0x1f));
        assert_eq!(scan_hx(b"0x"), Some(0));
        assert_eq!(scan_hx(b"-1"), Some(0xffff));
        assert_eq!(scan_hx(b"12345"), Some(0x2345));
        assert_eq!(scan_hx(b":"), None);
        assert_eq!(scan_hx(b" \x0b1"), Some(1), "vertical tab is C white space");
        assert_eq!(scan_hx(b"-10000000000000000000"), Some(0xffff), "overflow saturates before the sign");
        assert_eq!(scan_hx(b""), None);
    }

    #[test]
    fn read_termination_rules() {
        let mut b = *b"RoCE v2\n\0\0\0";
        assert_eq!(finish_read(&mut b[..11], 8), 7);
        assert_eq!(parse_type(&b), Some(SysfsGidType::RoceV2));
        let mut full = *b"IB/RoCE v1X";
        assert_eq!(finish_read(&mut full, 11), -1, "full buffer without newline");
        let mut v1 = *b"IB/RoCE v1\n";
        assert_eq!(finish_read(&mut v1, 11), 10);
        assert_eq!(parse_type(&v1), Some(SysfsGidType::IbRoceV1));
        assert_eq!(parse_type(b"RoCE v3\0"), None);
    }
}
