//! The environment switches rdma-core reads, read the way the loaded
//! release reads them (docs/rdma-core-releases.md).

use crate::rdma_core::release::{self, Release};
use std::ffi::OsStr;
use std::sync::OnceLock;

/// rdma-core init.c `ibverbs_init`: `verbs_allow_disassociate_destroy`, from
/// `RDMAV_ALLOW_DISASSOC_DESTROY` and the legacy `MLX4_DEVICE_FATAL_CLEANUP`
/// (plain getenv). rdma-core reads it once at init; rsverbs once, at the
/// first detach that meets EIO.
pub fn allow_disassoc_destroy() -> bool {
    static FLAG: OnceLock<bool> = OnceLock::new();
    *FLAG.get_or_init(|| {
        let rdmav = std::env::var_os("RDMAV_ALLOW_DISASSOC_DESTROY");
        let mlx4 = std::env::var_os("MLX4_DEVICE_FATAL_CLEANUP");
        disassoc_flag(release::installed(), rdmav.as_deref(), mlx4.as_deref())
    })
}

/// rdma-core 40.0 (commit 5a0210036, "consistently parse environment
/// variables") made both variables "set and not 0" (util.c `check_env`).
const CHECK_ENV: Release = Release::new(40, 0);

/// The flag as `release` computes it; an unknown release reads like the
/// newest.
pub fn disassoc_flag(release: Option<Release>, rdmav: Option<&OsStr>, mlx4: Option<&OsStr>) -> bool {
    let set_not_zero = |v: Option<&OsStr>| v.is_some_and(|v| v != "0");
    match release {
        // v33.2 init.c:613-618: MLX4_... is "not 0"; RDMAV_... is any value,
        // "0" included, and wins.
        Some(r) if r < CHECK_ENV => rdmav.is_some() || set_not_zero(mlx4),
        _ => set_not_zero(rdmav) || set_not_zero(mlx4),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn before_40_any_rdmav_value_turns_it_on() {
        let v33 = Some(Release::new(33, 2));
        let v39 = Some(Release::new(39, 13));
        for r in [v33, v39] {
            assert!(disassoc_flag(r, Some("0".as_ref()), None));
            assert!(disassoc_flag(r, Some("".as_ref()), None));
            assert!(disassoc_flag(r, Some("0".as_ref()), Some("0".as_ref())));
            assert!(!disassoc_flag(r, None, Some("0".as_ref())));
            assert!(disassoc_flag(r, None, Some("1".as_ref())));
            assert!(!disassoc_flag(r, None, None));
        }
    }

    #[test]
    fn from_40_both_are_set_and_not_zero() {
        for r in [Some(Release::new(40, 0)), Some(Release::new(44, 0)), Some(Release::new(65, 0)), None] {
            assert!(!disassoc_flag(r, Some("0".as_ref()), None), "{r:?}");
            assert!(disassoc_flag(r, Some("".as_ref()), None), "{r:?}");
            assert!(disassoc_flag(r, Some("yes".as_ref()), Some("0".as_ref())), "{r:?}");
            assert!(!disassoc_flag(r, Some("0".as_ref()), Some("0".as_ref())), "{r:?}");
            assert!(disassoc_flag(r, None, Some("1".as_ref())), "{r:?}");
            assert!(!disassoc_flag(r, None, None), "{r:?}");
        }
    }
}
