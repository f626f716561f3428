//! What rsverbs knows of the rdma-core it runs beside: which release is
//! loaded ([`release`]) and whether a context's provider has a multicast op
//! ([`provider`]). Every difference by release is listed in
//! docs/rdma-core-releases.md, with its source.

pub mod provider;
pub mod release;
