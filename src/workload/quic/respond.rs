//! The server half of the QUIC performance protocol on one connection
//! (draft-banks-quic-performance): each stream the client opens carries a
//! request, 8 bytes giving the size of the response wanted and then the
//! upload, read to its end; the response goes back on the same stream (a
//! bidirectional one) or on a new unidirectional stream, and ends with the
//! stream. The perf server (`serve --quic-perf`) runs one per client, and
//! an agent's `quic-rr` flow one per flow.

use std::collections::HashMap;
use std::io;

use bytes::Bytes;
use quinn_proto::{Connection, ConnectionError, Dir, ReadError, StreamId, WriteError};

use super::flow::Streams;
use crate::engine::flow::{Ctx, BUDGET};

/// What a responder served.
#[derive(Debug, Default, Clone, Copy)]
pub struct Served {
    pub connections: u64,
    /// Requests taken (streams accepted) and answered (responses sent to
    /// their end).
    pub requests: u64,
    pub answered: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

impl Served {
    /// Adds what another responder served (its connections aside).
    pub fn add(&mut self, s: &Served) {
        self.requests += s.requests;
        self.answered += s.answered;
        self.bytes_in += s.bytes_in;
        self.bytes_out += s.bytes_out;
    }
}

/// One request on one stream.
struct Request {
    header: [u8; 8],
    header_in: usize,
    /// The response left to send (known once the header is read).
    left: Option<u64>,
    /// The request was read to its end: the response may go.
    read_done: bool,
    /// Where the response goes: the same stream (bi), or one opened for it.
    reply: Option<StreamId>,
    bi: bool,
}

/// The requests under way on one connection.
pub struct Responder {
    requests: HashMap<StreamId, Request>,
    payload: Bytes,
    pub served: Served,
}

impl Responder {
    /// Responses are cut from `payload` (shared, not copied).
    pub fn new(payload: Bytes) -> Self {
        Responder {
            requests: HashMap::new(),
            payload,
            served: Served::default(),
        }
    }

    /// The connection ended: its requests with it.
    pub fn lost(&mut self) {
        self.requests.clear();
    }

    /// The connection's new streams taken, their requests read and
    /// responses sent, up to the budget (its events are the caller's). Ok(true): the budget ran out
    /// with more to do.
    pub fn serve(&mut self, conn: &mut Connection) -> io::Result<bool> {
        for dir in [Dir::Bi, Dir::Uni] {
            while let Some(id) = conn.streams().accept(dir) {
                self.served.requests += 1;
                self.requests.insert(
                    id,
                    Request {
                        header: [0; 8],
                        header_in: 0,
                        left: None,
                        read_done: false,
                        reply: (dir == Dir::Bi).then_some(id),
                        bi: dir == Dir::Bi,
                    },
                );
            }
        }
        let mut moved = 0;
        let served = &mut self.served;
        let payload = &self.payload;
        let mut result = Ok(());
        // Each request's turn, until the budget is spent (the rest keep
        // their place); an answered one is let go. No list per call.
        self.requests.retain(|&id, r| {
            if moved >= BUDGET as u64 || result.is_err() {
                return true;
            }
            if !r.read_done {
                match read_request(conn, id, r, served) {
                    Ok(done) => r.read_done = done,
                    Err(e) => {
                        result = Err(e);
                        return true;
                    }
                }
            }
            if !r.read_done {
                return true;
            }
            // Ended (or reset) before it said anything: no request.
            if r.left.is_none() {
                return false;
            }
            if r.reply.is_none() && !r.bi {
                r.reply = conn.streams().open(Dir::Uni);
            }
            let Some(out) = r.reply else {
                return true;
            };
            let before = served.bytes_out;
            let finished = respond(conn, out, r, payload, served);
            moved += served.bytes_out - before;
            !finished
        });
        result?;
        Ok(moved >= BUDGET as u64)
    }
}

/// An agent's flow of `quic-rr` or `quic-crr`: the responder, its counts
/// into the worker's (bytes both ways, a transaction per response sent;
/// with a connection per transaction, connections and handshakes too).
pub struct Answers {
    pub responder: Responder,
    counted: Served,
    /// A connection per transaction (quic-crr): each one the client closes
    /// is how it ends, and a new one follows.
    per_connection: bool,
}

impl Answers {
    pub fn new(payload: Bytes, per_connection: bool) -> Self {
        Answers {
            responder: Responder::new(payload),
            counted: Served::default(),
            per_connection,
        }
    }
}

impl Streams for Answers {
    fn work(&mut self, conn: &mut Connection, cx: &mut Ctx<'_>) -> io::Result<bool> {
        let more = self.responder.serve(conn)?;
        let s = self.responder.served;
        cx.counters.bytes_rx += s.bytes_in - self.counted.bytes_in;
        cx.counters.bytes_tx += s.bytes_out - self.counted.bytes_out;
        cx.counters.transactions += s.answered - self.counted.answered;
        self.counted = s;
        Ok(more)
    }

    fn started(&self) -> bool {
        self.responder.served.requests > 0
    }

    fn totals(&self) -> (u64, u64, u64) {
        let s = self.responder.served;
        (s.bytes_out, s.bytes_in, s.answered)
    }

    /// A client's 0-RTT request is answered before its handshake ends.
    fn early(&self) -> bool {
        self.per_connection
    }

    fn connected(&mut self, conn: &mut Connection, cx: &mut Ctx<'_>) {
        if self.per_connection {
            cx.counters.connections += 1;
            cx.counters.tls_handshakes += 1;
            cx.counters.tls_resumed += u64::from(super::link::took_0rtt(conn));
        }
    }

    fn fresh(&mut self, _now: std::time::Instant) {
        self.responder.lost();
    }

    fn ended(&mut self, reason: ConnectionError, _cx: &mut Ctx<'_>) -> io::Result<()> {
        match reason {
            ConnectionError::ApplicationClosed(_) if self.per_connection => Ok(()),
            other => Err(super::flow::lost(other)),
        }
    }
}

/// Reads a request: its header, then its upload to the end. Ok(true) once
/// the request was read to its end; a request that ends before its
/// header is whole is the client's error.
fn read_request(
    conn: &mut Connection,
    id: StreamId,
    r: &mut Request,
    served: &mut Served,
) -> io::Result<bool> {
    let mut recv = conn.recv_stream(id);
    let Ok(mut chunks) = recv.read(true) else {
        return Ok(true);
    };
    let mut done = false;
    loop {
        match chunks.next(usize::MAX) {
            Ok(Some(c)) => {
                let mut data = &c.bytes[..];
                if r.left.is_none() {
                    let take = (8 - r.header_in).min(data.len());
                    r.header[r.header_in..r.header_in + take].copy_from_slice(&data[..take]);
                    r.header_in += take;
                    data = &data[take..];
                    if r.header_in == 8 {
                        r.left = Some(u64::from_be_bytes(r.header));
                    }
                }
                served.bytes_in += data.len() as u64;
            }
            Ok(None) => {
                done = true;
                break;
            }
            Err(ReadError::Blocked) => break,
            Err(ReadError::Reset(_)) => {
                done = true;
                break;
            }
        }
    }
    let _ = chunks.finalize();
    if done && r.left.is_none() && r.header_in > 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "a QUIC perf request ended {} bytes into its 8-byte header",
                r.header_in
            ),
        ));
    }
    Ok(done)
}

/// Sends the response until the stream is blocked or it is all sent.
/// True once it is all sent (its stream finished).
fn respond(
    conn: &mut Connection,
    out: StreamId,
    r: &mut Request,
    payload: &Bytes,
    served: &mut Served,
) -> bool {
    let Some(mut left) = r.left else {
        return false;
    };
    let start = served.bytes_out;
    while left > 0 {
        let mut chunk = [payload.clone()];
        if left < chunk[0].len() as u64 {
            chunk[0].truncate(left as usize);
        }
        match conn.send_stream(out).write_chunks(&mut chunk) {
            Ok(w) if w.bytes > 0 => {
                left -= w.bytes as u64;
                served.bytes_out += w.bytes as u64;
            }
            Ok(_) | Err(WriteError::Blocked) => {
                r.left = Some(left);
                return false;
            }
            // Stopped or closed by the client: nothing more to send.
            Err(_) => return true,
        }
        if served.bytes_out - start >= BUDGET as u64 {
            r.left = Some(left);
            return false;
        }
    }
    r.left = Some(0);
    let _ = conn.send_stream(out).finish();
    served.answered += 1;
    true
}
