//! What a running lab is, written to /run/linerate/labs/NAME.json so that
//! `run --lab NAME`, `lab status` and `lab down` in other processes find its
//! namespaces and its emulator; /run is emptied at boot, as namespaces are.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

use super::emulator;
use crate::model::lab::LabSpec;

pub const STATE_DIR: &str = "/run/linerate/labs";

/// Addresses inside the lab (RFC 2544 benchmarking range).
pub const CLIENT_ADDR: &str = "198.18.0.1";
pub const ROUTER_CLIENT_ADDR: &str = "198.18.0.254";
pub const SERVER_ADDR: &str = "198.18.1.1";
pub const ROUTER_SERVER_ADDR: &str = "198.18.1.254";

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct EmulatorState {
    pub pid: u32,
    /// The process's start time (field 22 of /proc/PID/stat), so a reused
    /// PID is never mistaken for the emulator.
    pub start_ticks: u64,
    pub stats: PathBuf,
    pub config: emulator::Config,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LabState {
    pub name: String,
    pub spec: LabSpec,
    /// Which emulator applies the link: "nfqueue" (user space) or "netem".
    pub backend: String,
    /// Why that backend: what the start-up probe found.
    pub backend_note: String,
    pub client_ns: String,
    pub router_ns: String,
    pub server_ns: String,
    pub client_addr: String,
    pub server_addr: String,
    /// None with netem (the kernel does the work).
    pub emulator: Option<EmulatorState>,
    /// A lab made for one study or test: removed when that process is gone.
    pub owner_pid: Option<u32>,
    pub owner_start_ticks: Option<u64>,
    /// Settings outside the lab that bringing it up changed (said aloud).
    #[serde(default)]
    pub host_changes: Vec<String>,
    /// The last full calibration (RTT and one flow's goodput), at `lab up`
    /// or when a study changed the link; every result carries its rate check.
    #[serde(default)]
    pub calibration: Option<crate::model::lab::Calibration>,
    pub created_at: String,
}

pub fn state_path(name: &str) -> PathBuf {
    PathBuf::from(STATE_DIR).join(format!("{name}.json"))
}

pub fn load(name: &str) -> Result<Option<LabState>, String> {
    let p = state_path(name);
    match std::fs::read_to_string(&p) {
        Ok(t) => serde_json::from_str(&t).map(Some).map_err(|e| {
            format!(
                "{}: {e} (remove it, or run `linerate lab down {name}`)",
                p.display()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", p.display())),
    }
}

pub fn save(s: &LabState) -> Result<(), String> {
    std::fs::create_dir_all(STATE_DIR).map_err(|e| format!("{STATE_DIR}: {e}"))?;
    let p = state_path(&s.name);
    let tmp = p.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(s).map_err(|e| e.to_string())?;
    std::fs::write(&tmp, text + "\n").map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, &p).map_err(|e| format!("{}: {e}", p.display()))
}

/// Names of every lab with a state file.
pub fn list() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(STATE_DIR)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().to_string();
            // NAME.json; NAME.emulator.json holds the emulator's counters.
            n.strip_suffix(".json")
                .filter(|n| !n.contains('.'))
                .map(str::to_string)
        })
        .collect();
    names.sort();
    names
}

/// The fields of /proc/PID/stat after the command name, from field 3
/// (state) on: index `n - 3` holds stat(5)'s field `n`. The name may hold
/// spaces and parentheses, so the fields start after the last ')'.
pub fn proc_stat(pid: &str) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// Start time of a process in clock ticks since boot (field 22; None: no such process).
pub fn start_ticks(pid: u32) -> Option<u64> {
    proc_stat(&pid.to_string())?.get(19)?.parse().ok()
}

/// The process `pid` started at `ticks` is still alive (and not a zombie).
pub fn alive(pid: u32, ticks: u64) -> bool {
    match proc_stat(&pid.to_string()) {
        Some(f) => {
            f.first().is_some_and(|s| s != "Z")
                && f.get(19).and_then(|t| t.parse().ok()) == Some(ticks)
        }
        None => false,
    }
}

impl LabState {
    pub fn emulator_alive(&self) -> bool {
        self.emulator
            .as_ref()
            .is_none_or(|e| alive(e.pid, e.start_ticks))
    }

    pub fn owner_alive(&self) -> bool {
        match (self.owner_pid, self.owner_start_ticks) {
            (Some(p), Some(t)) => alive(p, t),
            _ => true,
        }
    }

    /// Left behind by a crash: its emulator or its owner is gone.
    pub fn is_stale(&self) -> bool {
        !self.emulator_alive() || !self.owner_alive()
    }

    pub fn namespaces(&self) -> [&str; 3] {
        [&self.client_ns, &self.router_ns, &self.server_ns]
    }

    /// The emulator's latest counters (None: netem, or not written yet).
    pub fn emulator_stats(&self) -> Option<emulator::Stats> {
        let e = self.emulator.as_ref()?;
        let t = std::fs::read_to_string(&e.stats).ok()?;
        serde_json::from_str(&t).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_alive_and_a_wrong_start_time_is_not() {
        let me = std::process::id();
        let t = start_ticks(me).expect("own start time");
        assert!(alive(me, t));
        assert!(!alive(me, t + 1));
        assert!(!alive(u32::MAX - 1, t));
    }
}
