//! The command line: parse, build a spec, call the library, set exit codes.
//! Exit codes: 0 ok; 1 failure (one-line cause on stderr); 2 bad usage;
//! 3 partial results (the test ended early; what was measured is kept).

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::agent::controller::{self, AgentConn};
use crate::agent::local::LocalAgent;
use crate::agent::{protocol, server};
use crate::measure::stats::{self, Confidence};
use crate::report::{human, progress::Progress};
use crate::result::{AgentInfo, TestResult};
use crate::spec::{
    CertKind, CloseMode, Direction, Per, TestSpec, TlsBackend, TlsSpec, WindowMode, Workload,
};
use crate::units;

pub const EXIT_FAIL: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_PARTIAL: i32 = 3;

#[derive(Parser, Debug)]
#[command(name = "linerate", version, about = "A network performance lab in one binary: stream, rr and crr measured on both ends.", long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

// Parsed once per process: the size difference between variants is moot.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run one test against an agent (a local one is started when --agent is not given).
    Run(RunArgs),
    /// Run the agent: serve tests for controllers.
    Serve(ServeArgs),
    /// The default quick study on loopback (also what `linerate` alone runs).
    Quick(QuickArgs),
    /// Studies: sweeps of tests with a report (list, show, metrics, run).
    Study(crate::study::commands::StudyArgs),
    /// Write report.html, report.md and landscape.csv of a results folder again (runs nothing).
    Report(crate::study::commands::ReportArgs),
    /// Compare two results folders point by point, with significance (exit 4 on --fail-if).
    Compare(crate::study::commands::CompareArgs),
    /// Per-core cipher speed (64 B to 16 KiB records) with the TLS backends' libraries, and the CPU's crypto features.
    Crypto(CryptoArgs),
    /// Emulated networks: client, router and server namespaces with a WAN emulator (root).
    Lab(crate::lab::cli::LabArgs),
}

#[derive(Args, Debug)]
pub struct CryptoArgs {
    /// Time spent on each cipher and record size.
    #[arg(long, value_parser = dur, default_value = "200ms")]
    pub each: Duration,
    /// Also write the measurements as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

fn crypto(a: CryptoArgs) -> Result<(), Failure> {
    if a.each > Duration::from_secs(10) {
        return Err(usage("--each is capped at 10 s".into()));
    }
    let r = crate::measure::crypto::report(a.each);
    println!("cpu      {}", r.cpu_model);
    println!(
        "features {}",
        if r.cpu_flags.is_empty() {
            "none of aes, vaes, pclmulqdq, vpclmulqdq, sha_ni, avx2, avx512f".to_string()
        } else {
            r.cpu_flags.join(" ")
        }
    );
    println!("\none core, sealing records (GB/s of plaintext):");
    let sizes = crate::measure::crypto::RECORD_SIZES;
    print!("{:<38}", "library / cipher");
    for s in sizes {
        print!(" {:>9}", units::fmt_size_arg(*s as u64));
    }
    println!();
    let mut rows: Vec<(String, String)> = Vec::new();
    for s in &r.speeds {
        let k = (s.library.clone(), s.cipher.clone());
        if !rows.contains(&k) {
            rows.push(k);
        }
    }
    for (lib, cipher) in rows {
        print!("{:<38}", format!("{lib} {cipher}"));
        for size in sizes {
            let v = r
                .speeds
                .iter()
                .find(|s| s.library == lib && s.cipher == cipher && s.record_bytes == *size)
                .map(|s| format!("{:.2}", s.bytes_per_s / 1e9))
                .unwrap_or_else(|| "-".into());
            print!(" {v:>9}");
        }
        println!();
    }
    println!("\n{}", r.verdict);
    if let Some(p) = &a.json {
        write_json(p, &r)?;
    }
    Ok(())
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum WorkloadArg {
    Stream,
    Rr,
    Crr,
    /// connect, TLS handshake, one small exchange, close (TLS implied)
    TlsHandshake,
    /// a real command in the client namespace, timed: linerate run exec --lab NAME -- COMMAND ARGS
    Exec,
    /// real OpenSSH scp of --bytes to linerate's own sshd in the server namespace
    Scp,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum BackendArg {
    Rustls,
    Openssl,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum CertArg {
    EcdsaP256,
    Rsa2048,
    Rsa4096,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
pub enum WindowArg {
    Buffer,
    Exact,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
pub enum OnOff {
    On,
    Off,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum DirectionArg {
    Tx,
    Rx,
    Bidir,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum PerArg {
    Flow,
    Transaction,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum CloseArg {
    Graceful,
    Reset,
}

fn size(s: &str) -> Result<u64, String> {
    units::parse_size(s)
}
fn dur(s: &str) -> Result<Duration, String> {
    units::parse_duration(s)
}
fn count(s: &str) -> Result<f64, String> {
    units::parse_count(s)
}
/// A CPU list as one argument value (clap would take a bare Vec as many values).
#[derive(Clone, Debug)]
pub struct CpuList(pub Vec<usize>);

fn cpus(s: &str) -> Result<CpuList, String> {
    units::parse_cpu_list(s).map(CpuList)
}
fn iters(s: &str) -> Result<(usize, usize), String> {
    stats::parse_iterations(s)
}
fn conf(s: &str) -> Result<(f64, f64), String> {
    stats::parse_confidence(s)
}

#[derive(Args, Debug, Clone)]
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

#[derive(Args, Debug)]
pub struct RunArgs {
    /// What the flows do: stream (bulk), rr (request/response), crr (connect/request/response/close).
    #[arg(value_enum)]
    pub workload: WorkloadArg,
    /// stream: tx = client sends ("put"), rx = agent sends ("get"), bidir = both.
    #[arg(long, value_enum, default_value = "tx")]
    pub direction: DirectionArg,
    /// stream: bytes per write.
    #[arg(short = 'm', long, value_parser = size, default_value = "128K")]
    pub message: u64,
    /// rr/crr: request size.
    #[arg(long, value_parser = size, default_value = "1")]
    pub request: u64,
    /// rr/crr: response size.
    #[arg(long, value_parser = size, default_value = "1")]
    pub response: u64,
    /// stream: a finite transfer of this size (per flow, or per transaction with --per transaction).
    #[arg(long, value_parser = size)]
    pub bytes: Option<u64>,
    /// stream --bytes: one transfer per flow (test ends when all are done), or repeated transactions for the duration.
    #[arg(long, value_enum, default_value = "flow")]
    pub per: PerArg,
    /// stream --bytes: size of the small message the other way (stream put 20M/20: --bytes 20M --reply 20).
    #[arg(long, value_parser = size, default_value = "20")]
    pub reply: u64,
    /// rr: requests in flight per flow (netperf -b + 1).
    #[arg(long, default_value_t = 1)]
    pub outstanding: u32,
    /// rr: open loop at this many transactions/s in total (latency also measured from the intended send time).
    #[arg(long, value_parser = count)]
    pub rate: Option<f64>,
    /// Number of flows (connections).
    #[arg(short = 'F', long, default_value_t = 1)]
    pub flows: u32,
    /// Client worker threads (epoll loops); default min(flows, CPUs).
    #[arg(short = 'T', long)]
    pub threads: Option<u32>,
    /// Agent worker threads; default the same as --threads.
    #[arg(long)]
    pub agent_threads: Option<u32>,
    /// Measurement window (with --bytes: the time limit, default 300 s).
    #[arg(short = 'd', long, value_parser = dur)]
    pub duration: Option<Duration>,
    /// Warm-up excluded from the window.
    #[arg(long, value_parser = dur, default_value = "2s")]
    pub warmup: Duration,
    /// Interval of the per-interval samples.
    #[arg(short = 'i', long, value_parser = dur, default_value = "1s")]
    pub interval: Duration,
    /// SO_SNDBUF on both ends (the kernel doubles it; the granted size is reported).
    #[arg(long, value_parser = size)]
    pub sndbuf: Option<u64>,
    /// SO_RCVBUF on both ends (set before listen/connect).
    #[arg(long, value_parser = size)]
    pub rcvbuf: Option<u64>,
    /// How --rcvbuf sets the receive window: buffer (SO_RCVBUF, as applications do: ~1.5x on Linux) or exact (plus TCP_WINDOW_CLAMP).
    #[arg(long, value_enum, default_value = "buffer")]
    pub window: WindowArg,
    /// TCP_NODELAY on both ends.
    #[arg(long)]
    pub nodelay: bool,
    /// Congestion control per socket: reno, cubic, bbr ... (this kernel's default is recorded otherwise).
    #[arg(long, value_name = "NAME")]
    pub cc: Option<String>,
    /// TCP_MAXSEG before connect.
    #[arg(long)]
    pub mss: Option<u32>,
    /// Pin client workers to these CPUs (round-robin), e.g. 0 or 0-1.
    #[arg(long, value_parser = cpus, value_name = "LIST")]
    pub cpus: Option<CpuList>,
    /// Pin agent workers to these CPUs.
    #[arg(long, value_parser = cpus, value_name = "LIST")]
    pub agent_cpus: Option<CpuList>,
    /// stream: send with sendfile(2) from a memfd (no user-space copy).
    #[arg(long)]
    pub zerocopy: bool,
    /// crr: graceful (agent closes first, FIN) or reset (client SO_LINGER 0).
    #[arg(long, value_enum, default_value = "graceful")]
    pub close: CloseArg,
    /// TLS on every data connection (the agent is the server; its generated certificate is verified).
    #[arg(long)]
    pub tls: bool,
    /// TLS library: rustls (aws-lc-rs) or openssl (cargo feature `openssl`).
    #[arg(long, value_enum, default_value = "rustls")]
    pub backend: BackendArg,
    /// TLS suite: aes128-gcm, aes256-gcm, chacha20-poly1305, a full name, or OpenSSL's (AES256-SHA256).
    #[arg(long, value_name = "SUITE")]
    pub cipher: Option<String>,
    /// TLS protocol version: 1.2 or 1.3 (default 1.3 unless the suite is 1.2).
    #[arg(long, value_name = "1.2|1.3")]
    pub tls_version: Option<String>,
    /// Key exchange group: x25519, x25519mlkem768, p256, p384.
    #[arg(long, value_name = "GROUP")]
    pub kx: Option<String>,
    /// The agent's generated certificate.
    #[arg(long, value_enum, default_value = "ecdsa-p256")]
    pub cert: CertArg,
    /// TLS session resumption (tls-handshake: measure resumed handshakes).
    #[arg(long, value_enum, default_value = "off")]
    pub resume: OnOff,
    /// openssl TLS 1.2 CBC suites: encrypt-then-MAC on or off.
    #[arg(long, value_enum)]
    pub etm: Option<OnOff>,
    /// The name the client verifies in the agent's certificate.
    #[arg(long, value_name = "NAME")]
    pub tls_name: Option<String>,
    /// Trust this PEM certificate instead of the agent's generated one.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// With --tls, skip the clear-text run of the same test that measures what TLS costs.
    #[arg(long)]
    pub no_baseline: bool,
    /// Repeat: N or MIN..MAX iterations (stop early once --confidence is met).
    #[arg(long, value_parser = iters, value_name = "MIN..MAX")]
    pub iterations: Option<(usize, usize)>,
    /// Confidence target LEVEL,WIDTH: e.g. 99,5 = 99% CI within +/-2.5% of the mean.
    #[arg(long, value_parser = conf, default_value = "99,5")]
    pub confidence: (f64, f64),
    /// Write the full result (docs/result-schema.md) to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Print one JSON object per interval on stdout as the test runs.
    #[arg(long)]
    pub json_stream: bool,
    /// No progress line.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// exec: also start linerate's own sshd in the server namespace ({ssh_config} names `Host server` for ssh/scp -F).
    #[arg(long)]
    pub sshd: bool,
    /// exec: a shell command run in the server namespace for the test's duration.
    #[arg(long, value_name = "COMMAND")]
    pub server_cmd: Option<String>,
    /// exec: the command and its arguments, after `--` ({server}, {ssh_config}, {file} are replaced).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on for controllers.
    #[arg(long, default_value = "0.0.0.0:7470")]
    pub listen: SocketAddr,
    /// File whose first line is the shared token (or set LINERATE_TOKEN).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Concurrent tests (from any controllers) before answering "busy".
    #[arg(long, default_value_t = 4)]
    pub max_tests: usize,
    /// Most flows one test may ask for.
    #[arg(long, default_value_t = 10_000)]
    pub max_flows: u32,
    /// Longest test (warm-up + window) one controller may ask for.
    #[arg(long, value_parser = dur, default_value = "1h")]
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
    /// Enter this network namespace (/run/netns/NAME) before listening: a lab's server side.
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// Certificate (PEM, leaf first) for TLS tests instead of a generated one; clients verify it with --tls-ca and --tls-name.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

#[derive(Args, Debug, Default)]
pub struct QuickArgs {
    /// Window of each test (the study file says 8 s).
    #[arg(short = 'd', long, value_parser = dur)]
    pub duration: Option<Duration>,
    /// Also write all results as one JSON document.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Folder under which the results folder (with report.html) is made.
    #[arg(long, value_name = "DIR", default_value = "results")]
    pub out: PathBuf,
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

/// A failure with its exit code.
pub struct Failure {
    pub code: i32,
    pub message: String,
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure {
            code: EXIT_FAIL,
            message,
        }
    }
}

fn usage(message: String) -> Failure {
    Failure {
        code: EXIT_USAGE,
        message,
    }
}

pub fn token(file: &Option<PathBuf>) -> Result<String, Failure> {
    if let Some(f) = file {
        return protocol::read_token_file(f).map_err(Failure::from);
    }
    match std::env::var("LINERATE_TOKEN") {
        Ok(t) if !t.trim().is_empty() => Ok(t.trim().to_string()),
        _ => Err(usage(
            "no token: pass --token-file FILE (a shared secret on its first line) or set LINERATE_TOKEN"
                .into(),
        )),
    }
}

impl RunArgs {
    pub fn spec(&self) -> Result<TestSpec, Failure> {
        let flows = self.flows;
        let threads = self
            .threads
            .unwrap_or_else(|| TestSpec::default_threads(flows));
        let finite = (self.bytes.is_some() && matches!(self.per, PerArg::Flow))
            || matches!(self.workload, WorkloadArg::Exec | WorkloadArg::Scp);
        let duration =
            self.duration
                .unwrap_or(Duration::from_secs_f64(TestSpec::default_duration_s(
                    finite,
                )));

        let as_usize = |v: Option<u64>, name: &str| -> Result<Option<usize>, Failure> {
            match v {
                Some(b) if b > (1 << 30) => {
                    Err(usage(format!("--{name} {b} is larger than 1 GiB")))
                }
                Some(b) => Ok(Some(b as usize)),
                None => Ok(None),
            }
        };
        let spec = TestSpec {
            workload: match self.workload {
                WorkloadArg::Stream => Workload::Stream,
                WorkloadArg::Rr => Workload::Rr,
                WorkloadArg::Crr => Workload::Crr,
                WorkloadArg::TlsHandshake => Workload::TlsHandshake,
                WorkloadArg::Exec => Workload::Exec,
                WorkloadArg::Scp => Workload::Scp,
            },
            direction: match self.direction {
                DirectionArg::Tx => Direction::Tx,
                DirectionArg::Rx => Direction::Rx,
                DirectionArg::Bidir => Direction::Bidir,
            },
            message: self.message.min(u32::MAX as u64) as usize,
            request: self.request,
            response: self.response,
            bytes: self.bytes,
            per: match self.per {
                PerArg::Flow => Per::Flow,
                PerArg::Transaction => Per::Transaction,
            },
            reply: self.reply,
            outstanding: self.outstanding,
            rate: self.rate,
            flows,
            threads,
            agent_threads: self.agent_threads.unwrap_or(threads),
            duration_s: duration.as_secs_f64(),
            warmup_s: self.warmup.as_secs_f64(),
            interval_s: self.interval.as_secs_f64(),
            sndbuf: as_usize(self.sndbuf, "sndbuf")?,
            rcvbuf: as_usize(self.rcvbuf, "rcvbuf")?,
            nodelay: self.nodelay,
            cc: self.cc.clone(),
            mss: self.mss,
            cpus: self.cpus.clone().map(|c| c.0),
            agent_cpus: self.agent_cpus.clone().map(|c| c.0),
            zerocopy: self.zerocopy,
            ipv6: self.connect.ipv6,
            close: match self.close {
                CloseArg::Graceful => CloseMode::Graceful,
                CloseArg::Reset => CloseMode::Reset,
            },
            tls: self.tls_spec()?,
            window: match self.window {
                WindowArg::Buffer => WindowMode::Buffer,
                WindowArg::Exact => WindowMode::Exact,
            },
            rtt_s: None,
            exec: self.exec_spec()?,
        };
        spec.validate().map_err(usage)?;
        let ncpus = crate::measure::placement::allowed_cpus();
        if let Some(c) = spec.cpus.iter().flatten().find(|c| !ncpus.contains(c)) {
            return Err(usage(format!(
                "--cpus names CPU {c}, but this process may use CPUs {}",
                units::fmt_cpu_list(&ncpus)
            )));
        }
        Ok(spec)
    }

    fn exec_spec(&self) -> Result<Option<crate::workload::exec::ExecSpec>, Failure> {
        let exec = matches!(self.workload, WorkloadArg::Exec | WorkloadArg::Scp);
        if !exec {
            if self.sshd || self.server_cmd.is_some() || !self.command.is_empty() {
                return Err(usage(
                    "--sshd, --server-cmd and a command after -- apply to the exec workload".into(),
                ));
            }
            return Ok(None);
        }
        Ok(Some(crate::workload::exec::ExecSpec {
            command: self.command.clone(),
            server_command: self
                .server_cmd
                .as_ref()
                .map(|c| vec!["sh".into(), "-c".into(), c.clone()]),
            sshd: self.sshd || matches!(self.workload, WorkloadArg::Scp),
        }))
    }

    fn tls_spec(&self) -> Result<Option<TlsSpec>, Failure> {
        let on = self.tls || matches!(self.workload, WorkloadArg::TlsHandshake);
        if !on {
            let set = [
                (self.cipher.is_some(), "--cipher"),
                (self.tls_version.is_some(), "--tls-version"),
                (self.kx.is_some(), "--kx"),
                (self.etm.is_some(), "--etm"),
                (self.tls_name.is_some(), "--tls-name"),
                (self.tls_ca.is_some(), "--tls-ca"),
                (self.resume == OnOff::On, "--resume"),
                (matches!(self.backend, BackendArg::Openssl), "--backend"),
            ];
            if let Some((_, name)) = set.iter().find(|(s, _)| *s) {
                return Err(usage(format!("{name} needs --tls")));
            }
            return Ok(None);
        }
        TlsSpec::from_options(
            match self.backend {
                BackendArg::Rustls => TlsBackend::Rustls,
                BackendArg::Openssl => TlsBackend::Openssl,
            },
            self.cipher.clone(),
            self.tls_version.clone(),
            self.kx.clone(),
            match self.cert {
                CertArg::EcdsaP256 => CertKind::EcdsaP256,
                CertArg::Rsa2048 => CertKind::Rsa2048,
                CertArg::Rsa4096 => CertKind::Rsa4096,
            },
            self.resume == OnOff::On,
            self.etm.map(|e| e == OnOff::On),
            self.tls_name.clone(),
            self.tls_ca.as_ref().map(|p| p.display().to_string()),
        )
        .map(Some)
        .map_err(usage)
    }

    fn confidence(&self) -> Confidence {
        let (min, max) = self.iterations.unwrap_or((1, 1));
        Confidence {
            min,
            max,
            level_pct: self.confidence.0,
            width_pct: self.confidence.1,
        }
    }
}

/// An agent to talk to: a remote one, or a local child process.
pub struct Target {
    pub conn: AgentConn,
    pub info: AgentInfo,
    /// The lab the test runs in (None: loopback or a remote agent).
    pub lab: Option<crate::lab::state::LabState>,
    _local: Option<LocalAgent>,
}

pub fn open_target(c: &ConnectArgs) -> Result<Target, Failure> {
    match &c.agent {
        Some(a) => {
            if c.tls_cert.is_some() {
                return Err(usage(
                    "--tls-cert/--tls-key set the local agent's identity; give them to `linerate serve` on the agent's host".into(),
                ));
            }
            let token = token(&c.token_file)?;
            let addr = controller::resolve(a).map_err(usage)?;
            let conn = controller::connect(addr, &token)?;
            Ok(Target {
                conn,
                info: AgentInfo {
                    address: addr.to_string(),
                    local: false,
                    pid: None,
                },
                lab: None,
                _local: None,
            })
        }
        None => {
            let mut extra = Vec::new();
            if let (Some(cert), Some(key)) = (&c.tls_cert, &c.tls_key) {
                crate::engine::tls::read_identity_files(cert, key).map_err(usage)?;
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
                conn,
                info,
                lab,
                _local: Some(local),
            })
        }
    }
}

/// Checks lab `name` and moves this thread (and the threads and children it
/// starts later) into its client namespace.
fn enter_lab(name: &str, ipv6: bool) -> Result<crate::lab::state::LabState, Failure> {
    use crate::lab::{netns, state};
    if ipv6 {
        return Err(usage(
            "a lab has IPv4 addresses only (198.18.0.0/15): drop -6".into(),
        ));
    }
    let st = state::load(name)?.ok_or_else(|| {
        Failure::from(format!(
            "no lab named {name} is up; start one: linerate lab up {name} --rtt 50ms --rate 1gbit"
        ))
    })?;
    if st.is_stale() {
        return Err(Failure::from(format!(
            "lab {name} is stale (its emulator is gone, so no traffic passes): linerate lab down {name}, then up again"
        )));
    }
    netns::enter(&st.client_ns)?;
    Ok(st)
}

pub fn write_json(path: &PathBuf, value: &impl serde::Serialize) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
    std::fs::write(path, text + "\n")
        .map_err(|e| Failure::from(format!("cannot write {}: {e}", path.display())))
}

/// exec and scp: a real program in the lab, no agent flows.
fn run_exec(args: &RunArgs, spec: &TestSpec) -> Result<(), Failure> {
    let Some(name) = &args.connect.lab else {
        return Err(usage(format!(
            "{} runs in a lab: linerate lab up NAME --rtt 50ms --rate 1gbit, then --lab NAME",
            spec.workload.name()
        )));
    };
    let st = enter_lab(name, args.connect.ipv6)?;
    let command: Vec<String> = std::env::args().collect();
    let (result, rec) =
        crate::lab::record::around(&st, || crate::workload::exec::run(spec, &st, command))?;
    let mut result = result?;
    result.lab = Some(rec);
    if let Some(path) = &args.json {
        write_json(path, &result)?;
    }
    print!("{}", human::render(&result, true));
    let _ = std::io::stdout().flush();
    match result.iterations.first().and_then(|i| i.error.clone()) {
        Some(e) => Err(Failure::from(e)),
        None => Ok(()),
    }
}

fn run(args: RunArgs) -> Result<(), Failure> {
    let spec = args.spec()?;
    if matches!(spec.workload, Workload::Exec | Workload::Scp) {
        return run_exec(&args, &spec);
    }
    let conf = args.confidence();
    let mut target = open_target(&args.connect)?;
    let show_tx = spec.workload != Workload::Stream || spec.bytes.is_some();
    let mut progress = Progress::new(
        spec.workload.name(),
        spec.duration_s,
        args.quiet || args.json_stream,
        args.json_stream,
        show_tx,
    );
    let command: Vec<String> = std::env::args().collect();
    let test = || {
        crate::run::run_test(
            &mut target.conn,
            &spec,
            conf,
            target.info.clone(),
            command,
            &mut progress,
            &mut |_| {},
        )
    };
    let (result, lab) = match target.lab.clone() {
        Some(st) => {
            let (r, rec) = crate::lab::record::around(&st, test)?;
            (r, Some(rec))
        }
        None => (test(), None),
    };
    progress.finish();
    let mut result: TestResult = result?;
    result.lab = lab;
    if result.spec.tls.is_some() && !args.no_baseline && result.summary.status == "ok" {
        let mut p = Progress::new(
            "clear baseline",
            spec.duration_s,
            args.quiet || args.json_stream,
            false,
            show_tx,
        );
        match crate::run::clear_baseline(&mut target.conn, &spec, target.info.clone(), &mut p) {
            Ok(b) => result.baseline = Some(b),
            Err(e) => eprintln!("linerate: note: the clear baseline did not run: {e}"),
        }
        p.finish();
    }
    target.conn.bye();
    if let Some(path) = &args.json {
        write_json(path, &result)?;
    }
    let text = human::render(&result, true);
    if args.json_stream {
        let line = serde_json::json!({"type": "summary", "summary": result.summary});
        println!("{line}");
        eprint!("{text}");
    } else {
        print!("{text}");
    }
    let _ = std::io::stdout().flush();
    if let Some(why) = result.nothing_measured() {
        return Err(Failure::from(why));
    }
    if result.summary.status != "ok" {
        let why = result
            .iterations
            .iter()
            .find_map(|i| i.error.clone())
            .unwrap_or_else(|| "test ended early".into());
        return Err(Failure {
            code: EXIT_PARTIAL,
            message: why,
        });
    }
    Ok(())
}

fn serve(args: ServeArgs) -> Result<(), Failure> {
    let token = token(&args.token_file)?;
    if let Some(ns) = &args.netns {
        crate::lab::netns::enter(ns).map_err(Failure::from)?;
    }
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        crate::engine::tls::load_identity_files(cert, key).map_err(usage)?;
    }
    if args.exit_with_parent {
        // SAFETY: asks the kernel for SIGTERM when the parent exits.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
    }
    let cfg = server::ServeConfig {
        listen: args.listen,
        token,
        max_tests: args.max_tests.max(1),
        max_flows: args.max_flows,
        max_duration_s: args.max_duration.as_secs_f64(),
        once: args.once,
        quiet: args.quiet,
    };
    server::serve(cfg).map_err(Failure::from)
}

/// Thousands of flows need thousands of descriptors: take the hard limit.
fn raise_fd_limit() {
    // SAFETY: reads and writes a plain rlimit struct.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

/// Entry point for main: returns the process exit code.
pub fn main() -> i32 {
    // A closed stdout (`| head`) must not turn into a panic.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    raise_fd_limit();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    let outcome = match cli.command {
        Some(Command::Run(a)) => run(a),
        Some(Command::Serve(a)) => serve(a),
        Some(Command::Quick(a)) => crate::study::quick::run(a),
        Some(Command::Study(a)) => crate::study::commands::study(a),
        Some(Command::Report(a)) => crate::study::commands::report(a),
        Some(Command::Compare(a)) => crate::study::commands::compare(a),
        Some(Command::Crypto(a)) => crypto(a),
        Some(Command::Lab(a)) => crate::lab::cli::lab(a),
        None => crate::study::quick::run(QuickArgs {
            out: PathBuf::from("results"),
            ..Default::default()
        }),
    };

    match outcome {
        Ok(()) => 0,
        Err(f) => {
            let hint = if f.code == EXIT_USAGE {
                " (see linerate --help)"
            } else {
                ""
            };
            eprintln!("linerate: {}{hint}", f.message);
            f.code
        }
    }
}
