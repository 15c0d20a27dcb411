//! The built-in studies: the files under `studies/`, compiled in so the
//! binary needs nothing beside it. Each mirrors a seed write-up, sized for
//! an ordinary machine; a study named `seedNNN-...` follows seed NNN and
//! names the experiments (rows of docs/seeds.md) it reproduces, so a
//! reader of a seed finds the command, and a reader of a report the seed.

use std::path::Path;

use crate::study::file::Study;
use crate::study::overrides::Overrides;
use crate::study::sweep;
use crate::study::StudyError;

/// One built-in study.
pub struct Builtin {
    pub name: &'static str,
    /// Names it had before the seed pack (`wan-window`...): still accepted.
    pub aliases: &'static [&'static str],
    /// The rows of docs/seeds.md it reproduces ("000.1"), first the one it
    /// was written for.
    pub rows: &'static [&'static str],
    pub text: &'static str,
}

macro_rules! builtin {
    ($name:literal, [$($alias:literal),*], [$($row:literal),*]) => {
        Builtin {
            name: $name,
            aliases: &[$($alias),*],
            rows: &[$($row),*],
            text: include_str!(concat!("../../studies/", $name, ".toml")),
        }
    };
}

/// Every built-in study, in `study list` order: the default job, then the
/// seeds in order.
pub const BUILTIN: &[Builtin] = &[
    builtin!("quick", [], []),
    builtin!("seed000-scp-window", ["wan-window"], ["000.1", "001.1"]),
    builtin!("seed000-ipsec-streams", [], ["000.2"]),
    builtin!("seed000-tls-single-stream", [], ["000.3"]),
    builtin!("seed000-tls-streams", ["streams-to-line-rate"], ["000.4"]),
    builtin!("seed001-send-window", [], ["001.1"]),
    builtin!("seed002-ports", [], ["002.1"]),
    builtin!("seed002-connections", ["connections"], ["002.3", "004.1"]),
    builtin!(
        "seed002-udp-small-packets",
        ["udp-small-packets"],
        ["002.4"]
    ),
    builtin!("seed002-udp-binding", [], ["002.5"]),
    builtin!("seed002-tunings", [], ["002.6"]),
    builtin!("seed002-tunings-latency", [], ["002.11"]),
    builtin!("seed002-offloads-zerocopy", [], ["002.7"]),
    builtin!("seed002-jumbo", [], ["002.10"]),
    builtin!("seed002-congestion-control", [], ["002.8"]),
    builtin!("seed003-awm", ["awm"], ["003.2"]),
    builtin!(
        "seed003-awm-links",
        ["seed003-awm-mtu", "awm-mtu", "seed003-link-mtu"],
        ["003.2"]
    ),
    builtin!("seed003-window-sessions", [], ["003.3"]),
    builtin!("seed003-firewall", [], ["003.5"]),
    builtin!("seed003-large-mtu", [], ["003.6"]),
    builtin!("seed003-page-sizes", [], ["003.7"]),
    builtin!("seed003-handshakes", [], ["003.8"]),
    builtin!("seed003-ciphers", [], ["003.10"]),
    builtin!("seed003-tls-crypto-hw", ["tls-crypto-hw"], ["003.11"]),
    builtin!("seed003-ipsec-cost", [], ["003.12"]),
    builtin!("seed004-connections-tuned", [], ["004.1"]),
    builtin!("seed004-polling", [], ["004.3"]),
    builtin!("seed004-memcached", ["memcached"], ["004.2"]),
    builtin!("latency-under-load", [], []),
    builtin!("rr-capacity", [], []),
    builtin!("memcached-capacity", [], []),
    builtin!("quic-streams", [], []),
    builtin!("quic-pages", [], []),
    builtin!("quic-handshakes", [], []),
    builtin!("responsiveness", [], []),
    builtin!("http-objects", [], []),
];

pub fn names() -> Vec<&'static str> {
    BUILTIN.iter().map(|b| b.name).collect()
}

/// The built-in study called `name`, by its name or an old one.
pub fn find(name: &str) -> Option<&'static Builtin> {
    BUILTIN
        .iter()
        .find(|b| b.name == name || b.aliases.contains(&name))
}

/// A built-in study by name (or alias).
pub fn get(name: &str) -> Option<Result<Study, StudyError>> {
    find(name).map(|b| {
        Study::parse(
            b.text,
            &format!("studies/{}.toml (built in)", b.name),
            b.name,
        )
        .and_then(sweep::checked)
    })
}

/// A study file path, or a built-in name.
pub fn resolve(what: &str) -> Result<Study, StudyError> {
    resolve_with(what, &Overrides::default()).map(|(s, _)| s)
}

/// A study file path, or a built-in name, changed by the command line's
/// overrides; with the lines saying what `--no-lab` dropped.
pub fn resolve_with(what: &str, o: &Overrides) -> Result<(Study, Vec<String>), StudyError> {
    let path = Path::new(what);
    if path.exists() || what.ends_with(".toml") || what.contains('/') {
        if o.is_empty() {
            return Study::load(path)
                .and_then(sweep::checked)
                .map(|s| (s, vec![]));
        }
        let (text, stem) = Study::read(path)?;
        return changed(&text, &path.display().to_string(), &stem, o);
    }
    let Some(b) = find(what) else {
        return Err(StudyError::Unknown {
            name: what.into(),
            builtins: names().join(", "),
        });
    };
    if o.is_empty() {
        return get(what).expect("found").map(|s| (s, vec![]));
    }
    changed(
        b.text,
        &format!("studies/{}.toml (built in)", b.name),
        b.name,
        o,
    )
}

fn changed(
    text: &str,
    origin: &str,
    name: &str,
    o: &Overrides,
) -> Result<(Study, Vec<String>), StudyError> {
    let (text, notes) = o.apply(text, origin)?;
    let origin = format!("{origin} with {}", o.describe());
    let s = Study::parse(&text, &origin, name).and_then(sweep::checked)?;
    Ok((s, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_study_parses() {
        for name in names() {
            let s = get(name).unwrap().unwrap();
            assert_eq!(s.name, name);
            assert!(!s.plots.is_empty(), "{name} draws something");
        }
    }

    /// docs/seeds.md and this table agree: every study a row names is
    /// built in, and every row a study names is in the table (row by row,
    /// with what each measures: seedrows.rs).
    #[test]
    fn seeds_doc_and_builtin_studies_agree() {
        let doc = include_str!("../../docs/seeds.md");
        let rows: Vec<(&str, &str)> = doc
            .lines()
            .filter_map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                let id = cells.get(1)?;
                (id.len() >= 5 && id.as_bytes()[3] == b'.' && id[..3].parse::<u32>().is_ok())
                    .then(|| (*id, *cells.get(4).unwrap_or(&"")))
            })
            .collect();
        assert!(
            rows.len() >= 28,
            "docs/seeds.md lists every seed experiment"
        );
        for (id, command) in &rows {
            for word in command.split(|c: char| c == '`' || c.is_whitespace()) {
                if word.starts_with("seed") && word.len() > 7 {
                    assert!(find(word).is_some(), "row {id} names {word}, not built in");
                }
            }
        }
        for b in BUILTIN {
            for r in b.rows {
                assert!(
                    rows.iter().any(|(id, _)| id == r),
                    "{}: row {r} not in docs",
                    b.name
                );
            }
        }
    }

    #[test]
    fn old_names_find_the_renamed_studies() {
        let s = get("wan-window").unwrap().unwrap();
        assert_eq!(s.name, "seed000-scp-window");
        // seed003-awm-mtu and seed003-link-mtu became seed003-awm-links.
        for old in ["awm-mtu", "seed003-awm-mtu", "seed003-link-mtu"] {
            assert_eq!(find(old).unwrap().name, "seed003-awm-links", "{old}");
        }
        assert!(find("no-such-study").is_none());
    }

    #[test]
    fn names_and_aliases_are_unique_and_seed_studies_name_their_rows() {
        let mut all: Vec<&str> = BUILTIN
            .iter()
            .flat_map(|b| std::iter::once(b.name).chain(b.aliases.iter().copied()))
            .collect();
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n, "a name or alias is used twice");
        for b in BUILTIN {
            if let Some(seed) = b.name.strip_prefix("seed") {
                let nnn = &seed[..3];
                assert!(
                    b.rows.first().is_some_and(|r| r.starts_with(nnn)),
                    "{} must name a row of seed {nnn} first",
                    b.name
                );
            }
            for r in b.rows {
                let (file, row) = r.split_once('.').expect("rows are NNN.K");
                assert!(file.len() == 3 && row.parse::<u32>().is_ok(), "{r}");
            }
        }
    }

    #[test]
    fn every_builtin_lab_study_runs_without_its_lab() {
        let o = crate::study::overrides::Overrides {
            no_lab: true,
            ..Default::default()
        };
        for b in BUILTIN {
            if !b.text.contains("\n[lab]") {
                continue;
            }
            let (t, _) = o.apply(b.text, b.name).unwrap();
            let s = Study::parse(&t, b.name, b.name)
                .and_then(crate::study::sweep::checked)
                .unwrap_or_else(|e| panic!("{}: {e}", b.name));
            assert!(s.lab.is_none());
        }
    }
}
