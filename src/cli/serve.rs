//! `linerate serve`: the agent daemon.

use clap::Args;
use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::agent::serve as agent;
use crate::controller::target;
use crate::error::{usage, Error, Result};
use crate::units;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on for controllers.
    #[arg(long, default_value = "0.0.0.0:7470")]
    pub listen: SocketAddr,
    /// File whose first line is the shared token (or set LINERATE_TOKEN).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Read the token from the first line of standard input (what `cluster up` sends over ssh).
    #[arg(long, conflicts_with = "token_file")]
    pub token_stdin: bool,
    /// Serve any controller, with no token, on any address (without a token, `serve` listens on loopback only): whoever reaches the port can run traffic from this host.
    #[arg(long, conflicts_with_all = ["token_file", "token_stdin"])]
    pub insecure_no_token: bool,
    /// Run in the background once listening: the command prints `linerate agent listening on ADDR pid PID` and exits 0.
    #[arg(long, conflicts_with_all = ["once", "exit_with_parent"])]
    pub detach: bool,
    /// With --detach: where the agent's messages go (appended; default: nowhere).
    #[arg(long, value_name = "FILE", requires = "detach")]
    pub log: Option<PathBuf>,
    /// Write the agent's process id to FILE (with --detach: the background process's).
    #[arg(long, value_name = "FILE")]
    pub pid_file: Option<PathBuf>,
    /// Concurrent tests (from any controllers) before answering "busy".
    #[arg(long, default_value_t = 4)]
    pub max_tests: usize,
    /// Most flows one test may ask for.
    #[arg(long, default_value_t = 10_000)]
    pub max_flows: u32,
    /// Longest test (warm-up + window) one controller may ask for.
    #[arg(long, value_parser = units::parse_duration, default_value = "1h")]
    pub max_duration: Duration,
    /// Serve one controller, then exit (used by the embedded local agent).
    #[arg(long, hide = true)]
    pub once: bool,
    /// Exit when the parent process exits (used by the embedded local agent).
    #[arg(long, hide = true)]
    pub exit_with_parent: bool,
    /// Log nothing but errors.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Let tests set net.* sysctls on this host (root): the old values are journaled and put back after each test, on SIGINT/SIGTERM, or at the next start.
    #[arg(long)]
    pub allow_sysctl: bool,
    /// Let tests set NIC settings (nic.gro, nic.rx-ring, nic.rps ...) on the data interface, the one holding the address tests connect to (root): the old values are journaled and put back after each test, on SIGINT/SIGTERM, or at the next start.
    #[arg(long)]
    pub allow_nic: bool,
    /// Serve TLS tests with the CPU's crypto extensions masked from the crypto libraries (for `run --crypto-hw off`).
    #[arg(long, value_parser = crate::model::options::Switch::parse, value_name = "on|off", default_value = "on")]
    pub crypto_hw: crate::model::options::Switch,
    /// Do not start the companion agent that serves TLS tests with the other crypto-hardware setting (a second process on a random port of the same address; `run --crypto-hw off` against this agent then needs `serve --crypto-hw off`).
    #[arg(long)]
    pub no_crypto_twin: bool,
    /// Enter this network namespace (/run/netns/NAME) before listening: a lab's server side.
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// Listen for controllers here, but open every data socket in network namespace NAME (a lab host's agent).
    #[arg(long, value_name = "NAME", hide = true, conflicts_with = "netns")]
    pub data_netns: Option<String>,
    /// Certificate (PEM, leaf first) for TLS tests instead of a generated one; clients verify it with --tls-ca and --tls-name.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Also serve QUIC's perf protocol (draft-banks-quic-performance, ALPN "perf") on this UDP address, for another tool's perf client (quinn's `perf client`), with this agent's certificate. Like `iperf3 -s`, whoever reaches it can make this host send; each connection ends after --max-duration.
    #[arg(long, value_name = "ADDR")]
    pub quic_perf: Option<SocketAddr>,
    /// Also serve the responsiveness test (draft-ietf-ippm-responsiveness, RPM) on this TCP address: its configuration at /.well-known/nq and the small, large and upload URLs, over HTTP/2 with TLS and this agent's certificate, for any RPM client (networkQuality -C, goresponsiveness). Whoever reaches it can make this host send; each transfer ends after --max-duration.
    #[arg(long, value_name = "ADDR")]
    pub rpm: Option<SocketAddr>,
    /// Listen for every test's data connections (TCP and UDP) on this port instead of a free one per test: for a port that a Kubernetes Service, a NAT or a firewall forwards. One server test at a time holds it; another is answered busy [default: a free port per test].
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub data_port: Option<u16>,
    /// With --rpm: serve clear HTTP (HTTP/2 with prior knowledge, or HTTP/1.1) instead of TLS, for hosts and clients without it.
    #[arg(long, requires = "rpm")]
    pub rpm_clear: bool,
}

/// A server's thread beside the agent (QUIC perf, RPM): stopped and
/// joined when dropped.
struct PerfThread {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PerfThread {
    /// Runs `serve` (until the flag it is handed is set) on a thread
    /// named `name`.
    fn spawn(
        name: &str,
        serve: impl FnOnce(&std::sync::atomic::AtomicBool) + Send + 'static,
    ) -> Result<PerfThread> {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || serve(&flag))
            .map_err(|e| Error::Failed(e.to_string()))?;
        Ok(PerfThread {
            stop,
            thread: Some(thread),
        })
    }
}

/// Prints the line that says where a server beside the agent listens (a
/// reader that went away, a closed pipe, does not end the agent).
fn announce(line: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

impl Drop for PerfThread {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Binds the QUIC perf server and serves it on a thread of its own.
fn start_quic_perf(addr: SocketAddr, limit: Duration, quiet: bool) -> Result<PerfThread> {
    use crate::workload::quic::{config, perf_server::PerfServer};
    let cfg = config::perf_server().map_err(|e| Error::Failed(format!("--quic-perf: {e}")))?;
    let mut server = PerfServer::bind(addr, cfg, limit)
        .map_err(|e| usage(format!("--quic-perf {addr}: {e}")))?;
    let bound = server
        .local_addr()
        .map_err(|e| Error::Failed(e.to_string()))?;
    announce(format_args!(
        "linerate agent: QUIC perf server on {bound} (ALPN perf)"
    ));
    PerfThread::spawn("quic-perf", move |stop| {
        if let Err(e) = server.run(stop) {
            eprintln!("linerate agent: QUIC perf server stopped: {e}");
        }
        if !quiet {
            let s = server.served();
            eprintln!(
                "linerate agent: QUIC perf server served {} connections, {} requests, {} B in, {} B out",
                s.connections, s.requests, s.bytes_in, s.bytes_out
            );
        }
    })
}

/// Binds the RPM server and serves it on a thread of its own.
fn start_rpm(addr: SocketAddr, clear: bool, limit: Duration, quiet: bool) -> Result<PerfThread> {
    use crate::workload::rpm::server::RpmServer;
    let tls = if clear {
        None
    } else {
        let t = crate::model::spec::TlsSpec {
            resume: true,
            ..Default::default()
        };
        let (cfg, _) = crate::engine::tls::server_config(&t)
            .map_err(|e| Error::Failed(format!("--rpm: {e}")))?;
        Some(cfg)
    };
    let server =
        RpmServer::bind(addr, tls, limit).map_err(|e| usage(format!("--rpm {addr}: {e}")))?;
    announce(format_args!(
        "linerate agent: RPM server on {} ({})",
        server.config_url(),
        if clear {
            "clear HTTP/2 and HTTP/1.1"
        } else {
            "HTTP/2 over TLS"
        }
    ));
    let served = server.served();
    PerfThread::spawn("rpm", move |stop| {
        if let Err(e) = server.run(stop) {
            eprintln!("linerate agent: RPM server stopped: {e}");
        }
        if !quiet {
            use std::sync::atomic::Ordering::Relaxed;
            eprintln!(
                "linerate agent: RPM server served {} connections, {} requests, {} B in, {} B out",
                served.connections.load(Relaxed),
                served.requests.load(Relaxed),
                served.bytes_in.load(Relaxed),
                served.bytes_out.load(Relaxed)
            );
        }
    })
}

pub fn serve(args: ServeArgs) -> Result<()> {
    // First, before stdin is read: the masked agent is this one run again.
    if !args.crypto_hw.0 && !crate::measure::crypto::hw_masked() {
        return super::rerun_masked();
    }
    // SAFETY: geteuid has no preconditions.
    if args.allow_sysctl && unsafe { libc::geteuid() } != 0 {
        return Err(usage("--allow-sysctl needs root (sysctls are the host's)"));
    }
    // SAFETY: geteuid has no preconditions.
    if args.allow_nic && unsafe { libc::geteuid() } != 0 {
        return Err(usage(
            "--allow-nic needs root (ethtool and the queues' CPU masks are the host's): run it with sudo",
        ));
    }
    let token = serve_token(&args)?;
    // Nothing the agent starts (its companion, memcached) inherits the
    // token: they get it on stdin, or not at all. Single-threaded here.
    std::env::remove_var("LINERATE_TOKEN");
    if let Some(ns) = &args.netns {
        crate::lab::netns::enter(ns)?;
    }
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        crate::engine::tls::load_identity_files(cert, key)?;
    }
    if args.exit_with_parent {
        // SAFETY: asks the kernel for SIGTERM when the parent exits.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
    }
    let listener = agent::bind(args.listen)?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::Failed(e.to_string()))?;
    if args.detach {
        // Returns in the background process only.
        detach(
            &addr,
            listener.as_raw_fd(),
            args.log.as_deref(),
            args.pid_file.as_deref(),
        )?;
    } else {
        if let Some(p) = &args.pid_file {
            write_pid(p, std::process::id())?;
        }
    }
    // After detaching: fork must not see the twin's reader thread, and the
    // twin's parent-death signal is tied to this (the serving) thread.
    let twin = if args.once || args.no_crypto_twin {
        None
    } else {
        match spawn_crypto_twin(&args, addr, &token) {
            Ok(t) => Some(t),
            Err(e) => {
                eprintln!("linerate agent: no companion for the other crypto setting: {e}");
                None
            }
        }
    };
    let perf = match args.quic_perf {
        Some(a) => Some(start_quic_perf(a, args.max_duration, args.quiet)?),
        None => None,
    };
    let rpm = match args.rpm {
        Some(a) => Some(start_rpm(a, args.rpm_clear, args.max_duration, args.quiet)?),
        None => None,
    };
    let cfg = agent::ServeConfig {
        // Said once serving is set up (a crashed agent's sysctls are back,
        // the companion is up): a script may start tests at once.
        announce: !args.detach,
        crypto_twin: twin.as_ref().map(|t| t.addr.port()),
        listen: addr,
        token,
        max_tests: args.max_tests.max(1),
        max_flows: args.max_flows,
        max_duration_s: args.max_duration.as_secs_f64(),
        once: args.once,
        data_netns: args.data_netns,
        quiet: args.quiet,
        allow_sysctl: args.allow_sysctl,
        in_lab: args.netns.is_some(),
        allow_nic: args.allow_nic,
        data_port: args.data_port.unwrap_or(0),
    };
    let served = agent::serve_on(listener, cfg).map_err(Error::from);
    drop(rpm);
    drop(perf);
    drop(twin);
    served
}

/// The companion agent: this one's settings with the crypto extensions
/// the other way (masked when this agent uses them, unmasked when it runs
/// with `--crypto-hw off`), on the same address and a random port, ending
/// with this process. The crypto libraries read the mask once per
/// process, so a test that wants the other setting runs there.
fn spawn_crypto_twin(
    args: &ServeArgs,
    addr: SocketAddr,
    token: &str,
) -> Result<crate::controller::local::LocalAgent> {
    let masked = crate::measure::crypto::hw_masked();
    let listen = SocketAddr::new(addr.ip(), 0).to_string();
    let mut a: Vec<String> = vec![
        "serve".into(),
        "--listen".into(),
        listen,
        "--exit-with-parent".into(),
        "--quiet".into(),
        "--no-crypto-twin".into(),
        "--crypto-hw".into(),
        if masked { "on" } else { "off" }.into(),
        "--max-tests".into(),
        args.max_tests.to_string(),
        "--max-flows".into(),
        args.max_flows.to_string(),
        "--max-duration".into(),
        format!("{}s", args.max_duration.as_secs_f64()),
    ];
    // No --allow-sysctl: the sysctl journal is the namespace's, and a
    // companion put on SIGTERM (its agent's death) would replay it under a
    // test its agent still runs.
    if let Some(ns) = &args.data_netns {
        a.extend(["--data-netns".into(), ns.clone()]);
    }
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        for (flag, path) in [("--tls-cert", cert), ("--tls-key", key)] {
            let abs =
                std::fs::canonicalize(path).map_err(|e| Error::Failed(format!("{flag}: {e}")))?;
            a.extend([flag.to_string(), abs.display().to_string()]);
        }
    }
    Ok(crate::controller::local::LocalAgent::spawn_with(
        &a,
        token.to_string(),
        Some(!masked),
    )?)
}

/// The agent's token, or "" for none: allowed on a loopback address (only
/// this host's users reach it, as with netserver or `iperf3 -s`) and, with
/// `--insecure-no-token`, anywhere.
fn serve_token(args: &ServeArgs) -> Result<String> {
    if args.token_stdin {
        return token_from_stdin();
    }
    let env_token = std::env::var("LINERATE_TOKEN").is_ok_and(|t| !t.trim().is_empty());
    if args.insecure_no_token || (args.token_file.is_none() && !env_token) {
        if !args.insecure_no_token && !args.listen.ip().is_loopback() {
            return Err(usage(format!(
                "no token: pass --token-file FILE (a shared secret on its first line) or set LINERATE_TOKEN; without one the agent listens only on loopback (--listen 127.0.0.1:{}), or pass --insecure-no-token to let anyone who reaches {} run traffic from this host",
                args.listen.port(),
                args.listen
            )));
        }
        if !args.quiet && !args.once {
            eprintln!(
                "linerate agent: no token: any controller that reaches {} can run tests{}",
                args.listen,
                if args.listen.ip().is_loopback() {
                    " (any user of this host)"
                } else {
                    ""
                }
            );
        }
        return Ok(String::new());
    }
    target::token(&args.token_file)
}

/// The token on the first line of standard input: it never shows in a
/// command line, the environment or a file.
fn token_from_stdin() -> Result<String> {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| Error::Failed(format!("cannot read the token from standard input: {e}")))?;
    let token = line.trim().to_string();
    if token.is_empty() {
        return Err(usage(
            "--token-stdin: standard input's first line is empty: send the shared token on it",
        ));
    }
    Ok(token)
}

fn write_pid(path: &Path, pid: u32) -> Result<()> {
    std::fs::write(path, format!("{pid}\n"))
        .map_err(|e| Error::Failed(format!("cannot write --pid-file {}: {e}", path.display())))
}

/// The number of threads of this process (/proc/self/status).
fn threads() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
}

/// Forks: the parent writes the pid file, prints the listening line with
/// the child's pid and exits 0 (so an ssh session that started it returns);
/// the child starts a session of its own, with its standard streams on
/// /dev/null (or the log), no other inherited descriptor but `keep` (the
/// listener; an ssh session's pipe held open would keep ssh waiting) and
/// `/` as its directory, and returns.
fn detach(
    addr: &SocketAddr,
    keep: RawFd,
    log: Option<&Path>,
    pid_file: Option<&Path>,
) -> Result<()> {
    // fork copies only the calling thread: with others running (holding a
    // lock, say) the child could hang. Nothing has started one yet.
    if let Some(n) = threads().filter(|&n| n > 1) {
        return Err(Error::Failed(format!(
            "cannot --detach: {n} threads are already running (a bug: report it)"
        )));
    }
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map_err(|e| Error::Failed(format!("/dev/null: {e}")))?;
    let out = match log {
        Some(p) => std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(p)
            .map_err(|e| Error::Failed(format!("cannot open --log {}: {e}", p.display())))?,
        None => null.try_clone().map_err(|e| Error::Failed(e.to_string()))?,
    };
    let _ = std::io::stdout().flush();
    // SAFETY: the process is single-threaded (checked above), so the child
    // may run any code after fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(Error::Failed(format!(
            "cannot fork: {}",
            std::io::Error::last_os_error()
        )));
    }
    if pid > 0 {
        if let Some(p) = pid_file {
            if let Err(e) = write_pid(p, pid as u32) {
                // SAFETY: the child is ours; it has not served anyone yet.
                unsafe { libc::kill(pid, libc::SIGTERM) };
                return Err(e);
            }
        }
        println!("linerate agent listening on {addr} pid {pid}");
        let _ = std::io::stdout().flush();
        std::process::exit(0);
    }
    // The child: no controlling terminal, no ties to the caller's session.
    // SAFETY: plain system calls on descriptors this process owns.
    unsafe {
        libc::setsid();
        libc::dup2(null.as_raw_fd(), 0);
        libc::dup2(out.as_raw_fd(), 1);
        libc::dup2(out.as_raw_fd(), 2);
    }
    drop((null, out));
    let open: Vec<RawFd> = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    for fd in open.into_iter().filter(|&fd| fd > 2 && fd != keep) {
        // SAFETY: closes descriptors this process inherited and never uses
        // (the directory listing's own is already closed: EBADF, harmless).
        unsafe { libc::close(fd) };
    }
    let _ = std::env::set_current_dir("/");
    Ok(())
}
