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
use crate::workload::conns::{self, Group, SetupError};
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
}

struct Shared {
    cfg: ServeConfig,
    active: AtomicUsize,
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
        println!("linerate agent listening on {addr}");
        use std::io::Write;
        let _ = std::io::stdout().flush();
    }
    let shared = Arc::new(Shared {
        cfg,
        active: AtomicUsize::new(0),
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
            Ok(Some(Msg::Bye)) | Ok(None) | Err(_) => break,
            // The stop of a test that ended here first (at the agent's own
            // bound, a minute past its window): nothing runs, so nothing
            // to stop; the controller has the final report already.
            Ok(Some(Msg::Stop)) => log!(sh, "controller {peer}: stop after its test had ended"),
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

/// Releases the concurrent-test slot when a test ends, however it ends.
struct Slot<'a>(&'a AtomicUsize);
impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// How a test that did not run to its end ended.
enum TestEnd {
    /// The controller was sent the reason, as the protocol carries it:
    /// text.
    Told(String),
    /// Not yet: the session sends it (any `?` in `run_test` lands here).
    Untold(AgentError),
}

impl From<AgentError> for TestEnd {
    fn from(e: AgentError) -> Self {
        TestEnd::Untold(e)
    }
}

impl From<WorkloadError> for TestEnd {
    fn from(e: WorkloadError) -> Self {
        TestEnd::Untold(e.into())
    }
}

impl From<EngineError> for TestEnd {
    fn from(e: EngineError) -> Self {
        TestEnd::Untold(e.into())
    }
}

/// Which half of a test this agent runs.
enum Role {
    /// Listen on `listen` (empty: the control address) for the flows
    /// `expect` names (empty: all of them).
    Server {
        listen: Vec<IpAddr>,
        expect: Vec<u32>,
    },
    /// Open flows to other agents' listeners and drive them.
    Client { groups: Vec<TargetGroup> },
}

/// Why this agent refuses `spec` in `role` before taking a slot: crypto
/// hardware it does not run with, descriptors, its flow and time caps.
fn refusal(spec: &TestSpec, role: &Role, sh: &Shared) -> Option<(ErrorCode, String)> {
    // Crypto hardware is the process's (the libraries read the mask once):
    // a test asks for what this agent runs with, or is refused.
    let masked = crate::measure::crypto::hw_masked();
    if spec.tls.is_some() && spec.crypto_hw == masked {
        return Some((
            ErrorCode::BadRequest,
            if masked {
                "this agent runs with the crypto extensions masked (serve --crypto-hw off); the test wants them on".into()
            } else {
                "this agent uses the CPU's crypto extensions; for --crypto-hw off start it with `linerate serve --crypto-hw off`".into()
            },
        ));
    }
    let (flows_here, workers) = match role {
        Role::Server { expect, .. } if !expect.is_empty() => {
            (expect.len() as u32, spec.agent_workers)
        }
        Role::Server { .. } => (spec.flows, spec.agent_workers),
        Role::Client { groups } => (
            groups.iter().map(|g| g.targets.len() as u32).sum(),
            spec.workers,
        ),
    };
    if let Err(e) = crate::engine::limits::ensure_fds(flows_here, workers, "the agent") {
        return Some((ErrorCode::SetupFailed, e.to_string()));
    }
    if flows_here > sh.cfg.max_flows {
        return Some((
            ErrorCode::BadRequest,
            format!(
                "{flows_here} flows asked, this agent allows {} (--max-flows)",
                sh.cfg.max_flows
            ),
        ));
    }
    if spec.duration_s + spec.warmup_s > sh.cfg.max_duration_s {
        return Some((
            ErrorCode::BadRequest,
            format!(
                "{} s asked ({} s + {} s warm-up), this agent allows {} s \
                 (--max-duration); ask for less or start the agent with a larger --max-duration",
                spec.duration_s + spec.warmup_s,
                spec.duration_s,
                spec.warmup_s,
                sh.cfg.max_duration_s
            ),
        ));
    }
    None
}

/// The controller's start: when (None: now), or Ok(None) when it stopped
/// the test before its start (a mixed test whose other group failed).
fn await_start(
    rx: &Receiver<Option<Msg>>,
    stream: &mut Wire,
) -> Result<Option<Option<u64>>, TestEnd> {
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Some(Msg::Start { at_ns })) => Ok(Some(at_ns)),
        Ok(Some(Msg::Stop)) | Ok(Some(Msg::Bye)) => Ok(None),
        Ok(Some(other)) => {
            let why = format!("expected start, got '{}'", other.name());
            let _ = send_error(stream, ErrorCode::BadRequest, &why);
            Err(TestEnd::Told(why))
        }
        Ok(None) | Err(RecvTimeoutError::Disconnected) => Err(AgentError::GoneBeforeStart.into()),
        Err(RecvTimeoutError::Timeout) => Err(AgentError::NoStart.into()),
    }
}

fn run_test(
    spec: TestSpec,
    role: Role,
    stream: &mut Wire,
    rx: &Receiver<Option<Msg>>,
    gone: &Arc<AtomicBool>,
    sh: &Shared,
) -> Result<(), TestEnd> {
    let refuse = |stream: &mut Wire, code: ErrorCode, msg: String| {
        let _ = send_error(stream, code, &msg);
        Err(TestEnd::Told(msg))
    };
    let workload = match crate::control::check(&spec).and_then(|_| Ok(crate::workload::of(&spec)?))
    {
        Ok(w) => w,
        Err(e) => return refuse(stream, ErrorCode::BadRequest, e.to_string()),
    };
    if let Some((code, why)) = refusal(&spec, &role, sh) {
        return refuse(stream, code, why);
    }
    let client = matches!(role, Role::Client { .. });
    let running = sh.active.fetch_add(1, Ordering::SeqCst);
    let _slot = Slot(&sh.active);
    if running >= sh.cfg.max_tests {
        return refuse(
            stream,
            ErrorCode::Busy,
            format!(
                "{running} {} running, its cap is {} (--max-tests)",
                if running == 1 { "test" } else { "tests" },
                sh.cfg.max_tests
            ),
        );
    }
    // The test's sysctls on this host, journaled and put back when this
    // function returns (or, if the agent dies, at its next start).
    let _sysctls = if spec.sysctl.is_empty() {
        None
    } else if !sh.cfg.allow_sysctl {
        return refuse(
            stream,
            ErrorCode::BadRequest,
            "this agent does not change sysctls: start one with `sudo linerate serve --allow-sysctl` and give it with --agent".into(),
        );
    } else {
        match crate::hostops::sysctl::apply(&spec.sysctl).map_err(|e| e.to_string()) {
            Ok(a) => Some(a),
            Err(e) => return refuse(stream, ErrorCode::SetupFailed, e),
        }
    };
    // The test's NIC settings on this end's data interfaces, journaled
    // and put back when this function returns (or at the next start).
    let (_nic, nic_record) = if spec.nic.is_empty() {
        (None, Vec::new())
    } else if !sh.cfg.allow_nic {
        return refuse(
            stream,
            ErrorCode::BadRequest,
            "this agent does not change NIC settings (nic.*): start one with `sudo linerate serve --allow-nic` and give it with --agent".into(),
        );
    } else {
        match apply_nic(&spec, &role, stream) {
            Ok((a, r)) => (Some(a), r),
            Err(e) => return refuse(stream, ErrorCode::SetupFailed, e.to_string()),
        }
    };
    // A service (memcached) this agent starts and watches (stopped when
    // this function returns, however it returns).
    let mut service: Option<Service> = None;
    let pattern = workload.pattern();
    let conns = match role {
        Role::Server { listen, expect } => {
            let (c, svc) = server_conns(&spec, pattern, listen, expect, stream, gone, &nic_record)?;
            service = svc;
            vec![c]
        }
        Role::Client { groups } => client_conns(&spec, pattern, groups, stream, &nic_record)?,
    };
    let Some(at) = await_start(rx, stream)? else {
        return Ok(());
    };
    let mut flows = Vec::new();
    for c in conns {
        flows.extend(if client {
            workload.client_flows(&spec, c)?
        } else {
            workload.agent_flows(&spec, c)?
        });
    }
    // A scheduled start: every host's timeline begins at the same instant.
    let when = match at {
        Some(at) => {
            let when = clock::instant_at(at);
            let wait = when.saturating_duration_since(Instant::now());
            if wait > Duration::from_secs(30) {
                return Err(AgentError::StartTooFar(wait).into());
            }
            std::thread::sleep(wait);
            Some(when)
        }
        None => None,
    };
    let setup = SideSetup {
        agent: !client,
        spec: spec.clone(),
        flows,
        t0: when,
        service: service.as_ref().and_then(|s| workload.watch_service(s)),
        kernel_udp: pattern.kernel_udp(),
        // Each interval goes to the controller as it closes.
        keep_samples: false,
    };
    let mut side = Side::start(setup)?;
    let t0 = side.t0();
    let _ = stream.send(&Msg::Started {
        t0_ns: clock::ns_of(t0),
        late_ns: when.map_or(0, |w| w.elapsed().as_nanos() as u64),
    });
    // Bounded even if the controller never says stop.
    let limit = Instant::now() + Duration::from_secs_f64(spec.warmup_s + spec.duration_s + 60.0);
    let mut obs = AgentObserver {
        stream: &mut *stream,
        rx,
        stop: false,
        gone: false,
        limit,
        hists: client.then(BTreeMap::new),
        service: service.as_mut(),
        service_died: None,
        told: None,
    };
    let complete = side.collect(&mut obs);
    // A server nobody here started (a service given by address) has no
    // process to measure: the agent's idle threads are not its CPU.
    let no_server = !client && !workload.server_cpu(obs.service.is_some());
    let cpu = if no_server { None } else { side.window_cpu() };
    if let Some(why) = obs.service_died.take() {
        // Said first, so the controller keeps what was measured as partial.
        let _ = send_error(obs.stream, ErrorCode::Internal, &format!("{why} mid-test"));
    }
    if !obs.gone {
        let done = Msg::WindowDone {
            cpu,
            complete: !obs.gone,
            kernel_udp: side.window_kernel_udp(),
            service: side.window_service(),
        };
        let _ = obs.stream.send(&done);
    }
    // Ramp-down: keep the flows going until the controller has its window too.
    while !obs.stop && !obs.gone && Instant::now() < limit {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(m) => obs.take(m),
            Err(RecvTimeoutError::Disconnected) => obs.gone = true,
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
    let report = side.finish(&mut obs);
    if obs.gone {
        return Err(match obs.told.take() {
            Some(why) => AgentError::EndedMidTest(why),
            None => AgentError::GoneMidTest,
        }
        .into());
    }
    let hist = client.then(|| HistText {
        latency: histogram::encode(&report.hist),
        corrected: histogram::encode(&report.hist_corrected),
    });
    stream
        .send(&Msg::Final {
            flows: report.flows,
            placement: report.placement,
            errors: report.errors,
            hist,
            window_s: report.window_s,
            complete: complete || report.complete,
            waits: (!report.waits.is_empty()).then(|| report.waits.encode()),
        })
        .map_err(|e| TestEnd::Told(format!("cannot send the final report: {e}")))
}

/// Applies the test's NIC settings on this end's data interfaces: a
/// server's, those holding the addresses it listens on (the control
/// connection's when none is named); a client's, those it reaches its
/// targets through.
fn apply_nic(
    spec: &TestSpec,
    role: &Role,
    stream: &Wire,
) -> Result<
    (
        crate::hostops::nic::Applied,
        Vec<crate::model::nic::NicInterface>,
    ),
    AgentError,
> {
    use crate::hostops::{nic, OpsError};
    let mut ifaces: Vec<String> = Vec::new();
    let mut add = |found: Option<String>, what: String| -> Result<(), AgentError> {
        let i = found.ok_or_else(|| {
            AgentError::Nic(Box::new(OpsError::NicInterface(format!(
                "no interface here {what}"
            ))))
        })?;
        if !ifaces.contains(&i) {
            ifaces.push(i);
        }
        Ok(())
    };
    match role {
        Role::Server { listen, .. } => {
            let addrs = if listen.is_empty() {
                vec![stream
                    .stream
                    .local_addr()
                    .map_err(AgentError::LocalAddr)?
                    .ip()]
            } else {
                listen.clone()
            };
            for a in addrs {
                add(nic::interface_of(a), format!("holds {a}"))?;
            }
        }
        Role::Client { groups } => {
            for g in groups {
                for (_, t) in &g.targets {
                    add(nic::interface_to(t.ip()), format!("reaches {}", t.ip()))?;
                }
            }
        }
    }
    nic::apply(&spec.nic, &ifaces, nic::Place::Agent).map_err(|e| AgentError::Nic(Box::new(e)))
}

/// The server half's connections (`workload::conns`): listeners on every
/// data address (or the service started), `Ready` with where they are,
/// then the flows that arrive before the window (and their TLS), and for
/// those `FlowsReady`.
fn server_conns(
    spec: &TestSpec,
    pattern: Pattern,
    listen: Vec<IpAddr>,
    expect: Vec<u32>,
    stream: &mut Wire,
    gone: &Arc<AtomicBool>,
    nic: &[crate::model::nic::NicInterface],
) -> Result<(Conns, Option<Service>), TestEnd> {
    let refuse = |stream: &mut Wire, code: ErrorCode, msg: String| {
        let _ = send_error(stream, code, &msg);
        Err(TestEnd::Told(msg))
    };
    let addrs = if listen.is_empty() {
        vec![stream
            .stream
            .local_addr()
            .map_err(AgentError::LocalAddr)?
            .ip()]
    } else {
        listen
    };
    let server = match conns::listen(spec, pattern, &addrs, random_u64()) {
        Ok(s) => s,
        Err(SetupError::Refused(e)) => return refuse(stream, ErrorCode::BadRequest, e.to_string()),
        Err(SetupError::Failed(e)) => return refuse(stream, ErrorCode::SetupFailed, e.to_string()),
    };
    let l = server.listening.clone();
    stream
        .send(&Msg::Ready {
            data_port: l.data.first().map_or(0, |a| a.port()),
            data: l.data,
            cookie: l.cookie,
            host: Box::new(host_with(nic)),
            tls_cert: l.tls_cert,
            tls_cert_label: l.tls_cert_label,
        })
        .map_err(AgentError::Send)?;
    let accepted = match server.accept(spec, expect, gone) {
        Ok(a) => a,
        Err(e) => return refuse(stream, ErrorCode::SetupFailed, e.to_string()),
    };
    if let Some(rejected) = accepted.rejected {
        stream
            .send(&Msg::FlowsReady { rejected })
            .map_err(AgentError::Send)?;
    }
    Ok((accepted.conns, accepted.service))
}

/// The client half's connections (`workload::conns`), one set per server
/// agent; then `Connected`, with the prefill a service got from here.
fn client_conns(
    spec: &TestSpec,
    pattern: Pattern,
    groups: Vec<TargetGroup>,
    stream: &mut Wire,
    nic: &[crate::model::nic::NicInterface],
) -> Result<Vec<Conns>, TestEnd> {
    let mut all = Vec::new();
    let mut prefill = None;
    for g in groups {
        let group = Group {
            cookie: g.cookie,
            targets: g.targets,
            tls_cert: g.tls_cert,
            tls_cert_label: g.tls_cert_label,
            prefill: g.prefill,
            clock: g.clock,
        };
        let c = conns::connect(spec, pattern, group)?;
        prefill = prefill.or(c.prefill);
        all.push(c.conns);
    }
    stream
        .send(&Msg::Connected {
            host: Box::new(host_with(nic)),
            prefill,
        })
        .map_err(AgentError::Send)?;
    Ok(all)
}

/// This host's configuration, with the test's NIC settings as applied.
fn host_with(nic: &[crate::model::nic::NicInterface]) -> crate::model::host::HostInfo {
    let mut h = env::collect();
    h.nic = nic.to_vec();
    h
}

struct AgentObserver<'a> {
    stream: &'a mut Wire,
    rx: &'a Receiver<Option<Msg>>,
    stop: bool,
    gone: bool,
    limit: Instant,
    /// A client side: each interval's histograms, sent with it.
    hists: Option<BTreeMap<usize, HistText>>,
    /// memcache: the server this agent started, watched while it runs.
    service: Option<&'a mut Service>,
    service_died: Option<String>,
    /// Why the controller ended the test, when it said (a broken seal).
    told: Option<String>,
}

impl AgentObserver<'_> {
    /// A message from the controller during the window.
    fn take(&mut self, m: Option<Msg>) {
        match m {
            Some(Msg::Stop) => self.stop = true,
            Some(Msg::Error { message, .. }) => {
                self.told = Some(message);
                self.gone = true;
            }
            Some(_) => {}
            None => self.gone = true,
        }
    }
}

impl Observer for AgentObserver<'_> {
    fn interval_hists(&mut self, index: usize, latency: &Hist, corrected: &Hist) {
        if let Some(h) = &mut self.hists {
            h.insert(
                index,
                HistText {
                    latency: histogram::encode(latency),
                    corrected: histogram::encode(corrected),
                },
            );
        }
    }

    fn interval(&mut self, sample: &IntervalSample) {
        let hist = self.hists.as_mut().and_then(|h| h.remove(&sample.index));
        if !self.gone
            && self
                .stream
                .send(&Msg::Interval {
                    sample: Box::new(sample.clone()),
                    hist,
                })
                .is_err()
        {
            self.gone = true;
        }
    }

    fn should_stop(&mut self) -> bool {
        if let Some(svc) = self.service.as_deref_mut() {
            if self.service_died.is_none() {
                self.service_died = svc.exited();
            }
        }
        if self.service_died.is_some() {
            return true;
        }
        loop {
            match self.rx.try_recv() {
                Ok(m) => {
                    self.take(m);
                    if self.gone {
                        break;
                    }
                }
                Err(TryRecvError::Disconnected) => {
                    self.gone = true;
                    break;
                }
                Err(TryRecvError::Empty) => break,
            }
        }
        self.stop || self.gone || Instant::now() >= self.limit
    }
}
