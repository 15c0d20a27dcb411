//! The test specification: what one test runs. The controller builds it from
//! the command line and sends it to the agent unchanged, so both ends agree on
//! every knob, and it is stored verbatim in the result.

use serde::{Deserialize, Serialize};

use super::error::Invalid;

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Bulk transfer (netperf TCP_STREAM / TCP_MAERTS).
    Stream,
    /// Request/response on persistent connections (TCP_RR).
    Rr,
    /// Connect, request, response, close per transaction (TCP_CRR).
    Crr,
    /// Connect, full (or resumed) TLS handshake, one small exchange, close.
    #[serde(rename = "tls-handshake")]
    TlsHandshake,
    /// A real command in the client namespace, timed (no agent flows).
    Exec,
    /// Real OpenSSH scp of `bytes` to linerate's own sshd in the server namespace.
    Scp,
    /// UDP datagrams of `message` bytes, as fast as possible or paced
    /// (`rate`): packets/s, loss, reordering, jitter (iperf3 -u, neper udp_stream).
    #[serde(rename = "udp-stream")]
    #[value(name = "udp-stream")]
    UdpStream,
    /// UDP request/response: transactions/s and latency, lost requests
    /// counted after `timeout_s` (neper udp_rr, netperf UDP_RR).
    #[serde(rename = "udp-rr")]
    #[value(name = "udp-rr")]
    UdpRr,
    /// A get/set mix against a real memcached the agent starts (`--service`)
    /// or one that runs already (`--target`): operations/s, hit ratio,
    /// latency per operation type (memtier_benchmark, memaslap).
    Memcache,
    /// Connect (with TLS, handshake), close, again: connections/s and
    /// connect latency (ethr's connections/s).
    Conn,
    /// Several workloads (groups) on one window: `linerate run mix 'G1'
    /// 'G2'`. Only a mixed result's own spec says mix; each group's spec
    /// names its workload.
    Mix,
    /// flent's Realtime Response Under Load: two latency probes (rr and
    /// udp-rr, open loop at a modest rate) alone, then beside N TCP
    /// streams each way, on one timeline.
    Rrul,
    /// One core's cost of a cipher or a signature (`cipher`), in
    /// linerate's own process: no network, no agent.
    Cipher,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Stream => "stream",
            Workload::Rr => "rr",
            Workload::Crr => "crr",
            Workload::TlsHandshake => "tls-handshake",
            Workload::Exec => "exec",
            Workload::Scp => "scp",
            Workload::UdpStream => "udp-stream",
            Workload::UdpRr => "udp-rr",
            Workload::Memcache => "memcache",
            Workload::Conn => "conn",
            Workload::Mix => "mix",
            Workload::Rrul => "rrul",
            Workload::Cipher => "cipher",
        }
    }

    /// Datagrams instead of a byte stream.
    pub fn is_udp(self) -> bool {
        matches!(self, Workload::UdpStream | Workload::UdpRr)
    }

    /// A program run in the lab (exec, scp), not flows on the engine.
    pub fn is_program(self) -> bool {
        matches!(self, Workload::Exec | Workload::Scp)
    }

    /// One connection per transaction (crr, tls-handshake, conn): the
    /// agent listens on one SO_REUSEPORT socket per worker.
    pub fn per_connection(self) -> bool {
        matches!(
            self,
            Workload::Crr | Workload::TlsHandshake | Workload::Conn
        )
    }
}

/// How a spec runs: flows on agents, a program in a lab, or groups of
/// flows on one window. The roof dispatches on this, never on a workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunsAs {
    Flows,
    Program,
    Mix,
    /// A mix whose groups are built in (`controller::rrul`).
    Rrul,
    /// Measured in the controller's own process, no agent (`cipher`).
    Local,
}

impl Workload {
    pub fn runs_as(self) -> RunsAs {
        match self {
            Workload::Exec | Workload::Scp => RunsAs::Program,
            Workload::Mix => RunsAs::Mix,
            Workload::Rrul => RunsAs::Rrul,
            Workload::Cipher => RunsAs::Local,
            _ => RunsAs::Flows,
        }
    }
}

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
    /// How the workers wait for their sockets (results before it: epoll).
    #[serde(default)]
    pub io: IoMode,
    /// TCP: bytes asked of each receive call on both ends (netperf -M).
    /// 0 (results before it was an option): the engine's choice then, the
    /// largest message clamped to 256 KiB..1 MiB.
    #[serde(default)]
    pub read_size: usize,
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
    /// memcache: the server and the key-value mix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv: Option<KvSpec>,
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
    /// rrul: its idle phase, probe rate and streams (None otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rrul: Option<super::rrul::RrulSpec>,
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
    /// cipher: the algorithm measured (the record size is `message`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cipher: Option<super::cipher::CipherSpec>,
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

/// Which memcached commands carry the load.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum KvDialect {
    /// get / set (the classic text protocol).
    #[default]
    Text,
    /// mg / ms (meta commands, memcached >= 1.6).
    Meta,
}

/// A memcache test: where memcached is, and what the clients ask of it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct KvSpec {
    /// The memcached command line the agent starts on its host, e.g.
    /// "memcached -t 4 -m 1024" (linerate adds the address and port).
    /// None: `target`.
    pub service: Option<String>,
    /// An existing memcached, host:port (no server process to measure).
    pub target: Option<String>,
    /// Keys in the key space, each set before the window.
    pub keys: u64,
    /// Bytes per key.
    pub key_size: usize,
    /// Key popularity: zipf with this exponent (None: uniform).
    pub zipf: Option<f64>,
    /// Value sizes: "1K", "1K-2K", or a weighted mix "4-100,1K-2K,5K-20K".
    pub values: String,
    /// Gets and sets in this ratio (9:1 = 90% gets).
    pub gets: u32,
    pub sets: u32,
    /// Keys per get command (multi-get).
    pub multiget: u32,
    pub dialect: KvDialect,
}

impl Default for KvSpec {
    fn default() -> Self {
        KvSpec {
            service: Some("memcached".into()),
            target: None,
            keys: 10_000,
            key_size: 16,
            zipf: None,
            values: "1K".into(),
            gets: 9,
            sets: 1,
            multiget: 1,
            dialect: KvDialect::Text,
        }
    }
}

impl KvSpec {
    /// Checks what a flag alone cannot; the value sizes, key space and
    /// service command are the workload's to parse (`workload::memcache`).
    pub fn validate(&self) -> Result<(), Invalid> {
        if self.gets == 0 && self.sets == 0 {
            return Err("--get-set 0:0 asks for no operation: use e.g. 9:1".into());
        }
        if !(1..=100).contains(&self.multiget) {
            return Err("--multiget is 1 to 100 keys per get".into());
        }
        match (&self.service, &self.target) {
            (Some(_), Some(_)) => Err("--service and --target exclude each other".into()),
            (None, None) => Err("memcache needs --service memcached or --target HOST:PORT".into()),
            _ => Ok(()),
        }
    }
}

impl Default for TestSpec {
    fn default() -> Self {
        TestSpec {
            workload: Workload::Stream,
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
            io: IoMode::Epoll,
            read_size: 0,
            batch: 0,
            gso: false,
            gro: false,
            rate_bps: None,
            timeout_s: default_timeout(),
            exec: None,
            kv: None,
            lab: None,
            sysctl: Default::default(),
            nic: Default::default(),
            crypto_hw: true,
            rrul: None,
            ports: None,
            firewall: None,
            cipher: None,
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
const READ_SIZE_MAX: usize = 1 << 20;

impl TestSpec {
    /// Worker threads when none are asked for: one per flow up to the CPUs.
    pub fn default_workers(flows: u32) -> u32 {
        flows.min(cpus()).max(1)
    }

    /// Worker threads of this workload when none are asked for. A bulk
    /// stream of a few flows gets a worker per flow (iperf3 3.16+ runs a
    /// thread per stream): two bulk flows in one worker take turns, each
    /// waiting while the other is served, and on a 2-CPU loopback 4 flows
    /// moved 37.9 Gbit/s on 2+2 workers against 48.7 on 4+4, 8 flows 34-40
    /// against 43-49 (bench/RESULTS.md). Beyond 4 flows per CPU the threads
    /// only contend (16 flows: 41 on 2+2, 38 on 16+16), and the other
    /// workloads wait on their peers, so one worker per CPU multiplexes.
    pub fn default_workers_for(workload: Workload, flows: u32) -> u32 {
        let ncpu = cpus();
        if workload == Workload::Stream && flows <= STREAM_FLOWS_PER_CPU * ncpu {
            flows.max(1)
        } else {
            Self::default_workers(flows)
        }
    }

    /// The window when none is asked for; a finite transfer gets a time limit.
    pub fn default_duration_s(finite: bool) -> f64 {
        if finite {
            300.0
        } else {
            10.0
        }
    }

    /// Whether the agent's (or the client's) end receives payload: in a
    /// stream only the direction's receiver does; rr and crr both do.
    pub fn receives(&self, agent: bool) -> bool {
        match (self.workload, self.direction) {
            (Workload::Stream, Direction::Tx) => agent,
            (Workload::Stream, Direction::Rx) => !agent,
            _ => true,
        }
    }

    fn validate_exec(&self) -> Result<(), Invalid> {
        let e = self.exec.as_ref();
        if self.workload == Workload::Exec && e.is_none_or(|e| e.command.is_empty()) {
            return Err(
                "exec needs a command: linerate run exec [--lab NAME] -- COMMAND ARGS".into(),
            );
        }
        if self.workload == Workload::Scp && self.bytes.is_none() {
            return Err("scp needs --bytes (the size of the file copied)".into());
        }
        if self.flows != 1 {
            return Err("exec and scp run one command (no --flows)".into());
        }
        if let Some(e) = e {
            let uses = |p: &str| e.command.iter().any(|a| a.contains(p));
            if uses("{ssh_config}") && !e.sshd {
                return Err("{ssh_config} names linerate's own sshd: add --sshd".into());
            }
            if uses("{file}") && self.bytes.is_none() {
                return Err("{file} is a file of --bytes: add --bytes SIZE".into());
            }
        }
        if self.window == WindowMode::Exact {
            return Err(
                "--window exact needs linerate's own sockets; an unmodified program (exec, scp) gets --rcvbuf through the server's tcp_rmem"
                    .into(),
            );
        }
        if self.tls.is_some() {
            return Err("--tls applies to linerate's own flows, not to exec or scp".into());
        }
        if self.read_size != 0 {
            return Err("--read-size applies to linerate's own flows, not to exec or scp".into());
        }
        Ok(())
    }

    /// `--io threads`: a blocking thread per flow on each end, for the
    /// flows that wait on one socket in one direction at a time.
    fn validate_threads(&self) -> Result<(), Invalid> {
        let what = match self.workload {
            Workload::Stream if self.direction == Direction::Bidir => {
                Some("a bidir stream (one thread cannot block on its reads and its writes at once)")
            }
            Workload::Stream | Workload::Rr | Workload::Crr => None,
            w => Some(w.name()),
        };
        if let Some(w) = what {
            return Err(format!(
                "--io threads runs stream (tx or rx), closed-loop rr and crr, not {w}: use --io epoll"
            ).into());
        }
        if self.rate.is_some() {
            return Err(
                "--io threads runs closed loops; an open loop (--rate) needs the event loop's timers: use --io epoll"
                    .into(),
            );
        }
        if self.spin {
            return Err("--spin polls in the event loop: use --io epoll".into());
        }
        if self.workers != self.flows || self.agent_workers != self.flows {
            return Err(format!(
                "--io threads runs one thread per flow on each end ({} flows): leave --workers and --agent-workers out",
                self.flows
            ).into());
        }
        if self.flows > MAX_THREAD_FLOWS {
            return Err(format!(
                "--io threads is for a few flows (at most {MAX_THREAD_FLOWS} threads per end): use --io epoll"
            ).into());
        }
        Ok(())
    }

    /// The I/O mode when none is asked for: a thread per flow where each
    /// worker would hold one flow anyway and the flow is a closed-loop rr
    /// or a crr (rr 1/1: 46.5-47.8k transactions/s against 41.6-42.2k with
    /// epoll, netperf 48.4k; crr 64/8192 1.04-1.10x epoll; bench/RESULTS.md);
    /// epoll elsewhere, where it was as fast or faster (a 128K stream: 32.7
    /// Gbit/s against 28.6).
    pub fn default_io(&self) -> IoMode {
        let one_flow_per_worker = self.workers == self.flows && self.agent_workers == self.flows;
        if matches!(self.workload, Workload::Rr | Workload::Crr)
            && self.rate.is_none()
            && !self.spin
            && one_flow_per_worker
            && self.flows <= cpus()
        {
            IoMode::Threads
        } else {
            IoMode::Epoll
        }
    }

    /// Datagrams per sendmmsg/recvmmsg call; with GSO, per send: as many
    /// as the kernel takes in one datagram (iperf3 --gsro does the same).
    pub fn udp_batch(&self) -> u32 {
        match (self.batch, self.gso) {
            (0, true) => ((UDP_MAX / self.message.max(1)) as u32).clamp(1, UDP_MAX_SEGMENTS),
            (0, false) => UDP_BATCH,
            (b, _) => b,
        }
    }

    /// The largest message a flow of this test receives (and so sends).
    pub fn largest_message(&self) -> usize {
        let biggest = [
            self.message as u64,
            self.request,
            self.response,
            self.reply,
            self.bytes.unwrap_or(0),
        ]
        .into_iter()
        .max()
        .unwrap_or(1);
        biggest.clamp(1, usize::MAX as u64) as usize
    }

    /// The read size when none is asked for: the largest message, within
    /// 16 KiB..1 MiB, as iperf3 reads its block size. Measured on loopback
    /// under bbr (bench/RESULTS.md, 2026-11-25): a receiver that asks for
    /// more than the sender writes (the old fixed 256 KiB for 16 KiB and
    /// 128 KiB writes) ACKs in larger, rarer steps, and BBR, which sizes
    /// its window and pacing rate from the ACKs, sends 10-25% slower.
    pub fn default_read_size(&self) -> usize {
        self.largest_message().clamp(READ_SIZE_MIN, READ_SIZE_MAX)
    }

    /// The read size the engine uses (`read_size`, or for results before
    /// it was an option what the engine chose then).
    pub fn effective_read_size(&self) -> usize {
        match self.read_size {
            0 => self.largest_message().clamp(256 << 10, READ_SIZE_MAX),
            n => n,
        }
    }

    fn validate_udp(&self) -> Result<(), Invalid> {
        let size = |name: &str, v: u64| {
            if (v as usize) < UDP_HEADER || v as usize > UDP_MAX {
                Err(format!(
                    "{name} {v}: a UDP message is {UDP_HEADER} to {UDP_MAX} bytes (linerate's header takes {UDP_HEADER})"
                ))
            } else {
                Ok(())
            }
        };
        match self.workload {
            Workload::UdpStream => size("--message", self.message as u64)?,
            _ => {
                size("--request", self.request)?;
                size("--response", self.response)?;
            }
        }
        if self.batch > 1024 {
            return Err("--batch is 1 to 1024 datagrams".into());
        }
        if (self.gso || self.gro) && self.workload != Workload::UdpStream {
            return Err("--gso and --gro apply to udp-stream".into());
        }
        if self.gso && self.batch > UDP_MAX_SEGMENTS {
            return Err(format!(
                "--gso carries at most {UDP_MAX_SEGMENTS} datagrams per send (the kernel's UDP_MAX_SEGMENTS): lower --batch"
            ).into());
        }
        if self.read_size != 0 {
            return Err("--read-size applies to TCP workloads (UDP reads whole datagrams)".into());
        }
        if self.gso && self.message * self.udp_batch() as usize > UDP_MAX {
            return Err(format!(
                "--gso sends --batch x --message in one datagram of at most {UDP_MAX} bytes: lower --batch"
            ).into());
        }
        if self.rate.is_some() && self.rate_bps.is_some() {
            return Err("--rate is packets/s or a bit rate, not both".into());
        }
        if self.rate_bps.is_some() && self.workload != Workload::UdpStream {
            return Err("a bit rate applies to udp-stream (udp-rr takes transactions/s)".into());
        }
        if !(0.001..=60.0).contains(&self.timeout_s) {
            return Err("--timeout is 1ms to 60s".into());
        }
        if self.tls.is_some() {
            return Err("--tls applies to TCP workloads".into());
        }
        if self.bytes.is_some() || self.zerocopy || self.window == WindowMode::Exact {
            return Err("--bytes, --zerocopy and --window exact apply to TCP workloads".into());
        }
        Ok(())
    }

    /// A finite test ends when every flow is done, not after `duration_s`.
    pub fn is_finite(&self) -> bool {
        self.workload == Workload::Stream && self.bytes.is_some() && self.per == Per::Flow
    }

    /// `--search`, `--duration auto` and `--rate-ramp`: where they apply.
    fn validate_sizing(&self) -> Result<(), Invalid> {
        use super::search::SearchMetric;
        use Workload::*;
        if let Some(s) = &self.search {
            let fits = match s.target.metric {
                SearchMetric::LossPct => matches!(self.workload, UdpRr | UdpStream),
                _ => matches!(self.workload, Rr | UdpRr | Memcache),
            };
            if !fits {
                return Err(format!(
                    "--search {} does not apply to {}: a latency percentile is searched on rr, udp-rr and memcache, loss_pct on udp-rr and udp-stream (open loops)",
                    s.target,
                    self.workload.name()
                )
                .into());
            }
            if self.bytes.is_some() {
                return Err("--search runs open loops of transactions: drop --bytes".into());
            }
            if self.auto.is_some() {
                return Err("--search sizes each step itself: drop --duration auto".into());
            }
        }
        if self.auto.is_some() {
            let refused = match self.workload {
                Exec | Scp => Some("a program runs until it ends"),
                Mix | Rrul => Some("a mixed test's groups share one window"),
                Cipher => Some("it runs in linerate's own process"),
                _ if self.bytes.is_some() => Some("a finite transfer ends when it is done"),
                _ => None,
            };
            if let Some(why) = refused {
                return Err(format!(
                    "--duration auto does not apply to {}: {why}; give -d a time",
                    self.workload.name()
                )
                .into());
            }
        }
        if self.arrivals == Arrivals::Poisson
            && (!matches!(self.workload, Rr | UdpRr | Memcache) || self.rate.is_none())
            && self.search.is_none()
        {
            return Err(
                "--arrivals poisson spaces an open loop's requests: rr, udp-rr or memcache with --rate (or --search)"
                    .into(),
            );
        }
        if let Some(r) = self.rate_ramp_s {
            if !matches!(self.workload, Rr | UdpRr | Memcache) || self.rate.is_none() {
                return Err(
                    "--rate-ramp raises an open loop's rate: rr, udp-rr or memcache with --rate"
                        .into(),
                );
            }
            if !(r > 0.0 && r <= MAX_SECONDS) {
                return Err(format!("--rate-ramp must be between 0 and {MAX_SECONDS} s").into());
            }
        }
        Ok(())
    }

    /// Checks combinations that flags alone cannot rule out. Used by the
    /// controller before it starts and by the agent before it accepts.
    pub fn validate(&self) -> Result<(), Invalid> {
        if self.flows == 0 {
            return Err("--flows must be at least 1".into());
        }
        if self.workers == 0 || self.agent_workers == 0 {
            return Err("--workers must be at least 1".into());
        }
        if self.ports == Some(0) {
            return Err("--ports must be at least 1 (the server's first N data addresses)".into());
        }
        if self.io == IoMode::Threads {
            self.validate_threads()?;
        }
        self.validate_sizing()?;
        if self.workers > 256 || self.agent_workers > 256 {
            return Err("--workers is capped at 256".into());
        }
        if self.message == 0 || self.message > 64 * 1024 * 1024 {
            return Err("--message must be between 1 byte and 64 MiB".into());
        }
        if self.request == 0 || self.response == 0 {
            return Err("--request and --response must be at least 1 byte".into());
        }
        // Bounds on what a peer may ask an agent to allocate or wait for,
        // checked before anything is: a message is buffered whole.
        if self.request > MAX_MESSAGE_BYTES || self.response > MAX_MESSAGE_BYTES {
            return Err(format!(
                "--request and --response are capped at {} MiB",
                MAX_MESSAGE_BYTES >> 20
            )
            .into());
        }
        for (name, v) in [
            ("--duration", self.duration_s),
            ("--warmup", self.warmup_s),
            ("--interval", self.interval_s),
        ] {
            if !v.is_finite() || !(0.0..=MAX_SECONDS).contains(&v) {
                return Err(format!("{name} must be between 0 and {MAX_SECONDS} s").into());
            }
        }
        if self.flows > MAX_FLOWS {
            return Err(format!("--flows is capped at {MAX_FLOWS}").into());
        }
        if self.sysctl.len() > 64
            || self
                .sysctl
                .values()
                .any(|v| v.len() > 256 || v.chars().any(|c| c.is_control()))
        {
            return Err("sysctl values: at most 64, each under 256 characters, on one line".into());
        }
        if self.interval_s < 0.05 {
            return Err("--interval must be at least 50ms".into());
        }
        if !self.is_finite() && self.duration_s < self.interval_s.min(0.1) {
            return Err("--duration must be at least 0.1 s".into());
        }
        if self.read_size > MAX_READ_SIZE {
            return Err(format!("--read-size is capped at {} MiB", MAX_READ_SIZE >> 20).into());
        }
        if self.outstanding == 0 || self.outstanding > 1024 {
            return Err("--outstanding must be between 1 and 1024".into());
        }
        if self.workload.is_program() {
            return self.validate_exec();
        }
        if self.workload.is_udp() {
            self.validate_udp()?;
        } else if self.batch != 0 || self.gso || self.gro || self.rate_bps.is_some() {
            return Err(
                "--batch, --gso, --gro and a bit rate apply to udp-stream and udp-rr".into(),
            );
        }
        if self.exec.is_some() {
            return Err("a command applies to the exec workload".into());
        }
        match (&self.rrul, self.workload) {
            (Some(r), Workload::Rrul) => r.validate(self.warmup_s, self.interval_s)?,
            (None, Workload::Rrul) => return Err("rrul needs its phases and probes".into()),
            (Some(_), _) => {
                return Err("--idle, --probe-rate and --streams apply to rrul".into());
            }
            (None, _) => {}
        }
        match (&self.kv, self.workload) {
            (Some(kv), Workload::Memcache) => kv.validate()?,
            (None, Workload::Memcache) => return Err("memcache needs its key-value mix".into()),
            (Some(_), _) => {
                return Err(
                    "--service, --target, --keys, --values, --get-set apply to memcache".into(),
                )
            }
            (None, _) => {}
        }
        if !self.crypto_hw && self.tls.is_none() && self.workload != Workload::Cipher {
            return Err("--crypto-hw off applies to TLS tests (--tls, tls-handshake)".into());
        }
        if let (false, Some(why)) = (self.crypto_hw, super::cryptohw::mask_refused_here()) {
            return Err(why.into());
        }
        match (&self.cipher, self.workload) {
            (Some(c), Workload::Cipher) => c.validate()?,
            (None, Workload::Cipher) => return Err("cipher needs its algorithm".into()),
            (Some(_), _) => return Err("the cipher spec belongs to the cipher workload".into()),
            (None, _) => {}
        }
        if self.workload == Workload::Memcache && self.tls.is_some() {
            return Err(
                "--tls: memcached's TLS is not supported by linerate's memcache load".into(),
            );
        }
        if self.window == WindowMode::Exact && self.rcvbuf.is_none() {
            return Err("--window exact needs --rcvbuf (the window)".into());
        }
        for k in self.sysctl.keys() {
            let ok = k.starts_with("net.")
                && k.len() < 100
                && k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
                && !k.contains("..");
            if !ok {
                return Err(format!(
                    "sysctl.\"{k}\": only net.* sysctls are set in a lab's namespaces"
                )
                .into());
            }
        }
        super::nic::normalize_all(&self.nic)?;
        if self.rtt_s.is_some_and(|r| !(0.0..=20.0).contains(&r)) {
            return Err("rtt must be between 0 and 20 s".into());
        }
        if self.bytes == Some(0) {
            return Err("--bytes must be at least 1 byte".into());
        }
        if self.bytes.is_some() && self.direction == Direction::Bidir {
            return Err("--bytes works with --direction tx or rx, not bidir".into());
        }
        if self.zerocopy && self.tls.is_some() {
            return Err(
                "--zerocopy cannot be combined with --tls (sendfile bypasses user-space encryption, and this kernel has no kTLS)"
                    .into(),
            );
        }
        if let Some(t) = &self.tls {
            if let Some(v) = &t.version {
                if v != "1.2" && v != "1.3" {
                    return Err(format!("--tls-version {v}: use 1.2 or 1.3").into());
                }
            }
        }
        if let Some(cc) = &self.cc {
            if cc.is_empty()
                || cc.len() > 15
                || !cc.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                return Err(format!("--cc '{cc}' is not a congestion control name").into());
            }
        }
        Ok(())
    }
}

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
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_flag() {
        let s = TestSpec {
            flows: 0,
            ..Default::default()
        };
        assert!(s.validate().unwrap_err().0.contains("--flows"));
        let s = TestSpec {
            cc: Some("re no".into()),
            ..Default::default()
        };
        assert!(s.validate().unwrap_err().0.contains("--cc"));
        assert!(TestSpec::default().validate().is_ok());
        // What a peer could ask an agent to allocate or wait for.
        let huge = TestSpec {
            request: 1 << 40,
            ..Default::default()
        };
        assert!(huge.validate().unwrap_err().0.contains("capped"));
        for bad in [f64::NAN, f64::INFINITY, -1.0, 1e12] {
            let t = TestSpec {
                duration_s: bad,
                ..Default::default()
            };
            assert!(t.validate().unwrap_err().0.contains("--duration"), "{bad}");
        }
        let many = TestSpec {
            flows: u32::MAX,
            ..Default::default()
        };
        assert!(many.validate().unwrap_err().0.contains("--flows"));
        let mut nl = TestSpec::default();
        nl.sysctl.insert("net.core.rmem_max".into(), "1\n2".into());
        assert!(nl.validate().unwrap_err().0.contains("one line"));
        let exec = TestSpec {
            workload: Workload::Exec,
            exec: Some(super::super::exec::ExecSpec {
                command: vec!["ssh".into(), "-F".into(), "{ssh_config}".into()],
                server_command: None,
                sshd: true,
            }),
            ..Default::default()
        };
        assert!(exec.validate().is_ok());
        let mut no_sshd = exec.clone();
        no_sshd.exec.as_mut().unwrap().sshd = false;
        assert!(no_sshd.validate().unwrap_err().0.contains("--sshd"));
        let exact = TestSpec {
            window: WindowMode::Exact,
            rcvbuf: Some(65536),
            ..exec
        };
        assert!(exact.validate().unwrap_err().0.contains("tcp_rmem"));
    }

    #[test]
    fn the_default_read_size_follows_the_largest_message() {
        let with = |message: usize, bytes: Option<u64>| TestSpec {
            message,
            bytes,
            ..Default::default()
        };
        assert_eq!(with(16 << 10, None).default_read_size(), 16 << 10);
        assert_eq!(with(128 << 10, None).default_read_size(), 128 << 10);
        assert_eq!(with(1 << 20, None).default_read_size(), 1 << 20);
        // Within 16 KiB..1 MiB.
        assert_eq!(with(1024, None).default_read_size(), 16 << 10);
        assert_eq!(with(4 << 20, None).default_read_size(), 1 << 20);
        assert_eq!(with(64 << 10, Some(20 << 20)).default_read_size(), 1 << 20);
        let rr = TestSpec {
            workload: Workload::Rr,
            request: 200,
            response: 32 << 10,
            message: 1,
            reply: 1,
            ..Default::default()
        };
        assert_eq!(rr.default_read_size(), 32 << 10);
        // Results from before the option: the engine's old rule.
        assert_eq!(with(16 << 10, None).effective_read_size(), 256 << 10);
        let set = TestSpec {
            read_size: 4096,
            ..Default::default()
        };
        assert_eq!(set.effective_read_size(), 4096);
        assert!(set.validate().is_ok());
        let huge = TestSpec {
            read_size: MAX_READ_SIZE + 1,
            ..Default::default()
        };
        assert!(huge.validate().unwrap_err().0.contains("--read-size"));
    }

    #[test]
    fn gso_fills_a_send_with_what_the_kernel_takes() {
        let udp = |message: usize, gso: bool, batch: u32| TestSpec {
            workload: Workload::UdpStream,
            message,
            gso,
            batch,
            ..Default::default()
        };
        assert_eq!(udp(64, false, 0).udp_batch(), UDP_BATCH);
        assert_eq!(udp(64, true, 0).udp_batch(), UDP_MAX_SEGMENTS);
        // 46 x 1,400 B fit one 65,507-byte datagram.
        assert_eq!(udp(1400, true, 0).udp_batch(), 46);
        assert_eq!(udp(60_000, true, 0).udp_batch(), 1);
        assert_eq!(udp(64, true, 16).udp_batch(), 16);
        assert!(udp(64, true, 0).validate().is_ok());
        assert!(udp(1400, true, 0).validate().is_ok());
        assert!(udp(64, true, 200)
            .validate()
            .unwrap_err()
            .0
            .contains("UDP_MAX_SEGMENTS"));
        let mut read = udp(64, false, 0);
        read.read_size = 4096;
        assert!(read.validate().unwrap_err().0.contains("--read-size"));
    }
}
