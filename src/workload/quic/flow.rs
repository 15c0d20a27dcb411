//! One flow over QUIC: a `Link` (the connection on the flow's UDP socket)
//! driven by the worker, and the streams' work of its kind (`Streams`):
//! bulk transfer on one stream (`stream.rs`), a request per stream
//! (`rr.rs`), the perf protocol's server half (`respond.rs`). The driving
//! is the same for all: read what arrived, do the streams' work, send,
//! take the connection's events, and once more when those events made
//! new work possible (the handshake done, a stream accepted).

use std::io;

use mio::{Registry, Token};
use quinn_proto::{Connection, ConnectionError, Event, StreamEvent};

use super::link::Link;
use crate::engine::flow::{Ctx, Flow, Status};
use crate::model::flow::{FlowReport, TlsInfo};

/// What a kind does with a QUIC connection's streams.
pub trait Streams: Send {
    /// The streams' work on the established connection: open or accept,
    /// write, read, count into `cx`. Ok(true): its budget ran out with
    /// more to do.
    fn work(&mut self, conn: &mut Connection, cx: &mut Ctx<'_>) -> io::Result<bool>;
    /// Whether it has streams under way (else the driver gives the
    /// connection's events one more turn to start one).
    fn started(&self) -> bool;
    /// Payload bytes (sent, received) and transactions over the test.
    fn totals(&self) -> (u64, u64, u64);
    /// Whether it works while the handshake is under way too (a client
    /// sending its request as 0-RTT data, a server answering it).
    fn early(&self) -> bool {
        false
    }
    /// Whether a finite test's work is all done (quic-stream `--bytes`):
    /// the flow then ends.
    fn finished(&self) -> bool {
        false
    }
    /// The handshake completed (`Event::Connected`).
    fn connected(&mut self, _conn: &mut Connection, _cx: &mut Ctx<'_>) {}
    /// Whether the client is done with this connection and wants the next
    /// (quic-crr): asked after each turn of work.
    fn reconnect(&mut self) -> bool {
        false
    }
    /// The link's connection is a new one (the server accepted the
    /// client's next): per-connection state starts over.
    fn fresh(&mut self, _now: std::time::Instant) {}
    /// The connection ended (`Event::ConnectionLost`): Err when that is a
    /// failure (the default: a persistent flow's connection must last),
    /// Ok when it is how a connection ends (the client's close, quic-crr).
    fn ended(&mut self, reason: ConnectionError, _cx: &mut Ctx<'_>) -> io::Result<()> {
        Err(lost(reason))
    }
}

/// A connection that ended as a failure, in words: a peer that refused
/// the perf protocol at the handshake (TLS alert 120, no_application_protocol:
/// it speaks another ALPN) is said so; any other reason as quinn words it.
pub fn lost(reason: ConnectionError) -> io::Error {
    let refused_alpn = quinn_proto::TransportErrorCode::crypto(120);
    let why = match &reason {
        ConnectionError::ConnectionClosed(c) if c.error_code == refused_alpn => {
            "the peer does not speak the QUIC perf protocol (ALPN \"perf\"): it refused the handshake (no_application_protocol)".to_string()
        }
        ConnectionError::TransportError(e) if e.code == refused_alpn => {
            "the peer does not speak the QUIC perf protocol (ALPN \"perf\"): no protocol in common at the handshake".to_string()
        }
        other => format!("QUIC connection lost: {other}"),
    };
    io::Error::new(io::ErrorKind::ConnectionAborted, why)
}

/// One side of one flow over QUIC.
pub struct QuicFlow<S> {
    id: u32,
    link: Link,
    tls: TlsInfo,
    cc: &'static str,
    streams: S,
    /// The socket had more to read when the budget ran out.
    more_in: bool,
    /// The link's connection the streams last worked on (`Link::generation`).
    generation: u64,
}

impl<S: Streams> QuicFlow<S> {
    pub fn new(id: u32, link: Link, tls: TlsInfo, cc: &'static str, streams: S) -> Self {
        QuicFlow {
            id,
            link,
            tls,
            cc,
            streams,
            more_in: false,
            generation: 0,
        }
    }

    /// What the connection said: Err when it ended (lost or closed) and
    /// its kind says that is a failure.
    fn events(&mut self, cx: &mut Ctx<'_>) -> Result<(), io::Error> {
        while let Some(ev) = self.link.events.pop_front() {
            match ev {
                Event::ConnectionLost { reason } => self.streams.ended(reason, cx)?,
                Event::Connected => {
                    if let Some(conn) = self.link.conn() {
                        self.streams.connected(conn, cx);
                    }
                }
                Event::Stream(StreamEvent::Stopped { .. }) if !cx.stopping => {
                    return Err(io::Error::new(
                        io::ErrorKind::ConnectionReset,
                        "the peer stopped a QUIC stream",
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn work(&mut self, cx: &mut Ctx<'_>) -> io::Result<bool> {
        if self.link.generation() != self.generation {
            self.generation = self.link.generation();
            self.streams.fresh(cx.now);
        }
        let early = self.streams.early();
        let more = match self.link.conn() {
            Some(conn) if early || !conn.is_handshaking() => self.streams.work(conn, cx)?,
            _ => false,
        };
        if self.streams.reconnect() {
            self.link.reconnect(cx.now)?;
            self.generation = self.link.generation();
            self.streams.fresh(cx.now);
            return Ok(true);
        }
        Ok(more)
    }

    fn step(&mut self, cx: &mut Ctx<'_>, readable: bool) -> Status {
        let mut busy = false;
        if readable || self.more_in {
            match self.link.input(cx.now) {
                Ok(more) => self.more_in = more,
                Err(e) => return self.failed(cx, e),
            }
            busy |= self.more_in;
        }
        // Work, send, and once more for what the events made possible
        // (a stream accepted, the handshake done).
        for _ in 0..2 {
            match self.work(cx) {
                Ok(more) => busy |= more,
                Err(e) => return self.failed(cx, e),
            }
            match self.link.output(cx) {
                Ok(more) => busy |= more,
                Err(e) => return self.failed(cx, e),
            }
            if let Err(e) = self.events(cx) {
                return self.failed(cx, e);
            }
            if busy || self.streams.started() {
                break;
            }
        }
        if self.streams.finished() {
            // Its last answer is in: the link closes as the flow goes.
            Status::Done
        } else if busy {
            Status::Busy
        } else {
            Status::Open
        }
    }

    fn failed(&mut self, cx: &Ctx<'_>, e: io::Error) -> Status {
        if cx.stopping {
            // The peer ended after the window: expected.
            return Status::Done;
        }
        Status::Failed(e)
    }
}

impl<S: Streams> Flow for QuicFlow<S> {
    fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        self.link.register(registry, token)
    }

    fn ready(&mut self, cx: &mut Ctx<'_>, readable: bool, _writable: bool) -> Status {
        self.step(cx, readable)
    }

    fn timer(&mut self, cx: &mut Ctx<'_>) -> Status {
        self.link.timeout(cx.now);
        self.step(cx, false)
    }

    fn persistent(&self) -> bool {
        true
    }

    fn report(&self) -> Option<FlowReport> {
        let (local, peer) = self.link.addresses();
        let (sndbuf, rcvbuf) = self.link.buffers();
        let (bytes_tx, bytes_rx, transactions) = self.streams.totals();
        Some(FlowReport {
            flow: self.id,
            local,
            peer,
            bytes_tx,
            bytes_rx,
            transactions,
            sndbuf,
            rcvbuf,
            congestion_control: Some(self.cc.to_string()),
            tls: Some(self.tls.clone()),
            quic: self.link.report(self.cc),
            ..Default::default()
        })
    }

    /// QUIC paces its packets and times its acknowledgements in
    /// microseconds: on epoll's millisecond each pacing gap cost a whole
    /// one (one flow ran at 0.42 Gbit/s on loopback at 4% of a core).
    fn scheduled(&self) -> bool {
        true
    }
}
