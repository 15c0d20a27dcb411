//! What a result records about the lab it ran on: the link as configured,
//! the calibration taken before the test, and the emulator's counters.

use serde::{Deserialize, Serialize};

use super::aqm::trim;
pub use super::aqm::{Aqm, AqmKind};
use super::error::ModelError;
use super::tunnel::{TunnelBytes, TunnelInfo, TunnelKind};
use crate::units;

/// Ethernet framing per packet that a wire rate pays beyond the IP packet:
/// preamble and SFD 8, header 14, FCS 4, inter-frame gap 12.
pub const FRAMING_BYTES: u64 = 38;

/// The default drop-tail queue's floor: room for 16 GSO bursts of 64 KiB.
pub const DEFAULT_QUEUE_MIN_BYTES: u64 = 1 << 20;

/// Below this wire rate the emulator passes packets one by one, not as GSO
/// units of up to 64 KiB (over 2 ms on such a wire): one flow through a
/// 20 ms lab got 89-97% of 20-200 Mbit/s as units, 100% per packet, at
/// 16-19% of a core instead of 6-7% (bench/RESULTS.md).
pub const PER_PACKET_BELOW_BPS: f64 = 250e6;

/// The queue a link of `rate_bps` gets when none is given: one
/// bandwidth-delay product at the lab's round trip, at least
/// [`DEFAULT_QUEUE_MIN_BYTES`] (`lab up --help` says why).
pub fn default_queue_bytes(rate_bps: f64, rtt_s: f64) -> u64 {
    ((rate_bps * rtt_s / 8.0) as u64).max(DEFAULT_QUEUE_MIN_BYTES)
}

/// Why the default queue is what it is, for `lab up` and `lab status`.
pub const DEFAULT_QUEUE_WHY: &str = "1 BDP (rate x RTT) per direction, at least 1 MiB: \
the least drop-tail buffer with which one Reno or cubic flow keeps the link busy after a loss \
(a deeper one only adds its delay to every round trip under load), and room for 16 GSO bursts; \
--queue sets another (lab up --help)";

/// A study point's own lab settings (`lab.mtu`, `lab.rate` ... as sweep
/// axes): over the study's `[lab]`, written as `lab up` takes them. The
/// runner reshapes its lab to them before the point and calibrates again.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LabPoint {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offloads: Option<bool>,
    /// Wire rate, as `lab up --rate` takes it ("1gbit").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<String>,
    /// "0.5%" or "0.005".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<String>,
    /// Bytes ("4M") or time at the rate ("100ms").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Congestion control of the lab's hosts (their namespaces' default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cc: Option<String>,
    /// Queue discipline: fifo, codel or fq_codel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aqm: Option<String>,
    /// How the namespaces are joined to the router: veth, bridge or macvlan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// Tunnel between client and server: none, wireguard, ipsec or vxlan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel: Option<String>,
}

impl LabPoint {
    pub fn is_empty(&self) -> bool {
        *self == LabPoint::default()
    }

    /// "mtu 8992, rate 1gbit" for command lines and reports.
    pub fn describe(&self) -> String {
        let mut v = Vec::new();
        if let Some(m) = self.mtu {
            v.push(format!("--mtu {m}"));
        }
        if let Some(o) = self.offloads {
            v.push(format!("--offloads {}", if o { "on" } else { "off" }));
        }
        for (k, x) in [
            ("rate", &self.rate),
            ("loss", &self.loss),
            ("queue", &self.queue),
            ("cc", &self.cc),
            ("aqm", &self.aqm),
            ("link", &self.link),
            ("tunnel", &self.tunnel),
        ] {
            if let Some(x) = x {
                v.push(format!("--{k} {x}"));
            }
        }
        v.join(" ")
    }
}

/// Keys a study may sweep under `lab.` and under `sysctl.` (any sysctl
/// under net., set in the lab's host namespaces).
pub const LAB_AXES: &[&str] = &[
    "mtu", "offloads", "rate", "loss", "queue", "cc", "aqm", "link", "tunnel",
];

/// One direction of the emulated link.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LinkSpec {
    /// One-way delay, seconds.
    pub delay_s: f64,
    /// Extra delay uniform in 0..jitter (no reordering), seconds.
    pub jitter_s: f64,
    /// Wire rate, bits/s (None: as fast as the host forwards).
    pub rate_bps: Option<f64>,
    /// Drop-tail queue before the bottleneck, bytes (None: unlimited).
    pub queue_bytes: Option<u64>,
    /// Bernoulli loss probability 0..1.
    pub loss: f64,
}

/// The whole lab: both directions and the links' own settings.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LabSpec {
    /// [client->server, server->client].
    pub links: [LinkSpec; 2],
    /// MTU of every lab link.
    pub mtu: u32,
    /// TSO/GSO/GRO on the lab links.
    pub offloads: bool,
    /// Congestion control set in the client and server namespaces.
    pub cc: String,
    /// Make the emulator see single packets even without loss (a GSO
    /// super-packet is otherwise one unit); costs CPU, for comparison.
    #[serde(default)]
    pub per_packet: bool,
    /// Where the user-space emulator runs (see [`EmulatorCpu`]).
    #[serde(default)]
    pub emulator_cpu: EmulatorCpu,
    /// The queue discipline in front of each direction's bottleneck.
    #[serde(default)]
    pub aqm: Aqm,
    /// How each host namespace is joined to the router (results before it: veth).
    #[serde(default)]
    pub link: LinkKind,
    /// Data addresses (ports) of the server, each on a link of its own to
    /// the router (results before it: 1).
    #[serde(default = "one")]
    pub ports: u32,
    /// The tunnel the tests' traffic takes between client and server.
    #[serde(default, skip_serializing_if = "is_no_tunnel")]
    pub tunnel: TunnelKind,
    /// The hosts' NIC speed, wire bits/s: [the clients' sending, the
    /// servers' sending] (`lab up --nic-rate`); None: the hosts send as
    /// fast as the kernel copies (results before it: None).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic_bps: Option<[f64; 2]>,
}

fn is_no_tunnel(t: &TunnelKind) -> bool {
    *t == TunnelKind::None
}

/// How a lab joins each host namespace to the router namespace
/// (`lab up --link`, the `lab.link` axis); src/lab/link.rs builds them.
/// Seed 003 compared connection types (OSA, HiperSockets, VSWITCH) by MTU;
/// on one Linux box the kinds of virtual link are what differ.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LinkKind {
    /// A veth pair: host `lr0` to the router's port.
    #[default]
    Veth,
    /// A veth pair whose router end is a port of a Linux bridge in the
    /// router namespace; the bridge holds the router's address, so frames
    /// cross the bridge (L2) before the router forwards them (L3).
    Bridge,
    /// Two macvlan devices in bridge mode on one parent (a veth in the
    /// router namespace): the host's end moved into its namespace, the
    /// router's end beside it; frames pass between them inside macvlan.
    Macvlan,
}

impl LinkKind {
    pub fn name(self) -> &'static str {
        match self {
            LinkKind::Veth => "veth",
            LinkKind::Bridge => "bridge",
            LinkKind::Macvlan => "macvlan",
        }
    }
}

impl std::str::FromStr for LinkKind {
    type Err = ModelError;
    fn from_str(s: &str) -> Result<Self, ModelError> {
        match s {
            "veth" => Ok(LinkKind::Veth),
            "bridge" => Ok(LinkKind::Bridge),
            "macvlan" => Ok(LinkKind::Macvlan),
            _ => Err(ModelError::Form {
                input: s.into(),
                form: "veth, bridge or macvlan",
            }),
        }
    }
}

/// Where the user-space emulator runs.
///
/// Its verdict calls run the kernel's forwarding and the receivers' TCP for
/// every released packet, on its own CPU: per packet at capacity the
/// emulator's thread did the whole lab's packet processing and was the
/// bound (2.8-3.8 Gbit/s, bench/RESULTS.md). Pinned to one CPU, with the
/// lab links' receive processing steered to the other CPUs (RPS), the work
/// spreads over the machine: 5.7-5.9 Gbit/s.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum EmulatorCpu {
    /// The last CPU this process may use, when it may use two or more.
    #[default]
    Auto,
    /// Neither pinned nor steered: the scheduler places everything.
    Off,
    /// This CPU.
    Cpu(u32),
}

impl std::str::FromStr for EmulatorCpu {
    type Err = ModelError;
    fn from_str(s: &str) -> Result<Self, ModelError> {
        match s {
            "auto" => Ok(EmulatorCpu::Auto),
            "off" | "none" => Ok(EmulatorCpu::Off),
            n => n
                .parse()
                .map(EmulatorCpu::Cpu)
                .map_err(|_| ModelError::Form {
                    input: s.into(),
                    form: "auto, off or a CPU number",
                }),
        }
    }
}

impl Default for LabSpec {
    fn default() -> Self {
        LabSpec {
            links: [LinkSpec::default(), LinkSpec::default()],
            mtu: 1500,
            offloads: true,
            cc: "cubic".into(),
            per_packet: false,
            emulator_cpu: EmulatorCpu::Auto,
            aqm: Aqm::default(),
            link: LinkKind::Veth,
            ports: 1,
            tunnel: TunnelKind::None,
            nic_bps: None,
        }
    }
}

impl LabSpec {
    /// Round-trip time the links add, seconds.
    pub fn rtt_s(&self) -> f64 {
        self.links[0].delay_s + self.links[1].delay_s
    }

    /// Whether the link does anything (delay, jitter, rate or loss).
    pub fn shapes(&self) -> bool {
        self.links
            .iter()
            .any(|l| l.delay_s > 0.0 || l.jitter_s > 0.0 || l.rate_bps.is_some() || l.loss > 0.0)
    }

    /// Any loss set: the emulator must see single packets, not GSO bursts.
    pub fn has_loss(&self) -> bool {
        self.links.iter().any(|l| l.loss > 0.0)
    }

    /// Whether the emulator passes packets one by one: asked, with loss,
    /// or on a link slower than `PER_PACKET_BELOW_BPS`.
    pub fn emulates_per_packet(&self) -> bool {
        let slow = |l: &LinkSpec| l.rate_bps.is_some_and(|r| r < PER_PACKET_BELOW_BPS);
        self.per_packet || self.has_loss() || self.links.iter().any(slow)
    }

    /// TCP payload per packet at this MTU (IPv4, 20 B IP + 32 B TCP with
    /// timestamps) over what each packet costs on the wire.
    /// Through a tunnel, each packet carries the tunnel MTU's payload.
    pub fn goodput_ratio(&self) -> f64 {
        let payload = self.tunnel.mtu(self.mtu) as f64 - 52.0;
        payload / (self.mtu as f64 + FRAMING_BYTES as f64)
    }

    /// The TCP goodput direction `dir` allows: its link's rate, or the
    /// sending hosts' NIC where that is slower (None: neither is set).
    pub fn goodput_bps(&self, dir: usize) -> Option<f64> {
        let nic = self.nic_bps.map(|n| n[dir]);
        let rate = match (self.links[dir].rate_bps, nic) {
            (Some(r), Some(n)) => Some(r.min(n)),
            (r, n) => r.or(n),
        };
        rate.map(|r| r * self.goodput_ratio())
    }

    /// Whether every shaped link has the queue `lab up` gives when none is
    /// asked for ([`default_queue_bytes`]).
    pub fn default_queue(&self) -> bool {
        let rtt = self.rtt_s();
        self.links.iter().any(|l| l.rate_bps.is_some())
            && self
                .links
                .iter()
                .all(|l| l.queue_bytes == l.rate_bps.map(|r| default_queue_bytes(r, rtt)))
    }

    /// One line for humans: `rtt 100 ms, 1 Gbit/s, loss 0.5%, MTU 1500`.
    pub fn describe(&self) -> String {
        let pair = |a: String, b: String| if a == b { a } else { format!("{a}/{b}") };
        let ms = |s: f64| format!("{} ms", trim(s * 1e3));
        let mut parts = vec![format!("rtt {}", ms(self.rtt_s()))];
        if self.links[0].delay_s != self.links[1].delay_s {
            parts.push(format!(
                "one-way {}",
                pair(ms(self.links[0].delay_s), ms(self.links[1].delay_s))
            ));
        }
        let rate = |d: usize| {
            self.links[d]
                .rate_bps
                .map_or("unlimited".to_string(), units::fmt_bps)
        };
        parts.push(format!("rate {}", pair(rate(0), rate(1))));
        if self.links.iter().any(|l| l.jitter_s > 0.0) {
            parts.push(format!(
                "jitter {}",
                pair(ms(self.links[0].jitter_s), ms(self.links[1].jitter_s))
            ));
        }
        if self.has_loss() {
            let pct = |d: usize| format!("{}%", trim(self.links[d].loss * 100.0));
            parts.push(format!("loss {}", pair(pct(0), pct(1))));
        }
        if self.links.iter().any(|l| l.queue_bytes.is_some()) {
            let queue = |d: usize| {
                self.links[d]
                    .queue_bytes
                    .map_or("unlimited".to_string(), units::fmt_bytes)
            };
            let mut q = format!("queue {} {}", pair(queue(0), queue(1)), self.aqm.describe());
            if self.default_queue() {
                q.push_str(" (default: 1 BDP, at least 1 MiB)");
            }
            parts.push(q);
        }
        parts.push(format!("MTU {}", self.mtu));
        parts.push(format!(
            "offloads {}",
            if self.offloads { "on" } else { "off" }
        ));
        parts.push(format!("cc {}", self.cc));
        parts.push(format!("link {}", self.link.name()));
        if let Some(n) = self.nic_bps {
            parts.push(format!(
                "hosts' NICs {}",
                pair(units::fmt_bps(n[0]), units::fmt_bps(n[1]))
            ));
        }
        if self.ports > 1 {
            parts.push(format!("{} server ports", self.ports));
        }
        if self.tunnel != TunnelKind::None {
            parts.push(format!(
                "tunnel {} (MTU {})",
                self.tunnel.name(),
                self.tunnel.mtu(self.mtu)
            ));
        }
        if self.emulates_per_packet() {
            parts.push("emulated per packet".into());
        }
        parts.join(", ")
    }
}

/// What one calibration found.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Calibration {
    /// Configured round trip, ms.
    pub rtt_configured_ms: f64,
    /// Median TCP connect time (SYN to SYN-ACK), ms.
    pub rtt_connect_ms: f64,
    /// Median 1-byte request/response time, ms (min and max beside it).
    pub rtt_rr_ms: f64,
    pub rtt_rr_min_ms: f64,
    pub rtt_rr_max_ms: f64,
    /// TCP goodput the configured rate allows (None: no rate set).
    pub goodput_expected_bps: Option<f64>,
    /// Goodput one bulk flow measured (None: not measured).
    pub goodput_measured_bps: Option<f64>,
    /// Share of one core the emulator used while calibrating (None: netem).
    pub emulator_cpu_pct: Option<f64>,
    pub warnings: Vec<String>,
    /// The client->server wire rate configured, bits/s (None: no rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_rate_bps: Option<f64>,
    /// The most wire bits/s the link delivered over any window of
    /// `link_peak_window_s` of the bulk flow, timed by the server host's
    /// kernel as packets arrived (`lab::tap`); never above the rate, also
    /// when the emulator runs late.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_peak_bps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_peak_window_s: Option<f64>,
    /// How far behind its schedule the emulator ran while calibrating.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lateness: Option<Lateness>,
}

/// How far behind its schedule the emulator ran over a span, both
/// directions together: a host that is slow to wake it (a busy machine, a
/// VM's stolen time) costs the link capacity and adds delay, never rate.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Lateness {
    /// Seconds the counters cover.
    pub over_s: f64,
    /// Packets released, and those more than 1 ms after their schedule.
    pub released: u64,
    pub late: u64,
    /// The latest release since the emulator started, microseconds.
    pub max_late_us: u64,
    /// Time the link sat idle with a packet due, microseconds.
    pub lost_us: u64,
    /// Packets held back behind a stall's backlog to keep to the rate.
    pub paced: u64,
}

impl Lateness {
    /// Over `over_s` seconds of an emulator's counters.
    pub fn of(dirs: &[DirStats; 2], over_s: f64) -> Lateness {
        let [a, b] = dirs;
        Lateness {
            over_s,
            released: a.released + b.released,
            late: a.late + b.late,
            max_late_us: a.max_late_us.max(b.max_late_us),
            lost_us: a.lost_us.max(b.lost_us),
            paced: a.paced + b.paced,
        }
    }

    /// The share of the span the busier direction's link lost, percent.
    pub fn lost_pct(&self) -> f64 {
        if self.over_s > 0.0 {
            self.lost_us as f64 / 1e4 / self.over_s
        } else {
            0.0
        }
    }

    /// Whether the lateness shaped what was measured: the link lost more
    /// than 1% of its time.
    pub fn shaped(&self) -> bool {
        self.lost_pct() > 1.0
    }

    /// "emulator late: 312 of 14,090 releases over 1 ms late (latest 6.1 ms), the link idle 1.66 s with packets due (21%), 9,883 packets held to its rate"
    pub fn phrase(&self) -> String {
        let mut s = format!("{} of {} releases over 1 ms late", self.late, self.released);
        if self.late > 0 {
            s.push_str(&format!(
                " (latest {})",
                units::fmt_us(self.max_late_us as f64)
            ));
        }
        if self.lost_us > 0 {
            s.push_str(&format!(
                ", the link idle {} with packets due ({:.1}% of {})",
                units::fmt_us(self.lost_us as f64),
                self.lost_pct(),
                units::fmt_secs(self.over_s)
            ));
        }
        if self.paced > 0 {
            s.push_str(&format!(
                ", {} packets held back to keep to its rate",
                self.paced
            ));
        }
        s
    }

    /// The warning a result carries when [`Lateness::shaped`].
    pub fn warning(&self) -> Option<String> {
        self.shaped().then(|| {
            format!(
                "the emulator ran late ({}): this host's scheduling, not only the link, shaped the result (less throughput and more delay than the link gives; the link never passes more than its rate)",
                self.phrase()
            )
        })
    }
}

impl Calibration {
    /// The warnings this calibration deserves.
    pub fn judge(&self) -> Vec<String> {
        let mut w = Vec::new();
        let tol = (0.02 * self.rtt_configured_ms).max(0.5);
        if (self.rtt_rr_ms - self.rtt_configured_ms).abs() > tol {
            w.push(format!(
                "measured RTT {:.2} ms is off the configured {:.2} ms by more than {:.2} ms",
                self.rtt_rr_ms, self.rtt_configured_ms, tol
            ));
        }
        if let (Some(e), Some(m)) = (self.goodput_expected_bps, self.goodput_measured_bps) {
            if (m - e).abs() / e > 0.02 {
                w.push(format!(
                    "one flow measured {} where the configured rate allows {} ({:+.1}%)",
                    units::fmt_bps(m),
                    units::fmt_bps(e),
                    (m / e - 1.0) * 100.0
                ));
            }
        }
        if let Some(cpu) = self.emulator_cpu_pct {
            if cpu > 80.0 {
                w.push(format!(
                    "the emulator used {cpu:.0}% of a core: it may be the bottleneck"
                ));
            }
        }
        if let (Some(p), Some(r)) = (self.link_peak_bps, self.link_rate_bps) {
            if p > r * LINK_RATE_BOUND {
                w.push(format!(
                    "the link carried {} over its busiest {} of calibration, {:.2}% of its rate: more than a link passes (please report this)",
                    units::fmt_bps(p),
                    units::fmt_secs(self.link_peak_window_s.unwrap_or(0.0)),
                    p / r * 100.0
                ));
            }
        }
        if let Some(l) = self.lateness.as_ref().and_then(Lateness::warning) {
            w.push(l);
        }
        w
    }

    /// Two lines for humans.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "measured RTT {:.2} ms (connect {:.2} ms, rr min {:.2} max {:.2}) vs {:.2} ms configured",
            self.rtt_rr_ms,
            self.rtt_connect_ms,
            self.rtt_rr_min_ms,
            self.rtt_rr_max_ms,
            self.rtt_configured_ms
        );
        if let Some(m) = self.goodput_measured_bps {
            s.push_str(&format!("; one flow {}", units::fmt_bps(m)));
            if let Some(e) = self.goodput_expected_bps {
                s.push_str(&format!(
                    " of {} expected ({:.1}%)",
                    units::fmt_bps(e),
                    m / e * 100.0
                ));
            }
        }
        if let (Some(p), Some(r)) = (self.link_peak_bps, self.link_rate_bps) {
            s.push_str(&format!(
                "; the link's busiest {} {:.1}% of its rate",
                units::fmt_secs(self.link_peak_window_s.unwrap_or(0.0)),
                p / r * 100.0
            ));
        }
        if let Some(c) = self.emulator_cpu_pct {
            s.push_str(&format!("; emulator {c:.1}% of a core"));
        }
        if let Some(l) = &self.lateness {
            s.push_str(&format!(" ({})", l.phrase()));
        }
        s
    }
}

/// The most a lab link may carry over a window, of its rate: its schedule
/// is exact, and a release may come up to 250 µs early (the release window)
/// with one GSO packet (64 KiB) beside it: at 1 Gbit/s over 1 s, 0.08%.
pub const LINK_RATE_BOUND: f64 = 1.003;

/// Counters of one direction.
///
/// `packets`, `bytes`, `segments` and `wire_bytes` count the packets put on
/// the link (not dropped), at arrival; the packets that arrived are
/// `packets + dropped_loss + dropped_queue`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct DirStats {
    pub packets: u64,
    /// IP bytes (a GSO super-packet counts whole).
    pub bytes: u64,
    /// Bytes on the wire: IP bytes + 38 B framing per segment (+ the headers
    /// each extra segment of a GSO super-packet repeats).
    pub wire_bytes: u64,
    pub dropped_loss: u64,
    pub dropped_queue: u64,
    /// Largest number of wire bytes waiting for the bottleneck (counting the packet just queued).
    pub max_queue_bytes: u64,
    /// Packets released more than 1 ms after their scheduled time. The
    /// schedule starts from the packet's kernel arrival stamp, so time spent
    /// waiting in the kernel for the emulator to read it counts.
    pub late: u64,
    /// Wire segments of the packets counted in `packets` (= `packets` in per-packet mode).
    #[serde(default)]
    pub segments: u64,
    /// Packets released (accepted back into the kernel) so far; while
    /// running, `packets - released` are held.
    #[serde(default)]
    pub released: u64,
    /// Packets still held when the emulator stopped (dropped by the kernel
    /// when the queue closed; releasing them early would break the model).
    #[serde(default)]
    pub dropped_stop: u64,
    /// Largest release lateness seen, microseconds (a measure of the timer accuracy).
    #[serde(default)]
    pub max_late_us: u64,
    /// Verdicts the kernel refused: 0 unless the kernel dropped held packets
    /// itself (an interface went down) or a bug.
    #[serde(default)]
    pub verdict_errors: u64,
    /// Packets the kernel dropped because the queue was full (262144 held).
    #[serde(default)]
    pub kernel_queue_dropped: u64,
    /// Packets the kernel dropped because the netlink buffer (64 MB) was full:
    /// the emulator could not keep up.
    #[serde(default)]
    pub kernel_user_dropped: u64,
    /// Packets whose arrival time came from their kernel timestamp (the
    /// rest were timed when read).
    #[serde(default)]
    pub stamped: u64,
    /// Largest gap between a stamped packet's arrival and its read,
    /// microseconds: how long arrivals waited for the loop (harmless while
    /// it stays below the one-way delay).
    #[serde(default)]
    pub max_arrival_lag_us: u64,
    /// Packets the queue discipline dropped at dequeue (CoDel's control law).
    #[serde(default)]
    pub dropped_aqm: u64,
    /// Packets marked CE instead of dropped (ECN-capable ones).
    #[serde(default)]
    pub marked_ecn: u64,
    /// Time packets waited for the bottleneck (arrival to start of
    /// transmission), summed over `queue_delay_count` packets, microseconds.
    #[serde(default)]
    pub queue_delay_sum_us: u64,
    #[serde(default)]
    pub queue_delay_count: u64,
    /// The longest such wait, microseconds.
    #[serde(default)]
    pub queue_delay_max_us: u64,
    /// Packets the wire held past their schedule behind a backlog that a
    /// late wake-up of the emulator left: released at the link's rate, not
    /// at once (see `lab::wire`).
    #[serde(default)]
    pub paced: u64,
    /// Time the link sat idle with a packet due because the emulator ran
    /// late, microseconds: capacity the emulator's lateness cost the link.
    #[serde(default)]
    pub lost_us: u64,
}

impl DirStats {
    /// Mean wait for the bottleneck, microseconds (None: nothing waited).
    pub fn queue_delay_mean_us(&self) -> Option<f64> {
        (self.queue_delay_count > 0)
            .then(|| self.queue_delay_sum_us as f64 / self.queue_delay_count as f64)
    }
}

impl DirStats {
    /// ", 120 AQM drops, 40 ECN marks, queue delay mean 3.1 ms max 12 ms"
    /// (only the parts that happened).
    pub fn aqm_phrase(&self) -> String {
        let mut s = String::new();
        if self.dropped_aqm > 0 {
            s.push_str(&format!(", {} AQM drops", self.dropped_aqm));
        }
        if self.marked_ecn > 0 {
            s.push_str(&format!(", {} ECN marks", self.marked_ecn));
        }
        if let Some(m) = self.queue_delay_mean_us() {
            s.push_str(&format!(
                ", queue delay mean {} max {}",
                units::fmt_us(m),
                units::fmt_us(self.queue_delay_max_us as f64)
            ));
        }
        s
    }

    /// The counts of two emulators together; high-water marks (`max_*`)
    /// take the larger.
    pub fn plus(&self, o: &DirStats) -> DirStats {
        DirStats {
            packets: self.packets + o.packets,
            bytes: self.bytes + o.bytes,
            wire_bytes: self.wire_bytes + o.wire_bytes,
            dropped_loss: self.dropped_loss + o.dropped_loss,
            dropped_queue: self.dropped_queue + o.dropped_queue,
            max_queue_bytes: self.max_queue_bytes.max(o.max_queue_bytes),
            late: self.late + o.late,
            segments: self.segments + o.segments,
            released: self.released + o.released,
            dropped_stop: self.dropped_stop + o.dropped_stop,
            max_late_us: self.max_late_us.max(o.max_late_us),
            verdict_errors: self.verdict_errors + o.verdict_errors,
            kernel_queue_dropped: self.kernel_queue_dropped + o.kernel_queue_dropped,
            kernel_user_dropped: self.kernel_user_dropped + o.kernel_user_dropped,
            stamped: self.stamped + o.stamped,
            max_arrival_lag_us: self.max_arrival_lag_us.max(o.max_arrival_lag_us),
            dropped_aqm: self.dropped_aqm + o.dropped_aqm,
            marked_ecn: self.marked_ecn + o.marked_ecn,
            queue_delay_sum_us: self.queue_delay_sum_us + o.queue_delay_sum_us,
            queue_delay_count: self.queue_delay_count + o.queue_delay_count,
            queue_delay_max_us: self.queue_delay_max_us.max(o.queue_delay_max_us),
            paced: self.paced + o.paced,
            // Each link loses its own time: the most any one lost.
            lost_us: self.lost_us.max(o.lost_us),
        }
    }

    /// The counts since `before` (an earlier snapshot of the same process);
    /// high-water marks (`max_*`) keep this snapshot's value.
    pub fn since(&self, before: &DirStats) -> DirStats {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        DirStats {
            packets: d(self.packets, before.packets),
            bytes: d(self.bytes, before.bytes),
            wire_bytes: d(self.wire_bytes, before.wire_bytes),
            dropped_loss: d(self.dropped_loss, before.dropped_loss),
            dropped_queue: d(self.dropped_queue, before.dropped_queue),
            max_queue_bytes: self.max_queue_bytes,
            late: d(self.late, before.late),
            segments: d(self.segments, before.segments),
            released: d(self.released, before.released),
            dropped_stop: d(self.dropped_stop, before.dropped_stop),
            max_late_us: self.max_late_us,
            verdict_errors: d(self.verdict_errors, before.verdict_errors),
            kernel_queue_dropped: d(self.kernel_queue_dropped, before.kernel_queue_dropped),
            kernel_user_dropped: d(self.kernel_user_dropped, before.kernel_user_dropped),
            stamped: d(self.stamped, before.stamped),
            max_arrival_lag_us: self.max_arrival_lag_us,
            dropped_aqm: d(self.dropped_aqm, before.dropped_aqm),
            marked_ecn: d(self.marked_ecn, before.marked_ecn),
            queue_delay_sum_us: d(self.queue_delay_sum_us, before.queue_delay_sum_us),
            queue_delay_count: d(self.queue_delay_count, before.queue_delay_count),
            queue_delay_max_us: self.queue_delay_max_us,
            paced: d(self.paced, before.paced),
            lost_us: d(self.lost_us, before.lost_us),
        }
    }
}

/// The emulator's counters over one test (after minus before). A rack has
/// one emulator per client link: its counters are summed over all of them
/// (high-water marks: the largest), whichever clients the test used.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct EmulatorDelta {
    /// [client->server, server->client].
    pub dirs: [DirStats; 2],
    /// Share of one core the emulator used during the test (a rack's
    /// emulators together: up to 100% per emulator).
    pub cpu_pct: Option<f64>,
    /// How many emulators (client links) these counters sum: 1 but in a
    /// rack (results from before racks have 1).
    #[serde(default = "one")]
    pub emulators: u32,
    /// Seconds the counters cover (results before it: None).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_s: Option<f64>,
}

fn one() -> u32 {
    1
}

impl Default for EmulatorDelta {
    fn default() -> Self {
        EmulatorDelta {
            dirs: Default::default(),
            cpu_pct: None,
            emulators: 1,
            elapsed_s: None,
        }
    }
}

impl EmulatorDelta {
    /// The sum of several emulators' deltas (a rack's client links); None
    /// when given none.
    pub fn sum(all: &[EmulatorDelta]) -> Option<EmulatorDelta> {
        let (first, rest) = all.split_first()?;
        let mut out = first.clone();
        for e in rest {
            for d in 0..2 {
                out.dirs[d] = out.dirs[d].plus(&e.dirs[d]);
            }
            out.cpu_pct = match (out.cpu_pct, e.cpu_pct) {
                (Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
            out.emulators += e.emulators;
        }
        Some(out)
    }

    /// How far behind its schedule the emulator (the busiest of a rack's)
    /// ran over the test; None for results without the span.
    pub fn lateness(&self) -> Option<Lateness> {
        self.elapsed_s.map(|s| Lateness::of(&self.dirs, s))
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LabRecord {
    pub name: String,
    pub backend: String,
    pub backend_note: String,
    pub spec: Option<LabSpec>,
    /// The link in one line, as `lab status` prints it.
    pub link: String,
    pub calibration: Calibration,
    pub emulator: Option<EmulatorDelta>,
    /// TCP settings of the client and server namespaces, as read back.
    pub tcp: Vec<(String, String)>,
    pub warnings: Vec<String>,
    /// The tunnel the test's traffic took (None: the clear path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel: Option<TunnelInfo>,
    /// The tunnel interfaces' counters over the test, against linerate's bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel_bytes: Option<TunnelBytes>,
    /// CPU seconds of a userspace tunnel's processes over the test,
    /// [client's, server's] (each also counted in its end's CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel_cpu_s: Option<[f64; 2]>,
}

impl LabRecord {
    /// Warnings from the emulator's counters over the test.
    pub fn judge(&self, spec: &LabSpec) -> Vec<String> {
        let mut w = Vec::new();
        let Some(e) = &self.emulator else { return w };
        let names = ["client->server", "server->client"];
        for (d, x) in e.dirs.iter().enumerate() {
            if x.dropped_queue > 0 {
                w.push(format!(
                    "{}: the emulator's queue ({}) overflowed {} times: the queue, not only the window, shaped this test",
                    names[d],
                    spec.links[d]
                        .queue_bytes
                        .map_or("unlimited".into(), crate::units::fmt_bytes),
                    x.dropped_queue
                ));
            }
            if e.elapsed_s.is_none() && x.packets > 0 && x.late * 100 > x.packets {
                w.push(format!(
                    "{}: {} of {} packets left the emulator more than 1 ms late",
                    names[d], x.late, x.packets
                ));
            }
        }
        if let Some(l) = e.lateness().as_ref().and_then(Lateness::warning) {
            w.push(l);
        }
        if let Some(c) = e.cpu_pct {
            if c > 80.0 {
                let who = if e.emulators > 1 {
                    format!("the lab's {} emulators together", e.emulators)
                } else {
                    "the emulator".to_string()
                };
                w.push(format!(
                    "{who} used {c:.0}% of a core during the test: it may be the bottleneck"
                ));
            }
        }
        w
    }

    /// Lines for the human summary.
    pub fn describe(&self) -> Vec<String> {
        let mut v = vec![format!(
            "lab {}: {} (emulator {})",
            self.name, self.link, self.backend
        )];
        if let Some(t) = &self.tunnel {
            v.push(format!("tunnel {}", t.describe()));
        }
        v.push(format!("calibration: {}", self.calibration.describe()));
        if let Some(e) = &self.emulator {
            let mut s = if e.emulators > 1 {
                format!("{} emulators over the test (summed):", e.emulators)
            } else {
                String::from("emulator over the test:")
            };
            for (d, name) in [(0, "c->s"), (1, "s->c")] {
                let x = &e.dirs[d];
                s.push_str(&format!(
                    " {name} {} packets, {} lost, {} queue drops, max queue {}",
                    x.packets,
                    x.dropped_loss,
                    x.dropped_queue,
                    crate::units::fmt_bytes(x.max_queue_bytes)
                ));
                s.push_str(&x.aqm_phrase());
                s.push(';');
            }
            if let Some(c) = e.cpu_pct {
                s.push_str(&format!(" cpu {c:.1}% of a core"));
            }
            if let Some(l) = e.lateness().filter(|l| l.late > 0 || l.lost_us > 0) {
                s.push_str(&format!("; late: {}", l.phrase()));
            }
            v.push(s);
        }
        if let Some(b) = &self.tunnel_bytes {
            let mut line = b.describe();
            if let Some([c, s]) = self.tunnel_cpu_s {
                line.push_str(&format!(
                    "; tunnel processes' CPU {c:.2} s client, {s:.2} s server"
                ));
            }
            v.push(line);
        }
        for w in &self.warnings {
            v.push(format!("warning: {w}"));
        }
        v
    }
}
