//! Study files (TOML, documented in docs/studies.md): what a study runs and
//! what its report draws. Tests are data, not code (flent's lesson): the
//! built-in studies are files like any user's. Every error names the file,
//! the line and the key.

use serde::Deserialize;
use std::path::Path;
use toml::Spanned;

use crate::model::options::{axis_keys, is_axis, TestOptions};
use crate::model::{Invalid, ModelError};
use crate::study::StudyError;
use crate::units;

/// Where the study's tests run.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// An agent (host:port); without it a local agent on loopback.
    pub agent: Option<String>,
    /// Token file for that agent (or LINERATE_TOKEN).
    pub token_file: Option<std::path::PathBuf>,
    /// Many hosts: a hosts file, and which of its hosts are clients and
    /// servers (as `--hosts`, `--clients`, `--servers`).
    pub hosts: Option<std::path::PathBuf>,
    pub clients: Option<String>,
    pub servers: Option<String>,
}

/// A lab the study brings up for itself (root): the link of `linerate lab
/// up`, as strings in the same units. Points may set `rtt` to change the
/// round trip; the lab is taken down when the study ends.
pub type LabConfig = crate::lab::spec::LabOptions;

/// How sweep axes combine.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Every combination (the first axis varies slowest).
    #[default]
    Cross,
    /// The i-th value of every axis together; axes must be equally long.
    Zip,
}

/// Model lines drawn beside the measurements.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Models {
    /// The link's line rate: a bit rate ("10gbit"), or "best" for the best
    /// measured throughput of the study (what loopback can do).
    pub line_rate: Option<String>,
    /// The fraction of line rate that counts as reaching it (default 0.9).
    pub threshold: Option<f64>,
    /// Draw the window/RTT model of a finite transfer beside each point:
    /// handshake + slow start + bytes / min(rate, window / RTT).
    #[serde(default)]
    pub window_rtt: bool,
    /// A response-time target ("5ms", seed 003's for an emulated database
    /// request): a key point compares every point's p99 with it.
    pub latency_target: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LineRate {
    Given(f64),
    Best,
}

impl Models {
    pub fn line_rate(&self) -> Option<LineRate> {
        match self.line_rate.as_deref() {
            None => None,
            Some("best") => Some(LineRate::Best),
            Some(s) => units::parse_rate(s).ok().map(LineRate::Given),
        }
    }
    pub fn threshold(&self) -> f64 {
        self.threshold.unwrap_or(0.9)
    }
    /// `latency_target` in seconds (checked when the study is read).
    pub fn latency_target_s(&self) -> Option<f64> {
        self.latency_target
            .as_deref()
            .and_then(|t| units::parse_duration(t).ok())
            .map(|d| d.as_secs_f64())
    }
}

/// Model lines a plot may draw.
pub const MODEL_LINES: &[&str] = &["line_rate", "threshold", "window_rtt"];

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PlotSpec {
    pub title: Option<String>,
    /// A sweep axis, or "case".
    pub x: String,
    /// A metric (see `linerate study metrics`).
    pub y: String,
    /// Another axis (or "case"): one line per value.
    pub series: Option<String>,
    #[serde(default)]
    pub log_x: bool,
    #[serde(default)]
    pub log_y: bool,
    /// Model lines to draw: "line_rate", "threshold".
    #[serde(default)]
    pub models: Vec<String>,
    /// The line of the study file it was written on (for errors).
    #[serde(skip)]
    pub line: usize,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TableSpec {
    pub title: Option<String>,
    /// Metrics, one column each; the point's parameters come first.
    pub columns: Vec<String>,
    /// The line of the study file it was written on (for errors).
    #[serde(skip)]
    pub line: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    name: Option<String>,
    title: String,
    description: String,
    #[serde(default)]
    network: Network,
    lab: Option<LabConfig>,
    #[serde(default)]
    test: TestOptions,
    #[serde(default)]
    case: Vec<Spanned<TestOptions>>,
    #[serde(default)]
    sweep: toml::Table,
    /// Runs of every point (the landscape's samples); `--repeat` overrides.
    repeat: Option<u32>,
    /// Run the points in random order (against drift); `--shuffle` too.
    #[serde(default)]
    shuffle: bool,
    #[serde(default)]
    model: Models,
    #[serde(default)]
    plot: Vec<Spanned<PlotSpec>>,
    #[serde(default)]
    table: Vec<Spanned<TableSpec>>,
    /// An axis whose values are compared as environments: the report adds
    /// a table of ratios against its first value (the IBM overview). A
    /// list of axes adds a table per pair of them too.
    overview: Option<OneOrMany>,
}

/// `overview = "lab.mtu"` or `overview = ["lab.link", "lab.mtu"]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn list(self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        }
    }
}

/// One sweep axis: a test key and its values in the order written.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    pub key: String,
    pub values: Vec<toml::Value>,
    pub line: usize,
}

/// A parsed, checked study.
#[derive(Clone, Debug)]
pub struct Study {
    pub name: String,
    pub title: String,
    pub description: String,
    pub network: Network,
    /// A lab of its own (None: loopback or `[network]`).
    pub lab: Option<LabConfig>,
    pub test: TestOptions,
    pub cases: Vec<TestOptions>,
    pub mode: Mode,
    pub axes: Vec<Axis>,
    pub repeat: u32,
    pub shuffle: bool,
    pub model: Models,
    pub plots: Vec<PlotSpec>,
    pub tables: Vec<TableSpec>,
    /// An axis compared as environments: ratios against its first value
    /// (the first of `overviews`).
    pub overview: Option<String>,
    /// The file's text, stored with the results so a report never depends
    /// on the file still being where it was.
    pub source: String,
    pub origin: String,
    /// Every overview axis: with two or more, the report adds a table per
    /// pair of them (src/report/analysis/overview.rs).
    pub overviews: Vec<String>,
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

impl Study {
    /// Parses and checks a study; `origin` names the file in errors.
    pub fn parse(text: &str, origin: &str, default_name: &str) -> Result<Study, StudyError> {
        let place = Place { text, origin };
        let at_line = |line: usize, message: String| place.at_line(line, message);
        let at = |offset: usize, msg: &str| place.at(offset, msg);
        let whole = |message: String| place.whole(message);
        let raw: Raw = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| line_of(text, s.start)).unwrap_or(1);
            at_line(line, e.message().trim().into())
        })?;
        let (mode, axes) = sweep_axes(&raw.sweep, &place)?;
        for c in &raw.case {
            if c.get_ref().run.label.is_none() {
                return Err(at(c.span().start, "every [[case]] needs a label"));
            }
        }
        let mut labels: Vec<&str> = raw
            .case
            .iter()
            .filter_map(|c| c.get_ref().run.label.as_deref())
            .collect();
        labels.sort_unstable();
        if let Some(w) = labels.windows(2).find(|w| w[0] == w[1]) {
            return Err(whole(format!("two cases are labelled \"{}\"", w[0])));
        }
        if raw.test.run.label.is_some() {
            return Err(whole("`label` belongs in a [[case]], not in [test]".into()));
        }
        let dims: Vec<&str> = axes
            .iter()
            .map(|a| a.key.as_str())
            .chain((!raw.case.is_empty()).then_some("case"))
            .collect();
        check_plots(&raw, &dims, &place)?;
        if let Some(l) = &raw.model.line_rate {
            if l != "best" {
                units::parse_rate(l).map_err(|e| whole(format!("[model] line_rate: {e}")))?;
            }
        }
        if let Some(t) = &raw.model.latency_target {
            let d = units::parse_duration(t)
                .map_err(|e| whole(format!("[model] latency_target: {e}")))?;
            if d.is_zero() {
                return Err(whole("[model] latency_target must be above zero".into()));
            }
        }
        if let Some(t) = raw.model.threshold {
            if !(t > 0.0 && t <= 1.0) {
                return Err(whole("[model] threshold must be in (0, 1]".into()));
            }
        }
        if let Some(l) = &raw.lab {
            l.build().map_err(|source| StudyError::LabSection {
                origin: origin.into(),
                source,
            })?;
            if raw.network.agent.is_some() || raw.network.hosts.is_some() {
                return Err(whole(
                    "[lab] and [network] agent/hosts exclude each other (a lab runs its own agents)"
                        .into(),
                ));
            }
        }
        if raw.repeat == Some(0) {
            return Err(whole("repeat must be at least 1".into()));
        }
        let overviews = raw
            .overview
            .clone()
            .map(OneOrMany::list)
            .unwrap_or_default();
        for o in &overviews {
            if overviews.iter().filter(|x| *x == o).count() > 1 {
                return Err(whole(format!("overview lists `{o}` twice")));
            }
            let known =
                axes.iter().any(|a: &Axis| &a.key == o) || (o == "case" && !raw.case.is_empty());
            if !known {
                return Err(whole(format!(
                    "overview `{o}` is not a sweep axis of this study (axes: {})",
                    axes.iter()
                        .map(|a| a.key.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        let study = Study {
            name: raw.name.unwrap_or_else(|| default_name.to_string()),
            title: raw.title,
            description: raw.description.trim().to_string(),
            network: raw.network,
            lab: raw.lab,
            test: raw.test,
            cases: raw.case.into_iter().map(|c| c.into_inner()).collect(),
            mode,
            axes,
            repeat: raw.repeat.unwrap_or(1),
            shuffle: raw.shuffle,
            overview: overviews.first().cloned(),
            overviews,
            model: raw.model,
            plots: raw
                .plot
                .into_iter()
                .map(|p| {
                    let line = line_of(text, p.span().start);
                    PlotSpec {
                        line,
                        ..p.into_inner()
                    }
                })
                .collect(),
            tables: raw
                .table
                .into_iter()
                .map(|t| {
                    let line = line_of(text, t.span().start);
                    TableSpec {
                        line,
                        ..t.into_inner()
                    }
                })
                .collect(),
            source: text.to_string(),
            origin: origin.to_string(),
        };
        if !study
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(whole(format!(
                "study name '{}' may hold only letters, digits, - and _",
                study.name
            )));
        }
        // Whether every point is a valid test is the sweep's check
        // (`sweep::checked`), made wherever a study is read for use.
        Ok(study)
    }

    /// Reads a study file.
    pub fn load(path: &Path) -> Result<Study, StudyError> {
        let (text, stem) = Study::read(path)?;
        Study::parse(&text, &path.display().to_string(), &stem)
    }

    /// A study file's text, and the name it takes when it gives none (the
    /// file's stem).
    pub fn read(path: &Path) -> Result<(String, String), StudyError> {
        let text = std::fs::read_to_string(path).map_err(|source| StudyError::ReadStudy {
            path: path.into(),
            source,
        })?;
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_else(|| "study".into());
        Ok((text, stem))
    }
}
/// Where a study's errors point: the file's text (for line numbers) and
/// its name.
struct Place<'a> {
    text: &'a str,
    origin: &'a str,
}

impl Place<'_> {
    /// An error at a line of the file.
    fn at_line(&self, line: usize, message: String) -> StudyError {
        StudyError::At {
            origin: self.origin.into(),
            line,
            message,
        }
    }

    /// An error at the line holding byte `offset` of the file.
    fn at(&self, offset: usize, msg: &str) -> StudyError {
        self.at_line(line_of(self.text, offset), msg.into())
    }

    /// An error about the file as a whole.
    fn whole(&self, message: String) -> StudyError {
        StudyError::In {
            origin: self.origin.into(),
            message,
        }
    }
}

/// The `[sweep]` table's mode and axes, each axis a known test key whose
/// every value is a valid test option; crossed axes repeat no value, and
/// zipped axes are of equal length.
fn sweep_axes(sweep: &toml::Table, place: &Place) -> Result<(Mode, Vec<Axis>), StudyError> {
    let text = place.text;
    let at = |offset: usize, msg: &str| place.at(offset, msg);
    let at_line = |line: usize, message: String| place.at_line(line, message);
    let mut mode = Mode::Cross;
    let mut axes = Vec::new();
    // Spans of the sweep table's values: toml::Table keeps none, so
    // re-read the sweep with spans for error lines.
    let spans: SweepSpans = toml::from_str(text).unwrap_or_default();
    // `lab.mtu = [...]` and `sysctl."net.x" = [...]` arrive as tables:
    // their members are the axes.
    let mut flat: Vec<(String, toml::Value, String)> = Vec::new();
    for (key, value) in sweep {
        match (key.as_str(), value) {
            ("lab" | "sysctl" | "nic" | "firewall", toml::Value::Table(t)) => {
                for (k, v) in t {
                    flat.push((format!("{key}.{k}"), v.clone(), key.clone()));
                }
            }
            _ => flat.push((key.clone(), value.clone(), key.clone())),
        }
    }
    for (key, value, outer) in &flat {
        let (key, value) = (key, value);
        let offset = spans.sweep.get(outer).map(|s| s.span().start).unwrap_or(0);
        if key == "mode" {
            mode = value
                .clone()
                .try_into()
                .map_err(|_| at(offset, "sweep mode must be \"cross\" or \"zip\""))?;
            continue;
        }
        let keys = axis_keys();
        // The old names of `workers` still read (serde aliases).
        let alias = matches!(key.as_str(), "threads" | "agent_threads");
        if !alias && !is_axis(key) {
            return Err(at(
                offset,
                &format!(
                    "unknown sweep axis `{key}`; axes are test keys: {}, and sysctl.NAME",
                    keys.join(", ")
                ),
            ));
        }
        let values = axis_values(value).map_err(|m| at(offset, &format!("sweep.{key}: {m}")))?;
        for v in &values {
            let one = [(key.clone(), v.clone())].into_iter().collect();
            TestOptions::from_pairs(&one).map_err(|m| {
                at(
                    offset,
                    &format!("sweep.{key}: value {}: {m}", display_value(v)),
                )
            })?;
        }
        axes.push(Axis {
            key: key.clone(),
            values,
            line: line_of(text, offset),
        });
    }
    if mode == Mode::Cross {
        for a in &axes {
            let mut seen = Vec::new();
            for v in &a.values {
                let d = display_value(v);
                if seen.contains(&d) {
                    return Err(at_line(
                        a.line,
                        format!("sweep.{}: value {d} appears twice", a.key),
                    ));
                }
                seen.push(d);
            }
        }
    }
    if mode == Mode::Zip {
        if let Some(a) = axes.iter().find(|a| a.values.len() != axes[0].values.len()) {
            return Err(at_line(
                a.line,
                format!(
                    "sweep mode \"zip\" needs axes of equal length: {} has {}, {} has {}",
                    axes[0].key,
                    axes[0].values.len(),
                    a.key,
                    a.values.len()
                ),
            ));
        }
    }
    Ok((mode, axes))
}

/// Each `[[plot]]` draws against the study's dimensions (its sweep axes,
/// and `case` when it has cases), with known models whose `[model]`
/// settings are given.
fn check_plots(raw: &Raw, dims: &[&str], place: &Place) -> Result<(), StudyError> {
    let at = |offset: usize, msg: &str| place.at(offset, msg);
    for p in &raw.plot {
        let s = p.get_ref();
        let check = |what: &str, v: &str| {
            if dims.contains(&v) {
                Ok(())
            } else {
                Err(at(
                    p.span().start,
                    &format!(
                        "plot {what} `{v}` is not a sweep axis of this study (axes: {})",
                        if dims.is_empty() {
                            "none".into()
                        } else {
                            dims.join(", ")
                        }
                    ),
                ))
            }
        };
        check("x", &s.x)?;
        if let Some(series) = &s.series {
            check("series", series)?;
        }
        if let Some(m) = s.models.iter().find(|m| !MODEL_LINES.contains(&m.as_str())) {
            return Err(at(
                p.span().start,
                &format!(
                    "plot model `{m}` is unknown; models: {}",
                    MODEL_LINES.join(", ")
                ),
            ));
        }
        if s.models.iter().any(|m| m == "window_rtt") && !raw.model.window_rtt {
            return Err(at(
                p.span().start,
                "plot model window_rtt needs [model] window_rtt = true",
            ));
        }
        if s.models.iter().any(|m| m != "window_rtt") && raw.model.line_rate.is_none() {
            return Err(at(
                p.span().start,
                "plot models need [model] line_rate (a bit rate, or \"best\")",
            ));
        }
    }
    Ok(())
}

#[derive(Deserialize, Default)]
struct SweepSpans {
    #[serde(default)]
    sweep: std::collections::BTreeMap<String, Spanned<toml::Value>>,
}

/// An axis written as a list, or a range `{ from, to, times }` (geometric)
/// or `{ from, to, step }` (arithmetic); sizes may be strings ("1M").
fn axis_values(v: &toml::Value) -> Result<Vec<toml::Value>, ModelError> {
    let refuse = |why: &str| Err(ModelError::Invalid(Invalid::from(why)));
    match v {
        toml::Value::Array(a) if a.is_empty() => refuse("an axis needs at least one value"),
        toml::Value::Array(a) => Ok(a.clone()),
        toml::Value::Table(t) => {
            let num = |k: &str| -> Result<Option<f64>, ModelError> {
                match t.get(k) {
                    None => Ok(None),
                    Some(toml::Value::Integer(i)) => Ok(Some(*i as f64)),
                    Some(toml::Value::Float(f)) => Ok(Some(*f)),
                    Some(toml::Value::String(s)) => Ok(Some(units::parse_size(s)? as f64)),
                    Some(_) => {
                        Err(Invalid(format!("range `{k}` must be a number or a size")).into())
                    }
                }
            };
            if let Some(k) = t
                .keys()
                .find(|k| !["from", "to", "times", "step"].contains(&k.as_str()))
            {
                return refuse(&format!(
                    "unknown range key `{k}` (use from, to, times or step)"
                ));
            }
            let Some(from) = num("from")? else {
                return refuse("a range needs `from`");
            };
            let Some(to) = num("to")? else {
                return refuse("a range needs `to`");
            };
            if to < from {
                return refuse("a range needs `to` >= `from`");
            }
            let mut out = Vec::new();
            let mut x = from;
            match (num("times")?, num("step")?) {
                (Some(f), None) if f > 1.0 && from > 0.0 => {
                    while x <= to * (1.0 + 1e-9) && out.len() < 10_000 {
                        out.push(x);
                        x *= f;
                    }
                }
                (None, Some(s)) if s > 0.0 => {
                    while x <= to * (1.0 + 1e-9) && out.len() < 10_000 {
                        out.push(x);
                        x += s;
                    }
                }
                _ => return refuse("a range needs `times` > 1 (from > 0) or `step` > 0, not both"),
            }
            if out.len() >= 10_000 {
                return refuse("a range may hold at most 10,000 values");
            }
            Ok(out
                .into_iter()
                .map(|x| {
                    if x.fract() == 0.0 {
                        toml::Value::Integer(x as i64)
                    } else {
                        toml::Value::Float(x)
                    }
                })
                .collect())
        }
        _ => refuse("an axis is a list of values or a range table { from, to, times | step }"),
    }
}

/// A sweep value as a person writes it (strings without quotes).
pub fn display_value(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
title = "Streams"
description = "Throughput vs streams."

[test]
workload = "stream"
duration = "1s"

[sweep]
flows = { from = 1, to = 8, times = 2 }
direction = ["tx", "rx"]

[model]
line_rate = "best"

[[plot]]
x = "flows"
y = "throughput_bps"
series = "direction"
log_x = true
models = ["line_rate", "threshold"]
"#;

    #[test]
    fn a_good_file_parses_with_axes_in_written_order() {
        let s = Study::parse(GOOD, "s.toml", "s").unwrap();
        assert_eq!(s.name, "s");
        assert_eq!(s.axes[0].key, "flows");
        assert_eq!(s.axes[0].values.len(), 4);
        assert_eq!(s.axes[1].key, "direction");
        assert_eq!(s.axes[0].line, 10);
        assert_eq!(s.model.line_rate(), Some(LineRate::Best));
    }

    fn err(text: &str) -> String {
        Study::parse(text, "bad.toml", "bad")
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn unknown_keys_name_file_line_and_key() {
        let e = err(&GOOD.replace("duration = \"1s\"", "duration = \"1s\"\nflowz = 3"));
        assert!(e.starts_with("bad.toml:8:"), "{e}");
        assert!(e.contains("flowz"), "{e}");
        let e = err(&GOOD.replace("direction = [", "colour = ["));
        assert!(e.starts_with("bad.toml:11:"), "{e}");
        assert!(e.contains("unknown sweep axis `colour`"), "{e}");
        let e = err(&GOOD.replace("log_x = true", "log_z = true"));
        assert!(e.contains("log_z"), "{e}");
        let e = err(&GOOD.replace("[model]", "[modle]"));
        assert!(e.contains("modle"), "{e}");
    }

    #[test]
    fn bad_values_name_the_line_and_value() {
        let e = err(&GOOD.replace("[\"tx\", \"rx\"]", "[\"tx\", \"up\"]"));
        assert!(e.starts_with("bad.toml:11:"), "{e}");
        assert!(e.contains("sweep.direction: value up"), "{e}");
        let e = err(&GOOD.replace("series = \"direction\"", "series = \"message\""));
        assert!(e.contains("plot series `message`"), "{e}");
        let e = err(&GOOD.replace("times = 2", "times = 1"));
        assert!(e.contains("times"), "{e}");
        let e = err(&GOOD.replace("duration = \"1s\"", "duration = \"1 fortnight\""));
        assert!(
            e.starts_with("bad.toml:7:") && e.contains("duration"),
            "{e}"
        );
        let e = err(&GOOD.replace("[\"tx\", \"rx\"]", "[\"tx\", \"tx\"]"));
        assert!(e.contains("value tx appears twice"), "{e}");

        let e = err("title = 3");
        assert!(e.starts_with("bad.toml:1:"), "{e}");
    }

    #[test]
    fn zip_needs_equal_lengths_and_cases_need_labels() {
        let e = err(&GOOD.replace("[sweep]", "[sweep]\nmode = \"zip\""));
        assert!(e.contains("equal length"), "{e}");
        let e = err("title = \"t\"\ndescription = \"d\"\n[[case]]\nworkload = \"rr\"\n");
        assert!(e.contains("needs a label"), "{e}");
    }
}
