//! The environment switches rdma-core reads, read the same way.

use std::sync::OnceLock;

/// rdma-core init.c `ibverbs_init`: `verbs_allow_disassociate_destroy` is set
/// when `RDMAV_ALLOW_DISASSOC_DESTROY` or the legacy
/// `MLX4_DEVICE_FATAL_CLEANUP` is set and is not "0" (util.c `check_env`,
/// plain getenv). rdma-core reads it once at init; rsverbs once, at the
/// first detach that meets EIO.
pub fn allow_disassoc_destroy() -> bool {
    static FLAG: OnceLock<bool> = OnceLock::new();
    *FLAG.get_or_init(|| is_set("RDMAV_ALLOW_DISASSOC_DESTROY") || is_set("MLX4_DEVICE_FATAL_CLEANUP"))
}

fn is_set(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| v != "0")
}
