//! The command line (rsverbs(1), docs/tool.md):
//! `rsverbs gids [DEV[:PORT]] [-d DEV] [-p N]`,
//! `rsverbs doctor GROUP [-d DEV] [-p N] [--json]`,
//! `rsverbs selftest [DEV[:PORT]] [-d DEV] [-p N] [--json] [--limits] [--join GROUP] [--report FILE]`,
//! `rsverbs help [COMMAND]`, `rsverbs COMMAND --help`, `--help`, `--version`.
//!
//! Both commands take the device and the port the same way, in each of the
//! forms getopt_long gives C tools: `--dev=DEV`, `--dev DEV`, `-dDEV`,
//! `-d DEV`, and `--port`/`-p` alike (`-i`, the port option of ibv_devinfo
//! and perftest, too). `gids` keeps its positional `DEV[:PORT]`.

/// A command, for its help and for the usage hint after a usage error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topic {
    Gids,
    Doctor,
    Selftest,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    /// The help of the command, or the top-level help: stdout, exit 0.
    Help(Option<Topic>),
    Version,
    Gids { dev: Option<String>, port: Option<u8> },
    Doctor { group: String, dev: Option<String>, port: Option<u8>, json: bool },
    Selftest { dev: Option<String>, port: Option<u8>, json: bool, report: Option<String>, limits: bool, join: Option<core::net::Ipv4Addr> },
}

/// Bad usage (exit 2): what is wrong, and the command whose usage line the
/// hint after it gives.
#[derive(Debug, PartialEq, Eq)]
pub struct Usage {
    pub msg: String,
    pub topic: Option<Topic>,
}

fn usage(topic: Option<Topic>, msg: impl Into<String>) -> Usage {
    Usage { msg: msg.into(), topic }
}

pub const HELP: &str = "\
rsverbs: the GID tables of RDMA ports, and whether this host can receive a multicast group

usage: rsverbs gids [DEV[:PORT]] [-d DEV] [-p N]
       rsverbs doctor GROUP [-d DEV] [-p N] [--json]
       rsverbs selftest [DEV[:PORT]] [-d DEV] [-p N] [--json] [--limits] [--join GROUP] [--report FILE]
       rsverbs help [COMMAND] | --help | --version

commands:
  gids     print each port's GID table and the indexes rdma_cm and perftest pick by default
  doctor   check that this host can receive multicast GROUP, and print the fix for each problem
  selftest compare rsverbs' answers with the installed rdma-core's on this host's devices

options of every command:
  -d, --dev DEV    only the RDMA device DEV (as ibv_devices lists it)
  -p, --port N     only port N, 1..255 (-i N as in ibv_devinfo)
  -h, --help       the command's help

Exit status: 0 done (doctor: ready); 1 a runtime failure (no RDMA device, an unknown
device or port, a device that could not be queried; doctor: not ready); 2 bad usage.
selftest: 0 every answer identical, 1 a difference, 2 bad usage or no device to test.
'rsverbs help COMMAND' gives a command's help; rsverbs(1) is the manual.";

pub const GIDS_USAGE: &str = "usage: rsverbs gids [DEV[:PORT]] [-d DEV] [-p N]";

pub const GIDS_HELP: &str = "\
usage: rsverbs gids [DEV[:PORT]] [-d DEV] [-p N]

Prints the GID table of every port of every RDMA device (or of DEV, or of its
port N): one row per entry, a run of empty entries as one row, and in the
DEFAULT column the indexes rdma_cm binds and perftest uses without -x; then a
summary line per port (entries used, how the table was read).

  DEV[:PORT]       only device DEV (and its port PORT): the same as -d DEV -p PORT
  -d, --dev DEV    only device DEV (--dev=DEV, -dDEV too)
  -p, --port N     only port N of each device (--port=N, -pN, -i N too)
  -h, --help       this help

Exit status: 0 every table listed; 1 no RDMA device, an unknown device or port,
or a device or port that could not be queried; 2 bad usage. See rsverbs(1).";

pub const DOCTOR_USAGE: &str = "usage: rsverbs doctor GROUP [-d DEV] [-p N] [--json]";

pub const DOCTOR_HELP: &str = "\
usage: rsverbs doctor GROUP [-d DEV] [-p N] [--json]

Checks whether this host can receive multicast GROUP on its RDMA ports (or on
DEV, or on its port N), and prints the fix for each problem. Checks on RoCE:
port, gid, mgid, membership, filter, rp_filter, limits, qkey; on InfiniBand:
port (ACTIVE, an SM LID), ipoib, pkey, mgid, membership (the SA's
MCMemberRecord, through saquery), limits, qkey (rsverbs(1), docs/tool.md).
GROUP: an IPv4 or IPv6 multicast address, or an MGID (::ffff:239.1.1.1 and
ff0e::ffff:239.1.1.1 both mean 239.1.1.1).

  -d, --dev DEV    only device DEV (--dev=DEV, -dDEV too)
  -p, --port N     only port N (--port=N, -pN, -i N too)
      --json       print one JSON object instead of text
  -h, --help       this help

Each check says ok, warn, FAIL or skip (not checked, with the reason: on
InfiniBand, membership without saquery or a subnet manager).
A port is ready when none of its checks says FAIL; the host is ready when one
checked port is.
Exit status: 0 ready; 1 not ready, no RDMA device, or an unknown device or
port; 2 bad usage (GROUP not multicast among them). See rsverbs(1).";

pub const SELFTEST_USAGE: &str = "usage: rsverbs selftest [DEV[:PORT]] [-d DEV] [-p N] [--json] [--limits] [--join GROUP] [--report FILE]";

pub const SELFTEST_HELP: &str = "\
usage: rsverbs selftest [DEV[:PORT]] [-d DEV] [-p N] [--json] [--limits] [--join GROUP] [--report FILE]

Compares, on every port of every RDMA device (or of DEV, or of its port N),
the answers of the installed rdma-core (libibverbs' own ibv_query_gid,
_ibv_query_gid_ex, _ibv_query_gid_table, ibv_attach_mcast, ibv_detach_mcast,
found by their versioned names, so that a preload of rsverbs cannot hide them)
with rsverbs' answers to the same calls: value, errno and every byte written.
GID cases: every index of every table, bad ports, indexes, flags, entry sizes
and table sizes. Attach and detach cases: on a PD, CQ and QPs of its own, with
groups in 239.255.77.0/24 and ff1e::77:0/112 only, all detached and the objects
destroyed before it exits (SIGINT and SIGTERM too). Nothing is sent on the
fabric. Then a report: the host's facts, each port's cases, each difference
with both answers (docs/selftest.md says where to send it).

  DEV[:PORT]       only device DEV (and its port PORT): the same as -d DEV -p PORT
  -d, --dev DEV    only device DEV (--dev=DEV, -dDEV too)
  -p, --port N     only port N (--port=N, -pN, -i N too)
      --json       print one JSON object instead of text
      --limits     also attach up to each device's limits, max_mcast_grp groups
                   on one QP and max_mcast_qp_attach QPs to one group, until
                   refused (seconds to minutes: thousands of attaches)
      --join GROUP also join and leave GROUP (an IPv4 multicast address) on
                   the fabric, full and send-only, through rsverbs and through
                   librdmacm (rdma_join_multicast_ex), and compare; with
                   RSVERBS_MCAST_IPJOIN=1 an attach that joins too. Only with
                   this option does it touch the fabric.
      --report FILE  also write the report (text, or JSON with --json) to FILE
  -h, --help       this help

After the run the process's file descriptors must be as before it (a report
line). Exit status: 0 every answer identical; 1 a difference; 2 bad usage, no RDMA
device, an unknown device or port, or an interrupted run. See rsverbs(1).";

/// The top-level usage line, the hint after a usage error that names no command.
pub const USAGE: &str = "usage: rsverbs gids|doctor|selftest ARGS... | help [COMMAND] | --help | --version";

/// The help text `--help` or `help [COMMAND]` prints.
pub fn help(topic: Option<Topic>) -> &'static str {
    match topic {
        None => HELP,
        Some(Topic::Gids) => GIDS_HELP,
        Some(Topic::Doctor) => DOCTOR_HELP,
        Some(Topic::Selftest) => SELFTEST_HELP,
    }
}

/// What stderr says for bad usage: the message, the usage line, where the help is.
pub fn usage_text(u: &Usage) -> String {
    let (line, more) = match u.topic {
        None => (USAGE, "rsverbs --help"),
        Some(Topic::Gids) => (GIDS_USAGE, "rsverbs gids --help"),
        Some(Topic::Doctor) => (DOCTOR_USAGE, "rsverbs doctor --help"),
        Some(Topic::Selftest) => (SELFTEST_USAGE, "rsverbs selftest --help"),
    };
    format!("rsverbs: {}\n{line}\nTry '{more}' for more.", u.msg)
}

/// The arguments as text; Err (a usage error, exit 2) names the first one
/// that is not UTF-8 (`std::env::args` would panic on it, and the command
/// died of SIGABRT, exit 134; docs/tool.md).
pub fn strings(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<Vec<String>, String> {
    args.into_iter()
        .enumerate()
        .map(|(i, a)| a.into_string().map_err(|a| format!("argument {} is not UTF-8: '{}'", i + 1, a.to_string_lossy())))
        .collect()
}

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Command, Usage> {
    let Some(verb) = args.first() else {
        return Err(usage(None, "no command given"));
    };
    let rest = &args[1..];
    match verb.as_str() {
        "-h" | "--help" => Ok(Command::Help(None)),
        "help" => match rest {
            [] => Ok(Command::Help(None)),
            [c] => topic(c).map(|t| Command::Help(Some(t))).ok_or_else(|| usage(None, format!("help: unknown command '{c}'"))),
            _ => Err(usage(None, "help: at most one COMMAND")),
        },
        "-V" | "--version" => Ok(Command::Version),
        "gids" => gids(rest),
        "doctor" => doctor(rest),
        "selftest" => selftest(rest),
        other if other.starts_with('-') => Err(usage(None, format!("unknown option '{other}'"))),
        other => Err(usage(None, format!("unknown command '{other}'"))),
    }
}

fn topic(name: &str) -> Option<Topic> {
    match name {
        "gids" => Some(Topic::Gids),
        "doctor" => Some(Topic::Doctor),
        "selftest" => Some(Topic::Selftest),
        _ => None,
    }
}

/// An option that takes a value.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Valued {
    Dev,
    Port,
    /// selftest's `--report FILE`.
    Report,
    /// selftest's `--join GROUP`.
    Join,
}

/// One argument of a command, after its value (if any) is taken.
enum Arg {
    Help,
    Opt(Valued, String),
    Flag(String),
    Positional(String),
}

/// Splits a command's arguments; `--` ends the options. A `-h`/`--help`
/// anywhere before `--` asks for the help, whatever else is there.
fn split(t: Topic, rest: &[String]) -> Result<Vec<Arg>, Usage> {
    let name = match t {
        Topic::Gids => "gids",
        Topic::Doctor => "doctor",
        Topic::Selftest => "selftest",
    };
    let mut out = Vec::new();
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        let a = a.as_str();
        let (which, inline) = match a {
            "--" => {
                out.extend(it.by_ref().map(|p| Arg::Positional(p.clone())));
                break;
            }
            "-h" | "--help" => {
                out.push(Arg::Help);
                continue;
            }
            "--dev" | "-d" => (Valued::Dev, None),
            "--port" | "-p" | "-i" => (Valued::Port, None),
            "--report" if t == Topic::Selftest => (Valued::Report, None),
            _ if t == Topic::Selftest && a.starts_with("--report=") => (Valued::Report, Some(&a[9..])),
            "--join" if t == Topic::Selftest => (Valued::Join, None),
            _ if t == Topic::Selftest && a.starts_with("--join=") => (Valued::Join, Some(&a[7..])),
            _ if a.starts_with("--dev=") => (Valued::Dev, Some(&a[6..])),
            _ if a.starts_with("--port=") => (Valued::Port, Some(&a[7..])),
            _ if a.starts_with("-d") => (Valued::Dev, Some(&a[2..])),
            _ if a.starts_with("-p") || a.starts_with("-i") => (Valued::Port, Some(&a[2..])),
            _ if a.starts_with("--") => {
                out.push(Arg::Flag(a.to_string()));
                continue;
            }
            // "-" alone, and what parses as a number, are not options.
            _ if a.starts_with('-') && a.len() > 1 && a.parse::<f64>().is_err() => {
                out.push(Arg::Flag(a.to_string()));
                continue;
            }
            _ => {
                out.push(Arg::Positional(a.to_string()));
                continue;
            }
        };
        let what = match which {
            Valued::Dev => "--dev needs a device name",
            Valued::Port => "--port needs a number",
            Valued::Report => "--report needs a file name",
            Valued::Join => "--join needs a group",
        };
        let v = match inline {
            Some(v) => v.to_string(),
            None => it.next().ok_or_else(|| usage(Some(t), format!("{name}: {what}")))?.clone(),
        };
        if v.is_empty() {
            return Err(usage(Some(t), format!("{name}: {what}")));
        }
        out.push(Arg::Opt(which, v));
    }
    Ok(out)
}

fn gids(rest: &[String]) -> Result<Command, Usage> {
    let t = Some(Topic::Gids);
    let args = split(Topic::Gids, rest)?;
    if args.iter().any(|a| matches!(a, Arg::Help)) {
        return Ok(Command::Help(t));
    }
    let (mut dev, mut port_n, mut positional) = (None, None, None);
    for a in args {
        match a {
            Arg::Help => {}
            Arg::Opt(Valued::Dev, v) => dev = Some(v),
            Arg::Opt(Valued::Port, v) => port_n = Some(port(&v).map_err(|e| usage(t, format!("gids: {e}")))?),
            // (--join is split as selftest's only, like --report.)
            Arg::Opt(Valued::Report | Valued::Join, _) => return Err(usage(t, "gids: unknown option '--report'")),
            Arg::Flag(f) => return Err(usage(t, format!("gids: unknown option '{f}'"))),
            Arg::Positional(p) if positional.is_none() => positional = Some(p),
            Arg::Positional(_) => return Err(usage(t, "gids: at most one DEV[:PORT]")),
        }
    }
    let (dev, port_n) = dev_port("gids", t, positional, dev, port_n)?;
    Ok(Command::Gids { dev, port: port_n })
}

/// A positional `DEV[:PORT]` merged with `--dev` and `--port` (gids, selftest).
fn dev_port(name: &str, t: Option<Topic>, positional: Option<String>, dev: Option<String>, port_n: Option<u8>) -> Result<(Option<String>, Option<u8>), Usage> {
    let Some(p) = positional else { return Ok((dev, port_n)) };
    let (d, pp) = match p.split_once(':') {
        Some((d, pp)) => (d.to_string(), Some(port(pp).map_err(|e| usage(t, format!("{name}: {e}")))?)),
        None => (p, None),
    };
    if d.is_empty() {
        return Err(usage(t, format!("{name}: DEV is empty")));
    }
    if dev.is_some() {
        return Err(usage(t, format!("{name}: the device given twice (DEV and --dev)")));
    }
    if pp.is_some() && port_n.is_some() {
        return Err(usage(t, format!("{name}: the port given twice (DEV:PORT and --port)")));
    }
    Ok((Some(d), port_n.or(pp)))
}

fn selftest(rest: &[String]) -> Result<Command, Usage> {
    let t = Some(Topic::Selftest);
    let args = split(Topic::Selftest, rest)?;
    if args.iter().any(|a| matches!(a, Arg::Help)) {
        return Ok(Command::Help(t));
    }
    let (mut dev, mut port_n, mut positional, mut json, mut report, mut limits, mut join) = (None, None, None, false, None, false, None);
    for a in args {
        match a {
            Arg::Help => {}
            Arg::Opt(Valued::Dev, v) => dev = Some(v),
            Arg::Opt(Valued::Port, v) => port_n = Some(port(&v).map_err(|e| usage(t, format!("selftest: {e}")))?),
            Arg::Opt(Valued::Report, v) => report = Some(v),
            Arg::Opt(Valued::Join, v) => join = Some(join_group(&v).map_err(|e| usage(t, format!("selftest: --join {e}")))?),
            Arg::Flag(f) if f == "--json" => json = true,
            Arg::Flag(f) if f == "--limits" => limits = true,
            Arg::Flag(f) => return Err(usage(t, format!("selftest: unknown option '{f}'"))),
            Arg::Positional(p) if positional.is_none() => positional = Some(p),
            Arg::Positional(_) => return Err(usage(t, "selftest: at most one DEV[:PORT]")),
        }
    }
    let (dev, port_n) = dev_port("selftest", t, positional, dev, port_n)?;
    Ok(Command::Selftest { dev, port: port_n, json, report, limits, join })
}

/// `--join GROUP`: an IPv4 multicast address outside 224.0.0.0/24, the
/// local network control block (rdma_cm joins IPv4 groups only on RoCE v2:
/// docs/ipjoin.md; 224.0.0.0/24 is never reported, RFC 5771).
fn join_group(s: &str) -> Result<core::net::Ipv4Addr, String> {
    let a: core::net::Ipv4Addr = s.parse().map_err(|_| format!("{s}: not an IPv4 address"))?;
    if !a.is_multicast() {
        return Err(format!("{s}: not a multicast address (224.0.0.0/4)"));
    }
    if a.octets()[..3] == [224, 0, 0] {
        return Err(format!("{s}: 224.0.0.0/24 is the local network control block"));
    }
    Ok(a)
}

fn doctor(rest: &[String]) -> Result<Command, Usage> {
    let t = Some(Topic::Doctor);
    let args = split(Topic::Doctor, rest)?;
    if args.iter().any(|a| matches!(a, Arg::Help)) {
        return Ok(Command::Help(t));
    }
    let (mut group, mut dev, mut port_n, mut json) = (None, None, None, false);
    for a in args {
        match a {
            Arg::Help => {}
            Arg::Opt(Valued::Dev, v) => dev = Some(v),
            Arg::Opt(Valued::Port, v) => port_n = Some(port(&v).map_err(|e| usage(t, format!("doctor: {e}")))?),
            // (--join is split as selftest's only, like --report.)
            Arg::Opt(Valued::Report | Valued::Join, _) => return Err(usage(t, "doctor: unknown option '--report'")),
            Arg::Flag(f) if f == "--json" => json = true,
            Arg::Flag(f) => return Err(usage(t, format!("doctor: unknown option '{f}'"))),
            Arg::Positional(g) if group.is_none() => group = Some(g),
            Arg::Positional(g) => return Err(usage(t, format!("doctor: more than one GROUP ('{g}')"))),
        }
    }
    let group = group.ok_or_else(|| usage(t, "doctor: GROUP is missing"))?;
    Ok(Command::Doctor { group, dev, port: port_n, json })
}

fn port(s: &str) -> Result<u8, String> {
    s.parse::<u8>().ok().filter(|&p| p > 0).ok_or_else(|| format!("bad port number '{s}' (1..255)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(a: &[&str]) -> Result<Command, Usage> {
        parse(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    fn gids(dev: Option<&str>, port: Option<u8>) -> Result<Command, Usage> {
        Ok(Command::Gids { dev: dev.map(String::from), port })
    }

    fn doctor(dev: Option<&str>, port: Option<u8>, json: bool) -> Result<Command, Usage> {
        Ok(Command::Doctor { group: "239.1.1.1".into(), dev: dev.map(String::from), port, json })
    }

    #[test]
    fn parses_and_rejects() {
        assert_eq!(p(&["gids", "rxe1:1"]), gids(Some("rxe1"), Some(1)));
        assert_eq!(p(&["gids"]), gids(None, None));
        assert_eq!(p(&["doctor", "239.1.1.1", "--dev", "rxe1", "--json"]), doctor(Some("rxe1"), None, true));
        for bad in [&["doctor"][..], &["doctor", "g", "--bogus"], &["doctor", "g", "--port", "0"], &["doctor", "g", "--dev"], &["gids", "x:y"], &["frob"], &[]] {
            assert!(p(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn every_form_of_dev_and_port_in_both_commands() {
        let forms: [&[&str]; 8] = [
            &["--dev=rxe1", "--port=2"],
            &["--dev", "rxe1", "--port", "2"],
            &["-drxe1", "-p2"],
            &["-d", "rxe1", "-p", "2"],
            &["-d", "rxe1", "-i", "2"],
            &["-drxe1", "-i2"],
            &["--port=2", "-d", "rxe1"],
            &["-p", "2", "--dev=rxe1"],
        ];
        for f in forms {
            let mut g = vec!["gids"];
            g.extend_from_slice(f);
            assert_eq!(p(&g), gids(Some("rxe1"), Some(2)), "{g:?}");
            let mut d = vec!["doctor", "239.1.1.1"];
            d.extend_from_slice(f);
            assert_eq!(p(&d), doctor(Some("rxe1"), Some(2), false), "{d:?}");
            // The options before GROUP too.
            let mut d = vec!["doctor"];
            d.extend_from_slice(f);
            d.push("239.1.1.1");
            assert_eq!(p(&d), doctor(Some("rxe1"), Some(2), false), "{d:?}");
        }
        // gids' positional form, alone and with a port option.
        assert_eq!(p(&["gids", "rxe1"]), gids(Some("rxe1"), None));
        assert_eq!(p(&["gids", "rxe1", "-p", "1"]), gids(Some("rxe1"), Some(1)));
        assert_eq!(p(&["gids", "--port=3"]), gids(None, Some(3)));
        assert_eq!(p(&["doctor", "-d", "rxe1", "--", "239.1.1.1"]), doctor(Some("rxe1"), None, false));
    }

    #[test]
    fn bad_values_and_conflicts_are_usage_errors_of_the_command() {
        let cases: [(&[&str], Option<Topic>, &str); 12] = [
            (&["gids", "--dev="], Some(Topic::Gids), "gids: --dev needs a device name"),
            (&["gids", "-d"], Some(Topic::Gids), "gids: --dev needs a device name"),
            (&["gids", "-p"], Some(Topic::Gids), "gids: --port needs a number"),
            (&["gids", "-px"], Some(Topic::Gids), "gids: bad port number 'x' (1..255)"),
            (&["gids", "--port=256"], Some(Topic::Gids), "gids: bad port number '256' (1..255)"),
            (&["gids", "rxe1", "--dev", "rxe0"], Some(Topic::Gids), "gids: the device given twice (DEV and --dev)"),
            (&["gids", "rxe1:1", "-p1"], Some(Topic::Gids), "gids: the port given twice (DEV:PORT and --port)"),
            (&["gids", ":1"], Some(Topic::Gids), "gids: DEV is empty"),
            (&["gids", "--json"], Some(Topic::Gids), "gids: unknown option '--json'"),
            (&["doctor", "239.1.1.1", "-x"], Some(Topic::Doctor), "doctor: unknown option '-x'"),
            (&["doctor", "239.1.1.1", "--port=0"], Some(Topic::Doctor), "doctor: bad port number '0' (1..255)"),
            (&["--frob"], None, "unknown option '--frob'"),
        ];
        for (args, topic, msg) in cases {
            assert_eq!(p(args), Err(Usage { msg: msg.into(), topic }), "{args:?}");
        }
    }

    #[test]
    fn help_in_every_form() {
        for (args, want) in [
            (&["--help"][..], None),
            (&["-h"], None),
            (&["help"], None),
            (&["help", "gids"], Some(Topic::Gids)),
            (&["help", "doctor"], Some(Topic::Doctor)),
            (&["gids", "--help"], Some(Topic::Gids)),
            (&["gids", "-h"], Some(Topic::Gids)),
            (&["gids", "rxe1", "-h"], Some(Topic::Gids)),
            (&["doctor", "-h"], Some(Topic::Doctor)),
            (&["doctor", "--help"], Some(Topic::Doctor)),
            (&["doctor", "239.1.1.1", "--frob", "--help"], Some(Topic::Doctor)),
        ] {
            assert_eq!(p(args), Ok(Command::Help(want)), "{args:?}");
        }
        assert_eq!(p(&["--version"]), Ok(Command::Version));
        assert_eq!(p(&["-V"]), Ok(Command::Version));
        assert_eq!(p(&["help", "frob"]), Err(Usage { msg: "help: unknown command 'frob'".into(), topic: None }));
        assert!(p(&["help", "gids", "doctor"]).is_err());
        // After "--", -h is an argument (here a second GROUP).
        assert!(matches!(p(&["doctor", "239.1.1.1", "--", "-h"]), Err(Usage { topic: Some(Topic::Doctor), .. })));
    }

    #[test]
    fn the_help_texts_describe_each_command_and_option() {
        // The top-level help says what each command does, in one line each.
        let lines: Vec<&str> = HELP.lines().collect();
        for c in ["gids", "doctor"] {
            let n = lines.iter().filter(|l| l.starts_with(&format!("  {c} "))).count();
            assert_eq!(n, 1, "one line describing {c}");
        }
        assert!(HELP.lines().any(|l| l.starts_with("usage: rsverbs gids")));
        for h in [HELP, GIDS_HELP, DOCTOR_HELP] {
            for o in ["--dev", "--port", "--help", "Exit status"] {
                assert!(h.contains(o), "{o} in {h}");
            }
        }
        assert!(GIDS_HELP.starts_with(GIDS_USAGE));
        assert!(DOCTOR_HELP.starts_with(DOCTOR_USAGE));
        assert!(DOCTOR_HELP.contains("--json") && DOCTOR_HELP.contains("InfiniBand"));
        assert_eq!(help(Some(Topic::Gids)), GIDS_HELP);
    }

    #[test]
    fn a_usage_error_is_short_and_names_the_commands_help() {
        let e = p(&["gids", "--frob"]).unwrap_err();
        let t = usage_text(&e);
        assert_eq!(t, format!("rsverbs: gids: unknown option '--frob'\n{GIDS_USAGE}\nTry 'rsverbs gids --help' for more."));
        let t = usage_text(&p(&[]).unwrap_err());
        assert_eq!(t.lines().nth(1), Some(USAGE));
        assert_eq!(t.lines().count(), 3, "{t}");
        assert!(t.ends_with("Try 'rsverbs --help' for more."));
    }

    #[test]
    fn selftest_takes_dev_port_json_and_report_in_every_form() {
        let st = |dev: Option<&str>, port: Option<u8>, json: bool, report: Option<&str>| Ok(Command::Selftest { dev: dev.map(String::from), port, json, report: report.map(String::from), limits: false, join: None });
        assert_eq!(p(&["selftest"]), st(None, None, false, None));
        assert_eq!(p(&["selftest", "rxe1:1", "--json"]), st(Some("rxe1"), Some(1), true, None));
        assert_eq!(p(&["selftest", "--report", "r.txt", "-drxe0"]), st(Some("rxe0"), None, false, Some("r.txt")));
        assert_eq!(p(&["selftest", "--report=r.json", "--json", "-p", "2"]), st(None, Some(2), true, Some("r.json")));
        assert_eq!(p(&["selftest", "rxe0", "-i1"]), st(Some("rxe0"), Some(1), false, None));
        assert_eq!(p(&["selftest", "--limits", "rxe0"]), Ok(Command::Selftest { dev: Some("rxe0".into()), port: None, json: false, report: None, limits: true, join: None }));
        assert_eq!(p(&["selftest", "--join", "239.77.5.9", "rxe1"]), Ok(Command::Selftest { dev: Some("rxe1".into()), port: None, json: false, report: None, limits: false, join: Some(core::net::Ipv4Addr::new(239, 77, 5, 9)) }));
        assert_eq!(p(&["selftest", "--join=239.77.5.9"]), Ok(Command::Selftest { dev: None, port: None, json: false, report: None, limits: false, join: Some(core::net::Ipv4Addr::new(239, 77, 5, 9)) }));
        assert_eq!(p(&["selftest", "-h"]), Ok(Command::Help(Some(Topic::Selftest))));
        assert_eq!(p(&["help", "selftest"]), Ok(Command::Help(Some(Topic::Selftest))));
        let t = Some(Topic::Selftest);
        for (args, msg) in [
            (&["selftest", "--report"][..], "selftest: --report needs a file name"),
            (&["selftest", "--report="], "selftest: --report needs a file name"),
            (&["selftest", "--limit"], "selftest: unknown option '--limit'"),
            (&["selftest", "--join"], "selftest: --join needs a group"),
            (&["selftest", "--join", "10.0.0.1"], "selftest: --join 10.0.0.1: not a multicast address (224.0.0.0/4)"),
            (&["selftest", "--join", "ff0e::1"], "selftest: --join ff0e::1: not an IPv4 address"),
            (&["selftest", "--join", "224.0.0.251"], "selftest: --join 224.0.0.251: 224.0.0.0/24 is the local network control block"),
            (&["selftest", "a", "b"], "selftest: at most one DEV[:PORT]"),
            (&["selftest", "rxe0", "-d", "rxe1"], "selftest: the device given twice (DEV and --dev)"),
            (&["selftest", "rxe0:1", "-p1"], "selftest: the port given twice (DEV:PORT and --port)"),
            (&["selftest", "rxe0:0"], "selftest: bad port number '0' (1..255)"),
        ] {
            assert_eq!(p(args), Err(Usage { msg: msg.into(), topic: t }), "{args:?}");
        }
        // --report is selftest's only.
        assert_eq!(p(&["gids", "--report", "x"]), Err(Usage { msg: "gids: unknown option '--report'".into(), topic: Some(Topic::Gids) }));
        assert!(SELFTEST_HELP.starts_with(SELFTEST_USAGE));
        for o in ["--dev", "--port", "--json", "--limits", "--join", "--report", "--help", "Exit status", "239.255.77.0/24", "ff1e::77:0/112"] {
            assert!(SELFTEST_HELP.contains(o), "{o}");
        }
        assert_eq!(HELP.lines().filter(|l| l.starts_with("  selftest ")).count(), 1);
    }

    #[test]
    fn a_non_utf8_argument_is_a_usage_error() {
        use std::os::unix::ffi::OsStringExt;
        let bad = std::ffi::OsString::from_vec(b"rxe\xff".to_vec());
        let e = strings(["gids".into(), bad]).unwrap_err();
        assert_eq!(e, "argument 2 is not UTF-8: 'rxe\u{fffd}'");
        assert_eq!(strings(["gids".into(), "rxe1".into()]), Ok(vec!["gids".to_string(), "rxe1".to_string()]));
    }
}
