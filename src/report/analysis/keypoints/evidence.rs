//! How far the numbers carry a conclusion: points without a result (or with
//! a partial one), and confidence intervals that are missing or too wide.

use super::shared::KeyPoint;
use crate::model::spec::MainMetric;
use crate::report::analysis::landscape::{Landscape, Row};

/// Points this host could not run (a congestion control its kernel
/// lacks), grouped by reason: the study went on without them.
pub fn unavailable(m: &crate::study::folder::Manifest) -> Vec<KeyPoint> {
    let mut by_reason: Vec<(String, Vec<String>)> = Vec::new();
    for p in &m.points {
        if !crate::report::analysis::landscape::unavailable(m, &p.id) {
            continue;
        }
        let why = m
            .runs
            .iter()
            .find(|r| r.point == p.id)
            .and_then(|r| r.error.clone())
            .unwrap_or_default();
        match by_reason.iter_mut().find(|(w, _)| *w == why) {
            Some((_, labels)) => labels.push(p.label()),
            None => by_reason.push((why, vec![p.label()])),
        }
    }
    by_reason
        .into_iter()
        .map(|(why, labels)| KeyPoint {
            rule: "unavailable",
            text: format!(
                "{} point{} could not run here: {why}. Not run: {}{}.",
                labels.len(),
                if labels.len() == 1 { "" } else { "s" },
                labels.iter().take(4).cloned().collect::<Vec<_>>().join(", "),
                if labels.len() > 4 { ", ..." } else { "" }
            ),
            advice: "Run those points where what the reason names is present (they are in the study's file); the others are measured.".into(),
        })
        .collect()
}

/// Points without a result, or with a partial one.
pub fn missing(l: &Landscape) -> Vec<KeyPoint> {
    let none: Vec<String> = l
        .rows
        .iter()
        .filter(|r| r.results.is_empty())
        .map(|r| r.point.label())
        .collect();
    let partial = l
        .rows
        .iter()
        .filter(|r| r.results.iter().any(|x| !x.summary.status.is_ok()))
        .count();
    let mut out = Vec::new();
    if !none.is_empty() {
        out.push(KeyPoint {
            rule: "missing",
            text: format!(
                "{} of {} points have no result yet (the study stopped early): {}{}.",
                none.len(),
                l.rows.len(),
                none.iter().take(4).cloned().collect::<Vec<_>>().join(", "),
                if none.len() > 4 { ", ..." } else { "" }
            ),
            advice:
                "Continue with `linerate study run STUDY --resume DIR`; finished points are kept."
                    .into(),
        });
    }
    if partial > 0 {
        out.push(KeyPoint {
            rule: "missing",
            text: format!("{partial} points hold a partial result (a test ended early)."),
            advice: "See each result's error; rerun those points.".into(),
        });
    }
    out
}

/// Points whose confidence interval is wider than the target, or that ran
/// once and have none.
pub fn noise(l: &Landscape) -> Vec<KeyPoint> {
    let mut wide: Vec<(String, f64, f64, f64)> = Vec::new();
    let mut single = 0;
    let mut measured = 0;
    for r in &l.rows {
        let key = match crate::workload::main_metric(&r.point.spec) {
            crate::model::spec::MainMetric::Throughput => "throughput_bps",
            crate::model::spec::MainMetric::TransactionRate => "transactions_per_s",
            crate::model::spec::MainMetric::PacketRate => "packets_per_s",
        };
        let Some(e) = r.value(key) else { continue };
        measured += 1;
        match e.half_width_pct {
            Some(hw) if e.n > 1 => {
                let target = r.point.confidence.width_pct / 2.0;
                if hw > target {
                    wide.push((r.point.label(), hw, target, e.level_pct));
                }
            }
            _ => single += 1,
        }
    }
    let mut out = Vec::new();
    if measured > 0 && single == measured {
        out.push(KeyPoint {
            rule: "noise",
            text: "Every point ran once: no confidence intervals, so differences of 10-30% between points may be noise on a shared machine.".into(),

            advice: "Repeat the study (--repeat 5 --shuffle) or each test (iterations = \"3..10\" in [test]) for error bars.".into(),
        });
    }
    if let Some(worst) = wide.iter().max_by(|a, b| a.1.total_cmp(&b.1)) {
        out.push(KeyPoint {
            rule: "noise",
            text: format!(
                "{} of {measured} points have a {:.0}% confidence interval wider than ±{:.1}% (worst: {} at ±{:.1}%): treat their differences with care.",
                wide.len(),
                worst.3,
                worst.2,
                worst.0,
                worst.1
            ),
            advice: "Add repetitions (--repeat, --shuffle spreads drift), lengthen the window (duration), or pin the ends (cpus, agent_cpus).".into(),
        });
    }
    out
}

/// A point whose window completed fewer transactions than it keeps under
/// way at once (flows x outstanding requests): (completed in its least
/// window, under way). Its rate and CPU per transaction are set by the
/// window's edges (transfers begun before it, or still going at its end,
/// are not counted, but their bytes and CPU are), not by the steady state:
/// 16 connections with 8 pages of 1 MiB under way each on a 100 Mbit/s
/// link finish none in 1.5 s while each page costs what it costs.
pub fn edge_bound(r: &Row) -> Option<(u64, u64)> {
    if crate::workload::main_metric(&r.point.spec) != MainMetric::TransactionRate {
        return None;
    }
    let spec = &r.point.spec;
    let under_way = u64::from(spec.flows) * u64::from(spec.outstanding.max(1));
    let done = r
        .results
        .iter()
        .flat_map(|x| x.iterations.iter().map(|i| i.transactions))
        .min()?;
    (done < under_way).then_some((done, under_way))
}

/// Whether a point's rate and CPU per transaction compare with others'
/// (not `edge_bound`): what every cost comparison (per transaction, TLS
/// against clear, QUIC against TLS over TCP) keeps.
pub fn steady(r: &Row) -> bool {
    edge_bound(r).is_none()
}

/// The points `edge_bound` finds, named, and left out of the comparisons
/// of CPU per transaction.
pub fn window_edges(l: &Landscape) -> Vec<KeyPoint> {
    let bound: Vec<String> = l
        .rows
        .iter()
        .filter_map(|r| {
            let (done, under_way) = edge_bound(r)?;
            Some(format!("{} ({done} of {under_way})", r.point.label()))
        })
        .collect();
    if bound.is_empty() {
        return vec![];
    }
    vec![KeyPoint {
        rule: "window_edges",
        text: format!(
            "{} point{} completed fewer transactions in a window than {} under way at once (flows x outstanding): {}{}. Their rates and CPU per transaction are set by the window's edges, not a steady state, and are left out of the comparisons of CPU per transaction.",
            bound.len(),
            if bound.len() == 1 { "" } else { "s" },
            if bound.len() == 1 { "it keeps" } else { "they keep" },
            bound.iter().take(4).cloned().collect::<Vec<_>>().join(", "),
            if bound.len() > 4 { ", ..." } else { "" }
        ),
        advice: "Lengthen the window (duration) until each point completes many more transactions than it keeps under way, or keep fewer large responses under way (outstanding, flows).".into(),
    }]
}
