//! From a results folder to the report files: load the folder (or the
//! folders of several environments), check what its study asks to draw,
//! build the landscape and the report document, and write report.html,
//! report.md, landscape.csv and the plots. It sits above `analysis` and
//! `render` and is the only part of the report that touches files.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::report::analysis::landscape::{self, Landscape};
use crate::report::render::document::{self, Report};
use crate::report::render::{csv, html, markdown};
use crate::study::folder::{self, Loaded};

/// Writes report.html, report.md, landscape.csv and plots/*.svg into the
/// folder; returns the HTML report's path. A folder written by
/// `write_environments` is drawn again from its sources.
pub fn write_all(dir: &Path) -> Result<PathBuf> {
    if let Some((dirs, labels)) = read_sources(dir)? {
        return write_environments(&dirs, &labels, dir);
    }
    let loaded = folder::load(dir)?;
    check_drawable(&loaded)?;
    let land = landscape::build(&loaded);
    let report = document::build(&loaded, &land);
    write_report(dir, &land, &report)
}

/// What the folder's study draws must be metrics. The study was checked
/// when it ran, so a failure here is no usage error of the report (it
/// fails with exit 1, as it always has).
fn check_drawable(loaded: &Loaded) -> Result<()> {
    crate::report::analysis::check::study(&loaded.study).map_err(|e| Error::Failed(e.to_string()))
}

fn write_report(dir: &Path, land: &Landscape, report: &Report) -> Result<PathBuf> {
    let plots = dir.join("plots");
    std::fs::create_dir_all(&plots)
        .map_err(|e| format!("cannot create {}: {e}", plots.display()))?;
    for f in &report.figures {
        folder::write_atomic(&plots.join(&f.file), f.svg.as_bytes())?;
    }
    folder::write_atomic(&dir.join("landscape.csv"), csv::landscape(land)?.as_bytes())?;
    folder::write_atomic(&dir.join("report.md"), markdown::render(report).as_bytes())?;
    let html_path = dir.join("report.html");
    folder::write_atomic(&html_path, html::render(report).as_bytes())?;
    Ok(html_path)
}

/// Where a merged report's environments come from.
const SOURCES: &str = "environments.json";

/// (folders, labels) of a merged report.
type Sources = (Vec<PathBuf>, Vec<String>);

fn read_sources(dir: &Path) -> Result<Option<Sources>> {
    let path = dir.join(SOURCES);
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a linerate environments file: {e}", path.display()))?;
    let list = |k: &str| -> Vec<String> {
        v[k].as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let dirs: Vec<PathBuf> = list("folders").into_iter().map(PathBuf::from).collect();
    let labels = list("labels");
    if dirs.is_empty() || dirs.len() != labels.len() {
        return Err(Error::Failed(format!(
            "{}: folders and labels do not match",
            path.display()
        )));
    }
    Ok(Some((dirs, labels)))
}

/// Several results folders as one report in `out`: a series per
/// environment in every plot, a row per environment in every table, an
/// overview of ratios against the first, the hosts' settings that differ
/// first, and key points that name the environments.
pub fn write_environments(dirs: &[PathBuf], labels: &[String], out: &Path) -> Result<PathBuf> {
    use crate::report::analysis::environments;
    let loaded: Vec<Loaded> = dirs
        .iter()
        .map(|d| folder::load(d))
        .collect::<Result<_, _>>()?;
    let hosts: Vec<_> = loaded
        .iter()
        .zip(labels)
        .map(|(l, label)| {
            (
                label.clone(),
                l.results
                    .first()
                    .map(|(_, r)| (r.environment.client.clone(), r.environment.agent.clone())),
            )
        })
        .collect();
    let mut keys: Vec<String> = Vec::new();
    for t in &loaded[0].study.tables {
        keys.extend(t.columns.iter().cloned());
    }
    if keys.is_empty() {
        keys = crate::report::analysis::compare::DEFAULT_METRICS
            .iter()
            .map(|s| s.to_string())
            .collect();
    }
    // Only studies with common metrics merge: every metric the first
    // folder has of its study's tables must be measured in every folder.
    let first = landscape::build(&loaded[0]);
    keys.retain(|k| first.rows.iter().any(|r| r.value(k).is_some()));
    for (l, dir) in loaded.iter().zip(dirs).skip(1) {
        let land = landscape::build(l);
        if let Some(k) = keys
            .iter()
            .find(|k| !land.rows.iter().any(|r| r.value(k).is_some()))
        {
            return Err(Error::Failed(format!(
                "{} (study {}) has no {k}, which {} reports: only folders of the same study, or of studies with common metrics, go in one report",
                dir.display(),
                l.study.name,
                loaded[0].study.name
            )));
        }
    }
    let merged = environments::merge(loaded, labels, out.to_path_buf())?;
    check_drawable(&merged)?;
    let mut land = landscape::build(&merged);
    land.dims.insert(0, environments::ENV.into());
    let mut report = document::build(&merged, &land);
    report.config = environments::config(&hosts);
    if let Some(t) = environments::overview(&land, environments::ENV, labels, &keys) {
        report.tables.insert(0, t);
    }
    report.subtitle = format!(
        "{} environments ({}) · {}",
        labels.len(),
        labels.join(", "),
        report.subtitle
    );
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let abs = |d: &PathBuf| {
        std::fs::canonicalize(d)
            .unwrap_or_else(|_| d.clone())
            .display()
            .to_string()
    };
    let sources = serde_json::json!({
        "folders": dirs.iter().map(abs).collect::<Vec<_>>(),
        "labels": labels,
    });
    folder::write_atomic(
        &out.join(SOURCES),
        serde_json::to_string_pretty(&sources)
            .map_err(|e| e.to_string())?
            .as_bytes(),
    )?;
    write_report(out, &land, &report)
}
