// Links the cdylib as librsverbs.so.1 with rdma-core's version nodes.
// The nodes are only *declared* in the script; the symbols are bound to them
// by `.symver` in src/capi.rs (see ../shared/reference/uverbs-semantics.md §6).
fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/src/rsverbs.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,librsverbs.so.1");
    println!("cargo:rerun-if-changed=src/rsverbs.map");
    println!("cargo:rerun-if-changed=build.rs");
}
