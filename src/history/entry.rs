//! One run as the history keeps it: what ran (the spec), where (agent,
//! hosts, lab), on what (an environment fingerprint), when, how it ended,
//! and its figures as (point, metric, value) rows: every metric of the
//! catalogue (`report::analysis::metrics`) the result has, the mean over
//! its iterations, as a study's landscape computes them.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::model::host::HostInfo;
use crate::model::result::TestResult;
use crate::report::analysis::{landscape, metrics};
use crate::study::folder::Loaded;

/// A single test (`linerate run`) or a study (`study run`, `quick`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunKind {
    Run,
    Study,
}

impl RunKind {
    pub fn word(self) -> &'static str {
        match self {
            RunKind::Run => "run",
            RunKind::Study => "study",
        }
    }

    pub fn parse(s: &str) -> Option<RunKind> {
        match s {
            "run" => Some(RunKind::Run),
            "study" => Some(RunKind::Study),
            _ => None,
        }
    }
}

/// One figure: a study's point id ("" for a single test), the metric's
/// catalogue key, its mean.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    pub point: String,
    pub metric: String,
    pub value: f64,
}

/// The parts of an end's host that make a figure comparable: a change of
/// any of them is a new environment (a new fingerprint).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostBrief {
    pub hostname: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cpus: usize,
    pub linerate_version: String,
    pub git_commit: String,
}

impl HostBrief {
    pub fn of(h: &HostInfo) -> HostBrief {
        HostBrief {
            hostname: h.hostname.clone(),
            kernel: h.kernel.clone(),
            cpu_model: h.cpu_model.clone(),
            cpus: h.cpus,
            linerate_version: h.linerate_version.clone(),
            git_commit: h.git_commit.clone(),
        }
    }
}

/// The client's end and, when one was measured, the server's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    pub client: HostBrief,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<HostBrief>,
}

impl Environment {
    /// 12 hex digits of the environment: equal fingerprints, same hosts,
    /// kernels, CPUs and linerate build.
    pub fn fingerprint(&self) -> String {
        short_hash(&serde_json::to_string(self).unwrap_or_default())
    }
}

/// A run to record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// When it started, RFC 3339 UTC.
    pub at: String,
    pub kind: RunKind,
    /// The workload (a run) or the study's name.
    pub name: String,
    /// What ran, as JSON: the test's spec, or the study file with its
    /// overrides. Two runs of one command line have equal specs.
    pub spec: String,
    /// Where: "local" (an agent this process started), the agent's
    /// address, or the hosts of a fleet.
    pub target: String,
    /// The lab's name ("" without one).
    pub lab: String,
    pub environment: Environment,
    /// "ok", "partial" or "failed".
    pub status: String,
    pub error: Option<String>,
    /// The results folder or JSON file the figures came from, if any.
    pub results: Option<String>,
    /// The watch that ran it, if one did.
    pub watch: Option<String>,
    /// The command line, as run.
    pub command: String,
    pub figures: Vec<Figure>,
}

impl Entry {
    /// The series this run belongs to: what ran and where, not on what,
    /// so a kernel or linerate upgrade stays in the series and shows as a
    /// change of fingerprint beside any change of the figures.
    pub fn series(&self) -> String {
        series_key(self.kind, &self.name, &self.spec, &self.target, &self.lab)
    }
}

pub fn series_key(kind: RunKind, name: &str, spec: &str, target: &str, lab: &str) -> String {
    short_hash(&format!("{}\n{name}\n{spec}\n{target}\n{lab}", kind.word()))
}

fn short_hash(text: &str) -> String {
    let d = Sha256::digest(text.as_bytes());
    d.iter().take(6).map(|b| format!("{b:02x}")).collect()
}

/// Where a result ran, stable across runs: a local agent's port changes
/// every time, so it is "local"; a fleet is its hosts, sorted.
fn target_of(r: &TestResult) -> String {
    if !r.hosts.is_empty() {
        let mut hosts: Vec<&str> = r.hosts.iter().map(|h| h.control.as_str()).collect();
        hosts.sort();
        hosts.dedup();
        return hosts.join(",");
    }
    match (&r.agent.foreign, r.agent.local) {
        (Some(f), _) => format!("{f} {}", r.agent.address),
        (None, true) => "local".into(),
        (None, false) => r.agent.address.clone(),
    }
}

/// The spec as a series key reads it: the JSON of what was asked (the
/// agent's address is `target_of`'s, so a local agent's new port each run
/// is not in it).
fn spec_text(r: &TestResult) -> String {
    serde_json::to_value(&r.spec)
        .unwrap_or_default()
        .to_string()
}

fn environment_of(r: &TestResult) -> Environment {
    let server = &r.environment.agent;
    Environment {
        client: HostBrief::of(&r.environment.client),
        server: (!server.hostname.is_empty()).then(|| HostBrief::of(server)),
    }
}

/// Every catalogue metric `r` has, as the mean over its iterations (the
/// ok ones, or its only one).
pub fn figures_of(r: &TestResult, point: &str) -> Vec<Figure> {
    metrics::means(r)
        .into_iter()
        .map(|(m, value)| Figure {
            point: point.into(),
            metric: m.key.into(),
            value,
        })
        .collect()
}

/// A single test's result.
pub fn of_result(r: &TestResult, results: Option<String>) -> Entry {
    Entry {
        at: r.started_at.clone(),
        kind: RunKind::Run,
        name: r.spec.workload.name().into(),
        spec: spec_text(r),
        target: target_of(r),
        lab: r.lab.as_ref().map_or(String::new(), |l| l.name.clone()),
        environment: environment_of(r),
        status: r.summary.status.word().into(),
        error: r.iterations.iter().find_map(|i| i.error.clone()),
        results,
        watch: None,
        command: shlex::try_join(r.command.iter().map(String::as_str)).unwrap_or_default(),
        figures: figures_of(r, ""),
    }
}

/// A study's folder: one figure per point and metric, from its landscape
/// (the means its report shows).
pub fn of_study(loaded: &Loaded) -> Entry {
    let m = &loaded.manifest;
    let land = landscape::build(loaded);
    let figures = land
        .rows
        .iter()
        .flat_map(|row| {
            row.values.iter().map(|(k, e)| Figure {
                point: row.point.id.clone(),
                metric: (*k).into(),
                value: e.mean,
            })
        })
        .filter(|f| f.value.is_finite())
        .collect();
    let spec = serde_json::json!({
        "study": std::fs::read_to_string(loaded.dir.join("study.toml")).unwrap_or_default(),
        "overrides": m.overrides,
        "repeat": m.repeat,
    });
    let first = loaded.results.first().map(|(_, r)| r);
    let status = match m.status {
        crate::study::folder::StudyStatus::Complete => "ok",
        _ if loaded.results.is_empty() => "failed",
        _ => "partial",
    };
    Entry {
        at: m.created_at.clone(),
        kind: RunKind::Study,
        name: m.study.clone(),
        spec: spec.to_string(),
        target: first.map_or_else(|| m.network.clone(), target_of),
        lab: first
            .and_then(|r| r.lab.as_ref())
            .map_or(String::new(), |l| l.name.clone()),
        environment: first.map(environment_of).unwrap_or_default(),
        status: status.into(),
        error: m.runs.iter().find_map(|r| r.error.clone()),
        results: Some(loaded.dir.display().to_string()),
        watch: None,
        command: shlex::try_join(m.command.iter().map(String::as_str)).unwrap_or_default(),
        figures,
    }
}

/// This host, for a run that failed before any result said where it ran.
pub fn this_host() -> Environment {
    Environment {
        client: HostBrief::of(&crate::measure::host::collect()),
        server: None,
    }
}
