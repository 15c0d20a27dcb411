//! `udp-stream`: datagrams of `message` bytes one way (or both), as fast as
//! the sender can (iperf3 -u -b 0, neper udp_stream) or paced (`--rate`
//! packets/s or a payload bit rate, in total over the flows). Senders batch
//! with sendmmsg (or one GSO datagram per batch with `--gso`); receivers
//! with recvmmsg, counting each datagram's sequence number (loss, late
//! fills, duplicates), its transit-time jitter (RFC 3550), and the kernel's
//! count of datagrams dropped at the socket (receiver drops).
//!
//! Every datagram of a batch carries the same send stamp (one clock read
//! per batch): jitter is measured between batches, not within one.

use mio::net::UdpSocket;
use mio::{Interest, Registry, Token};
use std::io;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use super::kind::KindFacts;
use super::RateColumn;
use super::{Conns, Pattern, Plugin, WorkloadError};
use crate::engine::flow::{Ctx, Flow, Status, BUDGET};
use crate::engine::udp::{mono_ns, Header, Kind, RecvBatch, SendBatch};
use crate::measure::udpseq::SeqTracker;
use crate::model::flow::{FlowReport, UdpFlowStats};
use crate::model::result::Iteration;
use crate::model::spec::{self, Direction, MainMetric, TestSpec, UDP_HEADER};
use crate::units::{fmt_bps, fmt_rate, fmt_us};
use std::fmt::Write as _;

pub struct UdpStream;

/// UDP_MAX_SEGMENTS of kernels before 6.9.
const OLD_MAX_SEGMENTS: usize = 64;

/// System calls a flow makes per turn before it yields, whatever its byte
/// budget: 64-byte datagrams sent one per call fill the 1 MiB budget in
/// 16,384 calls (about 60 ms), so a worker with 500 such flows went round
/// them once every 30 s and saw the end of the test a minute late (the
/// udp-small-packets study's 1,000-flow points). 256 calls is about 1 ms.
const CALLS_PER_TURN: usize = 256;

/// This kind's name in a spec, on the command line and in the registry.
pub const NAME: spec::Workload = spec::Workload::named("udp-stream");

impl Plugin for UdpStream {
    fn facts(&self) -> KindFacts {
        KindFacts {
            bulk: true,
            udp: true,
            search_loss: true,
            rate: true,
            datagrams: true,
            unpaced_sender: true,
            default_message: Some(crate::model::options::UDP_MESSAGE),
            default_exchange: Some(crate::model::options::UDP_RR),
            ..KindFacts::NONE
        }
    }

    fn rules(&self, spec: &TestSpec) -> Result<(), crate::model::error::Invalid> {
        super::rules::udp(spec, true)
    }

    fn kind(&self) -> spec::Workload {
        NAME
    }

    fn help(&self) -> &'static str {
        "UDP datagrams of `--message` bytes, as fast as possible or paced (`--rate`): packets/s, loss, reordering, jitter (iperf3 -u, neper udp_stream)"
    }

    fn pattern(&self) -> Pattern {
        Pattern::Datagram
    }

    fn describe(&self, spec: &TestSpec) -> String {
        let dir = super::direction_words(spec.direction);
        let mut s = format!(
            "udp-stream {dir}, {} B datagrams, {} per {}{}",
            spec.message,
            spec.udp_batch(),
            if spec.gso { "GSO send" } else { "sendmmsg" },
            if spec.gro { ", GRO on receive" } else { "" }
        );
        if let Some(r) = spec.rate {
            let _ = write!(s, ", paced at {} packets in total", fmt_rate(r));
        }
        if let Some(b) = spec.rate_bps {
            let _ = write!(s, ", paced at {} of payload in total", fmt_bps(b));
        }
        s
    }

    fn rate_column(&self, _spec: &TestSpec) -> RateColumn {
        RateColumn::Packets
    }

    fn report_lines(&self, spec: &TestSpec, it: &Iteration) -> Vec<(&'static str, String)> {
        udp_lines(spec, it, format!("{} B", spec.message), false)
    }

    fn main_metric(&self, _spec: &TestSpec) -> MainMetric {
        MainMetric::PacketRate
    }

    fn client_flows(
        &self,
        spec: &TestSpec,
        conns: Conns,
    ) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
        Ok(flows(spec, conns, false))
    }

    fn agent_flows(
        &self,
        spec: &TestSpec,
        conns: Conns,
    ) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
        Ok(flows(spec, conns, true))
    }
}

/// A UDP test's packets, loss (receiver drops apart), jitter, the kernel's
/// own count, and CPU per packet: `size` says a datagram's, and
/// `timeouts` shows the timed-out requests even when there were none.
pub fn udp_lines(
    spec: &TestSpec,
    it: &Iteration,
    size: String,
    timeouts: bool,
) -> Vec<(&'static str, String)> {
    let Some(u) = &it.udp else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    // "Sent" as the receiver accounts for it (received + lost, by sequence
    // numbers), so that it agrees with the loss line; the sender's own
    // count covers its window, offset from the receiver's by the datagrams
    // in flight at the edges (it once read 241.2k/s received of 239.6k/s
    // sent beside a loss of 0.5%).
    let accounted = (u.packets + u.lost) as f64 / it.duration_s.max(1e-9);
    lines.push((
        "packets",
        format!(
            "{} received of {} sent ({size}; {} on the wire with UDP/IP{} and Ethernet framing); the sender counted {} in its own window",
            fmt_rate(u.packets_per_s),
            fmt_rate(if u.packets > 0 { accounted } else { u.packets_sent_per_s }),
            fmt_bps(u.wire_bps),
            if spec.ipv6 { "v6" } else { "v4" },
            fmt_rate(u.packets_sent_per_s),
        ),
    ));
    lines.push((
        "loss",
        format!(
            "{:.3}% ({} of {}): receiver drops {} (socket buffer full), network {}; reordered {}, duplicates {}{}",
            u.loss_pct,
            u.lost,
            u.packets + u.lost,
            u.receiver_drops,
            u.network_lost,
            u.reordered,
            u.duplicates,
            if u.timeouts > 0 || timeouts {
                format!(", {} requests timed out", u.timeouts)
            } else {
                String::new()
            }
        ),
    ));
    if let Some(j) = u.jitter_us {
        lines.push((
            "jitter",
            format!(
                "{} (RFC 3550){}",
                fmt_us(j),
                u.transit_delta_us
                    .map(|d| format!(", mean |D| {} between consecutive datagrams", fmt_us(d)))
                    .unwrap_or_default()
            ),
        ));
    }
    if let Some(k) = u.kernel_in_datagrams {
        lines.push((
            "kernel udp",
            format!(
                "Udp InDatagrams +{k}, RcvbufErrors +{} (the receiving end's namespace, over its window)",
                u.kernel_rcvbuf_errors.unwrap_or(0)
            ),
        ));
    }
    let per = |v: Option<f64>| {
        v.map(|v| format!("{v:.3} µs"))
            .unwrap_or_else(|| "-".into())
    };
    lines.push((
        "cpu/packet",
        format!(
            "client {}, agent {} (process CPU per datagram sent or received)",
            per(u.client_us_per_packet),
            per(u.agent_us_per_packet)
        ),
    ));
    if let (Some(s), Some(r)) = (u.datagrams_per_send, u.datagrams_per_recv) {
        let send = if spec.gso { "GSO send" } else { "sendmmsg" };
        let recv = if spec.gro {
            "recvmmsg (GRO-coalesced datagrams counted one by one)"
        } else {
            "recvmmsg"
        };
        lines.push((
            "per call",
            format!(
                "{s:.1} datagrams per {send} (asked: {}), {r:.1} per {recv}",
                spec.udp_batch()
            ),
        ));
    }
    lines
}

fn flows(spec: &TestSpec, conns: Conns, agent: bool) -> Vec<Box<dyn Flow>> {
    let client_sends = spec.direction != Direction::Rx;
    let client_recvs = spec.direction != Direction::Tx;
    let (send, recv) = if agent {
        (client_recvs, client_sends)
    } else {
        (client_sends, client_recvs)
    };
    // Packets/s per flow when paced.
    let total_pps = spec
        .rate
        .or_else(|| spec.rate_bps.map(|b| b / (8.0 * spec.message as f64)));
    let per_flow = total_pps.map(|r| r / spec.flows as f64);
    conns
        .udp
        .into_iter()
        .map(|(id, s)| {
            Box::new(UdpStreamFlow::new(
                id,
                UdpSocket::from_std(s),
                conns.cookie,
                spec,
                send,
                recv,
                per_flow,
            )) as Box<dyn Flow>
        })
        .collect()
}

/// Open-loop pacing: packet n leaves at start + n / pps.
struct Pace {
    interval_ns: f64,
    start: Option<Instant>,
    sent: u64,
}

pub struct UdpStreamFlow {
    id: u32,
    sock: UdpSocket,
    cookie: u64,
    send: bool,
    recv: bool,
    message: usize,
    batch: usize,
    gso: bool,
    gro: bool,
    tx: SendBatch,
    rx: RecvBatch,
    seq: u64,
    tracker: SeqTracker,
    pace: Option<Pace>,
    stats: UdpFlowStats,
    last_drops: u32,
    /// Waiting for the socket to take more (paced senders).
    blocked: bool,
}

impl UdpStreamFlow {
    fn new(
        id: u32,
        sock: UdpSocket,
        cookie: u64,
        spec: &TestSpec,
        send: bool,
        recv: bool,
        pps: Option<f64>,
    ) -> Self {
        let batch = spec.udp_batch() as usize;
        let head = Header {
            kind: Kind::Data,
            flow: id,
            cookie,
            seq: 0,
            sent_ns: 0,
        };
        let payload: Vec<u8> = (0..spec.message).map(|i| (i % 251) as u8).collect();
        UdpStreamFlow {
            id,
            sock,
            cookie,
            send,
            recv,
            message: spec.message,
            batch,
            gso: spec.gso,
            gro: spec.gro,
            tx: SendBatch::new(if send { batch } else { 1 }, spec.message, &payload, head),
            // A receiver's slots hold any datagram (with GRO, a coalesced
            // 64 KiB of them, in fewer slots); a pure sender reads only the
            // odd control datagram.
            rx: match (recv, spec.gro) {
                (true, true) => RecvBatch::new(batch.min(8), 65_536),
                (true, false) => RecvBatch::new(batch, spec.message.max(UDP_HEADER) + 64),
                (false, _) => RecvBatch::new(4, spec.message.max(UDP_HEADER) + 64),
            },
            seq: 0,
            tracker: SeqTracker::default(),
            pace: pps.filter(|_| send).map(|p| Pace {
                interval_ns: 1e9 / p,
                start: None,
                sent: 0,
            }),
            stats: UdpFlowStats::default(),
            last_drops: 0,
            blocked: false,
        }
    }

    /// Sends up to `n` datagrams; returns how many went (fewer: the socket
    /// is full).
    fn send_some(&mut self, cx: &mut Ctx<'_>, n: usize) -> io::Result<usize> {
        let now = mono_ns();
        for i in 0..n {
            Header::restamp(self.tx.slot_mut(i), self.seq + i as u64, now);
        }
        let fd = self.sock.as_raw_fd();
        let sent = if self.gso && n > 1 {
            match self.tx.send_gso(fd, n) {
                // A kernel before 6.9 takes 64 segments per send, not 128:
                // from now on send what it takes.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) && n > OLD_MAX_SEGMENTS => {
                    self.batch = OLD_MAX_SEGMENTS;
                    self.tx.send_gso(fd, OLD_MAX_SEGMENTS)?
                }
                r => r?,
            }
        } else {
            self.tx.send(fd, n, None)?
        };
        self.seq += sent as u64;
        self.stats.packets_tx += sent as u64;
        cx.counters.packets_tx += sent as u64;
        cx.counters.udp_send_calls += (sent > 0) as u64;
        cx.counters.bytes_tx += (sent * self.message) as u64;
        Ok(sent)
    }

    /// As fast as the socket takes them, up to the budget.
    fn blast(&mut self, cx: &mut Ctx<'_>) -> Status {
        let mut moved = 0;
        for _ in 0..CALLS_PER_TURN {
            match self.send_some(cx, self.batch) {
                Ok(0) => return Status::Open,
                Ok(n) => moved += n * self.message,
                Err(e) => return self.failed(cx, e),
            }
            if moved >= BUDGET {
                break;
            }
        }
        Status::Busy
    }

    /// What is due by now, in batches; then a timer for the next packet.
    fn paced(&mut self, cx: &mut Ctx<'_>) -> Status {
        let now = cx.now;
        let pace = self.pace.as_mut().expect("a paced flow");
        let start = *pace.start.get_or_insert(now);
        let due_total = ((now - start).as_nanos() as f64 / pace.interval_ns) as u64 + 1;
        let mut due = due_total.saturating_sub(pace.sent);
        let interval_ns = pace.interval_ns;
        let mut moved = 0;
        while due > 0 {
            let n = (due as usize).min(self.batch);
            match self.send_some(cx, n) {
                Ok(sent) => {
                    self.pace.as_mut().unwrap().sent += sent as u64;
                    due -= sent as u64;
                    moved += sent * self.message;
                    if sent < n {
                        // Full: the writable event resumes.
                        self.blocked = true;
                        return Status::Open;
                    }
                }
                Err(e) => return self.failed(cx, e),
            }
            if moved >= BUDGET {
                return Status::Busy;
            }
        }
        self.blocked = false;
        let sent = self.pace.as_ref().unwrap().sent;
        let next = start + Duration::from_nanos((sent as f64 * interval_ns) as u64);
        cx.schedule(next.max(now + Duration::from_micros(1)));
        Status::Open
    }

    fn failed(&mut self, cx: &Ctx<'_>, e: io::Error) -> Status {
        if cx.stopping {
            // The peer closed its end after the window: expected.
            return Status::Done;
        }
        Status::Failed(e)
    }

    /// Counts one datagram; returns the payload bytes it brought.
    fn take(&mut self, cx: &mut Ctx<'_>, d: &[u8], now: u64) -> usize {
        let Some(h) = Header::read(d, self.cookie) else {
            return 0;
        };
        match h.kind {
            Kind::Data if h.flow == self.id => {
                let a = self.tracker.arrive(h.seq, h.sent_ns, now);
                let c = &mut *cx.counters;
                if a.duplicate {
                    c.duplicates += 1;
                    self.stats.duplicates += 1;
                    return 0;
                }
                c.packets_rx += 1;
                c.bytes_rx += d.len() as u64;
                c.seq_gaps += a.gaps;
                c.late += a.late as u64;
                if self.stats.packets_rx > 0 {
                    c.transit_delta_ns += a.transit_delta_ns;
                    c.transit_deltas += 1;
                }
                self.stats.packets_rx += 1;
                self.stats.lost += a.gaps;
                self.stats.late += a.late as u64;
                d.len()
            }
            Kind::Hello => {
                // A client whose ack was lost asks again.
                let mut b = [0u8; UDP_HEADER];
                Header {
                    kind: Kind::Ack,
                    seq: 0,
                    sent_ns: now,
                    ..h
                }
                .write(&mut b);
                let _ = self.sock.send(&b);
                0
            }
            _ => 0,
        }
    }

    /// KindFacts what arrived, up to the budget.
    fn receive(&mut self, cx: &mut Ctx<'_>) -> Status {
        // The batch is set aside while its datagrams are counted (an empty
        // one takes its place: no allocation).
        let mut rx = std::mem::replace(&mut self.rx, RecvBatch::new(0, 0));
        let status = self.receive_into(cx, &mut rx);
        self.rx = rx;
        status
    }

    fn receive_into(&mut self, cx: &mut Ctx<'_>, rx: &mut RecvBatch) -> Status {
        let fd = self.sock.as_raw_fd();
        let mut moved = 0;
        for _ in 0..CALLS_PER_TURN {
            let n = match rx.recv(fd) {
                Ok(0) => return Status::Open,
                Ok(n) => n,
                Err(e) => return self.failed(cx, e),
            };
            cx.counters.udp_recv_calls += 1;
            let now = mono_ns();
            let mut datagrams = 0;
            for i in 0..n {
                for d in rx.datagrams(i) {
                    moved += self.take(cx, d, now);
                    datagrams += 1;
                }
            }
            if let Some(d) = rx.drops {
                let mut new = d.wrapping_sub(self.last_drops) as u64;
                self.last_drops = d;
                if self.gro {
                    // The kernel counts dropped socket buffers, and with GRO
                    // one holds a coalesced run of datagrams: count each as
                    // many as this call's buffers held on average.
                    new = (new * datagrams).div_ceil(n as u64);
                }
                cx.counters.rcv_drops += new;
                self.stats.rcv_drops += new;
            }
            if moved >= BUDGET {
                break;
            }
        }
        Status::Busy
    }
}

impl Flow for UdpStreamFlow {
    fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        registry.register(
            &mut self.sock,
            token,
            Interest::READABLE | Interest::WRITABLE,
        )
    }

    fn ready(&mut self, cx: &mut Ctx<'_>, readable: bool, writable: bool) -> Status {
        let mut busy = false;
        if readable {
            match self.receive(cx) {
                Status::Busy => busy = true,
                Status::Open => {}
                other => return other,
            }
        }
        if self.send && writable {
            let s = match &self.pace {
                None => self.blast(cx),
                // Paced: the first call starts the clock; later ones only
                // resume a sender the socket had stopped.
                Some(p) if p.start.is_none() || self.blocked => self.paced(cx),
                Some(_) => Status::Open,
            };
            match s {
                Status::Busy => busy = true,
                Status::Open => {}
                other => return other,
            }
        }
        if busy {
            Status::Busy
        } else {
            Status::Open
        }
    }

    fn timer(&mut self, cx: &mut Ctx<'_>) -> Status {
        if self.pace.is_some() && !self.blocked {
            return self.paced(cx);
        }
        Status::Open
    }

    fn report(&self) -> Option<FlowReport> {
        let fd = self.sock.as_raw_fd();
        let (sndbuf, rcvbuf) = crate::measure::tcpinfo::granted_buffers(fd);
        let mut stats = self.stats.clone();
        stats.lost = stats.lost.saturating_sub(stats.late);
        stats.jitter_us = (self.recv && stats.packets_rx > 1).then(|| self.tracker.jitter_us());
        Some(FlowReport {
            flow: self.id,
            local: self
                .sock
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_default(),
            peer: self
                .sock
                .peer_addr()
                .map(|a| a.to_string())
                .unwrap_or_default(),
            bytes_tx: stats.packets_tx * self.message as u64,
            bytes_rx: stats.packets_rx * self.message as u64,
            transactions: 0,
            sndbuf,
            rcvbuf,
            udp: Some(stats),
            ..Default::default()
        })
    }

    fn persistent(&self) -> bool {
        true
    }
}
