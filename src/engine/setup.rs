//! Opening the data connections of a test before its timeline starts, so
//! every flow is established when the measurement window opens. Connects and
//! accepts run in parallel (one epoll loop), so 2,000 flows over a long RTT
//! take a few RTTs, not 2,000.

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::flow::{decode_header, encode_header, HEADER_LEN};
use super::sockopt;
use super::wait;
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
    // Flows to start, in order; refused ones come back here when due.
    let mut queue: VecDeque<(u32, SocketAddr)> = targets.iter().copied().collect();
    let mut refused = Refusals::default();
    let deadline = Instant::now() + timeout;
    let fail =
        |id: u32, addr: SocketAddr, source: io::Error| EngineError::Connect { id, addr, source };
    while done.len() < n {
        let now = Instant::now();
        queue.extend(refused.due(now));
        while pending.len() < MAX_IN_PROGRESS {
            let Some((id, addr)) = queue.pop_front() else {
                break;
            };
            let sock = sockopt::tcp_socket(&addr, spec, receives).map_err(|e| fail(id, addr, e))?;
            match sock.connect(&addr.into()) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
                Err(e) if refused.again(id, addr, &e, now) => continue,
                Err(e) => return Err(fail(id, addr, e)),
            }
            let mut s = TcpStream::from_std(sock.into());
            poll.registry()
                .register(&mut s, Token(id as usize), Interest::WRITABLE)
                .map_err(|e| fail(id, addr, e))?;
            pending.insert(id, (s, addr));
        }
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
        let nap = refused
            .next_due()
            .map_or(Duration::from_millis(100), |at| {
                at.saturating_duration_since(now)
            })
            .min(deadline - now)
            .min(Duration::from_millis(100));
        wait::events(&mut poll, &mut events, nap).map_err(EngineError::Epoll)?;
        for ev in events.iter() {
            let id = ev.token().0 as u32;
            let Some((s, addr)) = pending.get_mut(&id) else {
                continue;
            };
            let addr = *addr;
            if let Some(e) = s.take_error().map_err(|e| fail(id, addr, e))? {
                if refused.again(id, addr, &e, Instant::now()) {
                    let (mut s, _) = pending.remove(&id).unwrap();
                    let _ = poll.registry().deregister(&mut s);
                    continue;
                }
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

/// How long a flow whose connect is refused is tried again: the server
/// said it listens, so a refusal is either final (nothing listens, told
/// after this grace) or the path's for a moment. Kubernetes' kube-proxy
/// answers a Service whose endpoint it has not programmed yet with a
/// port-unreachable (a refused connect), and CI saw one refused connect
/// through the lab's router that the same test never showed again.
const REFUSED_GRACE: Duration = Duration::from_secs(1);

/// The refused flows waiting for their next try.
#[derive(Default)]
struct Refusals {
    /// Flow id -> (first refusal, tries so far).
    first: HashMap<u32, (Instant, u32)>,
    /// (when, flow id, address), tried again from `when` on.
    waiting: Vec<(Instant, u32, SocketAddr)>,
}

impl Refusals {
    /// Whether flow `id`'s error `e` at `now` is a refusal to try again
    /// (within `REFUSED_GRACE` of its first one): if so, it is queued, 20
    /// ms later at first, the wait doubling to 200 ms.
    fn again(&mut self, id: u32, addr: SocketAddr, e: &io::Error, now: Instant) -> bool {
        if e.kind() != io::ErrorKind::ConnectionRefused {
            return false;
        }
        let (since, tries) = self.first.entry(id).or_insert((now, 0));
        if now.duration_since(*since) >= REFUSED_GRACE {
            return false;
        }
        let wait = Duration::from_millis(20 << (*tries).min(3)).min(Duration::from_millis(200));
        *tries += 1;
        self.waiting.push((now + wait, id, addr));
        true
    }

    /// The flows due at `now`, taken out.
    fn due(&mut self, now: Instant) -> Vec<(u32, SocketAddr)> {
        let (due, later): (Vec<_>, Vec<_>) = self.waiting.drain(..).partition(|w| w.0 <= now);
        self.waiting = later;
        due.into_iter().map(|(_, id, addr)| (id, addr)).collect()
    }

    fn next_due(&self) -> Option<Instant> {
        self.waiting.iter().map(|w| w.0).min()
    }
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
        wait::events(
            &mut poll,
            &mut events,
            (deadline - now).min(Duration::from_millis(100)),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A loopback port nothing listens on (a listener's, closed).
    fn free_port() -> SocketAddr {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    }

    extern "C" fn caught(_: libc::c_int) {}

    /// A server waiting for its flows is hit by a signal this process
    /// catches (the agent catches SIGINT and SIGTERM): epoll_wait returns
    /// EINTR, and the wait goes on until the flow arrives. Before `wait::events`,
    /// the setup ended with "epoll: Interrupted system call" and dropped
    /// its listener, and the client's connect was refused.
    #[test]
    fn a_caught_signal_does_not_end_the_wait_for_flows() {
        // Not `signals::on_signals`: its flag is the process's, and other
        // tests running beside this one read it as a Ctrl-C.
        // SAFETY: a no-op handler, without SA_RESTART (epoll_wait ignores
        // it anyway); SIGUSR1 is used by nothing else in this process.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = caught as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
        }
        let std_l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_l.set_nonblocking(true).unwrap();
        let addr = std_l.local_addr().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let server = std::thread::spawn(move || {
            // SAFETY: pthread_self has no preconditions.
            tx.send(unsafe { libc::pthread_self() } as usize).unwrap();
            let mut ls = [mio::net::TcpListener::from_std(std_l)];
            let expect = [0u32].into_iter().collect();
            let cancel = AtomicBool::new(false);
            accept_flows(
                &mut ls,
                &TestSpec::default(),
                7,
                &expect,
                Duration::from_secs(10),
                &cancel,
                true,
            )
        });
        let thread = rx.recv().unwrap() as libc::pthread_t;
        for _ in 0..5 {
            std::thread::sleep(Duration::from_millis(30));
            // SAFETY: the thread is alive: it ends only when its flow came.
            assert_eq!(unsafe { libc::pthread_kill(thread, libc::SIGUSR1) }, 0);
        }
        let flows = connect_flows(
            &[(0, addr)],
            &TestSpec::default(),
            7,
            Duration::from_secs(5),
            true,
        )
        .expect("the listener is still there");
        assert_eq!(flows.len(), 1);
        let (accepted, rejected) = server.join().unwrap().expect("the flow was taken in");
        assert_eq!((accepted.len(), rejected), (1, 0));
    }

    /// A server that listens a moment after the first refusal is reached:
    /// the flow is tried again within the grace.
    #[test]
    fn a_refused_connect_is_tried_again_within_the_grace() {
        let addr = free_port();
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(250));
            let l = std::net::TcpListener::bind(addr).unwrap();
            l.accept().map(|(s, _)| s)
        });
        let t0 = Instant::now();
        let flows = connect_plain(&[(0, addr)], &TestSpec::default(), Duration::from_secs(10))
            .expect("connected once the listener came");
        assert_eq!(flows.len(), 1);
        assert!(
            t0.elapsed() >= Duration::from_millis(200),
            "{:?}",
            t0.elapsed()
        );
        late.join().unwrap().unwrap();
    }

    /// Where nothing listens, the refusal is the error once the grace
    /// is over, long before the setup's own timeout.
    #[test]
    fn a_port_nobody_opens_is_refused_after_the_grace() {
        let addr = free_port();
        let t0 = Instant::now();
        let err = connect_plain(&[(3, addr)], &TestSpec::default(), Duration::from_secs(10))
            .expect_err("refused");
        let took = t0.elapsed();
        assert!(
            matches!(&err, EngineError::Connect { id: 3, source, .. } if source.kind() == io::ErrorKind::ConnectionRefused),
            "{err}"
        );
        assert!(
            took >= REFUSED_GRACE && took < REFUSED_GRACE * 3,
            "{took:?}"
        );
    }

    #[test]
    fn refusals_wait_longer_each_time_and_give_up_after_the_grace() {
        let mut r = Refusals::default();
        let addr = free_port();
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        let t0 = Instant::now();
        assert!(r.again(1, addr, &refused, t0));
        assert_eq!(r.next_due(), Some(t0 + Duration::from_millis(20)));
        assert!(r.due(t0).is_empty());
        assert_eq!(r.due(t0 + Duration::from_millis(20)), vec![(1, addr)]);
        assert!(r.again(1, addr, &refused, t0 + Duration::from_millis(20)));
        assert_eq!(r.next_due(), Some(t0 + Duration::from_millis(60)));
        // Another error is never tried again; past the grace, neither.
        let reset = io::Error::from(io::ErrorKind::ConnectionReset);
        assert!(!r.again(2, addr, &reset, t0));
        assert!(!r.again(1, addr, &refused, t0 + REFUSED_GRACE));
    }
}
