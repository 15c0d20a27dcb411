//! `udp-rr`: request/response over UDP (netperf UDP_RR, neper udp_rr). The
//! client keeps `outstanding` requests in flight per flow; a response
//! completes its request (latency from the send stamp into the same HDR
//! histograms as `rr`); a request unanswered after `timeout_s` is counted
//! as timed out and replaced, so a lossy path slows the test down but never
//! hangs it. The agent answers each request with `response` bytes.
//!
//! Open loop (`--rate`, transactions/s over all flows): request i of a flow
//! is due at `start + i / rate` and sent when due with fewer than
//! `outstanding` in flight, as `rr` does; its latency is also taken from
//! the due time (coordinated omission). A probe at a modest rate, such as
//! rrul's, then loads the path with its own packets only.

use mio::net::UdpSocket;
use mio::{Interest, Registry, Token};
use std::io;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use super::{Conns, Pattern, Plugin, Supports, WorkloadError};
use crate::engine::flow::{Ctx, Flow, Status};
use crate::engine::udp::{mono_ns, Header, Kind, RecvBatch, SendBatch};
use crate::measure::histogram::record_ns;
use crate::model::flow::{FlowReport, UdpFlowStats};
use crate::model::result::Iteration;
use crate::model::spec::{self, MainMetric, TestSpec};
use crate::units::{fmt_bytes, fmt_us};
use std::fmt::Write as _;

pub struct UdpRr;

impl Plugin for UdpRr {
    fn kind(&self) -> spec::Workload {
        spec::Workload::UdpRr
    }

    fn pattern(&self) -> Pattern {
        Pattern::Datagram
    }

    fn describe(&self, spec: &TestSpec) -> String {
        let mut s = format!(
            "udp-rr {}/{}, timeout {}",
            fmt_bytes(spec.request),
            fmt_bytes(spec.response),
            fmt_us(spec.timeout_s * 1e6)
        );
        if spec.outstanding > 1 {
            let _ = write!(s, ", {} outstanding", spec.outstanding);
        }
        if let Some(r) = spec.rate {
            let _ = write!(s, ", open loop at {} total", crate::units::fmt_rate(r));
        }
        s
    }

    fn report_lines(&self, spec: &TestSpec, it: &Iteration) -> Vec<(&'static str, String)> {
        let size = format!("{}/{} B", spec.request, spec.response);
        super::udp_stream::udp_lines(spec, it, size, true)
    }

    fn supports(&self) -> Supports {
        Supports {
            rate: true,
            ..Default::default()
        }
    }

    fn main_metric(&self, _spec: &TestSpec) -> MainMetric {
        MainMetric::TransactionRate
    }

    fn client_flows(
        &self,
        spec: &TestSpec,
        conns: Conns,
    ) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
        let flows = conns.udp.len().max(1) as f64;
        Ok(conns
            .udp
            .into_iter()
            .map(|(id, s)| {
                Box::new(
                    Requester::new(id, UdpSocket::from_std(s), conns.cookie, spec)
                        .open_loop(spec.rate.map(|r| r / flows)),
                ) as Box<dyn Flow>
            })
            .collect())
    }

    fn agent_flows(
        &self,
        spec: &TestSpec,
        conns: Conns,
    ) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
        Ok(conns
            .udp
            .into_iter()
            .map(|(id, s)| {
                Box::new(Responder::new(
                    id,
                    UdpSocket::from_std(s),
                    conns.cookie,
                    spec,
                )) as Box<dyn Flow>
            })
            .collect())
    }
}

/// Most datagrams taken per call before yielding to the other flows.
const BUDGET_PACKETS: usize = 4096;

pub struct Requester {
    id: u32,
    sock: UdpSocket,
    cookie: u64,
    outstanding: usize,
    timeout: Duration,
    /// Requests in flight: (sequence number, send time in ns), at most
    /// `outstanding` of them, oldest first (a short list: no allocation
    /// per transaction, as a map would make).
    inflight: Vec<(u64, u64)>,
    seq: u64,
    tx: SendBatch,
    rx: RecvBatch,
    timer_at: Option<Instant>,
    stats: UdpFlowStats,
    transactions: u64,
    /// Open loop: time between this flow's requests, its first request's
    /// due time, and when the timer for the next due request is set.
    period: Option<Duration>,
    start: Option<Instant>,
    due_at: Option<Instant>,
}

impl Requester {
    fn new(id: u32, sock: UdpSocket, cookie: u64, spec: &TestSpec) -> Self {
        let outstanding = spec.outstanding as usize;
        let head = Header {
            kind: Kind::Request,
            flow: id,
            cookie,
            seq: 0,
            sent_ns: 0,
        };
        let payload: Vec<u8> = (0..spec.request).map(|i| (i % 251) as u8).collect();
        Requester {
            id,
            sock,
            cookie,
            outstanding,
            timeout: Duration::from_secs_f64(spec.timeout_s),
            inflight: Vec::with_capacity(outstanding),
            seq: 0,
            tx: SendBatch::new(outstanding, spec.request as usize, &payload, head),
            rx: RecvBatch::new(
                outstanding.min(spec.udp_batch() as usize).max(1),
                spec.response as usize + 64,
            ),
            timer_at: None,
            stats: UdpFlowStats::default(),
            transactions: 0,
            period: None,
            start: None,
            due_at: None,
        }
    }

    /// Open loop at `rate` requests/s (None: closed loop).
    fn open_loop(mut self, rate: Option<f64>) -> Self {
        self.period = rate
            .filter(|r| *r > 0.0)
            .map(|r| Duration::from_secs_f64(1.0 / r));
        self
    }

    /// Open loop: when request `seq` is due.
    fn due(&self, seq: u64) -> Option<Instant> {
        let (p, s) = (self.period?, self.start?);
        Some(s + p.mul_f64(seq as f64))
    }

    /// How many requests may go now: up to `outstanding` in flight, and in
    /// open loop only those due (the timer is set for the next one).
    fn allowed(&mut self, cx: &mut Ctx<'_>) -> usize {
        let free = self.outstanding - self.inflight.len();
        if self.period.is_none() {
            return free;
        }
        self.start.get_or_insert(cx.now);
        let mut n = 0;
        while n < free {
            match self.due(self.seq + n as u64) {
                Some(t) if t <= cx.now => n += 1,
                Some(t) => {
                    if self.due_at.is_none() {
                        self.due_at = Some(t);
                        cx.schedule(t);
                    }
                    break;
                }
                None => break,
            }
        }
        n
    }

    /// Sends requests until `outstanding` are in flight (open loop: those due).
    fn refill(&mut self, cx: &mut Ctx<'_>) -> io::Result<()> {
        let n = self.allowed(cx);
        if n == 0 {
            return Ok(());
        }
        let now = mono_ns();
        for i in 0..n {
            Header::restamp(self.tx.slot_mut(i), self.seq + i as u64, now);
        }
        let sent = self.tx.send(self.sock.as_raw_fd(), n, None)?;
        for i in 0..sent {
            self.inflight.push((self.seq + i as u64, now));
        }
        self.seq += sent as u64;
        self.stats.packets_tx += sent as u64;
        cx.counters.packets_tx += sent as u64;
        cx.counters.udp_send_calls += (sent > 0) as u64;
        cx.counters.bytes_tx += (sent * self.tx.slot) as u64;
        if self.timer_at.is_none() && !self.inflight.is_empty() {
            let at = cx.now + self.timeout;
            self.timer_at = Some(at);
            cx.schedule(at);
        }
        Ok(())
    }

    fn failed(&self, cx: &Ctx<'_>, e: io::Error) -> Status {
        if cx.stopping {
            return Status::Done;
        }
        Status::Failed(e)
    }
}

impl Flow for Requester {
    fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        registry.register(
            &mut self.sock,
            token,
            Interest::READABLE | Interest::WRITABLE,
        )
    }

    fn ready(&mut self, cx: &mut Ctx<'_>, readable: bool, _writable: bool) -> Status {
        let mut taken = 0;
        if readable {
            loop {
                let n = match self.rx.recv(self.sock.as_raw_fd()) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) => return self.failed(cx, e),
                };
                cx.counters.udp_recv_calls += 1;
                let now = mono_ns();
                for i in 0..n {
                    let d = self.rx.datagram(i);
                    let Some(h) = Header::read(d, self.cookie) else {
                        continue;
                    };
                    if h.kind != Kind::Response || h.flow != self.id {
                        continue;
                    }
                    // A response to a request that timed out is not counted.
                    let Some(at) = self.inflight.iter().position(|&(s, _)| s == h.seq) else {
                        self.stats.late += 1;
                        cx.counters.late += 1;
                        continue;
                    };
                    let (_, sent) = self.inflight.remove(at);
                    record_ns(cx.hist, now.saturating_sub(sent));
                    if let Some(due) = self.due(h.seq) {
                        let late = Instant::now().saturating_duration_since(due);
                        record_ns(cx.hist_corrected, late.as_nanos() as u64);
                    }
                    cx.counters.transactions += 1;
                    cx.counters.packets_rx += 1;
                    cx.counters.bytes_rx += d.len() as u64;
                    self.stats.packets_rx += 1;
                    self.transactions += 1;
                }
                taken += n;
                if let Err(e) = self.refill(cx) {
                    return self.failed(cx, e);
                }
                if taken >= BUDGET_PACKETS {
                    return Status::Busy;
                }
            }
        }
        match self.refill(cx) {
            Ok(()) => Status::Open,
            Err(e) => self.failed(cx, e),
        }
    }

    fn timer(&mut self, cx: &mut Ctx<'_>) -> Status {
        // Two timers share this call in open loop: the next due request's
        // and the oldest request's timeout; each is cleared once passed,
        // so neither is set twice.
        if self.due_at.is_some_and(|t| t <= cx.now) {
            self.due_at = None;
        }
        let limit = self.timeout.as_nanos() as u64;
        if self.timer_at.is_none_or(|t| t <= cx.now) {
            self.timer_at = None;
            let now = mono_ns();
            let before = self.inflight.len();
            self.inflight
                .retain(|&(_, sent)| now.saturating_sub(sent) < limit);
            let expired = (before - self.inflight.len()) as u64;
            self.stats.timeouts += expired;
            cx.counters.timeouts += expired;
        }
        let now = mono_ns();
        if let Err(e) = self.refill(cx) {
            return self.failed(cx, e);
        }
        // The next deadline: the oldest request still in flight.
        if self.timer_at.is_none() {
            if let Some(&(_, oldest)) = self.inflight.first() {
                let left = (oldest + limit).saturating_sub(now);
                let at = cx.now + Duration::from_nanos(left);
                self.timer_at = Some(at);
                cx.schedule(at);
            }
        }
        Status::Open
    }

    fn report(&self) -> Option<FlowReport> {
        Some(report(
            self.id,
            &self.sock,
            self.stats.clone(),
            self.transactions,
            self.tx.slot,
            self.rx.slot.saturating_sub(64),
        ))
    }

    fn persistent(&self) -> bool {
        true
    }
}

fn report(
    id: u32,
    sock: &UdpSocket,
    stats: UdpFlowStats,
    transactions: u64,
    tx_size: usize,
    rx_size: usize,
) -> FlowReport {
    let (sndbuf, rcvbuf) = crate::measure::tcpinfo::granted_buffers(sock.as_raw_fd());
    FlowReport {
        flow: id,
        local: sock.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        peer: sock.peer_addr().map(|a| a.to_string()).unwrap_or_default(),
        bytes_tx: stats.packets_tx * tx_size as u64,
        bytes_rx: stats.packets_rx * rx_size as u64,
        transactions,
        sndbuf,
        rcvbuf,
        udp: Some(stats),
        ..Default::default()
    }
}

/// The agent's end: answers every request, in batches.
pub struct Responder {
    id: u32,
    sock: UdpSocket,
    cookie: u64,
    rx: RecvBatch,
    tx: SendBatch,
    stats: UdpFlowStats,
    last_drops: u32,
}

impl Responder {
    fn new(id: u32, sock: UdpSocket, cookie: u64, spec: &TestSpec) -> Self {
        let batch = spec.udp_batch() as usize;
        let head = Header {
            kind: Kind::Response,
            flow: id,
            cookie,
            seq: 0,
            sent_ns: 0,
        };
        let payload: Vec<u8> = (0..spec.response).map(|i| (i % 251) as u8).collect();
        Responder {
            id,
            sock,
            cookie,
            rx: RecvBatch::new(batch, spec.request as usize + 64),
            tx: SendBatch::new(batch, spec.response as usize, &payload, head),
            stats: UdpFlowStats::default(),
            last_drops: 0,
        }
    }
}

impl Flow for Responder {
    fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        registry.register(&mut self.sock, token, Interest::READABLE)
    }

    fn ready(&mut self, cx: &mut Ctx<'_>, readable: bool, _writable: bool) -> Status {
        if !readable {
            return Status::Open;
        }
        let fd = self.sock.as_raw_fd();
        let mut taken = 0;
        loop {
            let n = match self.rx.recv(fd) {
                Ok(0) => return Status::Open,
                Ok(n) => n,
                Err(e) if cx.stopping => {
                    let _ = e;
                    return Status::Done;
                }
                Err(e) => return Status::Failed(e),
            };
            cx.counters.udp_recv_calls += 1;
            let mut k = 0;
            for i in 0..n {
                let d = self.rx.datagram(i);
                let Some(h) = Header::read(d, self.cookie) else {
                    continue;
                };
                match h.kind {
                    Kind::Request if h.flow == self.id => {
                        cx.counters.packets_rx += 1;
                        cx.counters.bytes_rx += d.len() as u64;
                        self.stats.packets_rx += 1;
                        // The response carries the request's number and stamp.
                        Header::restamp(self.tx.slot_mut(k), h.seq, h.sent_ns);
                        k += 1;
                    }
                    Kind::Hello => {
                        let mut b = [0u8; crate::model::spec::UDP_HEADER];
                        Header {
                            kind: Kind::Ack,
                            seq: 0,
                            ..h
                        }
                        .write(&mut b);
                        let _ = self.sock.send(&b);
                    }
                    _ => {}
                }
            }
            if let Some(d) = self.rx.drops {
                let new = d.wrapping_sub(self.last_drops) as u64;
                self.last_drops = d;
                cx.counters.rcv_drops += new;
                self.stats.rcv_drops += new;
            }
            if k > 0 {
                // Responses the socket cannot take are lost: the client
                // times their requests out.
                let sent = match self.tx.send(fd, k, None) {
                    Ok(s) => s,
                    Err(_) if cx.stopping => return Status::Done,
                    Err(e) => return Status::Failed(e),
                };
                cx.counters.packets_tx += sent as u64;
                cx.counters.udp_send_calls += (sent > 0) as u64;
                cx.counters.bytes_tx += (sent * self.tx.slot) as u64;
                cx.counters.transactions += sent as u64;
                self.stats.packets_tx += sent as u64;
            }
            taken += n;
            if taken >= BUDGET_PACKETS {
                return Status::Busy;
            }
        }
    }

    fn report(&self) -> Option<FlowReport> {
        Some(report(
            self.id,
            &self.sock,
            self.stats.clone(),
            self.stats.packets_tx,
            self.tx.slot,
            self.rx.slot.saturating_sub(64),
        ))
    }

    fn persistent(&self) -> bool {
        true
    }
}
