//! `stream` over QUIC: bulk transfer on one QUIC stream per flow, in the
//! common QUIC performance protocol (draft-banks-quic-performance, what
//! quinn's `perf` speaks): the client opens a bidirectional stream and
//! writes the 8-byte big-endian size of the response it wants, then its
//! upload (tx) or nothing (rx, where it finishes its side); the server
//! reads the upload and sends back that many bytes (here, for rx and
//! bidir, an unbounded response: until the test ends).
//!
//! Payload goes into quinn as `Bytes` handles of one message-sized buffer,
//! so the sender copies nothing before encryption (a TCP stream's write
//! copies into the socket buffer: the two figures compare).

use std::io;

use bytes::Bytes;
use quinn_proto::{Connection, Dir, ReadError, StreamId, WriteError};

use super::flow::Streams;
use crate::engine::flow::{Ctx, BUDGET};
use crate::model::spec::TestSpec;

/// The response size that means "until the test ends".
pub const UNBOUNDED: u64 = u64::MAX;

/// Which end a flow is and which ways its data go.
#[derive(Clone, Copy)]
pub struct Ends {
    /// The client (it opens the stream and says what it wants).
    pub client: bool,
    /// The client uploads (tx, bidir) / wants a response (rx, bidir).
    pub upload: bool,
    pub download: bool,
}

/// One side of one flow's bulk transfer, on one stream.
pub struct Bulk {
    /// This flow's payload bytes, both ways, over the whole test.
    bytes_tx: u64,
    bytes_rx: u64,
    /// The client (it opens the stream and says what it wants).
    client: bool,
    /// The client uploads (tx, bidir) / wants a response (rx, bidir).
    upload: bool,
    download: bool,
    stream: Option<StreamId>,
    /// The client's request header, and how much of it went out.
    header: [u8; 8],
    header_out: usize,
    /// The server: the header bytes read so far, and the response left to
    /// send once it is known (None: not yet read).
    header_in: Vec<u8>,
    respond: Option<u64>,
    /// The client finished its side (rx: after the header).
    finished: bool,
    /// The server's response ended (a bounded one was sent).
    done_sending: bool,
    payload: Bytes,
}

impl Bulk {
    pub fn new(ends: Ends, spec: &TestSpec) -> Self {
        let Ends {
            client,
            upload,
            download,
        } = ends;
        let want = if download { UNBOUNDED } else { 0 };
        let message = spec.message;
        Bulk {
            bytes_tx: 0,
            bytes_rx: 0,
            client,
            upload,
            download,
            stream: None,
            header: want.to_be_bytes(),
            header_out: 0,
            header_in: Vec::with_capacity(8),
            respond: None,
            finished: false,
            done_sending: false,
            payload: Bytes::from((0..message).map(|i| (i % 251) as u8).collect::<Vec<u8>>()),
        }
    }
}

impl Streams for Bulk {
    /// The stream's work: open/accept, header, upload, response, reads.
    fn work(&mut self, conn: &mut Connection, cx: &mut Ctx<'_>) -> io::Result<bool> {
        let client = self.client;
        if self.stream.is_none() {
            self.stream = if client {
                conn.streams().open(Dir::Bi)
            } else {
                conn.streams().accept(Dir::Bi)
            };
        }
        let Some(id) = self.stream else {
            return Ok(false);
        };
        let mut moved = 0usize;
        // The client's request: its header, then the upload or its end.
        if client {
            while self.header_out < 8 {
                match conn.send_stream(id).write(&self.header[self.header_out..]) {
                    Ok(n) => self.header_out += n,
                    Err(WriteError::Blocked) => return Ok(false),
                    Err(e) => return Err(stream_error(e)),
                }
            }
            if !self.upload && !self.finished {
                conn.send_stream(id)
                    .finish()
                    .map_err(|e| io::Error::other(format!("QUIC stream finish: {e}")))?;
                self.finished = true;
            }
        }
        let sends = if client {
            self.upload
        } else {
            self.respond.is_some_and(|r| r > 0) && !self.done_sending
        };
        if sends {
            loop {
                let mut chunk = [self.payload.clone()];
                if !client {
                    // A bounded response: no more than is left.
                    let left = self.respond.unwrap_or(0);
                    if left < chunk[0].len() as u64 {
                        chunk[0].truncate(left as usize);
                    }
                }
                match conn.send_stream(id).write_chunks(&mut chunk) {
                    Ok(w) => {
                        cx.counters.bytes_tx += w.bytes as u64;
                        self.bytes_tx += w.bytes as u64;
                        moved += w.bytes;
                        if !client {
                            let left = self.respond.unwrap_or(0);
                            if left != UNBOUNDED {
                                let left = left - w.bytes as u64;
                                self.respond = Some(left);
                                if left == 0 {
                                    let _ = conn.send_stream(id).finish();
                                    self.done_sending = true;
                                    break;
                                }
                            }
                        }
                        if w.bytes == 0 {
                            break;
                        }
                    }
                    Err(WriteError::Blocked) => break,
                    Err(e) if cx.stopping => {
                        let _ = e;
                        break;
                    }
                    Err(e) => return Err(stream_error(e)),
                }
                if moved >= BUDGET {
                    break;
                }
            }
        }
        // Reads: the server's of the request, the client's of the response.
        let reads = if client { self.download } else { true };
        if reads {
            let mut recv = conn.recv_stream(id);
            let mut chunks = match recv.read(true) {
                Ok(c) => c,
                // Finished and read to its end, or reset: nothing to read.
                Err(_) => return Ok(moved >= BUDGET),
            };
            loop {
                match chunks.next(usize::MAX) {
                    Ok(Some(c)) => {
                        let mut data = &c.bytes[..];
                        if !client && self.respond.is_none() {
                            let need = 8 - self.header_in.len();
                            let take = need.min(data.len());
                            self.header_in.extend_from_slice(&data[..take]);
                            data = &data[take..];
                            if self.header_in.len() == 8 {
                                let mut h = [0u8; 8];
                                h.copy_from_slice(&self.header_in);
                                self.respond = Some(u64::from_be_bytes(h));
                            }
                        }
                        cx.counters.bytes_rx += data.len() as u64;
                        self.bytes_rx += data.len() as u64;
                        moved += c.bytes.len();
                        if moved >= BUDGET {
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(ReadError::Blocked) => break,
                    Err(ReadError::Reset(_)) if cx.stopping => break,
                    Err(ReadError::Reset(code)) => {
                        let _ = chunks.finalize();
                        return Err(io::Error::new(
                            io::ErrorKind::ConnectionReset,
                            format!("the peer reset the QUIC stream (code {code})"),
                        ));
                    }
                }
            }
            let _ = chunks.finalize();
        }
        Ok(moved >= BUDGET)
    }

    fn started(&self) -> bool {
        self.stream.is_some()
    }

    fn totals(&self) -> (u64, u64, u64) {
        (self.bytes_tx, self.bytes_rx, 0)
    }
}

fn stream_error(e: WriteError) -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionReset,
        format!("QUIC stream write: {e}"),
    )
}
