//! An rrul result as text, the way a flent user reads one: the timeline
//! (each probe's round trips and the streams' throughput per interval,
//! flent's plot as a table), then each probe idle and loaded with what
//! the load added ("+12.3 ms under load, 41x idle"), and the streams'
//! throughput each way over the loaded phase.

use std::fmt::Write;

use super::params::{LatencyUnderLoad, ProbeLatency};
use crate::model::sample::LatencySummary;
use crate::units::{fmt_bps, fmt_us};

/// The probes' names in the table's heading, short: a request/response
/// probe over another transport by its transport ("udp").
fn short(probe: &str) -> &str {
    probe.strip_suffix("-rr").unwrap_or(probe)
}

/// The timeline as a table, one line per interval.
pub fn table(o: &mut String, l: &LatencyUnderLoad) {
    if l.series.is_empty() {
        return;
    }
    let mut head = format!("  {:<12} {:<7}", "time", "phase");
    for p in &l.probes {
        let n = short(&p.probe);
        let _ = write!(
            head,
            " {:>10} {:>10}",
            format!("{n} p50"),
            format!("{n} p99")
        );
    }
    let _ = write!(head, " {:>13} {:>13}", "up", "down");
    let _ = writeln!(o, "{head}");
    for s in &l.series {
        let mut line = format!("  {:>5.1}-{:<5.1}s {:<7}", s.start_s, s.end_s, s.phase);
        for p in &l.probes {
            let (p50, p99) = match s.latency_us.get(&p.probe) {
                Some(x) => (fmt_us(x.p50), fmt_us(x.p99)),
                None => ("-".into(), "-".into()),
            };
            let _ = write!(line, " {p50:>10} {p99:>10}");
        }
        let bps = |v: Option<f64>| v.map(fmt_bps).unwrap_or_else(|| "-".into());
        let _ = write!(line, " {:>13} {:>13}", bps(s.up_bps), bps(s.down_bps));
        let _ = writeln!(o, "{line}");
    }
}

/// "+12.04 ms (41x idle)" (or "-2.0 µs (0.97x idle)").
fn added(idle: f64, loaded: f64) -> String {
    let d = loaded - idle;
    let sign = if d < 0.0 { "-" } else { "+" };
    let times = if idle > 0.0 {
        format!(" ({}x idle)", ratio(loaded / idle))
    } else {
        String::new()
    };
    format!("{sign}{}{times}", fmt_us(d.abs()))
}

/// A ratio with the digits it needs: 0.93, 1.4, 41.
fn ratio(r: f64) -> String {
    if r >= 10.0 {
        format!("{r:.0}")
    } else if r >= 1.0 {
        format!("{r:.1}")
    } else {
        format!("{r:.2}")
    }
}

fn p50_p99(s: &Option<LatencySummary>) -> String {
    match s {
        Some(s) => format!("{} / {}", fmt_us(s.p50), fmt_us(s.p99)),
        None => "-".into(),
    }
}

/// One probe's line: idle and loaded p50/p99, and what the load added.
fn probe_line(p: &ProbeLatency) -> String {
    let mut line = format!(
        "idle {:<21} loaded {:<21}",
        p50_p99(&p.idle_us),
        p50_p99(&p.loaded_us)
    );
    if let (Some(i), Some(l)) = (&p.idle_us, &p.loaded_us) {
        let _ = write!(
            line,
            " under load: p50 {}, p99 {}",
            added(i.p50, l.p50),
            added(i.p99, l.p99)
        );
    }
    if p.idle_lost + p.loaded_lost > 0 {
        let _ = write!(
            line,
            "; timed out {} idle, {} loaded",
            p.idle_lost, p.loaded_lost
        );
    }
    line
}

/// Each probe idle and loaded, and the streams each way.
pub fn lines(o: &mut String, l: &LatencyUnderLoad) {
    for p in &l.probes {
        let name = if p.probe == "rr" {
            "rr (tcp)".to_string()
        } else {
            p.probe.clone()
        };
        let _ = writeln!(o, "  {name:<12} {}", probe_line(p).trim_end());
    }
    let _ = writeln!(
        o,
        "  {:<12} up {}, down {} ({} each way, over the {} s loaded phase)",
        "throughput",
        fmt_bps(l.up_bps),
        fmt_bps(l.down_bps),
        crate::units::plural(l.streams as u64, "stream", "streams"),
        l.loaded_s
    );
    let phases: Vec<String> = l
        .phases
        .iter()
        .map(|p| format!("{} {}-{} s", p.name, p.start_s, p.end_s))
        .collect();
    let _ = writeln!(o, "  {:<12} {}", "phases", phases.join(", "));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_added_latency_reads_as_flent_users_say_it() {
        assert_eq!(added(300.0, 12_345.0), "+12.04 ms (41x idle)");
        assert_eq!(added(80.0, 78.0), "-2.0 µs (0.97x idle)");
        assert_eq!(added(0.0, 10.0), "+10.0 µs");
    }
}
