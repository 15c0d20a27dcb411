//! Results over time. Every run and study is recorded in a history store
//! (one SQLite file: `store`), keyed by what ran and where (a series) with
//! the environment's fingerprint beside it, so "this moved on Tuesday"
//! is a query, not a folder hunt. `watch` runs a command on a schedule
//! and tests each tracked figure for a change after every run
//! (`changepoint`: E-divisive means to place it, a t-test to accept it).
//!
//! The store is on by default: `$LINERATE_HISTORY`, else
//! `$XDG_DATA_HOME/linerate/history.db`, else
//! `~/.local/share/linerate/history.db`; `LINERATE_HISTORY=off` or
//! `--history off` records nothing.

use std::path::{Path, PathBuf};

pub mod changepoint;
pub mod detect;
pub mod entry;
pub mod exporter;
pub mod import;
pub mod report;
pub mod store;

pub use entry::Entry;
pub use store::Store;

/// Set by `watch` for its runs: their entries carry the watch's label.
pub const WATCH_ENV: &str = "LINERATE_WATCH";
/// Set by `watch` for its runs: the recorded run's id is written there.
pub const ID_FILE_ENV: &str = "LINERATE_HISTORY_ID_FILE";

#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("the history store {path} is locked by another process (waited 10 s): retry when it is done, or give another store with --history FILE")]
    Locked { path: PathBuf },
    #[error("the history store {path} is damaged ({why}): move it aside (mv {p} {p}.bad) and a new one is made; `sqlite3 {p}.bad .recover` may save its rows", p = path.display())]
    Damaged { path: PathBuf, why: String },
    #[error("the history store {path} was written by a newer linerate (schema {version}): use that linerate, or another store with --history FILE")]
    Newer { path: PathBuf, version: i64 },
    #[error("the history store {path}: {why}")]
    Sql { path: PathBuf, why: String },
    #[error("cannot write {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Usage(String),
}

impl HistoryError {
    pub fn is_usage(&self) -> bool {
        matches!(self, HistoryError::Usage(_))
    }

    /// SQLite's error, named by what the user can do about it.
    pub fn of_sql(path: &Path, e: rusqlite::Error) -> HistoryError {
        use rusqlite::ffi::ErrorCode;
        let path = path.to_path_buf();
        match e.sqlite_error_code() {
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
                HistoryError::Locked { path }
            }
            Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => HistoryError::Damaged {
                path,
                why: e.to_string(),
            },
            _ => HistoryError::Sql {
                path,
                why: e.to_string(),
            },
        }
    }
}

crate::error::classed_by_is_usage!(HistoryError);

/// The store runs are recorded in: `flag` (`--history FILE|off`), else
/// `$LINERATE_HISTORY`, else the user's data folder. None: recording is
/// off (or there is no home to keep it in).
pub fn store_path(flag: Option<&Path>) -> Option<PathBuf> {
    let off = |p: &Path| p.as_os_str() == "off" || p.as_os_str().is_empty();
    if let Some(p) = flag {
        return (!off(p)).then(|| p.to_path_buf());
    }
    if let Some(v) = std::env::var_os("LINERATE_HISTORY") {
        let p = PathBuf::from(v);
        return (!off(&p)).then_some(p);
    }
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))?;
    Some(data.join("linerate").join("history.db"))
}

/// Records `e` in the store at `path` (with a watch's label when a watch
/// runs this process), and tells a watch the run's id. A store that
/// cannot take it gets it spooled; the error says so, for a warning: the
/// measurement itself stands.
pub fn record(path: &Path, mut e: Entry) -> Result<i64, String> {
    if let Some(w) = std::env::var(WATCH_ENV).ok().filter(|w| !w.is_empty()) {
        e.watch = Some(w);
    }
    let stored = Store::open(path).and_then(|mut s| s.record(&e));
    match stored {
        Ok(id) => {
            if let Some(f) = std::env::var_os(ID_FILE_ENV) {
                let _ = std::fs::write(f, id.to_string());
            }
            Ok(id)
        }
        Err(err) => Err(match store::spool(path, &e) {
            Ok(f) => format!(
                "not recorded in the history: {err} (kept in {} until the store opens again)",
                f.display()
            ),
            Err(e2) => format!("not recorded in the history: {err}; nor spooled: {e2}"),
        }),
    }
}
