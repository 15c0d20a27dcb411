//! What one flow reports when a test ends: its counters, the kernel's view
//! (TCP_INFO, granted buffers), the window its sender saw, its TLS session.

use serde::{Deserialize, Serialize};

use super::sample::TcpInfo;

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct FlowReport {
    pub flow: u32,
    pub worker: usize,
    pub local: String,
    pub peer: String,
    pub bytes_tx: u64,
    pub bytes_rx: u64,
    pub transactions: u64,
    /// Socket buffers granted by the kernel (Linux doubles requests).
    pub sndbuf: Option<u32>,
    pub rcvbuf: Option<u32>,
    pub congestion_control: Option<String>,
    pub tcp_info: Option<TcpInfo>,
    /// Seconds from the flow's first request to its last response (finite transfers).
    pub completed_s: Option<f64>,
    /// What the flow's TLS session negotiated (None: clear text).
    #[serde(default)]
    pub tls: Option<TlsInfo>,
    /// The peer's window while this end's writes were blocked (None: never blocked).
    #[serde(default)]
    pub observed_window: Option<ObservedWindow>,
    /// `--window exact` receivers: times the kernel moved the clamp and it was set again.
    #[serde(default)]
    pub window_clamp_repairs: Option<u32>,
    /// UDP flows: what this end sent and received over the whole test.
    /// Receive calls that returned payload (clear text: system calls;
    /// TLS: plaintext reads): bytes_rx / reads is what each read moved,
    /// at most the test's read size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reads: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpFlowStats>,
    /// QUIC flows: the connection's own view of its path and its datagrams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic: Option<QuicFlowStats>,
    /// The kind's own counts of this flow (memcache's `kv`), read by its
    /// kind (`model::own`); flattened, as the spec's.
    #[serde(flatten, default)]
    pub own: super::own::Own,
}

/// One QUIC connection at one end, over the whole test (handshake and
/// warm-up included), as quinn-proto counts it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct QuicFlowStats {
    /// The implementation and its version ("quinn-proto 0.11").
    pub implementation: String,
    /// The congestion controller ("cubic", "bbr", "newreno").
    pub congestion_control: String,
    /// Smoothed and minimum round trip, microseconds.
    pub rtt_us: f64,
    pub min_rtt_us: f64,
    /// Congestion window at the end, bytes; congestion events.
    pub cwnd: u64,
    pub congestion_events: u64,
    /// QUIC packets sent and declared lost (retransmitted as new ones).
    pub packets_sent: u64,
    pub packets_lost: u64,
    /// The path MTU it settled on (UDP payload bytes).
    pub mtu: u16,
    /// UDP datagrams sent and received, and the system calls that moved
    /// them (GSO sends and GRO receives carry several).
    pub datagrams_tx: u64,
    pub datagrams_rx: u64,
    pub send_calls: u64,
    pub recv_calls: u64,
    /// Frames that said flow control held the sender back.
    pub data_blocked: u64,
    /// Connections this flow made or accepted one after another
    /// (quic-crr; 0 in results from before it: one), and how many of them
    /// sent or took their request as 0-RTT early data.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub connections: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub zero_rtt: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One UDP flow at one end, over the whole test (warm-up included).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct UdpFlowStats {
    pub packets_tx: u64,
    pub packets_rx: u64,
    /// Received: sequence gaps not filled later (receiver drops included).
    pub lost: u64,
    pub late: u64,
    pub duplicates: u64,
    /// Datagrams the kernel dropped at this socket (its buffer was full).
    pub rcv_drops: u64,
    /// RFC 3550 interarrival jitter at the end, µs (receivers).
    pub jitter_us: Option<f64>,
    /// udp-rr clients: requests that timed out.
    pub timeouts: u64,
    /// udp-rr clients where the server's clock offset is known: one-way
    /// delays of the responses taken in the window, means (µs), how many,
    /// how many came out below zero in a direction (recorded as 0), and
    /// the offset's uncertainty (µs). Absent where the offset is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owd_up_mean_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owd_down_mean_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owd_samples: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owd_clamped: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owd_offset_uncertainty_us: Option<f64>,
    /// The one-way delay histograms (HDR V2, hex) of the flows that shared
    /// them with this one (one pair per client worker, carried by the last
    /// of its flows to report): the controller merges them into the
    /// iteration's figures and drops them from the report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owd_hists: Option<OwdHistText>,
}

/// One-way delay histograms as text (HDR V2, hex), up and down.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct OwdHistText {
    pub up: String,
    pub down: String,
}

/// The window a sender saw: median and largest of its samples.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ObservedWindow {
    pub median_bytes: u32,
    pub max_bytes: u32,
    pub samples: u32,
}

/// What one flow's TLS session negotiated, recorded in every result.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TlsInfo {
    pub backend: String,
    /// Library and crypto provider with versions.
    pub library: String,
    pub protocol: String,
    pub suite: String,
    pub kx_group: String,
    /// Encrypt-then-MAC (TLS 1.2 CBC suites only; None where it does not apply).
    pub etm: Option<bool>,
    pub cert: String,
    pub resumed: bool,
}
