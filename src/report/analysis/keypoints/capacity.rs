//! A capacity search in words: the highest offered rate that held the
//! target on what server, and what bound the load where it first missed.

use super::shared::KeyPoint;
use crate::model::result::TestResult;
use crate::report::analysis::landscape::Landscape;
use crate::report::analysis::search::{figure, searches};

/// What the server is, for the sentence: the server program the kind
/// loads (memcached) with its command, or the agent.
fn what(r: &TestResult) -> String {
    match crate::workload::served(&r.spec, None) {
        Some(crate::workload::Served {
            command: Some(cmd), ..
        }) => format!("{cmd} on {} cores", r.environment.agent.cpus),
        Some(s) => format!("the {} at the target", s.name),
        None => format!(
            "the agent ({} on {} cores)",
            r.spec.workload.name(),
            r.environment.agent.cpus
        ),
    }
}

/// One key point per searched point: the capacity in words, what bound
/// the load past it, and a search that found none.
pub fn capacity(l: &Landscape) -> Vec<KeyPoint> {
    let mut out = Vec::new();
    for r in &l.rows {
        let Some(res) = r.results.iter().find(|x| x.search.is_some()) else {
            continue;
        };
        let s = res.search.as_ref().expect("found above");
        let target = s.target.words();
        let fmt_rate = |v: f64| s.target.fmt_rate(v);
        let caps: Vec<f64> = searches(r)
            .iter()
            .filter_map(|s| s.capacity_per_s)
            .collect();
        let text = match s.capacity_per_s {
            Some(_) => {
                let lo = caps.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = caps.iter().copied().fold(0.0, f64::max);
                let range = if caps.len() > 1 && hi > lo * 1.0001 {
                    format!("{}-{} over {} runs", fmt_rate(lo), fmt_rate(hi), caps.len())
                } else {
                    fmt_rate(hi)
                };
                let beyond = match (&s.bound_by, s.missed_per_s) {
                    (Some(b), Some(m)) => format!(
                        "; beyond that ({} offered) {b} was CPU bound, so the limit there is {}, not the network",
                        fmt_rate(m),
                        if b.starts_with("memcached") { "memcached" } else { "that end" }
                    ),
                    (None, Some(m)) => {
                        let at = s.points.iter().find(|p| p.rate_per_s == Some(m));
                        format!(
                            "; at {} the {} reached {}",
                            fmt_rate(m),
                            s.target.metric.name(),
                            at.and_then(figure)
                                .map_or("-".into(), |v| s.target.fmt_value(v))
                        )
                    }
                    _ => String::new(),
                };
                let beyond = match &s.tail_set_by {
                    Some(t) => format!("{beyond}; there the tail was set by {t}"),
                    None => beyond,
                };
                format!(
                    "{}{}: {} holds {target} up to {range} (offered; resolution {}%, {} steps){beyond}.",
                    r.point.label(),
                    s.group
                        .as_ref()
                        .map_or(String::new(), |g| format!(" (group {g})")),
                    if s.target.metric.bits() {
                        "the path".to_string()
                    } else {
                        what(res)
                    },
                    s.resolution_pct,
                    s.points.len()
                )
            }
            None => format!(
                "{}: no offered rate met {target}: {}.",
                r.point.label(),
                s.stopped
            ),
        };
        // The advice once, with the first point.
        let first = out.is_empty();
        out.push(KeyPoint {
            rule: "capacity",
            text,
            advice: if !first { String::new() } else if s.target.metric.bits() { "Capacity here is the most load each way (the load-generating connections' goodput, capped) whose responsiveness met the floor; a step the path could not carry counts as a miss. Past the knee the bottleneck's queue grows and every round trip waits in it.".into() } else { "Capacity is the highest offered (open-loop) rate whose latency, measured from each request's intended send time less the client's own lateness in sending it, met the target; a step whose generator fell behind (achieved < 97% of offered) counts as a miss whatever its latency. Past the knee latency grows with the queue, not the load.".into() },
        });
    }
    out
}
