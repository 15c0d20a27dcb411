//! The floors of the code (docs/architecture.md): a module may import only
//! from floors below its own. This test reads every source file and fails,
//! naming file, line and import, when a forbidden import comes back, so the
//! import circles the architecture removed (the schema calling the engine,
//! the library calling the command line, report and study calling each
//! other) cannot return unnoticed.

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
    ("cli", 12),
    ("fuzz", 13),
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
