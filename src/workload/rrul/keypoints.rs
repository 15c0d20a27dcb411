//! rrul (flent's Realtime Response Under Load): what the load added to the
//! probes' round trips at each point, and across points which kept it
//! smallest.

use crate::model::points::{KeyPoint, PointView};
use crate::units::{fmt_bps, fmt_us};

/// Where the probes wait, and what shortens the wait.
const ADVICE: &str = "What a probe gains under load is the time it waits in queues behind the streams' bytes: at the bottleneck (a lab's lab.queue, a router's buffer) and in the senders' socket buffers. A shorter queue or an AQM at the bottleneck, or a congestion control that keeps its queue short (--cc bbr), keeps it small; sweep them in a study and compare loaded_p99_us.";

/// (idle p50, loaded p50, loaded p99) of an rrul row.
fn figures(r: &PointView) -> Option<(f64, f64, f64)> {
    Some((
        r.mean("idle_p50_us")?,
        r.mean("loaded_p50_us")?,
        r.mean("loaded_p99_us")?,
    ))
}

/// Each rrul point's probe idle and loaded, and which point added least.
pub fn latency_under_load(points: &[PointView]) -> Vec<KeyPoint> {
    let rows: Vec<(&PointView, (f64, f64, f64))> = points
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
        // The advice once, on the first point: it is the same for every one.
        let advice = if out.is_empty() { ADVICE } else { "" };
        out.push(KeyPoint {
            rule: "latency_under_load",
            text: format!(
                "{}: under load{load} the TCP probe's round trip went from {} idle to {} at p50{growth} and {} at p99.",
                r.label(),
                fmt_us(*idle),
                fmt_us(*p50),
                fmt_us(*p99)
            ),
            advice: advice.into(),
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
                best.0.label(),
                fmt_us(added(&best.1).max(0.0)),
                worst.0.label(),
                fmt_us(added(&worst.1).max(0.0))
            ),
            advice: String::new(),
        });
    }
    out
}

/// Why queue management shortens the wait, and where it goes.
const QUEUE_ADVICE: &str = "A FIFO delays every packet by the whole queue the bulk flows keep full; CoDel drops (or ECN-marks) until packets wait about its 5 ms target, and FQ-CoDel also gives each flow its own queue, so a sparse flow (a probe, a request, DNS, a game) waits only for the packet on the wire. Linux has fq_codel as a qdisc (tc qdisc replace dev DEV root fq_codel) on the bottleneck's egress; a queue only forms where the rate drops, so that is where it belongs.";

/// What the discipline (`lab.aqm`) does to the probes: for points that
/// differ only in it, the FIFO's wait under load beside what CoDel and
/// FQ-CoDel kept, at what share of the FIFO's throughput (issue 25's
/// sentence: "with a 4 MB FIFO the probes wait X ms under load; fq_codel
/// keeps p99 within Y ms of idle at Z% of the throughput").
pub fn queue_discipline(points: &[PointView]) -> Vec<KeyPoint> {
    const AXIS: &str = "lab.aqm";
    let total = |r: &PointView| Some(r.mean("up_bps")? + r.mean("down_bps")?);
    let mut out = Vec::new();
    let mut seen = Vec::new();
    for fifo in points.iter().filter(|r| r.param(AXIS) == Some("fifo")) {
        let rest = fifo.label_except(AXIS);
        if seen.contains(&rest) {
            continue;
        }
        seen.push(rest.clone());
        let (Some((idle50, p50, _)), Some(fifo_bps)) = (figures(fifo), total(fifo)) else {
            continue;
        };
        let Some(fifo99) = fifo.mean("loaded_p99_us") else {
            continue;
        };
        let queue = fifo
            .results
            .iter()
            .find_map(|t| t.lab.as_ref()?.spec.as_ref()?.links[0].queue_bytes)
            .map_or(String::new(), |q| {
                format!("{} ", crate::units::fmt_bytes(q))
            });
        let mut parts = Vec::new();
        for kind in ["fq_codel", "codel"] {
            let Some(r) = points
                .iter()
                .find(|r| r.param(AXIS) == Some(kind) && r.label_except(AXIS) == rest)
            else {
                continue;
            };
            let (Some(idle99), Some(p99), Some(bps)) =
                (r.mean("idle_p99_us"), r.mean("loaded_p99_us"), total(r))
            else {
                continue;
            };
            parts.push(format!(
                "{kind} keeps p99 within {} of idle at {:.0}% of the FIFO's throughput",
                fmt_us((p99 - idle99).max(0.0)),
                100.0 * bps / fifo_bps
            ));
        }
        if parts.is_empty() {
            continue;
        }
        let at = if rest.is_empty() {
            String::new()
        } else {
            format!("At {rest}: ")
        };
        out.push(KeyPoint {
            rule: "queue_discipline",
            text: format!(
                "{at}with a {queue}FIFO the probes wait {} under load (p50; p99 {}); {}.",
                fmt_us((p50 - idle50).max(0.0)),
                fmt_us(fifo99),
                parts.join("; ")
            ),
            advice: if out.is_empty() { QUEUE_ADVICE } else { "" }.into(),
        });
    }
    out
}
