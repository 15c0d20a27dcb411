//! Results written before the history (or with it off) into the store:
//! study folders (`results/<study>-<time>/`), single results
//! (`run --json FILE`), or a folder holding either, searched two levels
//! down. Each is keyed by its path, so importing twice replaces rather
//! than doubles.

use std::path::{Path, PathBuf};

use super::entry;
use super::{HistoryError, Store};
use crate::model::result::TestResult;

/// What one path gave: the run recorded, or why it was skipped.
pub struct Imported {
    pub path: PathBuf,
    pub outcome: Result<i64, String>,
}

/// The study folders and result files under `path` (itself, or up to
/// two levels down), sorted.
fn candidates(path: &Path, depth: u32, out: &mut Vec<PathBuf>) {
    if path.is_file() {
        out.push(path.into());
        return;
    }
    if path.join("manifest.json").is_file() {
        out.push(path.into());
        return;
    }
    if depth == 0 {
        return;
    }
    let Ok(read) = std::fs::read_dir(path) else {
        return;
    };
    let mut children: Vec<PathBuf> = read.filter_map(|e| e.ok().map(|e| e.path())).collect();
    children.sort();
    for c in children {
        if c.is_dir() || c.extension().is_some_and(|x| x == "json") {
            candidates(&c, depth - 1, out);
        }
    }
}

/// The entry a path holds: a study folder's, or a result file's.
fn entry_of(path: &Path) -> Result<entry::Entry, String> {
    let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.into());
    if path.is_dir() {
        let loaded = crate::study::folder::load(path).map_err(|e| e.to_string())?;
        let mut e = entry::of_study(&loaded);
        e.results = Some(abs.display().to_string());
        return Ok(e);
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read it: {e}"))?;
    let r: TestResult =
        serde_json::from_str(&text).map_err(|e| format!("not a linerate result: {e}"))?;
    if r.schema != crate::model::result::SCHEMA {
        return Err(format!("not a linerate result (schema {})", r.schema));
    }
    Ok(entry::of_result(&r, Some(abs.display().to_string())))
}

/// Imports every result under `paths`. A path that holds none is an
/// error of its own; the others are recorded.
pub fn import(store: &mut Store, paths: &[PathBuf]) -> Result<Vec<Imported>, HistoryError> {
    let mut all = Vec::new();
    for p in paths {
        if !p.exists() {
            return Err(HistoryError::Usage(format!(
                "{} does not exist: give a results folder, a study's folder or a result JSON file",
                p.display()
            )));
        }
        let mut found = Vec::new();
        candidates(p, 2, &mut found);
        if found.is_empty() {
            return Err(HistoryError::Usage(format!(
                "{} holds no study folder (manifest.json) and no result JSON file",
                p.display()
            )));
        }
        all.extend(found);
    }
    // Every path was checked before the first is recorded.
    let mut done = Vec::new();
    for f in all {
        let outcome = match entry_of(&f) {
            Ok(e) => Ok(store.record(&e)?),
            Err(why) => Err(why),
        };
        done.push(Imported { path: f, outcome });
    }
    Ok(done)
}
