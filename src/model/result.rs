//! The result schema (docs/result-schema.md): one self-describing JSON
//! document per test. `summary` carries names scripts rely on; never rename
//! them, only add.

use serde::{Deserialize, Serialize};

use super::flow::TlsInfo;
use super::host::HostInfo;
use super::lab::LabRecord;
use super::sample::{Confidence, Counters, CpuCost, CpuWindow, Estimate};
use super::sample::{LatencySummary, WorkerPlacement};
use super::spec::{MainMetric, TestSpec};
use crate::model::exec::ExecRecord;
use crate::model::flow::FlowReport;

pub const SCHEMA: &str = "linerate.result";
pub const SCHEMA_VERSION: u32 = 2;

/// How a test (or one of its iterations, or a study's run of a point) ended.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Not run yet (a study's planned run).
    Pending,
    /// Ran its whole window (or every finite transfer finished).
    #[default]
    Ok,
    /// Ended early; what was measured is kept (see the error beside it).
    Partial,
    /// Nothing was measured.
    Failed,
    /// A study's point this host cannot run (a congestion control its
    /// kernel lacks): not run, the reason kept; the study goes on.
    Unavailable,
}

impl Status {
    pub fn is_ok(self) -> bool {
        self == Status::Ok
    }

    pub fn word(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Ok => "ok",
            Status::Partial => "partial",
            Status::Failed => "failed",
            Status::Unavailable => "unavailable",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.word())
    }
}

/// Client and agent values of one quantity.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Pair<T> {
    pub client: T,
    pub agent: T,
}

/// Both ends' view of one interval, combined.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TestInterval {
    pub index: usize,
    pub start_s: f64,
    pub end_s: f64,
    /// Payload counted at the receivers (client rx + agent rx).
    pub bytes: u64,
    pub throughput_bps: f64,
    pub transactions: u64,
    pub transactions_per_s: f64,
    pub connections_per_s: f64,
    pub latency_us: Option<LatencySummary>,
    pub latency_corrected_us: Option<LatencySummary>,
    pub cpu: Pair<Option<CpuWindow>>,
    pub counters: Pair<Counters>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Iteration {
    pub index: usize,
    /// Ok, or Partial when the test ended early (see `error`).
    pub status: Status,
    pub error: Option<String>,
    /// Length of the common measurement window (client clock), seconds.
    pub duration_s: f64,
    pub bytes: u64,
    pub throughput_bps: f64,
    pub transactions: u64,
    pub transactions_per_s: f64,
    pub connections: u64,
    pub connections_per_s: f64,
    pub latency_us: Option<LatencySummary>,
    pub latency_corrected_us: Option<LatencySummary>,
    pub cpu: Pair<Option<CpuWindow>>,
    pub cost: Pair<CpuCost>,
    pub counters: Pair<Counters>,
    pub intervals: Vec<TestInterval>,
    pub flows: Pair<Vec<FlowReport>>,
    pub placement: Pair<Vec<WorkerPlacement>>,
    pub errors: Pair<Vec<String>>,
    /// UDP workloads: packets, loss, drops and jitter over the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpFigures>,
    /// Many hosts: each host's own figures over the common window (empty
    /// when the controller was the only client of one agent).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HostRun>,
    /// Many hosts: how far apart the hosts' timelines began, microseconds,
    /// after clock correction (the latest minus the earliest): the
    /// misalignment of interval edges that remained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_skew_us: Option<f64>,
    /// A group of a mixed test: the throughput the other groups carried on
    /// the same window (the load beside this group's traffic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_beside_bps: Option<f64>,
    /// The kinds' own figures (rpm's `responsiveness`, rrul's
    /// `latency_under_load`, cipher's `cipher`), each read by its kind
    /// (`model::own`); flattened, as the spec's.
    #[serde(flatten, default)]
    pub own: super::own::Own,
    /// `--duration auto`: how long the window ran, the warm-up it found
    /// (left out of this iteration's figures) and why it stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto: Option<super::auto::AutoRecord>,
    /// Open loops: what each end's scheduling added to the latency (the
    /// sender's lateness, each end's read delay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits: Option<super::sample::Waits>,
}

/// What a UDP test measured over its window (both ends' receivers
/// together; `sent` from both ends' senders).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct UdpFigures {
    /// Datagrams received (new, duplicates not counted) and sent, per second.
    pub packets_per_s: f64,
    pub packets_sent_per_s: f64,
    pub packets: u64,
    pub packets_sent: u64,
    /// Bits/s on the wire for the received datagrams: UDP payload + 8 B UDP
    /// + 20 B IPv4 (40 B IPv6) + 38 B of Ethernet framing per datagram.
    pub wire_bps: f64,
    /// Lost (sequence gaps not filled later), receiver drops included, and
    /// as a percent of the datagrams expected (received + lost).
    pub lost: u64,
    pub loss_pct: f64,
    /// Of the lost: dropped by the receiving kernel because the socket's
    /// buffer was full (SO_RXQ_OVFL), not by the network.
    pub receiver_drops: u64,
    /// The rest: lost on the way.
    pub network_lost: u64,
    /// Arrived after a higher sequence number (reordered).
    pub reordered: u64,
    pub duplicates: u64,
    /// RFC 3550 interarrival jitter at the end of the test, mean over the
    /// receiving flows, µs (from the flow reports).
    pub jitter_us: Option<f64>,
    /// Mean |D| over the window (transit-time change between consecutive
    /// datagrams), µs.
    pub transit_delta_us: Option<f64>,
    /// udp-rr: requests that timed out.
    pub timeouts: u64,
    /// The kernel's UDP counters over the window at the receivers (this
    /// host's namespace; on loopback both ends): InDatagrams and
    /// RcvbufErrors deltas. None where not read (a remote agent's host).
    #[serde(default)]
    pub kernel_in_datagrams: Option<u64>,
    #[serde(default)]
    pub kernel_rcvbuf_errors: Option<u64>,
    /// CPU µs per received datagram on each end.
    pub client_us_per_packet: Option<f64>,
    pub agent_us_per_packet: Option<f64>,
    /// Datagrams per sending system call (sendmmsg batch or GSO send) and
    /// per receiving one (recvmmsg; with GRO the kernel's coalesced
    /// datagrams count one by one). None in results before they were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datagrams_per_send: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datagrams_per_recv: Option<f64>,
    /// udp-rr where the controller knows both ends' clocks: the one-way
    /// delay of each request (client to agent, `up`) and of each response
    /// (agent to client, `down`), µs, from the four stamps of each
    /// transaction and the offset between the ends' clocks. Absent where
    /// the offset is unknown (never guessed), or a response is too short
    /// to carry the agent's stamps (under 48 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owd_up_us: Option<LatencySummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owd_down_us: Option<LatencySummary>,
    /// The clock offset's uncertainty (µs): each one-way delay is right
    /// within it (0: both ends on one kernel, the offset read exactly).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owd_offset_uncertainty_us: Option<f64>,
    /// Transactions whose delay in a direction came out below zero (the
    /// offset's error exceeded that delay), recorded as 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owd_clamped: Option<u64>,
}

/// One host's clock against the controller's, as estimated before the
/// iteration (the fastest of several probes on the control connection).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct HostClock {
    /// Host clock minus controller clock (CLOCK_MONOTONIC), nanoseconds.
    pub offset_ns: i64,
    /// Half the fastest probe's round trip: the offset is right within this.
    pub uncertainty_ns: u64,
    pub rtt_ns: u64,
}

/// One host of a many-host test, over the common window.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct HostRun {
    /// Its name in the hosts file (or the lab).
    pub name: String,
    /// "client" (drives flows) or "server" (accepts them).
    pub role: String,
    /// Its agent's control address.
    pub control: String,
    /// Server: the data addresses its listeners used; client: the server
    /// addresses its flows went to.
    pub addresses: Vec<String>,
    /// Ids of the flows it ran.
    pub flows: Vec<u32>,
    pub clock: HostClock,
    /// When its timeline began after the earliest host's, microseconds
    /// (controller clock, after correction): how well interval edges align.
    pub start_offset_us: f64,
    /// How late its thread woke for the scheduled start, microseconds
    /// (the warm-up absorbs it; the edges stay on the schedule).
    #[serde(default)]
    pub start_late_us: f64,
    pub window_s: f64,
    pub counters: Counters,
    /// Payload this host moved (received + sent) over its window, bits/s.
    pub throughput_bps: f64,
    /// Transactions its flows completed (clients), per second.
    pub transactions_per_s: f64,
    pub latency_us: Option<LatencySummary>,
    pub cpu: Option<CpuWindow>,
    pub cost: CpuCost,
    pub placement: Vec<WorkerPlacement>,
    pub errors: Vec<String>,
    /// What the host is (collected by its agent).
    pub environment: HostInfo,
    /// Where it runs, as the hosts file says (`linerate k8s up` writes
    /// node, zone, network, path, kernel, CNI).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub site: std::collections::BTreeMap<String, String>,
    /// Server: its figures per data address (port) its flows went to, in
    /// address order; empty with one address.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_address: Vec<AddressRun>,
}

impl HostRun {
    /// Where it runs in short, from its `site`: "node w2, zone b, network
    /// pod, path service" (None when the hosts file says nothing of it).
    pub fn site_line(&self) -> Option<String> {
        let parts: Vec<String> = ["node", "zone", "network", "path"]
            .iter()
            .filter_map(|k| self.site.get(*k).map(|v| format!("{k} {v}")))
            .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

/// One data address (port) of a server over the common window. The host's
/// window figures are split by each flow's own byte counts (its whole life,
/// warm-up included: flows keep no per-interval counters), counted by the
/// address the flow connected to; so the addresses add up to the host.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct AddressRun {
    pub address: String,
    /// Ids of the flows that connected to it.
    pub flows: Vec<u32>,
    /// Payload (received + sent) over the window.
    pub bytes: u64,
    pub throughput_bps: f64,
    pub transactions_per_s: f64,
    /// Its part of the host's bytes, 0..1.
    pub share: f64,
}

impl AddressRun {
    /// Splits a host's window figures over the addresses of `places`
    /// (flow id, address) by the bytes (received + sent) of each flow in
    /// `flows`; an address whose flows moved nothing gets an equal share
    /// of flows when no flow moved anything. Empty with fewer than two addresses.
    pub fn split(
        places: &[(u32, String)],
        flows: &[FlowReport],
        bytes: u64,
        throughput_bps: f64,
        transactions_per_s: f64,
    ) -> Vec<AddressRun> {
        let mut by: std::collections::BTreeMap<&str, (Vec<u32>, u64)> = Default::default();
        for (id, addr) in places {
            let moved = flows
                .iter()
                .filter(|f| f.flow == *id)
                .map(|f| f.bytes_rx + f.bytes_tx)
                .sum::<u64>();
            let e = by.entry(addr.as_str()).or_default();
            e.0.push(*id);
            e.1 += moved;
        }
        if by.len() < 2 {
            return Vec::new();
        }
        let total: u64 = by.values().map(|(_, b)| b).sum();
        let nflows: usize = by.values().map(|(f, _)| f.len()).sum();
        by.into_iter()
            .map(|(a, (ids, moved))| {
                let share = if total > 0 {
                    moved as f64 / total as f64
                } else {
                    ids.len() as f64 / nflows.max(1) as f64
                };
                AddressRun {
                    address: a.to_string(),
                    flows: ids,
                    bytes: (bytes as f64 * share).round() as u64,
                    throughput_bps: throughput_bps * share,
                    transactions_per_s: transactions_per_s * share,
                    share,
                }
            })
            .collect()
    }
}

/// Where one flow of a many-host test ran.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct FlowPlace {
    pub flow: u32,
    pub client: String,
    pub server: String,
    /// The server data address (port/NIC) it connected to.
    pub address: String,
    /// Where the two ends are against each other, where the hosts file
    /// says (`site`): "other node, pod -> service 198.19.100.7".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<String>,
}

impl Iteration {
    pub fn main_value(&self, m: MainMetric) -> f64 {
        match m {
            MainMetric::Throughput => self.throughput_bps,
            MainMetric::TransactionRate => self.transactions_per_s,
            MainMetric::PacketRate => self.udp.as_ref().map_or(0.0, |u| u.packets_per_s),
        }
    }
}

/// The summary's fixed names (see docs/result-schema.md).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LatencyFields {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl From<&LatencySummary> for LatencyFields {
    fn from(l: &LatencySummary) -> Self {
        LatencyFields {
            p50: l.p50,
            p90: l.p90,
            p99: l.p99,
            p999: l.p999,
            max: l.max,
        }
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct CpuFields {
    pub host_util_pct: Option<f64>,
    pub process_util_pct: Option<f64>,
    pub us_per_kb: Option<f64>,
    pub us_per_tx: Option<f64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub workload: String,
    /// Total length of the measurement windows, seconds.
    pub duration_s: f64,
    /// Payload counted at the receivers in the windows (all iterations).
    pub bytes: u64,
    /// Mean over iterations.
    pub throughput_bps: f64,
    pub transactions: u64,
    pub transactions_per_s: f64,
    pub latency_us: Option<LatencyFields>,
    pub cpu: Pair<CpuFields>,
    // Additions (free to extend):
    pub direction: String,
    pub flows: u32,
    pub iterations: usize,
    pub connections_per_s: Option<f64>,
    pub latency_corrected_us: Option<LatencyFields>,
    /// Confidence interval of the main metric over iterations.
    pub confidence: Option<Estimate>,
    pub main_metric: Option<MainMetric>,
    pub status: Status,
    /// What TLS negotiated (the first client flow's session; None: clear).
    #[serde(default)]
    pub tls: Option<TlsInfo>,
    /// TLS handshakes completed per second on the client (crr, tls-handshake).
    #[serde(default)]
    pub tls_handshakes_per_s: Option<f64>,
    /// The receive window the senders saw mid-transfer (tcpi_snd_wnd while
    /// their writes were blocked; median over flows). None: never blocked.
    #[serde(default)]
    pub observed_window_bytes: Option<u64>,
    /// UDP workloads: means over iterations (counts summed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpFigures>,
    /// A group of a mixed test: the mean over iterations of the
    /// throughput the other groups carried beside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_beside_bps: Option<f64>,
    /// A step of a capacity search: the searched figure over every
    /// iteration with its confidence interval (model::search).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_figure: Option<super::search::SearchFigure>,
    /// `--duration auto`: the last iteration's record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto: Option<super::auto::AutoRecord>,
    /// The client's latency at fixed bounds (every iteration's histogram
    /// merged), for histogram metrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_buckets: Option<super::sample::LatencyBuckets>,
    /// Open loops: what each end's scheduling added (every iteration's
    /// histograms merged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits: Option<super::sample::Waits>,
    /// The kinds' own figures (rpm's `responsiveness`: the last
    /// iteration's), as the iterations'.
    #[serde(flatten, default)]
    pub own: super::own::Own,
}

impl Summary {
    /// The host's CPU per KB (or per transaction) of this summary over
    /// `other`'s: where both ends share one host, the cost no context
    /// escapes. In a lab the kernel delivers each released packet in the
    /// emulator's context (its verdict's softirq runs the receiving
    /// socket's TCP: perf, bench/RESULTS.md), so TCP's receive work is in
    /// neither end's process CPU.
    pub fn host_cost_ratio(&self, other: &Summary, per_tx: bool) -> Option<f64> {
        let per = |x: &Summary| {
            let host = x.cpu.client.host_util_pct?;
            let v = if per_tx {
                x.transactions_per_s
            } else {
                x.throughput_bps
            };
            (v > 0.0 && host > 0.0).then(|| host / v)
        };
        Some(per(self)? / per(other)?)
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct AgentInfo {
    pub address: String,
    /// True when linerate started the agent itself on this host.
    pub local: bool,
    pub pid: Option<u32>,
    /// What the server is when it is not a linerate agent (`--perf-server`:
    /// another tool's QUIC perf server, whose side nobody measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreign: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TestResult {
    pub schema: String,
    pub schema_version: u32,
    pub started_at: String,
    pub command: Vec<String>,
    pub spec: TestSpec,
    pub confidence_target: Confidence,
    pub agent: AgentInfo,
    pub environment: Pair<HostInfo>,
    pub summary: Summary,
    pub iterations: Vec<Iteration>,
    /// With TLS: the same test in clear text, run right after, so the cost
    /// of encryption is a ratio measured side by side (None: not run).
    #[serde(default)]
    pub baseline: Option<Summary>,
    /// The lab the test ran in: link, emulator, calibration, counters.
    #[serde(default)]
    pub lab: Option<LabRecord>,
    /// exec/scp: the command, its exit status, times and CPU.
    #[serde(default)]
    pub exec: Option<ExecRecord>,
    /// Many hosts: each host's figures, means over iterations (per
    /// iteration in `iterations[].hosts`); `summary` is the aggregate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HostRun>,
    /// Many hosts: which client, server and address each flow used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flow_map: Vec<FlowPlace>,
    /// A mixed test (`linerate run mix`): each group's own spec, summary and
    /// iterations, all on one window. `summary` is then their total (bytes,
    /// throughput, transactions summed; CPU is per end and shared, so it is
    /// the total's alone) and `spec` the first group's with workload `mix`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupResult>,
    /// A study point with `firewall.*`: what was loaded in the server's
    /// namespace, read back, and what was left after removal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firewall: Option<super::firewall::FirewallRecord>,
    /// `--search`: the capacity found and every step the search ran; the
    /// rest of the result is the step at the capacity (or, when no rate
    /// met the target, the lowest rate tried).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<super::search::SearchResult>,
}

/// One group of a mixed test: a workload with its options, measured on the
/// window it shared with the other groups.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct GroupResult {
    /// `g1`, `g2`, ... in the order given.
    pub name: String,
    /// The group as written (`rr --rate 100 --request 64`).
    pub command: String,
    pub workload: String,
    pub spec: TestSpec,
    /// In the single-test schema; its CPU costs per KB and per transaction
    /// are absent (the CPU of an end is shared by every group).
    pub summary: Summary,
    pub iterations: Vec<Iteration>,
    /// Seconds after the common start that its timeline began (rrul's
    /// streams, after the idle phase); its intervals' times are its own.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub offset_s: f64,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

impl TestResult {
    /// Each group of a mixed test as a test result of its own (the group's
    /// spec, summary and iterations; the rest shared), for tables and plots
    /// that read one workload at a time. Empty for a single test.
    pub fn group_results(&self) -> Vec<TestResult> {
        self.groups
            .iter()
            .map(|g| TestResult {
                spec: g.spec.clone(),
                summary: g.summary.clone(),
                iterations: g.iterations.clone(),
                command: self.command.clone(),
                groups: Vec::new(),
                hosts: Vec::new(),
                flow_map: Vec::new(),
                baseline: None,
                ..self.clone()
            })
            .collect()
    }

    /// Why nothing at all was measured (every connection failed), if so:
    /// such a result is a failure, not a zero, wherever it is run.
    pub fn nothing_measured(&self) -> Option<String> {
        let nothing = self
            .iterations
            .iter()
            .all(|i| i.bytes == 0 && i.transactions == 0);
        let first_error = self
            .iterations
            .iter()
            .find_map(|i| i.errors.client.first().or(i.errors.agent.first()))?;
        nothing.then(|| {
            format!("nothing was measured: every connection failed, first with: {first_error}")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_split_a_host_by_its_flows_bytes() {
        let flow = |id, rx| FlowReport {
            flow: id,
            bytes_rx: rx,
            ..Default::default()
        };
        let places: Vec<(u32, String)> = (0..4).map(|i| (i, format!("10.0.{}.1", i % 2))).collect();
        let flows = [flow(0, 100), flow(1, 300), flow(2, 100), flow(3, 500)];
        let a = AddressRun::split(&places, &flows, 1000, 8000.0, 0.0);
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].address, "10.0.0.1");
        assert_eq!(a[0].flows, vec![0, 2]);
        assert_eq!(a[0].bytes, 200);
        assert_eq!(a[1].bytes, 800);
        assert!((a[1].throughput_bps - 6400.0).abs() < 1e-9);
        let sum: f64 = a.iter().map(|x| x.share).sum();
        assert!((sum - 1.0).abs() < 1e-12);
        // One address: nothing to split.
        assert!(AddressRun::split(&places[..1], &flows, 1000, 1.0, 0.0).is_empty());
        // Nothing moved: by flow count.
        let a = AddressRun::split(&places, &[], 0, 0.0, 10.0);
        assert_eq!(a[0].transactions_per_s, 5.0);
    }

    #[test]
    fn nothing_measured_needs_zero_figures_and_an_error() {
        let mut r = TestResult {
            iterations: vec![Iteration::default()],
            ..Default::default()
        };
        assert_eq!(
            r.nothing_measured(),
            None,
            "zero without an error is a result"
        );
        r.iterations[0]
            .errors
            .client
            .push("flow 0: TLS: bad certificate".into());
        assert!(r
            .nothing_measured()
            .unwrap()
            .ends_with("first with: flow 0: TLS: bad certificate"));
        r.iterations[0].transactions = 1;
        assert_eq!(r.nothing_measured(), None);
    }
}
