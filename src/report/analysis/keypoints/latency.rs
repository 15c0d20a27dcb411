//! Latency: a tail far above the median.

use super::shared::KeyPoint;
use crate::report::analysis::landscape::Landscape;
use crate::units::fmt_us;

/// A p99 far above the p50.
pub fn tail_latency(l: &Landscape) -> Vec<KeyPoint> {
    let mut out = Vec::new();
    for r in &l.rows {
        let (Some(p50), Some(p99)) = (r.mean("latency_p50_us"), r.mean("latency_p99_us")) else {
            continue;
        };
        if p50 > 0.0 && p99 / p50 >= 10.0 {
            out.push(KeyPoint {
                rule: "tail_latency",
                text: format!(
                    "{}: p99 latency is {:.0}x the median ({} vs {}).",
                    r.point.label(),
                    p99 / p50,
                    fmt_us(p99),
                    fmt_us(p50)
                ),
                advice: "A long tail on an idle path usually means scheduling: pin client and agent workers (--cpus, --agent-cpus) and compare; check softirq and steal time in the CPU columns.".into(),
            });
        }
    }
    out
}

/// An open loop whose tail one end's own scheduling set: the client's
/// sender (its sends left late) or the agent's reads (requests waited in
/// its socket for it to wake), from the waits each result records.
pub fn tail_source(l: &Landscape) -> Vec<KeyPoint> {
    let mut out = Vec::new();
    for r in &l.rows {
        let found = r.results.iter().find_map(|res| {
            let w = res.summary.waits.as_ref()?;
            let p99 = res
                .summary
                .latency_corrected_us
                .as_ref()
                .or(res.summary.latency_us.as_ref())?
                .p99;
            w.tail(p99)
        });
        let Some(t) = found else { continue };
        let (what, advice) = if t.who.ends_with("sender") {
            (
                format!(
                    "its sends left late by up to {} at p99, so the client host's own wake-ups (or a busy client) and not the network or the server set it",
                    fmt_us(t.part_p99_us)
                ),
                "A sender that sleeps to each due time pays its host's wake-up latency on every request; --pacing hybrid spins the last stretch where the client has a CPU to spare, or give the client a host of its own.",
            )
        } else {
            (
                format!(
                    "requests waited up to {} at p99 in the agent's socket before it woke to read them: the agent host's scheduling",
                    fmt_us(t.part_p99_us)
                ),
                "A server that sleeps between requests pays its host's wake-up latency (a halted CPU's exit, a busy core) on each one; --spin shows the path without it, pinning the agent to a quiet CPU shortens it.",
            )
        };
        out.push(KeyPoint {
            rule: "tail_source",
            text: format!(
                "{}: the p99 latency ({}) was set by {}: {what}.",
                r.point.label(),
                fmt_us(t.tail_p99_us),
                t.who
            ),
            advice: advice.into(),
        });
    }
    out
}

/// Every point's p99 against the study's response-time target (`[model]
/// latency_target`; seed 003: "response times <= 5 ms for an emulated DB
/// request" through IPsec): which points keep it and which do not.
pub fn against_target(l: &Landscape, target_s: Option<f64>) -> Vec<KeyPoint> {
    let Some(target_s) = target_s else {
        return Vec::new();
    };
    let target_us = target_s * 1e6;
    let measured: Vec<(String, f64)> = l
        .rows
        .iter()
        .filter_map(|r| r.mean("latency_p99_us").map(|p| (r.point.label(), p)))
        .collect();
    if measured.is_empty() {
        return Vec::new();
    }
    let mut over: Vec<&(String, f64)> = measured.iter().filter(|(_, p)| *p > target_us).collect();
    over.sort_by(|a, b| b.1.total_cmp(&a.1));
    let worst_within = measured
        .iter()
        .filter(|(_, p)| *p <= target_us)
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let mut text = format!(
        "p99 response time is within the {} target at {} of {} points",
        fmt_us(target_us),
        measured.len() - over.len(),
        measured.len()
    );
    if let Some((label, p)) = worst_within {
        text.push_str(&format!(" (the highest within: {} at {label})", fmt_us(*p)));
    }
    if over.is_empty() {
        text.push('.');
    } else {
        let list: Vec<String> = over
            .iter()
            .take(4)
            .map(|(label, p)| format!("{label} ({})", fmt_us(*p)))
            .collect();
        text.push_str(&format!(
            "; over it at {}{}.",
            list.join(", "),
            if over.len() > 4 { ", ..." } else { "" }
        ));
    }
    vec![KeyPoint {
        rule: "latency_target",
        text,
        advice: if over.is_empty() {
            "The target holds at every point measured; a longer window or --repeat shows whether it holds in the tail too.".into()
        } else {
            "Where p99 is over the target, see the tail key points and each result's CPU block: a CPU-bound end or a queue sets the tail.".into()
        },
    }]
}

#[cfg(test)]
mod target_tests {
    use super::against_target;
    use crate::measure::stats::estimate;
    use crate::report::analysis::landscape::{Landscape, Row};

    fn land(p99s: &[f64]) -> Landscape {
        let rows = p99s
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let mut values = std::collections::BTreeMap::new();
                values.insert("latency_p99_us", estimate(&[*p], 95.0));
                Row {
                    point: crate::study::sweep::Point {
                        index: i,
                        id: format!("p{i}"),
                        params: vec![("flows".into(), i.to_string())],
                        spec: Default::default(),
                        confidence: Default::default(),
                        groups: Vec::new(),
                    },
                    results: Vec::new(),
                    values,
                }
            })
            .collect();
        Landscape {
            rows,
            dims: vec!["flows".into()],
            line_rate_bps: None,
            line_rate_note: None,
            line_rate_measured: false,
            threshold: 0.9,
            window_rtt: false,
            model_note: None,
        }
    }

    #[test]
    fn p99_is_held_against_the_target() {
        assert!(against_target(&land(&[100.0]), None).is_empty());
        let k = against_target(&land(&[1200.0, 4800.0, 7100.0]), Some(0.005));
        assert_eq!(k.len(), 1);
        let t = &k[0].text;
        assert!(
            t.contains("within the 5.00 ms target at 2 of 3 points"),
            "{t}"
        );
        assert!(t.contains("over it at flows=2 (7.10 ms)"), "{t}");
        let k = against_target(&land(&[1200.0]), Some(0.005));
        assert!(!k[0].text.contains("over it"), "{}", k[0].text);
    }
}
