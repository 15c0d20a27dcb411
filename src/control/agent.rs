//! `linerate serve`: the agent. It accepts controllers, authenticates them,
//! and runs the server side of their tests. It only accepts data connections
//! that carry the cookie of a test its controller set up (it never connects
//! out), caps flows, duration and concurrent tests, answers "busy" past the
//! cap, and survives a controller that vanishes mid-test.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::protocol::{
    self, mac, mac_eq, random_hex, random_u64, read_msg, write_msg, ErrorCode, Msg,
};
use crate::engine::setup::accept_flows;
use crate::engine::side::{Observer, Side, SideSetup};
use crate::engine::sockopt;
use crate::engine::tls;
use crate::measure::host as env;
use crate::workload::Conns;

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
    pub quiet: bool,
}

struct Shared {
    cfg: ServeConfig,
    active: AtomicUsize,
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
pub fn serve(cfg: ServeConfig) -> Result<(), String> {
    let listener = TcpListener::bind(cfg.listen).map_err(|e| {
        format!(
            "cannot listen on {}: {e} (is another agent running there? pick another port with --listen)",
            cfg.listen
        )
    })?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    println!("linerate agent listening on {addr}");
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let shared = Arc::new(Shared {
        cfg,
        active: AtomicUsize::new(0),
    });
    for conn in listener.incoming() {
        let conn = match conn {
            Ok(c) => c,
            Err(e) => {
                log!(shared, "accept failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let sh = shared.clone();
        let h = std::thread::Builder::new()
            .name("linerate-session".into())
            .spawn(move || session(conn, &sh))
            .map_err(|e| format!("cannot start a session thread: {e}"))?;
        if shared.cfg.once {
            let _ = h.join();
            return Ok(());
        }
    }
    Ok(())
}

fn session(mut stream: TcpStream, sh: &Shared) {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    let _ = stream.set_nodelay(true);
    match handshake(&mut stream, sh) {
        Ok(()) => log!(sh, "controller {peer} connected"),
        Err(e) => {
            log!(sh, "controller {peer} refused: {e}");
            return;
        }
    }
    let Ok(reader) = stream.try_clone() else {
        return;
    };
    let (rx, gone) = protocol::spawn_reader(reader);
    loop {
        match rx.recv() {
            Ok(Some(Msg::Setup { spec })) => {
                if let Err(end) = run_test(*spec, &mut stream, &rx, &gone, sh) {
                    let e = match end {
                        TestEnd::Told(e) => e,
                        // Every failure reaches the controller, not only the
                        // refusals: else it waits for a reply until timeout.
                        TestEnd::Untold(e) => {
                            let _ = send_error(&mut stream, ErrorCode::SetupFailed, &e);
                            e
                        }
                    };
                    log!(sh, "controller {peer}: test ended early: {e}");
                    if gone.load(Ordering::Relaxed) {
                        break;
                    }
                }
            }
            Ok(Some(Msg::Bye)) | Ok(None) | Err(_) => break,
            Ok(Some(other)) => {
                let _ = send_error(
                    &mut stream,
                    ErrorCode::BadRequest,
                    &format!("unexpected {other:?} between tests"),
                );
            }
        }
    }
    log!(sh, "controller {peer} left");
}

fn handshake(stream: &mut TcpStream, sh: &Shared) -> Result<(), String> {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    let nonce = random_hex(16);
    write_msg(
        stream,
        &Msg::Hello {
            protocol: protocol::PROTOCOL.into(),
            version: protocol::VERSION,
            software: format!("linerate {}", env!("CARGO_PKG_VERSION")),
            nonce: nonce.clone(),
        },
    )
    .map_err(|e| e.to_string())?;
    match read_msg(stream).map_err(|e| format!("no authentication: {e}"))? {
        Msg::Auth { version, .. } if version != protocol::VERSION => {
            let msg = format!(
                "version mismatch: this agent speaks control protocol v{}, the controller v{version}; run the same linerate version on both ends",
                protocol::VERSION
            );
            let _ = send_error(stream, ErrorCode::VersionMismatch, &msg);
            Err(msg)
        }
        Msg::Auth {
            nonce: cnonce,
            mac: m,
            ..
        } => {
            if !mac_eq(&m, &mac(&sh.cfg.token, "controller", &nonce, &cnonce)) {
                let _ = send_error(
                    stream,
                    ErrorCode::AuthFailed,
                    "authentication failed: wrong token (check --token-file on both ends)",
                );
                return Err("authentication failed (wrong token)".into());
            }
            write_msg(
                stream,
                &Msg::AuthOk {
                    mac: mac(&sh.cfg.token, "agent", &cnonce, &nonce),
                },
            )
            .map_err(|e| e.to_string())?;
            stream.set_read_timeout(None).map_err(|e| e.to_string())?;
            Ok(())
        }
        Msg::Error { message, .. } => Err(message),
        other => Err(format!("expected auth, got {other:?}")),
    }
}

fn send_error(stream: &mut TcpStream, code: ErrorCode, message: &str) -> std::io::Result<()> {
    write_msg(
        stream,
        &Msg::Error {
            code,
            message: message.to_string(),
        },
    )
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
    /// The controller was sent the reason.
    Told(String),
    /// Not yet: the session sends it (any `?` in `run_test` lands here).
    Untold(String),
}

impl From<String> for TestEnd {
    fn from(e: String) -> Self {
        TestEnd::Untold(e)
    }
}

impl From<&str> for TestEnd {
    fn from(e: &str) -> Self {
        TestEnd::Untold(e.to_string())
    }
}

fn run_test(
    spec: TestSpec,
    stream: &mut TcpStream,
    rx: &Receiver<Option<Msg>>,
    gone: &Arc<AtomicBool>,
    sh: &Shared,
) -> Result<(), TestEnd> {
    let refuse = |stream: &mut TcpStream, code: ErrorCode, msg: String| {
        let _ = send_error(stream, code, &msg);
        Err(TestEnd::Told(msg))
    };
    let workload = match super::check(&spec).and_then(|_| crate::workload::of(&spec)) {
        Ok(w) => w,
        Err(e) => return refuse(stream, ErrorCode::BadRequest, e),
    };
    if let Err(e) = crate::engine::limits::ensure_fds(spec.flows, spec.agent_workers, "the agent") {
        return refuse(stream, ErrorCode::SetupFailed, e);
    }
    if spec.flows > sh.cfg.max_flows {
        return refuse(
            stream,
            ErrorCode::BadRequest,
            format!(
                "{} flows asked, this agent allows {} (--max-flows)",
                spec.flows, sh.cfg.max_flows
            ),
        );
    }
    if spec.duration_s + spec.warmup_s > sh.cfg.max_duration_s {
        return refuse(
            stream,
            ErrorCode::BadRequest,
            format!(
                "{:.0} s asked, this agent allows {:.0} s (--max-duration)",
                spec.duration_s + spec.warmup_s,
                sh.cfg.max_duration_s
            ),
        );
    }
    let running = sh.active.fetch_add(1, Ordering::SeqCst);
    let _slot = Slot(&sh.active);
    if running >= sh.cfg.max_tests {
        return refuse(
            stream,
            ErrorCode::Busy,
            format!(
                "agent busy: {running} tests running, cap {} (--max-tests); try again later",
                sh.cfg.max_tests
            ),
        );
    }
    // TLS: the server config and the certificate the controller will trust.
    let (tls_role, tls_cert, tls_cert_label) = match &spec.tls {
        None => (None, None, None),
        Some(t) => match tls::Role::server(t) {
            Ok((role, cert, label)) => (Some(Arc::new(role)), Some(cert), Some(label)),
            Err(e) => return refuse(stream, ErrorCode::BadRequest, e),
        },
    };
    let local_ip = stream.local_addr().map_err(|e| e.to_string())?.ip();
    let bind = SocketAddr::new(local_ip, 0);
    let cookie = random_u64();
    let mut conns = Conns::new(cookie, tls_role.clone());
    let mut listener = None;
    let port;
    if spec.workload.per_connection() {
        let first =
            sockopt::listener(&bind, &spec, true).map_err(|e| format!("data listener: {e}"))?;
        let addr = first
            .local_addr()
            .map_err(|e| e.to_string())?
            .as_socket()
            .ok_or("not an IP socket")?;
        port = addr.port();
        conns
            .listeners
            .push(mio::net::TcpListener::from_std(first.into()));
        for _ in 1..spec.agent_workers {
            let more =
                sockopt::listener(&addr, &spec, true).map_err(|e| format!("data listener: {e}"))?;
            conns
                .listeners
                .push(mio::net::TcpListener::from_std(more.into()));
        }
    } else {
        let l = match sockopt::listener(&bind, &spec, false) {
            Ok(l) => l,
            Err(e) => {
                return refuse(
                    stream,
                    ErrorCode::SetupFailed,
                    format!("data listener on {bind}: {e}"),
                )
            }
        };
        port = l
            .local_addr()
            .map_err(|e| e.to_string())?
            .as_socket()
            .ok_or("not an IP socket")?
            .port();
        listener = Some(mio::net::TcpListener::from_std(l.into()));
    }
    write_msg(
        stream,
        &Msg::Ready {
            data_port: port,
            cookie,
            host: Box::new(env::collect()),
            tls_cert,
            tls_cert_label,
        },
    )
    .map_err(|e| e.to_string())?;
    if let Some(mut l) = listener {
        let timeout = Duration::from_secs(30 + spec.flows as u64 / 100);
        match accept_flows(&mut l, &spec, cookie, spec.flows, timeout, gone) {
            Ok((flows, rejected)) => {
                conns.established = match tls::handshake_all(flows, tls_role.as_deref(), timeout) {
                    Ok(f) => f,
                    Err(e) => return refuse(stream, ErrorCode::SetupFailed, e),
                };
                write_msg(stream, &Msg::FlowsReady { rejected }).map_err(|e| e.to_string())?;
            }
            Err(e) => return refuse(stream, ErrorCode::SetupFailed, e),
        }
    }
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(Some(Msg::Start)) => {}
        Ok(Some(Msg::Stop)) | Ok(Some(Msg::Bye)) => return Ok(()),
        Ok(Some(other)) => {
            return refuse(
                stream,
                ErrorCode::BadRequest,
                format!("expected start, got {other:?}"),
            )
        }
        Ok(None) | Err(RecvTimeoutError::Disconnected) => {
            return Err("controller went away before start".into())
        }
        Err(RecvTimeoutError::Timeout) => return Err("no start within 30 s".into()),
    }
    let setup = SideSetup {
        agent: true,
        spec: spec.clone(),
        flows: workload.agent_flows(&spec, conns)?,
    };
    let mut side = Side::start(setup)?;
    // Bounded even if the controller never says stop.
    let limit = Instant::now() + Duration::from_secs_f64(spec.warmup_s + spec.duration_s + 60.0);
    let mut obs = AgentObserver {
        stream: stream.try_clone().map_err(|e| e.to_string())?,
        rx,
        stop: false,
        gone: false,
        limit,
    };
    side.collect(&mut obs);
    let cpu = side.window_cpu();
    let complete = !obs.gone;
    if !obs.gone {
        let _ = write_msg(&mut obs.stream, &Msg::WindowDone { cpu, complete });
    }
    // Ramp-down: keep the flows going until the controller has its window too.
    while !obs.stop && !obs.gone && Instant::now() < limit {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(Some(Msg::Stop)) => obs.stop = true,
            Ok(None) | Err(RecvTimeoutError::Disconnected) => obs.gone = true,
            Ok(Some(_)) | Err(RecvTimeoutError::Timeout) => {}
        }
    }
    let report = side.finish(&mut obs);
    if obs.gone {
        return Err("controller went away mid-test; flows closed".into());
    }
    write_msg(
        stream,
        &Msg::Final {
            flows: report.flows,
            placement: report.placement,
            errors: report.errors,
        },
    )
    .map_err(|e| TestEnd::Told(format!("cannot send the final report: {e}")))
}

struct AgentObserver<'a> {
    stream: TcpStream,
    rx: &'a Receiver<Option<Msg>>,
    stop: bool,
    gone: bool,
    limit: Instant,
}

impl Observer for AgentObserver<'_> {
    fn interval(&mut self, sample: &IntervalSample) {
        if !self.gone
            && write_msg(
                &mut self.stream,
                &Msg::Interval {
                    sample: Box::new(sample.clone()),
                },
            )
            .is_err()
        {
            self.gone = true;
        }
    }

    fn should_stop(&mut self) -> bool {
        loop {
            match self.rx.try_recv() {
                Ok(Some(Msg::Stop)) => self.stop = true,
                Ok(Some(_)) => {}
                Ok(None) | Err(TryRecvError::Disconnected) => {
                    self.gone = true;
                    break;
                }
                Err(TryRecvError::Empty) => break,
            }
        }
        self.stop || self.gone || Instant::now() >= self.limit
    }
}
