//! `rr` over QUIC (`quic-rr`, `rr --transport quic`): request/response on
//! persistent QUIC connections, a new bidirectional stream per request as
//! HTTP/3 does, in the perf protocol (the 8-byte response size, then the
//! request, then the stream's end; the response comes back on the stream
//! and ends with it). `--outstanding N` keeps N streams under way on each
//! connection: QUIC answers them independently, where rr's N requests on
//! one TCP connection queue behind each other.
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
            "rr over QUIC {}/{}, a stream per request, {} at once per connection, QUIC congestion control {}",
            fmt_bytes(spec.request),
            fmt_bytes(spec.response),
            spec.outstanding,
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

    fn client_flows(
        &self,
        spec: &TestSpec,
        conns: Conns,
    ) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
        super::client_flows(spec, conns, |_| Requests::new(spec))
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

/// One request under way, on its own stream, and when it was opened.
struct Txn {
    req: Request,
    sent: Instant,
}

/// The client's side of a flow: `outstanding` requests, each on a new
/// stream, a new one opened as soon as one is answered (closed loop).
pub struct Requests {
    shape: Shape,
    outstanding: usize,
    txns: Vec<Txn>,
    bytes_tx: u64,
    bytes_rx: u64,
    transactions: u64,
}

impl Requests {
    pub fn new(spec: &TestSpec) -> Self {
        Requests {
            shape: Shape::new(spec.request, spec.response, PIECE),
            outstanding: spec.outstanding.max(1) as usize,
            txns: Vec::new(),
            bytes_tx: 0,
            bytes_rx: 0,
            transactions: 0,
        }
    }

    /// Opens streams for new requests while fewer than `outstanding` are
    /// under way (and the peer grants streams).
    fn open(&mut self, conn: &mut Connection, now: Instant) {
        while self.txns.len() < self.outstanding {
            let Some(id) = conn.streams().open(Dir::Bi) else {
                return;
            };
            self.txns.push(Txn {
                req: Request::new(id, &self.shape),
                sent: now,
            });
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
            let t = self.txns.swap_remove(i);
            record_ns(
                cx.hist,
                cx.now.saturating_duration_since(t.sent).as_nanos() as u64,
            );
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
            self.open(conn, cx.now);
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
}
