//! Many hosts in one test: agents as clients (load generators) and agents
//! as servers, driven by one controller on one common window.
//!
//! An iteration: probe every agent's clock (the fastest of 16 round trips),
//! set up the servers (listeners on their data addresses), hand each client
//! its flows (round robin over clients and over server addresses), wait
//! until every flow is open, then schedule one start instant in every
//! agent's own clock. Each host measures its intervals on the same edges;
//! the controller sums them interval by interval over the overlap of every
//! host's window, merges the clients' latency histograms, and keeps each
//! host's own figures beside the aggregate. A host that dies stops the
//! others; what was measured is kept and the result names the host.

use crate::workload::Pattern;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

mod report;

use super::auto::AutoWatch;
use super::conn::{self, AgentConn, AgentSide, IterationRun, Live};
use super::error::{ControllerError, Peer};
use super::together::{self, Meet, Together};
use crate::control::clock::{self, ClockSync};
use crate::control::protocol::{Msg, TargetGroup};
use crate::engine::side::SideReport;
use crate::measure::cpu;
use crate::measure::fold::{self, combine};
use crate::measure::histogram::{self, new_hist};
use crate::model::host::HostInfo;
use crate::model::result::{AddressRun, FlowPlace, HostClock, HostRun, Pair};
use crate::model::sample::{CpuWindow, IntervalSample, KvPrefill};
use crate::model::spec::TestSpec;
use crate::workload::conns::{self, Routes};
use report::Report;

/// An agent to use, as the hosts file or a lab names it.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub name: String,
    pub control: SocketAddr,
    pub token: String,
    /// Server: the data addresses (ports) to listen on, in order.
    pub data: Vec<IpAddr>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Client,
    Server,
}

impl Role {
    fn word(self) -> &'static str {
        match self {
            Role::Client => "client",
            Role::Server => "server",
        }
    }
}

struct Member {
    name: String,
    role: Role,
    conn: AgentConn,
    data: Vec<IpAddr>,
    info: HostInfo,
}

impl Member {
    fn label(&self) -> String {
        self.peer().to_string()
    }

    /// This member, as its errors name it.
    fn peer(&self) -> Peer {
        Peer::Host {
            name: self.name.clone(),
            addr: self.conn.addr,
        }
    }

    /// `e`, naming this member.
    fn failed(&self, e: ControllerError) -> ControllerError {
        e.on_host(&self.name, self.conn.addr)
    }

    /// `m` came from this member where `expected` was due.
    fn unexpected(&self, expected: &'static str, m: &Msg) -> ControllerError {
        ControllerError::Unexpected {
            from: self.peer(),
            expected,
            got: m.name(),
        }
    }
}

/// The agents of a many-host test, connected and authenticated.
pub struct Fleet {
    members: Vec<Member>,
    /// As connected: a mixed test connects the same fleet once per group.
    clients: Vec<Endpoint>,
    servers: Vec<Endpoint>,
}

/// One flow's place: its client, its server and the server address.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Place {
    flow: u32,
    client: usize,
    server: usize,
    addr: IpAddr,
}

/// Flow i goes to client i mod C and to server address i mod A (the server
/// addresses of every server, in order): `--flows` is the total.
fn plan(flows: u32, clients: usize, addrs: &[(usize, IpAddr)]) -> Vec<Place> {
    (0..flows)
        .map(|i| {
            let (server, addr) = addrs[i as usize % addrs.len()];
            Place {
                flow: i,
                client: i as usize % clients,
                server,
                addr,
            }
        })
        .collect()
}

/// The data addresses of a server that a test of `spec` uses: the first
/// `spec.ports` (all without it).
fn used<'a>(data: &'a [IpAddr], spec: &TestSpec) -> &'a [IpAddr] {
    let n = spec
        .ports
        .map_or(data.len(), |n| (n as usize).min(data.len()));
    &data[..n]
}

/// A server agent's answer to setup: its data listeners, its test cookie,
/// and with TLS its certificate and that certificate's label.
type Listening = (Vec<SocketAddr>, u64, Option<Vec<u8>>, Option<String>);

impl Fleet {
    /// Connects to every client and server agent; the first that cannot be
    /// reached or authenticated ends it, named, before any traffic.
    pub fn connect(clients: &[Endpoint], servers: &[Endpoint]) -> Result<Fleet, ControllerError> {
        if clients.is_empty() || servers.is_empty() {
            return Err(ControllerError::NoHosts);
        }
        let mut members = Vec::new();
        for (role, list) in [(Role::Server, servers), (Role::Client, clients)] {
            for e in list {
                let conn =
                    conn::connect(e.control, &e.token).map_err(|err| ControllerError::Host {
                        name: e.name.clone(),
                        source: Box::new(err),
                    })?;
                members.push(Member {
                    name: e.name.clone(),
                    role,
                    conn,
                    data: e.data.clone(),
                    info: HostInfo::default(),
                });
            }
        }
        Ok(Fleet {
            members,
            clients: clients.to_vec(),
            servers: servers.to_vec(),
        })
    }

    /// The same agents over new control connections (each group of a mixed
    /// test runs as a test of its own on every agent).
    pub fn again(&self) -> Result<Fleet, ControllerError> {
        Fleet::connect(&self.clients, &self.servers)
    }

    fn indices(&self, role: Role) -> Vec<usize> {
        (0..self.members.len())
            .filter(|&i| self.members[i].role == role)
            .collect()
    }

    /// Every server data address a test of `spec` uses, in order: (member
    /// index, address); the first `spec.ports` of each server's.
    fn server_addrs(&self, spec: &TestSpec) -> Vec<(usize, IpAddr)> {
        self.indices(Role::Server)
            .into_iter()
            .flat_map(|i| {
                used(&self.members[i].data, spec)
                    .iter()
                    .map(move |a| (i, *a))
            })
            .collect()
    }

    fn plan(&self, spec: &TestSpec) -> Vec<Place> {
        let clients = self.indices(Role::Client);
        plan(spec.flows, clients.len(), &self.server_addrs(spec))
            .into_iter()
            .map(|p| Place {
                client: clients[p.client],
                ..p
            })
            .collect()
    }

    /// Which client, server and address each flow of `spec` uses.
    pub fn flow_map(&self, spec: &TestSpec) -> Vec<FlowPlace> {
        let Ok(active) = self.active(spec) else {
            return Vec::new();
        };
        let clients: Vec<usize> = self
            .indices(Role::Client)
            .into_iter()
            .filter(|&i| active[i])
            .collect();
        let addrs: Vec<(usize, IpAddr)> = self
            .server_addrs(spec)
            .into_iter()
            .filter(|(i, _)| active[*i])
            .collect();
        if clients.is_empty() || addrs.is_empty() {
            return Vec::new();
        }
        plan(spec.flows, clients.len(), &addrs)
            .into_iter()
            .map(|p| FlowPlace {
                flow: p.flow,
                client: self.members[clients[p.client]].name.clone(),
                server: self.members[p.server].name.clone(),
                address: p.addr.to_string(),
            })
            .collect()
    }

    /// The first client's and the first server's host descriptions.
    pub fn environment(&self) -> Pair<HostInfo> {
        let first = |r| {
            self.members
                .iter()
                .find(|m| m.role == r)
                .map(|m| m.info.clone())
                .unwrap_or_default()
        };
        Pair {
            client: first(Role::Client),
            agent: first(Role::Server),
        }
    }

    /// "d1, d2 -> sut" for the result's agent address.
    pub fn describe(&self) -> String {
        let names = |r| {
            self.members
                .iter()
                .filter(|m| m.role == r)
                .map(|m| m.name.clone())
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!("{} -> {}", names(Role::Client), names(Role::Server))
    }

    pub fn close(self) {
        for m in self.members {
            m.conn.bye();
        }
    }

    /// Stops every member that is still there (best effort).
    fn stop_all(&mut self, reports: &[Report]) {
        for (m, r) in self.members.iter_mut().zip(reports) {
            if r.failure.is_none() {
                let _ = m.conn.send(&Msg::Stop);
            }
        }
    }

    /// Which members a test of `spec` uses: the first `spec.clients`
    /// clients (all without it), and of those and of the servers only the
    /// ones that get a flow (8 clients and 2 flows: d1 and d2 run them).
    fn active(&self, spec: &TestSpec) -> Result<Vec<bool>, ControllerError> {
        let clients = self.indices(Role::Client).len();
        let want = spec.clients.map_or(clients, |n| n as usize);
        if want == 0 || want > clients {
            return Err(ControllerError::Clients {
                want,
                have: clients,
            });
        }
        if let Some(n) = spec.ports {
            if let Some(m) = self
                .members
                .iter()
                .find(|m| m.role == Role::Server && m.data.len() < n as usize)
            {
                return Err(ControllerError::FewPorts {
                    ports: n,
                    server: m.name.clone(),
                    addrs: m.data.clone(),
                });
            }
        }
        let flows = spec.flows as usize;
        let mut client_rank = 0;
        let mut first_addr = 0;
        Ok(self
            .members
            .iter()
            .map(|m| match m.role {
                Role::Client => {
                    client_rank += 1;
                    client_rank <= want.min(flows)
                }
                Role::Server => {
                    let uses = first_addr < flows;
                    first_addr += used(&m.data, spec).len();
                    uses
                }
            })
            .collect())
    }

    /// Runs one iteration of `spec` on the members it uses (see `active`).
    /// Errors before the window opens are returned as Err (naming the
    /// host); after that, what was measured is kept and the error names
    /// the host.
    pub fn run_iteration(
        &mut self,
        spec: &TestSpec,
        live: &mut dyn Live,
        together: Option<Meet>,
    ) -> Result<IterationRun, ControllerError> {
        let active = self.active(spec)?;
        // Park the members this test leaves out; put everyone back after.
        let all: Vec<(usize, Member)> = std::mem::take(&mut self.members)
            .into_iter()
            .enumerate()
            .collect();
        let (used, parked): (Vec<_>, Vec<_>) = all.into_iter().partition(|(i, _)| active[*i]);
        let order: Vec<usize> = used.iter().map(|(i, _)| *i).collect();
        self.members = used.into_iter().map(|(_, m)| m).collect();
        let r = self.run_members(spec, live, together);
        if let Some(t) = together.map(|m| m.together) {
            match &r {
                Err(e) => t.fail(e),
                Ok(run) if run.error.is_some() => t.stop(),
                Ok(_) => {}
            }
        }
        let mut slots: Vec<Option<Member>> = (0..active.len()).map(|_| None).collect();
        for (i, m) in order.into_iter().zip(std::mem::take(&mut self.members)) {
            slots[i] = Some(m);
        }
        for (i, m) in parked {
            slots[i] = Some(m);
        }
        self.members = slots.into_iter().flatten().collect();
        r
    }

    /// Every server sets the test up (listeners on its data addresses,
    /// told which flows are its): what each answered.
    fn set_up_servers(
        &mut self,
        spec: &TestSpec,
        plan: &[Place],
    ) -> Result<BTreeMap<usize, Listening>, ControllerError> {
        let mut ready: BTreeMap<usize, Listening> = BTreeMap::new();
        for s in self.indices(Role::Server) {
            // The flows this server takes (its caps count them).
            let expect: Vec<u32> = plan
                .iter()
                .filter(|p| p.server == s)
                .map(|p| p.flow)
                .collect();
            let m = &mut self.members[s];
            m.conn
                .send(&Msg::Setup {
                    spec: Box::new(spec.clone()),
                    listen: used(&m.data, spec).to_vec(),
                    expect,
                })
                .map_err(|e| m.failed(e))?;
        }
        for s in self.indices(Role::Server) {
            let m = &mut self.members[s];
            match m
                .conn
                .expect("setting up the test", Duration::from_secs(30))
                .map_err(|e| m.failed(e))?
            {
                Msg::Ready {
                    data,
                    cookie,
                    host,
                    tls_cert,
                    tls_cert_label,
                    ..
                } => {
                    m.info = *host;
                    ready.insert(s, (data, cookie, tls_cert, tls_cert_label));
                }
                other => return Err(m.unexpected("ready", &other)),
            }
        }
        Ok(ready)
    }

    /// Every client opens its flows to the servers' listeners (round
    /// robin, `plan`); then the servers confirm they took them where the
    /// pattern waits for that. `clocks` are the members' offsets to this
    /// controller: a client learns each server's against its own where
    /// the workload measures one-way delays. Returns the memcache
    /// prefill, summed.
    fn set_up_clients(
        &mut self,
        spec: &TestSpec,
        plan: &[Place],
        pattern: Pattern,
        ready: &BTreeMap<usize, Listening>,
        clocks: &[ClockSync],
    ) -> Result<Option<KvPrefill>, ControllerError> {
        let one_way = crate::workload::figures(spec).one_way;
        let mut prefills: Option<KvPrefill> = None;
        let setup_wait = conns::setup_timeout(spec.flows as usize);
        let routes = Routes::new(spec, pattern)?;
        for c in self.indices(Role::Client) {
            let mut groups = Vec::new();
            for (&s, (data, cookie, cert, label)) in ready {
                let targets: Vec<(u32, SocketAddr)> = plan
                    .iter()
                    .filter(|p| p.client == c && p.server == s)
                    .map(|p| (p.flow, routes.to(data, p.addr)))
                    .collect();
                // The client of that server's lowest flow fills a service.
                let first = plan.iter().filter(|p| p.server == s).map(|p| p.flow).min();
                let prefill = routes.prefill(
                    targets.iter().any(|(f, _)| Some(*f) == first),
                    s == *ready.keys().next().unwrap_or(&s),
                );
                if !targets.is_empty() {
                    groups.push(TargetGroup {
                        cookie: *cookie,
                        targets,
                        tls_cert: cert.clone(),
                        tls_cert_label: label.clone(),
                        prefill,
                        clock: one_way.then(|| conn::peer_clock(&clocks[s], Some(&clocks[c]))),
                    });
                }
            }
            let m = &mut self.members[c];
            m.conn
                .send(&Msg::SetupClient {
                    spec: Box::new(spec.clone()),
                    groups,
                })
                .map_err(|e| m.failed(e))?;
        }
        for c in self.indices(Role::Client) {
            let m = &mut self.members[c];
            match m
                .conn
                .expect("opening its flows", setup_wait + Duration::from_secs(5))
                .map_err(|e| m.failed(e))?
            {
                Msg::Connected { host, prefill } => {
                    m.info = *host;
                    if let Some(p) = prefill {
                        let t = prefills.get_or_insert_with(KvPrefill::default);
                        t.keys += p.keys;
                        t.bytes += p.bytes;
                        t.errors += p.errors;
                        t.connections += p.connections;
                        t.seconds = t.seconds.max(p.seconds);
                    }
                }
                other => return Err(m.unexpected("connected", &other)),
            }
        }
        if pattern.waits_for_flows() {
            for s in self.indices(Role::Server) {
                let m = &mut self.members[s];
                match m
                    .conn
                    .expect(pattern.arrival(), setup_wait + Duration::from_secs(5))
                    .map_err(|e| m.failed(e))?
                {
                    Msg::FlowsReady { .. } => {}
                    other => return Err(m.unexpected("flows_ready", &other)),
                }
            }
        }
        Ok(prefills)
    }

    /// The window: every member's messages gathered until each is done
    /// (or one fails, Ctrl-C, another group of a mix ends, the deadline);
    /// stops them all once. Returns how far the live line went.
    fn gather(
        &mut self,
        spec: &TestSpec,
        reports: &mut [Report],
        margin: Duration,
        live: &mut dyn Live,
        together: Option<&Together>,
        auto: &mut Option<AutoWatch>,
    ) -> usize {
        // The window: gather every member's messages until each is done.
        let finite = spec.is_finite();
        let deadline = Instant::now()
            + margin
            + Duration::from_secs_f64(spec.warmup_s + spec.duration_s + 30.0);
        let mut next_live = 0usize;
        let mut stop_sent = false;
        loop {
            let mut idle = true;
            for (m, r) in self.members.iter().zip(reports.iter_mut()) {
                if r.failure.is_some() {
                    continue;
                }
                loop {
                    match m.conn.poll() {
                        Ok(Some(msg)) => {
                            idle = false;
                            r.take(msg);
                        }
                        Ok(None) => break,
                        Err(()) => {
                            r.failure = Some(format!(
                                "{}: agent died mid-test (control connection lost after {} intervals)",
                                m.label(),
                                r.samples.len()
                            ));
                            break;
                        }
                    }
                }
            }
            next_live = self.flush_live(spec, reports, next_live, live, auto);
            let failed = reports.iter().any(|r| r.failure.is_some());
            let settled = auto.as_ref().is_some_and(|w| w.settled());
            let clients_done = self
                .members
                .iter()
                .zip(reports.iter())
                .filter(|(m, _)| m.role == Role::Client)
                .all(|(_, r)| r.window_done);
            let servers_done = self
                .members
                .iter()
                .zip(reports.iter())
                .filter(|(m, _)| m.role == Role::Server)
                .all(|(_, r)| r.window_done);
            let interrupted =
                crate::engine::signals::test_interrupted() || together.is_some_and(|t| t.stopped());
            // A settled auto window ends early, every member at once (a
            // peer's close after its Stop is the end, not an error).
            if !stop_sent
                && (failed || interrupted || settled || (clients_done && (finite || servers_done)))
            {
                self.stop_all(reports);
                stop_sent = true;
            }
            if stop_sent && reports.iter().all(|r| r.finished || r.failure.is_some()) {
                break;
            }
            if Instant::now() >= deadline {
                if !stop_sent {
                    self.stop_all(reports);
                }
                // A last grace period for the final reports.
                let grace = Instant::now() + Duration::from_secs(15);
                while Instant::now() < grace
                    && !reports.iter().all(|r| r.finished || r.failure.is_some())
                {
                    for (m, r) in self.members.iter().zip(reports.iter_mut()) {
                        while let Ok(Some(msg)) = m.conn.poll() {
                            r.take(msg);
                        }
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                for (m, r) in self.members.iter().zip(reports.iter_mut()) {
                    if !r.finished && r.failure.is_none() {
                        r.failure =
                            Some(format!("{}: did not finish its window in time", m.label()));
                    }
                }
                break;
            }
            if idle {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        next_live
    }

    fn run_members(
        &mut self,
        spec: &TestSpec,
        live: &mut dyn Live,
        together: Option<Meet>,
    ) -> Result<IterationRun, ControllerError> {
        let n = self.members.len();
        let mut reports: Vec<Report> = (0..n).map(|_| Report::default()).collect();
        for (m, r) in self.members.iter_mut().zip(reports.iter_mut()) {
            let p = m.conn.probe().map_err(|e| m.failed(e))?;
            r.clock = conn::clock_of(&p);
        }
        let plan = self.plan(spec);
        let pattern = crate::workload::of(spec)?.pattern();
        // Servers first: their listeners must exist before clients connect.
        let ready = self.set_up_servers(spec, &plan)?;
        let clocks: Vec<ClockSync> = reports.iter().map(|r| r.clock).collect();
        let prefills = self.set_up_clients(spec, &plan, pattern, &ready, &clocks)?;
        // One start instant, in each agent's own clock: far enough ahead
        // that every Start arrives before it.
        let slowest = reports.iter().map(|r| r.clock.rtt_ns).max().unwrap_or(0);
        let margin = Duration::from_millis(50).max(Duration::from_nanos(slowest * 4));
        let start = match together {
            // A mixed test: one instant for every group's fleet, plus
            // this group's offset (its agents hear of it a margin before).
            Some(m) => match m.together.arrive(margin) {
                Ok(s) => {
                    let at = s + m.lane.offset.as_nanos() as u64;
                    if !m.lane.offset.is_zero() {
                        let tell = at.saturating_sub(margin.as_nanos() as u64);
                        if let Err(why) = together::wait_for_lane(tell, m.together) {
                            self.stop_all(&reports);
                            return Ok(IterationRun::not_started(&why));
                        }
                    }
                    at
                }
                Err(e) => {
                    self.stop_all(&reports);
                    return Err(e);
                }
            },
            None => clock::mono_ns() + margin.as_nanos() as u64,
        };
        for (m, r) in self.members.iter_mut().zip(&reports) {
            let at = r.clock.to_agent(start);
            m.conn
                .send(&Msg::Start { at_ns: Some(at) })
                .map_err(|e| m.failed(e))?;
        }

        let mut auto = AutoWatch::new(spec);
        let next_live = self.gather(
            spec,
            &mut reports,
            margin,
            live,
            together.map(|m| m.together),
            &mut auto,
        );
        self.flush_live(spec, &reports, next_live, live, &mut auto);
        let phases = together.map_or(&[][..], |m| &m.lane.phases);
        // `--duration auto`: the warm-up it found is left out of every
        // host's figures as out of the aggregate's.
        let warmup = auto.as_ref().map_or(0, |w| w.warmup());
        let mut run = self.fold(&plan, reports, phases, warmup);
        run.auto = auto.map(|w| {
            w.finish(
                &mut run.client,
                &mut run.agent.samples,
                &mut run.agent.window_cpu,
            )
        });
        run.prefill = prefills;
        if run.error.is_none() && crate::engine::signals::test_interrupted() {
            run.error = Some(conn::INTERRUPTED.into());
        }
        if run.error.is_none() {
            run.error = conn::kv_failure(spec, &run.client);
        }
        Ok(run)
    }

    /// Interval indices every member has reported.
    fn overlap(reports: &[Report]) -> Vec<usize> {
        let mut sets = reports
            .iter()
            .map(|r| r.samples.keys().copied().collect::<BTreeSet<usize>>());
        let Some(first) = sets.next() else {
            return Vec::new();
        };
        sets.fold(first, |a, b| a.intersection(&b).copied().collect())
            .into_iter()
            .collect()
    }

    /// The sum over `role`'s members of interval `k`.
    fn merged_interval(&self, reports: &[Report], role: Role, k: usize) -> IntervalSample {
        let parts: Vec<_> = self
            .members
            .iter()
            .zip(reports)
            .filter(|(m, _)| m.role == role)
            .filter_map(|(_, r)| r.samples.get(&k))
            .map(|(s, l, c)| (s, l.as_ref(), c.as_ref()))
            .collect();
        fold::merge_samples(k, &parts)
    }

    /// Shows every interval all members have reported, once.
    /// With `--duration auto`, the watch reads each as it is shown.
    fn flush_live(
        &self,
        spec: &TestSpec,
        reports: &[Report],
        mut next: usize,
        live: &mut dyn Live,
        auto: &mut Option<AutoWatch>,
    ) -> usize {
        let figures = crate::workload::figures(spec);
        while reports.iter().all(|r| r.samples.contains_key(&next)) {
            let c = self.merged_interval(reports, Role::Client, next);
            let a = self.merged_interval(reports, Role::Server, next);
            let joined = combine(&c, Some(&a), figures);
            if let Some(w) = auto {
                // The clients' latency over this interval, merged: the
                // kept intervals' latency once the warm-up is cut.
                let (mut l, mut lc) = (new_hist(), new_hist());
                for (_, r) in self
                    .members
                    .iter()
                    .zip(reports)
                    .filter(|(m, _)| m.role == Role::Client)
                {
                    if let Some((_, Some(h), Some(hc))) = r.samples.get(&next) {
                        histogram::merge(&mut l, h);
                        histogram::merge(&mut lc, hc);
                    }
                }
                w.hists(next, &l, &lc);
                w.interval(&joined);
            }
            live.interval(&joined);
            next += 1;
        }
        next
    }

    /// The clients' latency over each phase of `phases`: their histogram
    /// of every common interval, merged into the phases that hold it.
    fn phase_hists(
        &self,
        reports: &[Report],
        common: &[usize],
        phases: &[std::ops::Range<usize>],
    ) -> conn::PhaseHists {
        let mut out = conn::PhaseHists::new(phases);
        for (_, r) in self
            .members
            .iter()
            .zip(reports)
            .filter(|(m, _)| m.role == Role::Client)
        {
            for &k in common {
                if let Some((_, Some(l), _)) = r.samples.get(&k) {
                    out.add(k, l);
                }
            }
        }
        out
    }

    /// The aggregate of every host over the common window, and each host's
    /// own; with `phases`, the clients' latency over each phase merged.
    /// Each host's own figures leave out the `warmup` intervals
    /// `--duration auto` found (the aggregate's are cut by
    /// `AutoWatch::finish`).
    fn fold(
        &self,
        plan: &[Place],
        reports: Vec<Report>,
        phases: &[std::ops::Range<usize>],
        warmup: usize,
    ) -> IterationRun {
        let common = Self::overlap(&reports);
        let kept: Vec<usize> = common.iter().copied().filter(|&k| k >= warmup).collect();
        let phase_hists = self.phase_hists(&reports, &common, phases);
        let side = |role: Role| -> (Vec<IntervalSample>, Option<CpuWindow>) {
            let samples = common
                .iter()
                .map(|&k| self.merged_interval(&reports, role, k))
                .collect();
            let cpus: Vec<&CpuWindow> = self
                .members
                .iter()
                .zip(&reports)
                .filter(|(m, _)| m.role == role)
                .filter_map(|(_, r)| r.window_cpu.as_ref())
                .collect();
            (samples, cpu::merge_hosts(&cpus))
        };
        let (client_samples, client_cpu) = side(Role::Client);
        let (agent_samples, agent_cpu) = side(Role::Server);
        let kernel = |role: Role| {
            fold::sum_kernel_udp(
                self.members
                    .iter()
                    .zip(&reports)
                    .filter(|(m, _)| m.role == role)
                    .filter_map(|(_, r)| r.kernel_udp.as_ref()),
            )
        };
        let window = |s: &[IntervalSample]| match (s.first(), s.last()) {
            (Some(f), Some(l)) => l.end_s - f.start_s,
            _ => 0.0,
        };
        let mut client = SideReport {
            window_s: window(&client_samples),
            samples: client_samples,
            window_cpu: client_cpu,
            complete: true,
            kernel_udp: kernel(Role::Client),
            ..Default::default()
        };
        // memcache: every server's memcached counts, added up.
        let service = fold::sum_services(
            self.members
                .iter()
                .zip(&reports)
                .filter(|(m, _)| m.role == Role::Server)
                .filter_map(|(_, r)| r.service.as_ref()),
        );
        let mut agent = AgentSide {
            samples: agent_samples,
            window_cpu: agent_cpu,
            kernel_udp: kernel(Role::Server),
            service,
            ..Default::default()
        };
        // The earliest window start, controller clock: skew is measured from it.
        let starts: Vec<Option<u64>> = reports
            .iter()
            .map(|r| r.t0_ns.map(|t| r.clock.to_controller(t)))
            .collect();
        let earliest = starts.iter().flatten().min().copied();
        let latest = starts.iter().flatten().max().copied();
        let mut hosts = Vec::new();
        for (i, (m, r)) in self.members.iter().zip(&reports).enumerate() {
            let mine: Vec<&Place> = plan
                .iter()
                .filter(|p| match m.role {
                    Role::Client => p.client == i,
                    Role::Server => p.server == i,
                })
                .collect();
            let addresses: BTreeSet<String> = mine.iter().map(|p| p.addr.to_string()).collect();
            let own: Vec<&IntervalSample> = kept
                .iter()
                .filter_map(|k| r.samples.get(k).map(|(s, _, _)| s))
                .collect();
            let f = fold::host_figures(&own, r.window_cpu.as_ref());
            let prefix = |e: &String| format!("{}: {e}", m.name);
            match m.role {
                Role::Client => {
                    if let Some((l, c)) = &r.hist {
                        histogram::merge(&mut client.hist, l);
                        histogram::merge(&mut client.hist_corrected, c);
                    }
                    client.flows.extend(r.flows.iter().cloned());
                    client.placement.extend(r.placement.iter().cloned());
                    client.errors.extend(r.errors.iter().map(prefix));
                    client.complete &= r.complete;
                    if let Some(w) = &r.waits {
                        client.waits.merge(w);
                    }
                }
                Role::Server => {
                    if let Some(w) = &r.waits {
                        agent.waits.merge(w);
                    }
                    agent.flows.extend(r.flows.iter().cloned());
                    agent.placement.extend(r.placement.iter().cloned());
                    agent.errors.extend(r.errors.iter().map(prefix));
                }
            }
            hosts.push(HostRun {
                name: m.name.clone(),
                role: m.role.word().into(),
                control: m.conn.addr.to_string(),
                addresses: addresses.into_iter().collect(),
                flows: mine.iter().map(|p| p.flow).collect(),
                clock: HostClock {
                    offset_ns: r.clock.offset_ns,
                    uncertainty_ns: r.clock.uncertainty_ns,
                    rtt_ns: r.clock.rtt_ns,
                },
                start_offset_us: match (starts[i], earliest) {
                    (Some(s), Some(e)) => (s - e) as f64 / 1e3,
                    _ => 0.0,
                },
                start_late_us: r.late_ns as f64 / 1e3,
                window_s: f.window_s,
                counters: f.counters,
                throughput_bps: f.throughput_bps,
                transactions_per_s: f.transactions_per_s,
                latency_us: r.hist.as_ref().and_then(|(l, _)| histogram::summarize(l)),
                cpu: r.window_cpu.clone(),
                cost: f.cost,
                placement: r.placement.clone(),
                errors: r.errors.clone(),
                environment: m.info.clone(),
                per_address: match m.role {
                    Role::Server => AddressRun::split(
                        &mine
                            .iter()
                            .map(|p| (p.flow, p.addr.to_string()))
                            .collect::<Vec<_>>(),
                        &r.flows,
                        f.counters.bytes_rx + f.counters.bytes_tx,
                        f.throughput_bps,
                        f.transactions_per_s,
                    ),
                    Role::Client => Vec::new(),
                },
            });
        }
        client.flows.sort_by_key(|f| f.flow);
        agent.flows.sort_by_key(|f| f.flow);
        let error = reports.iter().find_map(|r| r.failure.clone()).map(|e| {
            format!(
                "{e}: results are partial ({} common intervals kept)",
                common.len()
            )
        });
        IterationRun {
            client,
            agent,
            error,
            hosts,
            start_skew_us: earliest.zip(latest).map(|(e, l)| (l - e) as f64 / 1e3),
            prefill: None,
            phase_hists: phase_hists.hists,
            auto: None,
        }
    }
}

#[cfg(test)]
mod tests;
