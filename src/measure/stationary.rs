//! When a run has run long enough (`--duration auto`): a trend test over
//! the main figure's intervals, the warm-up as the leading intervals that
//! trend, and the confidence of the mean of the rest.
//!
//! Lancet (Kogias et al., ATC'19) tests stationarity with an augmented
//! Dickey-Fuller test; linerate's intervals are few (tens), so it uses the
//! Mann-Kendall trend test, which needs no model of the noise and is
//! exact enough from 5 points on, after cutting the warm-up by MSER
//! (the leading intervals whose removal most lowers the standard error of
//! the mean: a rising start, slow start's ramp, cold caches).
//!
//! Both the trend test and the mean's interval read batch means, not the
//! intervals themselves. On a noisy host consecutive intervals are not
//! independent (a stall, or two threads sharing a core, lasts several of
//! them), and a test that assumes they are calls that wander a trend: a
//! steady rr on an Intel VM ended at its bound with z -1.99. Batches of
//! consecutive intervals, as long as it takes for their means to forget
//! each other (lag-1 autocorrelation of the detrended means under 0.2, at
//! least 5 batches), are close to independent. Measured on synthetic
//! series (bench/stationary.py: 100 series each of 10, 25, 50 and 100
//! intervals, called a trend at 95%): Mann-Kendall on the intervals
//! called 23-25% of AR(1) series with phi 0.5 a trend, 35-47% at phi 0.8
//! and 12-53% of series that switch between two levels; Hamed and Rao's
//! variance correction 13-17%, 28-43% and 15-25%; trend-free prewhitening
//! (Yue and Wang) worse than none; batch means 9-12%, 8-26% and 7-14%,
//! while still finding a 20% ramp in 94-100% of the series. The mean's
//! interval is
//! Student's t over the batch means.
//!
//! The interval is the window's: it covers variation the window saw, not
//! the host's slower swings. On the 2-CPU VM a pinned rr drops 20% for
//! 1-9 s at a time; replayed over 1,800 recorded intervals
//! (bench/auto_replay.py) 98% of 20 s windows settled, and the settled
//! mean was within its claim of the two-minute mean in 24% (a later
//! earliest end did not help). Iterations, each its own window, are the
//! answer to a host that swings.
//!
//! No statistic over the first intervals sees a slow ramp: a load rising
//! 20% over 100 intervals is flat within the noise over the first ten. A
//! ramp the test itself makes (`--rate-ramp`) is known, so the window
//! never ends while it rises (`controller::auto`).

use crate::measure::stats;
use crate::model::auto::{AutoStop, MIN_INTERVALS};

/// The fewest batches the trend test and the mean's interval are read over.
pub const MIN_BATCHES: usize = 5;
/// Batch means whose lag-1 autocorrelation (after the trend is taken out)
/// is below this are taken as independent.
const INDEPENDENT_R1: f64 = 0.2;
/// Sen's slope reads at most this many points (evenly spaced): the
/// pairwise slopes grow as the square of the count.
const SLOPE_POINTS: usize = 200;

/// Sen's slope of `x` per interval: the median of the slopes between every
/// pair of points (robust to the odd stalled interval).
pub fn sen_slope(x: &[f64]) -> f64 {
    let stride = x.len().div_ceil(SLOPE_POINTS).max(1);
    let pts: Vec<(f64, f64)> = x
        .iter()
        .enumerate()
        .step_by(stride)
        .map(|(i, v)| (i as f64, *v))
        .collect();
    let mut slopes = Vec::with_capacity(pts.len() * pts.len() / 2);
    for (i, a) in pts.iter().enumerate() {
        for b in &pts[i + 1..] {
            slopes.push((b.1 - a.1) / (b.0 - a.0));
        }
    }
    if slopes.is_empty() {
        return 0.0;
    }
    slopes.sort_by(f64::total_cmp);
    slopes[slopes.len() / 2]
}

/// The lag-1 autocorrelation of `x` (0 when it cannot be told).
pub fn lag1(x: &[f64]) -> f64 {
    let n = x.len();
    if n < 3 {
        return 0.0;
    }
    let mean = x.iter().sum::<f64>() / n as f64;
    let var: f64 = x.iter().map(|v| (v - mean).powi(2)).sum();
    if var <= 0.0 {
        return 0.0;
    }
    x.windows(2)
        .map(|w| (w[0] - mean) * (w[1] - mean))
        .sum::<f64>()
        / var
}

/// The means of consecutive batches of `m` intervals, the last batch
/// ending with the last interval (a leading remainder is left out).
pub fn batch_means(x: &[f64], m: usize) -> Vec<f64> {
    let m = m.max(1);
    let skip = x.len() % m;
    x[skip..]
        .chunks(m)
        .map(|c| c.iter().sum::<f64>() / m as f64)
        .collect()
}

/// The batch length for `x`: the shortest whose means, with the series'
/// trend (Sen's slope) taken out, have a lag-1 autocorrelation under 0.2,
/// keeping at least [`MIN_BATCHES`] batches; 1 while `x` is shorter.
pub fn batch_len(x: &[f64]) -> usize {
    let n = x.len();
    if n < 2 * MIN_BATCHES {
        return 1;
    }
    let slope = sen_slope(x);
    let detrended: Vec<f64> = x
        .iter()
        .enumerate()
        .map(|(i, v)| v - slope * i as f64)
        .collect();
    let most = n / MIN_BATCHES;
    (1..=most)
        .find(|&m| lag1(&batch_means(&detrended, m)) < INDEPENDENT_R1)
        .unwrap_or(most)
}

/// The Mann-Kendall statistic of `x`'s batch means (see the module's
/// comment): positive for a rising series; |z| >= 1.96 is a trend at 95%.
pub fn trend_z(x: &[f64]) -> f64 {
    mann_kendall_z(&batch_means(x, batch_len(x)))
}

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

/// The mean of `x` and the half-width of its confidence interval at
/// `level_pct`, percent of the mean (infinite when it cannot be known):
/// Student's t over the batch means (`batch_len`).
pub fn mean_half_width_pct(x: &[f64], level_pct: f64) -> (f64, f64) {
    let n = x.len();
    if n < 2 {
        return (x.first().copied().unwrap_or(0.0), f64::INFINITY);
    }
    let mean = x.iter().sum::<f64>() / n as f64;
    let e = stats::estimate(&batch_means(x, batch_len(x)), level_pct);
    let half = e.half_width.unwrap_or(f64::INFINITY);
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

/// Reads the series `x` (the main figure per interval). The warm-up is
/// looked for where the intervals themselves trend (Mann-Kendall at 95%:
/// a start-up transient is short and strong, which batching would blur
/// into one batch) and cut by `mser` (at most half); what is left (at
/// least MIN_INTERVALS) is stationary when its batch means do not trend
/// (`trend_z`). A series that still trends has no steady part to measure:
/// no warm-up is cut from it. Done when stationary and the mean of the
/// rest is known within `width_pct` / 2.
pub fn judge(x: &[f64], level_pct: f64, width_pct: f64) -> Verdict {
    let (k, z, stationary) = if x.len() < MIN_INTERVALS {
        (0, trend_z(x), false)
    } else {
        let k = if mann_kendall_z(x).abs() < 1.96 {
            0
        } else {
            mser(x)
        };
        let tail = &x[k..];
        let z = trend_z(tail);
        if tail.len() >= MIN_INTERVALS && z.abs() < 1.96 {
            (k, z, true)
        } else {
            (0, trend_z(x), false)
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

/// Two levels the series sat at, when it did (lower, upper): sorted, the
/// split with the largest between-level variance (Otsu's) leaves at least
/// a fifth of the intervals on each side, levels at least 5% apart and
/// further apart than four of their pooled standard deviations. An rr
/// whose two threads share a CPU in some intervals and not in others does
/// that (measured here: 14.6k and 19.2k/s), and no window is long enough
/// to average such a mean to a narrow interval: the user is told why.
pub fn levels(x: &[f64]) -> Option<(f64, f64)> {
    let n = x.len();
    if n < 10 {
        return None;
    }
    let mut v = x.to_vec();
    v.sort_by(f64::total_cmp);
    let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
    let ss = |s: &[f64], m: f64| s.iter().map(|y| (y - m).powi(2)).sum::<f64>();
    let min = (n / 5).max(3);
    let (lo, hi) = (min..=n - min)
        .map(|k| (mean(&v[..k]), mean(&v[k..]), k))
        .max_by(|a, b| {
            let between = |(m1, m2, k): (f64, f64, usize)| (k * (n - k)) as f64 * (m2 - m1).powi(2);
            between(*a).total_cmp(&between(*b))
        })
        .map(|(m1, m2, k)| ((m1, &v[..k]), (m2, &v[k..])))?;
    let pooled = ((ss(lo.1, lo.0) + ss(hi.1, hi.0)) / (n - 2) as f64).sqrt();
    let gap = hi.0 - lo.0;
    (gap >= 0.05 * mean(&v).abs() && gap > 4.0 * pooled).then_some((lo.0, hi.0))
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
    fn two_levels_are_found_and_noise_is_not_two_levels() {
        // 60 intervals that switch between 14.6k and 19.2k in runs.
        let two: Vec<f64> = (0..60)
            .map(|i| if (i / 7) % 2 == 0 { 14_600.0 } else { 19_200.0 } * wobble(i, 0.02))
            .collect();
        let (lo, hi) = levels(&two).expect("two levels");
        assert!((lo - 14_600.0).abs() < 300.0 && (hi - 19_200.0).abs() < 300.0);
        let steady: Vec<f64> = (0..60).map(|i| 17_000.0 * wobble(i, 0.05)).collect();
        assert_eq!(levels(&steady), None);
        // A level seen in two intervals only is an outlier, not a level.
        let mut spikes = steady.clone();
        spikes[10] = 25_000.0;
        spikes[40] = 25_000.0;
        assert_eq!(levels(&spikes), None);
        assert_eq!(levels(&two[..8]), None);
    }

    #[test]
    fn the_trend_test_knows_its_direction_and_ties() {
        assert!(mann_kendall_z(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]) > 1.96);
        assert!(mann_kendall_z(&[6.0, 5.0, 4.0, 3.0, 2.0, 1.0]) < -1.96);
        assert_eq!(mann_kendall_z(&[3.0; 8]), 0.0);
        assert_eq!(mean_half_width_pct(&[5.0; 8], 99.0), (5.0, 0.0));
    }

    /// An AR(1) series of `n` around 1e4 with coefficient `phi` and
    /// coefficient of variation `cv`, times (1 + `ramp` x i/n).
    fn ar1(rng: &mut rand::rngs::SmallRng, n: usize, phi: f64, cv: f64, ramp: f64) -> Vec<f64> {
        use rand_distr::{Distribution, Normal};
        let e = Normal::new(0.0, 1.0).unwrap();
        let mut v = e.sample(rng) / (1.0 - phi * phi).sqrt();
        (0..n)
            .map(|i| {
                v = phi * v + e.sample(rng);
                1e4 * (1.0 + cv * v * (1.0 - phi * phi).sqrt()) * (1.0 + ramp * i as f64 / n as f64)
            })
            .collect()
    }

    #[test]
    fn batch_means_keep_autocorrelated_noise_from_passing_for_a_trend() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(37);
        let (mut raw, mut batched) = (0, 0);
        for _ in 0..200 {
            let x = ar1(&mut rng, 50, 0.8, 0.05, 0.0);
            raw += usize::from(mann_kendall_z(&x).abs() >= 1.96);
            batched += usize::from(trend_z(&x).abs() >= 1.96);
        }
        // Measured: about 45% and 10% (a 5% test would say 5%).
        assert!(raw > 60, "raw Mann-Kendall: {raw} of 200");
        assert!(batched < 40, "batch means: {batched} of 200");
    }

    #[test]
    fn batch_means_still_find_a_ramp() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(38);
        let found = (0..100)
            .filter(|_| trend_z(&ar1(&mut rng, 50, 0.5, 0.02, 0.2)).abs() >= 1.96)
            .count();
        assert!(
            found >= 95,
            "a 20% ramp over 50 intervals found {found} of 100"
        );
    }

    #[test]
    fn batches_grow_with_the_memory_of_the_series() {
        // Independent intervals: batches of one.
        let iid: Vec<f64> = (0..60).map(|i| wobble(i, 0.03)).collect();
        assert_eq!(batch_len(&iid), 1);
        // Levels that hold for ten intervals: batches long enough to forget.
        let steps: Vec<f64> = (0..60)
            .map(|i| if (i / 10) % 2 == 0 { 1.0 } else { 1.2 } * wobble(i, 0.01))
            .collect();
        assert!(batch_len(&steps) >= 5, "{}", batch_len(&steps));
        assert_eq!(batch_means(&[1.0, 2.0, 3.0, 4.0, 5.0], 2), vec![2.5, 4.5]);
        assert!((sen_slope(&[1.0, 3.0, 5.0, 100.0, 9.0]) - 2.0).abs() < 1e-9);
    }
}
