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
//!
//! One-way delays. A response of 48 bytes or more carries, after the
//! header, the agent's clock when it received the request's batch and when
//! it sent the answers; the client has its own send and receive stamps.
//! Where the controller knows the agent's clock against the client's
//! (`Conns::peer_clock`: offset = agent minus client), each transaction
//! splits into up = agent_rx - client_tx - offset and down = client_rx -
//! agent_tx + offset (their sum is the round trip less the agent's time).
//! The offset is given to the client before the window, so the client
//! records the corrected delays straight into HDR histograms. Recording
//! raw differences and correcting at fold time would put the clocks'
//! difference (days between two hosts' boots, any shift of a time
//! namespace, either sign) into histograms that hold 1 ns to 100 s with a
//! precision relative to the value; a bias to bring them back into range
//! would have to be one per flow (each pair of ends differs), and
//! histograms of different biases do not merge exactly. A delay below
//! zero (the offset is off by more than it) is recorded as 0 and counted.
//! The histograms are shared by the flows of one worker (an HDR histogram
//! is about 200 KiB: never one per flow) and carried to the controller in
//! the report of the last of those flows to end.

use mio::net::UdpSocket;
use mio::{Interest, Registry, Token};
use std::io;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::kind::KindFacts;
use super::{Conns, Pattern, Plugin, WorkloadError};
use crate::engine::flow::{Ctx, Flow, Status};
use crate::engine::pace::{self, Schedule};
use crate::engine::udp::{mono_ns, Header, Kind, RecvBatch, SendBatch};
use crate::measure::histogram::{self, new_hist, record_ns, Hist};
use crate::model::flow::{FlowReport, OwdHistText, UdpFlowStats};
use crate::model::result::Iteration;
use crate::model::sample::PeerClock;
use crate::model::spec::{self, Figures, MainMetric, TestSpec, UDP_HEADER};
use crate::units::{fmt_bytes, fmt_us};
use std::fmt::Write as _;

/// Where a response carries the agent's two stamps (its CLOCK_MONOTONIC
/// when it received the request, when it sent the response; big-endian
/// nanoseconds): right after the header.
const STAMPS: usize = UDP_HEADER;
/// The shortest response that carries them.
pub const STAMPED_RESPONSE: usize = STAMPS + 16;

pub struct UdpRr;

/// This kind's name in a spec, on the command line and in the registry.
pub const NAME: spec::Workload = spec::Workload::named("udp-rr");

impl Plugin for UdpRr {
    fn facts(&self) -> KindFacts {
        KindFacts {
            timeout: true,
            udp: true,
            search_latency: true,
            search_loss: true,
            paced: true,
            rate: true,
            datagrams: true,
            default_message: Some(crate::model::options::UDP_MESSAGE),
            default_exchange: Some(crate::model::options::UDP_RR),
            ..KindFacts::EXCHANGE
        }
    }

    fn rules(&self, spec: &TestSpec) -> Result<(), crate::model::error::Invalid> {
        super::rules::udp(spec, false)
    }

    fn kind(&self) -> spec::Workload {
        NAME
    }

    fn help(&self) -> &'static str {
        "UDP request/response: transactions/s and latency, lost requests counted after `--timeout` (neper udp_rr, netperf UDP_RR)"
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
        s += &super::open_loop_text(spec);
        s
    }

    fn report_lines(&self, spec: &TestSpec, it: &Iteration) -> Vec<(&'static str, String)> {
        let size = format!("{}/{} B", spec.request, spec.response);
        let mut lines = super::udp_stream::udp_lines(spec, it, size, true);
        if let Some(l) = it.udp.as_ref().and_then(one_way_line) {
            // After the loss line, before the CPU ones.
            let at = lines.len().min(2);
            lines.insert(at, ("one-way", l));
        }
        lines
    }

    fn figures(&self, spec: &TestSpec) -> Figures {
        Figures {
            latency: true,
            udp: true,
            one_way: spec.response as usize >= STAMPED_RESPONSE,
            ..Figures::default()
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
        let flows = conns.udp.len();
        // One pair of histograms per worker the flows go to (round robin,
        // in this order, as the engine spreads them).
        let clock = conns
            .peer_clock
            .filter(|_| spec.response as usize >= STAMPED_RESPONSE);
        let shards: Vec<Arc<Mutex<OwdShard>>> = match clock {
            Some(_) => (0..(spec.workers.max(1) as usize).min(conns.udp.len()))
                .map(|_| Arc::new(Mutex::new(OwdShard::default())))
                .collect(),
            None => Vec::new(),
        };
        Ok(conns
            .udp
            .into_iter()
            .enumerate()
            .map(|(i, (id, s))| {
                let owd = clock.map(|c| {
                    let shard = shards[i % shards.len()].clone();
                    lock(&shard).flows += 1;
                    (c, shard)
                });
                let schedule = pace::for_flow(spec, flows, id);
                Box::new(
                    Requester::new(id, UdpSocket::from_std(s), conns.cookie, spec, owd)
                        .open_loop(schedule),
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

/// One-way delay histograms shared by the flows of one worker.
struct OwdShard {
    up: Hist,
    down: Hist,
    /// Flows that share it and have not reported yet: the last to report
    /// carries it.
    flows: usize,
}

impl Default for OwdShard {
    fn default() -> Self {
        OwdShard {
            up: new_hist(),
            down: new_hist(),
            flows: 0,
        }
    }
}

/// A shard, even if a flow panicked holding it (its histograms stay valid).
fn lock(m: &Mutex<OwdShard>) -> std::sync::MutexGuard<'_, OwdShard> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One flow's one-way delays: the offset it applies, and its own sums
/// over the window.
struct Owd {
    clock: PeerClock,
    shard: Arc<Mutex<OwdShard>>,
    up_ns: u64,
    down_ns: u64,
    samples: u64,
    clamped: u64,
}

/// A transaction's one-way delays (ns) from its four stamps and the
/// agent's clock minus the client's: (up, down, whether either came out
/// below zero and was clamped to 0).
fn one_way(
    client_tx: u64,
    agent_rx: u64,
    agent_tx: u64,
    client_rx: u64,
    offset_ns: i64,
) -> (u64, u64, bool) {
    let up = agent_rx as i128 - client_tx as i128 - offset_ns as i128;
    let down = client_rx as i128 - agent_tx as i128 + offset_ns as i128;
    let clamp = |v: i128| v.clamp(0, u64::MAX as i128) as u64;
    (clamp(up), clamp(down), up < 0 || down < 0)
}

/// The agent's two stamps in a response (None: absent or zero).
fn stamps(d: &[u8]) -> Option<(u64, u64)> {
    let b = d.get(STAMPS..STAMPED_RESPONSE)?;
    let rx = u64::from_be_bytes(b[0..8].try_into().ok()?);
    let tx = u64::from_be_bytes(b[8..16].try_into().ok()?);
    (rx != 0 && tx >= rx).then_some((rx, tx))
}

/// "up p50 .. p99 .., down p50 .. p99 .. (clock offset ± U)".
fn one_way_line(u: &crate::model::result::UdpFigures) -> Option<String> {
    let (up, down) = (u.owd_up_us.as_ref()?, u.owd_down_us.as_ref()?);
    let offset = match u.owd_offset_uncertainty_us {
        Some(x) if x > 0.0 => format!("clock offset ± {}", fmt_us(x)),
        _ => "clock offset exact: one kernel".into(),
    };
    let clamped = match u.owd_clamped {
        Some(n) if n > 0 => format!("; {n} below zero, counted as 0"),
        _ => String::new(),
    };
    Some(format!(
        "up p50 {} p99 {}, down p50 {} p99 {} ({offset}{clamped})",
        fmt_us(up.p50),
        fmt_us(up.p99),
        fmt_us(down.p50),
        fmt_us(down.p99)
    ))
}

/// A request in flight: its sequence number, send time (ns) and, in an
/// open loop, its due time and when it could go (due, and a slot free).
type InFlight = (u64, u64, Option<(Instant, Instant)>);

pub struct Requester {
    id: u32,
    sock: UdpSocket,
    cookie: u64,
    outstanding: usize,
    timeout: Duration,
    /// Requests in flight: (sequence number, send time in ns, in an open
    /// loop its due time and when it could go: due and a slot free), at most
    /// `outstanding` of them, oldest first (a short list: no allocation
    /// per transaction, as a map would make).
    inflight: Vec<InFlight>,
    seq: u64,
    tx: SendBatch,
    rx: RecvBatch,
    timer_at: Option<Instant>,
    stats: UdpFlowStats,
    transactions: u64,
    /// Open loop: when this flow's requests are due, and when the timer
    /// for the next due request is set.
    schedule: Option<Schedule>,
    due_at: Option<Instant>,
    /// When the last response arrived (see `rr::Requester::freed_at`).
    freed_at: Option<Instant>,
    /// The agent's clock is known: one-way delays are recorded.
    owd: Option<Owd>,
}

impl Requester {
    fn new(
        id: u32,
        sock: UdpSocket,
        cookie: u64,
        spec: &TestSpec,
        owd: Option<(PeerClock, Arc<Mutex<OwdShard>>)>,
    ) -> Self {
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
            schedule: None,
            due_at: None,
            freed_at: None,
            owd: owd.map(|(clock, shard)| Owd {
                clock,
                shard,
                up_ns: 0,
                down_ns: 0,
                samples: 0,
                clamped: 0,
            }),
        }
    }

    /// Open loop on `schedule` (None: closed loop). An open loop's socket
    /// takes the kernel's receive stamps: its latency ends when a response
    /// reached this host, and the wait to read it is counted apart.
    fn open_loop(mut self, schedule: Option<Schedule>) -> Self {
        if schedule.is_some() {
            stamp_arrivals(&self.sock);
        }
        self.schedule = schedule;
        self
    }

    /// How many requests may go now: up to `outstanding` in flight, and in
    /// open loop only those due (the timer is set for the next one).
    fn allowed(&mut self, cx: &mut Ctx<'_>) -> usize {
        let free = self.outstanding - self.inflight.len();
        let Some(schedule) = self.schedule.as_mut() else {
            return free;
        };
        schedule.begin(cx.now);
        let mut n = 0;
        while n < free {
            match schedule.peek(n) {
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
        let at = Instant::now();
        for i in 0..sent {
            let due = self.schedule.as_mut().and_then(Schedule::take);
            let mut when = None;
            if let Some(t) = due {
                // The sender's own lateness: from when it could have sent
                // (due, and a slot free).
                let could = self.freed_at.map_or(t, |f| f.max(t));
                when = Some((t, could));
                record_ns(
                    &mut cx.waits.held,
                    could.saturating_duration_since(t).as_nanos() as u64,
                );
                record_ns(
                    &mut cx.waits.send_late,
                    at.saturating_duration_since(could).as_nanos() as u64,
                );
            }
            self.inflight.push((self.seq + i as u64, now, when));
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

    fn scheduled(&self) -> bool {
        self.schedule.is_some()
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
                let (now_rt, now_i) = (crate::measure::rxstamp::realtime_ns(), Instant::now());
                // The window's one-way delays, once per batch.
                let mut owd = self.owd.as_mut().filter(|_| cx.counting);
                let shard = owd.as_ref().map(|o| o.shard.clone());
                let mut shard = shard.as_deref().map(lock);
                for i in 0..n {
                    let d = self.rx.datagram(i);
                    let Some(h) = Header::read(d, self.cookie) else {
                        continue;
                    };
                    if h.kind != Kind::Response || h.flow != self.id {
                        continue;
                    }
                    // A response to a request that timed out is not counted.
                    let Some(at) = self.inflight.iter().position(|&(s, _, _)| s == h.seq) else {
                        self.stats.late += 1;
                        cx.counters.late += 1;
                        continue;
                    };
                    let (_, sent, due) = self.inflight.remove(at);
                    // An open loop's latency ends at the response's arrival
                    // stamp; the wait for this end to read it is apart.
                    let delay = match self.rx.stamps[i] {
                        Some(s) if due.is_some() => {
                            let d = now_rt.saturating_sub(s);
                            record_ns(&mut cx.waits.read_delay, d);
                            d
                        }
                        _ => 0,
                    };
                    let end = now.saturating_sub(delay).max(sent);
                    record_ns(cx.hist, end - sent);
                    if let Some((due, could)) = due {
                        let end_i = now_i
                            .checked_sub(Duration::from_nanos(delay))
                            .unwrap_or(now_i);
                        self.freed_at = Some(end_i);
                        let late = end_i.saturating_duration_since(due);
                        record_ns(cx.hist_corrected, late.as_nanos() as u64);
                        // Less the sender's own lateness: held + from the send.
                        let held = could.saturating_duration_since(due).as_nanos() as u64;
                        record_ns(&mut cx.waits.net, end - sent + held);
                    }
                    if let (Some(o), Some(h), Some((arx, atx))) =
                        (owd.as_deref_mut(), shard.as_deref_mut(), stamps(d))
                    {
                        let (up, down, clamped) = one_way(sent, arx, atx, now, o.clock.offset_ns);
                        record_ns(&mut h.up, up);
                        record_ns(&mut h.down, down);
                        o.up_ns += up;
                        o.down_ns += down;
                        o.samples += 1;
                        o.clamped += clamped as u64;
                    }
                    cx.counters.transactions += 1;
                    cx.counters.packets_rx += 1;
                    cx.counters.bytes_rx += d.len() as u64;
                    self.stats.packets_rx += 1;
                    self.transactions += 1;
                }
                drop(shard);
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
                .retain(|&(_, sent, _)| now.saturating_sub(sent) < limit);
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
            if let Some(&(_, oldest, _)) = self.inflight.first() {
                let left = (oldest + limit).saturating_sub(now);
                let at = cx.now + Duration::from_nanos(left);
                self.timer_at = Some(at);
                cx.schedule(at);
            }
        }
        Status::Open
    }

    fn report(&self) -> Option<FlowReport> {
        let mut stats = self.stats.clone();
        if let Some(o) = &self.owd {
            let mean = |sum: u64| (o.samples > 0).then(|| sum as f64 / o.samples as f64 / 1e3);
            stats.owd_up_mean_us = mean(o.up_ns);
            stats.owd_down_mean_us = mean(o.down_ns);
            stats.owd_samples = Some(o.samples);
            stats.owd_clamped = Some(o.clamped);
            stats.owd_offset_uncertainty_us = Some(o.clock.uncertainty_ns as f64 / 1e3);
            let mut shard = lock(&o.shard);
            shard.flows = shard.flows.saturating_sub(1);
            if shard.flows == 0 {
                stats.owd_hists = Some(OwdHistText {
                    up: histogram::encode(&shard.up),
                    down: histogram::encode(&shard.down),
                });
            }
        }
        Some(report(
            self.id,
            &self.sock,
            stats,
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

/// Has the kernel stamp each datagram's arrival at `sock` (an open loop's
/// ends; best effort: without it no read delays are counted).
fn stamp_arrivals(sock: &UdpSocket) {
    let _ = crate::engine::sockopt::set_int(
        sock.as_raw_fd(),
        libc::SOL_SOCKET,
        libc::SO_TIMESTAMPNS,
        1,
    );
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
        if spec.rate.is_some() {
            stamp_arrivals(&sock);
        }
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
            // When the batch arrived, in this host's clock (one-way delays).
            let rx_ns = mono_ns().to_be_bytes();
            let now_rt = crate::measure::rxstamp::realtime_ns();
            let stamped = self.tx.slot >= STAMPED_RESPONSE;
            let mut k = 0;
            for i in 0..n {
                let d = self.rx.datagram(i);
                let Some(h) = Header::read(d, self.cookie) else {
                    continue;
                };
                match h.kind {
                    Kind::Request if h.flow == self.id => {
                        // How long it waited for this end to read it (an
                        // open loop's agent: its own wake-ups).
                        if let Some(s) = self.rx.stamps[i] {
                            record_ns(&mut cx.waits.read_delay, now_rt.saturating_sub(s));
                        }
                        cx.counters.packets_rx += 1;
                        cx.counters.bytes_rx += d.len() as u64;
                        self.stats.packets_rx += 1;
                        // The response carries the request's number and stamp,
                        // and when this side received it.
                        let slot = self.tx.slot_mut(k);
                        Header::restamp(slot, h.seq, h.sent_ns);
                        if stamped {
                            slot[STAMPS..STAMPS + 8].copy_from_slice(&rx_ns);
                        }
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
                if stamped {
                    let tx_ns = mono_ns().to_be_bytes();
                    for j in 0..k {
                        self.tx.slot_mut(j)[STAMPS + 8..STAMPED_RESPONSE].copy_from_slice(&tx_ns);
                    }
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_trip_splits_by_the_agents_offset() {
        // Agent clock 5 s ahead of the client's; 10 µs up, 2 µs in the
        // agent, 30 µs down.
        let off = 5_000_000_000i64;
        let tx = 1_000_000u64;
        let arx = tx + 10_000 + off as u64;
        let atx = arx + 2_000;
        let rx = tx + 42_000;
        assert_eq!(one_way(tx, arx, atx, rx, off), (10_000, 30_000, false));
        // A clock behind: a negative offset.
        let arx = tx + 10_000 - 3_000;
        assert_eq!(
            one_way(tx, arx, arx + 2_000, rx, -3_000),
            (10_000, 30_000, false)
        );
        // An offset off by more than a direction's delay: that direction
        // reads 0 and the transaction is counted, never a panic.
        let arx = tx + 10_000;
        let (up, down, clamped) = one_way(tx, arx, arx + 2_000, rx, 25_000);
        assert_eq!((up, down, clamped), (0, 55_000, true));
        let (up, down, clamped) = one_way(u64::MAX, 0, 0, 0, i64::MAX);
        assert_eq!((up, down), (0, i64::MAX as u64));
        assert!(clamped);
    }

    #[test]
    fn stamps_sit_after_the_header_and_need_room() {
        let mut d = vec![0u8; STAMPED_RESPONSE];
        assert_eq!(stamps(&d), None, "zero: not stamped");
        d[STAMPS..STAMPS + 8].copy_from_slice(&7u64.to_be_bytes());
        d[STAMPS + 8..].copy_from_slice(&9u64.to_be_bytes());
        assert_eq!(stamps(&d), Some((7, 9)));
        assert_eq!(stamps(&d[..STAMPED_RESPONSE - 1]), None);
        // Sent before it arrived: not a stamp of this protocol.
        d[STAMPS + 8..].copy_from_slice(&6u64.to_be_bytes());
        assert_eq!(stamps(&d), None);
    }

    #[test]
    fn one_way_needs_room_for_the_agents_stamps() {
        let spec = |response| TestSpec {
            workload: crate::model::spec::Workload::named("udp-rr"),
            response,
            ..Default::default()
        };
        assert!(UdpRr.figures(&spec(64)).one_way);
        assert!(UdpRr.figures(&spec(48)).one_way);
        assert!(!UdpRr.figures(&spec(47)).one_way);
        assert!(UdpRr.figures(&spec(47)).udp);
    }
}
