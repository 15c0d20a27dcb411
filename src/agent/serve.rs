//! `linerate serve`: the agent. It accepts controllers, authenticates them,
//! and runs the server side of their tests. It only accepts data connections
//! that carry the cookie of a test its controller set up (it never connects
//! out), caps flows, duration and concurrent tests, answers "busy" past the
//! cap, and survives a controller that vanishes mid-test.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::admission::{Admission, Ticket, HANDSHAKE_DEADLINE, MAX_UNAUTHENTICATED};
use super::lobby::{self, Spoken};
use super::AgentError;
use crate::control::clock;
use crate::control::protocol::{
    self, mac, mac_eq, random_u64, read_msg, write_msg, ErrorCode, HistText, Msg, Opener,
    TargetGroup, Wire,
};
use crate::engine::side::{Observer, Side, SideSetup};
use crate::engine::EngineError;
use crate::kv::service::Service;
use crate::measure::histogram::{self, Hist};
use crate::measure::host as env;
use crate::workload::conns::{self, SetupError};
use crate::workload::{Conns, Pattern, WorkloadError};

use crate::model::sample::IntervalSample;
use crate::model::spec::TestSpec;

#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    pub token: String,
    pub max_tests: usize,
    pub max_flows: u32,
    pub max_duration_s: f64,
    /// Serve one controller, then exit (the embedded local agent).
    pub once: bool,
    /// Listen for controllers where the agent starts, but run every test
    /// in this network namespace (a lab host's agent, reachable from the
    /// controller's namespace on loopback).
    pub data_netns: Option<String>,
    pub quiet: bool,
    /// Tests may set sysctls (net.*) on this host (root): journaled, put
    /// back after the test, on SIGINT/SIGTERM, or at the next start.
    pub allow_sysctl: bool,
    /// Started inside a lab's namespace (`serve --netns`): a sysctl the
    /// namespace lacks (net.core.netdev_max_backlog) is the host's, which
    /// the lab's owner sets; the agent leaves it to it.
    pub in_lab: bool,
    /// The port of the companion agent with the other crypto-hardware
    /// setting (announced in the hello, so a controller can run a test
    /// with `--crypto-hw off` there: the libraries read the mask once per
    /// process).
    pub crypto_twin: Option<u16>,
    /// Print `linerate agent listening on ADDR` on stdout once ready.
    pub announce: bool,
    /// Tests may set NIC settings (`nic.*`) on the data interface (root):
    /// journaled and put back as sysctls are (hostops::nic).
    pub allow_nic: bool,
    /// Every test's data listeners on this port (`serve --data-port`), for
    /// a port a Kubernetes Service, a NAT or a firewall forwards; 0: a
    /// free port per test.
    pub data_port: u16,
}

struct Shared {
    cfg: ServeConfig,
    active: AtomicUsize,
    /// A server test holds the fixed data port (`data_port`): one at a
    /// time, or a second's SO_REUSEPORT listeners would take the first's
    /// connections.
    data_port_held: AtomicBool,
    /// Connections that have not proven the token yet.
    admission: Arc<Admission>,
    started: Instant,
    /// Refusals logged: when the last line was written and how many were
    /// left out since (a flood refuses hundreds a second).
    refused: std::sync::Mutex<(Option<Instant>, u64)>,
}

/// A reader whose every read waits at most until one deadline.
struct Deadline<'a> {
    stream: &'a mut TcpStream,
    until: Instant,
}

impl std::io::Read for Deadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let late = || {
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "did not authenticate within {} s",
                    HANDSHAKE_DEADLINE.as_secs()
                ),
            )
        };
        let left = self
            .until
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(late)?;
        self.stream.set_read_timeout(Some(left))?;
        self.stream.read(buf).map_err(|e| match e.kind() {
            // A socket read timeout shows as EAGAIN.
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => late(),
            _ => e,
        })
    }
}

/// The agent's clock, load and version, for clock offsets and `cluster status`.
fn probe_reply(sent_ns: u64, sh: &Shared) -> Msg {
    let agent_ns = clock::mono_ns();
    let mut load = [0.0; 3];
    if let Ok(text) = std::fs::read_to_string("/proc/loadavg") {
        for (slot, v) in load.iter_mut().zip(text.split_whitespace()) {
            *slot = v.parse().unwrap_or(0.0);
        }
    }
    Msg::ProbeReply {
        sent_ns,
        agent_ns,
        software: format!("linerate {}", env!("CARGO_PKG_VERSION")),
        load,
        tests_running: sh.active.load(Ordering::SeqCst) as u32,
        uptime_s: sh.started.elapsed().as_secs_f64(),
        clock: clock::local_base(),
    }
}

macro_rules! log {
    ($shared:expr, $($arg:tt)*) => {
        if !$shared.cfg.quiet {
            eprintln!("linerate agent: {}", format!($($arg)*));
        }
    };
}

/// Binds, announces the address on stdout, and serves until killed (or,
/// with `once`, until the first controller leaves).
pub fn serve(cfg: ServeConfig) -> Result<(), AgentError> {
    let listener = bind(cfg.listen)?;
    serve_on(
        listener,
        ServeConfig {
            announce: true,
            ..cfg
        },
    )
}

/// The agent's control listener (`serve --detach` binds before it forks,
/// so a port in use is reported by the process that was asked).
pub fn bind(listen: SocketAddr) -> Result<TcpListener, AgentError> {
    TcpListener::bind(listen).map_err(|source| AgentError::Listen {
        addr: listen,
        source,
    })
}

/// Serves controllers on a bound listener until killed (or, with `once`,
/// until the first controller leaves). Starts the process's first threads.
pub fn serve_on(listener: TcpListener, cfg: ServeConfig) -> Result<(), AgentError> {
    if let Some(ns) = &cfg.data_netns {
        // Sessions are threads of this one: they start in the namespace.
        crate::lab::netns::enter(ns).map_err(|e| AgentError::Netns(e.to_string()))?;
    }
    let stopped = put_back_and_watch(&cfg)?;
    if cfg.announce {
        let addr = listener.local_addr().map_err(AgentError::LocalAddr)?;
        // A reader that went away (a closed pipe) does not end the agent.
        use std::io::Write;
        let mut out = std::io::stdout();
        let _ = writeln!(out, "linerate agent listening on {addr}");
        let _ = out.flush();
    }
    let shared = Arc::new(Shared {
        cfg,
        active: AtomicUsize::new(0),
        data_port_held: AtomicBool::new(false),
        admission: Arc::new(Admission::default()),
        started: Instant::now(),
        refused: std::sync::Mutex::new((None, 0)),
    });
    let mut evictions = 0u64;
    let mut last_evict_log = None;
    let sh = shared.clone();
    let hello = |nonce: &str| frame(&hello_msg(nonce, &sh));
    let refusal = |why: &str| {
        frame(&Msg::Error {
            code: ErrorCode::Busy,
            message: why.to_string(),
        })
    };
    // A connection reaches here once it has sent its first bytes (the
    // lobby holds the silent ones without a thread).
    let first: std::cell::RefCell<Option<std::thread::JoinHandle<()>>> = Default::default();
    let spoke = |c: Spoken| {
        // Admitted before a thread exists for it: past the cap a waiting
        // connection is evicted (see admission.rs).
        let Some((ticket, evicted)) = shared.admission.admit(&c.stream, c.ip) else {
            log!(
                shared,
                "connection from {} dropped: out of file descriptors",
                c.ip
            );
            return ControlFlow::Continue(());
        };
        if let Some(ev) = evicted {
            // A flood evicts hundreds a second: one line a second at most.
            evictions += 1;
            if last_evict_log.is_none_or(|t: Instant| t.elapsed() >= Duration::from_secs(1)) {
                log!(
                    shared,
                    "{evictions} authenticating connection(s) evicted (the last from {}, after {:.1} s): {MAX_UNAUTHENTICATED} were authenticating and {} spoke",
                    ev.ip,
                    ev.waited.as_secs_f64(),
                    c.ip
                );
                evictions = 0;
                last_evict_log = Some(Instant::now());
            }
        }
        let sh = shared.clone();
        let ip = c.ip;
        match std::thread::Builder::new()
            .name("linerate-session".into())
            .spawn(move || session(c, ticket, &sh))
        {
            Ok(h) => {
                // With `once`, the first controller's session decides
                // when the agent ends (a mixed test opens more sessions
                // beside it, which close before it does).
                let mut first = first.borrow_mut();
                if shared.cfg.once && first.is_none() {
                    *first = Some(h);
                }
                ControlFlow::Continue(())
            }
            Err(e) => {
                // Out of threads: this connection is dropped, the agent
                // keeps serving.
                log!(
                    shared,
                    "connection from {ip} dropped: cannot start a thread: {e}"
                );
                std::thread::sleep(Duration::from_millis(50));
                ControlFlow::Continue(())
            }
        }
    };
    let tally = |t: &lobby::Tally| {
        log!(
            shared,
            "closed without a thread: {} that sent nothing within {} s of the hello, {} evicted from the lobby ({} wait at most)",
            t.silent,
            lobby::FIRST_BYTES.as_secs(),
            t.evicted,
            lobby::MAX_SILENT
        )
    };
    let done = || {
        stopped.load(Ordering::SeqCst)
            || first
                .borrow()
                .as_ref()
                .is_some_and(|h: &std::thread::JoinHandle<()>| h.is_finished())
    };
    lobby::serve(listener, hello, refusal, spoke, tally, done)
}

/// What a previous agent left changed (sysctls, NIC settings) put back
/// first; then, when this agent may change them, a watcher that puts them
/// back on Ctrl-C or SIGTERM and sets the flag it returns, on which the
/// lobby ends and `serve_on` returns (no thread ends the process).
fn put_back_and_watch(cfg: &ServeConfig) -> Result<Arc<AtomicBool>, AgentError> {
    if cfg.allow_sysctl {
        // A journal left by an agent that died: its values go back first.
        let restored =
            crate::hostops::sysctl::replay().map_err(|e| AgentError::Sysctl(e.to_string()))?;
        if !restored.is_empty() && !cfg.quiet {
            eprintln!(
                "linerate agent: put back sysctls a previous agent left changed: {}",
                restored.join(", ")
            );
        }
    }
    if cfg.allow_nic {
        // A journal left by an agent that died: its NIC settings go back
        // first (an interface that cannot be put back stops the start).
        let restored = crate::hostops::nic::replay().map_err(|e| AgentError::Nic(Box::new(e)))?;
        if !restored.is_empty() && !cfg.quiet {
            eprintln!(
                "linerate agent: put back NIC settings a previous agent left changed: {}",
                restored.join(", ")
            );
        }
    }
    let stopped = Arc::new(AtomicBool::new(false));
    if cfg.allow_sysctl || cfg.allow_nic {
        // Stopped with Ctrl-C or SIGTERM: a test's sysctls and NIC
        // settings go back too.
        let (sysctl, nic) = (cfg.allow_sysctl, cfg.allow_nic);
        let stopped = stopped.clone();
        crate::engine::signals::on_signals(&[libc::SIGINT, libc::SIGTERM], false);
        std::thread::Builder::new()
            .name("linerate-sysctl".into())
            .spawn(move || loop {
                if crate::engine::signals::raised().load(Ordering::SeqCst) {
                    if sysctl {
                        let _ = crate::hostops::sysctl::replay();
                    }
                    if nic {
                        if let Err(e) = crate::hostops::nic::replay() {
                            eprintln!("linerate agent: {e}");
                        }
                    }
                    stopped.store(true, Ordering::SeqCst);
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            })
            .map_err(AgentError::SysctlWatcher)?;
    }
    Ok(stopped)
}

/// A message as one plain frame (the handshake's).
fn frame(m: &Msg) -> Vec<u8> {
    let mut v = Vec::new();
    let _ = write_msg(&mut v, m);
    v
}

/// The agent's greeting: its protocol, version and the nonce of this
/// connection.
fn hello_msg(nonce: &str, sh: &Shared) -> Msg {
    Msg::Hello {
        protocol: protocol::PROTOCOL.into(),
        version: protocol::VERSION,
        software: format!("linerate {}", env!("CARGO_PKG_VERSION")),
        nonce: nonce.to_string(),
        crypto_hw: !crate::measure::crypto::hw_masked(),
        crypto_twin: sh.cfg.crypto_twin,
        no_token: sh.cfg.token.is_empty(),
    }
}

fn session(c: Spoken, ticket: Ticket, sh: &Shared) {
    let mut tcp = c.stream;
    let peer = tcp
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    let _ = tcp.set_nodelay(true);
    let handshake = handshake(&mut tcp, &c.nonce, c.since, &ticket, sh);
    let evicted = ticket.evicted();
    drop(ticket);
    let keys = match handshake {
        Ok(k) => {
            log!(sh, "controller {peer} connected");
            k
        }
        Err(_) if evicted => {
            // Its slot went to a newer connection; if it is a controller
            // after all, it hears why.
            let _ = tcp.set_write_timeout(Some(Duration::from_secs(1)));
            let _ = send_plain_error(
                &mut tcp,
                ErrorCode::Busy,
                &format!(
                    "{MAX_UNAUTHENTICATED} connections were authenticating and this one, the oldest, gave its place to a newer one"
                ),
            );
            return;
        }
        Err(e) => {
            let mut r = sh.refused.lock().unwrap_or_else(|p| p.into_inner());
            if r.0.is_some_and(|t| t.elapsed() < Duration::from_secs(1)) {
                r.1 += 1;
            } else {
                let more = match r.1 {
                    0 => String::new(),
                    n => format!(" ({n} more refused since the last such line)"),
                };
                log!(sh, "controller {peer} refused: {e}{more}");
                *r = (Some(Instant::now()), 0);
            }
            return;
        }
    };
    let Ok(reader) = tcp.try_clone() else {
        return;
    };
    let mut stream = Wire::new(tcp, keys.to_controller);
    let (rx, gone, broken) =
        protocol::spawn_reader(reader, Opener::new(keys.to_agent, "the controller"));
    // A message that failed its seal, between tests or during one: the
    // controller is told why (what this side sends is still sealed), and
    // the connection ends.
    let check_broken = |stream: &mut Wire| {
        let why = broken.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(message) = &why {
            let _ = send_error(
                stream,
                ErrorCode::Tampered,
                &format!("the agent closes the connection: {message}"),
            );
            let _ = stream.stream.shutdown(std::net::Shutdown::Both);
            log!(sh, "controller {peer}: closing: {message}");
        }
        why.is_some()
    };
    loop {
        match rx.recv() {
            Ok(Some(Msg::Error {
                code: ErrorCode::ChannelBroken,
                ..
            })) => {
                check_broken(&mut stream);
                break;
            }
            Ok(Some(Msg::Probe { sent_ns })) => {
                if stream.send(&probe_reply(sent_ns, sh)).is_err() {
                    break;
                }
            }
            Ok(Some(m @ (Msg::Setup { .. } | Msg::SetupClient { .. }))) => {
                let (spec, role) = match m {
                    Msg::Setup {
                        spec,
                        listen,
                        expect,
                    } => (spec, Role::Server { listen, expect }),
                    Msg::SetupClient { spec, groups } => (spec, Role::Client { groups }),
                    _ => unreachable!("matched above"),
                };
                log!(
                    sh,
                    "controller {peer}: setting up {} with {}",
                    spec.workload.name(),
                    crate::units::plural(spec.flows, "flow", "flows")
                );
                if let Err(end) = run_test(*spec, role, &mut stream, &rx, &gone, sh) {
                    let e = match end {
                        TestEnd::Told(e) => e,
                        // Every failure reaches the controller, not only the
                        // refusals: else it waits for a reply until timeout.
                        TestEnd::Untold(e) => {
                            let e = e.to_string();
                            let _ = send_error(&mut stream, ErrorCode::SetupFailed, &e);
                            e
                        }
                    };
                    if check_broken(&mut stream) {
                        break;
                    }
                    log!(sh, "controller {peer}: test ended early: {e}");
                    if gone.load(Ordering::Relaxed) {
                        break;
                    }
                }
            }
            Ok(Some(Msg::RunHere { spec, at_ns })) => {
                log!(
                    sh,
                    "controller {peer}: running {} here, one client of several",
                    spec.workload.name()
                );
                if let Err(e) = here::run_here(*spec, at_ns, &mut stream, sh) {
                    log!(sh, "controller {peer}: {e}");
                }
                if check_broken(&mut stream) || gone.load(Ordering::Relaxed) {
                    break;
                }
            }
            Ok(Some(Msg::Bye)) | Ok(None) | Err(_) => break,
            // The stop of a test that ended here first (at the agent's own
            // bound, a minute past its window): nothing runs, so nothing
            // to stop; the controller has the final report already.
            // Likewise its close (the agent stopped waiting for it).
            Ok(Some(Msg::Stop)) | Ok(Some(Msg::Close)) => {
                log!(sh, "controller {peer}: stop after its test had ended")
            }
            Ok(Some(other)) => {
                let _ = send_error(
                    &mut stream,
                    ErrorCode::BadRequest,
                    &format!("unexpected '{}' between tests", other.name()),
                );
            }
        }
    }
    log!(sh, "controller {peer} left");
}

/// The challenge: on success, the session's keys.
fn handshake(
    stream: &mut TcpStream,
    nonce: &str,
    since: Instant,
    ticket: &Ticket,
    sh: &Shared,
) -> Result<protocol::SessionKeys, AgentError> {
    // The lobby sent the hello with this nonce when it accepted.
    let nonce = nonce.to_string();
    let until = since + HANDSHAKE_DEADLINE;
    stream
        .set_write_timeout(Some(HANDSHAKE_DEADLINE))
        .map_err(AgentError::Io)?;
    let auth = read_msg(&mut Deadline {
        stream: &mut *stream,
        until,
    })
    .map_err(|e| match e.kind() {
        // A peer that connects and closes (a port scan, a health check).
        std::io::ErrorKind::UnexpectedEof => AgentError::ClosedUnauthenticated,
        _ => AgentError::NoAuth(e),
    })?;
    stream.set_write_timeout(None).map_err(AgentError::Io)?;
    match auth {
        Msg::Auth { version, .. } if version != protocol::VERSION => {
            let e = AgentError::VersionMismatch {
                controller: version,
            };
            let _ = send_plain_error(stream, ErrorCode::VersionMismatch, &e.to_string());
            Err(e)
        }
        Msg::Auth {
            nonce: cnonce,
            mac: m,
            ..
        } => {
            if !mac_eq(&m, &mac(&sh.cfg.token, "controller", &nonce, &cnonce)) {
                let _ = send_plain_error(
                    stream,
                    ErrorCode::AuthFailed,
                    "authentication failed: wrong token (check --token-file on both ends)",
                );
                return Err(AgentError::WrongToken);
            }
            // Proven: out of the waiting list before anything else, under
            // the lock evictions take, unless one came first (its read side
            // is shut; the session tells it why).
            if !ticket.settle() {
                return Err(AgentError::Evicted);
            }
            write_msg(
                stream,
                &Msg::AuthOk {
                    mac: mac(&sh.cfg.token, "agent", &cnonce, &nonce),
                },
            )
            .map_err(AgentError::Io)?;
            stream.set_read_timeout(None).map_err(AgentError::Io)?;
            Ok(protocol::session_keys(&sh.cfg.token, &nonce, &cnonce))
        }
        Msg::Error { message, .. } => Err(AgentError::Refused(message)),
        other => Err(AgentError::NotAuth(other.name())),
    }
}

/// An error before the channel is sealed (the handshake's refusals).
fn send_plain_error(stream: &mut TcpStream, code: ErrorCode, message: &str) -> std::io::Result<()> {
    write_msg(
        stream,
        &Msg::Error {
            code,
            message: message.to_string(),
        },
    )
}

fn send_error(stream: &mut Wire, code: ErrorCode, message: &str) -> std::io::Result<()> {
    stream.send(&Msg::Error {
        code,
        message: message.to_string(),
    })
}

// One test, from its Setup to its Final, is in test.rs.
mod test;
// A kind that runs in its client's process, as one client of several.
mod here;
use self::test::{run_test, Role, TestEnd};
