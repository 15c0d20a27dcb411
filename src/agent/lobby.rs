//! The agent's lobby: where connections wait, after the agent's hello,
//! until they send their first bytes. A connection that has said nothing
//! costs a socket here, not a thread and not one of the few authentication
//! slots (`admission`): a flood of idle connections re-opened hundreds of
//! times a second kept cycling those 16 slots faster than a loaded
//! controller could answer the hello (20 of 248 short tests refused under
//! `bench/flood.py`). Here up to [`MAX_SILENT`] wait, each at most
//! [`FIRST_BYTES`]; past the cap the oldest silent one is closed, which at
//! that rate has waited far longer than any controller takes to answer.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{IpAddr, TcpListener, TcpStream};
use std::ops::ControlFlow;
use std::os::fd::{FromRawFd, IntoRawFd};
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token};

use super::AgentError;

/// Connections that may wait silent at once (a socket each).
pub const MAX_SILENT: usize = 256;

/// Time a connection has, from the agent's hello, to send its first bytes.
pub const FIRST_BYTES: Duration = Duration::from_secs(2);

const LISTENER: Token = Token(usize::MAX);

/// A connection that has spoken: its socket (blocking again), where it
/// came from, when it was accepted and the nonce its hello carried.
pub struct Spoken {
    pub stream: TcpStream,
    pub ip: IpAddr,
    pub since: Instant,
    pub nonce: String,
}

struct Waiting {
    stream: mio::net::TcpStream,
    ip: IpAddr,
    since: Instant,
    nonce: String,
}

/// What the lobby did, counted for the agent's log (one line a second at
/// most: a flood closes hundreds a second).
#[derive(Default)]
pub struct Tally {
    pub silent: u64,
    pub evicted: u64,
}

/// Accepts on `listener` until `spoke` breaks or `done` (asked every 100 ms) says so: greets each connection with
/// `hello(nonce)`, then hands it to `spoke` once its first bytes arrive.
/// One that closes without a byte is dropped quietly; one silent for
/// [`FIRST_BYTES`], or the oldest when [`MAX_SILENT`] wait, is told
/// `refusal(why)` and closed. `tally` is called about once a second with
/// what was closed since.
pub fn serve(
    listener: TcpListener,
    hello: impl Fn(&str) -> Vec<u8>,
    refusal: impl Fn(&str) -> Vec<u8>,
    mut spoke: impl FnMut(Spoken) -> ControlFlow<()>,
    mut tally: impl FnMut(&Tally),
    mut done: impl FnMut() -> bool,
) -> Result<(), AgentError> {
    listener
        .set_nonblocking(true)
        .map_err(AgentError::Listener)?;
    let mut listener = mio::net::TcpListener::from_std(listener);
    let mut poll = Poll::new().map_err(AgentError::Epoll)?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)
        .map_err(AgentError::Epoll)?;
    // Keyed by arrival, so the first entry is always the oldest.
    let mut waiting: BTreeMap<usize, Waiting> = BTreeMap::new();
    let mut next = 0usize;
    let mut events = Events::with_capacity(256);
    let mut counts = Tally::default();
    let mut last_tally = Instant::now();
    loop {
        crate::engine::wait::events(&mut poll, &mut events, Duration::from_millis(100))
            .map_err(AgentError::Epoll)?;
        if done() {
            return Ok(());
        }
        for ev in events.iter() {
            if ev.token() == LISTENER {
                loop {
                    let (mut s, addr) = match listener.accept() {
                        Ok(x) => x,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                        // Out of descriptors and the like: try again later.
                        Err(_) => break,
                    };
                    let _ = s.set_nodelay(true);
                    let nonce = crate::control::protocol::random_hex(16);
                    // A fresh socket's buffer takes the hello whole.
                    let frame = hello(&nonce);
                    if !matches!(s.write(&frame), Ok(n) if n == frame.len()) {
                        continue;
                    }
                    // Never reaches LISTENER (usize::MAX) in practice.
                    next += 1;
                    if poll
                        .registry()
                        .register(&mut s, Token(next), Interest::READABLE)
                        .is_err()
                    {
                        continue;
                    }
                    waiting.insert(
                        next,
                        Waiting {
                            stream: s,
                            ip: addr.ip(),
                            since: Instant::now(),
                            nonce,
                        },
                    );
                    if waiting.len() > MAX_SILENT {
                        if let Some((_, w)) = waiting.pop_first() {
                            close(w, &refusal(&format!("{MAX_SILENT} connections were waiting silent and this one, the oldest, gave its place to a newer one")));
                            counts.evicted += 1;
                        }
                    }
                }
                continue;
            }
            let Some(mut w) = waiting.remove(&ev.token().0) else {
                continue;
            };
            let _ = poll.registry().deregister(&mut w.stream);
            // Closed without a byte (a port scan, a health check): quietly.
            let mut b = [0u8; 1];
            if matches!(w.stream.peek(&mut b), Ok(0)) {
                continue;
            }
            // SAFETY: the descriptor is taken from the mio stream, which
            // gives it up, and owned by the std stream from here on.
            let stream = unsafe { TcpStream::from_raw_fd(w.stream.into_raw_fd()) };
            if stream.set_nonblocking(false).is_err() {
                continue;
            }
            let s = Spoken {
                stream,
                ip: w.ip,
                since: w.since,
                nonce: w.nonce,
            };
            if spoke(s).is_break() {
                return Ok(());
            }
        }
        // The silent past their deadline: the oldest first, so the sweep
        // stops at the first one still in time.
        while waiting
            .first_key_value()
            .is_some_and(|(_, w)| w.since.elapsed() >= FIRST_BYTES)
        {
            let (_, w) = waiting.pop_first().expect("checked");
            close(
                w,
                &refusal(&format!(
                    "sent nothing within {} s of the hello",
                    FIRST_BYTES.as_secs()
                )),
            );
            counts.silent += 1;
        }
        if last_tally.elapsed() >= Duration::from_secs(1) && (counts.silent + counts.evicted) > 0 {
            tally(&counts);
            counts = Tally::default();
            last_tally = Instant::now();
        }
    }
}

/// Tells a connection why (if its buffer takes it at once) and closes it.
fn close(mut w: Waiting, why: &[u8]) {
    let _ = w.stream.write(why);
}
