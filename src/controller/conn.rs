//! The controller's end of the control protocol: connect and authenticate,
//! then run tests on the agent, one iteration at a time, keeping whatever
//! was measured if the agent dies mid-test.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use super::error::{ControllerError, Peer};
use super::together::{self, Meet, NotStarted, Together};
use crate::control::clock;
use crate::control::protocol::{
    self, mac, mac_eq, random_hex, read_msg, write_msg, ErrorCode, Msg, Opener, Wire,
};
use crate::engine::side::{Observer, Side, SideReport, SideSetup};
use crate::engine::signals;
use crate::model::flow::FlowReport;
use crate::model::host::HostInfo;
use crate::workload::conns::{self, Connected, Group, Routes};

use crate::measure::fold::combine;
use crate::measure::histogram::{self, new_hist, Hist, WaitHists};
use crate::model::result::TestInterval;
use crate::model::sample::{CpuWindow, IntervalSample, WorkerPlacement};
use crate::model::spec::TestSpec;

pub struct AgentConn {
    pub addr: SocketAddr,
    writer: Wire,
    rx: Receiver<Option<Msg>>,
    pub host: Option<HostInfo>,
    /// The agent's crypto libraries use the CPU's crypto extensions.
    pub crypto_hw: bool,
    /// Its companion with the other crypto setting: the port it announced,
    /// and the connection once a test needed it.
    twin_port: Option<u16>,
    twin: Option<Box<AgentConn>>,
    /// Kept to authenticate to the companion (same token).
    token: String,
    /// The agent's data addresses beyond its control address, for
    /// `--ports N`: flows go round robin over the first N (empty: the
    /// control address only; the local agent on loopback has
    /// `LOOPBACK_PORTS`).
    pub data: Vec<IpAddr>,
}

/// How many loopback addresses (127.0.0.1 up) the local agent listens on
/// for `--ports`: every one is this host's without setup.
pub const LOOPBACK_PORTS: u8 = 16;

/// The local agent's data addresses on loopback: 127.0.0.1 up.
pub fn loopback_data() -> Vec<IpAddr> {
    (1..=LOOPBACK_PORTS)
        .map(|i| IpAddr::from([127, 0, 0, i]))
        .collect()
}

/// Resolves `host:port`, naming the input in the error.
pub fn resolve(agent: &str) -> Result<SocketAddr, ControllerError> {
    agent
        .to_socket_addrs()
        .map_err(|source| ControllerError::Resolve {
            agent: agent.to_string(),
            source,
        })?
        .next()
        .ok_or_else(|| ControllerError::ResolvesToNothing(agent.to_string()))
}

/// Why a test that a Ctrl-C ended is partial.
pub const INTERRUPTED: &str = "interrupted (Ctrl-C): the results cover the window up to then";

pub fn connect(addr: SocketAddr, token: &str) -> Result<AgentConn, ControllerError> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|source| ControllerError::Unreachable { addr, source })?;
    let _ = s.set_nodelay(true);
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(ControllerError::Socket)?;
    let hello = read_msg(&mut s).map_err(|source| ControllerError::NoGreeting { addr, source })?;
    let (version, nonce, crypto_hw, twin_port, no_token) = match hello {
        Msg::Hello {
            protocol: p,
            version,
            nonce,
            crypto_hw,
            crypto_twin,
            no_token,
            ..
        } if p == protocol::PROTOCOL => (version, nonce, crypto_hw, crypto_twin, no_token),
        // A refusal before the greeting (an agent past its caps).
        Msg::Error { code, message } => return Err(ControllerError::refusal(addr, code, message)),
        other => {
            return Err(ControllerError::NotAnAgent {
                addr,
                first: other.name(),
            })
        }
    };
    if version != protocol::VERSION {
        let e = ControllerError::VersionMismatch {
            addr,
            theirs: version,
            ours: protocol::VERSION,
        };
        let _ = write_msg(
            &mut s,
            &Msg::Error {
                code: ErrorCode::VersionMismatch,
                message: e.to_string(),
            },
        );
        return Err(e);
    }
    // An empty token is "none given". A controller that holds a token
    // insists the agent proves it: an agent that claims to need none could
    // be anyone's, and would be trusted with results and certificates.
    match (token.is_empty(), no_token) {
        (true, false) => return Err(ControllerError::NeedsToken(addr)),
        (false, true) => return Err(ControllerError::HoldsNoToken(addr)),
        _ => {}
    }
    let cnonce = random_hex(16);
    write_msg(
        &mut s,
        &Msg::Auth {
            version: protocol::VERSION,
            nonce: cnonce.clone(),
            mac: mac(token, "controller", &nonce, &cnonce),
        },
    )
    .map_err(|source| ControllerError::Auth { addr, source })?;
    match read_msg(&mut s) {
        Ok(Msg::AuthOk { mac: m }) if mac_eq(&m, &mac(token, "agent", &cnonce, &nonce)) => {}
        Ok(Msg::AuthOk { .. }) => return Err(ControllerError::WrongToken(addr)),
        Ok(Msg::Error { code, message }) => {
            return Err(ControllerError::refusal(addr, code, message))
        }
        Ok(other) => {
            return Err(ControllerError::AuthUnexpected {
                addr,
                got: other.name(),
            })
        }
        Err(source) => return Err(ControllerError::AuthClosed { addr, source }),
    }
    s.set_read_timeout(None).map_err(ControllerError::Socket)?;
    let keys = protocol::session_keys(token, &nonce, &cnonce);
    let (rx, _, _) = protocol::spawn_reader(
        s.try_clone().map_err(ControllerError::Socket)?,
        Opener::new(keys.to_controller, "the agent"),
    );
    Ok(AgentConn {
        addr,
        writer: Wire::new(s, keys.to_agent),
        rx,
        host: None,
        crypto_hw,
        twin_port,
        twin: None,
        token: token.to_string(),
        data: Vec::new(),
    })
}

/// Tells the agent why this side ends the connection (what this side
/// sends is still sealed), then shuts it.
fn tell_broken(writer: &mut Wire, reason: &str) {
    let _ = writer.send(&Msg::Error {
        code: ErrorCode::Tampered,
        message: format!("the controller closes the connection: {reason}"),
    });
    let _ = writer.stream.shutdown(std::net::Shutdown::Both);
}

/// What the agent reported for one iteration.
#[derive(Default)]
pub struct AgentSide {
    pub samples: Vec<IntervalSample>,
    pub window_cpu: Option<CpuWindow>,
    pub flows: Vec<FlowReport>,
    pub placement: Vec<WorkerPlacement>,
    pub errors: Vec<String>,
    pub kernel_udp: Option<crate::model::sample::KernelUdp>,
    /// memcache: memcached's own counts (the agent started it).
    pub service: Option<crate::model::sample::ServiceWindow>,
    /// What the agent's own scheduling added (its read delays).
    pub waits: WaitHists,
}

pub struct IterationRun {
    pub client: SideReport,
    pub agent: AgentSide,
    /// Why the iteration ended early, if it did; results above are kept.
    pub error: Option<String>,
    /// Many hosts: each host's own figures (empty for one agent).
    pub hosts: Vec<crate::model::result::HostRun>,
    pub start_skew_us: Option<f64>,
    /// memcache: the prefill before the window.
    pub prefill: Option<crate::model::sample::KvPrefill>,
    /// A group with phases (`together::Lane`): the client's latency over
    /// each phase's intervals, merged (empty otherwise).
    pub phase_hists: Vec<Hist>,
    /// `--duration auto`: what the window did (its warm-up already left
    /// out of `client` and `agent`).
    pub auto: Option<crate::model::auto::AutoRecord>,
}

impl IterationRun {
    /// A group with an offset that never started (`why`): nothing
    /// measured, and the reason as its error.
    pub fn not_started(why: &NotStarted) -> IterationRun {
        IterationRun {
            client: SideReport::default(),
            agent: AgentSide::default(),
            error: Some(why.why().to_string()),
            hosts: Vec::new(),
            start_skew_us: None,
            prefill: None,
            phase_hists: Vec::new(),
            auto: None,
        }
    }
}

/// The client's latency per phase: each interval's histogram merged into
/// every phase (a range of interval indices) that holds it.
pub struct PhaseHists {
    phases: Vec<std::ops::Range<usize>>,
    pub hists: Vec<Hist>,
}

impl PhaseHists {
    pub fn new(phases: &[std::ops::Range<usize>]) -> PhaseHists {
        PhaseHists {
            phases: phases.to_vec(),
            hists: phases.iter().map(|_| new_hist()).collect(),
        }
    }

    pub fn add(&mut self, index: usize, latency: &Hist) {
        for (p, h) in self.phases.iter().zip(self.hists.iter_mut()) {
            if p.contains(&index) {
                histogram::merge(h, latency);
            }
        }
    }
}

/// Receives live combined intervals (progress line, --json-stream).
pub trait Live {
    fn interval(&mut self, i: &TestInterval);
}

struct ControllerObserver<'a> {
    rx: &'a Receiver<Option<Msg>>,
    agent: &'a mut AgentSide,
    client: BTreeMap<usize, IntervalSample>,
    next_live: usize,
    window_done: bool,
    dead: bool,
    agent_error: Option<String>,
    /// This side's reader found the channel broken (the reason).
    broken: Option<String>,
    live: &'a mut dyn Live,
    /// Time limit of a finite test.
    deadline: Option<Instant>,
    /// A mixed test's rendezvous: another group ended early.
    together: Option<&'a Together>,
    /// A group with phases: its latency per phase.
    phases: PhaseHists,
    /// How the test counts its bytes (for the live line).
    figures: crate::model::spec::Figures,
    /// `--duration auto`: ends the window once the figure has settled.
    auto: Option<super::auto::AutoWatch>,
}

impl ControllerObserver<'_> {
    fn pump(&mut self) {
        loop {
            match self.rx.try_recv() {
                Ok(Some(m)) => self.take(m),
                Ok(None) | Err(TryRecvError::Disconnected) => {
                    self.dead = true;
                    break;
                }
                Err(TryRecvError::Empty) => break,
            }
        }
        self.flush_live(false);
    }

    fn take(&mut self, m: Msg) {
        match m {
            Msg::Interval { sample, .. } => self.agent.samples.push(*sample),
            Msg::WindowDone {
                cpu,
                kernel_udp,
                service,
                ..
            } => {
                self.agent.window_cpu = cpu;
                self.agent.kernel_udp = kernel_udp;
                self.agent.service = service;
                self.window_done = true;
            }
            Msg::Final {
                flows,
                placement,
                errors,
                waits,
                ..
            } => {
                self.agent.flows = flows;
                self.agent.placement = placement;
                self.agent.errors = errors;
                if let Some(w) = waits.as_ref().and_then(|w| WaitHists::decode(w).ok()) {
                    self.agent.waits = w;
                }
            }
            Msg::Error { code, message } => {
                if code == ErrorCode::ChannelBroken {
                    self.broken = Some(message.clone());
                }
                self.agent_error = Some(message)
            }
            _ => {}
        }
    }

    /// Shows each interval once both ends reported it (or, at the end, alone).
    fn flush_live(&mut self, all: bool) {
        while let Some(c) = self.client.get(&self.next_live) {
            let a = self.agent.samples.iter().find(|a| a.index == c.index);
            if a.is_none() && !all && !self.dead {
                break;
            }
            let joined = combine(c, a, self.figures);
            if let Some(w) = &mut self.auto {
                w.interval(&joined);
            }
            self.live.interval(&joined);
            self.next_live += 1;
        }
    }
}

impl Observer for ControllerObserver<'_> {
    fn interval(&mut self, sample: &IntervalSample) {
        self.client.insert(sample.index, sample.clone());
        self.flush_live(false);
    }

    fn interval_hists(&mut self, index: usize, latency: &Hist, corrected: &Hist) {
        self.phases.add(index, latency);
        if let Some(w) = &mut self.auto {
            w.hists(index, latency, corrected);
        }
    }

    fn should_stop(&mut self) -> bool {
        self.pump();
        self.dead
            || self.agent_error.is_some()
            || self.deadline.is_some_and(|d| Instant::now() >= d)
            || signals::test_interrupted()
            || self.together.is_some_and(|t| t.stopped())
            || self.auto.as_ref().is_some_and(|w| w.settled())
    }
}

pub use crate::control::protocol::Probe;

/// Connects, authenticates and probes (clock, load, version) the agent at
/// `control`, then says goodbye: what `cluster up` and `status` check.
pub fn probe_agent(control: SocketAddr, token: &str) -> Result<Probe, ControllerError> {
    let mut conn = connect(control, token)?;
    let probe = conn.probe();
    conn.bye();
    probe
}

/// What a probe says of the agent's clock, as the start instant needs it.
pub fn clock_of(p: &Probe) -> clock::ClockSync {
    clock::ClockSync {
        offset_ns: p.offset_ns,
        uncertainty_ns: p.uncertainty_ns,
        rtt_ns: p.rtt_ns,
        probes: if p.same_kernel { 1 } else { CLOCK_PROBES },
    }
}

/// The server's clock against its client's, from each one's against the
/// controller's (None: the controller itself, offset 0 exactly): the
/// difference of the offsets, within the sum of their uncertainties.
pub fn peer_clock(
    server: &clock::ClockSync,
    client: Option<&clock::ClockSync>,
) -> crate::model::sample::PeerClock {
    let (c_off, c_unc) = client.map_or((0, 0), |c| (c.offset_ns, c.uncertainty_ns));
    crate::model::sample::PeerClock {
        offset_ns: server.offset_ns - c_off,
        uncertainty_ns: server.uncertainty_ns + c_unc,
    }
}

/// Probes per clock estimate: the fastest of 16 round trips on an idle
/// control connection is within a few microseconds of the true minimum.
pub const CLOCK_PROBES: usize = 16;

impl AgentConn {
    /// Estimates the agent's clock offset (the fastest of
    /// [`CLOCK_PROBES`] round trips) and reads its load and version.
    /// An agent on this kernel says so in its first answer: its offset is
    /// then exact (the time namespaces' difference) and one round trip is
    /// enough. Between tests only.
    pub fn probe(&mut self) -> Result<Probe, ControllerError> {
        let mut samples = Vec::with_capacity(CLOCK_PROBES);
        let mut last = None;
        let mut exact = None;
        for _ in 0..CLOCK_PROBES {
            if exact.is_some() {
                break;
            }
            let sent_ns = clock::mono_ns();
            self.send(&Msg::Probe { sent_ns })?;
            match self.expect("answering a clock probe", Duration::from_secs(5))? {
                Msg::ProbeReply {
                    sent_ns: echoed,
                    agent_ns,
                    software,
                    load,
                    tests_running,
                    uptime_s,
                    clock: base,
                } if echoed == sent_ns => {
                    exact = clock::local_base()
                        .zip(base)
                        .and_then(|(here, there)| here.offset_to(&there));
                    samples.push(clock::Probe {
                        sent_ns,
                        agent_ns,
                        back_ns: clock::mono_ns(),
                    });
                    last = Some((software, load, tests_running, uptime_s));
                }
                other => return Err(self.unexpected("a probe reply", &other)),
            }
        }
        let sync = clock::estimate(&samples).ok_or(ControllerError::NoProbeBack)?;
        let (software, load, tests_running, uptime_s) = last.expect("probes were answered");
        Ok(Probe {
            software,
            offset_ns: exact.unwrap_or(sync.offset_ns),
            uncertainty_ns: if exact.is_some() {
                0
            } else {
                sync.uncertainty_ns
            },
            rtt_ns: sync.rtt_ns,
            load,
            tests_running,
            uptime_s,
            same_kernel: exact.is_some(),
        })
    }

    pub(super) fn send(&mut self, m: &Msg) -> Result<(), ControllerError> {
        self.writer.send(m).map_err(|source| ControllerError::Gone {
            addr: self.addr,
            source,
        })
    }

    /// `m` came where `expected` was due.
    fn unexpected(&self, expected: &'static str, m: &Msg) -> ControllerError {
        ControllerError::Unexpected {
            from: Peer::Agent(self.addr),
            expected,
            got: m.name(),
        }
    }

    /// The next message without waiting: Ok(None) when there is none yet,
    /// Err when the connection is gone.
    pub(super) fn poll(&self) -> Result<Option<Msg>, ()> {
        match self.rx.try_recv() {
            Ok(Some(m)) => Ok(Some(m)),
            Err(TryRecvError::Empty) => Ok(None),
            Ok(None) | Err(TryRecvError::Disconnected) => Err(()),
        }
    }

    pub(super) fn expect(
        &mut self,
        what: &'static str,
        timeout: Duration,
    ) -> Result<Msg, ControllerError> {
        let addr = self.addr;
        match self.rx.recv_timeout(timeout) {
            Ok(Some(Msg::Error { code, message })) => {
                if code == ErrorCode::ChannelBroken {
                    self.tell_broken(&message);
                }
                if code == ErrorCode::Busy {
                    return Err(ControllerError::refusal(addr, code, message));
                }
                Err(ControllerError::Agent { addr, message })
            }
            Ok(Some(m)) => Ok(m),
            Ok(None) | Err(RecvTimeoutError::Disconnected) => {
                Err(ControllerError::Closed { addr, what })
            }
            Err(RecvTimeoutError::Timeout) => Err(ControllerError::Timeout {
                addr,
                what,
                secs: timeout.as_secs_f64(),
            }),
        }
    }

    /// Runs one iteration of `spec`. Errors before the timeline starts are
    /// returned as Err; errors after it keep what was measured.
    /// With `together` (a group of a mixed test) the window opens when
    /// every group's flows are open (plus the group's offset), and closes
    /// when any group's ends.
    pub fn run_iteration(
        &mut self,
        spec: &TestSpec,
        live: &mut dyn Live,
        together: Option<Meet>,
    ) -> Result<IterationRun, ControllerError> {
        let r = self
            .iteration(spec, live, together)
            .map_err(|e| self.reason_for(e));
        if let Some(t) = together.map(|m| m.together) {
            match &r {
                Err(e) => t.fail(e),
                Ok(run) if run.error.is_some() => t.stop(),
                Ok(_) => {}
            }
        }
        r
    }

    /// Another control connection to the same agent (a mixed test runs
    /// one group per connection: the agent runs one test per session).
    pub fn again(&self) -> Result<AgentConn, ControllerError> {
        let mut c = connect(self.addr, &self.token)?;
        c.data = self.data.clone();
        Ok(c)
    }

    /// A setup step failed (say, connecting the flows): if the channel
    /// broke or the agent ended the test, that is the cause, and it
    /// arrives a moment later on the control connection.
    fn reason_for(&mut self, e: ControllerError) -> ControllerError {
        let until = Instant::now() + Duration::from_millis(300);
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            match self.rx.recv_timeout(left) {
                Ok(Some(Msg::Error {
                    code: code @ (ErrorCode::ChannelBroken | ErrorCode::Tampered),
                    message,
                })) => {
                    if code == ErrorCode::ChannelBroken {
                        self.tell_broken(&message);
                    }
                    return ControllerError::Agent {
                        addr: self.addr,
                        message,
                    };
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
        e
    }

    /// The test set up on the agent and its flows opened: the client
    /// side ready to start, and memcache's prefill.
    fn prepare(
        &mut self,
        spec: &TestSpec,
        clock: Option<&Probe>,
    ) -> Result<(SideSetup, Option<crate::model::sample::KvPrefill>), ControllerError> {
        // --ports N: the agent listens on N of its data addresses (none:
        // on its control address, which is the one this side knows).
        let ports = spec.ports.map_or(1, |n| n as usize);
        let listen = match ports {
            1 => Vec::new(),
            n if self.data.len() >= n => self.data[..n].to_vec(),
            n => return Err(ControllerError::OnePort(n as u32, self.data.len().max(1))),
        };
        self.send(&Msg::Setup {
            spec: Box::new(spec.clone()),
            listen: listen.clone(),
            expect: vec![],
        })?;
        let (port, data, cookie, tls_cert, tls_label) =
            match self.expect("setting up the test", Duration::from_secs(30))? {
                Msg::Ready {
                    data_port,
                    data,
                    cookie,
                    host,
                    tls_cert,
                    tls_cert_label,
                } => {
                    self.host = Some(*host);
                    (data_port, data, cookie, tls_cert, tls_cert_label)
                }
                other => return Err(self.unexpected("ready", &other)),
            };
        let workload = crate::workload::of(spec)?;
        let pattern = workload.pattern();
        let routes = Routes::new(spec, pattern)?;
        let ip = self.addr.ip();
        let addrs = match listen.is_empty() {
            true => vec![SocketAddr::new(ip, port)],
            false => data,
        };
        if addrs.is_empty() {
            return Err(ControllerError::OnePort(ports as u32, 0));
        }
        let group = Group {
            cookie,
            // Flow i to address i mod N, as a fleet places them.
            targets: (0..spec.flows)
                .map(|i| {
                    let a = addrs[i as usize % addrs.len()];
                    (i, routes.to(&[a], a.ip()))
                })
                .collect(),
            tls_cert,
            tls_cert_label: tls_label,
            prefill: routes.prefill(true, true),
            // This process is the client: the agent's offset is the pair's.
            clock: clock.map(|p| peer_clock(&clock_of(p), None)),
        };
        let Connected { conns, prefill } =
            conns::connect(spec, pattern, group).map_err(|e| ControllerError::Flows {
                addr: self.addr,
                source: Box::new(e),
            })?;
        if pattern.waits_for_flows() {
            let wait = conns::setup_timeout(spec.flows as usize) + Duration::from_secs(5);
            match self.expect(pattern.arrival(), wait)? {
                Msg::FlowsReady { .. } => {}
                other => return Err(self.unexpected("flows_ready", &other)),
            }
        }
        // --target: memcached's own counts, read from this side.
        let watch = routes.watch();
        let setup = SideSetup {
            agent: false,
            keep_samples: true,
            spec: spec.clone(),
            flows: workload.client_flows(spec, conns)?,
            t0: None,
            service: watch,
            kernel_udp: workload.pattern().kernel_udp(),
        };
        Ok((setup, prefill))
    }

    /// Starts this side and the agent: now, or (a group of a mixed test)
    /// at the instant every group agrees on plus the group's offset, in
    /// the agent's clock. Ok(Err) when a group with an offset was stopped
    /// before its start.
    fn start(
        &mut self,
        mut setup: SideSetup,
        together: Option<Meet>,
        clock: Option<&Probe>,
    ) -> Result<Result<Side, NotStarted>, ControllerError> {
        // (the start in the agent's clock, and in ours)
        let start = match (together, clock) {
            (Some(m), Some(p)) => {
                let margin = Duration::from_millis(50).max(Duration::from_nanos(p.rtt_ns * 4));
                let start = match m.together.arrive(margin) {
                    Ok(s) => s,
                    Err(e) => {
                        // The agent drops a test stopped before its start.
                        let _ = self.send(&Msg::Stop);
                        return Err(e);
                    }
                };
                let start = start + m.lane.offset.as_nanos() as u64;
                if !m.lane.offset.is_zero() {
                    let tell = start.saturating_sub(margin.as_nanos() as u64);
                    if let Err(why) = together::wait_for_lane(tell, m.together) {
                        let _ = self.send(&Msg::Stop);
                        return Ok(Err(why));
                    }
                }
                let sync = clock_of(p);
                Some((sync.to_agent(start), start))
            }
            _ => None,
        };
        if let Some((at, local)) = start {
            self.send(&Msg::Start { at_ns: Some(at) })?;
            setup.t0 = Some(together::sleep_until(local));
        }
        let side = Side::start(setup)?;
        if start.is_none() {
            self.send(&Msg::Start { at_ns: None })?;
        }
        Ok(Ok(side))
    }

    /// Why an iteration is partial or failed, from what the window saw
    /// (None: it ran to its end).
    fn verdict(
        &self,
        spec: &TestSpec,
        obs: &mut ControllerObserver,
        client: &SideReport,
    ) -> Option<String> {
        let said_why = if obs.dead {
            obs.agent_error.take()
        } else {
            None
        };
        if let Some(e) = said_why {
            // The connection ended with a reason (a broken seal on either
            // side, a failure the agent named): that, not "died".
            Some(format!("agent at {}: {e}; results are partial", self.addr))
        } else if signals::test_interrupted() && !obs.dead {
            Some(INTERRUPTED.into())
        } else if obs.dead {
            Some(format!(
                "agent at {} died mid-test (control connection lost after {} of the agent's intervals): results are partial",
                self.addr,
                obs.agent.samples.len()
            ))
        } else if let Some(e) = obs.agent_error.take() {
            Some(format!("agent at {}: {e}", self.addr))
        } else if !obs.window_done {
            Some(format!(
                "agent at {} did not finish its window in time: results are partial",
                self.addr
            ))
        } else if let Some(e) = kv_failure(spec, client) {
            Some(e)
        } else if !client.complete && spec.is_finite() {
            Some(format!(
                "transfer did not complete within {:.0} s (--duration is the time limit with --bytes)",
                spec.duration_s
            ))
        } else {
            None
        }
    }

    fn iteration(
        &mut self,
        spec: &TestSpec,
        live: &mut dyn Live,
        together: Option<Meet>,
    ) -> Result<IterationRun, ControllerError> {
        crate::engine::limits::ensure_fds(spec.flows, spec.workers, "the client")?;
        // A group of a mixed test starts at an instant in the agent's
        // clock, and one-way delays need its offset: it is probed while
        // the connection is idle, before each iteration (clocks of two
        // hosts drift apart).
        let one_way = crate::workload::figures(spec).one_way;
        let clock = match together.is_some() || one_way {
            true => Some(self.probe()?),
            false => None,
        };
        let (setup, prefill) = self.prepare(spec, clock.as_ref().filter(|_| one_way))?;
        let mut side = match self.start(setup, together, clock.as_ref())? {
            Ok(side) => side,
            Err(why) => return Ok(IterationRun::not_started(&why)),
        };
        let mut agent = AgentSide::default();
        let mut obs = ControllerObserver {
            rx: &self.rx,
            agent: &mut agent,
            client: BTreeMap::new(),
            next_live: 0,
            window_done: false,
            dead: false,
            agent_error: None,
            broken: None,
            live,
            deadline: spec
                .is_finite()
                .then(|| Instant::now() + Duration::from_secs_f64(spec.duration_s)),
            together: together.map(|m| m.together),
            phases: PhaseHists::new(together.map_or(&[][..], |m| &m.lane.phases)),
            figures: crate::workload::figures(spec),
            auto: super::auto::AutoWatch::new(spec),
        };
        side.collect(&mut obs);
        let settled = obs.auto.as_ref().is_some_and(|w| w.settled());
        // Finite tests end when the client is done: tell the agent now.
        let mut stop_sent = false;
        // Likewise a test a Ctrl-C ended: the client's workers have stopped
        // (they see no close), and the agent's stop before they would
        // close their end mid-window on it.
        if (spec.is_finite() || signals::test_interrupted() || settled) && !obs.dead {
            stop_sent = self.writer.send(&Msg::Stop).is_ok();
        }
        let deadline = Instant::now() + Duration::from_secs_f64(10.0 + spec.interval_s * 2.0);
        while !obs.window_done
            && !obs.dead
            && obs.agent_error.is_none()
            && !signals::test_interrupted()
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(5));
            obs.pump();
        }
        // The agent's final report (its flows, placement), once told to stop.
        let await_final = |obs: &mut ControllerObserver| {
            let deadline = Instant::now() + Duration::from_secs(15);
            while obs.agent.flows.is_empty()
                && obs.agent.placement.is_empty()
                && !obs.dead
                && Instant::now() < deadline
            {
                match self.rx.recv_timeout(Duration::from_millis(50)) {
                    Ok(Some(m)) => obs.take(m),
                    Ok(None) | Err(RecvTimeoutError::Disconnected) => obs.dead = true,
                    Err(RecvTimeoutError::Timeout) => {}
                }
            }
        };
        let client = if signals::test_interrupted() {
            // Mid-window: the agent's flows stop before the client's
            // sockets close, else they would see the close (a reset) as an
            // error of their window.
            await_final(&mut obs);
            side.finish(&mut obs)
        } else {
            // The client's flows stop (and report) before the agent is told
            // to close its end: else a flow could see the agent's close
            // first and end its last exchange mid-way, which its report
            // would show.
            let client = side.finish(&mut obs);
            if !stop_sent && !obs.dead {
                let _ = self.writer.send(&Msg::Stop);
            }
            await_final(&mut obs);
            client
        };
        obs.flush_live(true);
        if let Some(reason) = obs.broken.take() {
            tell_broken(&mut self.writer, &reason);
        }
        let error = self.verdict(spec, &mut obs, &client);
        let phase_hists = std::mem::take(&mut obs.phases.hists);
        let watch = obs.auto.take();
        let mut client = client;
        let auto = watch.map(|w| w.finish(&mut client, &mut agent.samples, &mut agent.window_cpu));
        Ok(IterationRun {
            client,
            agent,
            error,
            hosts: Vec::new(),
            start_skew_us: None,
            prefill,
            phase_hists,
            auto,
        })
    }

    /// This side's reader found the channel broken: the agent hears why
    /// (what this side sends is still sealed), then the connection is
    /// useless.
    fn tell_broken(&mut self, reason: &str) {
        tell_broken(&mut self.writer, reason);
    }

    pub fn bye(mut self) {
        if let Some(t) = self.twin.take() {
            t.bye();
        }
        let _ = self.writer.send(&Msg::Bye);
    }

    /// The connection that runs `spec`: this agent, or (a TLS test that
    /// wants the other crypto-hardware setting) its companion, connected
    /// on first use.
    pub fn for_spec(&mut self, spec: &TestSpec) -> Result<&mut AgentConn, ControllerError> {
        if spec.tls.is_none() || spec.crypto_hw == self.crypto_hw {
            return Ok(self);
        }
        if self.twin.is_none() {
            let Some(port) = self.twin_port else {
                return Err(ControllerError::NoCompanion {
                    addr: self.addr,
                    hw: self.crypto_hw,
                    want: spec.crypto_hw,
                });
            };
            let addr = SocketAddr::new(self.addr.ip(), port);
            let mut twin =
                connect(addr, &self.token).map_err(|e| ControllerError::Companion(Box::new(e)))?;
            twin.data = self.data.clone();
            if twin.crypto_hw != spec.crypto_hw {
                return Err(ControllerError::CompanionSame {
                    addr: self.addr,
                    companion: addr,
                });
            }
            self.twin = Some(Box::new(twin));
        }
        Ok(self.twin.as_mut().expect("connected above"))
    }
}

/// What the client's flow errors mean for the test, as its workload says
/// (memcache: connections that failed mid-test are the server's failure,
/// and the result is partial, with the cause).
pub fn kv_failure(spec: &TestSpec, client: &SideReport) -> Option<String> {
    if client.errors.is_empty() {
        return None;
    }
    crate::workload::get(spec.workload)?.mid_test_failure(spec, &client.errors)
}
