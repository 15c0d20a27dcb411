//! Many hosts (`linerate cluster up|status|down HOSTS.toml`): agents started
//! over the system's OpenSSH client, checked, and stopped again.
//!
//! `up` logs in with `ssh -o BatchMode=yes` (the user's ssh config and
//! agent; `ssh_options` of the hosts file come after), copies this binary
//! with scp to `remote_binary` when the host lacks this version (or this
//! build: the sha256 of the file differs), and starts `serve --detach` with
//! a fresh token that travels on ssh's standard input, never on a command
//! line. Tokens and process ids go to a state file only the user can read
//! (see [`state_path`]); `down` stops what `up` started. Hosts with a
//! `token_file` run agents started by hand: they are checked, never started
//! or stopped.
//!
//! Every step runs on all hosts at once and must succeed on all of them
//! before the next starts: a failure is one line naming the host, and the
//! agents this `up` started elsewhere are stopped again.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{HostError, OpsError};
use crate::control::protocol::Probe;
use crate::control::protocol::{random_hex, read_token_file};
use crate::model::hosts::{Host, HostsFile};

/// What `linerate --version` prints; agents must run exactly this.
pub fn software() -> String {
    format!("linerate {}", env!("CARGO_PKG_VERSION"))
}

/// Longest an ssh command (not a copy) may take before it is killed.
const SSH_LIMIT: Duration = Duration::from_secs(60);
/// Longest a copy of the binary may take (tens of MB over a slow link).
const SCP_LIMIT: Duration = Duration::from_secs(900);
/// Longest `down` waits for an agent to exit after SIGTERM, in tenths of a second.
const STOP_WAIT_DECIS: u32 = 100;

/// A hosts file, its hosts and the path its state is keyed by.
#[derive(Clone, Debug)]
pub struct Cluster {
    /// The hosts file, canonical.
    pub path: PathBuf,
    pub hosts: Vec<Host>,
}

/// Reads and checks a hosts file.
pub fn load(hosts_path: &Path) -> Result<Cluster, OpsError> {
    let path = std::fs::canonicalize(hosts_path).map_err(|source| OpsError::HostsFile {
        path: hosts_path.into(),
        source,
    })?;
    let text = std::fs::read_to_string(&path).map_err(|source| OpsError::HostsFile {
        path: path.clone(),
        source,
    })?;
    let base = path.parent().unwrap_or(Path::new("/"));
    let hosts = HostsFile::parse(&text)
        .and_then(|f| f.hosts(base))
        .map_err(|source| OpsError::Hosts {
            path: hosts_path.into(),
            source,
        })?;
    Ok(Cluster { path, hosts })
}

// ---------------------------------------------------------------- state

/// One agent `cluster up` started: where, how it was reached, its token.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Started {
    pub address: IpAddr,
    pub port: u16,
    /// The ssh destination and options it was started with (`down` uses
    /// these, so an edited hosts file still stops the right process).
    pub ssh: String,
    pub ssh_options: Vec<String>,
    /// The path it runs from, as the remote shell sees it.
    pub remote_binary: String,
    pub pid: u32,
    pub token: String,
    pub software: String,
    pub started_at: String,
}

impl Started {
    pub fn control(&self) -> SocketAddr {
        SocketAddr::new(self.address, self.port)
    }
}

/// The state file of one hosts file: the agents `up` started, by host name.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct State {
    pub hosts_file: PathBuf,
    #[serde(default)]
    pub agents: BTreeMap<String, Started>,
}

#[cfg(test)]
thread_local! {
    /// A unit test's state folder (the environment is the whole process's).
    static TEST_STATE_HOME: std::cell::RefCell<Option<PathBuf>> = const { std::cell::RefCell::new(None) };
}

fn state_dir() -> Result<PathBuf, OpsError> {
    #[cfg(test)]
    if let Some(d) = TEST_STATE_HOME.with(|d| d.borrow().clone()) {
        return Ok(d.join("linerate").join("clusters"));
    }
    let base = match std::env::var_os("XDG_STATE_HOME") {
        Some(d) if Path::new(&d).is_absolute() => PathBuf::from(d),
        _ => match std::env::var_os("HOME") {
            Some(h) if !h.is_empty() => PathBuf::from(h).join(".local/state"),
            _ => return Err(OpsError::NoStateHome),
        },
    };
    Ok(base.join("linerate").join("clusters"))
}

/// `$XDG_STATE_HOME/linerate/clusters/<16 hex of sha256 of the canonical
/// hosts path>.json` (XDG_STATE_HOME defaults to ~/.local/state). The
/// folder is 0700 and the file 0600: it holds the agents' tokens.
pub fn state_path(hosts_path: &Path) -> Result<PathBuf, OpsError> {
    let canonical = std::fs::canonicalize(hosts_path).map_err(|source| OpsError::HostsFile {
        path: hosts_path.into(),
        source,
    })?;
    Ok(state_dir()?.join(format!("{}.json", state_key(&canonical))))
}

fn state_key(canonical: &Path) -> String {
    use sha2::{Digest, Sha256};
    use std::os::unix::ffi::OsStrExt;
    let d = Sha256::digest(canonical.as_os_str().as_bytes());
    d[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// The state of a hosts file (empty when `up` never ran for it).
pub fn load_state(hosts_path: &Path) -> Result<State, OpsError> {
    let p = state_path(hosts_path)?;
    match std::fs::read_to_string(&p) {
        Ok(t) => serde_json::from_str(&t).map_err(|source| OpsError::BadState {
            path: p.clone(),
            source,
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State {
            hosts_file: std::fs::canonicalize(hosts_path).unwrap_or_default(),
            agents: BTreeMap::new(),
        }),
        Err(source) => Err(OpsError::Io { path: p, source }),
    }
}

/// Writes the state (0600, atomically), or removes the file once no agent
/// is left in it.
fn save_state(hosts_path: &Path, st: &State) -> Result<(), OpsError> {
    let p = state_path(hosts_path)?;
    if st.agents.is_empty() {
        return match std::fs::remove_file(&p) {
            Err(source) if source.kind() != std::io::ErrorKind::NotFound => {
                Err(OpsError::Io { path: p, source })
            }
            _ => Ok(()),
        };
    }
    let dir = p.parent().expect("a state file has a folder");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| OpsError::Io {
            path: dir.into(),
            source,
        })?;
    // The two folders that are linerate's: private even if they existed.
    for d in [dir, dir.parent().unwrap_or(dir)] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).map_err(|source| {
            OpsError::Io {
                path: d.into(),
                source,
            }
        })?;
    }
    let tmp = p.with_extension(format!("json.{}.tmp", std::process::id()));
    let text = serde_json::to_string_pretty(st).map_err(OpsError::Json)? + "\n";
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &p)
    };
    write().map_err(|source| {
        let _ = std::fs::remove_file(&tmp);
        OpsError::WriteState { path: p, source }
    })
}

/// The token `cluster up` gave `host`'s agent (None: not started by `up`,
/// or started for another address or port than the file now says).
pub fn token_for(hosts_path: &Path, host: &Host) -> Option<String> {
    let st = load_state(hosts_path).ok()?;
    st.agents
        .get(&host.name)
        .filter(|a| a.control() == host.control())
        .map(|a| a.token.clone())
}

/// The token to reach `host`'s agent: its `token_file`, else the one
/// `cluster up` gave it, else `fallback` (--token-file/LINERATE_TOKEN).
pub fn agent_token(
    hosts_path: &Path,
    host: &Host,
    fallback: Option<&str>,
) -> Result<String, OpsError> {
    if let Some(f) = &host.token_file {
        return read_token_file(f)
            .map_err(|e| OpsError::host(&host.name, HostError::TokenFile(Box::new(e))));
    }
    if let Some(t) = token_for(hosts_path, host) {
        return Ok(t);
    }
    if let Some(t) = fallback.map(str::trim).filter(|t| !t.is_empty()) {
        return Ok(t.to_string());
    }
    Err(OpsError::host(
        &host.name,
        HostError::NoToken {
            control: host.control(),
            hosts_file: hosts_path.into(),
        },
    ))
}

// ---------------------------------------------------------------- ssh

// Logging in to the hosts over ssh, their binaries and the agents on them
// are in ssh.rs.
mod ssh;
use ssh::{check_agent, check_same, ensure_binary, start_agent, stop_agent, Login};
pub use ssh::{remote_binary, Binary, Prober, Stopped};

/// What `up` did for one host.
#[derive(Clone, Debug, Serialize)]
pub struct UpHost {
    pub name: String,
    pub control: SocketAddr,
    /// None for an agent started by hand (not logged into).
    pub binary: Option<Binary>,
    /// "started", "running" (from an earlier up, left as it was),
    /// "restarted" (the binary changed under it), "by hand".
    pub agent: String,
    pub pid: Option<u32>,
    pub probe: Option<ProbeView>,
}

/// A probe as status and up show it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ProbeView {
    pub software: String,
    pub offset_ns: i64,
    pub uncertainty_ns: u64,
    pub rtt_ns: u64,
    pub load: [f64; 3],
    pub tests_running: u32,
    pub uptime_s: f64,
}

impl From<Probe> for ProbeView {
    fn from(p: Probe) -> Self {
        ProbeView {
            software: p.software,
            offset_ns: p.offset_ns,
            uncertainty_ns: p.uncertainty_ns,
            rtt_ns: p.rtt_ns,
            load: p.load,
            tests_running: p.tests_running,
            uptime_s: p.uptime_s,
        }
    }
}

/// Runs `f` for every item at once; results in the items' order.
fn each<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    std::thread::scope(|s| {
        let handles: Vec<_> = items.iter().map(|i| s.spawn(|| f(i))).collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a cluster thread panicked"))
            .collect()
    })
}

/// One line for all the hosts that failed: the first one's reason, and how
/// many more (their reasons go to `say`, one line each).
fn first_error(errors: Vec<OpsError>, say: &(dyn Fn(&str) + Sync)) -> Result<(), OpsError> {
    let mut it = errors.into_iter();
    let Some(first) = it.next() else {
        return Ok(());
    };
    let more: Vec<OpsError> = it.collect();
    for e in &more {
        say(&e.to_string());
    }
    if more.is_empty() {
        Err(first)
    } else {
        Err(OpsError::Several {
            first: Box::new(first),
            more: more.len(),
        })
    }
}

/// `cluster up`: every host's agent answers, runs this linerate, and (for
/// hosts without `token_file`) was started by this or an earlier `up`.
/// `say` gets one line per step and host as it happens. On any failure,
/// the agents this call started are stopped again and the error names the
/// (first) host.
pub fn up(
    hosts_path: &Path,
    say: &(dyn Fn(&str) + Sync),
    probe: Prober,
) -> Result<Vec<UpHost>, OpsError> {
    let cl = load(hosts_path)?;
    let exe = std::env::current_exe().map_err(OpsError::NoExe)?;
    let mut state = load_state(hosts_path)?;
    state.hosts_file = cl.path.clone();
    let managed: Vec<&Host> = cl.hosts.iter().filter(|h| h.token_file.is_none()).collect();
    let logins: Vec<(&Host, Login, String)> = managed
        .iter()
        .map(|h| Ok((*h, Login::of(h)?, remote_binary(h)?)))
        .collect::<Result<_, OpsError>>()?;

    // 1. The binary on every managed host; an earlier agent that answers.
    let prepared = each(&logins, |(h, login, bin)| {
        let binary = ensure_binary(login, bin, &exe)?;
        match &binary {
            Binary::Present => say(&format!("{}: {bin} is {}", h.name, software())),
            Binary::Copied { before } => say(&format!(
                "{}: copied {} to {}:{bin} (it had: {before})",
                h.name,
                exe.display(),
                login.dest
            )),
        }
        let earlier = state
            .agents
            .get(&h.name)
            .filter(|a| a.control() == h.control() && a.remote_binary == *bin);
        let answers =
            earlier.is_some_and(|a| check_same(&h.name, a.control(), &a.token, probe).is_ok());
        Ok::<_, OpsError>((binary, answers))
    });
    let mut errors = Vec::new();
    let mut ready = Vec::new();
    for r in prepared {
        match r {
            Ok(p) => ready.push(p),
            Err(e) => errors.push(e),
        }
    }
    first_error(errors, say)?;
    let prepared: Vec<(Binary, bool)> = ready;

    // 2. Start what is not running (an earlier agent that answers stays,
    // unless its binary was just replaced: then it is restarted).
    let started = each(
        &logins.iter().zip(&prepared).collect::<Vec<_>>(),
        |((h, login, bin), (binary, answers))| {
            start_one(h, login, bin, binary, *answers, &state, say)
        },
    );
    // Record every agent now running before anything else can fail.
    let mut new_agents: Vec<String> = Vec::new();
    let mut errors = Vec::new();
    let mut how: BTreeMap<String, &str> = BTreeMap::new();
    for ((h, _, _), r) in logins.iter().zip(started) {
        match r {
            Ok((Some(a), what)) => {
                state.agents.insert(h.name.clone(), a);
                new_agents.push(h.name.clone());
                how.insert(h.name.clone(), what);
            }
            Ok((None, what)) => {
                how.insert(h.name.clone(), what);
            }
            Err(e) => {
                // An earlier entry stays: `down` checks its pid before a kill.
                errors.push(e);
            }
        }
    }
    save_state(hosts_path, &state)?;
    let undo = |state: &mut State, errors: Vec<OpsError>| -> Result<Vec<UpHost>, OpsError> {
        for name in &new_agents {
            if let Some(a) = state.agents.get(name) {
                match stop_agent(name, a) {
                    Ok(_) => {
                        say(&format!("{name}: stopped its agent again (pid {})", a.pid));
                        state.agents.remove(name);
                    }
                    Err(e) => say(&format!(
                        "{e} (it stays in the state file for `cluster down`)"
                    )),
                }
            }
        }
        save_state(hosts_path, state)?;
        first_error(errors, say).map(|_| Vec::new())
    };
    if !errors.is_empty() {
        return undo(&mut state, errors);
    }

    // 3. Every agent answers, with this token, and runs this version.
    let checks = each(&cl.hosts, |h| {
        let token = match state.agents.get(&h.name) {
            Some(a) if h.token_file.is_none() => a.token.clone(),
            _ => agent_token(hosts_path, h, None)?,
        };
        check_same(&h.name, h.control(), &token, probe)
    });
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for (h, r) in cl.hosts.iter().zip(checks) {
        match r {
            Ok(p) => {
                let hand = h.token_file.is_some();
                say(&format!(
                    "{}: {}answers at {}: {}, clock offset {}",
                    h.name,
                    if hand { "agent started by hand " } else { "" },
                    h.control(),
                    p.software,
                    offset_text(p.offset_ns, p.uncertainty_ns)
                ));
                let i = managed.iter().position(|m| m.name == h.name);
                out.push(UpHost {
                    name: h.name.clone(),
                    control: h.control(),
                    binary: i.map(|i| prepared[i].0.clone()),
                    agent: if hand {
                        "by hand".into()
                    } else {
                        how.get(&h.name).copied().unwrap_or("started").into()
                    },
                    pid: state.agents.get(&h.name).map(|a| a.pid),
                    probe: Some(p.into()),
                });
            }
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return undo(&mut state, errors);
    }
    Ok(out)
}

/// Step 2 of `up` for one host: an earlier agent that answers stays,
/// unless its binary was just replaced; otherwise it is stopped (if still
/// ours) and a new one started. The new agent (None: the earlier one
/// stays) and how it runs now: "running", "started" or "restarted".
fn start_one(
    h: &Host,
    login: &Login,
    bin: &str,
    binary: &Binary,
    answers: bool,
    state: &State,
    say: &(dyn Fn(&str) + Sync),
) -> Result<(Option<Started>, &'static str), OpsError> {
    let replaced = matches!(binary, Binary::Copied { .. });
    if answers && !replaced {
        let a = &state.agents[&h.name];
        say(&format!(
            "{}: agent already running (pid {}, from an earlier cluster up): left as it is",
            h.name, a.pid
        ));
        return Ok((None, "running"));
    }
    // An earlier agent that does not answer (or runs the old binary):
    // stopped first, if it is still our process, so the port is free.
    let mut what = "started";
    if let Some(old) = state.agents.get(&h.name) {
        match stop_agent(&h.name, old)? {
            Stopped::Stopped => {
                say(&format!(
                    "{}: stopped the earlier agent (pid {})",
                    h.name, old.pid
                ));
                what = "restarted";
            }
            Stopped::NotRunning => {}
        }
    }
    let token = random_hex(32);
    let pid = start_agent(login, bin, h.control(), &token)?;
    say(&format!(
        "{}: agent {what} on {} (pid {pid})",
        h.name,
        h.control()
    ));
    Ok((
        Some(Started {
            address: h.address,
            port: h.port,
            ssh: login.dest.clone(),
            ssh_options: login.options.clone(),
            remote_binary: bin.to_string(),
            pid,
            token,
            software: software(),
            started_at: crate::units::rfc3339_now(),
        }),
        what,
    ))
}

// ---------------------------------------------------------------- status

/// One host as `cluster status` shows it.
#[derive(Clone, Debug, Serialize)]
pub struct HostStatus {
    pub name: String,
    pub control: SocketAddr,
    pub answers: bool,
    /// Why it does not answer (one line).
    pub error: Option<String>,
    /// "cluster up" (with `pid`), "by hand", or "unknown" (no token_file,
    /// not in the state file: the fallback token was tried).
    pub started_by: String,
    pub pid: Option<u32>,
    pub probe: Option<ProbeView>,
}

/// `cluster status`: connects to every host's agent, authenticates and
/// probes it. `fallback` is the token for hosts neither started by `up`
/// nor given a token_file.
pub fn status(
    hosts_path: &Path,
    fallback: Option<&str>,
    probe: Prober,
) -> Result<Vec<HostStatus>, OpsError> {
    let cl = load(hosts_path)?;
    let state = load_state(hosts_path)?;
    Ok(each(&cl.hosts, |h| {
        let recorded = state
            .agents
            .get(&h.name)
            .filter(|a| h.token_file.is_none() && a.control() == h.control());
        let started_by = match (&h.token_file, recorded) {
            (Some(_), _) => "by hand",
            (None, Some(_)) => "cluster up",
            (None, None) => "unknown",
        };
        let result = agent_token(hosts_path, h, fallback)
            .and_then(|t| check_agent(&h.name, h.control(), &t, probe));
        let (probe, error) = match result {
            Ok(p) => (Some(ProbeView::from(p)), None),
            // The table names the host: the error says only what happened.
            Err(OpsError::Host { host, source }) if host == h.name => {
                (None, Some(source.to_string()))
            }
            Err(e) => (None, Some(e.to_string())),
        };
        HostStatus {
            name: h.name.clone(),
            control: h.control(),
            answers: probe.is_some(),
            error,
            started_by: started_by.into(),
            pid: recorded.map(|a| a.pid),
            probe,
        }
    }))
}

// ---------------------------------------------------------------- down

/// What `down` did for one host.
#[derive(Clone, Debug, Serialize)]
pub struct DownHost {
    pub name: String,
    /// "stopped", "not running", "left alone (started by hand)", "not
    /// started by cluster up", or the one-line error.
    pub outcome: String,
    pub pid: Option<u32>,
    pub ok: bool,
}

/// `cluster down`: stops every agent `up` started for this hosts file (the
/// state file says which), leaves agents started by hand alone. Errors are
/// per host; the state keeps the agents that could not be stopped.
pub fn down(hosts_path: &Path) -> Result<Vec<DownHost>, OpsError> {
    // The state is keyed by the file's path, so it must exist; its contents
    // may since have broken: the state alone says what to stop.
    let hosts = load(hosts_path).map(|c| c.hosts).unwrap_or_default();
    let mut state = load_state(hosts_path)?;
    let agents: Vec<(String, Started)> = state.agents.clone().into_iter().collect();
    let results = each(&agents, |(name, a)| stop_agent(name, a));
    let mut out = Vec::new();
    for ((name, a), r) in agents.iter().zip(results) {
        let (outcome, ok) = match r {
            Ok(Stopped::Stopped) => ("stopped".to_string(), true),
            Ok(Stopped::NotRunning) => ("was not running".to_string(), true),
            Err(e) => (e.to_string(), false),
        };
        if ok {
            state.agents.remove(name);
        }
        out.push(DownHost {
            name: name.clone(),
            outcome,
            pid: Some(a.pid),
            ok,
        });
    }
    for h in &hosts {
        if state.agents.contains_key(&h.name) || out.iter().any(|d| d.name == h.name) {
            continue;
        }
        let outcome = if h.token_file.is_some() {
            "left alone (started by hand)"
        } else {
            "no agent recorded (not started by cluster up)"
        };
        out.push(DownHost {
            name: h.name.clone(),
            outcome: outcome.into(),
            pid: None,
            ok: true,
        });
    }
    save_state(hosts_path, &state)?;
    Ok(out)
}

// ---------------------------------------------------------------- text

/// "+1.234 ms ± 0.021 ms"; seconds when the clocks are far apart (their
/// monotonic clocks start at boot, so on different hosts they are).
pub fn offset_text(offset_ns: i64, uncertainty_ns: u64) -> String {
    let abs = offset_ns.unsigned_abs();
    let value = if abs >= 10_000_000_000 {
        format!("{:.3} s", abs as f64 / 1e9)
    } else {
        format!("{:.3} ms", abs as f64 / 1e6)
    };
    // No "-0.000": what rounds to zero has no sign to show.
    let zero = value
        .trim_end_matches([' ', 'm', 's'])
        .trim_matches(['0', '.'])
        .is_empty();
    let sign = if offset_ns < 0 && !zero { "-" } else { "+" };
    format!("{sign}{value} ± {:.3} ms", uncertainty_ns as f64 / 1e6)
}

#[cfg(test)]
mod tests;
