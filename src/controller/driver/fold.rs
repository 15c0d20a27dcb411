//! What the members reported, as one iteration: a fleet of one hands its
//! two ends through as they measured them (the client's intervals beyond
//! the agent's kept); a fleet sums its hosts interval by interval over the
//! overlap of every host's window and keeps each host's own figures.

use std::collections::BTreeSet;

use super::place::Place;
use super::report::Report;
use super::{kv_failure, AgentSide, Driver, IterationRun, Role};
use crate::engine::side::SideReport;
use crate::engine::signals;
use crate::measure::cpu;
use crate::measure::fold;
use crate::measure::histogram;
use crate::model::result::{AddressRun, HostClock, HostRun};
use crate::model::sample::{CpuWindow, IntervalSample};
use crate::model::spec::TestSpec;

/// A server's report as the agent's side of the iteration.
fn agent_side(r: Report) -> AgentSide {
    AgentSide {
        samples: r.samples.into_values().map(|(s, _, _)| s).collect(),
        window_cpu: r.window_cpu,
        flows: r.flows,
        placement: r.placement,
        errors: r.errors,
        kernel_udp: r.kernel_udp,
        service: r.service,
        waits: r.waits.unwrap_or_default(),
    }
}

impl Driver {
    /// A fleet of one: this process's side and its agent's, unmerged, with
    /// the verdict on the window.
    pub(super) fn pass_through(
        &self,
        spec: &TestSpec,
        mut reports: Vec<Report>,
        client: SideReport,
    ) -> IterationRun {
        let s = self
            .indices(Role::Server)
            .into_iter()
            .next()
            .expect("a fleet has a server");
        let addr = self.members[s]
            .control()
            .or(self.members[s].foreign())
            .map_or_else(|| "?".to_string(), |a| a.to_string());
        let server = std::mem::take(&mut reports[s]);
        let error = match self.members[s].foreign() {
            // Another tool's server says nothing: a flow that failed
            // (it went away, or refused the protocol) is the news.
            Some(_) => client
                .errors
                .first()
                .map(|e| format!("the perf server at {addr}: {e}; results are partial")),
            None => None,
        }
        .or_else(|| verdict(spec, &addr, &server, &client));
        IterationRun {
            client,
            agent: agent_side(server),
            error,
            hosts: Vec::new(),
            start_skew_us: None,
            prefill: None,
            phase_hists: Vec::new(),
            auto: None,
            client_only: false,
        }
    }

    /// The aggregate of every host over the common window, and each host's
    /// own; with `phases`, the clients' latency over each phase merged.
    /// Each host's own figures leave out the `warmup` intervals
    /// `--duration auto` found (the aggregate's are cut by
    /// `AutoWatch::finish`).
    pub(super) fn fold(
        &self,
        spec: &TestSpec,
        plan: &[Place],
        reports: Vec<Report>,
        phases: &[std::ops::Range<usize>],
        warmup: usize,
    ) -> IterationRun {
        let common = overlap(&reports);
        let kept: Vec<usize> = common.iter().copied().filter(|&k| k >= warmup).collect();
        let phase_hists = self.phase_hists(&reports, &common, phases);
        let of = |role: Role| {
            self.members
                .iter()
                .zip(&reports)
                .filter(move |(m, _)| m.role == role)
                .map(|(_, r)| r)
        };
        let side = |role: Role| -> (Vec<IntervalSample>, Option<CpuWindow>) {
            let samples = common
                .iter()
                .map(|&k| {
                    let parts: Vec<_> = of(role)
                        .filter_map(|r| r.samples.get(&k))
                        .map(|(s, l, c)| (s, l.as_ref(), c.as_ref()))
                        .collect();
                    fold::merge_samples(k, &parts)
                })
                .collect();
            let cpus: Vec<&CpuWindow> = of(role).filter_map(|r| r.window_cpu.as_ref()).collect();
            (samples, cpu::merge_hosts(&cpus))
        };
        let (client_samples, client_cpu) = side(Role::Client);
        let (agent_samples, agent_cpu) = side(Role::Server);
        let kernel =
            |role: Role| fold::sum_kernel_udp(of(role).filter_map(|r| r.kernel_udp.as_ref()));
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
        let mut agent = AgentSide {
            samples: agent_samples,
            window_cpu: agent_cpu,
            kernel_udp: kernel(Role::Server),
            // memcache: every server's memcached counts, added up.
            service: fold::sum_services(of(Role::Server).filter_map(|r| r.service.as_ref())),
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
        for (i, r) in reports.iter().enumerate() {
            let m = &self.members[i];
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
            let start_offset_us = match (starts[i], earliest) {
                (Some(s), Some(e)) => (s - e) as f64 / 1e3,
                _ => 0.0,
            };
            hosts.push(self.host_run(i, plan, r, &kept, start_offset_us));
        }
        client.flows.sort_by_key(|f| f.flow);
        agent.flows.sort_by_key(|f| f.flow);
        let mut error = reports.iter().find_map(|r| r.failure.clone()).map(|e| {
            format!(
                "{e}: results are partial ({} common intervals kept)",
                common.len()
            )
        });
        if error.is_none() && signals::test_interrupted() {
            error = Some(super::interrupted());
        }
        if error.is_none() {
            error = kv_failure(spec, &client);
        }
        IterationRun {
            client,
            agent,
            error,
            hosts,
            start_skew_us: earliest.zip(latest).map(|(e, l)| (l - e) as f64 / 1e3),
            prefill: None,
            phase_hists: phase_hists.hists,
            auto: None,
            client_only: false,
        }
    }

    /// Member `i`'s own figures over the `kept` intervals.
    fn host_run(
        &self,
        i: usize,
        plan: &[Place],
        r: &Report,
        kept: &[usize],
        start_offset_us: f64,
    ) -> HostRun {
        let m = &self.members[i];
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
        HostRun {
            name: m.name.clone(),
            role: m.role.word().into(),
            control: m
                .control()
                .map_or_else(|| "this process".into(), |a| a.to_string()),
            addresses: addresses.into_iter().collect(),
            flows: mine.iter().map(|p| p.flow).collect(),
            clock: HostClock {
                offset_ns: r.clock.offset_ns,
                uncertainty_ns: r.clock.uncertainty_ns,
                rtt_ns: r.clock.rtt_ns,
            },
            start_offset_us,
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
            site: m.site.clone(),
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
        }
    }

    /// The clients' latency over each phase of `phases`: their histogram
    /// of every common interval, merged into the phases that hold it.
    fn phase_hists(
        &self,
        reports: &[Report],
        common: &[usize],
        phases: &[std::ops::Range<usize>],
    ) -> super::PhaseHists {
        let mut out = super::PhaseHists::new(phases);
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
}

/// Interval indices every member has reported.
pub(super) fn overlap(reports: &[Report]) -> Vec<usize> {
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

/// Why an iteration of one agent is partial or failed, from what the
/// window saw of the agent at `addr` (None: it ran to its end).
fn verdict(spec: &TestSpec, addr: &str, server: &Report, client: &SideReport) -> Option<String> {
    let said_why = server.dead.then(|| server.said.clone()).flatten();
    if let Some(e) = said_why {
        // The connection ended with a reason (a broken seal on either
        // side, a failure the agent named): that, not "died".
        Some(format!("agent at {addr}: {e}; results are partial"))
    } else if signals::test_interrupted() && !server.dead {
        Some(super::interrupted())
    } else if server.dead {
        Some(format!(
            "agent at {addr} died mid-test (control connection lost after {} of the agent's intervals): results are partial",
            server.samples.len()
        ))
    } else if let Some(e) = &server.said {
        Some(format!("agent at {addr}: {e}"))
    } else if !server.window_done {
        Some(format!(
            "agent at {addr} did not finish its window in time: results are partial"
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
