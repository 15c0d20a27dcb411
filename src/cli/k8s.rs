//! `linerate k8s up|down|status|run`: agents as pods on a Kubernetes
//! cluster (hostops::k8s), written out as a hosts file so every test and
//! study runs on them with `--hosts`.

use clap::{Args, Subcommand};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::controller::conn::probe_agent;
use crate::error::{usage, Error, Result};
use crate::hostops::k8s::{self, fleet, Access, K8sError, UpOptions};
use crate::model::hosts::HostsFile;
use crate::units;

#[derive(Args, Debug)]
pub struct K8sArgs {
    #[command(subcommand)]
    pub command: K8sCommand,
}

#[derive(Subcommand, Debug)]
pub enum K8sCommand {
    /// Start agents as pods (two per node on the pod network, one on the node's network, a Service per pod agent), wait until ready, write the hosts file.
    Up(UpArgs),
    /// Delete a fleet's namespace (every object `up` made) and wait until it is gone.
    Down(DownArgs),
    /// The fleet's agent pods: node, address, ready or why not; and whether each agent answers from here.
    Status(StatusArgs),
    /// `up`, then one linerate command on the fleet (`--hosts` added), then `down`, also on failure and Ctrl-C.
    Run(RunArgs),
}

#[derive(Args, Debug, Clone)]
pub struct ClusterFlags {
    /// The kubeconfig [default: KUBECONFIG, ~/.kube/config, else the pod's service account].
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Its context [default: the current one].
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

impl ClusterFlags {
    fn access(&self) -> Access {
        Access {
            kubeconfig: self.kubeconfig.as_ref().map(|p| absolute(p)),
            context: self.context.clone(),
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct UpArgs {
    #[command(flatten)]
    pub cluster: ClusterFlags,
    /// The namespace to create (it must not exist) [default: linerate-RANDOM].
    #[arg(long, value_name = "NAME")]
    pub namespace: Option<String>,
    /// The agent image (scripts/agent-image.sh builds it) [default: linerate/agent:VERSION].
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// The containers' imagePullPolicy: IfNotPresent, Always or Never.
    #[arg(long, default_value = "IfNotPresent", value_parser = ["IfNotPresent", "Always", "Never"])]
    pub pull: String,
    /// The nodes, by name [default: the first --node-count Ready nodes that take pods].
    #[arg(long, value_name = "NODE,...", value_delimiter = ',')]
    pub nodes: Option<Vec<String>>,
    /// How many nodes when --nodes is not given.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub node_count: u16,
    /// No agents on the nodes' own network (hostNetwork pods need the cluster's leave).
    #[arg(long)]
    pub no_host_network: bool,
    /// The node-network agents' control port; their data port is the next.
    #[arg(long, default_value_t = 7472)]
    pub host_port: u16,
    /// Longest wait for every agent to be ready.
    #[arg(long, value_parser = units::parse_duration, default_value = "120s")]
    pub timeout: Duration,
    /// The hosts file to write (its token beside it, FILE.token, 0600).
    #[arg(long, short = 'o', default_value = "k8s-fleet.toml")]
    pub out: PathBuf,
}

#[derive(Args, Debug)]
pub struct DownArgs {
    /// The hosts file `up` wrote (its [kubernetes] names the cluster and namespace).
    #[arg(required_unless_present_any = ["namespace", "all"])]
    pub hosts: Option<PathBuf>,
    #[command(flatten)]
    pub cluster: ClusterFlags,
    /// A namespace instead of a hosts file.
    #[arg(long, value_name = "NAME", conflicts_with = "hosts")]
    pub namespace: Option<String>,
    /// Every namespace labelled app.kubernetes.io/managed-by=linerate (what killed runs left).
    #[arg(long, conflicts_with_all = ["hosts", "namespace"])]
    pub all: bool,
    /// Longest wait for a namespace to be gone.
    #[arg(long, value_parser = units::parse_duration, default_value = "120s")]
    pub timeout: Duration,
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The hosts file `up` wrote.
    pub hosts: PathBuf,
    /// Print the pods as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub up: UpArgs,
    /// Reach the agents' control ports through the API server (as
    /// kubectl port-forward does), for a controller outside the pod
    /// network; the flows still run between the pods.
    #[arg(long)]
    pub port_forward: bool,
    /// The linerate command to run on the fleet, after `--`: e.g. -- run stream --clients n1-a --servers n2-b
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

pub fn k8s(args: K8sArgs) -> Result<()> {
    match args.command {
        K8sCommand::Up(a) => up(&a, true).map(drop),
        K8sCommand::Down(a) => down(a),
        K8sCommand::Status(a) => status(a),
        K8sCommand::Run(a) => run(a),
    }
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

fn failed(e: K8sError) -> Error {
    Error::Failed(e.to_string())
}

/// The token file beside the hosts file: `k8s-fleet.toml.token`.
fn token_path(out: &Path) -> PathBuf {
    let mut s = out.as_os_str().to_owned();
    s.push(".token");
    PathBuf::from(s)
}

fn write_private(path: &Path, text: &str) -> Result<()> {
    let _ = std::fs::remove_file(path);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| Error::Failed(format!("cannot write {}: {e}", path.display())))
}

/// Starts the fleet and writes its hosts file; returns that file's path
/// and the fleet's token. `probe`: say whether each agent answers from
/// this host.
fn up(a: &UpArgs, probe: bool) -> Result<(PathBuf, String)> {
    if a.out.is_dir() {
        return Err(usage(format!(
            "--out {}: a folder; name the hosts file to write",
            a.out.display()
        )));
    }
    if a.host_port == u16::MAX {
        return Err(usage(
            "--host-port: the data port is the next one: at most 65534",
        ));
    }
    // Ctrl-C or SIGTERM while waiting: the namespace goes, then the exit.
    crate::engine::signals::on_signals(&[libc::SIGINT], true);
    crate::engine::signals::on_terminate();
    let o = UpOptions {
        access: a.cluster.access(),
        namespace: a.namespace.clone(),
        image: a
            .image
            .clone()
            .unwrap_or_else(|| format!("linerate/agent:{}", env!("CARGO_PKG_VERSION"))),
        pull: a.pull.clone(),
        nodes: a.nodes.clone(),
        count: a.node_count as usize,
        host_network: !a.no_host_network,
        host_port: a.host_port,
        timeout: a.timeout,
    };
    let token = crate::control::protocol::random_hex(32);
    let say = |l: &str| eprintln!("k8s up: {l}");
    let f = k8s::up(&o, &token, crate::engine::signals::raised(), &say).map_err(failed)?;
    let tokens = token_path(&a.out);
    let rel = PathBuf::from(tokens.file_name().expect("a file name"));
    let file = fleet::hosts_file(&f, &o.access, rel);
    let written = write_private(&tokens, &format!("{token}\n"))
        .and_then(|_| write_private(&a.out, &fleet::render(&file, &f)));
    if let Err(e) = written {
        eprintln!("k8s up: {e}; deleting namespace {}", f.namespace);
        let _ = k8s::down(&o.access, &f.namespace, Duration::from_secs(60));
        return Err(e);
    }
    println!(
        "k8s up: {} agents in namespace {} on {} (Kubernetes {}, CNI {})",
        f.agents.len(),
        f.namespace,
        nodes_of(&f),
        f.server_version,
        f.cni
    );
    let unreachable = if probe { probe_all(&a.out, &token)? } else { 0 };
    println!(
        "hosts file {} (token {}); `linerate k8s down {}` deletes the agents",
        a.out.display(),
        tokens.display(),
        a.out.display()
    );
    if unreachable > 0 {
        eprintln!(
            "k8s up: {unreachable} agents do not answer from this host: run the controller where it reaches the pod network (on a node, or in a pod of the cluster), or use `linerate k8s run --port-forward`"
        );
    }
    Ok((a.out.clone(), token))
}

/// Probes every host of the hosts file `path`, a line each: how many did
/// not answer.
fn probe_all(path: &Path, token: &str) -> Result<usize> {
    let mut unreachable = 0;
    for h in crate::controller::target::load_hosts(path)? {
        let said = answer(h.control(), token);
        unreachable += said.is_err() as usize;
        let via = h
            .connect
            .first()
            .map(|(_, c)| format!(" (data via Service {c})"))
            .unwrap_or_default();
        let data = h
            .data
            .first()
            .map(|d| format!(" data {d}"))
            .unwrap_or_default();
        println!(
            "  {:<10} node {:<14} {:<4} {}{data}{via}: {}",
            h.name,
            h.site.get("node").map_or("", |s| s.as_str()),
            h.site.get("network").map_or("", |s| s.as_str()),
            h.control(),
            said.unwrap_or_else(|e| e),
        );
    }
    Ok(unreachable)
}

/// `linerate COMMAND --hosts HOSTS`, waited for.
fn command_on(command: &[String], hosts: &Path) -> Result<std::process::ExitStatus> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::Failed(format!("cannot find this program: {e}")))?;
    std::process::Command::new(exe)
        .args(command)
        .arg("--hosts")
        .arg(hosts)
        .status()
        .map_err(|e| Error::Failed(format!("cannot start the command: {e}")))
}

/// `k8s run --port-forward`: a listener on 127.0.0.1 per agent, through
/// the API server to its pod's control port, and the hosts file that names
/// them (`FILE.forward`, beside `file`, removed with the fleet). Returns
/// that file and the forwards (running until dropped).
fn forward(a: &UpArgs, file: &Path, token: &str) -> Result<(PathBuf, k8s::forward::Forwards)> {
    use k8s::forward::Target;
    let (hosts, r) = read_fleet(file)?;
    let access = a.cluster.access();
    let pods = k8s::pods(&access, &r.namespace).map_err(failed)?;
    // A host's agent is the pod at its control address (a host-network
    // pod's IP is its node's).
    let target = |h: &crate::model::hosts::HostEntry| {
        pods.iter().find(|p| p.ip == h.address).map(|p| Target {
            pod: p.pod.clone(),
            port: h.port.unwrap_or(crate::model::hosts::DEFAULT_PORT),
        })
    };
    let mut targets: Vec<Target> = hosts.host.iter().filter_map(&target).collect();
    targets.sort();
    targets.dedup();
    if let Some(h) = hosts.host.iter().find(|h| target(h).is_none()) {
        return Err(Error::Failed(format!(
            "k8s run --port-forward: no pod in namespace {} holds {}'s address {}",
            r.namespace, h.name, h.address
        )));
    }
    let fw = k8s::forward::start(&access, &r.namespace, &targets).map_err(failed)?;
    let file2 = fleet::forwarded(&hosts, |h| {
        target(h).and_then(|t| fw.local.get(&t).copied())
    });
    let mut name = file.as_os_str().to_owned();
    name.push(".forward");
    let path = PathBuf::from(name);
    let body = toml::to_string(&file2).expect("a hosts file serializes");
    write_private(
        &path,
        &format!("# linerate k8s run --port-forward: the agents' control ports through the API server, while it runs.\n\n{body}"),
    )?;
    println!("k8s run: the agents' control ports through the API server (port-forward):");
    let unreachable = probe_all(&path, token)?;
    if unreachable > 0 {
        let _ = std::fs::remove_file(&path);
        return Err(Error::Failed(format!(
            "k8s run --port-forward: {unreachable} agents do not answer through the API server"
        )));
    }
    Ok((path, fw))
}

/// Whether the agent at `control` answers this host with `token`: what to
/// print either way.
fn answer(control: std::net::SocketAddr, token: &str) -> std::result::Result<String, String> {
    probe_agent(control, token)
        .map(|p| {
            format!(
                "answers ({}, {} tests running)",
                p.software, p.tests_running
            )
        })
        .map_err(|e| format!("does not answer from here: {e}"))
}

fn nodes_of(f: &k8s::Fleet) -> String {
    let mut v: Vec<&str> = f.agents.iter().map(|a| a.node.name.as_str()).collect();
    v.dedup();
    v.join(", ")
}

/// The cluster and namespace a hosts file names.
fn read_ref(path: &Path) -> Result<crate::model::hosts::KubeRef> {
    read_fleet(path).map(|(_, r)| r)
}

/// A hosts file `k8s up` wrote, and the cluster and namespace it names.
fn read_fleet(path: &Path) -> Result<(HostsFile, crate::model::hosts::KubeRef)> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("hosts file {}: {e}", path.display())))?;
    let file = HostsFile::parse(&text)
        .map_err(|e| usage(format!("hosts file {}: {e}", path.display())))?;
    let r = file.kubernetes.clone().ok_or_else(|| {
        usage(format!(
            "hosts file {} has no [kubernetes] section: it was not written by `linerate k8s up`",
            path.display()
        ))
    })?;
    Ok((file, r))
}

fn down(a: DownArgs) -> Result<()> {
    let mut access = a.cluster.access();
    let namespaces = if a.all {
        k8s::managed_namespaces(&access).map_err(failed)?
    } else if let Some(ns) = &a.namespace {
        vec![ns.clone()]
    } else {
        let path = a.hosts.as_ref().expect("clap requires one");
        let r = read_ref(path)?;
        access.kubeconfig = access.kubeconfig.or(r.kubeconfig);
        access.context = access.context.or(r.context);
        vec![r.namespace]
    };
    for ns in &namespaces {
        k8s::down(&access, ns, a.timeout).map_err(failed)?;
        println!("k8s down: namespace {ns} deleted");
    }
    if namespaces.is_empty() {
        println!("k8s down: no namespace of linerate's on this cluster");
    }
    if let Some(path) = &a.hosts {
        let _ = std::fs::remove_file(token_path(path));
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

fn status(a: StatusArgs) -> Result<()> {
    let r = read_ref(&a.hosts)?;
    let access = Access {
        kubeconfig: r.kubeconfig.clone(),
        context: r.context.clone(),
    };
    let pods = k8s::pods(&access, &r.namespace).map_err(failed)?;
    if a.json {
        return super::write_json(Path::new("-"), &pods);
    }
    println!("namespace {}", r.namespace);
    for p in &pods {
        println!(
            "  {:<10} {:<34} node {:<14} {:<15} {}",
            p.agent,
            p.pod,
            p.node,
            p.ip,
            p.not_ready.as_deref().unwrap_or("ready")
        );
    }
    // Whether each agent answers this host, with the fleet's token.
    let hosts = crate::controller::target::load_hosts(&a.hosts)?;
    let mut silent = 0;
    for h in &hosts {
        let token = h
            .token_file
            .as_ref()
            .map(|f| crate::control::protocol::read_token_file(f))
            .transpose()
            .map_err(|e| Error::Failed(e.to_string()))?
            .unwrap_or_default();
        let said = answer(h.control(), &token);
        silent += said.is_err() as usize;
        println!(
            "  {:<10} {:<21} {}",
            h.name,
            h.control(),
            said.unwrap_or_else(|e| e)
        );
    }
    let bad = pods.iter().filter(|p| p.not_ready.is_some()).count() + silent;
    if bad > 0 {
        return Err(Error::Failed(format!(
            "{} of {} agent pods are not ready, {silent} of {} agents do not answer",
            bad - silent,
            pods.len(),
            hosts.len()
        )));
    }
    Ok(())
}

/// `up`, the command with `--hosts FILE`, `down`: the namespace goes
/// whatever the command did. A Ctrl-C reaches the command too (one
/// process group): it keeps what it measured, then the fleet goes.
fn run(a: RunArgs) -> Result<()> {
    if a.command.iter().any(|w| w == "--hosts") {
        return Err(usage("k8s run adds --hosts itself (the fleet's file)"));
    }
    let (file, token) = up(&a.up, !a.port_forward)?;
    // From here a Ctrl-C is the command's to answer (one process group):
    // this process waits for it, whatever arrives, and then deletes.
    crate::engine::signals::on_signals(&[libc::SIGINT, libc::SIGTERM], false);
    let forwards = match a.port_forward {
        true => forward(&a.up, &file, &token).map(Some),
        false => Ok(None),
    };
    let status = match forwards {
        Err(e) => Err(e),
        Ok(None) => command_on(&a.command, &file),
        Ok(Some((path, fw))) => {
            let status = command_on(&a.command, &path);
            drop(fw);
            let _ = std::fs::remove_file(path);
            status
        }
    };
    let gone = down(DownArgs {
        hosts: Some(file),
        cluster: a.up.cluster.clone(),
        namespace: None,
        all: false,
        timeout: Duration::from_secs(120),
    });
    let code = status?.code().unwrap_or(super::EXIT_FAIL);
    gone?;
    match code {
        0 => Ok(()),
        super::EXIT_PARTIAL => Err(Error::Partial(format!(
            "the command on the fleet ended early (exit {code}); the fleet is deleted"
        ))),
        c => Err(Error::Failed(format!(
            "the command on the fleet failed (exit {c}); the fleet is deleted"
        ))),
    }
}
