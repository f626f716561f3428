//! `rsverbs`: the command of the rsverbs project (rsverbs(1), docs/tool.md).
//! Modules: `cli` (arguments), `ffi` (rdma-core: devices and ports),
//! `table` (a port's GIDs through rsverbs' engine; the default indexes of
//! rdma_cm and perftest are the library's, `rsverbs::select`), `gids` (the `gids` command), `group`
//! (GROUP, its MGID and MAC), `net` (netdev and IP state from /sys and
//! /proc), `ib` (an InfiniBand port's IPoIB, P_Key and SA records),
//! `doctor` (the checks), `json` (the writer), `selftest` (rdma-core's
//! answers against rsverbs' on this host) and `report` (its comparison and
//! report, tested without devices). `main` plans what to
//! do from the arguments and the device names (`plan`, tested without
//! devices), then opens the devices and runs the command.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod cli;
mod doctor;
mod ffi;
mod gids;
mod group;
mod ib;
mod json;
mod net;
mod report;
mod join;
mod selftest;
mod table;

use cli::Command;

/// The runtime error when libibverbs lists no device at all (rsverbs(1)).
pub const NO_DEVICES: &str = "no RDMA devices; is the provider's module loaded?";

/// What `main` does with the arguments, decided before any device is
/// opened; the tests drive it with made-up device lists.
#[derive(Debug, PartialEq, Eq)]
enum Plan {
    /// Print this on stdout, exit 0 (help, version).
    Print(String),
    /// Bad usage: the message and a short usage hint on stderr, exit 2.
    Usage(cli::Usage),
    /// A runtime failure: one line on stderr, no usage, exit 1.
    Fail(String),
    Gids { devs: Vec<String>, port: Option<u8> },
    Doctor { devs: Vec<String>, port: Option<u8>, group: group::Group, given: String, json: bool },
    /// selftest's environment failure (no device, an unknown one): one
    /// line on stderr, exit 2 (its exit 1 means a difference).
    Env(String),
    Selftest { devs: Vec<String>, port: Option<u8>, json: bool, report: Option<String>, limits: bool, join: Option<core::net::Ipv4Addr> },
}

/// The devices to look at, of those libibverbs lists (`names`): DEV only,
/// or all; Err is a runtime failure: no device at all, or DEV unknown.
fn choose(names: Vec<String>, dev: Option<&str>) -> Result<Vec<String>, String> {
    if names.is_empty() {
        return Err(NO_DEVICES.into());
    }
    match dev {
        Some(d) if !names.iter().any(|n| n == d) => Err(format!("unknown device '{d}' (devices: {})", names.join(" "))),
        Some(d) => Ok(vec![d.to_string()]),
        None => Ok(names),
    }
}

/// `args` as `cli::strings` gave them; `names` lists the devices, called
/// only by a command that needs them.
fn plan(args: Result<Vec<String>, String>, names: impl FnOnce() -> Vec<String>) -> Plan {
    let args = match args {
        Ok(a) => a,
        Err(e) => return Plan::Usage(cli::Usage { msg: e, topic: None }),
    };
    match cli::parse(&args) {
        Err(u) => Plan::Usage(u),
        Ok(Command::Help(t)) => Plan::Print(cli::help(t).to_string()),
        Ok(Command::Version) => Plan::Print(format!("rsverbs {}", env!("CARGO_PKG_VERSION"))),
        Ok(Command::Gids { dev, port }) => match choose(names(), dev.as_deref()) {
            Err(e) => Plan::Fail(e),
            Ok(devs) => Plan::Gids { devs, port },
        },
        Ok(Command::Doctor { group, dev, port, json }) => match group::Group::parse(&group) {
            Err(e) => Plan::Usage(cli::Usage { msg: format!("doctor: {e}"), topic: Some(cli::Topic::Doctor) }),
            Ok(g) => match choose(names(), dev.as_deref()) {
                Err(e) => Plan::Fail(e),
                Ok(devs) => Plan::Doctor { devs, port, group: g, given: group, json },
            },
        },
        Ok(Command::Selftest { dev, port, json, report, limits, join }) => match choose(names(), dev.as_deref()) {
            Err(e) => Plan::Env(e),
            Ok(devs) => Plan::Selftest { devs, port, json, report, limits, join },
        },
    }
}

/// Opens the devices chosen; whether one of them could not be opened
/// (exit 1, rsverbs(1) EXIT STATUS).
fn open(names: &[String]) -> (Vec<ffi::Device>, bool) {
    let mut out = Vec::new();
    let mut failed = false;
    for n in names {
        match ffi::open(n) {
            Some(d) => out.push(d),
            None => {
                eprintln!("rsverbs: {n}: ibv_open_device failed: {}", std::io::Error::last_os_error());
                failed = true;
            }
        }
    }
    (out, failed)
}

/// A PORT beyond the device's ports is a runtime failure, like an unknown device.
fn check_port(devs: &[ffi::Device], port: Option<u8>) -> Result<(), String> {
    let Some(p) = port else { return Ok(()) };
    for d in devs {
        let n = d.limits().map_or(0, |l| l.phys_port_cnt);
        if p > n {
            return Err(format!("{} has no port {p} (ports 1..{n})", d.name));
        }
    }
    Ok(())
}

fn fail(msg: &str) -> i32 {
    eprintln!("rsverbs: {msg}");
    1
}

fn main() {
    // Die of SIGPIPE, as C tools do, when a reader such as `head` or
    // `grep -q` closes the pipe (Rust ignores SIGPIPE, so println! would panic).
    // SAFETY: setting a signal disposition to its default, before any thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let code = match plan(cli::strings(std::env::args_os().skip(1)), ffi::device_names) {
        Plan::Print(s) => {
            println!("{s}");
            0
        }
        Plan::Usage(u) => {
            eprintln!("{}", cli::usage_text(&u));
            2
        }
        Plan::Fail(e) => fail(&e),
        Plan::Gids { devs, port } => {
            let (devs, failed) = open(&devs);
            match check_port(&devs, port) {
                Err(e) => fail(&e),
                // A device that could not be opened is one not queried: 1.
                Ok(()) => gids::run(&devs, port).max(i32::from(failed)),
            }
        }
        Plan::Env(e) => {
            fail(&e);
            report::EXIT_ENV
        }
        Plan::Selftest { devs, port, json, report, limits, join } => {
            let (devs, failed) = open(&devs);
            match check_port(&devs, port) {
                _ if devs.is_empty() => report::EXIT_ENV,
                Err(e) => {
                    fail(&e);
                    report::EXIT_ENV
                }
                Ok(()) => selftest::run(&devs, &selftest::Options { port, json, report: report.as_deref(), limits, join }, !failed),
            }
        }
        Plan::Doctor { devs, port, group, given, json } => {
            let (devs, _) = open(&devs);
            match check_port(&devs, port) {
                Err(e) => fail(&e),
                Ok(()) => doctor::run(&devs, port, group, &given, json),
            }
        }
    };
    std::process::exit(code);
}

#[cfg(test)]
#[allow(clippy::panic)]
mod tests {
    use super::*;

    fn run(args: &[&str], names: &[&str]) -> Plan {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        plan(Ok(args.iter().map(|s| s.to_string()).collect()), move || names)
    }

    #[test]
    fn no_devices_is_a_runtime_failure_of_both_commands() {
        for args in [&["gids"][..], &["gids", "rxe0"], &["gids", "--dev=rxe0", "-p1"], &["doctor", "239.1.1.1"], &["doctor", "239.1.1.1", "-drxe0", "--json"]] {
            assert_eq!(run(args, &[]), Plan::Fail(NO_DEVICES.into()), "{args:?}");
        }
    }

    #[test]
    fn selftest_without_devices_or_with_an_unknown_one_is_exit_2() {
        for args in [&["selftest"][..], &["selftest", "rxe0:1", "--json"], &["selftest", "--report", "r.txt"]] {
            assert_eq!(run(args, &[]), Plan::Env(NO_DEVICES.into()), "{args:?}");
        }
        assert_eq!(run(&["selftest", "-dnosuch0"], &["rxe0"]), Plan::Env("unknown device 'nosuch0' (devices: rxe0)".into()));
        assert_eq!(run(&["selftest", "rxe0:1", "--report=r"], &["rxe0", "rxe1"]), Plan::Selftest { devs: vec!["rxe0".into()], port: Some(1), json: false, report: Some("r".into()), limits: false, join: None });
        assert_eq!(run(&["selftest", "--json"], &["rxe0", "rxe1"]), Plan::Selftest { devs: vec!["rxe0".into(), "rxe1".into()], port: None, json: true, report: None, limits: false, join: None });
        // Bad usage is exit 2 too, and never lists the devices.
        let p = plan(Ok(vec!["selftest".into(), "--limit".into()]), || -> Vec<String> { panic!("devices listed") });
        assert!(matches!(p, Plan::Usage(_)), "{p:?}");
    }

    #[test]
    fn an_unknown_device_is_a_runtime_failure_in_one_line() {
        let want = Plan::Fail("unknown device 'nosuch0' (devices: rxe0 rxe1)".into());
        for args in [&["gids", "nosuch0"][..], &["gids", "nosuch0:1"], &["gids", "-dnosuch0"], &["doctor", "239.1.1.1", "--dev", "nosuch0"], &["doctor", "ff0e::1:6", "--dev=nosuch0", "--json"]] {
            assert_eq!(run(args, &["rxe0", "rxe1"]), want, "{args:?}");
        }
        if let Plan::Fail(m) = &want {
            assert!(!m.contains('\n'));
        }
    }

    #[test]
    fn devices_chosen_and_usage_before_devices() {
        assert_eq!(run(&["gids"], &["rxe0", "rxe1"]), Plan::Gids { devs: vec!["rxe0".into(), "rxe1".into()], port: None });
        assert_eq!(run(&["gids", "-d", "rxe1", "--port=1"], &["rxe0", "rxe1"]), Plan::Gids { devs: vec!["rxe1".into()], port: Some(1) });
        match run(&["doctor", "239.1.1.1", "-drxe1"], &["rxe0", "rxe1"]) {
            Plan::Doctor { devs, port: None, given, json: false, .. } => assert_eq!((devs, given.as_str()), (vec!["rxe1".to_string()], "239.1.1.1")),
            other => panic!("{other:?}"),
        }
        // Help, version and bad usage never ask for the devices.
        let never = || -> Vec<String> { panic!("devices listed") };
        for a in [&["help"][..], &["gids", "--help"], &["help", "doctor"], &["--version"], &["doctor", "10.0.0.1"], &["gids", "--frob"]] {
            let p = plan(Ok(a.iter().map(|s| s.to_string()).collect()), never);
            assert!(matches!(p, Plan::Print(_) | Plan::Usage(_)), "{a:?}: {p:?}");
        }
        assert_eq!(run(&["doctor", "10.0.0.1"], &[]), Plan::Usage(cli::Usage { msg: "doctor: 10.0.0.1 is not an IPv4 multicast address (224.0.0.0/4)".into(), topic: Some(cli::Topic::Doctor) }));
        assert_eq!(plan(Err("argument 2 is not UTF-8: 'x'".into()), Vec::new), Plan::Usage(cli::Usage { msg: "argument 2 is not UTF-8: 'x'".into(), topic: None }));
        assert_eq!(run(&["gids", "-h"], &[]), Plan::Print(cli::GIDS_HELP.into()));
        assert_eq!(run(&["help", "doctor"], &[]), Plan::Print(cli::DOCTOR_HELP.into()));
        assert_eq!(run(&["-V"], &[]), Plan::Print(format!("rsverbs {}", env!("CARGO_PKG_VERSION"))));
    }
}
