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
