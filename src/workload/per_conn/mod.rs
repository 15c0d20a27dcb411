//! What every workload with a connection per transaction shares (crr,
//! conn, and tls-handshake through them), as neper shares its flow code:
//! one client state machine (`Connector`), told by a table what each
//! connection carries; one accept loop that hands each connection to the
//! workload's server flow; one way to open a client connection, and one
//! way to count a connection that ended or failed. A workload says only
//! what a connection carries (`Carries`) and what its server does with one
//! (`OnAccept`).

mod connector;

pub use connector::{Carries, Connector};

use mio::net::{TcpListener, TcpStream};
use mio::{Interest, Registry, Token};
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::Duration;

use crate::engine::flow::{Ctx, Flow, Status};
use crate::engine::sockopt;
use crate::engine::tls::TlsConn;
use crate::model::flow::TlsInfo;
use crate::model::spec::TestSpec;

/// What a listener does with each connection it accepts.
pub trait OnAccept: Send {
    /// The flow that serves `stream` (None: it is dropped, so closed at
    /// once).
    fn serve(&mut self, stream: TcpStream) -> Option<Box<dyn Flow>>;
}

/// The agent's listener (one per worker, SO_REUSEPORT): accepts every
/// pending connection and hands each to `on`.
pub struct Acceptor<A: OnAccept> {
    listener: TcpListener,
    on: A,
    /// `--io threads`: the listener blocks, and the connections it accepts
    /// are blocking sockets with its timeouts (the kernel copies them to
    /// every accepted socket: no system call per connection).
    blocking: bool,
}

impl<A: OnAccept> Acceptor<A> {
    pub fn new(listener: TcpListener, on: A) -> Self {
        Acceptor {
            listener,
            on,
            blocking: false,
        }
    }

    /// One accepted connection: a blocking one in `--io threads`.
    fn accept(&mut self) -> io::Result<TcpStream> {
        if !self.blocking {
            return self.listener.accept().map(|(s, _)| s);
        }
        // SAFETY: a listening socket we own; no address asked for.
        let fd = unsafe {
            libc::accept4(
                self.listener.as_raw_fd(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: accept4 returned a new descriptor that nothing else owns.
        Ok(unsafe { <TcpStream as std::os::fd::FromRawFd>::from_raw_fd(fd) })
    }
}

impl<A: OnAccept> Flow for Acceptor<A> {
    fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        registry.register(&mut self.listener, token, Interest::READABLE)
    }

    fn ready(&mut self, cx: &mut Ctx<'_>, _readable: bool, _writable: bool) -> Status {
        loop {
            match self.accept() {
                Ok(stream) => {
                    cx.counters.connections += 1;
                    if let Some(f) = self.on.serve(stream) {
                        cx.spawned.push(f);
                    }
                    if self.blocking {
                        // The thread serves it before it accepts again.
                        return Status::Open;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Status::Open,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // EMFILE and friends: count, and retry soon (edge-triggered:
                // no new event comes for connections already pending).
                Err(e) => {
                    cx.counters.errors += 1;
                    crate::engine::worker::note_error(&e, 0);
                    let at = cx.now + Duration::from_millis(10);
                    cx.schedule(at);
                    return Status::Open;
                }
            }
        }
    }

    fn timer(&mut self, cx: &mut Ctx<'_>) -> Status {
        self.ready(cx, true, false)
    }

    fn set_blocking(&mut self, tick: Duration) -> io::Result<()> {
        let s = socket2::SockRef::from(&self.listener);
        s.set_nonblocking(false)?;
        s.set_read_timeout(Some(tick))?;
        s.set_write_timeout(Some(tick))?;
        self.blocking = true;
        Ok(())
    }
}

/// A new client connection to `addr` with the test's socket options:
/// non-blocking and registered with the worker's loop, or (`--io threads`,
/// `blocking`) a blocking socket whose connect(2) returns once the
/// handshake is done (or after the tick, EINPROGRESS: the first write
/// waits for the rest). `receives`: whether the client takes payload
/// (`workload::receives`), looked up once per flow, not per connection.
pub fn dial(
    cx: &mut Ctx<'_>,
    addr: &SocketAddr,
    spec: &TestSpec,
    receives: bool,
    blocking: Option<Duration>,
) -> io::Result<TcpStream> {
    let sock = match blocking {
        Some(tick) => sockopt::tcp_socket_blocking(addr, spec, receives, tick)?,
        None => sockopt::tcp_socket(addr, spec, receives)?,
    };
    match sock.connect(&(*addr).into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) => {
            return Err(io::Error::new(
                e.kind(),
                "out of ephemeral ports (EADDRNOTAVAIL)",
            ))
        }
        Err(e) => return Err(e),
    }
    let mut stream = TcpStream::from_std(sock.into());
    if blocking.is_none() {
        cx.registry.register(
            &mut stream,
            cx.token,
            Interest::READABLE | Interest::WRITABLE,
        )?;
    }
    Ok(stream)
}

/// A connection failed (and was closed): counted unless the test is
/// ending, the next one tried after a short back-off so a dead peer is not
/// a busy loop, the cause noted (a refusal is the peer's usual answer
/// while it stops: not noted).
pub fn connection_failed(cx: &mut Ctx<'_>, id: u32, e: &io::Error) {
    if !cx.stopping {
        cx.counters.errors += 1;
    }
    let at = cx.now + Duration::from_millis(10);
    cx.schedule(at);
    if !cx.stopping && e.kind() != io::ErrorKind::ConnectionRefused {
        crate::engine::worker::note_error(e, id);
    }
}

/// A connection ended: one transaction and one connection, its TLS
/// session (the first one's facts kept for the report), and how it
/// closed.
pub fn count_connection(
    cx: &mut Ctx<'_>,
    session: Option<&mut TlsConn>,
    tls_info: &mut Option<TlsInfo>,
    graceful: bool,
) {
    cx.counters.transactions += 1;
    cx.counters.connections += 1;
    if let Some(t) = session {
        cx.counters.tls_handshakes += 1;
        cx.counters.tls_resumed += u64::from(t.resumed());
        t.done();
        if tls_info.is_none() {
            *tls_info = Some(t.info());
        }
    }
    if graceful {
        cx.counters.graceful_closes += 1;
    } else {
        cx.counters.resets += 1;
    }
}
