//! The floors of the code (docs/architecture.md): a module may import only
//! from floors below its own. This test reads every source file and fails,
//! naming file, line and import, when a forbidden import comes back, so the
//! import circles the architecture removed (the schema calling the engine,
//! the library calling the command line, report and study calling each
//! other) cannot return unnoticed.
//!
//! Within a floor (a room), its files form no import circle either: the
//! second part builds the graph of file-to-file imports of each room and
//! fails, naming the files, on any circle (a file that imports another that
//! imports it back, however far round).

use std::path::{Path, PathBuf};

/// Lowest first. `units` and `error` are leaves; `cli` is the roof.
const FLOORS: &[(&str, u32)] = &[
    ("units", 0),
    ("error", 0),
    ("model", 1),
    ("measure", 2),
    ("kv", 2),
    ("engine", 3),
    ("workload", 4),
    ("lab", 5),
    ("program", 6),
    ("control", 7),
    ("hostops", 8),
    // The two processes: neither imports the other.
    ("agent", 9),
    ("controller", 9),
    ("study", 10),
    ("report", 11),
    ("history", 12),
    ("cli", 13),
    ("fuzz", 14),
];

fn rank(floor: &str) -> Option<u32> {
    FLOORS.iter().find(|(f, _)| *f == floor).map(|(_, r)| *r)
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The floor a source file belongs to: `src/model/spec.rs` -> model.
fn floor_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_string_lossy();
    Some(first.trim_end_matches(".rs").to_string())
}

/// Every top-level module named after `crate::` in `text`, with its line:
/// `crate::a::b`, and each member of `crate::{a, b::c}`.
fn imports(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut rest = text;
    let mut offset = 0;
    while let Some(i) = rest.find("crate::") {
        let at = offset + i;
        let line = text[..at].matches('\n').count() + 1;
        let after = &rest[i + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            let mut end = group.len();
            let mut level = 0;
            for (k, ch) in group.char_indices() {
                match ch {
                    '{' => level += 1,
                    '}' if level == 0 => {
                        end = k;
                        break;
                    }
                    '}' => level -= 1,
                    _ => {}
                }
            }
            let mut depth = 0;
            let mut item = String::new();
            for ch in group[..end].chars().chain(std::iter::once(',')) {
                match ch {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        let name: String = item
                            .trim()
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        if !name.is_empty() {
                            out.push((line, name));
                        }
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(ch);
            }
        } else {
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.push((line, name));
        }
        offset = at + "crate::".len();
        rest = &text[offset..];
    }
    out
}

fn violations(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    sources(src, &mut files);
    files.sort();
    let mut bad = Vec::new();
    for f in files {
        let Some(floor) = floor_of(src, &f) else {
            continue;
        };
        if floor == "lib" || floor == "main" {
            continue;
        }
        let Some(own) = rank(&floor) else {
            bad.push(format!(
                "{}: floor `{floor}` is not in FLOORS (tests/layers.rs and docs/architecture.md)",
                f.display()
            ));
            continue;
        };
        // Comments may name any floor; only code counts.
        let text: String = std::fs::read_to_string(&f)
            .unwrap()
            .lines()
            .map(|l| {
                if l.trim_start().starts_with("//") {
                    ""
                } else {
                    l
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        for (line, target) in imports(&text) {
            if target == floor {
                continue;
            }
            match rank(&target) {
                Some(r) if r < own => {}
                Some(_) => bad.push(format!(
                    "{}:{line}: `{floor}` imports `crate::{target}`, which is not below it",
                    f.display()
                )),
                None => bad.push(format!(
                    "{}:{line}: `crate::{target}` is not a floor",
                    f.display()
                )),
            }
        }
    }
    bad
}

#[test]
fn every_floor_imports_only_floors_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let bad = violations(&src);
    assert!(bad.is_empty(), "forbidden imports:\n{}", bad.join("\n"));
}

#[test]
fn the_checker_sees_grouped_and_plain_imports() {
    let text = "use crate::model::spec::TestSpec;\nuse crate::{cli::x, engine::{a, b}, units};\nfn f() { crate::study::go() }";
    let names: Vec<String> = imports(text).into_iter().map(|(_, n)| n).collect();
    assert_eq!(names, ["model", "cli", "engine", "units", "study"]);
    let dir = std::env::temp_dir().join(format!("linerate-layers-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("model")).unwrap();
    std::fs::write(
        dir.join("model/bad.rs"),
        "use crate::engine::tls;\nuse crate::units;\n",
    )
    .unwrap();
    let bad = violations(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(bad[0].ends_with("bad.rs:1: `model` imports `crate::engine`, which is not below it"));
}

// ---- Within a room: no import circle between its files ----
//
// A file's imports of its own room name other files: `crate::room::a::b`,
// `super::x`, `self::x`, and each member of a `{...}` group. A path that
// names a file's item is an edge to that file; one that stops at a
// directory module is an edge to each of its files; one that names an
// item of a directory module is an edge to its `mod.rs`.

use std::collections::{BTreeMap, BTreeSet};

/// File -> the files of its room it imports (paths relative to `src`).
type Graph = BTreeMap<String, BTreeSet<String>>;

/// The text with comment lines blanked (line numbers kept).
fn code(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.trim_start().starts_with("//") {
                ""
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// For each line, how many inline modules (`mod tests { ... }`) it is in.
/// The code is rustfmt-formatted, so a module closes with a `}` at the
/// indentation of its `mod` line.
fn inline_depths(text: &str) -> Vec<usize> {
    let mut open: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for l in text.lines() {
        let t = l.trim_start();
        let indent = &l[..l.len() - t.len()];
        if open.last().is_some_and(|i| l == format!("{i}}}")) {
            open.pop();
            out.push(open.len() + 1);
            continue;
        }
        out.push(open.len());
        let head = t
            .strip_prefix("pub(crate) ")
            .or_else(|| t.strip_prefix("pub(super) "))
            .or_else(|| t.strip_prefix("pub "))
            .unwrap_or(t);
        if let Some(rest) = head.strip_prefix("mod ") {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && rest[name.len()..].trim() == "{" {
                open.push(indent.to_string());
            }
        }
    }
    out
}

/// The paths of a use tree at the start of `s` (what follows `crate::`,
/// `super::` or `self::`): `a::b`, `a::{b, c::{self, d}}` -> [a, b], [a, c],
/// [a, c, d]. `self` in a group names its prefix; a glob ends the path.
fn use_paths(s: &str) -> Vec<Vec<String>> {
    fn tree(s: &[char], i: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
        let mut path = prefix.to_vec();
        loop {
            while *i < s.len() && s[*i].is_whitespace() {
                *i += 1;
            }
            if *i < s.len() && s[*i] == '{' {
                *i += 1;
                loop {
                    tree(s, i, &path, out);
                    // Past an `as` rename or anything else, to `,` or `}`.
                    let mut depth = 0;
                    while *i < s.len() {
                        match s[*i] {
                            '{' => depth += 1,
                            '}' if depth == 0 => break,
                            '}' => depth -= 1,
                            ',' if depth == 0 => break,
                            _ => {}
                        }
                        *i += 1;
                    }
                    if *i >= s.len() || s[*i] == '}' {
                        *i += 1;
                        return;
                    }
                    *i += 1; // ','
                    let mut j = *i;
                    while j < s.len() && s[j].is_whitespace() {
                        j += 1;
                    }
                    if j < s.len() && s[j] == '}' {
                        *i = j + 1;
                        return;
                    }
                }
            }
            if *i < s.len() && s[*i] == '*' {
                *i += 1;
                path.push("*".into());
                out.push(path);
                return;
            }
            let start = *i;
            while *i < s.len() && (s[*i].is_alphanumeric() || s[*i] == '_') {
                *i += 1;
            }
            let name: String = s[start..*i].iter().collect();
            // `self` in a group names its prefix.
            if !name.is_empty() && name != "self" {
                path.push(name);
            }
            if s.get(*i) == Some(&':') && s.get(*i + 1) == Some(&':') {
                *i += 2;
                continue;
            }
            if !path.is_empty() {
                out.push(path);
            }
            return;
        }
    }
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    tree(&chars, &mut 0, &[], &mut out);
    out
}

/// The module path of a file: `room/a/b.rs` -> [room, a, b],
/// `room/a/mod.rs` -> [room, a].
fn module_of(rel: &str) -> Vec<String> {
    let mut m: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if m.last().is_some_and(|x| x == "mod") {
        m.pop();
    }
    m
}

/// The files a module path of a room names: see the head of this part.
fn resolve(src: &Path, path: &[String]) -> Vec<PathBuf> {
    let mut dir = src.join(&path[0]);
    if !dir.is_dir() {
        return vec![];
    }
    for seg in &path[1..] {
        if seg == "*" {
            // A glob of a directory module: the items of its mod.rs.
            return vec![dir.join("mod.rs")];
        }
        let file = dir.join(format!("{seg}.rs"));
        if file.is_file() {
            return vec![file];
        }
        if dir.join(seg).is_dir() {
            dir = dir.join(seg);
            continue;
        }
        return vec![dir.join("mod.rs")];
    }
    let mut all = Vec::new();
    sources(&dir, &mut all);
    all
}

/// Where `word` begins a path in `text` (not inside another path or name).
fn starts_of<'a>(text: &'a str, word: &'a str) -> impl Iterator<Item = usize> + 'a {
    text.match_indices(word).map(|(i, _)| i).filter(move |&i| {
        let before = text[..i].chars().next_back();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
    })
}

/// The files of its own room that the file `rel` (under `src`) imports.
fn file_imports(src: &Path, rel: &str, text: &str) -> BTreeSet<String> {
    let text = code(text);
    let room = rel.split('/').next().unwrap_or_default().to_string();
    let own = module_of(rel);
    let depths = inline_depths(&text);
    let depth_at = |at: usize| depths[text[..at].matches('\n').count()];
    let mut paths: Vec<Vec<String>> = Vec::new();
    for at in starts_of(&text, "crate::") {
        paths.extend(use_paths(&text[at + "crate::".len()..]));
    }
    for at in starts_of(&text, "super::") {
        // Inside an inline module, the first `super` is the file itself.
        let mut base = own.clone();
        base.extend(std::iter::repeat_n(String::new(), depth_at(at)));
        let mut rest = &text[at..];
        while let Some(r) = rest.strip_prefix("super::") {
            base.pop();
            rest = r;
        }
        if base.iter().any(|s| s.is_empty()) {
            continue;
        }
        for p in use_paths(rest) {
            paths.push(base.iter().cloned().chain(p).collect());
        }
    }
    for at in starts_of(&text, "self::") {
        if depth_at(at) > 0 {
            continue;
        }
        for p in use_paths(&text[at + "self::".len()..]) {
            paths.push(own.iter().cloned().chain(p).collect());
        }
    }
    paths
        .into_iter()
        .filter(|p| p.first() == Some(&room) && p.len() > 1)
        .flat_map(|p| resolve(src, &p))
        .filter_map(|f| {
            let r = f
                .strip_prefix(src)
                .ok()?
                .to_string_lossy()
                .replace('\\', "/");
            (r != rel).then_some(r)
        })
        .collect()
}

/// Every file of every room with the files of its room it imports.
fn file_graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    sources(src, &mut files);
    let mut g = Graph::new();
    for f in files {
        let rel = f
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if !rel.contains('/') {
            // A room of one file (units.rs) has no files to circle.
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        g.insert(rel.clone(), file_imports(src, &rel, &text));
    }
    g
}

/// An import circle: the files that reach one another (in name order),
/// and a shortest circle through the first of them, in import order with
/// the first file again at the end.
#[derive(Debug, PartialEq)]
struct Circle {
    files: Vec<String>,
    path: Vec<String>,
}

/// The import circles of a graph, one per group of files that reach one
/// another.
fn cycles(g: &Graph) -> Vec<Circle> {
    let reach = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(n) = todo.pop() {
            for m in g.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    todo.push(m.clone());
                }
            }
        }
        seen
    };
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    for n in g.keys() {
        if done.contains(n) || !reach(n).contains(n) {
            continue;
        }
        // Its group: the files it reaches that reach it back.
        let group: BTreeSet<String> = reach(n)
            .into_iter()
            .filter(|m| m == n || reach(m).contains(n))
            .collect();
        done.extend(group.iter().cloned());
        // A shortest way back to n, breadth first.
        let mut prev: BTreeMap<String, String> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([n.clone()]);
        'search: while let Some(x) = queue.pop_front() {
            for y in g.get(&x).into_iter().flatten() {
                if !group.contains(y) {
                    continue;
                }
                if y == n {
                    let mut path = vec![n.clone()];
                    let mut at = x.clone();
                    while at != *n {
                        path.push(at.clone());
                        at = prev[&at].clone();
                    }
                    path[1..].reverse();
                    path.push(n.clone());
                    out.push(Circle {
                        files: group.iter().cloned().collect(),
                        path,
                    });
                    break 'search;
                }
                if !prev.contains_key(y) {
                    prev.insert(y.clone(), x.clone());
                    queue.push_back(y.clone());
                }
            }
        }
    }
    out
}

#[test]
fn no_import_circle_between_the_files_of_a_room() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found: Vec<String> = cycles(&file_graph(&src))
        .iter()
        .map(|c| format!("{} (files: {})", c.path.join(" -> "), c.files.join(", ")))
        .collect();
    assert!(
        found.is_empty(),
        "import circles between the files of a room (move the type or function that closes each to where it belongs):\n{}",
        found.join("\n")
    );
}

fn graph(edges: &[(&str, &str)]) -> Graph {
    let mut g = Graph::new();
    for (a, b) in edges {
        g.entry(a.to_string()).or_default().insert(b.to_string());
        g.entry(b.to_string()).or_default();
    }
    g
}

#[test]
fn the_cycle_finder_names_each_circle_once() {
    // a -> b -> c -> a is a circle; d only leads into it, e hangs off it.
    let g = graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("d", "a"), ("c", "e")]);
    assert_eq!(
        cycles(&g),
        [Circle {
            files: vec!["a".into(), "b".into(), "c".into()],
            path: vec!["a".into(), "b".into(), "c".into(), "a".into()],
        }]
    );
    // The shortest way round: a -> c -> a, not a -> b -> c -> a.
    let g = graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("a", "c")]);
    assert_eq!(cycles(&g)[0].path, ["a", "c", "a"]);
    // Two separate circles are two findings.
    let g = graph(&[("a", "b"), ("b", "a"), ("x", "y"), ("y", "x"), ("b", "x")]);
    let paths: Vec<Vec<String>> = cycles(&g).into_iter().map(|c| c.path).collect();
    assert_eq!(paths, [["a", "b", "a"], ["x", "y", "x"]]);
    // No circle: a diamond and a chain.
    let g = graph(&[("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("d", "e")]);
    assert!(cycles(&g).is_empty());
    assert!(cycles(&Graph::new()).is_empty());
}

#[test]
fn use_trees_become_paths() {
    let p = |s: &str| -> Vec<String> { use_paths(s).iter().map(|p| p.join("::")).collect() };
    assert_eq!(
        p("report::render::plot::svg(&c)"),
        ["report::render::plot::svg"]
    );
    assert_eq!(
        p("a::{b, c::{self, d as e}, f::*};"),
        ["a::b", "a::c", "a::c::d", "a::f::*"]
    );
    assert_eq!(p("a::{\n    b,\n    c,\n};"), ["a::b", "a::c"]);
    assert_eq!(p("units::fmt_rate,"), ["units::fmt_rate"]);
}

#[test]
fn the_file_graph_follows_crate_super_self_and_groups() {
    let dir = std::env::temp_dir().join(format!("linerate-files-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("r/d")).unwrap();
    let write = |f: &str, text: &str| std::fs::write(dir.join(f), text).unwrap();
    write(
        "r/mod.rs",
        "pub mod a;\npub mod b;\npub mod c;\npub mod d;\n",
    );
    // An inline module's `super` is its own file: no edge.
    write(
        "r/a.rs",
        "use super::b::X;\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
    );
    // A directory module (`d`, through `self`) counts as its files.
    write(
        "r/b.rs",
        "use crate::r::{\n    c,\n    d::{self, E},\n};\npub struct X;\n",
    );
    write("r/c.rs", "// use crate::r::a; (a comment)\npub fn f() {}\n");
    write("r/d/mod.rs", "pub mod e;\npub use self::e::E;\n");
    write("r/d/e.rs", "pub struct E;\nfn g() { crate::r::a::h() }\n");
    let g = file_graph(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    let to = |f: &str| -> Vec<&str> { g[f].iter().map(String::as_str).collect() };
    assert_eq!(to("r/a.rs"), ["r/b.rs"]);
    assert_eq!(to("r/b.rs"), ["r/c.rs", "r/d/e.rs", "r/d/mod.rs"]);
    assert!(to("r/c.rs").is_empty());
    assert_eq!(to("r/d/mod.rs"), ["r/d/e.rs"]);
    assert_eq!(to("r/d/e.rs"), ["r/a.rs"]);
    let c = cycles(&g);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].path, ["r/a.rs", "r/b.rs", "r/d/e.rs", "r/a.rs"]);
    assert_eq!(c[0].files, ["r/a.rs", "r/b.rs", "r/d/e.rs", "r/d/mod.rs"]);
}

/// The report's own floors, lowest first: analysis never imports render,
/// and neither imports the pipeline that runs them.
const REPORT_FLOORS: &[(&str, u32)] = &[
    ("report/analysis/", 0),
    ("report/render/", 1),
    ("report/pipeline.rs", 2),
];

fn report_floor(file: &str) -> Option<u32> {
    REPORT_FLOORS
        .iter()
        .find(|(p, _)| file.starts_with(p))
        .map(|(_, r)| *r)
}

#[test]
fn the_report_imports_analysis_then_render_then_pipeline() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut bad = Vec::new();
    for (file, to) in file_graph(&src) {
        let Some(own) = report_floor(&file) else {
            continue;
        };
        for t in to {
            if report_floor(&t).is_some_and(|r| r > own) {
                bad.push(format!("{file} imports {t}, which is above it"));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

// ---- Ratchets for the redesign (issue "one shape for every kind of test"):
// the counts below may only go down. When a change lowers one, lower the
// ceiling with it; a change that raises one fails here, naming the lines.

/// Production lines of `src/` (comments, inline test modules, `tests.rs`
/// files and `tests/` folders left out), with their file relative to
/// `src/` and line number.
fn production_lines(src: &Path) -> Vec<(String, usize, String)> {
    let mut files = Vec::new();
    sources(src, &mut files);
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let rel = f.strip_prefix(src).unwrap().display().to_string();
        if rel.ends_with("/tests.rs") || rel.contains("/tests/") {
            continue;
        }
        let text = code(&std::fs::read_to_string(&f).unwrap());
        let depths = inline_depths(&text);
        for (i, l) in text.lines().enumerate() {
            if depths[i] == 0 && !l.trim().is_empty() && !l.trim_start().starts_with("use ") {
                out.push((rel.clone(), i + 1, l.to_string()));
            }
        }
    }
    out
}

/// Whether a line branches on, or names, a test kind's identity: a variant
/// of `Workload`, the `RunsAs` dispatch, or one of the helpers that restate
/// a plug-in's pattern or options.
fn names_a_kind(l: &str) -> bool {
    // A kind by its name (`Workload::named("rr")`) or as an enum's variant
    // (`Workload::Rr`, as it was); `Workload::DEFAULT` is neither.
    let variant = l.match_indices("Workload::").any(|(at, m)| {
        let rest = &l[at + m.len()..];
        let ident: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        ident == "named"
            || (ident.starts_with(|c: char| c.is_ascii_uppercase())
                && ident.chars().any(|c| c.is_ascii_lowercase()))
    });
    variant
        || [
            "RunsAs::",
            ".runs_as(",
            ".is_udp(",
            ".per_connection(",
            ".is_program(",
            "not_for(",
        ]
        .iter()
        .any(|p| l.contains(p))
}

#[test]
fn no_place_outside_the_registry_names_a_test_kind() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lines = production_lines(&src);
    let kind: Vec<String> = lines
        .iter()
        .filter(|(f, _, l)| !f.starts_with("workload/") && names_a_kind(l))
        .map(|(f, n, l)| format!("{f}:{n}: {}", l.trim()))
        .collect();
    // The kind is asked (`Kind::composite`, `run_here`, `needs`): no
    // dispatch table on how a kind runs is left, and none may come back.
    let runs_as: Vec<String> = lines
        .iter()
        .filter(|(_, _, l)| l.contains("RunsAs") || l.contains(".runs_as("))
        .map(|(f, n, l)| format!("{f}:{n}: {}", l.trim()))
        .collect();
    // A kind is named only in its own file under src/workload/ (its
    // `NAME`) and found through the registry there.
    assert!(
        kind.is_empty(),
        "{} lines outside src/workload/ name a test kind: a kind's rules belong to the kind\n{}",
        kind.len(),
        kind.join("\n")
    );
    assert!(
        runs_as.is_empty(),
        "a dispatch on how a kind runs came back (ask the kind):\n{}",
        runs_as.join("\n")
    );
    if std::env::var_os("LINERATE_RATCHET").is_some() {
        eprintln!("kind lines {}", kind.len());
    }
}

/// The limits, and what is over them today at its present length (never
/// longer; each entry goes as its file or function is split).
const MAX_FILE_LINES: usize = 1000;
const MAX_FN_LINES: usize = 150;
const LONG_FILES: &[(&str, usize)] = &[];
const LONG_FNS: &[(&str, usize)] = &[];

/// Each function of a rustfmt-formatted file: (name, first line, lines
/// from its `fn` line to the `}` at the same indentation).
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        let indent = &l[..l.len() - t.len()];
        let head = [
            "pub(crate) ",
            "pub(super) ",
            "pub ",
            "const ",
            "async ",
            "unsafe ",
        ]
        .iter()
        .fold(t, |s, p| s.strip_prefix(p).unwrap_or(s));
        let Some(rest) = head.strip_prefix("fn ") else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // Where the signature ends: `{` opens a body; `;` is a trait's
        // declaration without one (a signature over several lines ends on
        // a line at the `fn`'s own indentation).
        let at_indent = |j: usize| {
            j == i
                || lines[j]
                    .strip_prefix(indent)
                    .is_some_and(|r| !r.starts_with(' '))
        };
        let Some(sig) = (i..lines.len()).find(|&j| {
            let e = lines[j].trim_end();
            at_indent(j) && (e.ends_with('{') || e.ends_with(';'))
        }) else {
            continue;
        };
        if lines[sig].trim_end().ends_with(';') {
            continue;
        }
        let close = format!("{indent}}}");
        if let Some(end) = (i..lines.len()).find(|&j| lines[j] == close) {
            out.push((name, i + 1, end - i + 1));
        }
    }
    out
}

#[test]
fn no_file_or_function_grows_past_the_limits() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    let mut bad = Vec::new();
    let mut over = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap().display().to_string();
        let text = std::fs::read_to_string(&f).unwrap();
        let n = text.lines().count();
        if n > MAX_FILE_LINES {
            over.push(format!("(\"{rel}\", {n}),"));
            match LONG_FILES.iter().find(|(p, _)| *p == rel) {
                Some((_, was)) if n <= *was => {}
                Some((_, was)) => bad.push(format!("{rel}: {n} lines, was {was}: split it")),
                None => bad.push(format!("{rel}: {n} lines (at most {MAX_FILE_LINES})")),
            }
        }
        for (name, at, len) in functions(&text) {
            if len <= MAX_FN_LINES {
                continue;
            }
            let key = format!("{rel}::{name}");
            over.push(format!("(\"{key}\", {len}),"));
            match LONG_FNS.iter().find(|(p, _)| *p == key) {
                Some((_, was)) if len <= *was => {}
                Some((_, was)) => bad.push(format!("{rel}:{at} fn {name}: {len} lines, was {was}")),
                None => bad.push(format!(
                    "{rel}:{at} fn {name}: {len} lines (at most {MAX_FN_LINES})"
                )),
            }
        }
    }
    if std::env::var_os("LINERATE_RATCHET").is_some() {
        eprintln!("{}", over.join("\n"));
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    // Entries whose file or function is gone or back under the limit go.
    for (p, _) in LONG_FILES.iter().chain(LONG_FNS) {
        assert!(
            over.iter().any(|o| o.starts_with(&format!("(\"{p}\""))),
            "{p} is within the limits now: remove it from the list"
        );
    }
}

#[test]
fn the_function_finder_measures_bodies_not_declarations() {
    let text = "trait T {\n    fn a(&self);\n    fn long(\n        &self,\n    ) -> u8;\n    fn b(&self) {\n        x();\n    }\n}\npub fn c() {\n}\n";
    assert_eq!(
        functions(text),
        vec![("b".to_string(), 6, 3), ("c".to_string(), 10, 2)]
    );
    assert!(names_a_kind("        Workload::Mix => x,"));
    assert!(names_a_kind("    if w == Workload::named(\"rr\") {"));
    assert!(!names_a_kind("    workload: Workload::DEFAULT,"));
    assert!(names_a_kind("if spec.workload.is_udp() {"));
    assert!(!names_a_kind("fn kind(&self) -> spec::Workload {"));
}

/// `model/` types no kind's own section (`model::kind::Section` has no
/// variant but `None` and `Own`): a kind's options, parameters and
/// figures belong in its folder (`Section::Own`, `model::own`); the last
/// typed one, memcache's `kv`, left with this check at none.

#[test]
fn model_types_no_more_kind_sections() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/model/kind.rs");
    let text = code(&std::fs::read_to_string(src).unwrap());
    let body = text
        .split("pub enum Section {")
        .nth(1)
        .and_then(|b| b.split('}').next())
        .expect("model::kind::Section");
    let typed: Vec<&str> = body
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.trim_end_matches(','))
        .filter(|v| *v != "None" && !v.starts_with("Own("))
        .collect();
    assert!(
        typed.is_empty(),
        "model::kind::Section types {} kinds' sections ({}): a kind's section is `Section::Own` (its folder registers it)",
        typed.len(),
        typed.join(", ")
    );
}
