//! `linerate compare A B`: per point (matched by its parameters) and metric,
//! the change from A to B, its confidence interval and a significance
//! verdict from Welch's t-test on the two sets of samples. `--fail-if`
//! thresholds turn a significant regression into a nonzero exit code so a
//! comparison can gate CI (k8s-netperf's tolerance check, generalised).

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::error::{Error, Result};
use crate::model::sample::Estimate;
use crate::report::analysis::landscape::Landscape;
use crate::report::analysis::metrics::{self, Metric};

/// Metrics compared when none are named.
pub const DEFAULT_METRICS: &[&str] = &[
    "throughput_bps",
    "transactions_per_s",
    "latency_p99_us",
    "client_us_per_kb",
    "agent_us_per_kb",
    "client_us_per_tx",
    "agent_us_per_tx",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Better,
    Worse,
    NoSignificantChange,
    /// Fewer than two samples on a side: no test possible.
    Untested,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::NoSignificantChange => "no significant change",
            Verdict::Untested => "untested (1 sample)",
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Change {
    pub point: String,
    pub metric: String,
    pub a: f64,
    pub b: f64,
    pub n_a: usize,
    pub n_b: usize,
    /// (b - a) / a, percent.
    pub change_pct: f64,
    /// Half-width of the CI of the difference, percent of a.
    pub ci_pct: Option<f64>,
    pub p_value: Option<f64>,
    pub verdict: Verdict,
}

/// Welch's t-test from summary statistics: (p-value, CI half-width of b - a).
pub fn welch(a: &Estimate, b: &Estimate, level_pct: f64) -> Option<(f64, f64)> {
    if a.n < 2 || b.n < 2 {
        return None;
    }
    let (va, vb) = (a.stddev.powi(2) / a.n as f64, b.stddev.powi(2) / b.n as f64);
    let se = (va + vb).sqrt();
    if se == 0.0 {
        // Two sets of identical samples: any difference is exact.
        return Some((if a.mean == b.mean { 1.0 } else { 0.0 }, 0.0));
    }
    let df =
        (va + vb).powi(2) / (va.powi(2) / (a.n as f64 - 1.0) + vb.powi(2) / (b.n as f64 - 1.0));
    let t = StudentsT::new(0.0, 1.0, df.max(1.0)).ok()?;
    let stat = (b.mean - a.mean) / se;
    let p = 2.0 * (1.0 - t.cdf(stat.abs()));
    let q = t.inverse_cdf(1.0 - (1.0 - level_pct / 100.0) / 2.0);
    Some((p, q * se))
}

pub fn compare_one(point: &str, m: &Metric, a: &Estimate, b: &Estimate, level_pct: f64) -> Change {
    let change_pct = if a.mean != 0.0 {
        100.0 * (b.mean - a.mean) / a.mean.abs()
    } else {
        0.0
    };
    let test = welch(a, b, level_pct);
    let verdict = match test {
        None => Verdict::Untested,
        Some((p, _)) if p >= 1.0 - level_pct / 100.0 => Verdict::NoSignificantChange,
        Some(_) => {
            if (b.mean > a.mean) == m.higher_is_better {
                Verdict::Better
            } else {
                Verdict::Worse
            }
        }
    };
    Change {
        point: point.to_string(),
        metric: m.key.to_string(),
        a: a.mean,
        b: b.mean,
        n_a: a.n,
        n_b: b.n,
        change_pct,
        ci_pct: test.and_then(|(_, hw)| (a.mean != 0.0).then(|| 100.0 * hw / a.mean.abs())),
        p_value: test.map(|(p, _)| p),
        verdict,
    }
}

/// Every change between two landscapes, for the named metrics (or the
/// defaults); points are matched by label.
pub fn compare(
    a: &Landscape,
    b: &Landscape,
    keys: &[String],
    level_pct: f64,
) -> (Vec<Change>, Vec<String>) {
    let keys: Vec<&Metric> = if keys.is_empty() {
        DEFAULT_METRICS
            .iter()
            .filter_map(|k| metrics::find(k))
            .collect()
    } else {
        keys.iter().filter_map(|k| metrics::find(k)).collect()
    };
    let mut out = Vec::new();
    let mut unmatched = Vec::new();
    for ra in &a.rows {
        let label = ra.point.label();
        let Some(rb) = b.rows.iter().find(|r| r.point.label() == label) else {
            unmatched.push(format!("{label} (only in A)"));
            continue;
        };
        for m in &keys {
            if let (Some(ea), Some(eb)) = (ra.value(m.key), rb.value(m.key)) {
                out.push(compare_one(&label, m, ea, eb, level_pct));
            }
        }
    }
    for rb in &b.rows {
        let label = rb.point.label();
        if !a.rows.iter().any(|r| r.point.label() == label) {
            unmatched.push(format!("{label} (only in B)"));
        }
    }
    (out, unmatched)
}

/// A `--fail-if` threshold: `METRIC<-5%` or `METRIC>+10%`.
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    pub metric: String,
    pub below: bool,
    pub pct: f64,
}

/// A malformed threshold or an unknown metric is a usage error.
pub fn parse_threshold(s: &str) -> Result<Threshold> {
    let bad = || {
        Error::Usage(format!(
            "'{s}' is not a threshold: write METRIC<-5% (fail when it falls more than 5%) or METRIC>+10%"
        ))
    };
    let (metric, rest, below) = if let Some((m, r)) = s.split_once('<') {
        (m, r, true)
    } else if let Some((m, r)) = s.split_once('>') {
        (m, r, false)
    } else {
        return Err(bad());
    };
    let metric = metric.trim();
    if metrics::find(metric).is_none() {
        return Err(Error::Usage(format!(
            "--fail-if: `{metric}` is not a metric; metrics: {}",
            metrics::names()
        )));
    }
    let pct: f64 = rest
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| bad())?;
    Ok(Threshold {
        metric: metric.to_string(),
        below,
        pct,
    })
}

impl Threshold {
    /// True when this change crosses the threshold. A crossing counts when
    /// it is significant, or when it could not be tested (one sample each):
    /// a gate must not pass silently for lack of repetitions.
    pub fn crossed(&self, c: &Change) -> bool {
        if c.metric != self.metric || c.verdict == Verdict::NoSignificantChange {
            return false;
        }
        if self.below {
            c.change_pct < self.pct
        } else {
            c.change_pct > self.pct
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::stats::estimate;

    fn m(key: &str) -> &'static Metric {
        metrics::find(key).unwrap()
    }

    #[test]
    fn a_clear_drop_is_worse_and_noise_is_not() {
        let a = estimate(&[10.0, 10.1, 9.9, 10.05, 9.95], 95.0);
        let b = estimate(&[8.0, 8.1, 7.9, 8.05, 7.95], 95.0);
        let c = compare_one("p", m("throughput_bps"), &a, &b, 95.0);
        assert_eq!(c.verdict, Verdict::Worse);
        assert!((c.change_pct + 20.0).abs() < 0.01);
        assert!(c.p_value.unwrap() < 0.001);
        assert!(c.ci_pct.unwrap() > 0.0 && c.ci_pct.unwrap() < 5.0);
        // The same drop in a cost metric is an improvement.
        let c = compare_one("p", m("client_us_per_kb"), &a, &b, 95.0);
        assert_eq!(c.verdict, Verdict::Better);
        // Overlapping noisy samples: no verdict.
        let a = estimate(&[10.0, 12.0, 8.0, 11.0], 95.0);
        let b = estimate(&[10.5, 12.5, 8.5, 9.0], 95.0);
        let c = compare_one("p", m("throughput_bps"), &a, &b, 95.0);
        assert_eq!(c.verdict, Verdict::NoSignificantChange);
        let one = estimate(&[10.0], 95.0);
        let c = compare_one("p", m("throughput_bps"), &one, &b, 95.0);
        assert_eq!(c.verdict, Verdict::Untested);
    }

    #[test]
    fn welch_matches_a_known_result() {
        // Two samples with means 20 and 22, sd 2 and 3, n 10 each:
        // t = 2 / sqrt(0.4 + 0.9) = 1.754, df = 15.7, p = 0.099 (two-sided).
        let a = Estimate {
            n: 10,
            mean: 20.0,
            stddev: 2.0,
            ..Default::default()
        };
        let b = Estimate {
            n: 10,
            mean: 22.0,
            stddev: 3.0,
            ..Default::default()
        };
        let (p, _) = welch(&a, &b, 95.0).unwrap();
        assert!((p - 0.099).abs() < 0.003, "p = {p}");
    }

    #[test]
    fn thresholds_parse_and_gate() {
        let t = parse_threshold("throughput_bps<-5%").unwrap();
        assert_eq!(
            t,
            Threshold {
                metric: "throughput_bps".into(),
                below: true,
                pct: -5.0
            }
        );
        assert!(parse_threshold("speed<-5%")
            .unwrap_err()
            .to_string()
            .contains("not a metric"));
        assert!(parse_threshold("throughput_bps=5").is_err());
        let a = estimate(&[10.0, 10.1, 9.9], 95.0);
        let b = estimate(&[8.0, 8.1, 7.9], 95.0);
        let c = compare_one("p", m("throughput_bps"), &a, &b, 95.0);
        assert!(t.crossed(&c));
        assert!(!parse_threshold("throughput_bps<-25%").unwrap().crossed(&c));
        assert!(!parse_threshold("latency_p99_us>+5%").unwrap().crossed(&c));
    }
}
