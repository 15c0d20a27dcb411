//! `rr` over QUIC (`quic-rr`, `rr --transport quic`): request/response on
//! persistent QUIC connections, a new bidirectional stream per request as
//! HTTP/3 does, in the perf protocol (the 8-byte response size, then the
//! request, then the stream's end; the response comes back on the stream
//! and ends with it). `--outstanding N` keeps N streams under way on each
//! connection: QUIC answers them independently, where rr's N requests on
//! one TCP connection queue behind each other.
//!
//! `--rate` makes it an open loop as rr's: request i of a flow is due at
//! its time (uniform or Poisson, `--rate-ramp`), opened when due and a
//! stream slot is free, and its latency is also taken from when it was
//! due, so a slow server cannot hide queueing; `--search` then finds the
//! highest rate QUIC holds at a latency target.
//!
//! Its twin is `rr` over TLS with the same sizes and TLS settings, run
//! right after it: the cost line and key point give QUIC's CPU per
//! transaction against TLS over TCP's.

use std::io;
use std::time::Instant;

use bytes::Bytes;
use quinn_proto::{Connection, Dir};

use super::flow::Streams;
use super::request::{Request, Shape, Wrote};
use super::respond::Answers;
use super::{Conns, Pattern, Plugin, WorkloadError};
use crate::engine::flow::{Ctx, Flow, BUDGET};
use crate::engine::pace::{self, Next, Schedule};
use crate::measure::histogram::record_ns;
use crate::model::error::Invalid;
use crate::model::result::Iteration;
use crate::model::spec::{self, Figures, MainMetric, TestSpec};
use crate::units::fmt_bytes;
use crate::workload::kind::KindFacts;

/// `rr` over QUIC.
pub struct QuicRr;

/// This kind's name in a spec, on the command line and in the registry.
pub const NAME: spec::Workload = spec::Workload::named("quic-rr");

/// The largest buffer requests and responses are cut from (a larger one
/// goes as several pieces of it, shared, not copied).
const PIECE: u64 = 1 << 20;

impl Plugin for QuicRr {
    fn kind(&self) -> spec::Workload {
        NAME
    }

    fn help(&self) -> &'static str {
        "Request/response over QUIC, a stream per request (quinn-proto; the perf protocol), with its TLS over TCP twin"
    }

    fn facts(&self) -> KindFacts {
        KindFacts {
            tls_always: true,
            datagrams: true,
            search_latency: true,
            paced: true,
            rate: true,
            ..KindFacts::EXCHANGE
        }
    }

    fn rules(&self, spec: &TestSpec) -> Result<(), Invalid> {
        super::rules(spec)
    }

    fn pattern(&self) -> Pattern {
        Pattern::Datagram
    }

    fn figures(&self, _spec: &TestSpec) -> Figures {
        Figures {
            latency: true,
            ..Figures::default()
        }
    }

    fn describe(&self, spec: &TestSpec) -> String {
        format!(
            "rr over QUIC {}/{}, a stream per request, {} at once per connection{}, QUIC congestion control {}",
            fmt_bytes(spec.request),
            fmt_bytes(spec.response),
            spec.outstanding,
            crate::workload::open_loop_text(spec),
            super::config::controller(spec.cc.as_deref()).unwrap_or("?")
        )
    }

    fn report_lines(&self, _spec: &TestSpec, it: &Iteration) -> Vec<(&'static str, String)> {
        super::quic_lines(it)
    }

    fn main_metric(&self, _spec: &TestSpec) -> MainMetric {
        MainMetric::TransactionRate
    }

    /// Its twin is TLS over TCP: `rr` with the same sizes and TLS.
    fn clear_twin(&self) -> spec::Workload {
        crate::workload::rr::NAME
    }

    fn twin_keeps_tls(&self) -> bool {
        true
    }

    fn over(&self) -> Option<(spec::Transport, spec::Workload)> {
        Some((spec::Transport::Quic, crate::workload::rr::NAME))
    }

    fn speaks_perf(&self) -> bool {
        true
    }

    fn client_flows(
        &self,
        spec: &TestSpec,
        conns: Conns,
    ) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
        // Each flow its own schedule (a Poisson one its own seed).
        let next = std::cell::Cell::new(0u32);
        super::client_flows(spec, conns, |_| {
            let id = next.replace(next.get() + 1);
            Requests::new(spec, pace::for_flow(spec, spec.flows as usize, id))
        })
    }

    fn agent_flows(
        &self,
        spec: &TestSpec,
        conns: Conns,
    ) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
        let piece = spec.response.clamp(1, PIECE) as usize;
        let payload = Bytes::from(vec![0x5a; piece]);
        super::agent_flows(spec, conns, || Answers::new(payload.clone(), false))
    }
}

/// One request under way, on its own stream: when it was opened, and in
/// an open loop when it was due and when it could have gone (due, and a
/// slot free).
struct Txn {
    req: Request,
    sent: Instant,
    intended: Instant,
    could: Instant,
}

/// The client's side of a flow: `outstanding` requests, each on a new
/// stream, a new one opened as soon as one is answered (closed loop).
pub struct Requests {
    shape: Shape,
    outstanding: usize,
    txns: Vec<Txn>,
    /// Open loop: when each request is due; the timer armed for the next;
    /// a request that fell due while no stream could be opened; when the
    /// last response arrived (a slot freed).
    schedule: Option<Schedule>,
    armed: Option<Instant>,
    pending: Option<(Instant, Instant)>,
    freed_at: Option<Instant>,
    bytes_tx: u64,
    bytes_rx: u64,
    transactions: u64,
    /// A finite test (quic-stream `--bytes`): how many requests in all,
    /// and how many were opened.
    limit: Option<u64>,
    opened: u64,
}

impl Requests {
    pub fn new(spec: &TestSpec, schedule: Option<Schedule>) -> Self {
        Self::sized(spec.request, spec.response, spec.outstanding, schedule)
    }

    fn sized(request: u64, response: u64, outstanding: u32, schedule: Option<Schedule>) -> Self {
        Requests {
            shape: Shape::new(request, response, PIECE),
            outstanding: outstanding.max(1) as usize,
            txns: Vec::new(),
            schedule,
            armed: None,
            pending: None,
            freed_at: None,
            bytes_tx: 0,
            bytes_rx: 0,
            transactions: 0,
            limit: None,
            opened: 0,
        }
    }

    /// Finite transfers (quic-stream `--bytes`): `request` bytes up and
    /// `response` down per transfer, one at a time; `count` of them (None:
    /// until the test ends, `--per transaction`).
    pub fn transfers(request: u64, response: u64, count: Option<u64>) -> Self {
        let mut r = Self::sized(request, response, 1, None);
        r.limit = count;
        r
    }

    /// The agent's side of finite transfers answering `response` bytes.
    pub fn answers(response: u64) -> Answers {
        let piece = response.clamp(1, PIECE) as usize;
        Answers::new(Bytes::from(vec![0x5a; piece]), false)
    }

    /// Opens streams for new requests while fewer than `outstanding` are
    /// under way (and the peer grants streams); in an open loop only those
    /// that are due.
    fn open(&mut self, conn: &mut Connection, cx: &mut Ctx<'_>) {
        if self.armed.is_some_and(|t| t <= cx.now) {
            self.armed = None;
        }
        if let Some(s) = self.schedule.as_mut() {
            s.begin(cx.now);
        }
        while self.txns.len() < self.outstanding {
            if self.limit.is_some_and(|l| self.opened >= l) {
                return;
            }
            let Some((intended, could)) = self.due(cx) else {
                return;
            };
            let Some(id) = conn.streams().open(Dir::Bi) else {
                // The peer grants no stream yet: it goes when one frees.
                self.pending = Some((intended, could));
                return;
            };
            self.opened += 1;
            self.txns.push(Txn {
                req: Request::new(id, &self.shape),
                sent: cx.now,
                intended,
                could,
            });
        }
    }

    /// The next request's (due, could go) times, if one may go now: in a
    /// closed loop at once; in an open loop when due (else a timer is
    /// armed for it), with the sender's own lateness recorded as rr's.
    fn due(&mut self, cx: &mut Ctx<'_>) -> Option<(Instant, Instant)> {
        if let Some(p) = self.pending.take() {
            return Some(p);
        }
        let Some(s) = self.schedule.as_mut() else {
            return Some((cx.now, cx.now));
        };
        match s.next_by(cx.now)? {
            Next::At(t) => {
                if self.armed.is_none() {
                    self.armed = Some(t);
                    cx.schedule(t);
                }
                None
            }
            Next::Due(t) => {
                // A request held back by `--outstanding` waits for the
                // server, not for the sender.
                let could = self.freed_at.map_or(t, |f| f.max(t));
                let ns = |a: Instant, b: Instant| a.saturating_duration_since(b).as_nanos() as u64;
                record_ns(&mut cx.waits.held, ns(could, t));
                record_ns(&mut cx.waits.send_late, ns(cx.now, could));
                Some((t, could))
            }
        }
    }

    /// Writes the requests, in the order they were opened, until the
    /// connection is blocked or the budget is spent. Returns the bytes
    /// moved.
    fn write(&mut self, conn: &mut Connection, cx: &mut Ctx<'_>) -> io::Result<usize> {
        let mut moved = 0;
        for t in self.txns.iter_mut() {
            if t.req.write(conn, &self.shape, cx, &mut moved, BUDGET)? != Wrote::All {
                break;
            }
        }
        self.bytes_tx += moved as u64;
        Ok(moved)
    }

    /// Reads the responses; a stream whose response ended is a
    /// transaction (its latency from the stream's opening). Returns the
    /// bytes moved and whether any request was answered.
    fn read(&mut self, conn: &mut Connection, cx: &mut Ctx<'_>) -> io::Result<(usize, bool)> {
        let mut moved = 0;
        let mut answered = false;
        let mut i = 0;
        while i < self.txns.len() && moved < BUDGET {
            if !self.txns[i].req.read(conn, &self.shape, cx, &mut moved)? {
                i += 1;
                continue;
            }
            // In order: `write` serves the oldest first.
            let t = self.txns.remove(i);
            let end = cx.now;
            let ns = |a: Instant, b: Instant| a.saturating_duration_since(b).as_nanos() as u64;
            record_ns(cx.hist, ns(end, t.sent));
            if self.schedule.is_some() {
                self.freed_at = Some(end);
                record_ns(cx.hist_corrected, ns(end, t.intended));
                // Less the sender's own lateness: held + from the send.
                let net = ns(end, t.sent) + ns(t.could, t.intended);
                record_ns(&mut cx.waits.net, net);
            }
            cx.counters.transactions += 1;
            self.transactions += 1;
            answered = true;
        }
        self.bytes_rx += moved as u64;
        Ok((moved, answered))
    }
}

impl Streams for Requests {
    fn work(&mut self, conn: &mut Connection, cx: &mut Ctx<'_>) -> io::Result<bool> {
        let mut moved = 0;
        loop {
            self.open(conn, cx);
            moved += self.write(conn, cx)?;
            let (read, answered) = self.read(conn, cx)?;
            moved += read;
            // A request answered frees a slot: the next goes at once.
            if !answered || moved >= BUDGET {
                return Ok(moved >= BUDGET);
            }
        }
    }

    fn started(&self) -> bool {
        !self.txns.is_empty()
    }

    fn totals(&self) -> (u64, u64, u64) {
        (self.bytes_tx, self.bytes_rx, self.transactions)
    }

    fn finished(&self) -> bool {
        self.limit.is_some_and(|l| self.transactions >= l)
    }
}
