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

/// `s` quoted for a POSIX shell.
fn sh_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/:=@%+-,".contains(c))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The remote binary's path as the remote shell runs it: relative paths are
/// under the login's home (`~/` is dropped), and get a `./` so that a bare
/// name is never looked up in PATH. Only characters that need no quoting in
/// scp's remote path are allowed.
pub fn remote_binary(host: &Host) -> Result<String, OpsError> {
    let raw = host.remote_binary.trim();
    let p = raw.strip_prefix("~/").unwrap_or(raw);
    let ok = !p.is_empty()
        && !p.ends_with('/')
        && p.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/+-".contains(c));
    if !ok {
        return Err(OpsError::host(
            &host.name,
            HostError::RemoteBinary(raw.into()),
        ));
    }
    Ok(if p.starts_with('/') || p.starts_with("./") {
        p.to_string()
    } else {
        format!("./{p}")
    })
}

/// The folder of a remote path ("." for a name alone).
fn remote_dir(bin: &str) -> &str {
    match bin.rfind('/') {
        Some(0) => "/",
        Some(i) => &bin[..i],
        None => ".",
    }
}

/// How one host is reached over ssh.
#[derive(Clone, Debug)]
struct Login {
    name: String,
    dest: String,
    options: Vec<String>,
}

impl Login {
    fn of(host: &Host) -> Result<Login, OpsError> {
        Login::new(&host.name, &host.ssh, &host.ssh_options)
    }

    fn new(name: &str, dest: &str, options: &[String]) -> Result<Login, OpsError> {
        if dest.is_empty() || dest.starts_with('-') || dest.contains(char::is_whitespace) {
            return Err(OpsError::host(name, HostError::Destination(dest.into())));
        }
        Ok(Login {
            name: name.to_string(),
            dest: dest.to_string(),
            options: options.to_vec(),
        })
    }

    /// ssh keeps the first value it gets of each setting: BatchMode comes
    /// first (never a password prompt), ConnectTimeout after the file's
    /// `ssh_options` (which may set a longer one).
    fn with_options(&self, cmd: &mut Command, options: &[String]) {
        cmd.args(["-o", "BatchMode=yes"])
            .args(options)
            .args(["-o", "ConnectTimeout=5"]);
    }

    /// scp's spelling of the ssh options: the port is -P.
    fn scp_options(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut it = self.options.iter();
        while let Some(o) = it.next() {
            if o == "-p" {
                out.push("-P".to_string());
                if let Some(v) = it.next() {
                    out.push(v.clone());
                }
            } else if let Some(v) = o.strip_prefix("-p").filter(|v| !v.is_empty()) {
                out.push(format!("-P{v}"));
            } else {
                out.push(o.clone());
            }
        }
        out
    }

    /// scp's form of the destination: an IPv6 literal in brackets.
    fn scp_dest(&self) -> String {
        let (user, host) = match self.dest.rsplit_once('@') {
            Some((u, h)) => (format!("{u}@"), h),
            None => (String::new(), self.dest.as_str()),
        };
        if host.contains(':') && !host.starts_with('[') {
            format!("{user}[{host}]")
        } else {
            format!("{user}{host}")
        }
    }

    /// Runs `script` with `sh -c` on the host (whatever the login shell),
    /// `stdin` on its standard input; returns its standard output.
    fn sh(&self, script: &str, stdin: Option<&str>, what: &str) -> Result<String, OpsError> {
        let mut cmd = Command::new("ssh");
        self.with_options(&mut cmd, &self.options);
        cmd.arg("--")
            .arg(&self.dest)
            .arg(format!("sh -c {}", sh_quote(script)));
        let out = bounded(cmd, stdin, SSH_LIMIT, &self.name, "ssh")?;
        if !out.status.success() {
            let (dest, reason) = (self.dest.clone(), last_line(&out));
            let e = if out.status.code() == Some(255) {
                HostError::Ssh { dest, reason }
            } else {
                HostError::Remote {
                    what: what.into(),
                    dest,
                    reason,
                }
            };
            return Err(OpsError::host(&self.name, e));
        }
        Ok(out.stdout)
    }

    fn scp(&self, local: &Path, remote: &str) -> Result<(), OpsError> {
        let mut cmd = Command::new("scp");
        cmd.arg("-q");
        self.with_options(&mut cmd, &self.scp_options());
        cmd.arg("--")
            .arg(local)
            .arg(format!("{}:{remote}", self.scp_dest()));
        let out = bounded(cmd, None, SCP_LIMIT, &self.name, "scp")?;
        if !out.status.success() {
            return Err(OpsError::host(
                &self.name,
                HostError::Scp {
                    dest: self.dest.clone(),
                    remote: remote.into(),
                    reason: last_line(&out),
                },
            ));
        }
        Ok(())
    }
}

struct Output {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// The last non-empty line of standard error (ssh's own reason), else the
/// exit status.
fn last_line(o: &Output) -> String {
    o.stderr
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| format!("{} with nothing on standard error", o.status))
}

/// Runs `cmd` with `stdin` written to it, killing it (by its pid) after `limit`.
fn bounded(
    mut cmd: Command,
    stdin: Option<&str>,
    limit: Duration,
    host: &str,
    program: &'static str,
) -> Result<Output, OpsError> {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|source| {
        let e = if source.kind() == std::io::ErrorKind::NotFound {
            HostError::NoClient(program)
        } else {
            HostError::Spawn { program, source }
        };
        OpsError::host(host, e)
    })?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // ssh may be gone already (it failed to connect): then the write
        // fails with EPIPE, which must not kill this process.
        crate::engine::signals::block_in_this_thread();
        let _ = pipe.write_all(text.as_bytes());
    }
    let mut out_pipe = child.stdout.take().expect("piped");
    let mut err_pipe = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out_pipe.read_to_end(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err_pipe.read_to_end(&mut s);
        s
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(OpsError::host(
                    host,
                    HostError::Timeout {
                        program,
                        secs: limit.as_secs_f64(),
                    },
                ));
            }
            Err(source) => return Err(OpsError::host(host, HostError::Wait { program, source })),
        }
    };
    let stdout = reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    Ok(Output {
        status,
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    })
}

// ---------------------------------------------------------------- the binary

/// sha256 of this binary (what `up` compares with the remote file),
/// computed once: the hosts' threads wait for the first; a failure is not
/// kept (an io::Error cannot be shared), so each later caller tries again.
fn local_sha256(exe: &Path) -> Result<String, OpsError> {
    static HASH: Mutex<Option<String>> = Mutex::new(None);
    let mut hash = HASH.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(h) = &*hash {
        return Ok(h.clone());
    }
    let io = |source| OpsError::Io {
        path: exe.into(),
        source,
    };
    let mut f = std::fs::File::open(exe).map_err(io)?;
    let mut ctx = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        ctx.update(&buf[..n]);
    }
    let h: String = ctx
        .finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    *hash = Some(h.clone());
    Ok(h)
}

/// What the remote binary is: its `--version` line (or "missing"/"broken")
/// and its sha256 when the host has sha256sum.
fn remote_version(login: &Login, bin: &str) -> Result<(String, Option<String>), OpsError> {
    let b = sh_quote(bin);
    let script = format!(
        "b={b}; if [ -x \"$b\" ]; then \"$b\" --version 2>/dev/null || echo broken; \
         sha256sum \"$b\" 2>/dev/null | cut -c1-64; else echo missing; fi"
    );
    let out = login.sh(&script, None, "checking the linerate binary")?;
    let mut lines = out.lines().map(str::trim);
    let version = lines.next().unwrap_or("broken").to_string();
    let sha = lines
        .next()
        .filter(|l| l.len() == 64 && l.chars().all(|c| c.is_ascii_hexdigit()))
        .map(str::to_string);
    Ok((version, sha))
}

/// What `up` did about a host's binary.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub enum Binary {
    /// It was there, the same version and build.
    Present,
    /// It was copied; what the host had before ("missing", a version, or
    /// "linerate X (another build)").
    Copied { before: String },
}

/// Makes sure `bin` on the host is this binary: checks, and copies with scp
/// (to a temporary name, then renamed: a running agent keeps its file).
fn ensure_binary(login: &Login, bin: &str, exe: &Path) -> Result<Binary, OpsError> {
    let ours = software();
    let local_sha = local_sha256(exe)?;
    let (version, sha) = remote_version(login, bin)?;
    let same_build = sha.as_deref().is_none_or(|s| s == local_sha);
    if version == ours && same_build {
        return Ok(Binary::Present);
    }
    let before = if version == ours {
        format!("{version} (another build)")
    } else {
        version
    };
    let dir = remote_dir(bin);
    if dir != "." {
        login.sh(
            &format!("mkdir -p {}", sh_quote(dir)),
            None,
            "creating the binary's folder",
        )?;
    }
    let tmp = format!("{bin}.tmp.{}", random_hex(4));
    if let Err(e) = login.scp(exe, &tmp) {
        let _ = login.sh(&format!("rm -f {}", sh_quote(&tmp)), None, "cleaning up");
        return Err(e);
    }
    let script = format!(
        "t={}; b={}; chmod 755 \"$t\" && mv -f \"$t\" \"$b\" || {{ rm -f \"$t\"; exit 1; }}; \"$b\" --version",
        sh_quote(&tmp),
        sh_quote(bin)
    );
    let out = login.sh(&script, None, "installing the binary")?;
    let got = out.lines().next().unwrap_or("").trim();
    if got != ours {
        return Err(OpsError::host(
            &login.name,
            HostError::Foreign {
                got: got.into(),
                ours,
            },
        ));
    }
    Ok(Binary::Copied { before })
}

// ---------------------------------------------------------------- agents

/// The start of the agent's command line as `up` runs it; `down` stops a
/// process only if its /proc/PID/cmdline begins with this.
fn serve_prefix(bin: &str, control: SocketAddr) -> String {
    format!("{bin} serve --listen {control} ")
}

/// Starts the agent in the background over ssh, the token on stdin.
fn start_agent(
    login: &Login,
    bin: &str,
    control: SocketAddr,
    token: &str,
) -> Result<u32, OpsError> {
    let log = format!("{}/agent-{}.log", remote_dir(bin), control.port());
    let script = format!(
        "exec {} serve --listen {} --token-stdin --detach --quiet --log {}",
        sh_quote(bin),
        sh_quote(&control.to_string()),
        sh_quote(&log)
    );
    let out = login.sh(&script, Some(&format!("{token}\n")), "starting the agent")?;
    out.lines()
        .find_map(|l| {
            let rest = l.trim().strip_prefix("linerate agent listening on ")?;
            rest.rsplit_once(" pid ")?.1.trim().parse().ok()
        })
        .ok_or_else(|| OpsError::host(&login.name, HostError::NotListening(out.trim().into())))
}

/// What `down` found for one agent.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub enum Stopped {
    /// Sent SIGTERM and saw it exit.
    Stopped,
    /// The pid had no agent of ours any more (exited, or reused).
    NotRunning,
}

/// Stops the agent `a` if its pid still runs the command `up` started;
/// waits (bounded) until it is gone.
fn stop_agent(name: &str, a: &Started) -> Result<Stopped, OpsError> {
    let login = Login::new(name, &a.ssh, &a.ssh_options)?;
    let prefix = serve_prefix(&a.remote_binary, a.control());
    let script = format!(
        "p={pid}; c=$(tr '\\000' ' ' < /proc/$p/cmdline 2>/dev/null) || c=; \
         case \"$c\" in {pat}*) ;; *) echo not-running; exit 0;; esac; \
         kill $p || exit 1; i=0; \
         while [ $i -lt {STOP_WAIT_DECIS} ]; do \
           if [ ! -e /proc/$p ] || grep -q '^State:.*Z' /proc/$p/status 2>/dev/null; then echo stopped; exit 0; fi; \
           sleep 0.1; i=$((i+1)); \
         done; echo \"pid $p did not exit within {} s of SIGTERM\" >&2; exit 1",
        STOP_WAIT_DECIS / 10,
        pid = a.pid,
        pat = sh_quote(&prefix),
    );
    let out = login.sh(&script, None, &format!("stopping pid {}", a.pid))?;
    Ok(if out.contains("not-running") {
        Stopped::NotRunning
    } else {
        Stopped::Stopped
    })
}

/// Connects, authenticates and probes (clock, load, version) one agent:
/// the controller's side does that, handed in by the caller, so host
/// operations stay below both processes. Its error stays the text the
/// controller's connection gives (`controller::conn::probe_agent`, a floor
/// above that hostops cannot name); `check_agent` makes it a `HostError`.
pub type Prober<'a> = &'a (dyn Fn(SocketAddr, &str) -> Result<Probe, String> + Sync);

/// The probe of host `name`'s agent, the error naming the host.
fn check_agent(
    name: &str,
    control: SocketAddr,
    token: &str,
    probe: Prober,
) -> Result<Probe, OpsError> {
    probe(control, token).map_err(|e| OpsError::host(name, HostError::Probe(e)))
}

/// The probe of an agent that must run this linerate.
fn check_same(
    name: &str,
    control: SocketAddr,
    token: &str,
    probe: Prober,
) -> Result<Probe, OpsError> {
    let p = check_agent(name, control, token, probe)?;
    if p.software != software() {
        return Err(OpsError::host(
            name,
            HostError::Version {
                control,
                theirs: p.software,
                ours: software(),
            },
        ));
    }
    Ok(p)
}

// ---------------------------------------------------------------- up

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
            let replaced = matches!(binary, Binary::Copied { .. });
            if *answers && !replaced {
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
            Ok::<_, OpsError>((
                Some(Started {
                    address: h.address,
                    port: h.port,
                    ssh: login.dest.clone(),
                    ssh_options: login.options.clone(),
                    remote_binary: bin.clone(),
                    pid,
                    token,
                    software: software(),
                    started_at: crate::units::rfc3339_now(),
                }),
                what,
            ))
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
mod tests {
    use super::*;

    fn host(bin: &str) -> Host {
        let f = HostsFile::parse(&format!(
            "[[host]]\nname = \"a\"\naddress = \"198.18.1.1\"\nremote_binary = \"{bin}\"\n"
        ))
        .unwrap();
        f.hosts(Path::new("/")).unwrap().remove(0)
    }

    #[test]
    fn quoting_survives_a_shell() {
        for s in ["plain", "with space", "it's", "$HOME `x`", "", "a'b'c"] {
            let out = Command::new("sh")
                .arg("-c")
                .arg(format!("printf %s {}", sh_quote(s)))
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), s);
        }
        // Nested: what ssh hands the remote shell.
        let script = format!("printf %s {}", sh_quote("it's $x"));
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("sh -c {}", sh_quote(&script)))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "it's $x");
    }

    #[test]
    fn remote_paths_are_checked_and_never_looked_up_in_path() {
        assert_eq!(
            remote_binary(&host(".cache/linerate/linerate")).unwrap(),
            "./.cache/linerate/linerate"
        );
        assert_eq!(remote_binary(&host("~/bin/lr")).unwrap(), "./bin/lr");
        assert_eq!(remote_binary(&host("linerate")).unwrap(), "./linerate");
        assert_eq!(
            remote_binary(&host("/opt/lr/linerate")).unwrap(),
            "/opt/lr/linerate"
        );
        for bad in ["a b", "x;rm", "dir/", "", "$HOME/x"] {
            let e = remote_binary(&host(bad)).unwrap_err().to_string();
            assert!(e.contains("host a"), "{e}");
        }
        assert_eq!(
            remote_dir("./.cache/linerate/linerate"),
            "./.cache/linerate"
        );
        assert_eq!(remote_dir("/linerate"), "/");
        assert_eq!(remote_dir("linerate"), ".");
    }

    #[test]
    fn scp_gets_the_port_as_capital_p_and_ipv6_in_brackets() {
        let l = Login::new(
            "a",
            "root@fd00::1",
            &[
                "-p".into(),
                "2222".into(),
                "-F".into(),
                "cfg".into(),
                "-p22".into(),
            ],
        )
        .unwrap();
        assert_eq!(l.scp_options(), vec!["-P", "2222", "-F", "cfg", "-P22"]);
        assert_eq!(l.scp_dest(), "root@[fd00::1]");
        assert_eq!(Login::new("a", "server", &[]).unwrap().scp_dest(), "server");
        assert!(Login::new("a", "-oProxyCommand=x", &[]).is_err());
    }

    #[test]
    fn the_stop_check_matches_only_the_agent_up_started() {
        let prefix = serve_prefix(
            "./.cache/linerate/linerate",
            "198.18.1.1:7470".parse().unwrap(),
        );
        let check = |cmdline: &str| {
            let script = format!(
                "c={}; case \"$c\" in {}*) echo ours;; *) echo other;; esac",
                sh_quote(cmdline),
                sh_quote(&prefix)
            );
            let o = Command::new("sh").arg("-c").arg(script).output().unwrap();
            String::from_utf8_lossy(&o.stdout).trim().to_string()
        };
        assert_eq!(
            check("./.cache/linerate/linerate serve --listen 198.18.1.1:7470 --token-stdin "),
            "ours"
        );
        assert_eq!(
            check("./.cache/linerate/linerate serve --listen 198.18.1.1:74701 "),
            "other"
        );
        assert_eq!(check("sleep 100 "), "other");
        assert_eq!(check(""), "other");
    }

    #[test]
    fn state_files_are_private_and_tokens_come_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let hosts = dir.path().join("hosts.toml");
        std::fs::write(
            &hosts,
            "[[host]]\nname = \"a\"\naddress = \"198.18.1.1\"\n[[host]]\nname = \"b\"\naddress = \"198.18.1.2\"\ntoken_file = \"b.token\"\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("b.token"), "bee\n").unwrap();
        TEST_STATE_HOME.with(|d| *d.borrow_mut() = Some(dir.path().join("state")));
        let cl = load(&hosts).unwrap();
        let (a, b) = (&cl.hosts[0], &cl.hosts[1]);
        assert!(token_for(&hosts, a).is_none());
        let e = agent_token(&hosts, a, None).unwrap_err().to_string();
        assert!(e.contains("host a") && e.contains("cluster up"), "{e}");
        assert_eq!(agent_token(&hosts, a, Some("fall")).unwrap(), "fall");
        assert_eq!(agent_token(&hosts, b, Some("fall")).unwrap(), "bee");
        let mut st = load_state(&hosts).unwrap();
        st.agents.insert(
            "a".into(),
            Started {
                address: a.address,
                port: a.port,
                ssh: a.ssh.clone(),
                ssh_options: vec![],
                remote_binary: "./x".into(),
                pid: 1,
                token: "tok".into(),
                software: software(),
                started_at: String::new(),
            },
        );
        save_state(&hosts, &st).unwrap();
        let p = state_path(&hosts).unwrap();
        assert!(p.starts_with(dir.path().join("state/linerate/clusters")));
        let name = p.file_stem().unwrap().to_str().unwrap();
        assert_eq!(name.len(), 16);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&p), 0o600);
        assert_eq!(mode(p.parent().unwrap()), 0o700);
        assert_eq!(agent_token(&hosts, a, Some("fall")).unwrap(), "tok");
        assert_eq!(load_state(&hosts).unwrap(), st);
        // Moved to another port: the recorded token is not for it.
        let mut moved = a.clone();
        moved.port += 1;
        assert!(token_for(&hosts, &moved).is_none());
        st.agents.clear();
        save_state(&hosts, &st).unwrap();
        assert!(!p.exists());
    }

    #[test]
    fn offsets_read_in_a_fitting_unit() {
        assert_eq!(offset_text(1_234_000, 21_000), "+1.234 ms ± 0.021 ms");
        assert_eq!(offset_text(-5_000, 1_000), "-0.005 ms ± 0.001 ms");
        assert_eq!(offset_text(-400, 12_000), "+0.000 ms ± 0.012 ms");
        assert_eq!(
            offset_text(86_400_000_000_000, 50_000),
            "+86400.000 s ± 0.050 ms"
        );
    }
}
