//! `rsverbs`: the command of the rsverbs project (rsverbs(1), docs/tool.md).
//! Modules: `cli` (arguments), `ffi` (rdma-core: devices and ports),
//! `table` (a port's GIDs through rsverbs' engine; the default indexes of
//! rdma_cm and perftest are the library's, `rsverbs::select`), `gids` (the `gids` command), `group`
//! (GROUP, its MGID and MAC), `net` (netdev and IP state from /sys and
//! /proc), `doctor` (the checks), `json` (the writer).
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod cli;
mod doctor;
mod ffi;
mod gids;
mod group;
mod json;
mod net;
mod table;

use cli::Command;

fn usage_error(msg: &str) -> i32 {
    eprintln!("rsverbs: {msg}\n{}", cli::USAGE);
    2
}

/// The devices to look at: DEV only, or all, and whether one of them could
/// not be opened (exit 1, rsverbs(1) EXIT STATUS); Err names an unknown DEV.
fn devices(dev: Option<&str>) -> Result<(Vec<ffi::Device>, bool), String> {
    let names = ffi::device_names();
    let chosen: Vec<String> = match dev {
        Some(d) if !names.iter().any(|n| n == d) => {
            return Err(format!("unknown device '{d}' (devices: {})", if names.is_empty() { "none".into() } else { names.join(" ") }));
        }
        Some(d) => vec![d.to_string()],
        None => names,
    };
    let mut out = Vec::new();
    let mut failed = false;
    for n in chosen {
        match ffi::open(&n) {
            Some(d) => out.push(d),
            None => {
                eprintln!("rsverbs: {n}: ibv_open_device failed: {}", std::io::Error::last_os_error());
                failed = true;
            }
        }
    }
    Ok((out, failed))
}

/// A PORT beyond the device's ports is bad usage, like an unknown device.
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

fn main() {
    // Die of SIGPIPE, as C tools do, when a reader such as `head` or
    // `grep -q` closes the pipe (Rust ignores SIGPIPE, so println! would panic).
    // SAFETY: setting a signal disposition to its default, before any thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let code = match cli::strings(std::env::args_os().skip(1)).and_then(|a| cli::parse(&a)) {
        Err(e) => usage_error(&e),
        Ok(Command::Help) => {
            println!("{}", cli::USAGE);
            0
        }
        Ok(Command::Version) => {
            println!("rsverbs {}", env!("CARGO_PKG_VERSION"));
            0
        }
        Ok(Command::Gids { dev, port }) => match devices(dev.as_deref()).and_then(|d| check_port(&d.0, port).map(|()| d)) {
            Err(e) => usage_error(&e),
            // A device that could not be opened is one not queried: 1.
            Ok((devs, failed)) => gids::run(&devs, port).max(i32::from(failed)),
        },
        Ok(Command::Doctor { group, dev, port, json }) => match group::Group::parse(&group) {
            Err(e) => usage_error(&format!("doctor: {e}")),
            Ok(g) => match devices(dev.as_deref()).and_then(|d| check_port(&d.0, port).map(|()| d)) {
                Err(e) => usage_error(&e),
                Ok((devs, _)) => doctor::run(&devs, port, g, &group, json),
            },
        },
    };
    std::process::exit(code);
}
