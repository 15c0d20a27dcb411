//! A study's results folder: the study file as run, a manifest of every
//! planned run and its state, and one result JSON per finished run. Each
//! result is written when its test ends (to a temporary name, then renamed),
//! so a study stopped at any moment keeps every finished point, and reports
//! are drawn from the folder alone, never by running anything (flent's
//! "data is saved once, re-plotted later").
//!
//! ```text
//! results/<study>-<time>/
//!   study.toml        the study file as run
//!   manifest.json     plan, state of each run, overrides, shuffle seed
//!   points/<point>.r<k>.json   one linerate.result per run
//!   report.html  report.md  landscape.csv
//! ```

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

use crate::model::options::TestOptions;
use crate::model::result::{Status, TestResult};
use crate::study::file::Study;
use crate::study::sweep::{self, Point};
use crate::study::StudyError;

pub const MANIFEST_SCHEMA: &str = "linerate.study";
pub const MANIFEST_VERSION: u32 = 2;

/// Where a study's folder stands.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum StudyStatus {
    /// Runs are under way (or the process died: resume it).
    Running,
    /// Every run is stored.
    Complete,
    /// Stopped early (an error or Ctrl-C); `--resume` continues it.
    Partial,
}

impl std::fmt::Display for StudyStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StudyStatus::Running => "running",
            StudyStatus::Complete => "complete",
            StudyStatus::Partial => "partial",
        })
    }
}

/// One planned run: a point and its repetition number (1-based).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RunRecord {
    pub point: String,
    pub repetition: u32,
    /// Path relative to the folder.
    pub file: String,
    /// Pending, ok, partial (ended early; kept) or failed.
    pub status: Status,
    pub error: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    pub schema: String,
    pub schema_version: u32,
    pub study: String,
    pub title: String,
    pub created_at: String,
    pub updated_at: String,
    pub status: StudyStatus,
    /// Where the tests ran: "loopback (local agent)" or the agent address.
    pub network: String,
    pub repeat: u32,
    pub shuffle: bool,
    pub seed: Option<u64>,
    /// Command-line settings applied over every point (e.g. a duration).
    pub overrides: TestOptions,
    pub points: Vec<Point>,
    /// In the order they run.
    pub runs: Vec<RunRecord>,
    pub command: Vec<String>,
}

impl Manifest {
    pub fn point(&self, id: &str) -> Option<&Point> {
        self.points.iter().find(|p| p.id == id)
    }
}

/// Writes `bytes` to `path` atomically (temporary file, then rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StudyError> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|source| {
            // A half-written temporary file only takes space.
            let _ = std::fs::remove_file(&tmp);
            StudyError::Write {
                path: path.into(),
                source,
            }
        })
}

pub fn write_json(path: &Path, value: &impl Serialize) -> Result<(), StudyError> {
    let text = serde_json::to_string_pretty(value).map_err(StudyError::Json)?;
    write_atomic(path, (text + "\n").as_bytes())
}

pub fn manifest_path(dir: &Path) -> PathBuf {
    dir.join("manifest.json")
}

pub fn read_manifest(dir: &Path) -> Result<Manifest, StudyError> {
    let path = manifest_path(dir);
    let text = std::fs::read_to_string(&path).map_err(|source| StudyError::NotAFolder {
        dir: dir.into(),
        manifest: path.clone(),
        source,
    })?;
    let m: Manifest = serde_json::from_str(&text).map_err(|source| StudyError::BadManifest {
        path: path.clone(),
        source,
    })?;
    if m.schema != MANIFEST_SCHEMA || m.schema_version > MANIFEST_VERSION {
        return Err(StudyError::Schema {
            path,
            schema: m.schema,
            version: m.schema_version,
            reads: (MANIFEST_SCHEMA, MANIFEST_VERSION),
        });
    }
    Ok(m)
}

/// A folder read back: the study, its manifest, and every stored result.
pub struct Loaded {
    pub dir: PathBuf,
    pub study: Study,
    pub manifest: Manifest,
    /// (run, result) for each run with a result file, in run order.
    pub results: Vec<(RunRecord, TestResult)>,
}

pub fn load(dir: &Path) -> Result<Loaded, StudyError> {
    let manifest = read_manifest(dir)?;
    let study_path = dir.join("study.toml");
    let text = std::fs::read_to_string(&study_path).map_err(|source| StudyError::Read {
        path: study_path.clone(),
        source,
    })?;
    let study = Study::parse(&text, &study_path.display().to_string(), &manifest.study)
        .and_then(sweep::checked)
        .map_err(|e| StudyError::Stored(Box::new(e)))?;
    let mut results = Vec::new();
    for run in &manifest.runs {
        let path = dir.join(&run.file);
        if !path.exists() {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|source| StudyError::Read {
            path: path.clone(),
            source,
        })?;
        let r: TestResult =
            serde_json::from_str(&text).map_err(|source| StudyError::BadResult {
                path: path.clone(),
                source,
            })?;
        results.push((run.clone(), r));
    }
    Ok(Loaded {
        dir: dir.to_path_buf(),
        study,
        manifest,
        results,
    })
}

/// `results/<name>-<2026-11-22T10-00-00>`, made unique with a suffix.
pub fn new_dir(root: &Path, name: &str) -> Result<PathBuf, StudyError> {
    let stamp = crate::units::rfc3339_now()
        .trim_end_matches('Z')
        .replace(':', "-");
    std::fs::create_dir_all(root).map_err(|source| StudyError::Create {
        path: root.into(),
        source,
    })?;
    for n in 0..1000 {
        let dir = if n == 0 {
            root.join(format!("{name}-{stamp}"))
        } else {
            root.join(format!("{name}-{stamp}.{n}"))
        };
        match std::fs::create_dir(&dir) {
            Ok(()) => {
                let points = dir.join("points");
                std::fs::create_dir(&points).map_err(|source| StudyError::Create {
                    path: points,
                    source,
                })?;
                return Ok(dir);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(source) => return Err(StudyError::Create { path: dir, source }),
        }
    }
    Err(StudyError::NoFreeName(root.into()))
}
