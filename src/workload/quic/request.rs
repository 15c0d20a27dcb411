//! One request on its own stream, the client's half of the perf protocol
//! (the server's is `respond.rs`): the 8-byte size of the response wanted,
//! the request's bytes, the end of the stream's sending side; then the
//! response, read to the stream's end, which must be the size asked.
//! `quic-rr` keeps several of these under way on one connection,
//! `quic-crr` one per connection: the same machine, as neper's rr and crr
//! share theirs.

use std::io;

use bytes::Bytes;
use quinn_proto::{Connection, ReadError, StreamId, WriteError};

use crate::engine::flow::Ctx;

/// What a request's sizes and payload are, shared by its flow's requests.
pub struct Shape {
    pub request: u64,
    pub response: u64,
    /// The response size, as the header says it.
    header: [u8; 8],
    /// What request bytes are cut from (shared, not copied).
    payload: Bytes,
}

impl Shape {
    /// `piece`: the largest buffer a request is cut from.
    pub fn new(request: u64, response: u64, piece: u64) -> Self {
        Shape {
            request,
            response,
            header: response.to_be_bytes(),
            payload: Bytes::from(vec![0xa5; request.clamp(1, piece) as usize]),
        }
    }
}

/// How far a request's writing got.
#[derive(Debug, PartialEq, Eq)]
pub enum Wrote {
    /// All of it, and the stream's sending side is finished.
    All,
    /// The connection (or the stream) takes no more now.
    Blocked,
    /// The budget ran out first.
    Budget,
}

/// One request under way.
pub struct Request {
    pub id: StreamId,
    header_out: usize,
    left: u64,
    finished: bool,
    /// Response bytes read so far.
    got: u64,
}

impl Request {
    pub fn new(id: StreamId, shape: &Shape) -> Self {
        Request {
            id,
            header_out: 0,
            left: shape.request,
            finished: false,
            got: 0,
        }
    }

    /// Writes what is left of the header and the request, up to `budget`
    /// bytes of request (counted into `moved` and the worker's bytes_tx),
    /// and finishes the stream's sending side once it is all out.
    pub fn write(
        &mut self,
        conn: &mut Connection,
        shape: &Shape,
        cx: &mut Ctx<'_>,
        moved: &mut usize,
        budget: usize,
    ) -> io::Result<Wrote> {
        if self.finished {
            return Ok(Wrote::All);
        }
        let mut send = conn.send_stream(self.id);
        while self.header_out < 8 {
            match send.write(&shape.header[self.header_out..]) {
                Ok(n) => self.header_out += n,
                Err(WriteError::Blocked) => return Ok(Wrote::Blocked),
                Err(e) => return Err(write_error(e)),
            }
        }
        while self.left > 0 {
            if *moved >= budget {
                return Ok(Wrote::Budget);
            }
            let mut chunk = [shape.payload.clone()];
            if self.left < chunk[0].len() as u64 {
                chunk[0].truncate(self.left as usize);
            }
            match send.write_chunks(&mut chunk) {
                Ok(w) if w.bytes > 0 => {
                    self.left -= w.bytes as u64;
                    cx.counters.bytes_tx += w.bytes as u64;
                    *moved += w.bytes;
                }
                Ok(_) | Err(WriteError::Blocked) => return Ok(Wrote::Blocked),
                Err(e) => return Err(write_error(e)),
            }
        }
        send.finish()
            .map_err(|e| io::Error::other(format!("QUIC stream finish: {e}")))?;
        self.finished = true;
        Ok(Wrote::All)
    }

    /// Reads what arrived of the response (counted into `moved` and the
    /// worker's bytes_rx). Ok(true): it ended, whole.
    pub fn read(
        &mut self,
        conn: &mut Connection,
        shape: &Shape,
        cx: &mut Ctx<'_>,
        moved: &mut usize,
    ) -> io::Result<bool> {
        let mut recv = conn.recv_stream(self.id);
        let Ok(mut chunks) = recv.read(true) else {
            return Ok(false);
        };
        let mut ended = false;
        loop {
            match chunks.next(usize::MAX) {
                Ok(Some(c)) => {
                    let n = c.bytes.len();
                    self.got += n as u64;
                    cx.counters.bytes_rx += n as u64;
                    *moved += n;
                }
                Ok(None) => {
                    ended = true;
                    break;
                }
                Err(ReadError::Blocked) => break,
                Err(ReadError::Reset(_)) if cx.stopping => break,
                Err(ReadError::Reset(code)) => {
                    let _ = chunks.finalize();
                    return Err(io::Error::new(
                        io::ErrorKind::ConnectionReset,
                        format!("the peer reset a QUIC request stream (code {code})"),
                    ));
                }
            }
        }
        let _ = chunks.finalize();
        if ended && self.got != shape.response {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "a QUIC response ended after {} of the {} bytes asked",
                    self.got, shape.response
                ),
            ));
        }
        Ok(ended)
    }
}

fn write_error(e: WriteError) -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionReset,
        format!("QUIC request stream write: {e}"),
    )
}
