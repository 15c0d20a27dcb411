//! A capacity search (`--search 'p99<=300us'`): the point run at offered
//! rates chosen by `measure::search::Search` (a closed-loop peak, a ramp,
//! bisection), each step through the one pipeline (`point::run_single`)
//! with a window long enough for its percentile, repeated while its
//! verdict is within noise (`run::Folder::satisfied`). The result is the
//! step at the capacity, with every step in `search.points`.

use super::point::{run_point, Point};
use super::target::Target;
use crate::error::Result;
use crate::lab::state::LabState;
use crate::measure::search::{kept_up, Search, Step};
use crate::model::result::{Summary, TestResult};
use crate::model::sample::Confidence;
use crate::model::search::{SearchPhase, SearchPoint, SearchResult, SearchSpec};
use crate::model::spec::{MainMetric, TestSpec};
use crate::units;

/// A step whose verdict is within noise runs at most this many times.
const MAX_REPEATS: usize = 3;

/// Runs `p`: as a capacity search when its spec (or one of its groups)
/// has `--search`, else once (`point::run_point`). `on_step` hears of each
/// step as it finishes.
pub fn run_or_search(
    target: &mut Target,
    lab: Option<&LabState>,
    p: &Point,
    on_step: &mut dyn FnMut(&SearchPoint),
) -> Result<TestResult> {
    let searching = p.spec.search.is_some() || p.groups.iter().any(|g| g.spec.search.is_some());
    if searching && crate::workload::kind_of(p.spec.workload).searches() {
        return run(target, lab, p, on_step);
    }
    run_point(target, lab, p)
}

/// Runs `p` as a capacity search. `p.spec` (or one of `p.groups`) carries
/// the search; `on_step` hears of each step as it finishes.
fn run(
    target: &mut Target,
    lab: Option<&LabState>,
    p: &Point,
    on_step: &mut dyn FnMut(&SearchPoint),
) -> Result<TestResult> {
    let searched = p.groups.iter().position(|g| g.spec.search.is_some());
    let base = match searched {
        Some(i) => &p.groups[i].spec,
        None => p.spec,
    };
    let s = base
        .search
        .clone()
        .expect("run_or_search sends only searches here");
    let bits = s.target.metric.bits();
    let mut search = Search::new(s.resolution_pct)
        .slowest(s.slowest_rate())
        .in_bits(bits);
    let mut points: Vec<SearchPoint> = Vec::new();
    // The result at each rate tried (None: the peak).
    let mut kept: Vec<(Option<f64>, TestResult)> = Vec::new();
    let mut first_error = None;
    while let Some(step) = search.next() {
        if crate::engine::signals::test_interrupted() {
            search.stop(crate::engine::signals::stopped_by().into());
            break;
        }
        let n = search.steps() + 1;
        let spec = step_spec(base, &s, step);
        let window = spec.duration_s;
        let mut groups = p.groups.to_vec();
        for g in groups.iter_mut() {
            g.spec.duration_s = window;
        }
        if let Some(i) = searched {
            groups[i].spec = spec.clone();
        }
        let point_spec = match searched {
            Some(_) => crate::workload::mixed_spec(&groups),
            None => spec.clone(),
        };
        let label = format!(
            "{} step {n} {}",
            p.label,
            match step.rate {
                None if bits => "saturating load".into(),
                None => "closed-loop peak".into(),
                Some(r) if bits => units::fmt_bps(r),
                Some(r) => units::fmt_rate(r),
            }
        );
        let step_point = Point {
            spec: &point_spec,
            confidence: step_confidence(p.confidence, step),
            command: p.command.clone(),
            label,
            quiet: p.quiet,
            json_stream: false,
            tls_baseline: false,
            groups: &groups,
        };
        let result = match run_point(target, lab, &step_point) {
            Ok(r) => r,
            Err(e) if kept.is_empty() => return Err(e),
            Err(e) => {
                search.stop(format!("step {n} failed: {e}"));
                first_error.get_or_insert(e.to_string());
                break;
            }
        };
        let summary = match searched {
            Some(i) => result.groups.get(i).map(|g| &g.summary),
            None => Some(&result.summary),
        }
        .cloned()
        .unwrap_or_default();
        let point = judge(&s, &spec, step, n, &summary, &result);
        // How far the figure is on the wrong side of the limit.
        let excess = |f: &crate::model::search::SearchFigure| match s.target.metric.at_least() {
            true => s.target.limit - f.value,
            false => f.value - s.target.limit,
        };
        search.record(
            step,
            point.achieved_per_s,
            point.met,
            point.figure.as_ref().map(excess),
        );
        on_step(&point);
        points.push(point);
        kept.push((step.rate, result));
        if !summary.status.is_ok() {
            search.stop(format!("step {n} ended early: {}", step_error(&kept)));
            break;
        }
    }
    let capacity = search.capacity();
    // The last run at a rate: a confirmation's, where the rate ran twice.
    let at = |r: Option<f64>| points.iter().rev().find(|x| x.rate_per_s == r);
    let first_miss = points
        .iter()
        .filter(|x| !x.met && x.rate_per_s.is_some())
        .filter(|x| capacity.is_none_or(|c| x.rate_per_s.unwrap_or(0.0) > c))
        .min_by(|a, b| a.rate_per_s.partial_cmp(&b.rate_per_s).expect("rates"));
    let bound_by = first_miss.and_then(|x| x.cpu_bound.clone());
    let tail_set_by = first_miss.and_then(|x| x.tail.clone());
    let report = SearchResult {
        target: s.target,
        resolution_pct: s.resolution_pct,
        capacity_per_s: capacity,
        achieved_per_s: capacity.and_then(|c| at(Some(c))).map(|x| x.achieved_per_s),
        peak_per_s: search.peak(),
        missed_per_s: search.missed(),
        stopped: search
            .stopped()
            .map(str::to_string)
            .unwrap_or_else(|| "the search ended".into()),
        bound_by,
        group: searched.map(|i| p.groups[i].name.clone()),
        points,
        tail_set_by,
    };
    // The result is the step at the capacity; with none, the lowest rate
    // tried (or the peak).
    let pick = match capacity {
        Some(c) => kept.iter().rposition(|(r, _)| *r == Some(c)),
        None => kept
            .iter()
            .enumerate()
            .filter(|(_, (r, _))| r.is_some())
            .min_by(|a, b| a.1 .0.partial_cmp(&b.1 .0).expect("rates"))
            .map(|(i, _)| i),
    }
    .unwrap_or(kept.len().saturating_sub(1));
    let (_, mut result) = kept.swap_remove(pick);
    result.command = p.command.clone();
    // The user's own target: a step's repetitions were the search's.
    result.confidence_target = p.confidence;
    result.search = Some(report);
    if let Some(e) = first_error {
        result.summary.status = crate::model::result::Status::Partial;
        if let Some(last) = result.iterations.last_mut() {
            last.error.get_or_insert(e);
        }
    }
    Ok(result)
}

/// A step's spec: the offered rate (an RPM search's is its load's bit
/// rate) and a window long enough for its samples (an RPM step is one
/// responsiveness test, as long as its method takes within the spec's
/// bound).
fn step_spec(base: &TestSpec, s: &SearchSpec, step: Step) -> TestSpec {
    let bits = s.target.metric.bits();
    let mut spec = base.clone();
    spec.duration_s = match step.rate {
        _ if bits => base.duration_s,
        Some(r) => s.window_s(r),
        None => s.min_window_s,
    };
    if bits {
        spec.rate_bps = step.rate;
    } else {
        spec.rate = step.rate;
    }
    spec
}

/// The error of the last step run.
fn step_error(kept: &[(Option<f64>, TestResult)]) -> String {
    kept.last()
        .and_then(|(_, r)| r.iterations.iter().find_map(|i| i.error.clone()))
        .unwrap_or_else(|| "no reason given".into())
}

/// A step's iterations: as many as the user asked, and up to three while
/// an open loop's verdict is within noise. The peak runs once.
fn step_confidence(c: Confidence, step: Step) -> Confidence {
    match step.rate {
        None => Confidence {
            min: 1,
            max: 1,
            ..c
        },
        Some(_) => Confidence {
            min: c.min.max(1),
            max: c.max.max(MAX_REPEATS),
            ..c
        },
    }
}

/// What one step says: its figures, whether it met the target, and why.
fn judge(
    s: &SearchSpec,
    spec: &TestSpec,
    step: Step,
    n: u32,
    summary: &Summary,
    result: &TestResult,
) -> SearchPoint {
    // A kind whose headline is packets (udp-stream) achieves packets sent.
    let packets = crate::workload::main_metric(spec) == MainMetric::PacketRate;
    let bits = s.target.metric.bits();
    let achieved = match (packets, &summary.udp, &summary.search_figure) {
        (_, _, Some(f)) if f.achieved.is_some() => f.achieved.unwrap_or_default(),
        (true, Some(u), _) => u.packets_sent_per_s,
        _ => summary.transactions_per_s,
    };
    let waits = summary.waits.as_ref();
    // An open loop's figure is the net latency (from the due time, less
    // the sender's own lateness: `Waits::net_us`) where it was measured.
    let net = waits
        .and_then(|w| w.net_us.as_ref())
        .map(crate::model::result::LatencyFields::from);
    let lat = match step.rate {
        Some(_) => net
            .as_ref()
            .or(summary.latency_corrected_us.as_ref())
            .or(summary.latency_us.as_ref()),
        None => summary.latency_us.as_ref(),
    };
    let figure = summary.search_figure.clone();
    // Which wait set the tail (the queue, or the agent's wake-ups), when
    // one did.
    let tail = match (waits, s.target.metric.quantile()) {
        (Some(w), Some(_)) if step.rate.is_some() => w.net_tail().map(|t| t.phrase()),
        _ => None,
    };
    let (client_cpu_pct, agent_cpu_pct, server_cpu_pct) = cpu_shares(spec, summary, result);
    let cpu_bound = [
        ("the client", client_cpu_pct),
        ("the agent", agent_cpu_pct),
        ("memcached", server_cpu_pct),
    ]
    .into_iter()
    .filter_map(|(who, pct)| pct.filter(|p| *p >= 90.0).map(|p| (who, p)))
    .max_by(|a, b| a.1.total_cmp(&b.1))
    .map(|(who, p)| format!("{who} ({p:.0}% of the cores it could use)"));
    let name = s.target.metric.name();
    let value = figure.as_ref().map(|f| f.value);
    let (met, why) = match step.rate {
        None => (
            false,
            format!(
                "{}: {}{}",
                if bits { "saturating" } else { "closed loop" },
                s.target.fmt_rate(achieved),
                value.map_or(String::new(), |v| format!(", {name} {}", fmt_figure(s, v)))
            ),
        ),
        Some(r) if !kept_up(r, achieved) && bits => (
            false,
            format!(
                "carried {:.0}% of the offered load: the path (or the server) cannot carry it",
                100.0 * achieved / r.max(1e-9),
            ),
        ),
        Some(r) if !kept_up(r, achieved) => (
            false,
            format!(
                "achieved {:.0}% of the offered rate: the generator fell behind{}",
                100.0 * achieved / r.max(1e-9),
                cpu_bound
                    .as_ref()
                    .map_or(String::new(), |b| format!("; {b} was CPU bound"))
            ),
        ),
        Some(_) if !summary.status.is_ok() => (
            false,
            format!(
                "the step ended early: {}",
                result
                    .iterations
                    .iter()
                    .find_map(|i| i.error.clone())
                    .unwrap_or_default()
            ),
        ),
        Some(_) => match &figure {
            None => (false, format!("no {name} measured")),
            Some(f) => figure_verdict(s, f, summary.iterations, tail.as_deref()),
        },
    };
    SearchPoint {
        step: n,
        phase: step.phase,
        bits,
        rate_per_s: step.rate,
        achieved_per_s: achieved,
        window_s: summary.duration_s,
        iterations: summary.iterations,
        samples: figure.as_ref().map_or(0, |f| f.samples),
        p50_us: lat.map(|l| l.p50),
        p90_us: lat.map(|l| l.p90),
        p99_us: lat.map(|l| l.p99),
        p999_us: lat.map(|l| l.p999),
        loss_pct: summary.udp.as_ref().map(|u| u.loss_pct),
        figure,
        met: met && step.phase != SearchPhase::Peak,
        why,
        client_cpu_pct,
        agent_cpu_pct,
        server_cpu_pct,
        cpu_bound,
        held_p99_us: waits.and_then(|w| w.held_us.as_ref()).map(|l| l.p99),
        send_late_p99_us: waits.and_then(|w| w.send_late_us.as_ref()).map(|l| l.p99),
        agent_read_delay_p99_us: waits
            .and_then(|w| w.agent_read_delay_us.as_ref())
            .map(|l| l.p99),
        client_read_delay_p99_us: waits
            .and_then(|w| w.client_read_delay_us.as_ref())
            .map(|l| l.p99),
        tail,
    }
}

/// A step's figure against the limit: met or not, in words ("p99 412 µs >
/// 300 µs (within noise: ...); set by ...", "rpm 2389 >= 1000 RPM").
fn figure_verdict(
    s: &SearchSpec,
    f: &crate::model::search::SearchFigure,
    runs: usize,
    tail: Option<&str>,
) -> (bool, String) {
    let limit = s.target.limit;
    let floor = s.target.metric.at_least();
    let noisy = f.low <= limit && f.high > limit && f.low < f.high;
    let met = match floor {
        true => f.value >= limit,
        false => f.value <= limit,
    };
    let sign = match (floor, met) {
        (true, true) => ">=",
        (true, false) => "<",
        (false, true) => "<=",
        (false, false) => ">",
    };
    let noise = if noisy {
        format!(
            " (within noise: {}..{} over {runs} runs)",
            fmt_figure(s, f.low),
            fmt_figure(s, f.high),
        )
    } else {
        String::new()
    };
    let set_by = tail
        .filter(|_| !met)
        .map_or(String::new(), |t| format!("; set by {t}"));
    (
        met,
        format!(
            "{} {} {sign} {}{noise}{set_by}",
            s.target.metric.name(),
            fmt_figure(s, f.value),
            s.target.limit_text(),
        ),
    )
}

/// A figure in a verdict: as the target reads it, an RPM bare (the
/// limit beside it says "RPM").
fn fmt_figure(s: &SearchSpec, v: f64) -> String {
    match s.target.metric {
        crate::model::search::SearchMetric::Rpm => format!("{v:.0}"),
        _ => s.target.fmt_value(v),
    }
}

/// Each end's CPU as a percent of the cores its workers could use (as the
/// `cpu_bound` key point counts it), and a server program's (memcached's) of its threads.
fn cpu_shares(
    spec: &TestSpec,
    summary: &Summary,
    result: &TestResult,
) -> (Option<f64>, Option<f64>, Option<f64>) {
    let share = |pct: Option<f64>, cpus: usize, workers: u32| {
        let cpus = cpus.max(1) as f64;
        // At most 100%: a mix's groups share an end's process, whose CPU
        // may exceed what one group's workers could use.
        pct.map(|p| (100.0 * (p / 100.0 * cpus) / (workers.max(1) as f64).min(cpus)).min(100.0))
    };
    let client = share(
        summary.cpu.client.process_util_pct,
        result.environment.client.cpus,
        spec.workers,
    );
    let agent = share(
        summary.cpu.agent.process_util_pct,
        result.environment.agent.cpus,
        spec.agent_workers,
    );
    // A server program the kind loads (memcached): of its threads.
    let server = crate::workload::served(spec, Some(summary)).and_then(|s| {
        let cpus = result.environment.agent.cpus.max(1);
        Some(100.0 * s.busy_cores? / s.threads.min(cpus) as f64)
    });
    (client, agent, server)
}
