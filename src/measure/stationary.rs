//! When a run has run long enough (`--duration auto`): a trend test over
//! the main figure's intervals, the warm-up as the leading intervals that
//! trend, and the confidence of the mean of the rest.
//!
//! Lancet (Kogias et al., ATC'19) tests stationarity with an augmented
//! Dickey-Fuller test; linerate's intervals are few (tens), so it uses the
//! Mann-Kendall trend test, which needs no model of the noise and is
//! exact enough from 5 points on, after cutting the warm-up by MSER
//! (the leading intervals whose removal most lowers the standard error of
//! the mean: a rising start, slow start's ramp, cold caches). The mean's interval uses Student's t
//! over the intervals inflated by their lag-1 autocorrelation (an
//! interval that remembers the previous one carries less news).

use crate::model::auto::{AutoStop, MIN_INTERVALS};

/// The Mann-Kendall z statistic of `x` (0 for fewer than 3 points):
/// positive for a rising series; |z| >= 1.96 is a trend at 95%.
pub fn mann_kendall_z(x: &[f64]) -> f64 {
    let n = x.len();
    if n < 3 {
        return 0.0;
    }
    let mut s = 0i64;
    for i in 0..n {
        for j in i + 1..n {
            s += match x[j].partial_cmp(&x[i]) {
                Some(std::cmp::Ordering::Greater) => 1,
                Some(std::cmp::Ordering::Less) => -1,
                _ => 0,
            };
        }
    }
    let nf = n as f64;
    let var = nf * (nf - 1.0) * (2.0 * nf + 5.0) / 18.0;
    match s {
        0 => 0.0,
        s if s > 0 => (s as f64 - 1.0) / var.sqrt(),
        s => (s as f64 + 1.0) / var.sqrt(),
    }
}

/// Two-sided Student t quantile for `level_pct` with `dof` degrees of
/// freedom (a table for the levels people write; large dof: normal).
pub fn t_quantile(level_pct: f64, dof: usize) -> f64 {
    const T95: [f64; 10] = [
        12.71, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    ];
    const T99: [f64; 10] = [
        63.66, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250, 3.169,
    ];
    const T90: [f64; 10] = [
        6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812,
    ];
    let (table, inf) = if level_pct >= 99.0 {
        (&T99, 2.576)
    } else if level_pct >= 95.0 {
        (&T95, 1.960)
    } else {
        (&T90, 1.645)
    };
    match dof {
        0 => f64::INFINITY,
        d if d <= 10 => table[d - 1],
        // Between 10 and 30 dof, interpolate toward the normal in 1/dof.
        d => inf + (table[9] - inf) * 10.0 / d as f64,
    }
}

/// The mean of `x` and the half-width of its confidence interval at
/// `level_pct`, percent of the mean (infinite when it cannot be known).
pub fn mean_half_width_pct(x: &[f64], level_pct: f64) -> (f64, f64) {
    let n = x.len();
    if n < 2 {
        return (x.first().copied().unwrap_or(0.0), f64::INFINITY);
    }
    let nf = n as f64;
    let mean = x.iter().sum::<f64>() / nf;
    let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (nf - 1.0);
    // Lag-1 autocorrelation: each interval carries (1-r)/(1+r) of an
    // independent sample's news (at least a tenth).
    let r1 = if var > 0.0 {
        x.windows(2)
            .map(|w| (w[0] - mean) * (w[1] - mean))
            .sum::<f64>()
            / ((nf - 1.0) * var)
    } else {
        0.0
    };
    let eff = (nf * ((1.0 - r1) / (1.0 + r1)).clamp(0.1, 1.0)).max(2.0);
    let half = t_quantile(level_pct, eff.floor() as usize - 1) * (var / eff).sqrt();
    if mean.abs() < 1e-300 {
        return (mean, if half == 0.0 { 0.0 } else { f64::INFINITY });
    }
    (mean, 100.0 * half / mean.abs())
}

/// What the intervals so far say.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Verdict {
    /// Leading intervals that trend (the warm-up found).
    pub warmup: usize,
    /// The rest: stationary (no trend at 95%) and at least half the
    /// intervals and MIN_INTERVALS long.
    pub stationary: bool,
    pub trend_z: f64,
    pub mean: f64,
    pub half_width_pct: f64,
    /// Stationary and the mean known within +/- width/2 percent.
    pub done: bool,
}

/// The warm-up by MSER (White's marginal standard error rule): the count
/// of leading intervals, at most half, whose removal leaves the tail with
/// the smallest standard error of its mean. A transient at the start
/// inflates the spread; cutting it lowers the error more than the lost
/// intervals raise it.
pub fn mser(x: &[f64]) -> usize {
    let n = x.len();
    let mut best = (f64::INFINITY, 0);
    for k in 0..=n / 2 {
        let tail = &x[k..];
        let m = tail.len() as f64;
        if m < 2.0 {
            break;
        }
        let mean = tail.iter().sum::<f64>() / m;
        let ss = tail.iter().map(|v| (v - mean).powi(2)).sum::<f64>();
        let score = ss / (m * m);
        // Ties keep the shorter warm-up.
        if score < best.0 * (1.0 - 1e-9) {
            best = (score, k);
        }
    }
    best.1
}

/// Reads the series `x` (the main figure per interval). A series without
/// a Mann-Kendall trend at 95% has no warm-up; one with a trend has its
/// warm-up cut by `mser` (at most half), and is stationary if what is left
/// (at least MIN_INTERVALS) no longer trends. A series that still trends
/// has no steady part to measure: no warm-up is cut from it. Done when
/// stationary and the mean of the rest is known within `width_pct` / 2.
pub fn judge(x: &[f64], level_pct: f64, width_pct: f64) -> Verdict {
    let z_all = mann_kendall_z(x);
    let (k, z, stationary) = if x.len() < MIN_INTERVALS {
        (0, z_all, false)
    } else if z_all.abs() < 1.96 {
        (0, z_all, true)
    } else {
        let k = mser(x);
        let tail = &x[k..];
        let z = mann_kendall_z(tail);
        if tail.len() >= MIN_INTERVALS && z.abs() < 1.96 {
            (k, z, true)
        } else {
            (0, z_all, false)
        }
    };
    let (mean, half) = mean_half_width_pct(&x[k..], level_pct);
    Verdict {
        warmup: k,
        stationary,
        trend_z: z,
        mean,
        half_width_pct: half,
        done: stationary && half <= width_pct / 2.0,
    }
}

/// Why a window that ended at its bound (or earlier, for another reason)
/// ended, from the last verdict.
pub fn stop_reason(v: &Verdict, at_bound: bool) -> AutoStop {
    match (v.done, at_bound, v.stationary) {
        (true, _, _) => AutoStop::Stationary,
        (false, true, false) => AutoStop::BoundTrending,
        (false, true, true) => AutoStop::BoundWide,
        (false, false, _) => AutoStop::Ended,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic wobble of +/- `amp` around 1 (no RNG in unit tests).
    fn wobble(i: usize, amp: f64) -> f64 {
        let phase = (i as f64 * 2.399_963).sin();
        1.0 + amp * phase
    }

    #[test]
    fn a_steady_series_is_done_early_and_a_ramp_never() {
        let steady: Vec<f64> = (0..40).map(|i| 50_000.0 * wobble(i, 0.02)).collect();
        let first_done = (1..=steady.len())
            .find(|&m| judge(&steady[..m], 99.0, 5.0).done)
            .expect("a steady series settles");
        assert!(first_done <= 12, "settled after {first_done} intervals");
        let ramp: Vec<f64> = (0..60)
            .map(|i| (10_000.0 + 500.0 * i as f64) * wobble(i, 0.02))
            .collect();
        assert!((1..=ramp.len()).all(|m| !judge(&ramp[..m], 99.0, 5.0).done));
        let v = judge(&ramp, 99.0, 5.0);
        assert!(!v.stationary && v.trend_z > 5.0, "{v:?}");
        assert_eq!(stop_reason(&v, true), AutoStop::BoundTrending);
    }

    #[test]
    fn a_ramp_then_a_plateau_ends_its_warm_up_where_the_ramp_ends() {
        let x: Vec<f64> = (0..30)
            .map(|i| {
                (if i < 6 {
                    1000.0 * (i + 1) as f64
                } else {
                    7000.0
                }) * wobble(i, 0.01)
            })
            .collect();
        let v = judge(&x, 99.0, 5.0);
        assert!(v.stationary && v.done, "{v:?}");
        assert!((4..=8).contains(&v.warmup), "warm-up {}", v.warmup);
        assert!((v.mean - 7000.0).abs() < 100.0);
    }

    #[test]
    fn the_trend_test_knows_its_direction_and_ties() {
        assert!(mann_kendall_z(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]) > 1.96);
        assert!(mann_kendall_z(&[6.0, 5.0, 4.0, 3.0, 2.0, 1.0]) < -1.96);
        assert_eq!(mann_kendall_z(&[3.0; 8]), 0.0);
        assert_eq!(mean_half_width_pct(&[5.0; 8], 99.0), (5.0, 0.0));
        assert!(t_quantile(95.0, 4) > t_quantile(95.0, 30));
    }
}
