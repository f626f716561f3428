//! Nothing to build: the script exists for `links = "rsverbs"` (Cargo.toml),
//! which Cargo accepts only with a build script. The key makes Cargo refuse
//! two versions of the crate in one graph, which would both define the
//! unmangled `rsverbs_*` C names.
fn main() {
    println!("cargo::rerun-if-changed=build.rs");
}
