//! `rsverbs selftest`'s comparison and report (docs/selftest.md), apart
//! from any device so that the unit tests drive it with made-up answers:
//! an [`Answer`] is what one call gave back (value, `errno`, every byte of
//! the caller's buffer), a [`Case`] the answers of rdma-core and of rsverbs
//! to the same steps, a [`Section`] one port's (or the device's) cases, the
//! [`Report`] the host's facts and every section, printed as text or JSON.

use crate::json::Json;

/// What one call gave back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub ret: i64,
    pub errno: i32,
    /// The caller's buffer after the call, pre-filled with a pattern
    /// before it (empty for calls that write nothing).
    pub bytes: Vec<u8>,
}

/// One case: a name, and each library's answers to its steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    pub name: String,
    pub rdma_core: Vec<Answer>,
    pub rsverbs: Vec<Answer>,
}

impl Case {
    pub fn identical(&self) -> bool {
        self.rdma_core == self.rsverbs
    }
}

/// One port's cases (`port` Some), or the device's (`_ibv_query_gid_table`
/// reads every port at once: `port` None).
#[derive(Debug, Default)]
pub struct Section {
    pub port: Option<u8>,
    pub link_layer: String,
    pub cases: Vec<Case>,
    /// Cases not run, with the reason (no permission to create a QP...).
    pub skipped: Vec<String>,
    pub millis: u128,
    /// The heading, when not a port's or the table's (selftest --limits).
    pub title: Option<String>,
    /// What the cases found, beside identical or not (the limits reached).
    pub notes: Vec<String>,
}

impl Section {
    pub fn different(&self) -> usize {
        self.cases.iter().filter(|c| !c.identical()).count()
    }

    fn title(&self) -> String {
        if let Some(t) = &self.title {
            return t.clone();
        }
        match self.port {
            Some(p) => format!("port {p} ({})", self.link_layer),
            None => "all ports (_ibv_query_gid_table)".to_string(),
        }
    }
}

/// One device: its facts from sysfs, and its sections.
#[derive(Debug, Default)]
pub struct DeviceReport {
    pub name: String,
    pub facts: Vec<(&'static str, String)>,
    pub sections: Vec<Section>,
}

#[derive(Debug, Default)]
pub struct Report {
    /// kernel, rdma-core, libibverbs, rsverbs.
    pub host: Vec<(&'static str, String)>,
    pub devices: Vec<DeviceReport>,
    /// SIGINT or SIGTERM arrived: the cases after it were not run.
    pub interrupted: bool,
    /// The process's file descriptors after the run against before it;
    /// None when /proc/self/fd could not be read.
    pub fds: Option<Fds>,
}

/// What the run did to the process's file descriptors (`/proc/self/fd`,
/// each as "NUMBER -> TARGET"): every one it opened must be closed again,
/// and none it did not open closed (a library closing its caller's fd, the
/// device's own, is as wrong as one leaking its own).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Fds {
    /// Open before the run.
    pub before: usize,
    /// Open after it and not before.
    pub left_open: Vec<String>,
    /// Open before it and not after.
    pub closed: Vec<String>,
}

impl Fds {
    /// Compares two listings of (fd, target).
    pub fn compare(before: &[(i32, String)], after: &[(i32, String)]) -> Fds {
        let show = |(fd, t): &(i32, String)| format!("{fd} -> {t}");
        Fds {
            before: before.len(),
            left_open: after.iter().filter(|f| !before.contains(f)).map(show).collect(),
            closed: before.iter().filter(|f| !after.contains(f)).map(show).collect(),
        }
    }

    pub fn as_before(&self) -> bool {
        self.left_open.is_empty() && self.closed.is_empty()
    }
}

/// Exit status: 0 every case identical, 1 a difference, 2 usage or
/// environment (an interrupted run proves nothing either way).
pub const EXIT_SAME: i32 = 0;
pub const EXIT_DIFFERENT: i32 = 1;
pub const EXIT_ENV: i32 = 2;

impl Report {
    fn sections(&self) -> impl Iterator<Item = &Section> {
        self.devices.iter().flat_map(|d| d.sections.iter())
    }

    /// (run, identical, different) over every section.
    pub fn totals(&self) -> (usize, usize, usize) {
        let run: usize = self.sections().map(|s| s.cases.len()).sum();
        let diff: usize = self.sections().map(Section::different).sum();
        (run, run - diff, diff)
    }

    pub fn exit_code(&self) -> i32 {
        let (run, _, diff) = self.totals();
        if diff > 0 || self.fds.as_ref().is_some_and(|f| !f.as_before()) {
            EXIT_DIFFERENT
        } else if self.interrupted || run == 0 {
            EXIT_ENV
        } else {
            EXIT_SAME
        }
    }

    /// The report as text, for a person and for an issue.
    pub fn text(&self) -> String {
        let mut out = String::from("rsverbs selftest: rdma-core's answers against rsverbs' on this host\n");
        for (k, v) in &self.host {
            out.push_str(&format!("{k:<12} {v}\n"));
        }
        for d in &self.devices {
            out.push_str(&format!("\ndevice {}\n", d.name));
            for (k, v) in &d.facts {
                out.push_str(&format!("  {k:<10} {v}\n"));
            }
            for s in &d.sections {
                let n = s.cases.len();
                let diff = s.different();
                out.push_str(&format!(
                    "  {}: {n} cases, {} identical, {diff} different ({}.{:03} s)\n",
                    s.title(),
                    n - diff,
                    s.millis / 1000,
                    s.millis % 1000
                ));
                for c in s.cases.iter().filter(|c| !c.identical()) {
                    out.push_str(&difference_text(c));
                }
                for k in &s.notes {
                    out.push_str(&format!("    {k}\n"));
                }
                for k in &s.skipped {
                    out.push_str(&format!("    skipped: {k}\n"));
                }
            }
        }
        match &self.fds {
            Some(f) if f.as_before() => out.push_str(&format!("\nfds          as before the run ({} open)\n", f.before)),
            Some(f) => {
                out.push_str(&format!("\nfds          NOT as before the run ({} open before)\n", f.before));
                for x in &f.left_open {
                    out.push_str(&format!("  left open  {x}\n"));
                }
                for x in &f.closed {
                    out.push_str(&format!("  closed     {x}\n"));
                }
            }
            None => out.push_str("\nfds          not checked: /proc/self/fd is not readable\n"),
        }
        let (run, same, diff) = self.totals();
        let verdict = match self.exit_code() {
            EXIT_SAME => "every answer is rdma-core's",
            EXIT_DIFFERENT if diff == 0 => "the run's file descriptors are not as before it: please send this report (docs/selftest.md)",
            EXIT_DIFFERENT => "DIFFERENT from rdma-core: please send this report (docs/selftest.md)",
            _ if self.interrupted => "interrupted: not every case ran",
            _ => "no case ran",
        };
        out.push_str(&format!("\nresult: {run} cases, {same} identical, {diff} different: {verdict}\n"));
        out
    }

    pub fn json(&self) -> Json {
        let (run, same, diff) = self.totals();
        let host = Json::Obj(self.host.iter().map(|(k, v)| (*k, Json::str(v.clone()))).collect());
        let devices = self
            .devices
            .iter()
            .map(|d| {
                Json::Obj(vec![
                    ("name", Json::str(d.name.clone())),
                    ("facts", Json::Obj(d.facts.iter().map(|(k, v)| (*k, Json::str(v.clone()))).collect())),
                    ("sections", Json::Arr(d.sections.iter().map(section_json).collect())),
                ])
            })
            .collect();
        Json::Obj(vec![
            ("host", host),
            ("devices", Json::Arr(devices)),
            ("run", Json::Num(run as i64)),
            ("identical", Json::Num(same as i64)),
            ("different", Json::Num(diff as i64)),
            ("interrupted", Json::Bool(self.interrupted)),
            (
                "fds",
                self.fds.as_ref().map_or(Json::Null, |f| {
                    let list = |v: &[String]| Json::Arr(v.iter().map(|x| Json::str(x.clone())).collect());
                    Json::Obj(vec![("before", Json::Num(f.before as i64)), ("left_open", list(&f.left_open)), ("closed", list(&f.closed))])
                }),
            ),
            ("exit", Json::Num(i64::from(self.exit_code()))),
        ])
    }
}

fn section_json(s: &Section) -> Json {
    let diffs = s
        .cases
        .iter()
        .filter(|c| !c.identical())
        .map(|c| Json::Obj(vec![("case", Json::str(c.name.clone())), ("rdma_core", answers_json(&c.rdma_core)), ("rsverbs", answers_json(&c.rsverbs))]))
        .collect();
    Json::Obj(vec![
        ("title", Json::str(s.title())),
        ("port", s.port.map_or(Json::Null, |p| Json::Num(i64::from(p)))),
        ("link_layer", Json::str(s.link_layer.clone())),
        ("run", Json::Num(s.cases.len() as i64)),
        ("identical", Json::Num((s.cases.len() - s.different()) as i64)),
        ("different", Json::Num(s.different() as i64)),
        ("millis", Json::Num(i64::try_from(s.millis).unwrap_or(i64::MAX))),
        ("differences", Json::Arr(diffs)),
        ("notes", Json::Arr(s.notes.iter().map(|k| Json::str(k.clone())).collect())),
        ("skipped", Json::Arr(s.skipped.iter().map(|k| Json::str(k.clone())).collect())),
    ])
}

fn answers_json(a: &[Answer]) -> Json {
    Json::Arr(a.iter().map(|x| Json::Obj(vec![("ret", Json::Num(x.ret)), ("errno", Json::Num(i64::from(x.errno))), ("bytes", Json::str(hex(&x.bytes)))])).collect())
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The errno as a number and its name where it has one ("22 EINVAL").
pub fn errno_text(e: i32) -> String {
    match errno_name(e) {
        Some(n) => format!("{e} {n}"),
        None => e.to_string(),
    }
}

fn errno_name(e: i32) -> Option<&'static str> {
    Some(match e {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EIO => "EIO",
        libc::EBADF => "EBADF",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::ENOTTY => "ENOTTY",
        libc::ENOSPC => "ENOSPC",
        libc::ERANGE => "ERANGE",
        libc::ENOSYS => "ENOSYS",
        libc::ENODATA => "ENODATA",
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        libc::ENETRESET => "ENETRESET",
        libc::ETIMEDOUT => "ETIMEDOUT",
        crate::selftest::SENTINEL => "(untouched)",
        _ => return None,
    })
}

/// One step's answer in one line; the bytes from `from` on, 32 at most.
fn answer_text(a: &Answer, from: Option<usize>) -> String {
    let mut s = format!("ret={} errno={}", a.ret, errno_text(a.errno));
    if let Some(off) = from {
        let end = (off + 32).min(a.bytes.len());
        s.push_str(&format!(" bytes[{off}..{end}]={}", hex(a.bytes.get(off..end).unwrap_or_default())));
    }
    s
}

/// A differing case: each step where the answers differ, both answers.
fn difference_text(c: &Case) -> String {
    let mut out = format!("    DIFFERENT {}\n", c.name);
    let steps = c.rdma_core.len().max(c.rsverbs.len());
    for i in 0..steps {
        let (a, b) = (c.rdma_core.get(i), c.rsverbs.get(i));
        if a == b {
            continue;
        }
        // The first byte that differs, from a 16-byte boundary.
        let from = match (a, b) {
            (Some(a), Some(b)) if a.bytes != b.bytes => {
                let first = a.bytes.iter().zip(&b.bytes).position(|(x, y)| x != y).unwrap_or(a.bytes.len().min(b.bytes.len()));
                Some(first / 16 * 16)
            }
            _ => None,
        };
        let show = |x: Option<&Answer>| x.map_or("(no such step)".to_string(), |x| answer_text(x, from));
        let step = if steps > 1 { format!(" step {}", i + 1) } else { String::new() };
        out.push_str(&format!("      rdma-core{step}: {}\n      rsverbs{step}:   {}\n", show(a), show(b)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ans(ret: i64, errno: i32, bytes: &[u8]) -> Answer {
        Answer { ret, errno, bytes: bytes.to_vec() }
    }

    fn case(name: &str, a: Vec<Answer>, b: Vec<Answer>) -> Case {
        Case { name: name.into(), rdma_core: a, rsverbs: b }
    }

    fn report(cases: Vec<Case>) -> Report {
        let s = Section { port: Some(1), link_layer: "Ethernet".into(), cases, skipped: vec![], millis: 1234, title: None, notes: vec![] };
        Report {
            host: vec![("kernel", "6.1.0".into()), ("rsverbs", "0.1.0".into())],
            devices: vec![DeviceReport { name: "rxe0".into(), facts: vec![("fw_ver", "0.0.0".into())], sections: vec![s] }],
            interrupted: false,
            fds: Some(Fds { before: 5, ..Default::default() }),
        }
    }

    #[test]
    fn value_errno_and_every_byte_count() {
        let base = ans(0, 0x5a5a, &[1, 2, 3]);
        assert!(case("same", vec![base.clone()], vec![base.clone()]).identical());
        for other in [ans(-1, 0x5a5a, &[1, 2, 3]), ans(0, 22, &[1, 2, 3]), ans(0, 0x5a5a, &[1, 2, 4]), ans(0, 0x5a5a, &[1, 2])] {
            assert!(!case("x", vec![base.clone()], vec![other.clone()]).identical(), "{other:?}");
        }
        // A missing step is a difference too.
        assert!(!case("x", vec![base.clone(), base.clone()], vec![base.clone()]).identical());
    }

    #[test]
    fn all_identical_is_exit_0_and_says_so() {
        let a = ans(0, 0x5a5a, &[0; 16]);
        let r = report(vec![case("ibv_query_gid index 0", vec![a.clone()], vec![a.clone()]); 3]);
        assert_eq!(r.totals(), (3, 3, 0));
        assert_eq!(r.exit_code(), 0);
        let t = r.text();
        assert!(t.contains("port 1 (Ethernet): 3 cases, 3 identical, 0 different (1.234 s)"), "{t}");
        assert!(t.contains("kernel       6.1.0") && t.contains("  fw_ver     0.0.0"), "{t}");
        assert!(t.ends_with("result: 3 cases, 3 identical, 0 different: every answer is rdma-core's\n"), "{t}");
        assert!(!t.contains("DIFFERENT"));
    }

    #[test]
    fn a_difference_is_exit_1_named_with_both_answers() {
        let mut a = vec![0x77u8; 64];
        let mut b = a.clone();
        a[40] = 1;
        b[40] = 2;
        let r = report(vec![
            case("ok", vec![ans(0, 0x5a5a, &[])], vec![ans(0, 0x5a5a, &[])]),
            case("ibv_query_gid port 0", vec![ans(-1, 22, &[])], vec![ans(-1, 1, &[])]),
            case("attach then detach", vec![ans(0, 0x5a5a, &a), ans(0, 0x5a5a, &[])], vec![ans(0, 0x5a5a, &b), ans(0, 0x5a5a, &[])]),
        ]);
        assert_eq!(r.totals(), (3, 1, 2));
        assert_eq!(r.exit_code(), 1);
        let t = r.text();
        assert!(t.contains("    DIFFERENT ibv_query_gid port 0\n      rdma-core: ret=-1 errno=22 EINVAL\n      rsverbs:   ret=-1 errno=1 EPERM\n"), "{t}");
        // Only the step that differs, its bytes from the 16-byte line of the first difference.
        let want = format!("      rdma-core step 1: ret=0 errno=23130 (untouched) bytes[32..64]={}01{}\n", "77".repeat(8), "77".repeat(23));
        assert!(t.contains(&want), "{t}");
        assert!(!t.contains("step 2"), "{t}");
        assert!(t.contains("result: 3 cases, 1 identical, 2 different: DIFFERENT"), "{t}");
        let mut j = String::new();
        r.json().write(&mut j);
        assert!(j.contains(r#""case":"ibv_query_gid port 0","rdma_core":[{"ret":-1,"errno":22,"bytes":""}],"rsverbs":[{"ret":-1,"errno":1,"bytes":""}]"#), "{j}");
        assert!(j.contains(r#""run":3,"identical":1,"different":2,"interrupted":false,"fds":{"before":5,"left_open":[],"closed":[]},"exit":1}"#), "{j}");
    }

    #[test]
    fn interrupted_or_nothing_run_is_exit_2_unless_a_difference() {
        let mut r = report(vec![case("a", vec![ans(0, 0, &[])], vec![ans(0, 0, &[])])]);
        r.interrupted = true;
        assert_eq!(r.exit_code(), 2);
        assert!(r.text().contains("interrupted: not every case ran"));
        r.devices[0].sections[0].cases.push(case("b", vec![ans(0, 0, &[])], vec![ans(1, 0, &[])]));
        assert_eq!(r.exit_code(), 1);
        let empty = report(vec![]);
        assert_eq!(empty.exit_code(), 2);
    }

    #[test]
    fn skipped_cases_are_listed_with_the_reason() {
        let mut r = report(vec![case("a", vec![ans(0, 0, &[])], vec![ans(0, 0, &[])])]);
        r.devices[0].sections[0].skipped.push("attach and detach: ibv_create_qp: Permission denied".into());
        assert!(r.text().contains("    skipped: attach and detach: ibv_create_qp: Permission denied\n"));
        let mut j = String::new();
        r.json().write(&mut j);
        assert!(j.contains(r#""skipped":["attach and detach: ibv_create_qp: Permission denied"]"#), "{j}");
    }

    #[test]
    fn an_fd_left_open_or_closed_by_the_run_is_exit_1_and_named() {
        let a = ans(0, 0x5a5a, &[]);
        let mut r = report(vec![case("a", vec![a.clone()], vec![a.clone()])]);
        assert!(r.text().contains("\nfds          as before the run (5 open)\n"), "{}", r.text());
        let before = [(0, "/dev/null".to_string()), (3, "/dev/infiniband/uverbs0".to_string())];
        let after = [(0, "/dev/null".to_string()), (4, "socket:[77]".to_string())];
        r.fds = Some(Fds::compare(&before, &after));
        assert_eq!(r.exit_code(), 1);
        let t = r.text();
        assert!(t.contains("fds          NOT as before the run (2 open before)\n  left open  4 -> socket:[77]\n  closed     3 -> /dev/infiniband/uverbs0\n"), "{t}");
        assert!(t.contains("result: 1 cases, 1 identical, 0 different: the run's file descriptors are not as before it"), "{t}");
        let mut j = String::new();
        r.json().write(&mut j);
        assert!(j.contains(r#""fds":{"before":2,"left_open":["4 -> socket:[77]"],"closed":["3 -> /dev/infiniband/uverbs0"]},"exit":1}"#), "{j}");
        assert!(Fds::compare(&before, &before).as_before());
    }
}
