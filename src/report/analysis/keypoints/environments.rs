//! Several environments in one report (`report A B --label ...`): how each
//! compares with the first.

use super::shared::KeyPoint;
use crate::report::analysis::landscape::Landscape;

type EnvPair = (String, f64, f64, Option<f64>, Option<f64>);

/// Several environments (`report A B --label ...`): how each compares with
/// the first on the headline metric, at the point where they differ most
/// and as the median over the points both measured, with the CPU cost
/// beside it.
pub fn environments(l: &Landscape) -> Vec<KeyPoint> {
    use crate::report::analysis::environments::ENV;
    let mut out = Vec::new();
    let mut envs: Vec<&str> = Vec::new();
    for r in &l.rows {
        if let Some(e) = r.point.param(ENV) {
            if !envs.contains(&e) {
                envs.push(e);
            }
        }
    }
    if envs.len() < 2 {
        return out;
    }
    let (metric, cost, unit_word) = if l.rows.iter().any(|r| r.mean("ops_per_s").is_some()) {
        ("ops_per_s", "server_us_per_op", "CPU per operation")
    } else if l.rows.iter().any(|r| r.mean("packets_per_s").is_some()) {
        ("packets_per_s", "agent_us_per_packet", "CPU per packet")
    } else if l.rows.iter().any(|r| {
        r.results
            .iter()
            .any(|x| x.summary.main_metric == Some(crate::model::spec::MainMetric::TransactionRate))
    }) {
        (
            "transactions_per_s",
            "client_us_per_tx",
            "client CPU per transaction",
        )
    } else {
        ("throughput_bps", "client_us_per_kb", "client CPU per KB")
    };
    let m = crate::report::analysis::metrics::find(metric).expect("a metric");
    let base = envs[0];
    for other in &envs[1..] {
        // (point, first's mean, other's mean, cost ratio, CI of the difference).
        let mut pairs: Vec<EnvPair> = Vec::new();
        for (key, a, b) in l.pairs(ENV, base, other) {
            let (Some(ea), Some(eb)) = (a.value(metric), b.value(metric)) else {
                continue;
            };
            if ea.mean <= 0.0 {
                continue;
            }
            let c = match (a.mean(cost), b.mean(cost)) {
                (Some(ca), Some(cb)) if ca > 0.0 => Some(cb / ca),
                _ => None,
            };
            // The 95% CI of the difference, as a share of the first's mean.
            let hw =
                crate::report::analysis::compare::welch(ea, eb, 95.0).map(|(_, h)| h / ea.mean);
            pairs.push((key, ea.mean, eb.mean, c, hw));
        }
        if pairs.is_empty() {
            continue;
        }
        let mut ratios: Vec<f64> = pairs.iter().map(|p| p.2 / p.1).collect();
        ratios.sort_by(|a, b| a.total_cmp(b));
        let median = ratios[ratios.len() / 2];
        let (key, va, vb, c, hw) = pairs
            .iter()
            .max_by(|x, y| (x.2 / x.1 - 1.0).abs().total_cmp(&(y.2 / y.1 - 1.0).abs()))
            .expect("non-empty")
            .clone();
        let change = 100.0 * (vb / va - 1.0);
        let at = if key.is_empty() {
            String::new()
        } else {
            format!(" at {key}")
        };
        let noise = match hw {
            Some(h) if change.abs() <= 100.0 * h => {
                format!(
                    " — within noise: the 95% confidence interval of the difference is ±{:.0}%",
                    100.0 * h
                )
            }
            Some(_) => String::new(),
            None => " — one sample each, no confidence interval (use --repeat)".into(),
        };
        out.push(KeyPoint {
            rule: "environments",
            text: format!(
                "{other} is {:.0}% {} than {base}{at} ({} vs {}){}{noise}; over the {} points both measured the median ratio is {median:.2}x.",
                change.abs(),
                if change >= 0.0 { "faster" } else { "slower" },
                m.fmt(vb),
                m.fmt(va),
                match c {
                    Some(c) => format!(
                        ", with {:.0}% {} {unit_word}",
                        (100.0 * (1.0 - c)).abs(),
                        if c <= 1.0 { "less" } else { "more" }
                    ),
                    None => String::new(),
                },
                pairs.len()
            ),
            advice: "The Configuration Summary lists the settings that differ between the environments first: those are the candidates for the difference.".into(),
        });
    }
    out
}
