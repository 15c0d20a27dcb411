//! Opening the data connections of a test before its timeline starts, so
//! every flow is established when the measurement window opens. Connects and
//! accepts run in parallel (one epoll loop), so 2,000 flows over a long RTT
//! take a few RTTs, not 2,000.

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::flow::{decode_header, encode_header, HEADER_LEN};
use super::sockopt;
use super::EngineError;
use crate::model::spec::TestSpec;

/// At most this many connects in progress at once (keeps SYN queues sane).
const MAX_IN_PROGRESS: usize = 256;

/// Opens the flows of `targets` (flow id, address), each announced by the
/// data header; `receives`: this end takes payload.
pub fn connect_flows(
    targets: &[(u32, SocketAddr)],
    spec: &TestSpec,
    cookie: u64,
    timeout: Duration,
    receives: bool,
) -> Result<Vec<(u32, TcpStream)>, EngineError> {
    connect(targets, spec, Some(cookie), timeout, receives)
}

/// Opens the flows of `targets` to a server that is not a linerate agent
/// (memcached): no header, the first byte is the server's protocol.
pub fn connect_plain(
    targets: &[(u32, SocketAddr)],
    spec: &TestSpec,
    timeout: Duration,
) -> Result<Vec<(u32, TcpStream)>, EngineError> {
    connect(targets, spec, None, timeout, true)
}

fn connect(
    targets: &[(u32, SocketAddr)],
    spec: &TestSpec,
    cookie: Option<u64>,
    timeout: Duration,
    receives: bool,
) -> Result<Vec<(u32, TcpStream)>, EngineError> {
    let mut poll = Poll::new().map_err(EngineError::Epoll)?;
    let mut events = Events::with_capacity(1024);
    let mut pending: HashMap<u32, (TcpStream, SocketAddr)> = HashMap::new();
    let n = targets.len();
    let mut done = Vec::with_capacity(n);
    let mut next = 0usize;
    let deadline = Instant::now() + timeout;
    let fail =
        |id: u32, addr: SocketAddr, source: io::Error| EngineError::Connect { id, addr, source };
    while done.len() < n {
        while next < n && pending.len() < MAX_IN_PROGRESS {
            let (id, addr) = targets[next];
            let sock = sockopt::tcp_socket(&addr, spec, receives).map_err(|e| fail(id, addr, e))?;
            match sock.connect(&addr.into()) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
                Err(e) => return Err(fail(id, addr, e)),
            }
            let mut s = TcpStream::from_std(sock.into());
            poll.registry()
                .register(&mut s, Token(id as usize), Interest::WRITABLE)
                .map_err(|e| fail(id, addr, e))?;
            pending.insert(id, (s, addr));
            next += 1;
        }
        let now = Instant::now();
        if now >= deadline {
            let to: std::collections::BTreeSet<String> =
                targets.iter().map(|(_, a)| a.to_string()).collect();
            return Err(EngineError::ConnectTimeout {
                connected: done.len(),
                n,
                to: to.into_iter().collect::<Vec<_>>().join(", "),
                timeout,
            });
        }
        poll.poll(
            &mut events,
            Some((deadline - now).min(Duration::from_millis(100))),
        )
        .map_err(EngineError::Epoll)?;
        for ev in events.iter() {
            let id = ev.token().0 as u32;
            let Some((s, addr)) = pending.get_mut(&id) else {
                continue;
            };
            let addr = *addr;
            if let Some(e) = s.take_error().map_err(|e| fail(id, addr, e))? {
                return Err(fail(id, addr, e));
            }
            match s.peer_addr() {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotConnected => continue,
                Err(e) => return Err(fail(id, addr, e)),
            }
            let (mut s, _) = pending.remove(&id).unwrap();
            let _ = poll.registry().deregister(&mut s);
            sockopt::clamp_window(s.as_raw_fd(), spec, receives).map_err(|e| fail(id, addr, e))?;
            // A fresh socket's send buffer always holds 16 bytes.
            if let Some(cookie) = cookie {
                match s.write(&encode_header(cookie, id)) {
                    Ok(HEADER_LEN) => {}
                    Ok(_) => {
                        let short = io::Error::new(
                            io::ErrorKind::WriteZero,
                            "short write of the data header",
                        );
                        return Err(fail(id, addr, short));
                    }
                    Err(e) => return Err(fail(id, addr, e)),
                }
            }
            done.push((id, s));
        }
    }
    done.sort_by_key(|(id, _)| *id);
    Ok(done)
}

/// Accepts the flows `expect` names on `listeners` (one per data address),
/// reading each header. Connections with a wrong cookie, an unexpected or
/// repeated flow id are closed and counted, not served.
pub fn accept_flows(
    listeners: &mut [mio::net::TcpListener],
    spec: &TestSpec,
    cookie: u64,
    expect: &std::collections::BTreeSet<u32>,
    timeout: Duration,
    cancel: &AtomicBool,
    receives: bool,
) -> Result<(Vec<(u32, TcpStream)>, u32), EngineError> {
    // Listener k has token FIRST_LISTENER - k; connections count up from 0.
    const FIRST_LISTENER: usize = usize::MAX - 1;
    let n = expect.len();
    let mut poll = Poll::new().map_err(EngineError::Epoll)?;
    for (k, l) in listeners.iter_mut().enumerate() {
        poll.registry()
            .register(l, Token(FIRST_LISTENER - k), Interest::READABLE)
            .map_err(EngineError::Epoll)?;
    }
    let deregister = |poll: &Poll, listeners: &mut [mio::net::TcpListener]| {
        for l in listeners.iter_mut() {
            let _ = poll.registry().deregister(l);
        }
    };
    let mut events = Events::with_capacity(1024);
    let mut reading: HashMap<usize, (TcpStream, [u8; HEADER_LEN], usize)> = HashMap::new();
    let mut next_token = 0usize;
    let mut done: HashMap<u32, TcpStream> = HashMap::new();
    let mut rejected = 0u32;
    let deadline = Instant::now() + timeout;
    while done.len() < n {
        if cancel.load(Ordering::Relaxed) {
            deregister(&poll, listeners);
            return Err(EngineError::Cancelled);
        }
        let now = Instant::now();
        if now >= deadline {
            deregister(&poll, listeners);
            return Err(EngineError::ArriveTimeout {
                arrived: done.len(),
                n,
                timeout,
            });
        }
        poll.poll(
            &mut events,
            Some((deadline - now).min(Duration::from_millis(100))),
        )
        .map_err(EngineError::Epoll)?;
        for ev in events.iter() {
            let t = ev.token().0;
            if t > FIRST_LISTENER - listeners.len() {
                let listener = &mut listeners[FIRST_LISTENER - t];
                loop {
                    match listener.accept() {
                        Ok((mut s, _)) => {
                            sockopt::clamp_window(s.as_raw_fd(), spec, receives)
                                .map_err(EngineError::WindowClamp)?;
                            let t = next_token;
                            next_token += 1;
                            if poll
                                .registry()
                                .register(&mut s, Token(t), Interest::READABLE)
                                .is_ok()
                            {
                                reading.insert(t, (s, [0; HEADER_LEN], 0));
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(EngineError::Accept(e)),
                    }
                }
                continue;
            }
            let Some((s, buf, got)) = reading.get_mut(&t) else {
                continue;
            };
            let outcome = loop {
                match s.read(&mut buf[*got..]) {
                    Ok(0) => break Some(false),
                    Ok(k) => {
                        *got += k;
                        if *got == HEADER_LEN {
                            break Some(true);
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break None,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => break Some(false),
                }
            };
            let Some(complete) = outcome else { continue };
            let (mut s, buf, _) = reading.remove(&t).unwrap();
            let _ = poll.registry().deregister(&mut s);
            match decode_header(&buf, cookie)
                .filter(|id| complete && expect.contains(id) && !done.contains_key(id))
            {
                Some(id) => {
                    done.insert(id, s);
                }
                None => rejected += 1,
            }
        }
    }
    deregister(&poll, listeners);
    let mut v: Vec<(u32, TcpStream)> = done.into_iter().collect();
    v.sort_by_key(|(id, _)| *id);
    Ok((v, rejected))
}
