//! The source tree's commit, for selftest's report (src/tool/selftest.rs
//! COMMIT): `git rev-parse --short=12 HEAD`, "-dirty" when tracked files
//! differ from it, nothing outside a git checkout (or without git). Every
//! cargo run (make's, the unit tests') computes the same value, and runs
//! this again when HEAD, the branch it names, the index or a file under
//! src/ changes.
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).current_dir(env!("CARGO_MANIFEST_DIR")).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // "-dirty" follows the sources too, not only HEAD and the index.
    for dir in ["../../src", "../../Cargo.toml"] {
        println!("cargo:rerun-if-changed={dir}");
    }
    let Some(commit) = git(&["rev-parse", "--short=12", "HEAD"]) else { return };
    for what in ["HEAD", "index"] {
        if let Some(p) = git(&["rev-parse", "--path-format=absolute", "--git-path", what]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(p) = git(&["rev-parse", "--path-format=absolute", "--git-path", &r])
    {
        println!("cargo:rerun-if-changed={p}");
    }
    let clean = Command::new("git").args(["diff", "--quiet", "HEAD", "--"]).current_dir(env!("CARGO_MANIFEST_DIR")).status().is_ok_and(|s| s.success());
    println!("cargo:rustc-env=RSVERBS_COMMIT={commit}{}", if clean { "" } else { "-dirty" });
}
