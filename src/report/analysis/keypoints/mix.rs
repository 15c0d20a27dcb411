//! Mixed tests: what a latency group's round trips cost beside the load the
//! other groups put on the same path, against the same group alone where
//! the study ran it alone too.

use super::shared::KeyPoint;
use crate::report::analysis::landscape::{Landscape, Row};
use crate::units::{fmt_bps, fmt_us};

/// Whether `r` is a group of a mixed point.
fn is_group(r: &Row) -> bool {
    r.point.params.iter().any(|(k, _)| k == "group")
}

/// The same workload with the same sizes, rate and flows, run alone.
fn alone<'a>(l: &'a Landscape, g: &Row) -> Option<&'a Row> {
    let s = &g.point.spec;
    l.rows.iter().find(|r| {
        let a = &r.point.spec;
        !is_group(r)
            && a.workload == s.workload
            && a.request == s.request
            && a.response == s.response
            && a.rate == s.rate
            && a.flows == s.flows
            && a.tls.is_some() == s.tls.is_some()
            && a.lab == s.lab
    })
}

/// A latency group's p99 beside the other groups' load (and alone).
pub fn latency_beside_load(l: &Landscape) -> Vec<KeyPoint> {
    let mut out = Vec::new();
    for r in l.rows.iter().filter(|r| is_group(r)) {
        let (Some(p50), Some(p99), Some(load)) = (
            r.mean("latency_p50_us"),
            r.mean("latency_p99_us"),
            r.mean("load_beside_bps"),
        ) else {
            continue;
        };
        if load <= 0.0 {
            continue;
        }
        let base = alone(l, r).and_then(|a| Some((a, a.mean("latency_p99_us")?)));
        let text = match base {
            Some((a, p99_alone)) if p99_alone > 0.0 => format!(
                "{}: p99 latency {} beside {} of other traffic, {:.1}x its {} alone ({}); p50 {}.",
                r.point.label(),
                fmt_us(p99),
                fmt_bps(load),
                p99 / p99_alone,
                fmt_us(p99_alone),
                a.point.label(),
                fmt_us(p50)
            ),
            _ => format!(
                "{}: p99 latency {} (p50 {}) beside {} of other traffic on the same window.",
                r.point.label(),
                fmt_us(p99),
                fmt_us(p50),
                fmt_bps(load)
            ),
        };
        out.push(KeyPoint {
            rule: "latency_beside_load",
            text,
            advice: "What a round trip gains beside bulk traffic is queueing behind the other groups' bytes (socket buffers, the qdisc, a link's queue): shrink the bulk flows' window (--window) or their number and watch it follow; run the latency group alone as a case of the same study for the baseline.".into(),
        });
    }
    out
}
