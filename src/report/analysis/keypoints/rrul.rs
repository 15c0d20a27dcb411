//! rrul (flent's Realtime Response Under Load): what the load added to the
//! probes' round trips at each point, and across points which kept it
//! smallest.

use super::shared::KeyPoint;
use crate::report::analysis::landscape::{Landscape, Row};
use crate::units::{fmt_bps, fmt_us};

/// Where the probes wait, and what shortens the wait.
const ADVICE: &str = "What a probe gains under load is the time it waits in queues behind the streams' bytes: at the bottleneck (a lab's lab.queue, a router's buffer) and in the senders' socket buffers. A shorter queue or an AQM at the bottleneck, or a congestion control that keeps its queue short (--cc bbr), keeps it small; sweep them in a study and compare loaded_p99_us.";

/// (idle p50, loaded p50, loaded p99) of an rrul row.
fn figures(r: &Row) -> Option<(f64, f64, f64)> {
    Some((
        r.mean("idle_p50_us")?,
        r.mean("loaded_p50_us")?,
        r.mean("loaded_p99_us")?,
    ))
}

/// Each rrul point's probe idle and loaded, and which point added least.
pub fn latency_under_load(l: &Landscape) -> Vec<KeyPoint> {
    let rows: Vec<(&Row, (f64, f64, f64))> = l
        .rows
        .iter()
        .filter_map(|r| Some((r, figures(r)?)))
        .collect();
    let mut out = Vec::new();
    for (r, (idle, p50, p99)) in &rows {
        let load = match (r.mean("up_bps"), r.mean("down_bps")) {
            (Some(u), Some(d)) => format!(" ({} up, {} down)", fmt_bps(u), fmt_bps(d)),
            _ => String::new(),
        };
        let growth = if *idle > 0.0 {
            format!(" ({:.1}x)", p50 / idle)
        } else {
            String::new()
        };
        out.push(KeyPoint {
            rule: "latency_under_load",
            text: format!(
                "{}: under load{load} the TCP probe's round trip went from {} idle to {} at p50{growth} and {} at p99.",
                r.point.label(),
                fmt_us(*idle),
                fmt_us(*p50),
                fmt_us(*p99)
            ),
            advice: ADVICE.into(),
        });
    }
    if rows.len() >= 2 {
        let added = |f: &(f64, f64, f64)| f.1 - f.0;
        let best = rows
            .iter()
            .min_by(|a, b| added(&a.1).total_cmp(&added(&b.1)))
            .expect("two rows");
        let worst = rows
            .iter()
            .max_by(|a, b| added(&a.1).total_cmp(&added(&b.1)))
            .expect("two rows");
        out.push(KeyPoint {
            rule: "latency_under_load",
            text: format!(
                "The load added least at {} (+{} at p50) and most at {} (+{}).",
                best.0.point.label(),
                fmt_us(added(&best.1).max(0.0)),
                worst.0.point.label(),
                fmt_us(added(&worst.1).max(0.0))
            ),
            advice: ADVICE.into(),
        });
    }
    out
}
