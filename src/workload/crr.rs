//! `crr`: connect, request, response, close per transaction (netperf
//! TCP_CRR). Each client flow is a slot that opens one connection after
//! another; the agent accepts on one SO_REUSEPORT listener per worker and
//! answers each connection once.
//!
//! Ports: in `graceful` mode the agent closes first, so TIME_WAIT stays on
//! the agent's side and the client's ephemeral port is free at once; the
//! agent's kernel accepts a new SYN on a TIME_WAIT pair when its timestamps
//! are newer. In `reset` mode the client closes with SO_LINGER 0 and no
//! TIME_WAIT exists at all. Either way a long run does not exhaust the
//! client's ports; the counters record how each connection ended.

use mio::net::TcpStream;
use mio::{Registry, Token};
use std::io::{self, IoSlice, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::engine::flow::{
    encode_header, read_some, write_some, Ctx, Flow, FlowBase, Io, Status, HEADER_LEN,
};
use crate::engine::sockopt;
use crate::engine::tls::{Role, TlsConn};
use crate::measure::histogram::record_ns;
use crate::model::spec::{self, CloseMode, MainMetric, TestSpec};
use crate::workload::rr::Responder;
use std::sync::Arc;

use super::kind::KindFacts;
use super::per_conn::{self, Acceptor, OnAccept};
use super::{Conns, Pattern, Plugin, WorkloadError};
use crate::model::result::Iteration;
use crate::units::{fmt_bytes, fmt_rate};

/// Connect, request, response, close per transaction.
pub struct Crr;

/// This kind's name in a spec, on the command line and in the registry.
pub const NAME: spec::Workload = spec::Workload::named("crr");

impl Plugin for Crr {
    fn facts(&self) -> KindFacts {
        KindFacts {
            threads: true,
            threads_when_closed: true,
            ..KindFacts::EXCHANGE
        }
    }

    fn kind(&self) -> spec::Workload {
        NAME
    }

    fn help(&self) -> &'static str {
        "Connect, request, response, close per transaction (TCP_CRR)"
    }

    fn pattern(&self) -> Pattern {
        Pattern::PerTransaction
    }

    fn describe(&self, spec: &TestSpec) -> String {
        format!(
            "crr {}/{}, {} close",
            fmt_bytes(spec.request),
            fmt_bytes(spec.response),
            format!("{:?}", spec.close).to_lowercase()
        )
    }

    fn report_lines(&self, _spec: &TestSpec, it: &Iteration) -> Vec<(&'static str, String)> {
        vec![conns_line(it)]
    }

    fn main_metric(&self, _spec: &TestSpec) -> MainMetric {
        MainMetric::TransactionRate
    }

    fn client_flows(
        &self,
        spec: &TestSpec,
        conns: Conns,
    ) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
        client_flows(spec, conns)
    }

    fn agent_flows(
        &self,
        spec: &TestSpec,
        conns: Conns,
    ) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
        agent_flows(spec, conns)
    }
}

/// Connections per second and how they ended (the client's count).
pub fn conns_line(it: &Iteration) -> (&'static str, String) {
    let c = &it.counters.client;
    (
        "conns/s",
        format!(
            "{} ({} graceful, {} reset)",
            fmt_rate(it.connections_per_s),
            c.graceful_closes,
            c.resets
        ),
    )
}

/// One connecting slot per flow, each to its agent data address.
pub fn client_flows(spec: &TestSpec, conns: Conns) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
    if conns.connect_to.is_empty() {
        return Err(WorkloadError::NoDataAddress("a per-transaction workload"));
    }
    Ok(conns
        .connect_to
        .iter()
        .map(|&(id, to)| {
            Box::new(Connector::new(
                id,
                to,
                spec,
                conns.cookie,
                conns.tls.clone(),
            )) as Box<dyn Flow>
        })
        .collect())
}

/// One acceptor per listener (one per agent worker, SO_REUSEPORT).
pub fn agent_flows(spec: &TestSpec, conns: Conns) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
    Ok(conns
        .listeners
        .into_iter()
        .map(|l| {
            Box::new(Acceptor::new(
                l,
                OneShot {
                    request: spec.request,
                    response: spec.response,
                    cookie: conns.cookie,
                    close_first: spec.close == CloseMode::Graceful,
                    tls: conns.tls.clone(),
                },
            )) as Box<dyn Flow>
        })
        .collect())
}

enum State {
    Idle,
    Connecting,
    Sending { off: u64 },
    Receiving { left: u64 },
    AwaitEof,
}

pub struct Connector {
    id: u32,
    addr: SocketAddr,
    spec: TestSpec,
    request: u64,
    response: u64,
    stream: Option<TcpStream>,
    state: State,
    began: Instant,
    header: [u8; HEADER_LEN],
    /// TLS client settings (shared by the side: resumption spans connections).
    tls: Option<Arc<Role>>,
    /// The current connection's TLS session.
    session: Option<TlsConn>,
    /// What the first TLS connection negotiated, for the result.
    tls_info: Option<crate::model::flow::TlsInfo>,
    /// `--io threads`: connections are blocking sockets with this timeout,
    /// never registered with an event loop.
    blocking: Option<Duration>,
    /// The client takes payload (a socket option), looked up once.
    receives: bool,
}

impl Connector {
    pub fn new(
        id: u32,
        addr: SocketAddr,
        spec: &TestSpec,
        cookie: u64,
        tls: Option<Arc<Role>>,
    ) -> Self {
        Connector {
            id,
            addr,
            spec: spec.clone(),

            request: spec.request,
            response: spec.response,
            stream: None,
            state: State::Idle,
            began: Instant::now(),
            header: encode_header(cookie, id),
            tls,
            session: None,
            tls_info: None,
            blocking: None,
            receives: super::receives(spec, false),
        }
    }

    fn open(&mut self, cx: &mut Ctx<'_>) -> io::Result<()> {
        let stream = per_conn::dial(cx, &self.addr, &self.spec, self.receives, self.blocking)?;
        self.stream = Some(stream);
        // The loop's clock predates the previous connection's close.
        self.began = Instant::now();
        self.state = State::Connecting;
        Ok(())
    }

    fn close(&mut self) {
        // Closing the only descriptor of a socket removes it from the epoll
        // set: no epoll_ctl(DEL) per transaction.
        self.stream = None;
        self.session = None;
        self.state = State::Idle;
    }

    fn step(&mut self, cx: &mut Ctx<'_>) -> io::Result<()> {
        // On blocking sockets nothing says EAGAIN: one transaction per call,
        // so the thread sees its clock between connections.
        let mut had_stream = false;
        loop {
            let Some(stream) = self.stream.as_mut() else {
                if had_stream && self.blocking.is_some() {
                    return Ok(());
                }
                self.open(cx)?;
                continue;
            };
            had_stream = true;
            match self.state {
                State::Idle => unreachable!("a stream exists only once opened"),
                State::Connecting => {
                    if let Some(role) = &self.tls {
                        if let Some(e) = stream.take_error()? {
                            return Err(e);
                        }
                        match stream.peer_addr() {
                            Ok(_) => {}
                            Err(e) if e.kind() == io::ErrorKind::NotConnected => return Ok(()),
                            Err(e) => return Err(e),
                        }
                        // The header goes in clear (it routes the connection)
                        // in the same segment as the ClientHello; the session
                        // then carries the request.
                        let mut session = role.session()?;
                        session.set_prefix(&self.header);
                        self.session = Some(session);
                        self.state = State::Sending { off: 0 };
                        continue;
                    }
                    // Header and request leave in one segment (writev), tried
                    // at once: on a near peer the handshake is often done by
                    // the time connect(2) returns. While it is not, the write
                    // says EAGAIN (wait for writable); a failed connect shows
                    // as the write's error. No SO_ERROR or getpeername probe.
                    let n = (self.request as usize).min(cx.payload.len());
                    let parts = [IoSlice::new(&self.header), IoSlice::new(&cx.payload[..n])];
                    let written = loop {
                        match stream.write_vectored(&parts) {
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                            other => break other,
                        }
                    };
                    match written {
                        Ok(w) if w >= HEADER_LEN => {
                            let sent = (w - HEADER_LEN) as u64;
                            cx.counters.bytes_tx += sent;
                            self.state = State::Sending { off: sent };
                        }
                        Ok(_) => {
                            return Err(io::Error::new(
                                io::ErrorKind::WriteZero,
                                "could not send the data header",
                            ))
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                        Err(e) => return Err(e),
                    }
                }
                State::Sending { off } => {
                    if off >= self.request {
                        self.state = State::Receiving {
                            left: self.response,
                        };
                        if self.session.is_none() {
                            // The response cannot be here yet: reading now
                            // is an EAGAIN per transaction. Its arrival,
                            // after this write, raises a readable edge.
                            return Ok(());
                        }
                        continue;
                    }
                    let n = ((self.request - off) as usize).min(cx.payload.len());
                    let w = match &mut self.session {
                        Some(t) => t.write(stream, &cx.payload[..n])?,
                        None => write_some(stream, &cx.payload[..n])?,
                    };
                    match w {
                        Io::Moved(w) => {
                            cx.counters.bytes_tx += w as u64;
                            self.state = State::Sending {
                                off: off + w as u64,
                            };
                        }
                        Io::Blocked => return Ok(()),
                        Io::Eof => return Err(io::ErrorKind::UnexpectedEof.into()),
                    }
                }
                State::Receiving { left } => match match &mut self.session {
                    Some(t) => t.read(stream, cx.buf)?,
                    None => read_some(stream, cx.buf)?,
                } {
                    Io::Moved(n) => {
                        let n = n as u64;
                        if n > left {
                            return Err(io::Error::new(
                                io::ErrorKind::InvalidData,
                                "more response bytes than asked for",
                            ));
                        }
                        cx.counters.bytes_rx += n;
                        if n < left {
                            self.state = State::Receiving { left: left - n };
                        } else if self.spec.close == CloseMode::Reset {
                            sockopt::set_reset_on_close(stream.as_raw_fd())?;
                            self.finish(cx, false);
                        } else {
                            self.state = State::AwaitEof;
                            if self.session.is_none() && cx.peer_closed == Some(false) {
                                // The agent's FIN is not here yet: sleep
                                // until it raises an edge, not EAGAIN first.
                                return Ok(());
                            }
                        }
                    }
                    Io::Blocked => return Ok(()),
                    Io::Eof => return Err(io::ErrorKind::UnexpectedEof.into()),
                },
                State::AwaitEof => match match &mut self.session {
                    Some(t) => t.read(stream, cx.buf)?,
                    None => read_some(stream, cx.buf)?,
                } {
                    Io::Eof => self.finish(cx, true),
                    Io::Blocked => return Ok(()),
                    Io::Moved(_) => {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            "data after the response",
                        ))
                    }
                },
            }
        }
    }

    /// One transaction done: count it, close, and open the next connection.
    fn finish(&mut self, cx: &mut Ctx<'_>, graceful: bool) {
        let took = Instant::now().saturating_duration_since(self.began);
        record_ns(cx.hist, took.as_nanos() as u64);
        per_conn::count_connection(cx, self.session.as_mut(), &mut self.tls_info, graceful);
        self.close();
    }
}

impl Flow for Connector {
    fn register(&mut self, _registry: &Registry, _token: Token) -> io::Result<()> {
        Ok(()) // each connection registers itself when opened
    }

    fn ready(&mut self, cx: &mut Ctx<'_>, _readable: bool, _writable: bool) -> Status {
        if let Err(e) = self.step(cx) {
            self.close();
            per_conn::connection_failed(cx, self.id, &e);
        }
        Status::Open
    }

    fn timer(&mut self, cx: &mut Ctx<'_>) -> Status {
        if self.stream.is_none() {
            return self.ready(cx, false, false);
        }
        Status::Open
    }

    /// Each connection is then a blocking socket: connect, write, read the
    /// response, read the FIN, close, with no event loop (netperf's loop).
    fn set_blocking(&mut self, tick: Duration) -> io::Result<()> {
        self.blocking = Some(tick);
        Ok(())
    }

    /// With TLS: what the slot's first connection negotiated (a crr slot
    /// has no lasting socket for a kernel view).
    fn report(&self) -> Option<crate::model::flow::FlowReport> {
        self.tls_info
            .as_ref()
            .map(|i| crate::model::flow::FlowReport {
                flow: self.id,
                tls: Some(i.clone()),
                ..Default::default()
            })
    }
}

/// The agent's crr server: each connection it accepts is answered once
/// by a one-shot `Responder`.
pub struct OneShot {
    request: u64,
    response: u64,
    cookie: u64,
    close_first: bool,
    tls: Option<Arc<Role>>,
}

impl OnAccept for OneShot {
    fn serve(&mut self, stream: TcpStream) -> Option<Box<dyn Flow>> {
        Some(Box::new(Responder::one_shot(
            FlowBase::new(0, stream),
            self.request,
            self.response,
            self.cookie,
            self.close_first,
            self.tls.clone(),
        )))
    }
}
