//! What a study can fail at: its file (every error names the file, and the
//! line where there is one), its points, and its results folder. The file
//! and its points are the user's input (usage, exit 2); a results folder
//! that cannot be made or read, and a lab that fails under it, failed.

use std::io;
use std::path::PathBuf;

use crate::control::ControlError;
use crate::lab::LabError;
use crate::model::{Invalid, ModelError};

#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    /// A study file that does not hold at a line: file, line, what.
    #[error("{origin}:{line}: {message}")]
    At {
        origin: String,
        line: usize,
        message: String,
    },
    /// A study file that does not hold as a whole (no one line to name).
    #[error("{origin}: {message}")]
    In { origin: String, message: String },
    /// A point of the sweep that is not a valid test by the spec's rules
    /// (or a mix's groups).
    #[error("{origin}: point {label}: {source}")]
    Point {
        origin: String,
        label: String,
        source: Invalid,
    },
    /// A point that the checks every test passes refuse (its workload's,
    /// the TLS library's; boxed: control's error is large).
    #[error("{origin}: point {label}: {source}")]
    PointCheck {
        origin: String,
        label: String,
        source: Box<ControlError>,
    },
    /// The study's `[lab]` that does not hold (the lab's message, its
    /// flags' dashes left out: they are keys here).
    #[error("{origin}: [lab] {}", source.to_string().replace("--", ""))]
    LabSection { origin: String, source: LabError },
    /// A sweep point's values that are not options.
    #[error(transparent)]
    Options(#[from] ModelError),
    #[error("cannot read study file {}: {source}", path.display())]
    ReadStudy { path: PathBuf, source: io::Error },
    /// Neither a file nor a built-in study.
    #[error("no study named '{name}': built-in studies are {builtins} (see `linerate study list`), or give a .toml file")]
    Unknown { name: String, builtins: String },

    // The results folder.
    #[error("cannot write {}: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
    #[error("{0}")]
    Json(serde_json::Error),
    #[error("{} is not a study results folder ({}: {source})", dir.display(), manifest.display())]
    NotAFolder {
        dir: PathBuf,
        manifest: PathBuf,
        source: io::Error,
    },
    #[error("{}: not a linerate study manifest: {source}", path.display())]
    BadManifest {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// A manifest of another schema or a newer version than `reads`.
    #[error("{}: schema {schema} v{version} is not one this linerate reads ({} v{})", path.display(), reads.0, reads.1)]
    Schema {
        path: PathBuf,
        schema: String,
        version: u32,
        reads: (&'static str, u32),
    },
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("{}: not a linerate result: {source}", path.display())]
    BadResult {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("cannot create {}: {source}", path.display())]
    Create { path: PathBuf, source: io::Error },
    #[error("cannot find a free folder name under {}", .0.display())]
    NoFreeName(PathBuf),
    /// The study stored in a results folder no longer parses: the folder's
    /// problem, not the user's input.
    #[error(transparent)]
    Stored(Box<StudyError>),

    // The study's own lab.
    #[error(transparent)]
    Lab(#[from] LabError),
    /// A point's sysctl that cannot be read in the lab.
    #[error("sysctl {key}: {source} (is it a sysctl of this kernel?)")]
    Sysctl { key: String, source: LabError },
    /// A point's sysctl that is the host's, not the namespace's.
    #[error("sysctl {key} is not per network namespace: setting it in the lab changed the host's (put back to \"{before}\"); refused")]
    HostSysctl { key: String, before: String },
}

impl StudyError {
    /// Whether the user's input (the study file, its points, a name) is
    /// what is wrong.
    pub fn is_usage(&self) -> bool {
        use StudyError::*;
        match self {
            At { .. }
            | In { .. }
            | Point { .. }
            | PointCheck { .. }
            | LabSection { .. }
            | Options(_)
            | ReadStudy { .. }
            | Unknown { .. }
            | HostSysctl { .. } => true,
            Lab(e) => e.is_usage(),
            Write { .. }
            | Json(_)
            | NotAFolder { .. }
            | BadManifest { .. }
            | Schema { .. }
            | Read { .. }
            | BadResult { .. }
            | Create { .. }
            | NoFreeName(_)
            | Stored(_)
            | Sysctl { .. } => false,
        }
    }
}

crate::error::classed_by_is_usage!(StudyError);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::study::file::Study;

    #[test]
    fn a_study_file_is_input_and_a_results_folder_is_not() {
        let e = Study::parse("title = 3", "s.toml", "s").unwrap_err();
        assert!(e.to_string().starts_with("s.toml:1: "), "{e}");
        assert!(matches!(Error::from(e), Error::Usage(_)));
        let lab = "title = \"t\"\ndescription = \"d\"\n[lab]\nrtt = \"10\"\n";
        let e = Study::parse(lab, "s.toml", "s").unwrap_err();
        assert_eq!(
            e.to_string(),
            "s.toml: [lab] rtt 10: give a unit: 10ms or 10s (a bare number is ambiguous here)"
        );
        let dir = tempfile::tempdir().unwrap();
        let e = crate::study::folder::read_manifest(dir.path()).unwrap_err();
        assert!(
            e.to_string().starts_with(&format!(
                "{} is not a study results folder (",
                dir.path().display()
            )),
            "{e}"
        );
        assert!(matches!(Error::from(e), Error::Failed(_)));
        let stored = StudyError::Stored(Box::new(StudyError::In {
            origin: "r/study.toml".into(),
            message: "repeat must be at least 1".into(),
        }));
        assert_eq!(
            stored.to_string(),
            "r/study.toml: repeat must be at least 1"
        );
        assert!(matches!(Error::from(stored), Error::Failed(_)));
    }
}
