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
