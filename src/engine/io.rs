//! One non-blocking read or write on a socket, and its outcome. Flows
//! (clear text) and both TLS backends step with it; it sits below them so
//! that the TLS transport, which flows hold, need not import the flows.

use std::io::{self, Read, Write};

/// Outcome of one non-blocking read or write attempt.
pub enum Io {
    /// Moved this many bytes (> 0).
    Moved(usize),
    /// Would block: wait for the next readiness event.
    Blocked,
    /// The peer closed (read returned 0).
    Eof,
}

#[inline]
pub fn read_some(s: &mut impl Read, buf: &mut [u8]) -> io::Result<Io> {
    loop {
        match s.read(buf) {
            Ok(0) => return Ok(Io::Eof),
            Ok(n) => return Ok(Io::Moved(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Io::Blocked),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

#[inline]
pub fn write_some(s: &mut impl Write, buf: &[u8]) -> io::Result<Io> {
    loop {
        match s.write(buf) {
            Ok(0) => return Ok(Io::Eof),
            Ok(n) => return Ok(Io::Moved(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Io::Blocked),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}
