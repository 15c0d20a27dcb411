//! A capacity search and an auto-sized window, as text: a line per step
//! as it finishes, the steps in rate order with the capacity at the end,
//! and how long an auto window ran and why it stopped.

use std::fmt::Write;

use crate::model::result::TestResult;
use crate::model::search::{SearchPhase, SearchPoint, SearchResult};
use crate::units::{fmt_bps, fmt_rate, fmt_us};

fn opt_us(v: Option<f64>) -> String {
    v.map_or("-".into(), fmt_us)
}

/// The capacity in one sentence (`SearchResult::sentence`).
pub fn capacity_sentence(s: &SearchResult) -> String {
    s.sentence()
}

/// The search's steps in rate order and its capacity.
pub fn lines(o: &mut String, r: &TestResult) {
    if let Some(s) = &r.search {
        let _ = writeln!(
            o,
            "\ncapacity search {} (resolution {}%, {} steps; {})",
            s.target,
            s.resolution_pct,
            s.points.len(),
            s.stopped
        );
        let mut pts: Vec<&SearchPoint> = s.points.iter().collect();
        pts.sort_by(|a, b| {
            a.rate_per_s
                .unwrap_or(f64::INFINITY)
                .total_cmp(&b.rate_per_s.unwrap_or(f64::INFINITY))
        });
        if s.target.metric.bits() {
            rpm_steps(o, &pts);
        } else {
            latency_steps(o, &pts);
        }
        let _ = writeln!(o, "{}", capacity_sentence(s));
        let _ = writeln!(
            o,
            "the figures above the search table are the step at the capacity{}",
            if s.target.metric.quantile().is_some() {
                "; latency from each request's intended send time, less the client's own lateness in sending it (net)"
            } else if s.target.metric.bits() {
                "; each step is one responsiveness test whose load-generating connections together carry at most the offered load each way"
            } else {
                ""
            }
        );
    }
    if let Some(a) = &r.summary.auto {
        let _ = writeln!(
            o,
            "  {:<12} ran {:.1} s; {} ({} warm-up interval{} found, {:.1} s, left out; {} kept, trend z {:+.2}, mean ±{:.1}%)",
            "duration",
            a.ran_s,
            a.stopped.words(),
            a.warmup_intervals,
            if a.warmup_intervals == 1 { "" } else { "s" },
            a.warmup_s.max(0.0),
            a.intervals,
            a.trend_z,
            a.half_width_pct
        );
        if let Some([lo, hi]) = a.levels {
            let _ = writeln!(
                o,
                "  {:<12} the intervals sat at two levels, {} and {} ({:.0}% apart), so no window this long narrows the mean: on one host the ends' threads moving between sharing a CPU and not do this; pin them (--cpus, --agent-cpus) or give a longer --max-duration",
                "",
                fmt_level(lo),
                fmt_level(hi),
                100.0 * (hi - lo) / lo.abs().max(1e-9)
            );
        }
    }
}

/// A latency search's steps: offered and achieved rates, the percentiles.
fn latency_steps(o: &mut String, pts: &[&SearchPoint]) {
    let _ = writeln!(
        o,
        "  {:>4} {:<7} {:>11} {:>11} {:>9} {:>9} {:>9} {:>9} {:>4} {:>8}  verdict",
        "step", "phase", "offered", "achieved", "p50", "p90", "p99", "p99.9", "runs", "samples"
    );
    for p in pts {
        let _ = writeln!(
            o,
            "  {:>4} {:<7} {:>11} {:>11} {:>9} {:>9} {:>9} {:>9} {:>4} {:>8}  {}{}",
            p.step,
            p.phase.name(),
            p.rate_per_s.map_or("closed".into(), fmt_rate),
            fmt_rate(p.achieved_per_s),
            opt_us(p.p50_us),
            opt_us(p.p90_us),
            opt_us(p.p99_us),
            opt_us(p.p999_us),
            p.iterations,
            p.samples,
            verdict(p),
            p.why
        );
    }
}

/// An RPM search's steps: the load offered and carried each way, the RPM
/// and the probes it was read from.
fn rpm_steps(o: &mut String, pts: &[&SearchPoint]) {
    let _ = writeln!(
        o,
        "  {:>4} {:<7} {:>14} {:>14} {:>9} {:>8}  verdict",
        "step", "phase", "offered load", "carried", "RPM", "probes"
    );
    for p in pts {
        let _ = writeln!(
            o,
            "  {:>4} {:<7} {:>14} {:>14} {:>9} {:>8}  {}{}",
            p.step,
            p.phase.name(),
            p.rate_per_s.map_or("saturating".into(), fmt_bps),
            fmt_bps(p.achieved_per_s),
            p.figure
                .as_ref()
                .map_or("-".into(), |f| format!("{:.0}", f.value)),
            p.samples,
            verdict(p),
            p.why
        );
    }
}

fn verdict(p: &SearchPoint) -> &'static str {
    match (p.phase, p.met) {
        (SearchPhase::Peak, _) => "",
        (_, true) => "met: ",
        (_, false) => "MISS: ",
    }
}

/// A level of the main figure, as its unit reads (a rate or bit/s).
fn fmt_level(v: f64) -> String {
    if v >= 1e6 {
        crate::units::fmt_bps(v)
    } else {
        crate::units::fmt_rate(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::auto::{AutoRecord, AutoStop};

    fn with_auto(levels: Option<[f64; 2]>) -> String {
        let mut r = TestResult::default();
        r.summary.auto = Some(AutoRecord {
            ran_s: 20.0,
            warmup_intervals: 0,
            warmup_s: 0.0,
            intervals: 100,
            stopped: AutoStop::BoundWide,
            trend_z: 0.3,
            mean: 17_000.0,
            half_width_pct: 5.7,
            levels,
        });
        let mut o = String::new();
        lines(&mut o, &r);
        o
    }

    #[test]
    fn an_auto_window_at_two_levels_says_so_and_how_to_avoid_it() {
        let o = with_auto(Some([14_600.0, 19_200.0]));
        assert!(
            o.contains("reached its bound with the confidence target not met"),
            "{o}"
        );
        assert!(
            o.contains("two levels, 14.6k/s and 19.2k/s (32% apart)"),
            "{o}"
        );
        assert!(o.contains("--cpus, --agent-cpus"), "{o}");
        assert!(!with_auto(None).contains("two levels"));
    }
}
