//! The source tree's commit, for selftest's report (src/tool/selftest.rs
//! COMMIT): `git rev-parse --short=12 HEAD`, "-dirty" when the command's
//! sources ([`SOURCES`]: src/ and Cargo.toml) differ from it, nothing
//! outside a git checkout (or without git). Every cargo run (make's, the
//! unit tests') computes the same value, and runs this again when HEAD,
//! the branch it names, the index or one of those sources changes; the
//! Makefile's $(BUILD)/commit says "-dirty" for the same files.
use std::process::Command;

/// The command's sources, relative to src/tool: what "-dirty" is about.
const SOURCES: [&str; 2] = ["../../src", "../../Cargo.toml"];

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).current_dir(env!("CARGO_MANIFEST_DIR")).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    for path in SOURCES {
        println!("cargo:rerun-if-changed={path}");
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
    let clean = Command::new("git").args(["diff", "--quiet", "HEAD", "--"]).args(SOURCES).current_dir(env!("CARGO_MANIFEST_DIR")).status().is_ok_and(|s| s.success());
    println!("cargo:rustc-env=RSVERBS_COMMIT={commit}{}", if clean { "" } else { "-dirty" });
}
