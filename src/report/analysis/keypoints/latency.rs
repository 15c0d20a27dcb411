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
