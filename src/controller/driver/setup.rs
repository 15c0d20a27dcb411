//! Before the window: the servers set the test up, each client opens its
//! flows to them (an agent when told, this process itself), and every
//! member starts, now or at one instant in each one's own clock.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use super::place::{listen, Place};
use super::report::Report;
use super::{Driver, Role};
use crate::control::clock::{self, ClockSync};
use crate::control::protocol::{Msg, TargetGroup};
use crate::controller::conn::{clock_of, peer_clock};
use crate::controller::error::ControllerError;
use crate::controller::together::{self, Meet, NotStarted};
use crate::engine::side::{Side, SideSetup};
use crate::model::sample::KvPrefill;
use crate::model::spec::TestSpec;
use crate::workload::conns::{self, Routes};
use crate::workload::Pattern;

/// A server agent's answer to setup: its data listeners, its test cookie,
/// and with TLS its certificate and that certificate's label.
pub(super) type Listening = (Vec<SocketAddr>, u64, Option<Vec<u8>>, Option<String>);

/// The members' clocks against this controller's, as the iteration needs
/// them: every agent's in a fleet (its start is scheduled); one agent's
/// only where the start is scheduled (a group of a mixed test) or the
/// workload measures one-way delays. This process's is the controller's.
pub(super) fn probe(
    d: &mut Driver,
    spec: &TestSpec,
    together: bool,
    reports: &mut [Report],
) -> Result<(), ControllerError> {
    let one_way = crate::workload::figures(spec).one_way;
    if !(d.hosts || together || one_way) {
        return Ok(());
    }
    for (i, r) in reports.iter_mut().enumerate() {
        let Some(c) = d.members[i].agent_mut(spec) else {
            continue;
        };
        match c.probe() {
            Ok(p) => r.clock = clock_of(&p),
            Err(e) => return Err(d.failed(i, e)),
        }
    }
    Ok(())
}

/// Every server sets the test up (listeners on its data addresses, told
/// which flows are its): what each answered.
pub(super) fn servers(
    d: &mut Driver,
    spec: &TestSpec,
    plan: &[Place],
) -> Result<BTreeMap<usize, Listening>, ControllerError> {
    let mut ready: BTreeMap<usize, Listening> = BTreeMap::new();
    for s in d.indices(Role::Server) {
        // The flows this server takes (its caps count them; none named:
        // every flow of the test).
        let mut expect: Vec<u32> = plan
            .iter()
            .filter(|p| p.server == s)
            .map(|p| p.flow)
            .collect();
        if expect.len() == spec.flows as usize {
            expect.clear();
        }
        let m = &mut d.members[s];
        let listen = listen(m, spec).to_vec();
        let sent = match m.agent_mut(spec) {
            Some(c) => c.send(&Msg::Setup {
                spec: Box::new(spec.clone()),
                listen,
                expect,
            }),
            None => continue,
        };
        sent.map_err(|e| d.failed(s, e))?;
    }
    for s in d.indices(Role::Server) {
        // Another tool's server listens already, where it was named.
        if let Some(addr) = d.members[s].foreign() {
            ready.insert(s, (vec![addr], 0, None, None));
            continue;
        }
        let own = listen(&d.members[s], spec).is_empty();
        let Some(c) = d.members[s].agent_mut(spec) else {
            continue;
        };
        let ip = c.addr.ip();
        match c.expect("setting up the test", Duration::from_secs(30)) {
            Ok(Msg::Ready {
                data_port,
                data,
                cookie,
                host,
                tls_cert,
                tls_cert_label,
            }) => {
                d.members[s].info = *host;
                // No data addresses of its own: the one this side knows.
                let data = match own {
                    true => vec![SocketAddr::new(ip, data_port)],
                    false => data,
                };
                if data.is_empty() {
                    let want = spec.ports.unwrap_or(1);
                    return Err(d.failed(s, ControllerError::OnePort(want, 0)));
                }
                ready.insert(s, (data, cookie, tls_cert, tls_cert_label));
            }
            Ok(other) => return Err(d.unexpected(s, "ready", &other)),
            Err(e) => return Err(d.failed(s, e)),
        }
    }
    Ok(ready)
}

/// Every client opens its flows to the servers' listeners (round robin,
/// `plan`); then the servers confirm they took them where the pattern
/// waits for that. A client learns each server's clock against its own
/// where the workload measures one-way delays. Returns the memcache
/// prefill, summed, and this process's side when it is a client.
pub(super) fn clients(
    d: &mut Driver,
    spec: &TestSpec,
    plan: &[Place],
    pattern: Pattern,
    ready: &BTreeMap<usize, Listening>,
    clocks: &[ClockSync],
) -> Result<(Option<KvPrefill>, Option<SideSetup>), ControllerError> {
    let one_way = crate::workload::figures(spec).one_way;
    let mut prefills: Option<KvPrefill> = None;
    let mut here = None;
    let setup_wait = conns::setup_timeout(spec.flows as usize);
    let routes = Routes::new(spec, pattern)?;
    for c in d.indices(Role::Client) {
        let mut groups = Vec::new();
        for (&s, (data, cookie, cert, label)) in ready {
            let targets: Vec<(u32, SocketAddr)> = plan
                .iter()
                .filter(|p| p.client == c && p.server == s)
                .map(|p| {
                    // Reached elsewhere (a Service, a NAT): there, same port.
                    let at = routes.to(data, p.addr);
                    let via = d.members[s].via(at.ip());
                    (p.flow, via.map_or(at, |v| SocketAddr::new(v, at.port())))
                })
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
                    clock: one_way.then(|| peer_clock(&clocks[s], Some(&clocks[c]))),
                    foreign: d.members[s].foreign().is_some(),
                });
            }
        }
        match d.members[c].agent_mut(spec) {
            Some(conn) => conn
                .send(&Msg::SetupClient {
                    spec: Box::new(spec.clone()),
                    groups,
                })
                .map_err(|e| d.failed(c, e))?,
            None => {
                let (setup, prefill) = open_here(d, spec, pattern, groups, &routes)?;
                prefills = prefill;
                here = Some(setup);
            }
        }
    }
    for c in d.indices(Role::Client) {
        let Some(conn) = d.members[c].agent_mut(spec) else {
            continue;
        };
        match conn.expect("opening its flows", setup_wait + Duration::from_secs(5)) {
            Ok(Msg::Connected { host, prefill }) => {
                d.members[c].info = *host;
                if let Some(p) = prefill {
                    let t = prefills.get_or_insert_with(KvPrefill::default);
                    t.keys += p.keys;
                    t.bytes += p.bytes;
                    t.errors += p.errors;
                    t.connections += p.connections;
                    t.seconds = t.seconds.max(p.seconds);
                }
            }
            Ok(other) => return Err(d.unexpected(c, "connected", &other)),
            Err(e) => return Err(d.failed(c, e)),
        }
    }
    if pattern.waits_for_flows() {
        for s in d.indices(Role::Server) {
            let Some(conn) = d.members[s].agent_mut(spec) else {
                continue;
            };
            match conn.expect(pattern.arrival(), setup_wait + Duration::from_secs(5)) {
                Ok(Msg::FlowsReady { .. }) => {}
                Ok(other) => return Err(d.unexpected(s, "flows_ready", &other)),
                Err(e) => return Err(d.failed(s, e)),
            }
        }
    }
    Ok((prefills, here))
}

/// This process as a client: its flows opened to each server of `groups`,
/// and its side ready to start.
fn open_here(
    d: &Driver,
    spec: &TestSpec,
    pattern: Pattern,
    groups: Vec<TargetGroup>,
    routes: &Routes,
) -> Result<(SideSetup, Option<KvPrefill>), ControllerError> {
    crate::engine::limits::ensure_fds(spec.flows, spec.workers, "the client")?;
    let workload = crate::workload::of(spec)?;
    let mut flows = Vec::new();
    let mut prefill = None;
    // This process is the client of one agent: its errors name that agent.
    let server = d
        .members
        .iter()
        .filter(|m| m.role == Role::Server)
        .find_map(|m| m.control())
        .unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0)));
    for g in groups {
        let c = conns::connect(spec, pattern, g.into()).map_err(|e| ControllerError::Flows {
            addr: server,
            source: Box::new(e),
        })?;
        prefill = prefill.or(c.prefill);
        flows.extend(workload.client_flows(spec, c.conns)?);
    }
    let setup = SideSetup {
        agent: false,
        keep_samples: true,
        spec: spec.clone(),
        flows,
        t0: None,
        // --target: memcached's own counts, read from this side.
        service: routes.watch(),
        kernel_udp: pattern.kernel_udp(),
    };
    Ok((setup, prefill))
}

/// Starts every member: now (one agent, its own test), or at one instant
/// in each agent's own clock (a fleet, or a group of a mixed test, which
/// adds its offset). This process's side, if it is a client, starts here.
/// Ok(Err) when a group with an offset was stopped before its start.
pub(super) fn start(
    d: &mut Driver,
    spec: &TestSpec,
    reports: &[Report],
    here: Option<SideSetup>,
    together: Option<Meet>,
) -> Result<Result<(Option<Side>, Duration), NotStarted>, ControllerError> {
    let slowest = reports.iter().map(|r| r.clock.rtt_ns).max().unwrap_or(0);
    let margin = Duration::from_millis(50).max(Duration::from_nanos(slowest * 4));
    let scheduled = d.hosts || together.is_some();
    if !scheduled {
        let side = here.map(Side::start).transpose()?;
        for i in 0..d.members.len() {
            if let Some(c) = d.members[i].agent_mut(spec) {
                c.send(&Msg::Start { at_ns: None })
                    .map_err(|e| d.failed(i, e))?;
            }
        }
        return Ok(Ok((side, margin)));
    }
    let start = match together {
        // A mixed test: one instant for every group, plus this group's
        // offset (its members hear of it a margin before).
        Some(m) => match m.together.arrive(margin) {
            Ok(s) => {
                let at = s + m.lane.offset.as_nanos() as u64;
                if !m.lane.offset.is_zero() {
                    let tell = at.saturating_sub(margin.as_nanos() as u64);
                    if let Err(why) = together::wait_for_lane(tell, m.together) {
                        d.stop_all(spec, reports);
                        return Ok(Err(why));
                    }
                }
                at
            }
            Err(e) => {
                // The agents drop a test stopped before its start.
                d.stop_all(spec, reports);
                return Err(e);
            }
        },
        None => clock::mono_ns() + margin.as_nanos() as u64,
    };
    for (i, r) in reports.iter().enumerate() {
        let at = r.clock.to_agent(start);
        if let Some(c) = d.members[i].agent_mut(spec) {
            c.send(&Msg::Start { at_ns: Some(at) })
                .map_err(|e| d.failed(i, e))?;
        }
    }
    let side = match here {
        Some(mut setup) => {
            setup.t0 = Some(together::sleep_until(start));
            Some(Side::start(setup)?)
        }
        None => None,
    };
    Ok(Ok((side, margin)))
}

impl Driver {
    /// Stops every agent that is still there (best effort).
    pub(super) fn stop_all(&mut self, spec: &TestSpec, reports: &[Report]) {
        for (m, r) in self.members.iter_mut().zip(reports) {
            if r.failure.is_none() {
                if let Some(c) = m.agent_mut(spec) {
                    let _ = c.send(&Msg::Stop);
                }
            }
        }
    }
}
