//! Test helper: the byte captures in docs/kernel-abi.md were taken on
//! x86_64, little-endian. The kernel reads every integer of a uverbs command
//! in host byte order (uapi `rdma_user_ioctl_cmds.h`, `ib_user_verbs.h`), so
//! a big-endian host must produce each field reversed. [`host`] turns a
//! capture into what this host must produce, field by field.
#![forbid(unsafe_code)]

/// `le` cut into fields of `widths` bytes (which must cover it exactly),
/// each field put in host order.
pub fn host(le: &[u8], widths: &[usize]) -> Vec<u8> {
    assert_eq!(widths.iter().sum::<usize>(), le.len(), "field widths do not cover the capture");
    let mut out = Vec::with_capacity(le.len());
    let mut at = 0;
    for &w in widths {
        let field = &le[at..at + w];
        if cfg!(target_endian = "big") {
            out.extend(field.iter().rev());
        } else {
            out.extend_from_slice(field);
        }
        at += w;
    }
    out
}

/// The bytes of a hex capture, zero-filled to `len` (a capture's trailing
/// zeros are left out of the source).
pub fn hex_bytes(hex: &str, len: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..hex.len() / 2).map(|i| u8::from_str_radix(&hex[i * 2..i * 2 + 2], 16).expect("hex")).collect();
    assert!(v.len() <= len, "capture longer than {len}");
    v.resize(len, 0);
    v
}

#[cfg(test)]
mod tests {
    use super::host;

    #[test]
    fn host_order_of_a_capture() {
        let le = [1, 0, 0, 0, 2, 0, 9];
        let want: Vec<u8> = [1u32.to_ne_bytes().as_slice(), &2u16.to_ne_bytes(), &[9]].concat();
        assert_eq!(host(&le, &[4, 2, 1]), want);
    }
}
