//! Where a test runs: a remote agent (`--agent host:port`), or an agent
//! linerate starts itself on loopback or in a lab's server namespace. The
//! same code path serves both, so client and agent CPU are always measured
//! as two processes.

use clap::Args;
use std::path::{Path, PathBuf};

use super::conn;
use super::driver::Endpoint;
use super::local::LocalAgent;
use super::run::Driver;
use crate::control::protocol;
use crate::error::{usage, Error, Result};
use crate::lab::state::LabState;
use crate::model::hosts::{self, Host, HostsFile, Role};
use crate::model::result::AgentInfo;

/// How to reach the agent: the flags of `run` and `study run`.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Where it runs")]
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
    /// Many hosts: the hosts file (hosts.toml) naming agents, their addresses and roles.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["agent", "lab"])]
    pub hosts: Option<PathBuf>,
    /// With --hosts: the hosts whose agents open the flows (default: those with role = "client").
    #[arg(long, value_name = "HOST,...", requires = "hosts")]
    pub clients: Option<String>,
    /// With --hosts: the hosts that accept them, optionally one data address each: sut, or sut:10.0.0.1,sut:10.0.1.1 (default: role = "server").
    #[arg(long, value_name = "HOST[:ADDR],...", requires = "hosts")]
    pub servers: Option<String>,
    /// Run a QUIC kind's client against another tool's QUIC perf server (draft-banks-quic-performance, ALPN "perf": quinn's `perf server`) at HOST:PORT, in place of an agent: no server-side figures, no TLS over TCP twin; its certificate is checked only with --tls-ca (and --tls-name).
    #[arg(long, value_name = "HOST:PORT", conflicts_with_all = ["agent", "hosts"])]
    pub perf_server: Option<String>,
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

impl ConnectArgs {
    /// These flags as a command line gives them (for a process that runs
    /// part of a study again, such as its masked crypto pass).
    pub fn to_args(&self) -> Vec<std::ffi::OsString> {
        let mut v: Vec<std::ffi::OsString> = Vec::new();
        let mut put = |flag: &str, val: Option<std::ffi::OsString>| {
            if let Some(x) = val {
                v.push(flag.into());
                v.push(x);
            }
        };
        put("--agent", self.agent.clone().map(Into::into));
        put("--token-file", self.token_file.clone().map(Into::into));
        put("--lab", self.lab.clone().map(Into::into));
        put("--hosts", self.hosts.clone().map(Into::into));
        put("--clients", self.clients.clone().map(Into::into));
        put("--servers", self.servers.clone().map(Into::into));
        put("--perf-server", self.perf_server.clone().map(Into::into));
        put("--tls-cert", self.tls_cert.clone().map(Into::into));
        put("--tls-key", self.tls_key.clone().map(Into::into));
        if self.ipv6 {
            v.push("-6".into());
        }
        v
    }
}

/// An agent to talk to (a remote one, or a local child process), and the
/// lab this process entered, if any.
pub struct Target {
    /// None when only programs run (exec, scp need no agent).
    pub conn: Option<Driver>,
    pub info: AgentInfo,
    /// The lab the test runs in (None: loopback or a remote agent).
    pub lab: Option<LabState>,
    /// Agents this process started (killed when it ends).
    _local: Vec<LocalAgent>,
}

impl Target {
    /// Ends the control connection politely (the agent frees the test).
    pub fn close(mut self) {
        if let Some(c) = self.conn.take() {
            c.close();
        }
    }
}

/// The shared token from `--token-file` or `LINERATE_TOKEN`.
pub fn token(file: &Option<PathBuf>) -> Result<String> {
    if let Some(f) = file {
        return Ok(protocol::read_token_file(f)?);
    }
    match std::env::var("LINERATE_TOKEN") {
        Ok(t) if !t.trim().is_empty() => Ok(t.trim().to_string()),
        _ => Err(usage(
            "no token: pass --token-file FILE (a shared secret on its first line) or set LINERATE_TOKEN",
        )),
    }
}

/// The controller's token, or "" when none is given: an agent that holds
/// none (`serve --insecure-no-token`, or on loopback) takes that, any other
/// says it needs one.
pub fn token_if_any(file: &Option<PathBuf>) -> Result<String> {
    match token(file) {
        Err(Error::Usage(_)) if file.is_none() => Ok(String::new()),
        other => other,
    }
}

/// Opens the target `c` names for a test of `kind`: agents where it runs
/// flows, or where it runs in its client's process and `c` names several
/// clients (a hosts file, a rack lab: `Kind::clients`); else only a lab.
pub fn open_for(c: &ConnectArgs, kind: &dyn crate::workload::Kind) -> Result<Target> {
    open(c, wants_agents(c, kind))
}

/// Whether a test of `kind` on `c`'s target runs on agents: its flows do,
/// and so does a kind that runs in its client's process where `c` names
/// several clients (a hosts file, a rack lab).
pub fn wants_agents(c: &ConnectArgs, kind: &dyn crate::workload::Kind) -> bool {
    let several = || {
        c.hosts.is_some()
            || c.lab
                .as_deref()
                .is_some_and(|n| load_lab(n, c.ipv6).is_ok_and(|st| is_rack(&st)))
    };
    kind.needs().agent || (kind.clients().is_some() && several())
}

/// A lab of several client or server namespaces, or server ports.
fn is_rack(st: &LabState) -> bool {
    st.client_hosts().len() > 1 || st.server_hosts().len() > 1 || st.spec.ports > 1
}

/// Opens the target `c` names. `agent` false: only programs will run, so
/// no agent is started (a lab is still entered).
pub fn open(c: &ConnectArgs, agent: bool) -> Result<Target> {
    if let Some(file) = &c.hosts {
        if !agent {
            return Err(usage(
                "exec and scp run in a lab, not across --hosts: use --lab NAME",
            ));
        }
        return open_hosts(c, file);
    }
    if let Some(p) = &c.perf_server {
        return open_foreign(c, p, agent);
    }
    if let Some(a) = &c.agent {
        if c.tls_cert.is_some() {
            return Err(usage(
                "--tls-cert/--tls-key set the local agent's identity; give them to `linerate serve` on the agent's host",
            ));
        }
        let token = token_if_any(&c.token_file)?;
        let addr = conn::resolve(a)?;
        let conn = conn::connect(addr, &token)?;
        return Ok(Target {
            conn: Some(Driver::one(conn)),
            info: AgentInfo {
                address: addr.to_string(),
                local: false,
                pid: None,
                ..Default::default()
            },
            lab: None,
            _local: Vec::new(),
        });
    }
    let mut extra = Vec::new();
    if let (Some(cert), Some(key)) = (&c.tls_cert, &c.tls_key) {
        crate::engine::tls::read_identity_files(cert, key)?;
        for (flag, path) in [("--tls-cert", cert), ("--tls-key", key)] {
            let abs = std::fs::canonicalize(path)
                .map_err(|e| usage(format!("{flag} {}: {e}", path.display())))?;
            extra.push(flag.to_string());
            extra.push(abs.display().to_string());
        }
    }
    let lab = match &c.lab {
        Some(name) => Some(load_lab(name, c.ipv6)?),
        None => None,
    };
    if let Some(st) = &lab {
        // Server ports (lab up --ports) are addresses of one agent: the
        // many-host path spreads flows over them and counts each.
        if is_rack(st) && agent {
            if !extra.is_empty() {
                return Err(usage(
                    "--tls-cert/--tls-key are not passed to a rack lab's agents: drop them",
                ));
            }
            return open_rack(st.clone());
        }
        // Programs, and the single client of a lab: this process is the
        // client, in the client namespace (client 0 of a rack).
        crate::lab::netns::enter(&st.client_ns)?;
    }
    if !agent {
        return Ok(Target {
            conn: None,
            info: AgentInfo::default(),
            lab,
            _local: Vec::new(),
        });
    }
    let listen = match &lab {
        Some(st) => {
            extra.push("--netns".into());
            extra.push(st.server_ns.clone());
            // A lab is root's; a study point's sysctls reach its namespace.
            extra.push("--allow-sysctl".into());
            format!("{}:0", st.server_addr)
        }
        None if c.ipv6 => "[::1]:0".into(),
        None => "127.0.0.1:0".into(),
    };
    let local = LocalAgent::spawn(&listen, &extra)?;
    let mut conn = conn::connect(local.addr, &local.token)?;
    // On loopback every 127.0.0.x is this host's: --ports N needs no setup.
    if lab.is_none() && !c.ipv6 {
        conn.data = conn::loopback_data();
    }
    let info = AgentInfo {
        address: local.addr.to_string(),
        local: true,
        pid: Some(local.pid()),
        ..Default::default()
    };
    Ok(Target {
        conn: Some(Driver::one(conn)),
        info,
        lab,
        _local: vec![local],
    })
}

/// Another tool's QUIC perf server at `at` (`--perf-server`): nothing to
/// start, no control channel; inside a lab, this process enters its
/// client namespace and the server is expected in the server namespace.
fn open_foreign(c: &ConnectArgs, at: &str, agent: bool) -> Result<Target> {
    if !agent {
        return Err(usage(
            "--perf-server runs a QUIC kind's client against another tool's perf server; exec and scp take none",
        ));
    }
    if c.tls_cert.is_some() {
        return Err(usage(
            "--tls-cert/--tls-key set a local agent's identity: with --perf-server no agent runs",
        ));
    }
    let lab = match &c.lab {
        Some(name) => {
            let st = load_lab(name, c.ipv6)?;
            crate::lab::netns::enter(&st.client_ns)?;
            Some(st)
        }
        None => None,
    };
    let addr = conn::resolve(at).map_err(|e| usage(format!("--perf-server {at}: {e}")))?;
    Ok(Target {
        conn: Some(Driver::foreign(addr)),
        info: AgentInfo {
            address: addr.to_string(),
            local: false,
            pid: None,
            foreign: Some("another tool's QUIC perf server".into()),
        },
        lab,
        _local: Vec::new(),
    })
}

/// Reads and checks a hosts file.
pub fn load_hosts(file: &Path) -> Result<Vec<Host>> {
    let text = std::fs::read_to_string(file).map_err(|e| {
        usage(format!(
            "cannot read hosts file {}: {e} (see docs/hosts.md, \"Many hosts\")",
            file.display()
        ))
    })?;
    let base = file.parent().unwrap_or(Path::new("."));
    HostsFile::parse(&text)
        .and_then(|f| f.hosts(base))
        .map_err(|e| e.to_string())
        .map_err(|e| {
            // Parse errors start with their line: FILE:LINE: message.
            let sep = if e
                .split(':')
                .next()
                .is_some_and(|l| l.parse::<u32>().is_ok())
            {
                ":"
            } else {
                ": "
            };
            usage(format!("{}{sep}{e}", file.display()))
        })
}

/// An agent's token: the host's `token_file`, else what `cluster up` gave
/// it (its state file), else --token-file/LINERATE_TOKEN.
fn host_token(file: &Path, host: &Host, fallback: &Option<PathBuf>) -> Result<String> {
    if host.token_file.is_some() || crate::hostops::cluster::token_for(file, host).is_some() {
        return crate::hostops::cluster::agent_token(file, host, None).map_err(Into::into);
    }
    token(fallback).map_err(|_| {
        usage(format!(
            "host {}: no token: run `linerate cluster up {}`, give it token_file in the hosts file, or pass --token-file/LINERATE_TOKEN",
            host.name,
            file.display()
        ))
    })
}

/// The agents a `--hosts` test uses: `--clients`/`--servers` name them
/// (a server pick may name one data address), else the roles in the file.
fn pick_endpoints(
    c: &ConnectArgs,
    file: &Path,
    all: &[Host],
) -> Result<(Vec<Endpoint>, Vec<Endpoint>)> {
    let find = |name: &str| {
        all.iter().find(|h| h.name == name).ok_or_else(|| {
            let names: Vec<&str> = all.iter().map(|h| h.name.as_str()).collect();
            usage(format!(
                "no host named {name} in {} (it lists: {})",
                file.display(),
                names.join(", ")
            ))
        })
    };
    let by_role = |r: Role| -> Vec<hosts::Pick> {
        all.iter()
            .filter(|h| h.role == r)
            .map(|h| hosts::Pick {
                host: h.name.clone(),
                address: None,
            })
            .collect()
    };
    let picks = |text: &Option<String>, r: Role| -> Result<Vec<hosts::Pick>> {
        match text {
            Some(t) => hosts::parse_picks(t).map_err(Into::into),
            None => Ok(by_role(r)),
        }
    };
    let client_picks = picks(&c.clients, Role::Client)?;
    let server_picks = picks(&c.servers, Role::Server)?;
    if client_picks.is_empty() {
        return Err(usage(
            "no clients: pass --clients d1,d2 or give hosts role = \"client\"",
        ));
    }
    if server_picks.is_empty() {
        return Err(usage(
            "no servers: pass --servers sut or give a host role = \"server\"",
        ));
    }
    let mut clients: Vec<Endpoint> = Vec::new();
    for p in &client_picks {
        let h = find(&p.host)?;
        if p.address.is_some() {
            return Err(usage(format!(
                "--clients {}: a client is named without an address",
                p.host
            )));
        }
        if clients.iter().any(|e| e.name == h.name) {
            return Err(usage(format!("--clients names {} twice", h.name)));
        }
        clients.push(Endpoint {
            name: h.name.clone(),
            control: h.control(),
            token: host_token(file, h, &c.token_file)?,
            data: h.data.clone(),
            connect: Vec::new(),
            site: h.site.clone(),
        });
    }
    // Server picks of one host merge: sut:A,sut:B is one agent on two addresses.
    let mut servers: Vec<Endpoint> = Vec::new();
    for p in &server_picks {
        let h = find(&p.host)?;
        if let Some(a) = p.address {
            if !h.data.contains(&a) && a != h.address {
                return Err(usage(format!(
                    "--servers {}:{a}: {a} is not one of {}'s data addresses in the hosts file",
                    h.name, h.name
                )));
            }
        }
        let addrs = match p.address {
            Some(a) => vec![a],
            None => h.data.clone(),
        };
        match servers.iter_mut().find(|e| e.name == h.name) {
            Some(e) => {
                for a in addrs {
                    if !e.data.contains(&a) {
                        e.data.push(a);
                    }
                }
            }
            None => servers.push(Endpoint {
                name: h.name.clone(),
                control: h.control(),
                token: host_token(file, h, &c.token_file)?,
                data: addrs,
                connect: h.connect.clone(),
                site: h.site.clone(),
            }),
        }
    }
    if let Some(both) = clients
        .iter()
        .find(|e| servers.iter().any(|s| s.name == e.name))
    {
        return Err(usage(format!(
            "host {} is named as a client and as a server: one role per host in a test",
            both.name
        )));
    }
    Ok((clients, servers))
}

fn open_hosts(c: &ConnectArgs, file: &Path) -> Result<Target> {
    if c.tls_cert.is_some() {
        return Err(usage(
            "--tls-cert/--tls-key set the local agent's identity; give them to `linerate serve` on the servers",
        ));
    }
    if c.ipv6 {
        return Err(usage(
            "-6 picks the local agent's address; with --hosts, write IPv6 addresses in the hosts file",
        ));
    }
    let all = load_hosts(file)?;
    let (clients, servers) = pick_endpoints(c, file, &all)?;
    let fleet = Driver::fleet(&clients, &servers)?;
    let info = AgentInfo {
        address: fleet.describe(),
        local: false,
        pid: None,
        ..Default::default()
    };
    Ok(Target {
        conn: Some(fleet),
        info,
        lab: None,
        _local: Vec::new(),
    })
}

/// A rack lab (several client or server namespaces): an agent in every
/// namespace, each listening for this controller on loopback and running
/// its flows in its namespace; clients c1..cN drive servers s1..sM.
fn open_rack(st: LabState) -> Result<Target> {
    let mut locals = Vec::new();
    let mut endpoint = |name: String, ns: &str, data: Vec<std::net::IpAddr>| -> Result<Endpoint> {
        let local = LocalAgent::spawn(
            "127.0.0.1:0",
            &[
                "--data-netns".into(),
                ns.to_string(),
                "--allow-sysctl".into(),
            ],
        )?;
        let e = Endpoint {
            name,
            control: local.addr,
            token: local.token.clone(),
            data,
            connect: Vec::new(),
            site: Default::default(),
        };
        locals.push(local);
        Ok(e)
    };
    let mut servers = Vec::new();
    for (j, h) in st.server_hosts().iter().enumerate() {
        let addrs = match j {
            0 => crate::lab::link::server_port_addrs(st.spec.ports),
            _ => vec![h.addr.clone()],
        };
        let mut data = Vec::new();
        for a in addrs {
            data.push(
                a.parse()
                    .map_err(|e| Error::Failed(format!("lab server address {a}: {e}")))?,
            );
        }
        servers.push(endpoint(format!("s{}", j + 1), &h.ns, data)?);
    }
    let mut clients = Vec::new();
    for (k, h) in st.client_hosts().iter().enumerate() {
        clients.push(endpoint(format!("c{}", k + 1), &h.ns, Vec::new())?);
    }
    let fleet = Driver::fleet(&clients, &servers)?;
    let info = AgentInfo {
        address: format!("lab {}: {}", st.name, fleet.describe()),
        local: true,
        pid: None,
        ..Default::default()
    };
    Ok(Target {
        conn: Some(fleet),
        info,
        lab: Some(st),
        _local: locals,
    })
}

/// Checks that lab `name` is up and usable.
fn load_lab(name: &str, ipv6: bool) -> Result<LabState> {
    use crate::lab::state;
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
    Ok(st)
}
