//! The built `rsverbs` binary, run on the host: help, version, usage errors
//! and runtime errors, their exit statuses and which stream they use. None
//! of it needs an RDMA device; the runtime errors are checked as the host
//! allows (no device at all, the usual build machine, or an unknown name).
#![allow(clippy::unwrap_used)]

use std::process::Command;

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn rsverbs(args: &[&str]) -> Out {
    let o = Command::new(env!("CARGO_BIN_EXE_rsverbs")).args(args).output().unwrap();
    // libibverbs' own warnings (a low RLIMIT_MEMLOCK for a user, say) are
    // not the command's: left out of what the tests count.
    let stderr: String = String::from_utf8_lossy(&o.stderr).lines().filter(|l| !l.starts_with("libibverbs: ")).map(|l| format!("{l}\n")).collect();
    Out { code: o.status.code().unwrap_or(-1), stdout: String::from_utf8_lossy(&o.stdout).into(), stderr }
}

/// Whether the host has an RDMA device (a uverbs node libibverbs would list).
fn host_has_devices() -> bool {
    std::fs::read_dir("/sys/class/infiniband_verbs")
        .map(|d| d.flatten().any(|e| e.file_name().to_string_lossy().starts_with("uverbs")))
        .unwrap_or(false)
}

#[test]
fn help_goes_to_stdout_with_exit_0() {
    for args in [&["--help"][..], &["-h"], &["help"], &["help", "gids"], &["help", "doctor"], &["gids", "--help"], &["gids", "-h"], &["doctor", "-h"], &["doctor", "239.1.1.1", "--help"]] {
        let o = rsverbs(args);
        assert_eq!((o.code, o.stderr.as_str()), (0, ""), "{args:?}");
        assert!(o.stdout.starts_with("usage: rsverbs") || o.stdout.starts_with("rsverbs: "), "{args:?}: {}", o.stdout);
    }
    let top = rsverbs(&["--help"]).stdout;
    assert!(top.lines().any(|l| l.starts_with("  gids ")) && top.lines().any(|l| l.starts_with("  doctor ")), "{top}");
    assert!(top.lines().any(|l| l.starts_with("usage: rsverbs gids")), "{top}");
    assert!(rsverbs(&["gids", "--help"]).stdout.starts_with("usage: rsverbs gids "));
    assert_eq!(rsverbs(&["help", "doctor"]).stdout, rsverbs(&["doctor", "-h"]).stdout);
    assert!(rsverbs(&["help", "doctor"]).stdout.contains("InfiniBand"));
}

#[test]
fn version() {
    let o = rsverbs(&["--version"]);
    assert_eq!((o.code, o.stdout.as_str(), o.stderr.as_str()), (0, concat!("rsverbs ", env!("CARGO_PKG_VERSION"), "\n"), ""));
}

#[test]
fn bad_usage_is_exit_2_with_a_short_hint_on_stderr() {
    for (args, hint) in [
        (&[] as &[&str], "rsverbs --help"),
        (&["frob"], "rsverbs --help"),
        (&["help", "frob"], "rsverbs --help"),
        (&["gids", "--frob"], "rsverbs gids --help"),
        (&["gids", "x:y"], "rsverbs gids --help"),
        (&["gids", "a", "b"], "rsverbs gids --help"),
        (&["gids", "-d"], "rsverbs gids --help"),
        (&["doctor"], "rsverbs doctor --help"),
        (&["doctor", "10.0.0.1"], "rsverbs doctor --help"),
        (&["doctor", "239.1.1.1", "--port=0"], "rsverbs doctor --help"),
        (&["doctor", "239.1.1.1", "--frob"], "rsverbs doctor --help"),
    ] {
        let o = rsverbs(args);
        assert_eq!((o.code, o.stdout.as_str()), (2, ""), "{args:?}");
        let lines: Vec<&str> = o.stderr.lines().collect();
        assert_eq!(lines.len(), 3, "{args:?}: {}", o.stderr);
        assert!(lines[0].starts_with("rsverbs: ") && lines[1].starts_with("usage: rsverbs "), "{args:?}: {}", o.stderr);
        assert_eq!(lines[2], format!("Try '{hint}' for more."), "{args:?}");
    }
}

#[test]
fn runtime_errors_are_exit_1_in_one_line_without_the_usage() {
    let cases: [&[&str]; 6] = [
        &["gids", "nosuch-dev0"],
        &["gids", "nosuch-dev0:1"],
        &["gids", "--dev=nosuch-dev0"],
        &["gids", "-dnosuch-dev0", "-p1"],
        &["doctor", "239.1.1.1", "--dev", "nosuch-dev0"],
        &["doctor", "ff0e::1:6", "-d", "nosuch-dev0", "--json"],
    ];
    let has = host_has_devices();
    for args in cases {
        let o = rsverbs(args);
        assert_eq!((o.code, o.stdout.as_str()), (1, ""), "{args:?}: {}", o.stderr);
        assert_eq!(o.stderr.lines().count(), 1, "{args:?}: {}", o.stderr);
        if has {
            assert!(o.stderr.starts_with("rsverbs: unknown device 'nosuch-dev0' (devices: "), "{args:?}: {}", o.stderr);
        } else {
            assert_eq!(o.stderr, "rsverbs: no RDMA devices; is the provider's module loaded?\n", "{args:?}");
        }
    }
    if has {
        eprintln!("note: this host has RDMA devices; 'no RDMA devices' is covered by main.rs's unit tests and ctest/vm/tool.sh");
        return;
    }
    // No device at all: both commands, without a device named.
    for args in [&["gids"][..], &["gids", "-p", "1"], &["doctor", "239.1.1.1"], &["doctor", "239.1.1.1", "--json"]] {
        let o = rsverbs(args);
        assert_eq!((o.code, o.stdout.as_str(), o.stderr.as_str()), (1, "", "rsverbs: no RDMA devices; is the provider's module loaded?\n"), "{args:?}");
    }
}

/// selftest's environment failures are exit 2 (its exit 1 is a difference):
/// an unknown device anywhere, no device at all on a host without any.
#[test]
fn selftest_environment_failures_are_exit_2_in_one_line() {
    for args in [&["selftest", "nosuch-dev0"][..], &["selftest", "-dnosuch-dev0", "--json"], &["selftest", "nosuch-dev0:1", "--report", "/nonexistent/r"]] {
        let o = rsverbs(args);
        assert_eq!((o.code, o.stdout.as_str(), o.stderr.lines().count()), (2, "", 1), "{args:?}: {}", o.stderr);
    }
    if host_has_devices() {
        return;
    }
    let o = rsverbs(&["selftest"]);
    assert_eq!((o.code, o.stdout.as_str(), o.stderr.as_str()), (2, "", "rsverbs: no RDMA devices; is the provider's module loaded?\n"));
}
