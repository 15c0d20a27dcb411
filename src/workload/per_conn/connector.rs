//! The client of every kind with a connection per transaction: one state
//! machine that opens a connection, (with TLS) starts its session, sends
//! a request and reads its response when the kind has an exchange, and
//! closes, then opens the next. The kinds differ in what a connection
//! carries (`Carries`), as neper's flows differ by a table and not by a
//! copy: crr and tls-handshake carry a request and its response, conn
//! carries nothing.

use mio::net::TcpStream;
use mio::{Registry, Token};
use std::io::{self, IoSlice, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::flow::{
    encode_header, read_some, write_some, Ctx, Flow, Io, Status, HEADER_LEN,
};
use crate::engine::sockopt;
use crate::engine::tls::{Role, TlsConn};
use crate::measure::histogram::record_ns;
use crate::model::flow::{FlowReport, TlsInfo};
use crate::model::spec::{CloseMode, TestSpec};

/// What each connection carries once it is open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Carries {
    /// A request and its response (crr, tls-handshake). A transaction's
    /// latency is the whole connection's, from its first write to its
    /// close.
    Exchange { request: u64, response: u64 },
    /// Nothing (conn): a connection is the transaction, its latency from
    /// connect(2) (the SYN) to established, or with TLS to the end of the
    /// client's handshake.
    Nothing,
}

enum State {
    Connecting,
    /// TLS without an exchange: the handshake is all there is to wait for.
    Handshaking,
    Sending {
        off: u64,
    },
    Receiving {
        left: u64,
    },
    AwaitEof,
}

/// A client flow: one connection after another to its agent address.
pub struct Connector {
    id: u32,
    addr: SocketAddr,
    spec: TestSpec,
    carries: Carries,
    /// `--close reset`: the client resets (SO_LINGER 0) once its part is
    /// done; else it waits for the agent's FIN.
    reset: bool,
    stream: Option<TcpStream>,
    state: State,
    /// Where the current connection's latency starts.
    began: Instant,
    /// The latency, when it ends before the connection does (`Nothing`).
    latency: Option<Duration>,
    header: [u8; HEADER_LEN],
    /// TLS client settings (shared by the side: resumption spans
    /// connections).
    tls: Option<Arc<Role>>,
    /// The current connection's TLS session.
    session: Option<TlsConn>,
    /// What the first TLS connection negotiated, for the result.
    tls_info: Option<TlsInfo>,
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
        carries: Carries,
        cookie: u64,
        tls: Option<Arc<Role>>,
    ) -> Self {
        Connector {
            id,
            addr,
            spec: spec.clone(),
            carries,
            reset: spec.close == CloseMode::Reset,
            stream: None,
            state: State::Connecting,
            began: Instant::now(),
            latency: None,
            header: encode_header(cookie, id),
            tls,
            session: None,
            tls_info: None,
            blocking: None,
            receives: super::super::receives(spec, false),
        }
    }

    fn open(&mut self, cx: &mut Ctx<'_>) -> io::Result<()> {
        let syn = Instant::now();
        let stream = super::dial(cx, &self.addr, &self.spec, self.receives, self.blocking)?;
        self.stream = Some(stream);
        // The loop's clock predates the previous connection's close: take
        // the time itself. A connection's latency (`Nothing`) starts with
        // connect(2); an exchange's, once the socket is open.
        self.began = match self.carries {
            Carries::Nothing => syn,
            Carries::Exchange { .. } => Instant::now(),
        };
        self.state = State::Connecting;
        Ok(())
    }

    /// Closing the only descriptor of a socket removes it from the epoll
    /// set: no epoll_ctl(DEL) per transaction.
    fn close(&mut self) {
        self.stream = None;
        self.session = None;
        self.latency = None;
        self.state = State::Connecting;
    }

    /// Drives the current connection, and opens the next when it ends.
    /// Ok(true): one ended and the flow yields (`Nothing`: a peer that
    /// connects at once must not keep the worker from its other flows and
    /// its clock; an exchange always waits for its response first).
    fn step(&mut self, cx: &mut Ctx<'_>) -> io::Result<bool> {
        // On blocking sockets nothing says EAGAIN: one transaction per
        // call, so the thread sees its clock between connections.
        let mut had_stream = false;
        loop {
            let Some(stream) = self.stream.as_mut() else {
                if had_stream && self.blocking.is_some() {
                    return Ok(false);
                }
                self.open(cx)?;
                continue;
            };
            had_stream = true;
            let ended = match self.state {
                State::Connecting => {
                    let Some(next) = self.connecting(cx)? else {
                        return Ok(false);
                    };
                    next
                }
                State::Handshaking => {
                    let session = self.session.as_mut().expect("set when handshaking");
                    if !session.handshake(stream)? {
                        return Ok(false);
                    }
                    let Some(ended) = self.established(cx)? else {
                        return Ok(false);
                    };
                    ended
                }
                State::Sending { off } => {
                    let Carries::Exchange { request, response } = self.carries else {
                        unreachable!("only an exchange sends");
                    };
                    if off >= request {
                        self.state = State::Receiving { left: response };
                        if self.session.is_none() {
                            // The response cannot be here yet: reading now
                            // is an EAGAIN per transaction. Its arrival,
                            // after this write, raises a readable edge.
                            return Ok(false);
                        }
                        continue;
                    }
                    let n = ((request - off) as usize).min(cx.payload.len());
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
                        Io::Blocked => return Ok(false),
                        Io::Eof => return Err(io::ErrorKind::UnexpectedEof.into()),
                    }
                    false
                }
                State::Receiving { left } => {
                    let got = match &mut self.session {
                        Some(t) => t.read(stream, cx.buf)?,
                        None => read_some(stream, cx.buf)?,
                    };
                    match got {
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
                                false
                            } else {
                                let Some(ended) = self.done(cx)? else {
                                    return Ok(false);
                                };
                                ended
                            }
                        }
                        Io::Blocked => return Ok(false),
                        Io::Eof => return Err(io::ErrorKind::UnexpectedEof.into()),
                    }
                }
                State::AwaitEof => {
                    let got = match &mut self.session {
                        Some(t) => t.read(stream, cx.buf)?,
                        None => read_some(stream, cx.buf)?,
                    };
                    match got {
                        Io::Eof => {
                            self.finish(cx, true);
                            true
                        }
                        Io::Blocked => return Ok(false),
                        Io::Moved(_) => {
                            return Err(io::Error::new(
                                io::ErrorKind::InvalidData,
                                match self.carries {
                                    Carries::Nothing => "data from the agent on a conn connection",
                                    Carries::Exchange { .. } => "data after the response",
                                },
                            ))
                        }
                    }
                }
            };
            if ended && self.carries == Carries::Nothing {
                return Ok(true);
            }
        }
    }

    /// The connection is being opened. None: wait for the next event;
    /// Some(ended): whether a connection ended on the way.
    fn connecting(&mut self, cx: &mut Ctx<'_>) -> io::Result<Option<bool>> {
        let stream = self.stream.as_mut().expect("opened");
        // An exchange without TLS writes at once and learns of a failed
        // connect from the write; the rest ask whether it is established.
        let probe = self.tls.is_some() || self.carries == Carries::Nothing;
        if probe {
            if let Some(e) = stream.take_error()? {
                return Err(e);
            }
            match stream.peer_addr() {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotConnected => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        if let Some(role) = &self.tls {
            // The header goes in clear (it routes the connection, and the
            // agent checks it before any handshake work) in the same
            // segment as the ClientHello; the session carries the rest. An
            // exchange's first write drives the handshake.
            let mut session = role.session()?;
            session.set_prefix(&self.header);
            self.session = Some(session);
            self.state = match self.carries {
                Carries::Exchange { .. } => State::Sending { off: 0 },
                Carries::Nothing => State::Handshaking,
            };
            return Ok(Some(false));
        }
        let Carries::Exchange { request, .. } = self.carries else {
            return self.established(cx);
        };
        // Header and request leave in one segment (writev), tried at once:
        // on a near peer the handshake is often done by the time connect(2)
        // returns. While it is not, the write says EAGAIN (wait for
        // writable); a failed connect shows as the write's error. No
        // SO_ERROR or getpeername probe.
        let n = (request as usize).min(cx.payload.len());
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
                Ok(Some(false))
            }
            Ok(_) => Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "could not send the data header",
            )),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Connected, and the handshake done, with nothing to carry: the
    /// latency is taken, then as `done`.
    fn established(&mut self, cx: &mut Ctx<'_>) -> io::Result<Option<bool>> {
        self.latency = Some(Instant::now().saturating_duration_since(self.began));
        self.done(cx)
    }

    /// The client's part is done: reset (Some(true), ended) or wait for
    /// the agent's FIN (Some(false); None: wait for its edge first).
    fn done(&mut self, cx: &mut Ctx<'_>) -> io::Result<Option<bool>> {
        if self.reset {
            let stream = self.stream.as_ref().expect("connected");
            sockopt::set_reset_on_close(stream.as_raw_fd())?;
            self.finish(cx, false);
            return Ok(Some(true));
        }
        self.state = State::AwaitEof;
        if self.session.is_none() && cx.peer_closed == Some(false) {
            // The agent's FIN is not here yet: sleep until it raises an
            // edge, not EAGAIN first.
            return Ok(None);
        }
        Ok(Some(false))
    }

    /// One transaction done: count it, close, and open the next
    /// connection.
    fn finish(&mut self, cx: &mut Ctx<'_>, graceful: bool) {
        let took = self
            .latency
            .unwrap_or_else(|| Instant::now().saturating_duration_since(self.began));
        record_ns(cx.hist, took.as_nanos() as u64);
        super::count_connection(cx, self.session.as_mut(), &mut self.tls_info, graceful);
        self.close();
    }
}

impl Flow for Connector {
    fn register(&mut self, _registry: &Registry, _token: Token) -> io::Result<()> {
        Ok(()) // each connection registers itself when opened
    }

    fn ready(&mut self, cx: &mut Ctx<'_>, _readable: bool, _writable: bool) -> Status {
        match self.step(cx) {
            Ok(true) => Status::Busy,
            Ok(false) => Status::Open,
            Err(e) => {
                self.close();
                super::connection_failed(cx, self.id, &e);
                Status::Open
            }
        }
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

    /// With TLS: what the slot's first connection negotiated (a slot has
    /// no lasting socket for a kernel view).
    fn report(&self) -> Option<FlowReport> {
        self.tls_info.as_ref().map(|i| FlowReport {
            flow: self.id,
            tls: Some(i.clone()),
            ..Default::default()
        })
    }
}
