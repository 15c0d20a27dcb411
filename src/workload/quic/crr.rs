//! A QUIC connection per transaction: `quic-crr` (`crr --transport quic`),
//! `quic-handshake` (`tls-handshake --transport quic`) and `quic-conn`
//! (`conn --transport quic`). Each transaction is a new connection on the
//! flow's UDP socket (handshake, one request on one stream in the perf
//! protocol, its response, close; for quic-conn the handshake and the
//! close only), as crr, tls-handshake and conn make a TCP connection per
//! transaction. With
//! `--resume on` the client resumes the session of an earlier connection
//! and sends its request as 0-RTT early data (as HTTP/3 clients do), so
//! the request leaves with the first flight; the result counts the
//! handshakes that did (`tls_resumed`, the `zero_rtt` of each flow).
//!
//! Their twins are crr and tls-handshake over TLS with the same TLS
//! settings; the cost line gives QUIC's CPU per connection against them.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use quinn_proto::{Connection, Dir};

use super::config::Tickets;
use super::flow::Streams;
use super::request::{Request, Shape};
use super::respond::Answers;
use super::{Conns, Pattern, Plugin, WorkloadError};
use crate::engine::flow::{Ctx, Flow, BUDGET};
use crate::measure::histogram::record_ns;
use crate::model::error::Invalid;
use crate::model::result::Iteration;
use crate::model::spec::{self, Figures, MainMetric, TestSpec};
use crate::units::{fmt_bytes, fmt_rate};
use crate::workload::kind::KindFacts;

/// `crr` over QUIC.
pub struct QuicCrr;

/// `tls-handshake` over QUIC.
pub struct QuicHandshake;

/// `conn` over QUIC: handshakes, no request.
pub struct QuicConn;

/// These kinds' names in a spec, on the command line and in the registry.
pub const NAME: spec::Workload = spec::Workload::named("quic-crr");
pub const HANDSHAKE: spec::Workload = spec::Workload::named("quic-handshake");
pub const CONN: spec::Workload = spec::Workload::named("quic-conn");

/// The largest buffer responses are cut from.
const PIECE: u64 = 1 << 20;

/// How long a resumed client waits after its answer for the session
/// ticket of its next connection, at most (a lost ticket: it goes on, and
/// the next connection's handshake is a full one).
const TICKET_WAIT: Duration = Duration::from_millis(50);

/// What the kinds share: all but their names, words and twins.
fn describe(what: &str, exchange: bool, spec: &TestSpec) -> String {
    let resume = spec.tls.as_ref().is_some_and(|t| t.resume);
    if !exchange {
        return format!(
            "{what} over QUIC, a connection per transaction: the handshake ({}) and the close; latency is connect to the handshake's end, QUIC congestion control {}",
            if resume { "resumed" } else { "full" },
            super::config::controller(spec.cc.as_deref()).unwrap_or("?")
        );
    }
    format!(
        "{what} over QUIC {}/{}, a connection per transaction ({}), QUIC congestion control {}",
        fmt_bytes(spec.request),
        fmt_bytes(spec.response),
        if resume {
            "resumed, the request as 0-RTT data"
        } else {
            "a full handshake each"
        },
        super::config::controller(spec.cc.as_deref()).unwrap_or("?")
    )
}

fn facts(exchange: bool) -> KindFacts {
    KindFacts {
        tls_always: true,
        datagrams: true,
        exchange,
        ..KindFacts::NONE
    }
}

fn figures() -> Figures {
    Figures {
        latency: true,
        connections: true,
        ..Figures::default()
    }
}

/// The connections line, then each end's QUIC line.
fn lines(it: &Iteration) -> Vec<(&'static str, String)> {
    let zero: u64 = it
        .flows
        .client
        .iter()
        .filter_map(|f| f.quic.as_ref())
        .map(|q| q.zero_rtt)
        .sum();
    let mut out = vec![(
        "conns/s",
        format!(
            "{}; {zero} connections had 0-RTT accepted (over the whole test, warm-up included)",
            fmt_rate(it.connections_per_s),
        ),
    )];
    out.extend(super::quic_lines(it));
    out
}

fn client_flows(
    spec: &TestSpec,
    conns: Conns,
    exchange: bool,
) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
    super::client_flows(spec, conns, |tickets| {
        OneShot::new(spec, exchange, tickets.cloned())
    })
}

fn agent_flows(spec: &TestSpec, conns: Conns) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
    let piece = spec.response.clamp(1, PIECE) as usize;
    let payload = Bytes::from(vec![0x5a; piece]);
    super::agent_flows(spec, conns, || Answers::new(payload.clone(), true))
}

/// Both kinds' plug-in, but for name, words and twin.
macro_rules! per_connection_kind {
    ($ty:ty, $name:expr, $base:expr, $what:literal, $exchange:literal, $help:literal) => {
        impl Plugin for $ty {
            fn kind(&self) -> spec::Workload {
                $name
            }

            fn help(&self) -> &'static str {
                $help
            }

            fn facts(&self) -> KindFacts {
                facts($exchange)
            }

            fn rules(&self, spec: &TestSpec) -> Result<(), Invalid> {
                super::rules(spec)
            }

            fn pattern(&self) -> Pattern {
                Pattern::Datagram
            }

            fn figures(&self, _spec: &TestSpec) -> Figures {
                figures()
            }

            fn describe(&self, spec: &TestSpec) -> String {
                describe($what, $exchange, spec)
            }

            fn report_lines(
                &self,
                _spec: &TestSpec,
                it: &Iteration,
            ) -> Vec<(&'static str, String)> {
                lines(it)
            }

            fn main_metric(&self, _spec: &TestSpec) -> MainMetric {
                MainMetric::TransactionRate
            }

            /// Its twin is TLS over TCP with the same TLS settings.
            fn clear_twin(&self) -> spec::Workload {
                $base
            }

            fn twin_keeps_tls(&self) -> bool {
                true
            }

            fn over(&self) -> Option<(spec::Transport, spec::Workload)> {
                Some((spec::Transport::Quic, $base))
            }

            fn speaks_perf(&self) -> bool {
                true
            }

            fn client_flows(
                &self,
                spec: &TestSpec,
                conns: Conns,
            ) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
                client_flows(spec, conns, $exchange)
            }

            fn agent_flows(
                &self,
                spec: &TestSpec,
                conns: Conns,
            ) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
                agent_flows(spec, conns)
            }
        }
    };
}

per_connection_kind!(
    QuicCrr,
    NAME,
    crate::workload::crr::NAME,
    "crr",
    true,
    "Connect, request, response, close per transaction over QUIC (quinn-proto), with its TLS over TCP twin"
);
per_connection_kind!(
    QuicHandshake,
    HANDSHAKE,
    crate::workload::tls_handshake::NAME,
    "tls-handshake",
    true,
    "QUIC handshakes (full, or resumed with 0-RTT), one small exchange, close, with its TLS over TCP twin"
);

per_connection_kind!(
    QuicConn,
    CONN,
    crate::workload::conn::NAME,
    "conn",
    false,
    "QUIC connections: handshake (full, or resumed), close, again, with its TLS over TCP twin"
);

/// The client's side of a flow: one connection after another, each
/// carrying one request (or, for quic-conn, none: the handshake is the
/// transaction).
pub struct OneShot {
    /// Whether a connection carries a request (not quic-conn's).
    exchange: bool,
    shape: Shape,
    /// This connection's: when it started, its request (once the peer
    /// grants a stream), and whether it is answered.
    started: Instant,
    req: Option<Request>,
    done: bool,
    /// With resumption: the session store, the tickets it held when this
    /// connection started, and until when it waits for a new one.
    tickets: Option<Arc<Tickets>>,
    tickets_seen: u64,
    wait_until: Option<Instant>,
    /// A whole wait passed with no ticket ever received: the server gives
    /// none (its TLS keeps no sessions), and no connection waits again.
    no_tickets: bool,
    /// Done with this connection: the next may start.
    next: bool,
    bytes_tx: u64,
    bytes_rx: u64,
    transactions: u64,
}

impl OneShot {
    pub fn new(spec: &TestSpec, exchange: bool, tickets: Option<Arc<Tickets>>) -> Self {
        OneShot {
            exchange,
            shape: Shape::new(spec.request, spec.response, PIECE),
            started: Instant::now(),
            req: None,
            done: false,
            tickets,
            tickets_seen: 0,
            wait_until: None,
            no_tickets: false,
            next: false,
            bytes_tx: 0,
            bytes_rx: 0,
            transactions: 0,
        }
    }

    /// The request: its stream opened, written, its response read; at
    /// the response's end the transaction (and the connection) is
    /// complete. Returns the bytes moved.
    fn exchange(&mut self, conn: &mut Connection, cx: &mut Ctx<'_>) -> io::Result<usize> {
        if self.req.is_none() {
            // None until the peer grants streams: its transport
            // parameters (or, resumed, the ones remembered for 0-RTT).
            let Some(id) = conn.streams().open(Dir::Bi) else {
                return Ok(0);
            };
            self.req = Some(Request::new(id, &self.shape));
        }
        let Some(req) = self.req.as_mut() else {
            return Ok(0);
        };
        let mut wrote = 0;
        req.write(conn, &self.shape, cx, &mut wrote, BUDGET)?;
        let mut read = 0;
        let ended = req.read(conn, &self.shape, cx, &mut read)?;
        self.bytes_tx += wrote as u64;
        self.bytes_rx += read as u64;
        if ended {
            // The answer came in 1-RTT packets: the handshake is done
            // (its Connected event may come after this turn).
            self.complete(conn, cx);
        }
        Ok(wrote + read)
    }

    /// This connection's transaction is complete: its latency from the
    /// connect, and its counts.
    fn complete(&mut self, conn: &Connection, cx: &mut Ctx<'_>) {
        record_ns(
            cx.hist,
            cx.now.saturating_duration_since(self.started).as_nanos() as u64,
        );
        cx.counters.transactions += 1;
        cx.counters.connections += 1;
        cx.counters.tls_handshakes += 1;
        cx.counters.tls_resumed += u64::from(super::link::took_0rtt(conn));
        self.transactions += 1;
        self.done = true;
    }
}

impl Streams for OneShot {
    fn work(&mut self, conn: &mut Connection, cx: &mut Ctx<'_>) -> io::Result<bool> {
        let mut moved = 0;
        if !self.done && self.exchange {
            moved = self.exchange(conn, cx)?;
        }
        if self.done {
            self.next = self.ticket_in(cx);
        }
        Ok(moved >= BUDGET)
    }

    fn started(&self) -> bool {
        self.req.is_some() || self.done
    }

    fn totals(&self) -> (u64, u64, u64) {
        (self.bytes_tx, self.bytes_rx, self.transactions)
    }

    /// With a resumed session the request goes in the first flight.
    fn early(&self) -> bool {
        true
    }

    fn connected(&mut self, conn: &mut Connection, cx: &mut Ctx<'_>) {
        if !self.exchange && !self.done {
            // quic-conn: the handshake is the transaction.
            self.complete(conn, cx);
            self.next = self.ticket_in(cx);
            return;
        }
        if conn.has_0rtt() && !conn.accepted_0rtt() {
            // The server refused the early data: quinn dropped the stream
            // it went on, so the request goes again, now on 1-RTT.
            let started = self.started;
            self.fresh(started);
        }
    }

    fn reconnect(&mut self) -> bool {
        self.next
    }

    fn fresh(&mut self, now: Instant) {
        self.started = now;
        self.tickets_seen = self.tickets.as_ref().map_or(0, |t| t.received());
        self.wait_until = None;
        self.next = false;
        self.req = None;
        self.done = false;
    }
}

impl OneShot {
    /// Whether the next connection may start: at once without
    /// resumption; with it, once a new ticket is in (or after
    /// `TICKET_WAIT`, woken by a timer).
    fn ticket_in(&mut self, cx: &mut Ctx<'_>) -> bool {
        let Some(t) = &self.tickets else {
            return true;
        };
        if t.received() > self.tickets_seen || self.no_tickets {
            return true;
        }
        let until = *self.wait_until.get_or_insert_with(|| {
            let at = cx.now + TICKET_WAIT;
            cx.schedule(at);
            at
        });
        let over = cx.now >= until;
        self.no_tickets = over && t.received() == 0;
        over
    }
}
