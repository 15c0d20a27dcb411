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

use crate::model::spec::RunsAs;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use super::conn::{IterationRun, Live};
use super::run::{mean_hosts, Driver, Folder};
use super::together::Together;
use crate::measure::cpu;
use crate::model::result::{
    self, AgentInfo, GroupResult, Iteration, Pair, Status, TestInterval, TestResult,
};
use crate::model::sample::Confidence;
use crate::model::spec::{Figures, MainMetric, TestSpec, Workload};

/// One group of a mixed test.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Group {
    /// `g1`, `g2`, ...
    pub name: String,
    /// As written (`rr --rate 100 --request 64`).
    pub command: String,
    pub spec: TestSpec,
}

/// The checks a mix adds to each group's own: groups run on one window, so
/// none may end on its own (a finite transfer) or be a program.
pub fn check(groups: &[Group]) -> Result<(), String> {
    if groups.is_empty() {
        return Err("a mix needs at least one group, e.g. linerate run mix 'stream --flows 4' 'rr --rate 100'".into());
    }
    for g in groups {
        let w = g.spec.workload;
        if w.runs_as() == RunsAs::Mix {
            return Err(format!(
                "group {} is itself a mix: list its groups instead",
                g.name
            ));
        }
        if w.runs_as() == RunsAs::Program {
            return Err(format!(
                "group {} ({}): {} is a program, not flows; a mix runs flows on one window",
                g.name,
                g.command,
                w.name()
            ));
        }
        if g.spec.is_finite() {
            return Err(format!(
                "group {} ({}): --bytes makes a group end on its own; the groups of a mix share one window (use --duration)",
                g.name, g.command
            ));
        }
        crate::control::check(&g.spec)
            .map_err(|e| format!("group {} ({}): {e}", g.name, g.command))?;
    }
    let first = &groups[0].spec;
    if let Some(g) = groups.iter().find(|g| {
        g.spec.duration_s != first.duration_s
            || g.spec.warmup_s != first.warmup_s
            || g.spec.interval_s != first.interval_s
    }) {
        return Err(format!(
            "group {} ({}) has its own --duration, --warmup or --interval: a mix has one window; give them after the groups, for all",
            g.name, g.command
        ));
    }
    Ok(())
}

/// The spec a mixed result stores as its own: the first group's, named
/// mix, with the flows of every group.
pub fn spec_of(groups: &[Group]) -> TestSpec {
    let mut spec = groups[0].spec.clone();
    spec.workload = Workload::Mix;
    spec.flows = groups.iter().map(|g| g.spec.flows).sum();
    spec
}

/// Each group's live intervals, and how far the combined ones were shown.
#[derive(Default)]
struct Intervals {
    per_group: Vec<BTreeMap<usize, TestInterval>>,
    next: usize,
}

impl Intervals {
    /// The combined intervals every group reported (all of them, `all`).
    fn drain(&mut self, all: bool, live: &mut dyn Live) {
        loop {
            let k = self.next;
            let have: Vec<&TestInterval> =
                self.per_group.iter().filter_map(|m| m.get(&k)).collect();
            if have.is_empty() || (have.len() < self.per_group.len() && !all) {
                break;
            }
            let sum = sum_intervals(&have);
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

/// Intervals of the groups with one index, as one: what adds up summed,
/// the first group's CPU (shared by all), the first latency there is.
fn sum_intervals(have: &[&TestInterval]) -> TestInterval {
    let first = have[0];
    TestInterval {
        index: first.index,
        start_s: first.start_s,
        end_s: first.end_s,
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
) -> Vec<Result<IterationRun, String>> {
    let together = Together::new(groups.len());
    let shared = Mutex::new(Intervals {
        per_group: vec![BTreeMap::new(); groups.len()],
        next: 0,
    });
    let runs = std::thread::scope(|sc| {
        let handles: Vec<_> = drivers
            .iter_mut()
            .zip(groups)
            .enumerate()
            .map(|(index, (d, g))| {
                let (together, shared) = (&together, &shared);
                std::thread::Builder::new()
                    .name(format!("linerate-{}", g.name))
                    .spawn_scoped(sc, move || {
                        let mut l = GroupLive { index, shared };
                        d.run_iteration(&g.spec, &mut l, Some(together))
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
                Ok(h) => h
                    .join()
                    .unwrap_or_else(|_| Err("its thread panicked".to_string())),
                Err(e) => Err(format!("cannot start its thread: {e}")),
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
/// met. Errors before anything was measured are returned as Err, naming
/// the group.
pub fn run_mix(
    driver: &mut Driver,
    groups: &[Group],
    conf: Confidence,
    agent: AgentInfo,
    command: Vec<String>,
    live: &mut dyn Live,
) -> Result<TestResult, String> {
    check(groups)?;
    let started_at = crate::units::rfc3339_now();
    let mut others = Vec::new();
    for g in &groups[1..] {
        others.push(
            driver
                .again()
                .map_err(|e| format!("group {}: another control connection: {e}", g.name))?,
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
            }
        })
        .collect();
    let spec = spec_of(groups);
    let iterations = total_iterations(&folders);
    let summary = crate::measure::fold::summarize_with(
        &spec,
        Figures::default(),
        &iterations,
        (None, None),
        conf.level_pct,
        MainMetric::Throughput,
        None,
    );
    Ok(TestResult {
        schema: result::SCHEMA.into(),
        schema_version: result::SCHEMA_VERSION,
        started_at,
        command,
        confidence_target: conf,
        agent,
        environment: driver.environment(&groups[0].spec),
        summary,
        baseline: None,
        lab: None,
        exec: None,
        hosts: mean_hosts(&folders[0].iterations),
        flow_map: driver.flow_map(&groups[0].spec),
        iterations,
        groups: group_results,
        spec,
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
) -> Result<(), String> {
    for _ in 0..conf.max.max(1) {
        let runs = iteration(drivers, groups, live);
        let first_time = folders[0].iterations.is_empty();
        if let Some((g, e)) = groups
            .iter()
            .zip(&runs)
            .find_map(|(g, r)| r.as_ref().err().map(|e| (g, e)))
        {
            let e = format!("group {} ({}): {e}", g.name, g.command);
            if first_time {
                return Err(e);
            }
            for f in folders.iter_mut() {
                f.cut_short(e.clone());
            }
            return Ok(());
        }
        let mut failed = false;
        for (f, run) in folders.iter_mut().zip(runs) {
            let run = run.expect("errors returned above");
            failed |= run.error.is_some();
            f.add(run);
        }
        if failed || folders[0].satisfied(conf) || crate::engine::signals::test_interrupted() {
            break;
        }
    }
    Ok(())
}

/// The mix's own iterations: per index, the groups' figures that add up
/// summed, CPU per end from the first group (the window is shared), and
/// the CPU cost recomputed over the total bytes and transactions.
fn total_iterations(folders: &[Folder]) -> Vec<Iteration> {
    let n = folders
        .iter()
        .map(|f| f.iterations.len())
        .min()
        .unwrap_or(0);
    (0..n)
        .map(|k| {
            let its: Vec<&Iteration> = folders.iter().map(|f| &f.iterations[k]).collect();
            let first = its[0];
            let bytes: u64 = its.iter().map(|i| i.bytes).sum();
            let transactions: u64 = its.iter().map(|i| i.transactions).sum();
            // Per transaction only where every group counts transactions:
            // a stream's CPU charged to another group's would mislead.
            let all_tx = its.iter().all(|i| i.transactions > 0);
            let cost = |w: &Option<crate::model::sample::CpuWindow>| {
                w.as_ref()
                    .map(|w| {
                        let mut c = cpu::cost(w, bytes, transactions);
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
            let per_index: usize = its.iter().map(|i| i.intervals.len()).min().unwrap_or(0);
            Iteration {
                index: k,
                status,
                error: its.iter().find_map(|i| i.error.clone()),
                duration_s: first.duration_s,
                bytes,
                throughput_bps: its.iter().map(|i| i.throughput_bps).sum(),
                transactions,
                transactions_per_s: its.iter().map(|i| i.transactions_per_s).sum(),
                connections: its.iter().map(|i| i.connections).sum(),
                connections_per_s: its.iter().map(|i| i.connections_per_s).sum(),
                cpu: first.cpu.clone(),
                cost: Pair {
                    client: cost(&first.cpu.client),
                    agent: cost(&first.cpu.agent),
                },
                counters: first.counters.clone(),
                intervals: (0..per_index)
                    .map(|j| {
                        let have: Vec<&TestInterval> =
                            its.iter().map(|i| &i.intervals[j]).collect();
                        sum_intervals(&have)
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

/// A group as `linerate run` takes it, without `linerate run`.
#[derive(clap::Parser, Debug)]
#[command(name = "group", no_binary_name = true, disable_help_flag = true)]
struct GroupArgs {
    #[arg(value_enum)]
    workload: Workload,
    #[command(flatten)]
    test: crate::model::options::TestOptions,
}

/// Parses one group (`"rr --rate 100 --request 64"`, shell quoting
/// allowed) into its workload and options; the error names the group.
pub fn parse_group(text: &str) -> Result<(Workload, crate::model::options::TestOptions), String> {
    use clap::Parser;
    let words = shlex::split(text).ok_or_else(|| format!("group '{text}': unbalanced quotes"))?;
    if words.is_empty() {
        return Err(
            "an empty group: write a workload and its options, e.g. 'rr --rate 100'".into(),
        );
    }
    let a = GroupArgs::try_parse_from(&words).map_err(|e| {
        let msg = e.to_string();
        let first = msg
            .lines()
            .next()
            .unwrap_or("")
            .trim_start_matches("error: ")
            .to_string();
        format!("group '{text}': {first} (a group takes a workload and test options; where the test runs, --duration and --json go after the groups)")
    })?;
    if a.workload.runs_as() == RunsAs::Mix {
        return Err(format!("group '{text}': a mix cannot hold a mix"));
    }
    Ok((a.workload, a.test))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_parses_as_run_takes_it() {
        let (w, o) = parse_group("rr --rate 100 --request 64 --response '64'").unwrap();
        assert_eq!(w, Workload::Rr);
        let spec = o
            .overlay(&crate::model::options::TestOptions {
                workload: Some(w),
                ..Default::default()
            })
            .build()
            .unwrap();
        assert_eq!((spec.request, spec.response), (64, 64));
        assert_eq!(spec.rate, Some(100.0));
    }

    #[test]
    fn bad_groups_are_named() {
        let e = parse_group("stream --flows").unwrap_err();
        assert!(e.contains("group 'stream --flows'"), "{e}");
        let e = parse_group("strem").unwrap_err();
        assert!(e.contains("strem"), "{e}");
        assert!(parse_group("").is_err());
        assert!(parse_group("stream 'x").unwrap_err().contains("quotes"));
        assert!(parse_group("mix").unwrap_err().contains("mix"));
        let e = parse_group("rr --agent 127.0.0.1:1").unwrap_err();
        assert!(e.contains("after the groups"), "{e}");
    }

    #[test]
    fn a_mix_has_one_window() {
        let g = |name: &str, text: &str| {
            let (w, o) = parse_group(text).unwrap();
            let mut o = o;
            o.workload = Some(w);
            Group {
                name: name.into(),
                command: text.into(),
                spec: o.build().unwrap(),
            }
        };
        assert!(check(&[g("g1", "stream"), g("g2", "rr --rate 10")]).is_ok());
        let e = check(&[g("g1", "stream --bytes 1M")]).unwrap_err();
        assert!(e.contains("--bytes"), "{e}");
        let e = check(&[g("g1", "stream"), g("g2", "rr --duration 3")]).unwrap_err();
        assert!(e.contains("g2") && e.contains("one window"), "{e}");
        let s = spec_of(&[g("g1", "stream --flows 4"), g("g2", "rr")]);
        assert_eq!((s.workload, s.flows), (Workload::Mix, 5));
    }
}
