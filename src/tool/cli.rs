//! The command line: `rsverbs gids [DEV[:PORT]]`,
//! `rsverbs doctor GROUP [--dev DEV] [--port N] [--json]`.

pub const USAGE: &str = "usage: rsverbs gids [DEV[:PORT]]
       rsverbs doctor GROUP [--dev|-d DEV] [--port|-i N] [--json]
       rsverbs --help | --version
GROUP: an IPv4 or IPv6 multicast address, or an MGID (::ffff:239.1.1.1).
Exit status: 0 ready (doctor) or done, 1 not ready, 2 bad usage.
See rsverbs(1).";

#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Help,
    Version,
    Gids { dev: Option<String>, port: Option<u8> },
    Doctor { group: String, dev: Option<String>, port: Option<u8>, json: bool },
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

/// Parses the arguments after the program name; Err is a usage error.
pub fn parse(args: &[String]) -> Result<Command, String> {
    let Some(verb) = args.first() else {
        return Err("no command given".into());
    };
    let rest = &args[1..];
    match verb.as_str() {
        "-h" | "--help" | "help" => Ok(Command::Help),
        "-V" | "--version" => Ok(Command::Version),
        "gids" => gids(rest),
        "doctor" => doctor(rest),
        other => Err(format!("unknown command '{other}'")),
    }
}

fn gids(rest: &[String]) -> Result<Command, String> {
    match rest {
        [] => Ok(Command::Gids { dev: None, port: None }),
        [a] if a.starts_with('-') => Err(format!("gids: unknown option '{a}'")),
        [a] => match a.split_once(':') {
            Some((d, p)) => Ok(Command::Gids { dev: Some(d.to_string()), port: Some(port(p)?) }),
            None => Ok(Command::Gids { dev: Some(a.clone()), port: None }),
        },
        _ => Err("gids: at most one DEV[:PORT]".into()),
    }
}

fn doctor(rest: &[String]) -> Result<Command, String> {
    let (mut group, mut dev, mut port_n, mut json) = (None, None, None, false);
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--json" => json = true,
            "--dev" | "-d" => dev = Some(it.next().ok_or("doctor: --dev needs a device name")?.clone()),
            "--port" | "-i" => port_n = Some(port(it.next().ok_or("doctor: --port needs a number")?)?),
            o if o.starts_with('-') && o.len() > 1 && o.parse::<f64>().is_err() => return Err(format!("doctor: unknown option '{o}'")),
            g if group.is_none() => group = Some(g.to_string()),
            g => return Err(format!("doctor: more than one GROUP ('{g}')")),
        }
    }
    let group = group.ok_or("doctor: GROUP is missing")?;
    Ok(Command::Doctor { group, dev, port: port_n, json })
}

fn port(s: &str) -> Result<u8, String> {
    s.parse::<u8>().ok().filter(|&p| p > 0).ok_or_else(|| format!("bad port number '{s}' (1..255)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(a: &[&str]) -> Result<Command, String> {
        parse(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn parses_and_rejects() {
        assert_eq!(p(&["gids", "rxe1:1"]), Ok(Command::Gids { dev: Some("rxe1".into()), port: Some(1) }));
        assert_eq!(
            p(&["doctor", "239.1.1.1", "--dev", "rxe1", "--json"]),
            Ok(Command::Doctor { group: "239.1.1.1".into(), dev: Some("rxe1".into()), port: None, json: true })
        );
        for bad in [&["doctor"][..], &["doctor", "g", "--bogus"], &["doctor", "g", "--port", "0"], &["doctor", "g", "--dev"], &["gids", "x:y"], &["frob"], &[]] {
            assert!(p(bad).is_err(), "{bad:?}");
        }
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
