//! Sysctls an agent changes for a test (`serve --allow-sysctl`, root): the
//! values before the change go to a journal file first, the test's values
//! are written, and the old ones are put back when the test ends, when the
//! agent is stopped (SIGINT, SIGTERM), or at the agent's next start if it
//! died (the journal is replayed). One journal per network namespace, so
//! agents in different namespaces never restore each other's values.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use super::OpsError;

/// Where the journals live (root-only).
const DIR: &str = "/run/linerate";

/// One test's changes at a time per agent (their put-backs would cross).
static ACTIVE: Mutex<()> = Mutex::new(());

use crate::measure::host::sysctl_path as proc_path;

/// Whether this network namespace has sysctl `key` (a namespace has no
/// net.core.netdev_max_backlog: that one is the host's).
pub fn in_this_namespace(key: &str) -> bool {
    std::path::Path::new(&proc_path(key)).exists()
}

fn read(key: &str) -> Result<String, OpsError> {
    std::fs::read_to_string(proc_path(key))
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
        .map_err(|source| OpsError::ReadSysctl {
            key: key.into(),
            source,
        })
}

fn write(key: &str, value: &str) -> Result<(), OpsError> {
    std::fs::write(proc_path(key), value).map_err(|source| OpsError::SetSysctl {
        key: key.into(),
        value: value.into(),
        source,
    })
}

/// This thread's network namespace, for the journal's name.
fn journal() -> PathBuf {
    let ns = std::fs::read_link("/proc/thread-self/ns/net")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let id: String = ns.chars().filter(|c| c.is_ascii_digit()).collect();
    PathBuf::from(DIR).join(format!("sysctl-journal-{id}.json"))
}

fn save(values: &BTreeMap<String, String>) -> Result<(), OpsError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let _ = std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(DIR);
    let path = journal();
    let tmp = path.with_extension("tmp");
    let text = serde_json::to_string_pretty(values).map_err(OpsError::Json)?;
    std::fs::write(&tmp, text).map_err(|source| OpsError::Io {
        path: tmp.clone(),
        source,
    })?;
    let _ = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600));
    std::fs::rename(&tmp, &path).map_err(|source| OpsError::Io { path, source })
}

/// Puts back what a journal of this namespace holds and removes it;
/// returns the sysctls restored. Called at the agent's start and on its
/// stop.
pub fn replay() -> Result<Vec<String>, OpsError> {
    let path = journal();
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(Vec::new());
    };
    let old: BTreeMap<String, String> =
        serde_json::from_str(&text).map_err(|source| OpsError::BadJournal {
            path: path.clone(),
            source,
        })?;
    let mut done = Vec::new();
    for (k, v) in &old {
        // Only what a test may set: never let a journal name other files.
        if !k.starts_with("net.") || k.contains("..") || k.contains('/') {
            continue;
        }
        write(k, v)?;
        done.push(format!("{k} = {v}"));
    }
    std::fs::remove_file(&path).map_err(|source| OpsError::Io { path, source })?;
    Ok(done)
}

/// A test's sysctls, in force until dropped.
pub struct Applied {
    _turn: std::sync::MutexGuard<'static, ()>,
    old: BTreeMap<String, String>,
}

/// Journals the current values of `want`'s keys, then sets `want`.
pub fn apply(want: &BTreeMap<String, String>) -> Result<Applied, OpsError> {
    let turn = ACTIVE.try_lock().map_err(|_| OpsError::Busy)?;
    let mut old = BTreeMap::new();
    for k in want.keys() {
        old.insert(k.clone(), read(k)?);
    }
    save(&old)?;
    let applied = Applied { _turn: turn, old };
    for (k, v) in want {
        write(k, v)?;
    }
    Ok(applied)
}

impl Drop for Applied {
    fn drop(&mut self) {
        for (k, v) in &self.old {
            let _ = write(k, v);
        }
        let _ = std::fs::remove_file(journal());
    }
}
