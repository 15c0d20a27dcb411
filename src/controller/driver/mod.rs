//! The one driver: every test runs on a fleet. Its members are agents,
//! each a client (a load generator) or a server, and at most one client
//! that is this process (`--agent` and the local agent: the controller is
//! the client of one agent, a fleet of one).
//!
//! An iteration: probe the clocks it needs, place the flows (round robin
//! over clients and over server addresses, `place`), set up the servers,
//! open the clients' flows (`setup`), start every member (now, or at one
//! instant in each agent's own clock), gather the window (`window`), and
//! fold what the members reported into one iteration (`fold`). A fleet
//! named by a hosts file or a lab keeps each host's own figures beside
//! the aggregate; a fleet of one hands its two ends through unmerged. A
//! member that dies stops the others; what was measured is kept and the
//! error names the member.

use std::net::{IpAddr, SocketAddr};

mod fold;
mod here;
mod place;
mod report;
mod setup;
mod window;

use super::conn::{self, AgentConn};
use super::error::{ControllerError, Peer};
use super::together::{Meet, NotStarted};
use crate::control::clock::ClockSync;
use crate::control::protocol::Msg;
use crate::engine::side::SideReport;
use crate::measure::histogram::{self, new_hist, Hist, WaitHists};
use crate::model::flow::FlowReport;
use crate::model::host::HostInfo;
use crate::model::result::{Pair, TestInterval};
use crate::model::sample::{CpuWindow, IntervalSample, WorkerPlacement};
use crate::model::spec::TestSpec;
pub use here::HereRun;
use report::Report;
use window::Window;

/// An agent to use, as the hosts file or a lab names it.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub name: String,
    pub control: SocketAddr,
    pub token: String,
    /// Server: the data addresses (ports) to listen on, in order.
    pub data: Vec<IpAddr>,
    /// Server: where clients reach a data address instead of at itself
    /// (the hosts file's `connect`: a Kubernetes Service, a NAT), on the
    /// same port. Empty: at the data addresses.
    pub connect: Vec<(IpAddr, IpAddr)>,
    /// Where it runs (the hosts file's `site`: node, network, path ...).
    pub site: std::collections::BTreeMap<String, String>,
}

/// What the servers reported for one iteration (summed over a fleet).
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
    /// Only the client reported (another tool's server).
    pub client_only: bool,
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
            client_only: false,
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

/// Why a test that a Ctrl-C or SIGTERM ended is partial.
pub fn interrupted() -> String {
    format!(
        "{}: the results cover the window up to then",
        crate::engine::signals::stopped_by()
    )
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

/// Where a member runs: an agent over its control connection, this
/// process (the client of one agent), or a server that is not a linerate
/// agent at all (another tool's QUIC perf server, `--perf-server`): no
/// control channel, so no setup, figures or CPU of its own; the clients
/// reach it at its address.
enum Seat {
    Agent(Box<AgentConn>),
    Here,
    Foreign(SocketAddr),
}

struct Member {
    name: String,
    role: Role,
    seat: Seat,
    /// Server: the addresses it listens on by default (empty: its control
    /// address, the one the controller knows, which is right behind NAT).
    data: Vec<IpAddr>,
    /// Server: the addresses `--ports N` takes the first N of.
    pool: Vec<IpAddr>,
    /// Server: data address -> where clients reach it (`Endpoint::connect`).
    connect: Vec<(IpAddr, IpAddr)>,
    site: std::collections::BTreeMap<String, String>,
    info: HostInfo,
}

impl Member {
    /// Server: where clients reach its data address `at` instead (the
    /// hosts file's `connect`: a Service, a NAT), if anywhere.
    fn via(&self, at: IpAddr) -> Option<IpAddr> {
        self.connect.iter().find(|(l, _)| *l == at).map(|&(_, v)| v)
    }

    /// This process as the one client.
    fn here() -> Member {
        Member {
            name: "controller".into(),
            role: Role::Client,
            seat: Seat::Here,
            data: Vec::new(),
            pool: Vec::new(),
            connect: Vec::new(),
            site: Default::default(),
            info: HostInfo::default(),
        }
    }

    /// The agent's connection for `spec` (its companion where a TLS test
    /// wants the other crypto-hardware setting and it was connected).
    fn agent(&self, spec: &TestSpec) -> Option<&AgentConn> {
        match &self.seat {
            Seat::Agent(c) => Some(c.conn_for(spec)),
            Seat::Here | Seat::Foreign(_) => None,
        }
    }

    fn agent_mut(&mut self, spec: &TestSpec) -> Option<&mut AgentConn> {
        match &mut self.seat {
            Seat::Agent(c) => Some(c.conn_for_mut(spec)),
            Seat::Here | Seat::Foreign(_) => None,
        }
    }

    fn control(&self) -> Option<SocketAddr> {
        match &self.seat {
            Seat::Agent(c) => Some(c.addr),
            Seat::Here | Seat::Foreign(_) => None,
        }
    }

    /// Another tool's server: where its clients reach it.
    fn foreign(&self) -> Option<SocketAddr> {
        match self.seat {
            Seat::Foreign(a) => Some(a),
            _ => None,
        }
    }

    /// This member, as its errors name it.
    fn peer(&self) -> Peer {
        Peer::Host {
            name: self.name.clone(),
            addr: self
                .control()
                .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 0))),
        }
    }

    fn label(&self) -> String {
        self.peer().to_string()
    }
}

/// Who runs a test's flows: the agents of a fleet, and this process as the
/// client of one agent.
pub struct Driver {
    members: Vec<Member>,
    /// A fleet a hosts file or a lab names: each host's figures, the flow
    /// map and the start skew are recorded, members are named in errors,
    /// and every start is scheduled. A fleet of one records none of it.
    hosts: bool,
}

impl Driver {
    /// This process as the client of the agent on `conn`; `--ports N`
    /// spreads flows over the first N of its `data` addresses.
    pub fn one(conn: AgentConn) -> Driver {
        let pool = conn.data.clone();
        Driver {
            members: vec![
                Member {
                    name: "agent".into(),
                    role: Role::Server,
                    seat: Seat::Agent(Box::new(conn)),
                    data: Vec::new(),
                    pool,
                    connect: Vec::new(),
                    site: Default::default(),
                    info: HostInfo::default(),
                },
                Member::here(),
            ],
            hosts: false,
        }
    }

    /// This process as the client of another tool's QUIC perf server at
    /// `addr` (`--perf-server`): a fleet of one whose server is no agent.
    pub fn foreign(addr: SocketAddr) -> Driver {
        Driver {
            members: vec![
                Member {
                    name: format!("perf server {addr}"),
                    role: Role::Server,
                    seat: Seat::Foreign(addr),
                    data: vec![addr.ip()],
                    pool: vec![addr.ip()],
                    connect: Vec::new(),
                    site: Default::default(),
                    info: HostInfo::default(),
                },
                Member::here(),
            ],
            hosts: false,
        }
    }

    /// Whether the server is another tool's (`--perf-server`): it runs
    /// only what speaks its protocol, and no TLS over TCP twin.
    pub fn drives_foreign(&self) -> bool {
        self.members.iter().any(|m| m.foreign().is_some())
    }

    /// Connects to every client and server agent; the first that cannot be
    /// reached or authenticated ends it, named, before any traffic.
    pub fn fleet(clients: &[Endpoint], servers: &[Endpoint]) -> Result<Driver, ControllerError> {
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
                    seat: Seat::Agent(Box::new(conn)),
                    data: e.data.clone(),
                    pool: e.data.clone(),
                    connect: e.connect.clone(),
                    site: e.site.clone(),
                    info: HostInfo::default(),
                });
            }
        }
        Ok(Driver {
            members,
            hosts: true,
        })
    }

    /// The same members over new control connections, for another group
    /// of a mixed test (the agent runs one test per session).
    pub fn again(&self) -> Result<Driver, ControllerError> {
        let mut members = Vec::new();
        for m in &self.members {
            let seat = match &m.seat {
                Seat::Here => Seat::Here,
                Seat::Foreign(a) => Seat::Foreign(*a),
                Seat::Agent(c) => {
                    Seat::Agent(Box::new(c.again().map_err(|err| match self.hosts {
                        true => ControllerError::Host {
                            name: m.name.clone(),
                            source: Box::new(err),
                        },
                        false => err,
                    })?))
                }
            };
            members.push(Member {
                name: m.name.clone(),
                role: m.role,
                seat,
                data: m.data.clone(),
                pool: m.pool.clone(),
                connect: m.connect.clone(),
                site: m.site.clone(),
                info: HostInfo::default(),
            });
        }
        Ok(Driver {
            members,
            hosts: self.hosts,
        })
    }

    fn indices(&self, role: Role) -> Vec<usize> {
        (0..self.members.len())
            .filter(|&i| self.members[i].role == role)
            .collect()
    }

    /// `e`, naming the member `i` where the fleet names its hosts.
    fn failed(&self, i: usize, e: ControllerError) -> ControllerError {
        let m = &self.members[i];
        match (self.hosts, m.control()) {
            (true, Some(addr)) => e.on_host(&m.name, addr),
            _ => e,
        }
    }

    /// `m` came from member `i` where `expected` was due.
    fn unexpected(&self, i: usize, expected: &'static str, m: &Msg) -> ControllerError {
        let from = match (self.hosts, self.members[i].control()) {
            (false, Some(addr)) => Peer::Agent(addr),
            _ => self.members[i].peer(),
        };
        ControllerError::Unexpected {
            from,
            expected,
            got: m.name(),
        }
    }

    /// What the client and the server hosts are, as `spec` ran on them:
    /// the first of each (this host where this process is the client).
    pub fn environment(&self) -> Pair<HostInfo> {
        let first = |r| {
            self.members
                .iter()
                .find(|m| m.role == r)
                .map(|m| match m.seat {
                    Seat::Here => crate::measure::host::collect(),
                    Seat::Agent(_) | Seat::Foreign(_) => m.info.clone(),
                })
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

    /// Ends the control connections politely (agents free the test).
    pub fn close(self) {
        for m in self.members {
            if let Seat::Agent(c) = m.seat {
                c.bye();
            }
        }
    }

    /// Runs one iteration of `spec` on the members it uses (see
    /// `place::active`), the others parked. Errors before the window opens
    /// are returned as Err (naming the host in a fleet); after that, what
    /// was measured is kept and the error says who failed. With `together`
    /// (a group of a mixed test) the window opens when every group's flows
    /// are open (plus the group's offset), and closes when any group's
    /// ends.
    pub fn run_iteration(
        &mut self,
        spec: &TestSpec,
        live: &mut dyn Live,
        together: Option<Meet>,
    ) -> Result<IterationRun, ControllerError> {
        let r = self.run_active(spec, live, together);
        if let Some(t) = together.map(|m| m.together) {
            match &r {
                Err(e) => t.fail(e),
                Ok(run) if run.error.is_some() => t.stop(),
                Ok(_) => {}
            }
        }
        r
    }

    fn run_active(
        &mut self,
        spec: &TestSpec,
        live: &mut dyn Live,
        together: Option<Meet>,
    ) -> Result<IterationRun, ControllerError> {
        // A TLS test that wants the other crypto setting runs on each
        // agent's companion, connected on first use.
        for i in 0..self.members.len() {
            if let Seat::Agent(c) = &mut self.members[i].seat {
                if let Err(e) = c.for_spec(spec) {
                    return Err(self.failed(i, e));
                }
            }
        }
        if self.drives_foreign() {
            crate::workload::perf_client(spec.workload)?;
        }
        let active = self.active(spec)?;
        // Park the members this test leaves out; put everyone back after.
        let all: Vec<(usize, Member)> = std::mem::take(&mut self.members)
            .into_iter()
            .enumerate()
            .collect();
        let (used, parked): (Vec<_>, Vec<_>) = all.into_iter().partition(|(i, _)| active[*i]);
        let order: Vec<usize> = used.iter().map(|(i, _)| *i).collect();
        self.members = used.into_iter().map(|(_, m)| m).collect();
        let mut r = self.run_members(spec, live, together);
        if !self.hosts {
            // A setup step failed (say, connecting the flows): if the
            // channel broke or the agent ended the test, that is the
            // cause, and it arrives a moment later.
            r = r.map_err(|e| {
                match self
                    .members
                    .iter_mut()
                    .filter(|m| m.role == Role::Server)
                    .find_map(|m| m.agent_mut(spec))
                {
                    Some(c) => c.reason_for(e),
                    None => e,
                }
            });
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

    /// One iteration on the members in `self.members` (all of them used).
    fn run_members(
        &mut self,
        spec: &TestSpec,
        live: &mut dyn Live,
        together: Option<Meet>,
    ) -> Result<IterationRun, ControllerError> {
        let mut reports: Vec<Report> = self
            .members
            .iter()
            .map(|m| match m.foreign() {
                Some(_) => Report::unheard(),
                None => Report::default(),
            })
            .collect();
        setup::probe(self, spec, together.is_some(), &mut reports)?;
        let plan = self.plan(spec);
        let pattern = crate::workload::of(spec)?.pattern();
        // Servers first: their listeners must exist before clients connect.
        let ready = setup::servers(self, spec, &plan)?;
        let clocks: Vec<ClockSync> = reports.iter().map(|r| r.clock).collect();
        let (prefill, here) = setup::clients(self, spec, &plan, pattern, &ready, &clocks)?;
        let (side, margin) = match setup::start(self, spec, &reports, here, together)? {
            Ok(s) => s,
            Err(why) => return Ok(IterationRun::not_started(&why)),
        };
        let phases = together.map_or(&[][..], |m| &m.lane.phases);
        let mut w = Window::new(
            self,
            spec,
            reports,
            live,
            together.map(|m| m.together),
            phases,
        );
        let client = w.run(side, margin);
        w.flush_live(true);
        let (reports, auto, phase_hists) = (w.reports, w.auto, w.phases.hists);
        for (m, r) in self.members.iter_mut().zip(&reports) {
            if let (Some(reason), Some(c)) = (&r.broken, m.agent_mut(spec)) {
                c.tell_broken(reason);
            }
        }
        let mut run = match client {
            Some(client) if !self.hosts => {
                let mut run = self.pass_through(spec, reports, client);
                run.phase_hists = phase_hists;
                run
            }
            // A fleet's clients are agents: their reports are merged.
            _ => {
                // `--duration auto`: the warm-up it found is left out of
                // every host's figures as out of the aggregate's.
                let warmup = auto.as_ref().map_or(0, |w| w.warmup());
                self.fold(spec, &plan, reports, phases, warmup)
            }
        };
        run.auto = auto.map(|w| {
            w.finish(
                &mut run.client,
                &mut run.agent.samples,
                &mut run.agent.window_cpu,
            )
        });
        run.prefill = prefill;
        run.client_only = self.drives_foreign();
        Ok(run)
    }
}

#[cfg(test)]
mod tests;
