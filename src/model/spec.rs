//! The test specification: what one test runs. The controller builds it from
//! the command line and sends it to the agent unchanged, so both ends agree on
//! every knob, and it is stored verbatim in the result.

use serde::{Deserialize, Serialize};

use super::error::Invalid;

mod workload;
pub use workload::Workload;

/// What a test's results carry beyond bytes and CPU. The workload decides
/// (its plug-in's `figures`); the fold, a floor below the workloads, reads
/// it instead of asking which workload ran.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Figures {
    /// Transaction latency worth a summary (not a continuous stream's).
    pub latency: bool,
    /// Connections per second (and TLS handshakes per second with TLS).
    pub connections: bool,
    /// Datagram counts: packets, loss, reordering, jitter.
    pub udp: bool,
    /// A key-value service's operations.
    pub kv: bool,
    /// One-way delays of each direction: the client needs the server's
    /// clock offset (the controller probes it before each iteration).
    pub one_way: bool,
    /// Bytes are counted where they reached the receiving TCP (the
    /// senders' acknowledged and selectively acknowledged bytes,
    /// `Counters::bytes_delivered`), not where the receiving application
    /// read them. Reads lag arrivals by what waits behind a lost segment:
    /// after a queue overflow the receiver holds up to a round trip (and a
    /// queue) of data out of order, and hands it over at once when the
    /// retransmission fills the hole, so a window that opens just before
    /// that counts bytes that crossed the link before it (4 flows through
    /// a 1 Gbit/s lab read 955 Mbit/s over 5 s, above the link's 941.5).
    pub delivered: bool,
    /// Only the client reports (the server is another tool's QUIC perf
    /// server): what it received and what it sent are the bytes moved.
    /// Its sends count where QUIC took them, not where the server read
    /// them (at most its send window more), as quinn's own perf client
    /// counts an upload.
    pub client_only: bool,
}

/// Which way payload flows in a `stream` test, seen from the client.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Client sends, agent receives ("stream put").
    Tx,
    /// Agent sends, client receives ("stream get").
    Rx,
    /// Both send and receive on every flow.
    Bidir,
}

/// Whether `--bytes` bounds each flow once or each transaction of a loop.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Per {
    Flow,
    Transaction,
}

/// How a `crr` connection ends.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum CloseMode {
    /// The agent closes after its response (FIN first), the client closes on
    /// EOF: TIME_WAIT lands on the agent's side, keyed by the client's port,
    /// which the agent's kernel reuses for a new SYN with newer timestamps,
    /// so the client never runs out of ephemeral ports.
    Graceful,
    /// The client closes with SO_LINGER 0 (RST): no TIME_WAIT anywhere, as
    /// neper does; cheaper, but not what a real application does.
    Reset,
}

/// What carries a workload's flows: TCP (with `--tls`, TLS over TCP), or
/// QUIC over UDP, which runs the workload's QUIC twin (`quic-stream` for
/// `stream`). Only an option: the spec names the workload that ran.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    #[default]
    Tcp,
    Quic,
}

/// How a side's workers wait for their sockets.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum IoMode {
    /// Event loops (epoll): a worker sleeps until any of its flows is
    /// ready, so one thread serves thousands of flows.
    #[default]
    Epoll,
    /// A thread per flow on blocking sockets (netperf, iperf3 3.16+): a
    /// request/response exchange costs a send and a receive, no epoll_wait
    /// and no read that finds nothing. Stream (tx or rx), closed-loop rr,
    /// and crr (the agent serves each listener's connections in turn).
    Threads,
}

impl IoMode {
    pub fn name(self) -> &'static str {
        match self {
            IoMode::Epoll => "epoll",
            IoMode::Threads => "threads",
        }
    }
}

/// How `rcvbuf` sets the receiver's TCP window.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum WindowMode {
    /// SO_RCVBUF only, what an application gets: Linux (>= 6.6) advertises
    /// about 1.5x the value; below ~64 KB no window scaling (65,535 max).
    #[default]
    Buffer,
    /// SO_RCVBUF before listen/connect and TCP_WINDOW_CLAMP on the connected
    /// socket: the window is the value (0.94-0.97 x W/RTT measured).
    Exact,
}

/// Which TLS library encrypts the flows.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum TlsBackend {
    /// rustls with the aws-lc-rs provider (AES-GCM with VAES here).
    #[default]
    Rustls,
    /// The system OpenSSL (cargo feature `openssl`), for TLS 1.2 CBC suites.
    Openssl,
}

/// The agent's certificate, generated when a test starts.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum CertKind {
    #[default]
    EcdsaP256,
    Rsa2048,
    Rsa4096,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::Tx => "tx",
            Direction::Rx => "rx",
            Direction::Bidir => "bidir",
        }
    }
}

impl TlsBackend {
    pub fn name(self) -> &'static str {
        match self {
            TlsBackend::Rustls => "rustls",
            TlsBackend::Openssl => "openssl",
        }
    }
}

impl CertKind {
    pub fn name(self) -> &'static str {
        match self {
            CertKind::EcdsaP256 => "ecdsa-p256",
            CertKind::Rsa2048 => "rsa2048",
            CertKind::Rsa4096 => "rsa4096",
        }
    }
}

/// The name in the agent's generated certificate (and what clients verify).
pub const TLS_SERVER_NAME: &str = "linerate-agent";

/// TLS on a test's data connections (both ends agree on all of it).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct TlsSpec {
    pub backend: TlsBackend,
    /// A suite: short (`aes256-gcm`) or full (`TLS13_AES_256_GCM_SHA384`,
    /// OpenSSL's `AES256-SHA256`); None lets the library choose.
    pub cipher: Option<String>,
    /// "1.2" or "1.3"; None: 1.3 unless the cipher is a 1.2 suite.
    pub version: Option<String>,
    /// Key exchange group, pinned so results compare: x25519 by default.
    pub kx: String,
    pub cert: CertKind,
    /// Offer session resumption (tickets / session cache).
    pub resume: bool,
    /// OpenSSL TLS 1.2 CBC suites: encrypt-then-MAC (None: library default).
    pub etm: Option<bool>,
    /// The name the client verifies in the agent's certificate.
    pub server_name: String,
    /// Trust this PEM certificate instead of the one the agent generated
    /// (controller side; a wrong one must fail verification).
    pub ca_file: Option<String>,
}

impl Default for TlsSpec {
    fn default() -> Self {
        TlsSpec {
            backend: TlsBackend::Rustls,
            cipher: None,
            version: None,
            kx: "x25519".into(),
            cert: CertKind::EcdsaP256,
            resume: false,
            etm: None,
            server_name: TLS_SERVER_NAME.into(),
            ca_file: None,
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct TestSpec {
    pub workload: Workload,
    pub direction: Direction,
    /// Write size for continuous streams, bytes.
    pub message: usize,
    /// Request and response sizes for rr/crr (and finite stream transfers).
    pub request: u64,
    pub response: u64,
    /// Finite stream transfer size, bytes (None: continuous for the duration).
    pub bytes: Option<u64>,
    pub per: Per,
    /// Size of the small message in the other direction of a finite stream.
    pub reply: u64,
    /// Requests in flight per rr flow (netperf -b + 1).
    pub outstanding: u32,
    /// Open-loop rate, transactions/s over all flows (None: closed loop).
    pub rate: Option<f64>,
    pub flows: u32,
    /// Worker threads (epoll loops) of the client and of the agent.
    #[serde(alias = "threads")]
    pub workers: u32,
    #[serde(alias = "agent_threads")]
    pub agent_workers: u32,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub interval_s: f64,
    pub sndbuf: Option<usize>,
    pub rcvbuf: Option<usize>,
    pub nodelay: bool,
    pub cc: Option<String>,
    pub mss: Option<u32>,
    pub cpus: Option<Vec<usize>>,
    pub agent_cpus: Option<Vec<usize>>,
    pub zerocopy: bool,
    /// Workers poll their sockets without sleeping in epoll (and ask for
    /// SO_BUSY_POLL where allowed): latency without wake-ups, for a core each.
    #[serde(default)]
    pub spin: bool,
    pub ipv6: bool,
    pub close: CloseMode,
    /// TLS on every data connection (None: clear text).
    #[serde(default)]
    pub tls: Option<TlsSpec>,
    /// How `rcvbuf` becomes the receive window.
    #[serde(default)]
    pub window: WindowMode,
    /// The lab round trip this test asks for (studies sweep it; the runner
    /// reshapes its lab). None: whatever the network is.
    #[serde(default)]
    pub rtt_s: Option<f64>,
    /// Many hosts: how many of the given client hosts this test uses (the
    /// first N; studies sweep it). None: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clients: Option<u32>,
    /// Many hosts: the hosts this test's clients and servers are, as
    /// `--clients`/`--servers` name them (studies sweep them). None: the
    /// command line's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_hosts: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_hosts: Option<String>,
    /// How the workers wait for their sockets (results before it: epoll).
    #[serde(default)]
    pub io: IoMode,
    /// TCP: bytes asked of each receive call on both ends (netperf -M).
    /// 0 (results before it was an option): the engine's choice then, the
    /// largest message clamped to 256 KiB..1 MiB.
    #[serde(default)]
    pub read_size: usize,
    /// stream: how long a lone receiving thread polls an empty socket
    /// before it sleeps, µs (`--rx-poll`). None: auto (see
    /// `workload::stream::rx_poll`); Some(0): never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_poll_us: Option<u32>,
    /// UDP: datagrams per sendmmsg/recvmmsg call (0: the default, 32; with
    /// GSO as many as one send takes).
    #[serde(default)]
    pub batch: u32,
    /// UDP: one GSO send (UDP_SEGMENT) per batch instead of sendmmsg.
    #[serde(default)]
    pub gso: bool,
    /// udp-stream receivers: let the kernel coalesce datagrams (UDP_GRO)
    /// and split them in linerate.
    #[serde(default)]
    pub gro: bool,
    /// udp-stream: paced at this payload bit rate over all flows (`rate`
    /// is then None); None: packets/s in `rate`, or unpaced.
    #[serde(default)]
    pub rate_bps: Option<f64>,
    /// udp-rr: a request without a response after this long is lost.
    #[serde(default = "default_timeout")]
    pub timeout_s: f64,
    /// exec/scp: the program to run.
    #[serde(default)]
    pub exec: Option<super::exec::ExecSpec>,
    /// Studies with a lab: this point's lab settings over the study's
    /// `[lab]` (the runner reshapes the lab to them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab: Option<super::lab::LabPoint>,
    /// Studies with a lab: sysctls set in the lab's client and server
    /// namespaces for this point (restored for points that do not set them).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub sysctl: std::collections::BTreeMap<String, String>,
    /// TLS with the CPU's crypto extensions (false: masked from both ends'
    /// crypto libraries, `--crypto-hw off`).
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub crypto_hw: bool,
    /// NIC settings (`nic.gro`, `nic.rx-ring` ...) on the data interfaces
    /// of both ends: set by the lab in its hosts' namespaces, or by an
    /// agent started with `serve --allow-nic` (model::nic).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub nic: std::collections::BTreeMap<String, String>,
    /// The server's data addresses (ports) this test uses: the first N of
    /// each server's (studies sweep it). None: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<u32>,
    /// Studies with a lab: the firewall loaded in the server's namespace
    /// for this point (None: the namespace's own, untouched).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firewall: Option<super::firewall::FirewallSpec>,
    /// The kinds' own sections (rpm's parameters under `rpm` ...), each
    /// read by its kind (`model::own`). Flattened: the section's key is a
    /// key of the spec.
    #[serde(flatten, default)]
    pub own: super::own::Own,
    /// `--search`: this test is a capacity search (model::search): the
    /// controller runs it at offered rates and keeps the highest that met
    /// the target. None: one test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<super::search::SearchSpec>,
    /// `--duration auto`: the window ends once the figure is stationary
    /// and known well enough (model::auto); `duration_s` is its bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto: Option<super::auto::AutoSpec>,
    /// Open loop: the rate rises linearly from a tenth of `rate` to `rate`
    /// over this many seconds from the flows' start, then holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_ramp_s: Option<f64>,
    /// Open loop: how requests are spaced (evenly, or as a Poisson process).
    #[serde(default, skip_serializing_if = "Arrivals::is_uniform")]
    pub arrivals: Arrivals,
    /// Open loop: how the sender waits for each request's due time (results
    /// from before it slept: absent means `sleep`).
    #[serde(default, skip_serializing_if = "Pacing::is_sleep")]
    pub pacing: Pacing,
}

/// How an open loop's sender waits for a request's due time (`--pacing`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Pacing {
    /// Sleeps on a timer to the due time: the host's wake-up lateness
    /// (25 µs at the median on an AMD VM here, hundreds on an Intel one)
    /// delays the send and is measured as latency from the due time.
    #[default]
    Sleep,
    /// Sleeps on a timer until shortly before the due time, by the lead
    /// its own recent wake-ups needed (up to 1 ms), then busy-polls to it:
    /// sends leave on time at the cost of the spin (`pacing_spin_ns`),
    /// as Lancet's latency agent spins.
    Hybrid,
    /// Hybrid when the client's workers have a CPU to spare on their host
    /// (more CPUs than the client's workers, and the agent's too where the
    /// agent runs on the same host), else sleep: a spinning sender that
    /// shares a CPU with the server it measures takes the server's time
    /// (on 2 CPUs with a local agent, three searches at `p99<=300us` gave
    /// 8.7k to 13.1k/s spinning, 12.1k and 12.2k sleeping). Resolved when
    /// the test is built; a spec holds sleep or hybrid.
    Auto,
}

impl Pacing {
    pub fn is_sleep(&self) -> bool {
        *self == Pacing::Sleep
    }
}

fn yes() -> bool {
    true
}

fn is_yes(b: &bool) -> bool {
    *b
}

/// How an open loop spaces its requests (`--arrivals`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Arrivals {
    /// Evenly, 1/rate apart (wrk2, sockperf): the least queueing a rate
    /// can cause.
    #[default]
    Uniform,
    /// A Poisson process: exponential gaps of mean 1/rate (mutilate's
    /// default, Lancet), as many independent users make; bursts queue, so
    /// tail latency at a given rate is higher than with even spacing.
    Poisson,
}

impl Arrivals {
    pub fn is_uniform(&self) -> bool {
        *self == Arrivals::Uniform
    }
}

impl Default for TestSpec {
    fn default() -> Self {
        TestSpec {
            workload: Workload::DEFAULT,
            direction: Direction::Tx,
            message: 128 * 1024,
            request: 1,
            response: 1,
            bytes: None,
            per: Per::Flow,
            reply: 20,
            outstanding: 1,
            rate: None,
            flows: 1,
            workers: 1,
            agent_workers: 1,
            duration_s: 10.0,
            warmup_s: 2.0,
            interval_s: 1.0,
            sndbuf: None,
            rcvbuf: None,
            nodelay: false,
            cc: None,
            mss: None,
            cpus: None,
            agent_cpus: None,
            zerocopy: false,
            spin: false,
            ipv6: false,
            close: CloseMode::Graceful,
            tls: None,
            window: WindowMode::Buffer,
            rtt_s: None,
            clients: None,
            client_hosts: None,
            server_hosts: None,
            io: IoMode::Epoll,
            read_size: 0,
            rx_poll_us: None,
            batch: 0,
            gso: false,
            gro: false,
            rate_bps: None,
            timeout_s: default_timeout(),
            exec: None,
            lab: None,
            sysctl: Default::default(),
            nic: Default::default(),
            crypto_hw: true,
            ports: None,
            firewall: None,
            own: Default::default(),
            search: None,
            auto: None,
            rate_ramp_s: None,
            arrivals: Arrivals::Uniform,
            pacing: Pacing::Sleep,
        }
    }
}

fn default_timeout() -> f64 {
    1.0
}

/// Bytes of linerate's header in every UDP datagram (magic, kind, cookie,
/// flow, sequence number, send time): the smallest message.
pub const UDP_HEADER: usize = 32;
/// The largest UDP payload over IPv4.
pub const UDP_MAX: usize = 65_507;
/// `--io threads`: at most this many flows (a thread each per end).
pub const MAX_THREAD_FLOWS: u32 = 256;

/// Up to this many stream flows per CPU, each flow gets a worker.
const STREAM_FLOWS_PER_CPU: u32 = 4;

fn cpus() -> u32 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1)
}

/// Datagrams per sendmmsg/recvmmsg call when `batch` is 0.
pub const UDP_BATCH: u32 = 32;
/// The most segments one UDP GSO send may carry (the kernel's
/// UDP_MAX_SEGMENTS since Linux 6.9; 64 before, where linerate falls back).
pub const UDP_MAX_SEGMENTS: u32 = 128;
/// The largest `read_size` a test may ask for.
pub const MAX_READ_SIZE: usize = 16 << 20;
/// Bounds of the default read size.
const READ_SIZE_MIN: usize = 16 << 10;
/// The largest read size chosen for a lone flow (`default_read_size`).
const READ_SIZE_LONE_MAX: usize = 64 << 10;
/// The largest read size chosen for several flows, and the largest of
/// results from before `read_size` was recorded (`effective_read_size`).
const READ_SIZE_MAX: usize = 1 << 20;

// Its defaults that depend on the host and the workload, and its checks,
// are in rules.rs.
mod rules;

/// Largest rr/crr request or response: each flow buffers one whole.
pub const MAX_MESSAGE_BYTES: u64 = 256 << 20;
/// Longest duration, warm-up or interval anyone may ask for (a week).
pub const MAX_SECONDS: f64 = 7.0 * 86_400.0;
/// Most flows in one test (an agent's own --max-flows is usually lower).
pub const MAX_FLOWS: u32 = 1_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MainMetric {
    Throughput,
    TransactionRate,
    /// Datagrams received per second (udp-stream).
    PacketRate,
}

#[cfg(test)]
mod tests;
