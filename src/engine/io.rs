//! One non-blocking read or write on a socket, and its outcome. Flows
//! (clear text) and both TLS backends step with it; it sits below them so
//! that the TLS transport, which flows hold, need not import the flows.

use std::io::{self, Read, Write};

use crate::measure::rxstamp;

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

/// One non-blocking read that also takes the kernel's receive stamp of the
/// last segment it returned (the socket has `SO_TIMESTAMPNS` set) into
/// `stamp` (None when the read brings none: the kernel turns stamping on
/// host-wide a moment after the first socket asks, so the first segments
/// may have none).
pub fn read_stamped(fd: i32, buf: &mut [u8], stamp: &mut Option<u64>) -> io::Result<Io> {
    let mut control = [0u64; rxstamp::CONTROL_WORDS];
    loop {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: msghdr is plain data; zeroes are valid for every field.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control);
        // SAFETY: every pointer in `msg` is valid for the lengths it gives.
        let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
        if n > 0 {
            *stamp = rxstamp::stamp_ns(&msg);
            return Ok(Io::Moved(n as usize));
        }
        if n == 0 {
            return Ok(Io::Eof);
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock => return Ok(Io::Blocked),
            io::ErrorKind::Interrupted => continue,
            _ => return Err(e),
        }
    }
}

/// CLOCK_REALTIME now, ns: the receive stamps' clock.
pub fn realtime_ns() -> u64 {
    rxstamp::realtime_ns()
}
