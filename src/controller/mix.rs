//! A mixed test (`linerate run mix 'G1' 'G2' ...`): several groups of flows,
//! each a workload with its own options, on one window. What happens to
//! one kind of traffic while another runs (latency under load, memcached
//! beside a backup, transactions beside encrypted bulk traffic) is the
//! question; flent answers it by starting several netperfs at once,
//! linerate by starting every group at one instant in every agent's clock.
//!
//! Each group runs as a test of its own over its own control connections
//! (the agent runs one test per session), in a thread of its own, and
//! meets the others in `Together` once its flows are open; the window
//! closes for all when any group's ends early. Each group is folded alone
//! (`run::Folder`); the total sums what adds up (bytes, transactions) and
//! keeps CPU per end, which every group shares.
//!
//! A group may start after the others (`offset_s`) and end with them:
//! rrul's streams start when the probes' idle phase ends. Its intervals
//! then sit on the common timeline `offset_s` later, which is how the live
//! line and the total add them up, and a group may ask for its latency over
//! phases of that timeline (`phases`), kept apart per iteration.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use super::driver::{IterationRun, Live};
use super::error::ControllerError;
use super::run::{mean_hosts, Driver, Folder};
use super::together::{Lane, Meet, Together};
use crate::measure::cpu;
use crate::model::result::{
    self, AgentInfo, GroupResult, Iteration, Pair, Status, TestInterval, TestResult,
};
use crate::model::sample::Confidence;
use crate::model::spec::{Figures, MainMetric};
use crate::workload::group::check;
pub use crate::workload::group::{Group, Mixed};

/// A group's place on the timeline, as the controller runs it.
pub fn lane(g: &Group) -> Lane {
    Lane {
        offset: Duration::from_secs_f64(g.offset_s),
        phases: g
            .phases
            .iter()
            .map(|p| g.index_at(p.start_s)..g.index_at(p.end_s))
            .collect(),
    }
}

/// Where each group's intervals sit on the common timeline: the index of
/// its first, how many it has, and its first one's start (seconds after
/// the earliest window's). All zero shifts for a mix a user writes.
#[derive(Clone, Copy, Default)]
struct Shift {
    index: usize,
    count: usize,
    seconds: f64,
}

fn shifts(groups: &[Group]) -> Vec<Shift> {
    let zero = groups
        .iter()
        .map(Group::window_start_s)
        .fold(f64::INFINITY, f64::min);
    groups
        .iter()
        .map(|g| {
            let seconds = g.window_start_s() - zero;
            Shift {
                index: (seconds / g.spec.interval_s).round() as usize,
                count: g.intervals(),
                seconds,
            }
        })
        .collect()
}

impl Shift {
    fn covers(&self, k: usize) -> bool {
        k >= self.index && k < self.index + self.count
    }
}

/// Each group's live intervals, and how far the combined ones were shown.
#[derive(Default)]
struct Intervals {
    per_group: Vec<BTreeMap<usize, TestInterval>>,
    shifts: Vec<Shift>,
    next: usize,
}

impl Intervals {
    /// The combined intervals every group on them reported (all of them,
    /// `all`).
    fn drain(&mut self, all: bool, live: &mut dyn Live) {
        loop {
            let k = self.next;
            let on: Vec<(usize, &Shift)> = self
                .shifts
                .iter()
                .enumerate()
                .filter(|(_, s)| s.covers(k))
                .collect();
            let have: Vec<(&TestInterval, f64)> = on
                .iter()
                .filter_map(|(g, s)| Some((self.per_group[*g].get(&(k - s.index))?, s.seconds)))
                .collect();
            if have.is_empty() || (have.len() < on.len() && !all) {
                break;
            }
            let sum = sum_intervals(k, &have);
            live.interval(&sum);
            self.next += 1;
        }
    }
}

/// A group's end of the live line: its intervals go to the shared table.
struct GroupLive<'a> {
    index: usize,
    shared: &'a Mutex<Intervals>,
}

impl Live for GroupLive<'_> {
    fn interval(&mut self, i: &TestInterval) {
        let mut s = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        s.per_group[self.index].insert(i.index, i.clone());
    }
}

/// Intervals of the groups at one place `k` of the common timeline (each
/// with its group's shift in seconds), as one: what adds up summed, the
/// first group's CPU (shared by all), the first latency there is.
fn sum_intervals(k: usize, have: &[(&TestInterval, f64)]) -> TestInterval {
    let (first, shift) = have[0];
    let have: Vec<&TestInterval> = have.iter().map(|(i, _)| *i).collect();
    TestInterval {
        index: k,
        start_s: first.start_s + shift,
        end_s: first.end_s + shift,
        bytes: have.iter().map(|i| i.bytes).sum(),
        throughput_bps: have.iter().map(|i| i.throughput_bps).sum(),
        transactions: have.iter().map(|i| i.transactions).sum(),
        transactions_per_s: have.iter().map(|i| i.transactions_per_s).sum(),
        connections_per_s: have.iter().map(|i| i.connections_per_s).sum(),
        latency_us: have.iter().find_map(|i| i.latency_us.clone()),
        latency_corrected_us: have.iter().find_map(|i| i.latency_corrected_us.clone()),
        cpu: first.cpu.clone(),
        counters: first.counters.clone(),
    }
}

/// One iteration of every group on one window: each group's run, or why
/// it did not run.
fn iteration(
    drivers: &mut [&mut Driver],
    groups: &[Group],
    live: &mut dyn Live,
) -> Vec<Result<IterationRun, ControllerError>> {
    let together = Together::new(groups.len());
    let lanes: Vec<Lane> = groups.iter().map(lane).collect();
    let shared = Mutex::new(Intervals {
        per_group: vec![BTreeMap::new(); groups.len()],
        shifts: shifts(groups),
        next: 0,
    });
    let runs = std::thread::scope(|sc| {
        let handles: Vec<_> = drivers
            .iter_mut()
            .zip(groups.iter().zip(&lanes))
            .enumerate()
            .map(|(index, (d, (g, lane)))| {
                let (together, shared) = (&together, &shared);
                std::thread::Builder::new()
                    .name(format!("linerate-{}", g.name))
                    .spawn_scoped(sc, move || {
                        let mut l = GroupLive { index, shared };
                        let meet = Meet { together, lane };
                        d.run_iteration(&g.spec, &mut l, Some(meet))
                    })
            })
            .collect();
        // The live line, from this thread (it is not shared).
        while handles
            .iter()
            .any(|h| h.as_ref().is_ok_and(|h| !h.is_finished()))
        {
            std::thread::sleep(Duration::from_millis(50));
            shared
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .drain(false, live);
        }
        handles
            .into_iter()
            .map(|h| match h {
                Ok(h) => h.join().unwrap_or(Err(ControllerError::GroupPanicked)),
                Err(e) => Err(ControllerError::GroupThread(e)),
            })
            .collect::<Vec<_>>()
    });
    shared
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .drain(true, live);
    runs
}

/// Runs the groups on `driver`'s agents (one more control connection per
/// group after the first) until the first group's confidence target is
/// met: the mixed result, with the groups' latency per phase. Errors before
/// anything was measured are returned as Err, naming the group.
pub fn run_groups(
    driver: &mut Driver,
    groups: &[Group],
    conf: Confidence,
    agent: AgentInfo,
    command: Vec<String>,
    live: &mut dyn Live,
) -> Result<Mixed, ControllerError> {
    check(groups)?;
    let started_at = crate::units::rfc3339_now();
    let mut others = Vec::new();
    for g in &groups[1..] {
        others.push(
            driver
                .again()
                .map_err(|e| ControllerError::GroupConnection {
                    group: g.name.clone(),
                    source: Box::new(e),
                })?,
        );
    }
    let mut folders: Vec<Folder> = groups.iter().map(|g| Folder::new(&g.spec)).collect();
    let outcome = {
        let mut drivers: Vec<&mut Driver> = std::iter::once(&mut *driver)
            .chain(others.iter_mut())
            .collect();
        run_iterations(&mut drivers, groups, &mut folders, &conf, live)
    };
    for d in others {
        d.close();
    }
    outcome?;
    // Each group's load beside it: what the others carried, per iteration.
    let through: Vec<Vec<f64>> = folders
        .iter()
        .map(|f| f.iterations.iter().map(|i| i.throughput_bps).collect())
        .collect();
    for (g, f) in folders.iter_mut().enumerate() {
        for (k, it) in f.iterations.iter_mut().enumerate() {
            // An end's CPU is every group's: a cost per KB or per
            // transaction of one group would charge it all to that group
            // (the summary's costs are means of these, so they go too).
            for c in [&mut it.cost.client, &mut it.cost.agent] {
                c.us_per_kb = None;
                c.us_per_tx = None;
                c.host_us_per_kb = None;
            }
            let beside = (0..through.len())
                .filter(|&h| h != g)
                .filter_map(|h| through[h].get(k))
                .sum::<f64>();
            it.load_beside_bps = Some(beside);
        }
    }
    let group_results: Vec<GroupResult> = groups
        .iter()
        .zip(&folders)
        .map(|(g, f)| {
            let mut summary = f.summary(&conf);
            let n = f.iterations.len().max(1) as f64;
            summary.load_beside_bps = Some(
                f.iterations
                    .iter()
                    .filter_map(|i| i.load_beside_bps)
                    .sum::<f64>()
                    / n,
            );
            GroupResult {
                name: g.name.clone(),
                command: g.command.clone(),
                workload: g.spec.workload.name().into(),
                spec: g.spec.clone(),
                summary,
                iterations: f.iterations.clone(),
                offset_s: g.offset_s,
            }
        })
        .collect();
    let spec = crate::workload::mixed_spec(groups);
    let iterations = total_iterations(&folders, &shifts(groups));
    let summary = crate::measure::fold::summarize(
        &spec,
        Figures::default(),
        &iterations,
        (None, None),
        conf.level_pct,
        MainMetric::Throughput,
    );
    let result = TestResult {
        schema: result::SCHEMA.into(),
        schema_version: result::SCHEMA_VERSION,
        started_at,
        command,
        confidence_target: conf,
        agent,
        environment: driver.environment(),
        summary,
        baseline: None,
        lab: None,
        exec: None,
        hosts: mean_hosts(&folders[0].iterations),
        flow_map: driver.flow_map(&groups[0].spec),
        iterations,
        groups: group_results,
        firewall: None,
        search: None,
        spec,
    };
    Ok(Mixed {
        result,
        phase_hists: folders.into_iter().map(|f| f.phase_hists).collect(),
    })
}

/// Iterations of every group until the first group's target is met, a
/// group fails, or Ctrl-C.
fn run_iterations(
    drivers: &mut [&mut Driver],
    groups: &[Group],
    folders: &mut [Folder],
    conf: &Confidence,
    live: &mut dyn Live,
) -> Result<(), ControllerError> {
    for _ in 0..conf.max.max(1) {
        let runs: Result<Vec<IterationRun>, ControllerError> = groups
            .iter()
            .zip(iteration(drivers, groups, live))
            .map(|(g, r)| {
                r.map_err(|e| ControllerError::Group {
                    group: g.name.clone(),
                    command: g.command.clone(),
                    source: Box::new(e),
                })
            })
            .collect();
        let runs = match runs {
            Ok(runs) => runs,
            Err(e) if folders[0].iterations.is_empty() => return Err(e),
            Err(e) => {
                for f in folders.iter_mut() {
                    f.cut_short(e.to_string());
                }
                return Ok(());
            }
        };
        let mut failed = false;
        for (f, run) in folders.iter_mut().zip(runs) {
            failed |= run.error.is_some();
            f.add(run);
        }
        // A group under a capacity search decides when its step is clear.
        let judge = folders.iter().position(|f| f.searching()).unwrap_or(0);
        if failed || folders[judge].satisfied(conf) || crate::engine::signals::test_interrupted() {
            break;
        }
    }
    Ok(())
}

/// The mix's own iterations: per index, the groups' figures that add up
/// summed, CPU per end from the first group (the window is shared), and
/// the CPU cost recomputed over the total bytes and transactions. Groups
/// with lanes (`shifts`) add their intervals where they sit on the common
/// timeline, and their rates in proportion to their share of its length.
fn total_iterations(folders: &[Folder], shifts: &[Shift]) -> Vec<Iteration> {
    let lanes = shifts.iter().any(|s| s.index > 0);
    let n = folders
        .iter()
        .map(|f| f.iterations.len())
        .min()
        .unwrap_or(0);
    (0..n)
        .map(|k| {
            let its: Vec<&Iteration> = folders.iter().map(|f| &f.iterations[k]).collect();
            let first = its[0];
            // The common timeline's length, and each group's share of it.
            let span = if lanes {
                its.iter()
                    .zip(shifts)
                    .map(|(i, s)| s.seconds + i.duration_s)
                    .fold(0.0, f64::max)
            } else {
                first.duration_s
            };
            let share: Vec<f64> = its
                .iter()
                .map(|i| {
                    if lanes && span > 0.0 {
                        i.duration_s / span
                    } else {
                        1.0
                    }
                })
                .collect();
            let rate = |f: fn(&Iteration) -> f64| -> f64 {
                its.iter().zip(&share).map(|(i, w)| f(i) * w).sum()
            };
            let bytes: u64 = its.iter().map(|i| i.bytes).sum();
            let transactions: u64 = its.iter().map(|i| i.transactions).sum();
            // Per transaction only where every group counts transactions:
            // a stream's CPU charged to another group's would mislead.
            let all_tx = its.iter().all(|i| i.transactions > 0);
            // A group that was asked to poll (`--rx-poll`) waited that long.
            let polled = |agent: bool| -> f64 {
                its.iter()
                    .map(|i| match agent {
                        true => i.counters.agent.rx_poll_ns,
                        false => i.counters.client.rx_poll_ns,
                    })
                    .sum::<u64>() as f64
                    / 1e9
            };
            let cost = |w: &Option<crate::model::sample::CpuWindow>, agent: bool| {
                w.as_ref()
                    .map(|w| {
                        let mut c = cpu::cost(w, bytes, transactions, polled(agent));
                        if !all_tx {
                            c.us_per_tx = None;
                        }
                        c
                    })
                    .unwrap_or_default()
            };
            let status = if its.iter().any(|i| i.status == Status::Failed) {
                Status::Failed
            } else if its.iter().any(|i| i.status != Status::Ok) {
                Status::Partial
            } else {
                Status::Ok
            };
            // Every place of the timeline each group still covers.
            let per_index: usize = its
                .iter()
                .zip(shifts)
                .map(|(i, s)| s.index + i.intervals.len())
                .min()
                .unwrap_or(0);
            Iteration {
                index: k,
                status,
                error: its.iter().find_map(|i| i.error.clone()),
                duration_s: span,
                bytes,
                throughput_bps: rate(|i| i.throughput_bps),
                transactions,
                transactions_per_s: rate(|i| i.transactions_per_s),
                connections: its.iter().map(|i| i.connections).sum(),
                connections_per_s: rate(|i| i.connections_per_s),
                cpu: first.cpu.clone(),
                cost: Pair {
                    client: cost(&first.cpu.client, false),
                    agent: cost(&first.cpu.agent, true),
                },
                counters: first.counters.clone(),
                intervals: (0..per_index)
                    .filter_map(|j| {
                        let have: Vec<(&TestInterval, f64)> = its
                            .iter()
                            .zip(shifts)
                            .filter(|(_, s)| j >= s.index)
                            .filter_map(|(i, s)| Some((i.intervals.get(j - s.index)?, s.seconds)))
                            .collect();
                        (!have.is_empty()).then(|| sum_intervals(j, &have))
                    })
                    .collect(),
                placement: Pair {
                    client: its
                        .iter()
                        .flat_map(|i| i.placement.client.clone())
                        .collect(),
                    agent: its.iter().flat_map(|i| i.placement.agent.clone()).collect(),
                },
                errors: Pair {
                    client: its.iter().flat_map(|i| i.errors.client.clone()).collect(),
                    agent: its.iter().flat_map(|i| i.errors.agent.clone()).collect(),
                },
                ..Default::default()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::phase::Phase;
    use crate::workload::group::parse_group;

    /// A probe over 13 s and streams over its last 10 s, no warm-up.
    fn lanes() -> Vec<Group> {
        let g = |text: &str, offset_s: f64, d: &str| {
            let (w, mut o) = parse_group(&format!("{text} --duration {d} --warmup 0")).unwrap();
            o.run.workload = Some(w);
            let mut g = Group::new(
                "g".into(),
                text.into(),
                crate::workload::build(&o, false).unwrap(),
            );
            g.offset_s = offset_s;
            g
        };
        let phase = |name: &str, start_s: f64, end_s: f64| Phase {
            name: name.into(),
            start_s,
            end_s,
        };
        let mut probe = g("rr --rate 20", 0.0, "13");
        probe.phases = vec![
            phase("idle", 0.0, 3.0),
            phase("ramp", 3.0, 4.0),
            phase("loaded", 4.0, 13.0),
        ];
        let mut up = g("stream", 3.0, "10");
        up.phases = vec![phase("loaded", 4.0, 13.0)];
        vec![probe, up]
    }

    #[test]
    fn groups_with_lanes_end_together_on_interval_edges() {
        let gs = lanes();
        assert!(check(&gs).is_ok(), "{:?}", check(&gs));
        assert_eq!(lane(&gs[0]).phases, vec![0..3, 3..4, 4..13]);
        assert_eq!(lane(&gs[1]).phases, vec![1..10]);
        assert_eq!(lane(&gs[1]).offset, Duration::from_secs(3));
        let sh = shifts(&gs);
        assert_eq!((sh[0].index, sh[0].count), (0, 13));
        assert_eq!((sh[1].index, sh[1].count, sh[1].seconds), (3, 10, 3.0));
        // One that would end after the others, or start mid-interval.
        let mut late = lanes();
        late[1].offset_s = 4.0;
        let e = check(&late).unwrap_err().to_string();
        assert!(e.contains("does not end with the others"), "{e}");
        let mut mid = lanes();
        mid[1].offset_s = 2.5;
        mid[1].spec.duration_s = 10.5;
        assert!(check(&mid).is_err());
    }

    #[test]
    fn the_total_adds_intervals_where_they_sit_on_the_timeline() {
        let gs = lanes();
        let interval = |k: usize, bytes: u64| TestInterval {
            index: k,
            start_s: k as f64,
            end_s: k as f64 + 1.0,
            bytes,
            throughput_bps: bytes as f64 * 8.0,
            ..Default::default()
        };
        let mut folders: Vec<Folder> = gs.iter().map(|g| Folder::new(&g.spec)).collect();
        folders[0].iterations.push(Iteration {
            duration_s: 13.0,
            bytes: 13,
            throughput_bps: 8.0,
            intervals: (0..13).map(|k| interval(k, 1)).collect(),
            ..Default::default()
        });
        folders[1].iterations.push(Iteration {
            duration_s: 10.0,
            bytes: 1000,
            throughput_bps: 800.0,
            intervals: (0..10).map(|k| interval(k, 100)).collect(),
            ..Default::default()
        });
        let t = &total_iterations(&folders, &shifts(&gs))[0];
        assert_eq!(t.intervals.len(), 13);
        assert_eq!(t.intervals[2].bytes, 1, "the idle phase: the probe alone");
        assert_eq!(t.intervals[3].bytes, 101);
        assert_eq!((t.intervals[3].start_s, t.intervals[3].end_s), (3.0, 4.0));
        assert_eq!(t.intervals[12].bytes, 101);
        assert_eq!(t.duration_s, 13.0);
        // Rates in proportion: the streams' 800 bit/s over 10 of 13 s.
        let want = 8.0 + 800.0 * 10.0 / 13.0;
        assert!(
            (t.throughput_bps - want).abs() < 1e-9,
            "{}",
            t.throughput_bps
        );
        assert_eq!(t.bytes, 1013);
    }
}
