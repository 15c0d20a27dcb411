//! A closed link's socket stays open a moment after its CONNECTION_CLOSE:
//! the peer's packets already on their way (a response, acknowledgements)
//! then land in a socket, not in an ICMP "port unreachable". RFC 9000
//! (10.2) keeps a closing connection for three probe timeouts for the same
//! reason; and a peer on quinn's own endpoint (quinn's `perf server`)
//! ends its whole endpoint on the ECONNREFUSED such an ICMP error raises,
//! so a client that closed at once would stop another tool's server for
//! every later test.
//!
//! The sockets wait here, process-wide, instead of in each flow's drop:
//! a thousand flows end without a thousand waits.

use std::net::UdpSocket;
use std::os::fd::AsFd;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Sockets held, each with the instant it may close.
static HELD: Mutex<Vec<(Instant, UdpSocket)>> = Mutex::new(Vec::new());

/// How long a socket stays after its close: three round trips as its
/// connection measured them, at least 20 ms, at most 1 s.
pub fn time(rtt: Duration) -> Duration {
    (rtt * 3).clamp(Duration::from_millis(20), Duration::from_secs(1))
}

/// Keeps the socket behind `sock` open for `for_`: a second descriptor of
/// it is held (the caller's own closes as it drops). Best effort: a socket
/// that cannot be duplicated closes now.
pub fn hold(sock: &impl AsFd, for_: Duration) {
    let Ok(fd) = sock.as_fd().try_clone_to_owned() else {
        return;
    };
    let now = Instant::now();
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    held.retain(|(until, _)| *until > now);
    held.push((now + for_, UdpSocket::from(fd)));
}

/// Closes the sockets whose time is up (a new link calls it, so a test
/// with many flows does not start while the last one's sockets pile up).
pub fn release() {
    let now = Instant::now();
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    held.retain(|(until, _)| *until > now);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_is_held_for_its_time_then_released() {
        assert_eq!(time(Duration::from_micros(50)), Duration::from_millis(20));
        assert_eq!(time(Duration::from_millis(100)), Duration::from_millis(300));
        assert_eq!(time(Duration::from_secs(2)), Duration::from_secs(1));
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = s.local_addr().unwrap();
        hold(&s, Duration::from_millis(30));
        drop(s);
        // Still bound: the held descriptor keeps the port.
        assert!(UdpSocket::bind(addr).is_err());
        std::thread::sleep(Duration::from_millis(40));
        release();
        assert!(UdpSocket::bind(addr).is_ok());
    }
}
