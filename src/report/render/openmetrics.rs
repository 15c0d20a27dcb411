//! A result as OpenMetrics text (`linerate run ... --metrics FILE`), for
//! the dashboards people already watch: every metric a study file can
//! name (`report::analysis::metrics`) that the result has, as a gauge in
//! base units (seconds, bytes, ratios: Prometheus's naming rules, which
//! promtool checks), and the client's latency as a histogram
//! (`summary.latency_buckets`: fixed bounds from 1 µs to 10 s), not only
//! its percentiles. A result without buckets (one written before they
//! were kept, or a kind with no latency histogram) gives its percentiles
//! as a summary.
//!
//! Labels are bounded on purpose: `workload` and `lab` (empty without
//! one), nothing per flow, per run or per host, so a scrape or a push per
//! run adds no series. The exporters of iperf3 and smokeping's prober
//! give averages without the test's context; the context here is the
//! metric names and these two labels.

use std::fmt::Write;

use crate::model::metric::{Metric, Unit};
use crate::model::result::TestResult;

/// Every metric's prefix.
const PREFIX: &str = "linerate_";

/// The name in base units and the divisor that converts a value to them
/// (a division, so that 5 µs is 0.000005 s, not 0.0000049999...). Bits
/// are bytes here: Prometheus's base unit (promtool says so).
fn base(m: &Metric) -> (String, f64) {
    let key = m.key;
    let strip = |suffix: &str| key.strip_suffix(suffix).unwrap_or(key).to_string();
    let (stem, unit, div) = match m.unit {
        Unit::BitsPerSecond => (strip("_bps"), "bytes_per_second", 8.0),
        Unit::PerSecond => (strip("_per_s"), "per_second", 1.0),
        // CPU per packet (`client_us_per_packet`): seconds per packet.
        Unit::Micros if key.contains("_us_per_") => {
            let (who, per) = key.split_once("_us_per_").unwrap_or((key, ""));
            return (format!("{PREFIX}{who}_cpu_seconds_per_{per}"), 1e6);
        }
        Unit::Micros => (strip("_us"), "seconds", 1e6),
        Unit::Percent => (strip("_pct"), "ratio", 100.0),
        Unit::MicrosPerKb => (strip("_us_per_kb"), "cpu_seconds_per_kibibyte", 1e6),
        Unit::MicrosPerTx => (strip("_us_per_tx"), "cpu_seconds_per_transaction", 1e6),
        Unit::Seconds => (strip("_s"), "seconds", 1.0),
        Unit::Millis => (strip("_ms"), "seconds", 1e3),
        Unit::Bytes => (strip("_bytes"), "bytes", 1.0),
        Unit::Ratio => (strip("_ratio"), "ratio", 1.0),
        Unit::MegabytesPerSecond => (strip("_mb_per_s"), "bytes_per_second", 1e-6),
        // Round trips per minute is the figure's own unit (RPM).
        Unit::PerMinute => (key.to_string(), "", 1.0),
    };
    let name = match unit {
        "" => format!("{PREFIX}{stem}"),
        u => format!("{PREFIX}{stem}_{u}"),
    };
    (name, div)
}

/// A figure of metric `key` as a gauge sample: its name in base units,
/// the metric's title (for HELP), and the value in those units. None: no
/// metric of the catalogue has that key.
pub fn gauge(key: &str, value: f64) -> Option<(String, &'static str, f64)> {
    let m = crate::report::analysis::metrics::find(key)?;
    let (name, div) = base(m);
    Some((name, m.title, value / div))
}

/// A label value, escaped as the text format asks.
pub fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A float as the text format writes it.
pub fn num(v: f64) -> String {
    if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

/// `r` as OpenMetrics text, ending with `# EOF`.
pub fn render(r: &TestResult) -> String {
    let mut o = String::new();
    let labels = format!(
        "workload=\"{}\",lab=\"{}\"",
        escape(&r.summary.workload),
        escape(r.lab.as_ref().map_or("", |l| l.name.as_str()))
    );
    let mut seen = std::collections::HashSet::new();
    for (m, mean) in crate::report::analysis::metrics::means(r) {
        let (name, div) = base(m);
        // Two keys of one stem and unit would be one series twice.
        if !seen.insert(name.clone()) {
            continue;
        }
        let _ = writeln!(o, "# TYPE {name} gauge");
        let _ = writeln!(o, "# HELP {name} {} (mean over iterations).", m.title);
        let _ = writeln!(o, "{name}{{{labels}}} {}", num(mean / div));
    }
    latency(&mut o, r, &labels);
    o.push_str("# EOF\n");
    o
}

/// The client's latency: a histogram from the buckets, else a summary
/// of the percentiles.
fn latency(o: &mut String, r: &TestResult, labels: &str) {
    let name = format!("{PREFIX}latency_seconds");
    if let Some(b) = &r.summary.latency_buckets {
        let _ = writeln!(o, "# TYPE {name} histogram");
        let _ = writeln!(
            o,
            "# HELP {name} The client's latency per transaction, every iteration's."
        );
        for (le, n) in b.le_us.iter().zip(&b.cumulative) {
            let _ = writeln!(o, "{name}_bucket{{{labels},le=\"{}\"}} {n}", num(le / 1e6));
        }
        let _ = writeln!(o, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", b.count);
        let _ = writeln!(o, "{name}_count{{{labels}}} {}", b.count);
        let _ = writeln!(o, "{name}_sum{{{labels}}} {}", num(b.sum_us / 1e6));
        return;
    }
    let Some(l) = &r.summary.latency_us else {
        return;
    };
    let _ = writeln!(o, "# TYPE {name} summary");
    let _ = writeln!(
        o,
        "# HELP {name} The client's latency per transaction, every iteration's (percentiles)."
    );
    for (q, v) in [
        ("0.5", l.p50),
        ("0.9", l.p90),
        ("0.99", l.p99),
        ("0.999", l.p999),
    ] {
        let _ = writeln!(o, "{name}{{{labels},quantile=\"{q}\"}} {}", num(v / 1e6));
    }
    // The summary keeps no count of samples or their sum: the
    // quantiles alone (the text format allows it).
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_in_base_units_and_values_converted() {
        let find = |k| crate::report::analysis::metrics::find(k).unwrap();
        assert_eq!(
            base(find("throughput_bps")),
            ("linerate_throughput_bytes_per_second".into(), 8.0)
        );
        assert_eq!(
            base(find("latency_p99_us")),
            ("linerate_latency_p99_seconds".into(), 1e6)
        );
        assert_eq!(
            base(find("client_cpu_pct")),
            ("linerate_client_cpu_ratio".into(), 100.0)
        );
        assert_eq!(base(find("rpm")), ("linerate_rpm".into(), 1.0));
        assert_eq!(
            base(find("client_us_per_packet")),
            ("linerate_client_cpu_seconds_per_packet".into(), 1e6)
        );
        // Every metric's name is a legal one, and none repeats another's
        // with a different meaning.
        for m in crate::report::analysis::metrics::all() {
            let (n, _) = base(m);
            assert!(
                n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{n}"
            );
        }
    }

    #[test]
    fn a_result_with_buckets_exports_a_cumulative_histogram() {
        let mut h = crate::measure::histogram::new_hist();
        for us in [3u64, 30, 300, 3000] {
            crate::measure::histogram::record_ns(&mut h, us * 1000);
        }
        let mut r = TestResult::default();
        r.summary.workload = "rr".into();
        r.summary.latency_buckets = crate::measure::histogram::buckets(&h);
        let text = render(&r);
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert!(text.contains("# TYPE linerate_latency_seconds histogram"));
        assert!(text.contains(
            "linerate_latency_seconds_bucket{workload=\"rr\",lab=\"\",le=\"0.000005\"} 1"
        ));
        assert!(text
            .contains("linerate_latency_seconds_bucket{workload=\"rr\",lab=\"\",le=\"0.005\"} 4"));
        assert!(text.contains("linerate_latency_seconds_count{workload=\"rr\",lab=\"\"} 4"));
    }
}
