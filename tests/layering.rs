//! The house rules of src/ (the library; src/tool is its own package),
//! read from the source text: no import cycle between modules, no import
//! from a lower layer into a higher one, and the helpers that must exist
//! once. A rule broken here names the file and the import.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The layers, lowest first: a module may import only from its own layer
/// (without a cycle) or from below.
const LAYERS: &[&[&str]] = &[
    &["abi", "error", "mgid", "memcheck", "os", "sys"], // struct mirror, errno, pure helpers, libc, raw syscalls
    &["uverbs"],                             // encoders, the syscalls, routes
    &["rdma_core", "env"],                   // release and provider knowledge, switches
    &["view"],                               // safe views of rdma-core objects
    &["sysfs", "gid", "mcast"],              // the verbs
    &["port", "select"],                     // a QP's port and netdevs, GID selection
    &["registry", "trace", "ipjoin"],        // the opt-in features
    &["hooks"],                              // the exports' one check and dispatch
    &["lifecycle", "capi"],                  // load/fork/unload, the C boundary
    &["safe", "runtime"],                    // the safe Rust API; without std, panic and malloc
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every library source file and its module path (`uverbs::route`).
fn modules() -> BTreeMap<String, PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in fs::read_dir(dir).expect("read src") {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "tool") {
                    walk(&p, out);
                }
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(&src(), &mut files);
    let mut m = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(src()).expect("under src").with_extension("");
        let mut parts: Vec<String> = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
        if parts.last().is_some_and(|l| l == "mod") {
            parts.pop();
        }
        let name = if parts == ["lib"] { "crate".to_owned() } else { parts.join("::") };
        m.insert(name, f);
    }
    m
}

/// The code of a file without its test module, comments and strings.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    let mut out = String::new();
    for line in text.lines() {
        let mut l = String::new();
        let mut in_str = false;
        let mut prev = ' ';
        for (i, c) in line.char_indices() {
            if !in_str && c == '/' && line[i..].starts_with("//") {
                break;
            }
            if c == '"' && prev != '\\' {
                in_str = !in_str;
            } else if !in_str {
                l.push(c);
            }
            prev = c;
        }
        out.push_str(&l);
        out.push('\n');
    }
    out
}

/// Expands `a::{b, c::d, self}` into `a::b`, `a::c::d`, `a`.
fn expand(path: &str) -> Vec<String> {
    let Some(open) = path.find('{') else { return vec![path.to_owned()] };
    let head = path[..open].trim_end_matches("::");
    let body = &path[open + 1..path.rfind('}').unwrap_or(path.len())];
    let mut items = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in body.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&body[start..]);
    let mut out = Vec::new();
    for it in items.into_iter().map(str::trim).filter(|s| !s.is_empty()) {
        let it = it.split(" as ").next().unwrap_or(it);
        if it == "self" {
            out.push(head.to_owned());
        } else {
            out.extend(expand(&format!("{head}::{it}")));
        }
    }
    out
}

/// The paths a file names: `crate::…`, `super::…`, and its own child
/// modules by their bare names.
fn paths(module: &str, code: &str, known: &BTreeMap<String, PathBuf>) -> Vec<String> {
    let parent = module.rsplit_once("::").map_or("crate", |p| p.0);
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < bytes.len() {
        if !ident(bytes[i]) || (i > 0 && (ident(bytes[i - 1]) || bytes[i - 1] == b':')) {
            i += 1;
            continue;
        }
        // A path starting here: identifiers, `::` and one brace group.
        let mut j = i;
        let mut depth = 0;
        while j < bytes.len() {
            let b = bytes[j];
            if ident(b) || b == b':' || (depth > 0 && (b == b',' || b.is_ascii_whitespace())) {
                j += 1;
            } else if b == b'{' && code[i..j].ends_with("::") {
                depth += 1;
                j += 1;
            } else if b == b'}' && depth > 0 {
                depth -= 1;
                j += 1;
            } else {
                break;
            }
        }
        let p = &code[i..j];
        i = j.max(i + 1);
        if !p.contains("::") {
            continue;
        }
        for e in expand(p) {
            let resolved = if let Some(rest) = e.strip_prefix("crate::") {
                rest.to_owned()
            } else if let Some(rest) = e.strip_prefix("super::") {
                if parent == "crate" { rest.to_owned() } else { format!("{parent}::{rest}") }
            } else {
                // A child module of this file, named bare.
                let child = if module == "crate" { e.clone() } else { format!("{module}::{e}") };
                let first = child.split("::").take(if module == "crate" { 1 } else { module.split("::").count() + 1 });
                let first: Vec<&str> = first.collect();
                if known.contains_key(&first.join("::")) { child } else { continue }
            };
            out.push(resolved);
        }
    }
    out
}

/// The module file a path lands in: its longest known prefix.
fn owner(path: &str, known: &BTreeMap<String, PathBuf>) -> Option<String> {
    let parts: Vec<&str> = path.split("::").collect();
    (1..=parts.len()).rev().map(|n| parts[..n].join("::")).find(|m| known.contains_key(m))
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let known = modules();
    let mut g = BTreeMap::new();
    for (m, f) in &known {
        if m == "crate" {
            continue;
        }
        let text = code(&fs::read_to_string(f).expect("read source"));
        let deps: BTreeSet<String> =
            paths(m, &text, &known).iter().filter_map(|p| owner(p, &known)).filter(|d| d != m && d != "crate").collect();
        g.insert(m.clone(), deps);
    }
    g
}

fn layer(module: &str) -> usize {
    let top = module.split("::").next().unwrap_or(module);
    LAYERS.iter().position(|l| l.contains(&top)).unwrap_or_else(|| panic!("module {top} is in no layer of tests/layering.rs"))
}

#[test]
fn every_module_has_a_layer() {
    for m in modules().keys().filter(|m| *m != "crate") {
        layer(m);
    }
}

#[test]
fn no_import_from_a_higher_layer() {
    let mut bad = Vec::new();
    for (m, deps) in graph() {
        for d in deps {
            if layer(&d) > layer(&m) {
                bad.push(format!("{m} (layer {}) imports {d} (layer {})", layer(&m), layer(&d)));
            }
        }
    }
    assert!(bad.is_empty(), "imports from a higher layer:\n{}", bad.join("\n"));
}

#[test]
fn no_import_cycle() {
    let g = graph();
    // Depth-first search; a back edge is a cycle.
    fn visit(
        m: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(m.to_owned(), 1);
        stack.push(m.to_owned());
        for d in g.get(m).into_iter().flatten() {
            match state.get(d.as_str()).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|s| s == d).unwrap_or(0);
                    let mut c = stack[at..].to_vec();
                    c.push(d.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(d, g, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(m.to_owned(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in g.keys() {
        if state.get(m.as_str()).copied().unwrap_or(0) == 0
            && let Some(c) = visit(m, &g, &mut state, &mut Vec::new())
        {
            panic!("import cycle: {}", c.join(" -> "));
        }
    }
}

/// The lines of library code (tests and comments left out) that contain
/// `needle`, as `module: line`.
fn code_lines_with(needle: &str) -> Vec<String> {
    let mut hits = Vec::new();
    for (m, f) in modules() {
        for l in code(&fs::read_to_string(&f).expect("read source")).lines() {
            if l.contains(needle) {
                hits.push(format!("{m}: {}", l.trim()));
            }
        }
    }
    hits
}

#[test]
fn only_lifecycle_registers_process_events() {
    for needle in ["\".init_array\"", "\".fini_array\"", "__register_atfork", "__cxa_finalize", "pthread_atfork"] {
        // code() drops strings: look for the section names by their attribute.
        let needle = needle.trim_matches('"');
        let hits: Vec<String> = modules()
            .into_iter()
            .flat_map(|(m, f)| {
                let text = fs::read_to_string(&f).expect("read source");
                let body = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("").to_owned();
                body.lines()
                    .filter(|l| !l.trim_start().starts_with("//") && l.contains(needle))
                    .map(|l| format!("{m}: {}", l.trim()))
                    .collect::<Vec<_>>()
            })
            .collect();
        assert!(hits.iter().all(|h| h.starts_with("lifecycle: ")), "{needle} outside lifecycle.rs: {hits:?}");
    }
}

#[test]
fn the_shared_helpers_exist_once() {
    for (needle, home) in [
        ("fn v4_mapped(", "mgid"),
        ("fn is_multicast(", "mgid"),
        ("fn secure_getenv(", "env"),
        ("fn c_field(", "abi"),
        ("struct Mgid", "mgid"),
        // rdma_cm's MGID of an IP group (safe::mgid_for_group wraps it).
        ("fn for_group(", "mgid"),
        ("struct QpKey", "view"),
        // What stands in for std (docs/building.md): one of each.
        ("fn read_file(", "os"),
        ("struct File(", "os"),
        ("struct Dir(", "os"),
        ("struct Once<", "os"),
        ("fn pid(", "os"),
        ("fn monotonic_us(", "os"),
        ("fn cpu_and_preemptions(", "os"),
    ] {
        let hits = code_lines_with(needle);
        assert!(hits.len() == 1 && hits[0].starts_with(&format!("{home}: ")), "{needle}: {hits:?}");
    }
    // The rsverbs command uses the library's, and has no copy of its own.
    // The packaged crate (cargo package: Cargo.toml.orig beside Cargo.toml)
    // does not ship the command, its own package: nothing to check there.
    let tool = src().join("tool");
    let packaged = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml.orig").exists();
    if packaged && !tool.exists() {
        return;
    }
    for e in fs::read_dir(&tool).expect("read src/tool") {
        let p = e.expect("dir entry").path();
        if p.extension().is_some_and(|x| x == "rs") {
            let text = code(&fs::read_to_string(&p).expect("read source"));
            assert!(!text.contains("fn v4_mapped(") && !text.contains("fn is_multicast("), "{} has its own copy", p.display());
        }
    }
}

#[test]
fn the_parser_sees_imports() {
    // The rules above are only as good as the parser: it must find these.
    let g = graph();
    let has = |m: &str, d: &str| g.get(m).is_some_and(|s| s.contains(d));
    assert!(has("capi", "hooks") && has("hooks", "trace") && has("trace", "registry"));
    assert!(has("uverbs::route", "uverbs::exec"), "super:: paths");
    assert!(has("trace", "trace::sink"), "child modules by bare name");
    assert!(has("uverbs", "uverbs::route"), "brace groups: {:?}", g.get("uverbs"));
    assert_eq!(expand("crate::uverbs::{self, route, route::Key}"), ["crate::uverbs", "crate::uverbs::route", "crate::uverbs::route::Key"]);
}

#[test]
fn modules_without_unsafe_code_forbid_it() {
    let known = modules();
    for (m, f) in &known {
        // A parent's attribute would also bind its children, some unsafe.
        let has_children = known.keys().any(|k| k.starts_with(&format!("{m}::"))) || m == "crate";
        let text = fs::read_to_string(f).expect("read source");
        let body = code(&text);
        if !has_children && !body.contains("unsafe") {
            assert!(text.contains("#![forbid(unsafe_code)]"), "{m} has no unsafe code: mark it #![forbid(unsafe_code)]");
        }
    }
}
