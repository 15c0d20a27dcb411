//! The sections every kind shares: what runs and for how long, where (a
//! study's lab, sysctls, NIC and firewall settings), the sockets, and the
//! sections of the kinds' families (a bulk stream, an exchange, an open
//! loop, datagrams). Each is flattened into `TestOptions`: one flat key
//! space on the command line and in a study file, a typed section in code.

use clap::Args;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::super::search::SearchTarget;
use super::super::spec::{CloseMode, Direction, IoMode, Per, Transport, WindowMode, Workload};
use super::values::{parse_pct, Cpus, Iterations, Length, Rate, RxPoll, Secs, Size, Target};

/// What runs, with how many flows and workers, for how long, how often.
#[derive(Args, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[command(next_help_heading = "The test: flows, window, repetitions")]
pub struct RunOptions {
    /// Only in a study's `[[case]]` entries: the case's name in tables and plots.
    #[arg(skip)]
    pub label: Option<String>,
    /// What the flows do (on the command line: the word after `run`).
    #[arg(skip)]
    pub workload: Option<Workload>,
    /// With `workload = "mix"` in a study: the groups on one window, each
    /// written as `linerate run` takes it (`"rr --rate 100"`); the other
    /// keys apply to every group, a group's own options win.
    #[arg(skip)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<String>>,
    /// Number of flows (connections) [default: 1].
    #[arg(short = 'F', long)]
    pub flows: Option<u32>,
    /// Client workers (threads, each an epoll loop); default min(flows, CPUs), a worker per flow for a stream of up to 4 flows per CPU.
    #[arg(short = 'T', long, alias = "threads")]
    #[serde(alias = "threads")]
    pub workers: Option<u32>,
    /// Agent workers; default the same as --workers.
    #[arg(long, alias = "agent-threads")]
    #[serde(alias = "agent_threads")]
    pub agent_workers: Option<u32>,
    /// Measurement window [default: 10s; with --bytes the time limit, 300s]; `auto`: until the main figure is stationary (a trend test over the intervals, the leading ones that trend are the warm-up) and within the confidence target, at most --max-duration.
    #[arg(short = 'd', long, value_parser = Length::parse, value_name = "DURATION|auto")]
    pub duration: Option<Length>,
    /// With --duration auto: the longest window [default: 60s].
    #[arg(long, value_parser = Secs::parse, value_name = "DURATION")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_duration: Option<Secs>,
    /// Warm-up excluded from the window [default: 2s].
    #[arg(long, value_parser = Secs::parse, value_name = "DURATION")]
    pub warmup: Option<Secs>,
    /// Interval of the per-interval samples [default: 1s].
    #[arg(short = 'i', long, value_parser = Secs::parse, value_name = "DURATION")]
    pub interval: Option<Secs>,
    /// Repeat: N or MIN..MAX iterations (stop early once --confidence is met).
    #[arg(long, value_parser = Iterations::parse, value_name = "MIN..MAX")]
    pub iterations: Option<Iterations>,
    /// Confidence target LEVEL,WIDTH: e.g. 99,5 = 99% CI within +/-2.5% of the mean [default: 99,5].
    #[arg(long, value_parser = Target::parse, value_name = "LEVEL,WIDTH")]
    pub confidence: Option<Target>,
    /// Use the first N data addresses (ports) of each server: a lab's
    /// (`lab up --ports`) or a hosts file's `data` [default: all]; flows
    /// go round robin over them.
    #[arg(long, value_name = "N")]
    pub ports: Option<u32>,
    /// With --ports N: N x this many flows, so the load grows with the
    /// ports (seed 002 ran 64 threads per port); instead of --flows.
    #[arg(long, value_name = "F")]
    pub flows_per_port: Option<u32>,
    /// Use IPv6 (on the command line: -6, beside --agent).
    #[arg(skip)]
    pub ipv6: Option<bool>,
}

/// Studies only: where a point runs (its lab's round trip and settings,
/// its hosts' sysctls, NIC and firewall, how many client hosts).
#[derive(Args, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct PlaceOptions {
    /// Studies with a [lab]: the lab's round trip for this test (swept per point).
    #[arg(skip)]
    pub rtt: Option<Secs>,
    /// Studies across many hosts: use the first N client hosts (swept per point).
    #[arg(skip)]
    pub clients: Option<u32>,
    /// Studies across many hosts: the client hosts of this point, as
    /// `--clients` names them (swept per point: `client_hosts = ["n1-a",
    /// "n1-host"]`, the matrix of a Kubernetes fleet).
    #[arg(skip)]
    pub client_hosts: Option<String>,
    /// Studies across many hosts: the server hosts of this point, as
    /// `--servers` names them (`server_hosts = ["n1-b", "n2-b", "n2-b-svc"]`).
    #[arg(skip)]
    pub server_hosts: Option<String>,
    /// Studies with a [lab]: the lab's settings for this point (swept as
    /// `lab.mtu`, `lab.offloads`, `lab.rate`, `lab.loss`, `lab.queue`, `lab.cc`).
    #[arg(skip)]
    pub lab: Option<crate::model::lab::LabPoint>,
    /// Studies with a [lab]: sysctls set in the lab's namespaces for this
    /// point (swept as `sysctl."net.ipv4.tcp_rmem"`).
    #[arg(skip)]
    pub sysctl: Option<BTreeMap<String, String>>,
    /// Studies: NIC settings on both ends' data interfaces for this point
    /// (swept as `nic.gro = [true, false]`, `nic.rx-ring`, `nic.rps` ...):
    /// in a lab its hosts' namespaces, on hosts agents run with `serve --allow-nic`.
    #[arg(skip)]
    #[serde(default, deserialize_with = "crate::model::nic::de_values")]
    pub nic: Option<BTreeMap<String, String>>,
    /// Studies with a [lab]: rules that never match loaded in the server's
    /// namespace for this point, and connection tracking on or off (swept
    /// as `firewall.rules`, `firewall.conntrack`).
    #[arg(skip)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firewall: Option<crate::model::firewall::FirewallPoint>,
}

/// The sockets and the threads that drive them, on both ends.
#[derive(Args, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[command(next_help_heading = "Sockets and threads")]
pub struct SocketOptions {
    /// What carries the flows: tcp, or quic (QUIC over UDP with TLS 1.3: runs the workload's QUIC twin, quic-stream for stream, and TLS over TCP right after it as its baseline) [default: tcp].
    #[arg(long, value_name = "tcp|quic")]
    pub transport: Option<Transport>,
    /// TCP: bytes asked of each receive call (netperf -M), on both ends; it shapes when the receiver ACKs and so what a pacing congestion control (bbr) measures [default: the largest message a flow receives, 16K to 1M].
    #[arg(long, value_parser = Size::parse, value_name = "SIZE")]
    pub read_size: Option<Size>,
    /// How workers wait for their sockets: epoll (event loops, many flows per thread) or threads (a blocking thread per flow, as netperf and iperf3 3.16+; stream tx/rx, closed-loop rr, crr) [default: threads for a closed-loop rr or a crr with a worker per flow, else epoll].
    #[arg(long, value_enum)]
    pub io: Option<IoMode>,
    /// SO_SNDBUF on both ends (the kernel doubles it; the granted size is reported).
    #[arg(long, value_parser = Size::parse, value_name = "SIZE")]
    pub sndbuf: Option<Size>,
    /// SO_RCVBUF on both ends (set before listen/connect).
    #[arg(long, value_parser = Size::parse, value_name = "SIZE")]
    pub rcvbuf: Option<Size>,
    /// How --rcvbuf sets the receive window: buffer (SO_RCVBUF, as applications do: ~1.5x on Linux) or exact (plus TCP_WINDOW_CLAMP) [default: buffer].
    #[arg(long, value_enum)]
    pub window: Option<WindowMode>,
    /// TCP_NODELAY on both ends.
    #[arg(long, action = clap::ArgAction::SetTrue)]
    pub nodelay: Option<bool>,
    /// Congestion control per socket: reno, cubic, bbr ... (this kernel's default is recorded otherwise); over QUIC, quinn's: cubic (default), bbr or newreno.
    #[arg(long, value_name = "NAME")]
    pub cc: Option<String>,
    /// TCP_MAXSEG before connect.
    #[arg(long)]
    pub mss: Option<u32>,
    /// Pin client workers to these CPUs (round-robin), e.g. 0 or 0-1.
    #[arg(long, value_parser = Cpus::parse, value_name = "LIST")]
    pub cpus: Option<Cpus>,
    /// Pin agent workers to these CPUs.
    #[arg(long, value_parser = Cpus::parse, value_name = "LIST")]
    pub agent_cpus: Option<Cpus>,
    /// Busy polling: workers never sleep in epoll (and set SO_BUSY_POLL where allowed); lower latency, a full core per worker on each end.
    #[arg(long, action = clap::ArgAction::SetTrue)]
    pub spin: Option<bool>,
}

/// A bulk stream's (stream, rrul's streams, quic-stream).
#[derive(Args, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[command(next_help_heading = "Bulk transfer (stream)")]
pub struct StreamOptions {
    /// stream: tx = client sends ("put"), rx = agent sends ("get"), bidir = both [default: tx].
    #[arg(long, value_enum)]
    pub direction: Option<Direction>,
    /// stream: bytes per write [default: 128K].
    #[arg(short = 'm', long, value_parser = Size::parse, value_name = "SIZE")]
    pub message: Option<Size>,
    /// stream: a finite transfer of this size (per flow, or per transaction with --per transaction).
    #[arg(long, value_parser = Size::parse, value_name = "SIZE")]
    pub bytes: Option<Size>,
    /// stream --bytes: one transfer per flow (test ends when all are done), or repeated transactions for the duration [default: flow].
    #[arg(long, value_enum)]
    pub per: Option<Per>,
    /// stream --bytes: size of the small message the other way (stream put 20M/20: --bytes 20M --reply 20) [default: 20].
    #[arg(long, value_parser = Size::parse, value_name = "SIZE")]
    pub reply: Option<Size>,
    /// stream: send with sendfile(2) from a memfd (no user-space copy).
    #[arg(long, action = clap::ArgAction::SetTrue)]
    pub zerocopy: Option<bool>,
    /// stream: how long a lone receiving thread polls an empty socket before it sleeps (auto, off, or a duration such as 20us): a sleeping receiver pays its host's wake-up on every arrival, which on a VM under bbr cost a third of one stream's rate; the time polled is counted and shown beside the CPU figures; auto: 20us when the test has one flow, this host has a CPU beside the receiver's and the two ends are not pinned to one CPU, not under TLS (its receiver decrypts: polling measured 0.93x), never in a lab or a mix group (they need the CPUs) [default: auto].
    #[arg(long, value_parser = RxPoll::parse, value_name = "HOW")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_poll: Option<RxPoll>,
}

/// An exchange's: a request and its response (rr, crr, tls-handshake,
/// udp-rr and their QUIC twins).
#[derive(Args, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[command(next_help_heading = "Exchanges (rr, crr, tls-handshake, udp-rr)")]
pub struct ExchangeOptions {
    /// rr/crr: request size [default: 1].
    #[arg(long, value_parser = Size::parse, value_name = "SIZE")]
    pub request: Option<Size>,
    /// rr/crr: response size [default: 1].
    #[arg(long, value_parser = Size::parse, value_name = "SIZE")]
    pub response: Option<Size>,
    /// rr: requests in flight per flow (netperf -b + 1) [default: 1].
    #[arg(long)]
    pub outstanding: Option<u32>,
    /// crr: graceful (agent closes first, FIN) or reset (client SO_LINGER 0) [default: graceful].
    #[arg(long, value_enum)]
    pub close: Option<CloseMode>,
    /// udp-rr: a request unanswered this long is counted lost [default: 1s].
    #[arg(long, value_parser = Secs::parse, value_name = "DURATION")]
    pub timeout: Option<Secs>,
}

/// An open loop's: requests sent at a rate of their own, not on answers,
/// and the search for the highest rate that meets a target.
#[derive(Args, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[command(next_help_heading = "Open loop and capacity search")]
pub struct LoadOptions {
    /// rr, udp-rr: open loop at this many transactions/s in total (latency also measured from the intended send time); udp-stream: paced at this many packets/s, or a payload bit rate such as 500mbit, in total; rpm: a bit rate, its load's goodput each way at most (the draft's test saturates without it).
    #[arg(long, value_parser = Rate::parse, value_name = "RATE")]
    pub rate: Option<Rate>,
    /// rr, udp-rr, memcache with --rate: the rate rises linearly from a tenth of --rate to --rate over this long from the start, then holds (a load that drifts on purpose).
    #[arg(long, value_parser = Secs::parse, value_name = "DURATION")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_ramp: Option<Secs>,
    /// rr, udp-rr, memcache with --rate (or --search): space requests evenly (uniform, as wrk2 and sockperf) or as a Poisson process (exponential gaps, as mutilate and Lancet; bursts queue) [default: uniform].
    #[arg(long, value_enum, value_name = "KIND")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrivals: Option<crate::model::spec::Arrivals>,
    /// rr, udp-rr, memcache with --rate (or --search): how the sender waits for each request's due time: hybrid sleeps until just before it (by the lead its own recent wake-ups needed, up to 1 ms) and busy-polls the rest, so a host slow to wake does not delay the sends; sleep wakes on a timer at the due time (less CPU; the wake-up's lateness counts as latency, and is reported); auto: hybrid when the client's workers have a CPU to spare (beside a local agent's), else sleep [default: auto].
    #[arg(long, value_enum, value_name = "HOW")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing: Option<crate::model::spec::Pacing>,
    /// rr, udp-rr, memcache, udp-stream (loss), rpm: find the highest offered rate (open loop) whose figure meets this target: p50, p90, p99 or p999 of the latency, or loss_pct for UDP (`p99<=300us`, `loss_pct<=0.1`); rpm: the most load each way (a bit rate) whose RPM stays at least this (`rpm>=1000`). A closed-loop peak (rpm: the saturating test), a ramp by factors of two, then bisection; each step long enough for 100 samples beyond the percentile (rpm: one responsiveness test).
    #[arg(long, value_parser = SearchTarget::parse, value_name = "METRIC<=VALUE")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<SearchTarget>,
    /// With --search: stop when the missed rate is within this percent of the met one [default: 2%].
    #[arg(long, value_parser = parse_pct, value_name = "PCT")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_resolution: Option<f64>,
}

/// Datagrams': how many per system call, and the kernel's segmentation.
#[derive(Args, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[command(next_help_heading = "Datagrams (udp-stream, udp-rr)")]
pub struct UdpOptions {
    /// UDP: datagrams per sendmmsg/recvmmsg call [default: 32; with --gso as many as one send takes, up to 128].
    #[arg(long, value_name = "N")]
    pub batch: Option<u32>,
    /// udp-stream: send each batch as one GSO datagram (UDP_SEGMENT), split by the kernel.
    #[arg(long, action = clap::ArgAction::SetTrue)]
    pub gso: Option<bool>,
    /// udp-stream: receive datagrams coalesced by the kernel (UDP_GRO), split by linerate.
    #[arg(long, action = clap::ArgAction::SetTrue)]
    pub gro: Option<bool>,
}
