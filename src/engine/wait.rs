//! Waiting for epoll events (`events`): a signal's interruption is a
//! wake-up with none. Every mio wait of the process goes through it (flow
//! setup, TLS handshakes, the workers, the agent's lobby, the QUIC perf
//! server), in a module of its own so that none imports another.

use mio::{Events, Poll};
use std::io;
use std::time::Duration;

/// `Poll::poll`, where a signal's interruption is a wake-up with no events
/// (mio clears `events` before it waits).
///
/// Why: epoll_wait(2) returns EINTR for any signal that reaches the
/// thread, even one whose action is to ignore it, and is never restarted.
/// The agent's sessions run commands (`ip`, `nft`) while others wait for
/// their flows: glibc's posix_spawn blocks every signal in the spawning
/// thread, so a child that exits meanwhile has its SIGCHLD queued instead
/// of dropped, and the kernel hands it to another thread (traced: 62
/// SIGCHLDs delivered to agent session threads in 10 runs of the
/// responsiveness study). A setup loop that took EINTR as its error ended
/// the test and dropped its listener: the agent's rr setup ended with
/// "epoll: Interrupted system call" just after it said it listened, and
/// the controller's connects were refused (CI, and 1 of 6 study runs).
pub fn events(poll: &mut Poll, events: &mut Events, timeout: Duration) -> io::Result<()> {
    match poll.poll(events, Some(timeout)) {
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
        other => other,
    }
}
