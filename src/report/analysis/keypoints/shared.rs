//! What the rules share: the key point itself, a metric's curves along one
//! dimension, which workloads a study holds, and the words and figures the
//! sentences are made of.

use crate::report::analysis::landscape::Landscape;
use crate::units::fmt_bytes;

pub use crate::model::points::{plural, suffix, KeyPoint};

/// One metric along `dim` over the landscape's points (`points::curves`).
pub(super) fn curves(l: &Landscape, dim: &str, metric: &str) -> Vec<(String, Vec<(f64, f64)>)> {
    crate::model::points::curves(&l.views(), dim, metric)
}

/// Every point of the study is a UDP test: packets, not bytes, are its unit.
pub(super) fn all_udp(l: &Landscape) -> bool {
    !l.rows.is_empty()
        && l.rows
            .iter()
            .all(|r| crate::workload::figures(&r.point.spec).udp)
}

/// Every point is a key-value service's test (memcache): operations, not
/// bytes, are its unit, and its kind has its own rules on them.
pub(super) fn all_kv(l: &Landscape) -> bool {
    !l.rows.is_empty()
        && l.rows
            .iter()
            .all(|r| crate::workload::figures(&r.point.spec).kv)
}

/// How far a measurement may be from a bound or the model and still be
/// said to follow it (the write-up's "within 15%").
pub const MODEL_TOLERANCE: f64 = 0.15;

/// A size that need not be a whole number of KiB or MiB.
pub(super) fn fmt_window(b: f64) -> String {
    fmt_bytes(b.max(0.0).round() as u64)
}

/// "2.4x" or "2.0-3.0x": the range of some ratios, one figure when they
/// lie within 5% of each other.
pub(super) fn ratio_range(v: impl IntoIterator<Item = f64> + Clone) -> String {
    let lo = v.clone().into_iter().fold(f64::INFINITY, f64::min);
    let hi = v.into_iter().fold(f64::NEG_INFINITY, f64::max);
    if (hi - lo) / lo < 0.05 {
        format!("{lo:.1}x")
    } else {
        format!("{lo:.1}-{hi:.1}x")
    }
}

/// "84" or "73-84": the range of some fractions, in percent.
pub(super) fn pct_range(v: &[f64]) -> String {
    let lo = (100.0 * v.iter().copied().fold(f64::INFINITY, f64::min)).round();
    let hi = (100.0 * v.iter().copied().fold(f64::NEG_INFINITY, f64::max)).round();
    if lo == hi {
        format!("{lo}")
    } else {
        format!("{lo}-{hi}")
    }
}

/// One point's cost against its baseline: (ratio, cost, baseline's cost,
/// the point's label).
pub type CostRatio = (f64, f64, f64, String);

/// The cost key points' sentence, TLS's against clear and QUIC's against
/// TLS over TCP alike: "{who} costs 1.2-1.5x the client's CPU per KB of
/// {base} over 3 points (1.2x at flows=1: 0.300 vs 0.250 µs){rest}."
pub fn cost_text(
    who: &str,
    side: &str,
    per: &str,
    base: &str,
    ratios: &[&CostRatio],
    rest: &str,
) -> String {
    let first = ratios[0];
    format!(
        "{who} costs {} the {side}'s CPU per {per} of {base} over {} point{} ({:.1}x at {}: {:.3} vs {:.3} µs){rest}.",
        ratio_range(ratios.iter().map(|r| r.0)),
        ratios.len(),
        if ratios.len() == 1 { "" } else { "s" },
        first.0,
        if first.3.is_empty() { "the test" } else { &first.3 },
        first.1,
        first.2,
    )
}

/// "0.40-0.69" of some ratios (their least and greatest), "0.86" when
/// they print alike; None: none.
pub fn min_max(v: &[f64]) -> Option<String> {
    let lo = v.iter().cloned().reduce(f64::min)?;
    let hi = v.iter().cloned().reduce(f64::max)?;
    let (lo, hi) = (format!("{lo:.2}"), format!("{hi:.2}"));
    Some(if lo == hi { lo } else { format!("{lo}-{hi}") })
}
