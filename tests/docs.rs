//! The documentation a newcomer reads stays whole: README.md is short (the
//! reference lives in docs/, issue 43) and every link in README.md and
//! docs/*.md reaches a file that exists and, with `#anchor`, a heading
//! that exists in it (GitHub's anchor rule). A section moved or renamed
//! without its links fails here, not in a reader's browser.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// README.md's most lines (the issue's bar).
const README_MAX_LINES: usize = 300;

/// GitHub's anchor of a heading: lowercase, punctuation other than `-`
/// and `_` dropped, spaces to `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// A markdown file's anchors, and its links with their line numbers.
type Parsed = (HashSet<String>, Vec<(usize, String)>);

/// A markdown file's anchors, and its links with their line numbers
/// (outside code fences and inline code).
fn parse(text: &str) -> Parsed {
    let mut anchors = HashSet::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut links = Vec::new();
    let mut fence = false;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        let hashes = t.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&hashes) && t[hashes..].starts_with(' ') {
            let a = anchor(t[hashes..].trim().trim_end_matches('#'));
            let n = seen.entry(a.clone()).or_insert(0);
            anchors.insert(if *n == 0 { a } else { format!("{a}-{n}") });
            *n += 1;
        }
        // Inline code is not a link.
        let mut plain = String::with_capacity(line.len());
        let mut code = false;
        for c in line.chars() {
            if c == '`' {
                code = !code;
            }
            plain.push(if code || c == '`' { ' ' } else { c });
        }
        let mut rest = plain.as_str();
        while let Some(k) = rest.find("](") {
            let after = &rest[k + 2..];
            let end = after.find(')').unwrap_or(after.len());
            let target = after[..end].split_whitespace().next().unwrap_or("");
            if !target.is_empty() {
                links.push((i + 1, target.to_string()));
            }
            rest = &after[end.min(after.len())..];
        }
    }
    (anchors, links)
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn docs() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md")];
    let mut d: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    d.sort();
    files.extend(d);
    files
}

#[test]
fn the_readme_is_short_and_maps_every_docs_file() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let n = readme.lines().count();
    assert!(
        n <= README_MAX_LINES,
        "README.md has {n} lines (at most {README_MAX_LINES}): move reference text to docs/"
    );
    // The two commands.
    assert!(readme.contains("cargo run --release"));
    assert!(readme.contains("scripts/test.sh"));
    // Every docs file is on the map.
    for f in docs().iter().skip(1) {
        let name = f.file_name().unwrap().to_string_lossy();
        assert!(
            readme.contains(&format!("(docs/{name})")),
            "README.md's map does not link docs/{name}"
        );
    }
}

#[test]
fn every_link_in_the_docs_reaches_its_file_and_heading() {
    let mut parsed: HashMap<PathBuf, Parsed> = HashMap::new();
    let mut get = |p: &Path| -> Option<Parsed> {
        if !parsed.contains_key(p) {
            let text = std::fs::read_to_string(p).ok()?;
            parsed.insert(p.to_path_buf(), parse(&text));
        }
        parsed.get(p).cloned()
    };
    let mut bad = Vec::new();
    let mut checked = 0;
    for file in docs() {
        let (_, links) = get(&file).expect("readable");
        for (line, target) in links {
            // Another site: not ours to check here.
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, frag) = target.split_once('#').unwrap_or((&target, ""));
            let to = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            let at = format!(
                "{}:{line}: {target}",
                file.strip_prefix(root()).unwrap().display()
            );
            if !to.exists() {
                bad.push(format!("{at}: no such file"));
                continue;
            }
            if frag.is_empty() {
                continue;
            }
            match get(&to) {
                Some((anchors, _)) if anchors.contains(frag) => {}
                Some(_) => bad.push(format!("{at}: no such heading")),
                None => bad.push(format!("{at}: an anchor in a file that is not text")),
            }
        }
    }
    assert!(checked > 50, "only {checked} links found: the parser broke");
    assert!(bad.is_empty(), "broken links:\n{}", bad.join("\n"));
}

#[test]
fn the_anchor_rule_is_githubs() {
    assert_eq!(
        anchor("Responsiveness: `linerate run rpm`"),
        "responsiveness-linerate-run-rpm"
    );
    assert_eq!(
        anchor("linerate compare A B [--metric M]"),
        "linerate-compare-a-b---metric-m"
    );
    let (a, l) =
        parse("# Two\n## Two\n```\n# not\n[x](y.md)\n```\nsee [x](#two-1) and `[no](z)`\n");
    assert!(a.contains("two") && a.contains("two-1") && !a.contains("not"));
    assert_eq!(l, vec![(7, "#two-1".to_string())]);
}
