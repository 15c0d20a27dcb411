//! `rr`: request/response on persistent connections (netperf TCP_RR), also
//! the engine of finite stream transfers ("stream put 20M/20" is one 20 MB
//! request answered by 20 bytes).
//!
//! Closed loop: each flow keeps `outstanding` requests in flight. Open loop
//! (`--rate`): request i of a flow is due at `start + i / rate`; it is sent
//! when due and fewer than `outstanding` are in flight, and its latency is
//! taken from the due time as well as from the actual send, so a slow server
//! cannot hide queueing (coordinated omission).

use mio::{Registry, Token};
use std::collections::VecDeque;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::flow::{
    decode_header, read_some, Ctx, Flow, FlowBase, Io, ReadStep, Status, WriteStep, HEADER_LEN,
};
use crate::engine::pace::{self, Next, Schedule};
use crate::engine::tls::Role;
use crate::measure::histogram::record_ns;
use crate::model::flow::FlowReport;
use crate::model::spec::{self, MainMetric, TestSpec};

use super::kind::KindFacts;
use super::{base, Conns, Pattern, Plugin, WorkloadError};
use crate::units::fmt_bytes;
use std::fmt::Write as _;

/// Request/response on persistent connections: closed loop with
/// `outstanding` in flight, or open loop at `--rate` over all flows.
pub struct Rr;

/// This kind's name in a spec, on the command line and in the registry.
pub const NAME: spec::Workload = spec::Workload::named("rr");

impl Plugin for Rr {
    fn facts(&self) -> KindFacts {
        KindFacts {
            threads: true,
            search_latency: true,
            paced: true,
            rate: true,
            exact_window: true,
            threads_when_closed: true,
            ..KindFacts::EXCHANGE
        }
    }

    fn kind(&self) -> spec::Workload {
        NAME
    }

    fn help(&self) -> &'static str {
        "Request/response on persistent connections (TCP_RR)"
    }

    fn pattern(&self) -> Pattern {
        Pattern::Persistent
    }

    fn describe(&self, spec: &TestSpec) -> String {
        let mut s = format!(
            "rr {}/{}",
            fmt_bytes(spec.request),
            fmt_bytes(spec.response)
        );
        if spec.outstanding > 1 {
            let _ = write!(s, ", {} outstanding", spec.outstanding);
        }
        s += &super::open_loop_text(spec);
        s
    }

    fn main_metric(&self, _spec: &TestSpec) -> MainMetric {
        MainMetric::TransactionRate
    }

    fn client_flows(
        &self,
        spec: &TestSpec,
        conns: Conns,
    ) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
        Ok(conns
            .established
            .into_iter()
            .map(|c| {
                let schedule = pace::for_flow(spec, spec.flows as usize, c.0);
                Box::new(Requester::new(
                    base(spec, false, c),
                    spec.request,
                    spec.response,
                    spec.outstanding,
                    None,
                    schedule,
                )) as Box<dyn Flow>
            })
            .collect())
    }

    fn agent_flows(
        &self,
        spec: &TestSpec,
        conns: Conns,
    ) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
        Ok(conns
            .established
            .into_iter()
            .map(|c| {
                Box::new(Responder::new(
                    base(spec, true, c),
                    spec.request,
                    spec.response,
                )) as Box<dyn Flow>
            })
            .collect())
    }
}

pub struct Requester {
    base: FlowBase,
    request: u64,
    response: u64,
    outstanding: usize,
    count: Option<u64>,
    /// Open loop: when each request of this flow is due.
    schedule: Option<Schedule>,
    start: Option<Instant>,
    started: u64,
    /// (actual start, intended start, when it could go: due and a slot
    /// free) of requests awaiting their response.
    in_flight: VecDeque<(Instant, Instant, Instant)>,
    /// When the last response arrived (the latency's end): a request due
    /// earlier could not go before it with every slot in flight.
    freed_at: Option<Instant>,
    /// Request bytes not yet written.
    to_write: u64,
    /// Bytes still expected of the response at the head of `in_flight`.
    resp_left: u64,
    timer_armed: bool,
}

impl Requester {
    pub fn new(
        base: FlowBase,
        request: u64,
        response: u64,
        outstanding: u32,
        count: Option<u64>,
        schedule: Option<Schedule>,
    ) -> Self {
        Requester {
            base,
            request,
            response,
            outstanding: outstanding as usize,
            count,
            schedule,
            start: None,
            started: 0,
            in_flight: VecDeque::new(),
            freed_at: None,
            to_write: 0,
            resp_left: response,
            timer_armed: false,
        }
    }

    /// Starts every request allowed now, then writes what it can.
    fn pump(&mut self, cx: &mut Ctx<'_>) -> io::Result<Status> {
        let start = *self.start.get_or_insert(cx.now);
        if let Some(s) = self.schedule.as_mut() {
            s.begin(start);
        }
        while self.in_flight.len() < self.outstanding && self.count.is_none_or(|c| self.started < c)
        {
            let (intended, could) = match self.schedule.as_mut().and_then(|s| s.next_by(cx.now)) {
                Some(Next::At(t)) => {
                    if !self.timer_armed {
                        self.timer_armed = true;
                        cx.schedule(t);
                    }
                    break;
                }
                Some(Next::Due(t)) => {
                    // The sender's own lateness: from when it could have
                    // sent (due, and a slot free: a request held back by
                    // `--outstanding` waits for the server, not the sender).
                    let could = self.freed_at.map_or(t, |f| f.max(t));
                    record_ns(
                        &mut cx.waits.held,
                        could.saturating_duration_since(t).as_nanos() as u64,
                    );
                    record_ns(
                        &mut cx.waits.send_late,
                        cx.now.saturating_duration_since(could).as_nanos() as u64,
                    );
                    (t, could)
                }
                None => (cx.now, cx.now),
            };
            self.in_flight.push_back((cx.now, intended, could));
            self.started += 1;
            self.to_write += self.request;
        }
        Ok(match self.base.write_payload(cx, &mut self.to_write)? {
            WriteStep::Drained | WriteStep::Blocked => Status::Open,
            WriteStep::Budget => Status::Busy,
            WriteStep::Eof => Status::Done,
        })
    }

    fn receive(&mut self, cx: &mut Ctx<'_>) -> io::Result<Status> {
        let mut completed = false;
        let mut moved = 0;
        let mut busy = false;
        loop {
            let (n, last) = match self.base.read_step(cx, &mut moved)? {
                ReadStep::Data(n) => (n as u64, false),
                ReadStep::Last(n) => (n as u64, true),
                ReadStep::Blocked => break,
                ReadStep::Eof => return Ok(Status::Done),
                ReadStep::Budget => {
                    busy = true;
                    break;
                }
            };
            completed |= self.consume(cx, n)?;
            // A blocking socket must not be read again while a request
            // could go out: the next response waits for it.
            if last || (cx.blocking && completed) {
                break;
            }
        }
        if self.count.is_some_and(|c| self.base.transactions >= c) {
            self.base.completed_s.get_or_insert_with(|| {
                cx.now
                    .saturating_duration_since(self.start.unwrap_or(cx.now))
                    .as_secs_f64()
            });
            return Ok(Status::Done);
        }
        let pumped = if completed {
            self.pump(cx)?
        } else {
            Status::Open
        };
        Ok(match pumped {
            Status::Open if busy => Status::Busy,
            other => other,
        })
    }
}

impl Requester {
    /// Accounts `n` response bytes; true when a transaction completed.
    fn consume(&mut self, cx: &mut Ctx<'_>, mut n: u64) -> io::Result<bool> {
        let mut completed = false;
        while n > 0 {
            if self.in_flight.is_empty() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "response bytes with no request in flight",
                ));
            }
            let take = n.min(self.resp_left);
            n -= take;
            self.resp_left -= take;
            if self.resp_left == 0 {
                let (sent, intended, could) = self.in_flight.pop_front().unwrap();
                // An open loop's latency ends when the response reached
                // this host (its kernel stamp), not when this end woke to
                // read it: that wait is counted apart (`Ctx::waits`).
                let delay = self.base.read_delay();
                if let Some(d) = delay {
                    record_ns(&mut cx.waits.read_delay, d.as_nanos() as u64);
                }
                let end = match (self.schedule.is_some(), delay) {
                    (true, Some(d)) => cx.now.checked_sub(d).unwrap_or(cx.now).max(sent),
                    _ => cx.now,
                };
                self.freed_at = Some(end);
                record_ns(
                    cx.hist,
                    end.saturating_duration_since(sent).as_nanos() as u64,
                );
                if self.schedule.is_some() {
                    let late = end.saturating_duration_since(intended);
                    record_ns(cx.hist_corrected, late.as_nanos() as u64);
                    // Less the sender's own lateness: held + from the send.
                    let net = end.saturating_duration_since(sent)
                        + could.saturating_duration_since(intended);
                    record_ns(&mut cx.waits.net, net.as_nanos() as u64);
                }
                cx.counters.transactions += 1;
                self.base.transactions += 1;
                self.resp_left = self.response;
                completed = true;
            }
        }
        Ok(completed)
    }
}

impl Flow for Requester {
    fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        self.base.register(registry, token)
    }

    fn scheduled(&self) -> bool {
        self.schedule.is_some()
    }

    fn ready(&mut self, cx: &mut Ctx<'_>, readable: bool, writable: bool) -> Status {
        let r = (|| {
            let mut busy = false;
            if writable || self.start.is_none() {
                match self.pump(cx)? {
                    Status::Done => return Ok(Status::Done),
                    Status::Busy => busy = true,
                    _ => {}
                }
            }
            // A blocking socket is not read while the request is still
            // going out: no response can come before it is whole.
            if readable && !(cx.blocking && self.to_write > 0) {
                match self.receive(cx)? {
                    Status::Open => {}
                    other => return Ok(other),
                }
            }
            Ok(if busy { Status::Busy } else { Status::Open })
        })();
        r.unwrap_or_else(Status::Failed)
    }

    fn timer(&mut self, cx: &mut Ctx<'_>) -> Status {
        self.timer_armed = false;
        self.pump(cx).unwrap_or_else(Status::Failed)
    }

    fn report(&self) -> Option<FlowReport> {
        Some(self.base.report())
    }

    fn persistent(&self) -> bool {
        true
    }

    fn set_blocking(&mut self, tick: Duration) -> io::Result<()> {
        if self.schedule.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "an open loop waits on timers (--io epoll)",
            ));
        }
        self.base.set_blocking(tick)
    }
}

/// Answers each request of `request` bytes with `response` bytes. As the
/// agent side of crr it first checks the data header, answers once, then
/// closes first (graceful) or waits for the client's reset.
pub struct Responder {
    base: FlowBase,
    request: u64,
    response: u64,
    req_left: u64,
    to_write: u64,
    /// crr: header bytes still to read and check against this cookie.
    header: Option<(u64, [u8; HEADER_LEN], usize)>,
    /// crr: answer one request, then end.
    once: bool,
    close_first: bool,
    answered: bool,
    /// crr with TLS: the session starts once the header is read.
    tls: Option<Arc<Role>>,
}

impl Responder {
    pub fn new(base: FlowBase, request: u64, response: u64) -> Self {
        Responder {
            base,
            request,
            response,
            req_left: request,
            to_write: 0,
            header: None,
            once: false,
            close_first: false,
            answered: false,
            tls: None,
        }
    }

    pub fn one_shot(
        base: FlowBase,
        request: u64,
        response: u64,
        cookie: u64,
        close_first: bool,
        tls: Option<Arc<Role>>,
    ) -> Self {
        Responder {
            header: Some((cookie, [0; HEADER_LEN], 0)),
            once: true,
            close_first,
            tls,
            ..Self::new(base, request, response)
        }
    }

    /// Reads and checks the crr data header. Ok(None): not all here yet.
    /// Ok(Some(n)): done, and `n` request bytes that came with it were read
    /// too (clear text reads header and request in one call, into the
    /// worker's buffer; with TLS the bytes after the header are the
    /// session's, so only the header is read).
    fn read_header(&mut self, cx: &mut Ctx<'_>) -> io::Result<Option<u64>> {
        let Some((cookie, buf, got)) = &mut self.header else {
            return Ok(Some(0));
        };
        let mut extra = 0;
        if *got == 0 && self.tls.is_none() {
            match read_some(&mut self.base.stream, cx.buf)? {
                Io::Moved(n) if n >= HEADER_LEN => {
                    buf.copy_from_slice(&cx.buf[..HEADER_LEN]);
                    *got = HEADER_LEN;
                    extra = (n - HEADER_LEN) as u64;
                }
                Io::Moved(n) => {
                    buf[..n].copy_from_slice(&cx.buf[..n]);
                    *got = n;
                }
                Io::Blocked => return Ok(None),
                Io::Eof => return Err(io::ErrorKind::UnexpectedEof.into()),
            }
        }
        while *got < HEADER_LEN {
            match read_some(&mut self.base.stream, &mut buf[*got..])? {
                Io::Moved(n) => *got += n,
                Io::Blocked => return Ok(None),
                Io::Eof => return Err(io::ErrorKind::UnexpectedEof.into()),
            }
        }
        match decode_header(buf, *cookie) {
            Some(id) => {
                self.base.id = id;
                self.header = None;
                if let Some(role) = self.tls.take() {
                    let mut session = role.session()?;
                    // The answer and close_notify leave together.
                    session.set_defer_flush(self.close_first);
                    self.base.tls = Some(session);
                }
                if extra > 0 {
                    self.base.bytes_rx += extra;
                    cx.counters.bytes_rx += extra;
                }
                Ok(Some(extra))
            }
            None => Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "data connection with a wrong cookie",
            )),
        }
    }

    /// Counts `n` request bytes: each complete request queues a response.
    fn consume(&mut self, cx: &mut Ctx<'_>, mut n: u64) {
        while n > 0 {
            let take = n.min(self.req_left);
            n -= take;
            self.req_left -= take;
            if self.req_left == 0 {
                self.to_write += self.response;
                self.req_left = self.request;
                cx.counters.transactions += 1;
                self.base.transactions += 1;
                // How long the request waited for this end to read it
                // (an open loop's agent: its own wake-ups).
                if let Some(d) = self.base.read_delay() {
                    record_ns(&mut cx.waits.read_delay, d.as_nanos() as u64);
                }
            }
        }
    }

    fn step(&mut self, cx: &mut Ctx<'_>) -> io::Result<Status> {
        let Some(extra) = self.read_header(cx)? else {
            return Ok(Status::Open);
        };
        self.consume(cx, extra);
        // A one-shot (crr) connection that we close first carries exactly
        // one request: once it is in, nothing more can come before our
        // close, so the drain read (an EAGAIN per connection) is skipped.
        // Otherwise (rr, or crr whose client resets), edge-triggered: drain
        // reads on every call, whatever the event, to see the end too.
        let mut moved = 0;
        let mut busy = false;
        // A blocking socket reads only while there is nothing to answer:
        // the client sends nothing more until it has its response.
        loop {
            let answered_once = self.once && self.close_first && self.base.transactions > 0;
            if answered_once || (cx.blocking && self.to_write > 0) {
                break;
            }
            let (n, last) = match self.base.read_step(cx, &mut moved)? {
                ReadStep::Data(n) => (n as u64, false),
                ReadStep::Last(n) => (n as u64, true),
                ReadStep::Blocked => break,
                ReadStep::Eof => {
                    if self.once && self.answered {
                        cx.counters.graceful_closes += 1;
                    }
                    return Ok(Status::Done);
                }
                ReadStep::Budget => {
                    busy = true;
                    break;
                }
            };
            self.consume(cx, n);
            if last || (cx.blocking && self.to_write > 0) {
                break;
            }
        }
        match self.base.write_payload(cx, &mut self.to_write)? {
            WriteStep::Drained | WriteStep::Blocked => {}
            WriteStep::Budget => busy = true,
            WriteStep::Eof => return Ok(Status::Done),
        }
        if busy {
            return Ok(Status::Busy);
        }
        if self.once && self.base.transactions > 0 && self.to_write == 0 && !self.answered {
            self.answered = true;
            if let Some(t) = &self.base.tls {
                cx.counters.tls_handshakes += 1;
                cx.counters.tls_resumed += u64::from(t.resumed());
            }
        }
        if self.answered && self.close_first {
            if let Some(t) = &mut self.base.tls {
                if !t.close(&mut self.base.stream)? {
                    return Ok(Status::Open);
                }
            }
            return Ok(Status::Done);
        }
        Ok(Status::Open)
    }
}

impl Flow for Responder {
    fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        self.base.register(registry, token)
    }

    fn ready(&mut self, cx: &mut Ctx<'_>, _readable: bool, _writable: bool) -> Status {
        match self.step(cx) {
            Ok(s) => s,
            // A client that resets after its answer is the `--close reset` mode.
            Err(e) if self.answered && e.kind() == io::ErrorKind::ConnectionReset => {
                cx.counters.resets += 1;
                Status::Done
            }
            Err(e) => Status::Failed(e),
        }
    }

    fn report(&self) -> Option<FlowReport> {
        (!self.once).then(|| self.base.report())
    }

    fn persistent(&self) -> bool {
        !self.once
    }

    fn set_blocking(&mut self, tick: Duration) -> io::Result<()> {
        if self.once {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a connection per transaction needs the event loop (--io epoll)",
            ));
        }
        self.base.set_blocking(tick)
    }
}
