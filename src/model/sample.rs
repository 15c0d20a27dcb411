//! What a side measures, as data: interval counters and samples, latency
//! summaries, CPU windows and costs, worker placement, TCP_INFO, and the
//! statistics of iterations. `measure/` fills them; results store them.

use serde::{Deserialize, Serialize};
use std::ops::{AddAssign, Sub};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Payload bytes received and sent (control headers excluded).
    pub bytes_rx: u64,
    pub bytes_tx: u64,
    /// Bytes this side's TCP senders saw the peer receive (acknowledged,
    /// cumulatively or by SACK), from TCP_INFO at the window's edges: where
    /// a byte reached the receiver, not when its application read it (see
    /// `tcpinfo::delivered`). Only flows that measure it (a continuous
    /// clear-text stream's senders) count; 0 otherwise.
    #[serde(default)]
    pub bytes_delivered: u64,
    /// Completed transactions (counted where the response is received).
    pub transactions: u64,
    /// Connections completed (crr) or accepted (agent side of crr).
    pub connections: u64,
    /// crr connections that ended with a FIN / with a reset.
    pub graceful_closes: u64,
    pub resets: u64,
    /// Flow errors (resets or failures before the window ended).
    pub errors: u64,
    /// TLS handshakes completed on connections made during the test (crr,
    /// tls-handshake), and how many of them resumed a session.
    #[serde(default)]
    pub tls_handshakes: u64,
    #[serde(default)]
    pub tls_resumed: u64,
    /// UDP: datagrams sent, and received new (duplicates not counted).
    #[serde(default)]
    pub packets_tx: u64,
    #[serde(default)]
    pub packets_rx: u64,
    /// UDP receivers: sequence numbers skipped (lost for now), and later
    /// arrivals that filled such a gap (reordered): loss = gaps - late.
    #[serde(default)]
    pub seq_gaps: u64,
    #[serde(default)]
    pub late: u64,
    #[serde(default)]
    pub duplicates: u64,
    /// UDP receivers: datagrams the kernel dropped at this end's sockets
    /// because their buffers were full (SO_RXQ_OVFL): receiver drops.
    #[serde(default)]
    pub rcv_drops: u64,
    /// udp-rr: requests unanswered after the timeout.
    #[serde(default)]
    pub timeouts: u64,
    /// UDP: system calls that sent datagrams (sendmmsg, or one GSO send)
    /// and that received some (recvmmsg): datagrams per call = packets /
    /// calls, what batching and GSO/GRO bought.
    #[serde(default)]
    pub udp_send_calls: u64,
    #[serde(default)]
    pub udp_recv_calls: u64,
    /// UDP receivers: the sum and count of |D| (RFC 3550 transit-time
    /// differences of consecutive packets), ns: their mean per interval.
    #[serde(default)]
    pub transit_delta_ns: u64,
    #[serde(default)]
    pub transit_deltas: u64,
    /// memcache: keys asked for by gets and sets done (memcached's cmd_get
    /// and cmd_set), gets that found their key and that did not, values
    /// that were not what was set (wrong length or content), and error
    /// replies (ERROR, CLIENT_ERROR, SERVER_ERROR).
    #[serde(default)]
    pub kv_gets: u64,
    #[serde(default)]
    pub kv_sets: u64,
    #[serde(default)]
    pub kv_hits: u64,
    #[serde(default)]
    pub kv_misses: u64,
    #[serde(default)]
    pub kv_bad_values: u64,
    #[serde(default)]
    pub kv_errors: u64,
    /// Open loops: time the workers busy-polled just before a request was
    /// due (`--pacing hybrid`), ns: CPU the client spent to send on time,
    /// counted in its process CPU.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pacing_spin_ns: u64,
    /// `--rx-poll`: time receivers spent polling an empty socket instead of
    /// sleeping, ns (counted in their process CPU); polls begun, and polls
    /// that ended with data (the rest slept).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rx_poll_ns: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rx_polls: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rx_poll_hits: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl AddAssign for Counters {
    fn add_assign(&mut self, o: Counters) {
        self.bytes_rx += o.bytes_rx;
        self.bytes_tx += o.bytes_tx;
        self.bytes_delivered += o.bytes_delivered;
        self.transactions += o.transactions;
        self.connections += o.connections;
        self.graceful_closes += o.graceful_closes;
        self.resets += o.resets;
        self.errors += o.errors;
        self.tls_handshakes += o.tls_handshakes;
        self.tls_resumed += o.tls_resumed;
        self.packets_tx += o.packets_tx;
        self.packets_rx += o.packets_rx;
        self.seq_gaps += o.seq_gaps;
        self.late += o.late;
        self.duplicates += o.duplicates;
        self.rcv_drops += o.rcv_drops;
        self.timeouts += o.timeouts;
        self.udp_send_calls += o.udp_send_calls;
        self.udp_recv_calls += o.udp_recv_calls;
        self.transit_delta_ns += o.transit_delta_ns;
        self.transit_deltas += o.transit_deltas;
        self.kv_gets += o.kv_gets;
        self.kv_sets += o.kv_sets;
        self.kv_hits += o.kv_hits;
        self.kv_misses += o.kv_misses;
        self.kv_bad_values += o.kv_bad_values;
        self.kv_errors += o.kv_errors;
        self.pacing_spin_ns += o.pacing_spin_ns;
        self.rx_poll_ns += o.rx_poll_ns;
        self.rx_polls += o.rx_polls;
        self.rx_poll_hits += o.rx_poll_hits;
    }
}

impl Sub for Counters {
    type Output = Counters;
    fn sub(self, o: Counters) -> Counters {
        Counters {
            bytes_rx: self.bytes_rx - o.bytes_rx,
            bytes_tx: self.bytes_tx - o.bytes_tx,
            bytes_delivered: self.bytes_delivered - o.bytes_delivered,
            transactions: self.transactions - o.transactions,
            connections: self.connections - o.connections,
            graceful_closes: self.graceful_closes - o.graceful_closes,
            resets: self.resets - o.resets,
            errors: self.errors - o.errors,
            tls_handshakes: self.tls_handshakes - o.tls_handshakes,
            tls_resumed: self.tls_resumed - o.tls_resumed,
            packets_tx: self.packets_tx - o.packets_tx,
            packets_rx: self.packets_rx - o.packets_rx,
            seq_gaps: self.seq_gaps - o.seq_gaps,
            late: self.late - o.late,
            duplicates: self.duplicates - o.duplicates,
            rcv_drops: self.rcv_drops - o.rcv_drops,
            timeouts: self.timeouts - o.timeouts,
            udp_send_calls: self.udp_send_calls - o.udp_send_calls,
            udp_recv_calls: self.udp_recv_calls - o.udp_recv_calls,
            transit_delta_ns: self.transit_delta_ns - o.transit_delta_ns,
            transit_deltas: self.transit_deltas - o.transit_deltas,
            kv_gets: self.kv_gets - o.kv_gets,
            kv_sets: self.kv_sets - o.kv_sets,
            kv_hits: self.kv_hits - o.kv_hits,
            kv_misses: self.kv_misses - o.kv_misses,
            kv_bad_values: self.kv_bad_values - o.kv_bad_values,
            kv_errors: self.kv_errors - o.kv_errors,
            pacing_spin_ns: self.pacing_spin_ns - o.pacing_spin_ns,
            rx_poll_ns: self.rx_poll_ns - o.rx_poll_ns,
            rx_polls: self.rx_polls - o.rx_polls,
            rx_poll_hits: self.rx_poll_hits - o.rx_poll_hits,
        }
    }
}

impl Counters {
    /// UDP: datagrams lost on the way (gaps not filled later), receiver
    /// drops included.
    pub fn lost(&self) -> u64 {
        self.seq_gaps.saturating_sub(self.late)
    }
}

/// The kernel's UDP counters (/proc/net/snmp and snmp6 of one network
/// namespace), or their change over a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelUdp {
    pub in_datagrams: u64,
    pub rcvbuf_errors: u64,
    pub in_errors: u64,
}

impl KernelUdp {
    pub fn since(&self, before: &KernelUdp) -> KernelUdp {
        KernelUdp {
            in_datagrams: self.in_datagrams.saturating_sub(before.in_datagrams),
            rcvbuf_errors: self.rcvbuf_errors.saturating_sub(before.rcvbuf_errors),
            in_errors: self.in_errors.saturating_sub(before.in_errors),
        }
    }
}

/// One side's totals over one interval, after merging its workers.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct IntervalSample {
    pub index: usize,
    /// Seconds since the window started (warm-up end).
    pub start_s: f64,
    pub end_s: f64,
    pub counters: Counters,
    /// Latency of transactions completed in this interval (client side).
    pub latency_us: Option<LatencySummary>,
    /// Latency from the intended send time (open-loop rr only).
    pub latency_corrected_us: Option<LatencySummary>,
    /// Host and process CPU over this interval.
    pub cpu: Option<CpuWindow>,
}

/// The other end's clock against this end's (CLOCK_MONOTONIC, other minus
/// this), as the controller knows it: what a udp-rr client needs to split
/// each round trip into its two one-way delays. Built from each end's
/// offset to the controller (the controller's own is 0 exactly): offset
/// server minus offset client, uncertainty the sum of theirs (0 where both
/// ends run on the controller's kernel, whose clock differs between
/// processes only by their time namespaces' offsets, read exactly).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerClock {
    pub offset_ns: i64,
    pub uncertainty_ns: u64,
}

/// What an end's own scheduling added, as the control protocol carries it
/// (histograms encoded as `measure::histogram::encode` does).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct EncodedWaits {
    pub send_late: String,
    pub read_delay: String,
    #[serde(default)]
    pub held: String,
    #[serde(default)]
    pub net: String,
}

/// Where an open loop's latency came from, beside the latency itself: how
/// late the client's sender was, and how long each message waited in the
/// receiving end's socket before that end woke to read it (from the
/// kernel's receive stamp). A tail that is mostly the sender's lateness,
/// or one end's read delay, is that host's scheduling, not the network's
/// or the server's work.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Waits {
    /// The latency from each request's due time less its sender's own
    /// lateness (`held` plus the latency from the send): what the system
    /// under test imposed, whatever the generator's host did. A capacity
    /// search judges this figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_us: Option<LatencySummary>,
    /// Each request held back from its due time until a slot was free
    /// (all `--outstanding` in flight): its queue behind slower ones, the
    /// server's doing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_us: Option<LatencySummary>,
    /// Each request's send after it could go (due, and a slot free): the
    /// client's own lateness (open loops).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_late_us: Option<LatencySummary>,
    /// Responses: their arrival in the client's socket to the client's read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_read_delay_us: Option<LatencySummary>,
    /// Requests: their arrival in the agent's socket to the agent's read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_read_delay_us: Option<LatencySummary>,
}

/// Which part set an open loop's tail (see [`Waits::tail`]).
#[derive(Clone, Debug, PartialEq)]
pub struct TailSource {
    /// "the queue behind earlier requests", "the client's sender" or "the
    /// agent's reads".
    pub who: &'static str,
    /// Its p99, µs, and the latency's p99 it is a part of.
    pub part_p99_us: f64,
    pub tail_p99_us: f64,
    /// When the queue set it: what held the queue up, of the agent's
    /// reads and the client's sender, the slower one that was at least
    /// half the tail too, with its p99, µs. The agent's reads: the
    /// requests the queue waited behind were the agent's to read; the
    /// client's sender: the client itself was stalled (a client that
    /// cannot send cannot read the response either, and the next
    /// requests wait).
    pub held_up_by: Option<(&'static str, f64)>,
}

impl Waits {
    /// Whether anything was measured.
    pub fn is_empty(&self) -> bool {
        self.send_late_us.is_none()
            && self.net_us.is_none()
            && self.held_us.is_none()
            && self.client_read_delay_us.is_none()
            && self.agent_read_delay_us.is_none()
    }

    /// The part that set a latency whose p99 is `tail_p99_us`: the largest
    /// of the queue behind earlier requests, the sender's lateness and the
    /// agent's read delay whose p99 is at least half of it (a wait that
    /// long on one request in a hundred puts the tail there); None when
    /// none is (the path or the server's work set it). The client's read
    /// delay is not a part: an open loop's latency ends at the response's
    /// kernel stamp, before it.
    pub fn tail(&self, tail_p99_us: f64) -> Option<TailSource> {
        self.tail_of(tail_p99_us, true)
    }

    /// The part that set the tail of the net latency ([`Waits::net_us`]),
    /// which leaves the sender's lateness out: the queue or the agent's
    /// reads.
    pub fn net_tail(&self) -> Option<TailSource> {
        self.tail_of(self.net_us.as_ref()?.p99, false)
    }

    fn tail_of(&self, tail_p99_us: f64, sender: bool) -> Option<TailSource> {
        let qualifies = |l: &Option<LatencySummary>| {
            l.as_ref()
                .map(|l| l.p99)
                .filter(|p| *p >= 0.5 * tail_p99_us && tail_p99_us > 0.0)
        };
        let reads = qualifies(&self.agent_read_delay_us);
        let late = qualifies(&self.send_late_us);
        // What held a queue up needs not be half the tail itself: the
        // queue adds up its stalls, and one request may wait behind
        // several. So the slower of the agent's reads and the client's
        // sender is named when it is an eighth of the tail and four times
        // the other. An agent stalled 2 ms in every 10 on this VM: reads
        // p99 1.74 ms, sends 50-108 µs, under a tail of 4.01 ms in one run
        // and 7.12 ms in another (a quarter, the rule before, missed it).
        // Below an eighth a part is the queue's noise, not its cause.
        let p99_of = |l: &Option<LatencySummary>| l.as_ref().map_or(0.0, |l| l.p99);
        let (r, l) = (
            p99_of(&self.agent_read_delay_us),
            p99_of(&self.send_late_us),
        );
        let (who, p, other) = if r >= l {
            ("the agent's reads", r, l)
        } else {
            ("the client's sender", l, r)
        };
        let held_up_by =
            (tail_p99_us > 0.0 && p >= 0.125 * tail_p99_us && p >= 4.0 * other).then_some((who, p));
        [
            (
                "the queue behind earlier requests",
                qualifies(&self.held_us),
            ),
            ("the client's sender", late.filter(|_| sender)),
            ("the agent's reads", reads),
        ]
        .into_iter()
        .filter_map(|(who, p)| p.map(|p| (who, p)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(who, p99)| TailSource {
            who,
            part_p99_us: p99,
            tail_p99_us,
            held_up_by: held_up_by.filter(|_| who.starts_with("the queue")),
        })
    }
}

impl TailSource {
    /// "the client's sender (late p99 612.0 µs; latency p99 701.3 µs)"
    pub fn phrase(&self) -> String {
        let what = if self.who.ends_with("sender") {
            "late"
        } else if self.who.starts_with("the queue") {
            "held"
        } else {
            "read delay"
        };
        let mut s = format!(
            "{} ({what} p99 {}; latency p99 {})",
            self.who,
            crate::units::fmt_us(self.part_p99_us),
            crate::units::fmt_us(self.tail_p99_us)
        );
        if let Some((who, p99)) = self.held_up_by {
            let what = if who.ends_with("sender") {
                "late"
            } else {
                "read delay"
            };
            s.push_str(&format!(
                ", which {who} held up ({what} p99 {})",
                crate::units::fmt_us(p99)
            ));
        }
        s
    }
}

/// Percentiles in microseconds; the names are part of the result schema.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LatencySummary {
    pub count: u64,
    pub mean: f64,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

/// The client's latency as cumulative counts at fixed bounds, 1, 2 and 5
/// times each power of ten from 1 µs to 10 s: what a histogram metric
/// exports (`--metrics`, OpenMetrics), bounded in size whatever the test.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LatencyBuckets {
    /// Upper bounds, µs.
    pub le_us: Vec<f64>,
    /// Latencies at most each bound.
    pub cumulative: Vec<u64>,
    pub count: u64,
    /// The latencies' sum, µs.
    pub sum_us: f64,
}

/// CPU use over a window between two snapshots.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct CpuWindow {
    pub wall_s: f64,
    pub ncores: usize,
    /// Host utilization, percent of all cores (100 = every core busy).
    pub host_util_pct: f64,
    pub user_pct: f64,
    pub system_pct: f64,
    pub irq_pct: f64,
    pub softirq_pct: f64,
    pub iowait_pct: f64,
    /// Time the hypervisor ran someone else: not ours, but it slows us.
    pub steal_pct: f64,
    /// Busy percent of each core, in core order.
    pub per_core_util_pct: Vec<f64>,
    /// This process's CPU, percent of all cores (comparable to host_util_pct).
    pub process_util_pct: f64,
    /// This process's CPU in cores (1.0 = one core fully busy).
    pub process_cores: f64,
    pub process_cpu_s: f64,
    pub process_user_s: f64,
    pub process_system_s: f64,
    /// CPU seconds of this end's userspace tunnel (wireguard-go in its
    /// network namespace) over the window, already counted in the
    /// process figures above so that CPU per KB includes it (None: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel_cpu_s: Option<f64>,
}

/// memcache: the prefill that set every key before the window.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct KvPrefill {
    pub keys: u64,
    pub bytes: u64,
    pub seconds: f64,
    /// Connections it used.
    pub connections: u32,
    /// Sets answered with an error (SERVER_ERROR out of memory, ...).
    #[serde(default)]
    pub errors: u64,
}

/// A server process the agent ran for the test (memcached): what it
/// counted over the window, from its own `stats`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ServiceWindow {
    /// "memcached 1.6.38".
    pub name: String,
    /// Its process, when the agent started it (its CPU is the agent's
    /// process CPU); None for a `--target` nobody here started.
    #[serde(default)]
    pub pid: Option<u32>,
    /// Running counts over the window (end - start): cmd_get, cmd_set,
    /// get_hits, get_misses, evictions, bytes_read, ...
    #[serde(default)]
    pub delta: std::collections::BTreeMap<String, i64>,
    /// Levels at the window's end: curr_items, bytes, curr_connections, ...
    #[serde(default)]
    pub end: std::collections::BTreeMap<String, i64>,
}

/// Service demand: CPU microseconds per KiB moved and per transaction, from
/// this process's CPU time (on loopback the host figure holds both ends).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct CpuCost {
    pub host_util_pct: f64,
    pub process_util_pct: f64,
    pub process_cores: f64,
    /// Process CPU µs per KiB (1024 B) of payload counted at the receivers,
    /// less the time its receiver polled (`--rx-poll`: waiting, not work).
    pub us_per_kb: Option<f64>,
    /// Process CPU µs per transaction.
    pub us_per_tx: Option<f64>,
    /// Host-wide CPU µs per KiB (netperf's definition; includes the other end on loopback).
    pub host_us_per_kb: Option<f64>,
    pub steal_pct: f64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct WorkerPlacement {
    pub worker: usize,
    /// CPUs this worker was pinned to (None: not pinned).
    pub pinned: Option<Vec<usize>>,
    pub allowed: Vec<usize>,
    /// CPUs the worker was seen running on, with the share of samples (%).
    pub seen: Vec<(usize, f64)>,
    pub flows: usize,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Estimate {
    pub n: usize,
    pub mean: f64,
    pub stddev: f64,
    /// Confidence level in percent (e.g. 99).
    pub level_pct: f64,
    /// Half-width of the confidence interval, in the metric's unit (None for n < 2).
    pub half_width: Option<f64>,
    /// Half-width as a percent of the mean.
    pub half_width_pct: Option<f64>,
    pub min: f64,
    pub max: f64,
}

/// Iteration policy: at least `min`, at most `max` runs, stop early once the
/// interval at `level_pct` is within +/- `width_pct`/2 of the mean.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct Confidence {
    pub min: usize,
    pub max: usize,
    pub level_pct: f64,
    pub width_pct: f64,
}

impl Default for Confidence {
    fn default() -> Self {
        Confidence {
            min: 1,
            max: 1,
            level_pct: 99.0,
            width_pct: 5.0,
        }
    }
}

/// The fields a performance engineer reads, in their natural units.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TcpInfo {
    pub rtt_us: u32,
    pub rttvar_us: u32,
    pub min_rtt_us: Option<u32>,
    pub snd_cwnd: u32,
    pub snd_ssthresh: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    pub pmtu: u32,
    pub total_retrans: u32,
    pub bytes_retrans: Option<u64>,
    pub delivery_rate_bps: Option<u64>,
    pub pacing_rate_bps: Option<u64>,
    pub bytes_acked: Option<u64>,
    pub bytes_received: Option<u64>,
    /// Segments carrying data, sent and received: bytes / segments is the
    /// average segment size (small ones mean per-packet cost dominates).
    pub data_segs_out: Option<u32>,
    pub data_segs_in: Option<u32>,
    /// Peer's advertised window after scaling (what limits this sender).
    pub snd_wnd: Option<u32>,
    /// Our advertised window after scaling.
    pub rcv_wnd: Option<u32>,
    pub snd_wscale: u8,
    pub rcv_wscale: u8,
    /// Microseconds the sender was limited by the receive window / send buffer.
    pub rwnd_limited_us: Option<u64>,
    pub sndbuf_limited_us: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p99(v: f64) -> Option<LatencySummary> {
        Some(LatencySummary {
            count: 100,
            p99: v,
            ..Default::default()
        })
    }

    #[test]
    fn the_tail_names_its_largest_part_and_what_held_the_queue_up() {
        let w = Waits {
            net_us: p99(2900.0),
            held_us: p99(2680.0),
            send_late_us: p99(60.0),
            agent_read_delay_us: p99(1890.0),
            client_read_delay_us: p99(5000.0),
        };
        let t = w.tail(3170.0).unwrap();
        assert_eq!(t.who, "the queue behind earlier requests");
        assert_eq!(
            t.phrase(),
            "the queue behind earlier requests (held p99 2.68 ms; latency p99 3.17 ms), which the agent's reads held up (read delay p99 1.89 ms)"
        );
        // The client's own read delay is after the latency's end: never named.
        let quiet = Waits {
            held_us: p99(10.0),
            agent_read_delay_us: p99(20.0),
            ..w.clone()
        };
        assert_eq!(quiet.tail(3170.0), None);
        // The net latency leaves the sender out: a late sender is not its tail.
        let late = Waits {
            net_us: p99(100.0),
            held_us: p99(5.0),
            send_late_us: p99(2000.0),
            agent_read_delay_us: p99(20.0),
            client_read_delay_us: None,
        };
        assert_eq!(late.tail(2100.0).unwrap().who, "the client's sender");
        assert_eq!(late.net_tail(), None);
        // A stalled client: it could not send, nor read the response in
        // flight, so the next requests queued; the queue is the larger
        // part, and what held it up was the client (seen with a busy loop
        // beside the agent and the client's CPU stalled 2 ms in every 10).
        let stalled = Waits {
            net_us: p99(3620.0),
            held_us: p99(3140.0),
            send_late_us: p99(2020.0),
            agent_read_delay_us: p99(21.5),
            client_read_delay_us: p99(38.2),
        };
        assert_eq!(
            stalled.tail(3640.0).unwrap().phrase(),
            "the queue behind earlier requests (held p99 3.14 ms; latency p99 3.64 ms), which the client's sender held up (late p99 2.02 ms)"
        );
        assert!(stalled
            .net_tail()
            .unwrap()
            .phrase()
            .ends_with("which the client's sender held up (late p99 2.02 ms)"));
        // A stalled agent beside a busy loop: its reads are under half the
        // tail, but they held the queue up, not the client.
        let agent = Waits {
            net_us: p99(3960.0),
            held_us: p99(3510.0),
            send_late_us: p99(49.9),
            agent_read_delay_us: p99(1740.0),
            client_read_delay_us: p99(35.6),
        };
        assert!(agent
            .tail(4010.0)
            .unwrap()
            .phrase()
            .ends_with("which the agent's reads held up (read delay p99 1.74 ms)"));
        // The same stall under a queue that stacked several of them (a
        // tail of 7.12 ms, seen in a whole run of tests/capacity.rs).
        let stacked = Waits {
            held_us: p99(6620.0),
            send_late_us: p99(107.6),
            ..agent.clone()
        };
        assert!(stacked
            .tail(7120.0)
            .unwrap()
            .phrase()
            .ends_with("which the agent's reads held up (read delay p99 1.74 ms)"));
        // A part under an eighth of the tail is not named, however far
        // above the other end it is.
        let small = Waits {
            agent_read_delay_us: p99(800.0),
            send_late_us: p99(50.0),
            ..stacked.clone()
        };
        assert_eq!(small.tail(7120.0).unwrap().held_up_by, None);
        // Both slow alike: neither is named.
        let both = Waits {
            send_late_us: p99(1500.0),
            ..agent.clone()
        };
        assert_eq!(both.tail(4010.0).unwrap().held_up_by, None);
    }

    #[test]
    fn counters_add_and_subtract() {
        let a = Counters {
            bytes_rx: 10,
            transactions: 2,
            ..Default::default()
        };
        let mut b = Counters {
            bytes_rx: 5,
            resets: 1,
            ..Default::default()
        };
        b += a;
        assert_eq!(b.bytes_rx, 15);
        assert_eq!(
            b - a,
            Counters {
                bytes_rx: 5,
                resets: 1,
                ..Default::default()
            }
        );
    }
}
