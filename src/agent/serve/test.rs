//! One test on the agent, from its `Setup` to its `Final`: what it
//! refuses, the host changes it makes (sysctls, NIC settings) and puts
//! back, its connections, its window, and the report.

use super::*;

/// Releases the concurrent-test slot when a test ends, however it ends.
pub(super) struct Slot<'a>(&'a AtomicUsize);
impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Releases the fixed data port (`serve --data-port`) when a server test
/// ends, however it ends.
pub(super) struct PortHold<'a>(&'a AtomicBool);
impl Drop for PortHold<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// The fixed data port for a server test, or why another test has it.
fn hold_data_port(sh: &Shared) -> Result<Option<PortHold<'_>>, String> {
    let port = sh.cfg.data_port;
    if port == 0 {
        return Ok(None);
    }
    sh.data_port_held
        .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
        .map(|_| Some(PortHold(&sh.data_port_held)))
        .map_err(|_| {
            format!("another test holds data port {port} (serve --data-port: one server test at a time)")
        })
}

/// How a test that did not run to its end ended.
pub(super) enum TestEnd {
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
pub(super) enum Role {
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
pub(super) fn refusal(spec: &TestSpec, role: &Role, sh: &Shared) -> Option<(ErrorCode, String)> {
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
    too_long(spec, sh).map(|why| (ErrorCode::BadRequest, why))
}

/// Why `spec` runs longer than this agent allows (`--max-duration`), if it
/// does.
pub(super) fn too_long(spec: &TestSpec, sh: &Shared) -> Option<String> {
    (spec.duration_s + spec.warmup_s > sh.cfg.max_duration_s).then(|| {
        format!(
            "{} s asked ({} s + {} s warm-up), this agent allows {} s \
             (--max-duration); ask for less or start the agent with a larger --max-duration",
            spec.duration_s + spec.warmup_s,
            spec.duration_s,
            spec.warmup_s,
            sh.cfg.max_duration_s
        )
    })
}

/// A slot of the agent's `--max-tests`, held until dropped; Err: why
/// there is none.
pub(super) fn take_slot(sh: &Shared) -> Result<Slot<'_>, String> {
    let running = sh.active.fetch_add(1, Ordering::SeqCst);
    let slot = Slot(&sh.active);
    if running >= sh.cfg.max_tests {
        return Err(format!(
            "{running} {} running, its cap is {} (--max-tests)",
            if running == 1 { "test" } else { "tests" },
            sh.cfg.max_tests
        ));
    }
    Ok(slot)
}

/// The controller's start: when (None: now), or Ok(None) when it stopped
/// the test before its start (a mixed test whose other group failed).
pub(super) fn await_start(
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

/// How long a halted agent waits for the controller's `Close` (every end
/// halted) before it closes its sockets anyway: the controller sends it
/// once each member has said `Halted` or failed, so only a lost controller
/// makes this wait whole.
const CLOSE_WAIT: Duration = Duration::from_secs(20);

pub(super) fn run_test(
    spec: TestSpec,
    role: Role,
    stream: &mut Wire,
    rx: &Receiver<Option<Msg>>,
    gone: &Arc<AtomicBool>,
    sh: &Shared,
) -> Result<(), TestEnd> {
    let workload = match crate::control::check(&spec).and_then(|_| Ok(crate::workload::of(&spec)?))
    {
        Ok(w) => w,
        Err(e) => return refuse(stream, ErrorCode::BadRequest, e.to_string()),
    };
    if let Some((code, why)) = refusal(&spec, &role, sh) {
        return refuse(stream, code, why);
    }
    let client = matches!(role, Role::Client { .. });
    let _slot = match take_slot(sh) {
        Ok(s) => s,
        Err(why) => return refuse(stream, ErrorCode::Busy, why),
    };
    // Put back when this function returns, however it returns.
    let host = change_host(&spec, &role, stream, sh)?;
    // A service (memcached) this agent starts and watches (stopped when
    // this function returns, however it returns).
    let mut service: Option<Service> = None;
    let pattern = workload.pattern();
    // Held until this function returns: a crr's listeners live as long.
    let _port = match (&role, hold_data_port(sh)) {
        (Role::Client { .. }, _) => None,
        (_, Ok(p)) => p,
        (_, Err(why)) => return refuse(stream, ErrorCode::Busy, why),
    };
    let conns = match role {
        Role::Server { listen, expect } => {
            let (c, svc) = server_conns(
                &spec,
                pattern,
                (listen, sh.cfg.data_port),
                expect,
                stream,
                gone,
                &host.nic_record,
            )?;
            service = svc;
            vec![c]
        }
        Role::Client { groups } => client_conns(&spec, pattern, groups, stream, &host.nic_record)?,
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
        close: false,
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
    obs.await_until(|o| o.stop, limit);
    final_report(side, &mut obs, client, complete)
}

/// A refusal: the controller is sent `msg` with `code`, and the test ends
/// told.
fn refuse<T>(stream: &mut Wire, code: ErrorCode, msg: String) -> Result<T, TestEnd> {
    let _ = send_error(stream, code, &msg);
    Err(TestEnd::Told(msg))
}

/// The host changes a test makes on this end, held for as long as it runs:
/// dropping them puts the host back (NIC settings first, then sysctls, the
/// reverse of their making).
struct HostChanges {
    _nic: Option<crate::hostops::nic::Applied>,
    _sysctls: Option<crate::hostops::sysctl::Applied>,
    /// The NIC settings as applied, for the host record sent with `Ready`
    /// or `Connected`.
    nic_record: Vec<crate::model::nic::NicInterface>,
}

/// Makes the test's host changes (sysctls, then NIC settings), or refuses
/// the test when this agent may not make them or they fail.
fn change_host(
    spec: &TestSpec,
    role: &Role,
    stream: &mut Wire,
    sh: &Shared,
) -> Result<HostChanges, TestEnd> {
    // The test's sysctls on this host, journaled and put back when the
    // test ends (or, if the agent dies, at its next start).
    let sysctls = if spec.sysctl.is_empty() {
        None
    } else if !sh.cfg.allow_sysctl {
        return refuse(
            stream,
            ErrorCode::BadRequest,
            "this agent does not change sysctls: start one with `sudo linerate serve --allow-sysctl` and give it with --agent".into(),
        );
    } else {
        let mut want = spec.sysctl.clone();
        if sh.cfg.in_lab {
            want.retain(|k, _| crate::hostops::sysctl::in_this_namespace(k));
        }
        match crate::hostops::sysctl::apply(&want).map_err(|e| e.to_string()) {
            Ok(a) => Some(a),
            Err(e) => return refuse(stream, ErrorCode::SetupFailed, e),
        }
    };
    // The test's NIC settings on this end's data interfaces, journaled
    // and put back when the test ends (or at the next start).
    let (nic, nic_record) = if spec.nic.is_empty() {
        (None, Vec::new())
    } else if !sh.cfg.allow_nic {
        return refuse(
            stream,
            ErrorCode::BadRequest,
            "this agent does not change NIC settings (nic.*): start one with `sudo linerate serve --allow-nic` and give it with --agent".into(),
        );
    } else {
        match apply_nic(spec, role, stream) {
            Ok((a, r)) => (Some(a), r),
            Err(e) => return refuse(stream, ErrorCode::SetupFailed, e.to_string()),
        }
    };
    Ok(HostChanges {
        _nic: nic,
        _sysctls: sysctls,
        nic_record,
    })
}

/// The window is over: this side's flows stopped and closed, and its final
/// report (flows, placement, errors, latency, waits) sent.
fn final_report(
    mut side: Side,
    obs: &mut AgentObserver,
    client: bool,
    complete: bool,
) -> Result<(), TestEnd> {
    if obs.stop && !obs.gone {
        // Stopped, not yet closed: a close from here before every end has
        // stopped would reach a peer flow still in an exchange and count as
        // an error of its window. Halt, say so, and close on `Close`.
        side.halt(obs);
        let _ = obs.stream.send(&Msg::Halted);
        obs.await_until(|o| o.close, Instant::now() + CLOSE_WAIT);
    }
    let report = side.finish(obs);
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
    obs.stream
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
pub(super) fn apply_nic(
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
pub(super) fn server_conns(
    spec: &TestSpec,
    pattern: Pattern,
    (listen, port): (Vec<IpAddr>, u16),
    expect: Vec<u32>,
    stream: &mut Wire,
    gone: &Arc<AtomicBool>,
    nic: &[crate::model::nic::NicInterface],
) -> Result<(Conns, Option<Service>), TestEnd> {
    let addrs = if listen.is_empty() {
        vec![stream
            .stream
            .local_addr()
            .map_err(AgentError::LocalAddr)?
            .ip()]
    } else {
        listen
    };
    let server = match conns::listen(spec, pattern, &addrs, port, random_u64()) {
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
pub(super) fn client_conns(
    spec: &TestSpec,
    pattern: Pattern,
    groups: Vec<TargetGroup>,
    stream: &mut Wire,
    nic: &[crate::model::nic::NicInterface],
) -> Result<Vec<Conns>, TestEnd> {
    let mut all = Vec::new();
    let mut prefill = None;
    for g in groups {
        let c = conns::connect(spec, pattern, g.into())?;
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
pub(super) fn host_with(nic: &[crate::model::nic::NicInterface]) -> crate::model::host::HostInfo {
    let mut h = env::collect();
    h.nic = nic.to_vec();
    h
}

pub(super) struct AgentObserver<'a> {
    pub(super) stream: &'a mut Wire,
    pub(super) rx: &'a Receiver<Option<Msg>>,
    pub(super) stop: bool,
    /// Every end has halted: close (after `stop`).
    pub(super) close: bool,
    pub(super) gone: bool,
    pub(super) limit: Instant,
    /// A client side: each interval's histograms, sent with it.
    pub(super) hists: Option<BTreeMap<usize, HistText>>,
    /// memcache: the server this agent started, watched while it runs.
    pub(super) service: Option<&'a mut Service>,
    pub(super) service_died: Option<String>,
    /// Why the controller ended the test, when it said (a broken seal).
    pub(super) told: Option<String>,
}

impl AgentObserver<'_> {
    /// Takes the controller's messages until `done` holds, the controller
    /// is gone, or `until`.
    fn await_until(&mut self, done: fn(&Self) -> bool, until: Instant) {
        while !done(self) && !self.gone && Instant::now() < until {
            match self.rx.recv_timeout(Duration::from_millis(50)) {
                Ok(m) => self.take(m),
                Err(RecvTimeoutError::Disconnected) => self.gone = true,
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    /// A message from the controller during the window.
    pub(super) fn take(&mut self, m: Option<Msg>) {
        match m {
            Some(Msg::Stop) => self.stop = true,
            Some(Msg::Close) => self.close = true,
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
