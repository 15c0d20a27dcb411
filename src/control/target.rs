//! Where a test runs: a remote agent (`--agent host:port`), or an agent
//! linerate starts itself on loopback or in a lab's server namespace. The
//! same code path serves both, so client and agent CPU are always measured
//! as two processes.

use clap::Args;
use std::path::PathBuf;

use super::controller::{self, AgentConn};
use super::local::LocalAgent;
use super::protocol;
use crate::error::{usage, Error, Result};
use crate::lab::state::LabState;
use crate::model::result::AgentInfo;

/// How to reach the agent: the flags of `run` and `study run`.
#[derive(Args, Debug, Clone, Default)]
pub struct ConnectArgs {
    /// Agent to run against (host:port). Without it, a local agent is started on loopback.
    #[arg(long, value_name = "HOST:PORT")]
    pub agent: Option<String>,
    /// File whose first line is the shared token (or set LINERATE_TOKEN).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Run inside lab NAME (`linerate lab up NAME`): the client in its client namespace, a local agent in its server namespace.
    #[arg(long, value_name = "NAME", conflicts_with = "agent")]
    pub lab: Option<String>,
    /// Use IPv6 (the local agent listens on ::1).
    #[arg(short = '6', long)]
    pub ipv6: bool,
    /// With TLS: the local agent's certificate (PEM) instead of a generated one (a remote agent takes it with `serve --tls-cert`).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

/// An agent to talk to (a remote one, or a local child process), and the
/// lab this process entered, if any.
pub struct Target {
    /// None when only programs run (exec, scp need no agent).
    pub conn: Option<AgentConn>,
    pub info: AgentInfo,
    /// The lab the test runs in (None: loopback or a remote agent).
    pub lab: Option<LabState>,
    _local: Option<LocalAgent>,
}

impl Target {
    /// Ends the control connection politely (the agent frees the test).
    pub fn close(mut self) {
        if let Some(c) = self.conn.take() {
            c.bye();
        }
    }
}

/// The shared token from `--token-file` or `LINERATE_TOKEN`.
pub fn token(file: &Option<PathBuf>) -> Result<String> {
    if let Some(f) = file {
        return protocol::read_token_file(f).map_err(Error::Failed);
    }
    match std::env::var("LINERATE_TOKEN") {
        Ok(t) if !t.trim().is_empty() => Ok(t.trim().to_string()),
        _ => Err(usage(
            "no token: pass --token-file FILE (a shared secret on its first line) or set LINERATE_TOKEN",
        )),
    }
}

/// Opens the target `c` names. `agent` false: only programs will run, so
/// no agent is started (a lab is still entered).
pub fn open(c: &ConnectArgs, agent: bool) -> Result<Target> {
    if let Some(a) = &c.agent {
        if c.tls_cert.is_some() {
            return Err(usage(
                "--tls-cert/--tls-key set the local agent's identity; give them to `linerate serve` on the agent's host",
            ));
        }
        let token = token(&c.token_file)?;
        let addr = controller::resolve(a).map_err(Error::Usage)?;
        let conn = controller::connect(addr, &token)?;
        return Ok(Target {
            conn: Some(conn),
            info: AgentInfo {
                address: addr.to_string(),
                local: false,
                pid: None,
            },
            lab: None,
            _local: None,
        });
    }
    let mut extra = Vec::new();
    if let (Some(cert), Some(key)) = (&c.tls_cert, &c.tls_key) {
        crate::engine::tls::read_identity_files(cert, key).map_err(Error::Usage)?;
        for (flag, path) in [("--tls-cert", cert), ("--tls-key", key)] {
            let abs = std::fs::canonicalize(path)
                .map_err(|e| usage(format!("{flag} {}: {e}", path.display())))?;
            extra.push(flag.to_string());
            extra.push(abs.display().to_string());
        }
    }
    let lab = match &c.lab {
        Some(name) => Some(enter_lab(name, c.ipv6)?),
        None => None,
    };
    if !agent {
        return Ok(Target {
            conn: None,
            info: AgentInfo::default(),
            lab,
            _local: None,
        });
    }
    let listen = match &lab {
        Some(st) => {
            extra.push("--netns".into());
            extra.push(st.server_ns.clone());
            format!("{}:0", st.server_addr)
        }
        None if c.ipv6 => "[::1]:0".into(),
        None => "127.0.0.1:0".into(),
    };
    let local = LocalAgent::spawn(&listen, &extra)?;
    let conn = controller::connect(local.addr, &local.token)?;
    let info = AgentInfo {
        address: local.addr.to_string(),
        local: true,
        pid: Some(local.pid()),
    };
    Ok(Target {
        conn: Some(conn),
        info,
        lab,
        _local: Some(local),
    })
}

/// Checks lab `name` and moves this thread (and the threads and children it
/// starts later) into its client namespace.
fn enter_lab(name: &str, ipv6: bool) -> Result<LabState> {
    use crate::lab::{netns, state};
    if ipv6 {
        return Err(usage(
            "a lab has IPv4 addresses only (198.18.0.0/15): drop -6",
        ));
    }
    let st = state::load(name)?.ok_or_else(|| {
        Error::Failed(format!(
            "no lab named {name} is up; start one: linerate lab up {name} --rtt 50ms --rate 1gbit"
        ))
    })?;
    if st.is_stale() {
        return Err(Error::Failed(format!(
            "lab {name} is stale (its emulator is gone, so no traffic passes): linerate lab down {name}, then up again"
        )));
    }
    netns::enter(&st.client_ns)?;
    Ok(st)
}
