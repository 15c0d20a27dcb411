//! Change-point detection for a watch: after each scheduled run of a
//! benchmark, did the tracked metric (throughput, say) just move?
//!
//! The method is published, not ours: E-divisive means (Matteson and James,
//! "A Nonparametric Approach for Multiple Change Point Analysis of
//! Multivariate Data", JASA 2014) locates the split, and a two-sample
//! Student's t-test (pooled variance, df = n - 2) decides whether it is
//! significant, as Hunter does (Fleming et al., "Hunter: Using Change Point
//! Detection to Hunt for Performance Regressions", ICPE 2023; Daly et al.,
//! ICPE 2020, is MongoDB's precedent for E-divisive in CI).
//!
//! A watch asks after every run, so the search is online: the candidates
//! are the splits that leave `min_post` to `max_post` newest points after
//! them and at least `min_baseline` before them in the current segment
//! (from the last reported change, at most `window` points, newest kept).
//! The one with the largest energy statistic Q = (t m / n) E (exponent 1)
//! is a change when the t-test's p-value is below `alpha`, the means differ
//! by at least `min_change` of the baseline's, and every point after the
//! split is on the changed side of the midpoint between the two means, so
//! one outlier cannot make a change (two in a row the same way can). The
//! t-test leaves out of the baseline the points more than `OUTLIER_MADS`
//! robust deviations off its median, so one bad run does not blind it.
//!
//! Non-finite values (a failed run) are skipped: neither baseline nor
//! evidence, and a newest value that is not finite confirms nothing
//! (`newest` gives None). Indices stay those of the slice given.
//!
//! Measured by the tests below, seeded, with the defaults. Runs that
//! alarm over 1000 stationary series of 100 runs (series with any alarm):
//! Gaussian CV 1% 0.34% (27%), CV 3% 0.34% (28%), Student-t(3) at CV 1%
//! 0.39% (33%), 1 run in 20 15% off 0.40% (32%). A 5% step after 10 runs
//! at CV 1%, 5000 seeds, reported within 3 runs at the new level and
//! placed within one run of it (exactly; replayed from the first run, so
//! with the baseline's own false alarms): down 99.6% (98.6%; 98.3%), up
//! 99.3% (97.8%; 98.0%); in Student-t(3) noise down 98.7%, up 98.3%; after
//! 30 runs of which 1 in 20 is 15% off, 92.9% (29% without leaving
//! outliers out). Up 5% and back 20 runs later: both found in 97.5%.
//!
//! Limits: a false alarm a few runs before a real step leaves that step
//! too short a baseline in the new segment, so it goes unreported; runs
//! just before a step that lean its way can place it up to 3 runs early
//! and smaller, and the rest is then reported again (2 in 1000 steps).

use statrs::distribution::{ContinuousCDF, StudentsT};

/// The detector's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    /// The t-test's significance level (two-sided): small, as a watch tests
    /// after every run, but not Hunter's 0.001: with 10 runs of baseline
    /// and 3 at the new level, the t-test at the true split misses a 5%
    /// step at CV 1% in 1.1% of 20000 seeds at 0.001 (0.4% at 0.002), so
    /// no watch could find 99% of them within 3 runs.
    pub alpha: f64,
    /// The smallest relative move of the mean worth reporting, so a very
    /// quiet series does not report moves nobody acts on.
    pub min_change: f64,
    /// The fewest points after a split: one point is an outlier, not a change.
    pub min_post: usize,
    /// The most points after a split: a change older than this was either
    /// reported already or never will be.
    pub max_post: usize,
    /// The fewest points before a split, for a variance worth testing against.
    pub min_baseline: usize,
    /// The most points of a segment looked at (newest kept), so old history
    /// and slow drift weigh less and the cost stays bounded.
    pub window: usize,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            alpha: 0.002,
            min_change: 0.01,
            min_post: 2,
            max_post: 5,
            min_baseline: 5,
            window: 60,
        }
    }
}

/// A change: the series moved from `before` to `after` starting at `index`
/// (index into the slice given).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Change {
    pub index: usize,
    pub before: f64,
    pub after: f64,
    pub p: f64,
}

impl Change {
    /// The move as a fraction of the old level, (after - before) / before:
    /// what a report prints as a percentage.
    pub fn relative(&self) -> f64 {
        (self.after - self.before) / self.before
    }
}

/// The change the newest value confirms, if any: `xs` is the series oldest
/// first; `since` the index where the current segment starts (the last
/// reported change's index, or 0). Only the newest `window` points of the
/// segment are looked at.
pub fn newest(xs: &[f64], since: usize, p: &Params) -> Option<Change> {
    if !xs.last()?.is_finite() {
        return None;
    }
    let seg = xs.get(since..)?;
    let (at, v): (Vec<usize>, Vec<f64>) = seg
        .iter()
        .enumerate()
        .filter(|(_, x)| x.is_finite())
        .map(|(i, &x)| (since + i, x))
        .unzip();
    let skip = v.len().saturating_sub(p.window.max(1));
    let (at, v) = (&at[skip..], &v[skip..]);
    let split = best_split(v, p)?;
    let (before, after, pv) = test_split(v, split, p)?;
    Some(Change {
        index: at[split],
        before,
        after,
        p: pv,
    })
}

/// Every change in a whole series, oldest first, as a watch run after each
/// value would have reported them (replays `newest` over each prefix, moving
/// `since` to each change found), each with the number of values seen when
/// it was reported. For histories recorded without a watch.
pub fn replay(xs: &[f64], p: &Params) -> Vec<(Change, usize)> {
    let mut since = 0;
    let mut out = Vec::new();
    for end in 1..=xs.len() {
        if let Some(c) = newest(&xs[..end], since, p) {
            since = c.index;
            out.push((c, end));
        }
    }
    out
}

/// The candidate split with the largest energy statistic, as an index into
/// `v` (the first point after it). The candidates' baselines are nested, so
/// the baseline's pair sum is sorted once and grown a point at a time.
/// Fewer than two points after a split leave its pair term zero, so
/// `min_post` = 1 still works; the baseline keeps two for the t-test.
fn best_split(v: &[f64], p: &Params) -> Option<usize> {
    let n = v.len();
    let hi = p.max_post.min(n.saturating_sub(p.min_baseline.max(2)));
    let lo = p.min_post.max(1);
    if lo > hi {
        return None;
    }
    let mut pairs = pair_sum(&v[..n - hi]);
    let mut best: Option<(usize, f64)> = None;
    for t in n - hi..=n - lo {
        if t > n - hi {
            pairs += v[..t - 1].iter().map(|a| (a - v[t - 1]).abs()).sum::<f64>();
        }
        let q = energy(&v[..t], &v[t..], pairs);
        if q.is_finite() && best.is_none_or(|(_, b)| q >= b) {
            best = Some((t, q));
        }
    }
    best.map(|(t, _)| t)
}

/// Matteson and James's Q = (t m / n) E with exponent 1: the scaled energy
/// distance between the samples before (`x`, whose pair sum is `x_pairs`)
/// and after (`y`) a split.
fn energy(x: &[f64], y: &[f64], x_pairs: f64) -> f64 {
    let (t, m) = (x.len() as f64, y.len() as f64);
    let cross: f64 = y
        .iter()
        .map(|b| x.iter().map(|a| (a - b).abs()).sum::<f64>())
        .sum();
    // The mean over C(k, 2) pairs; none (k < 2) has a zero sum.
    let within = |sum: f64, k: f64| sum / (k * (k - 1.0) / 2.0).max(1.0);
    let e = 2.0 * cross / (t * m) - within(x_pairs, t) - within(pair_sum(y), m);
    t * m / (t + m) * e
}

/// The sum of |a - b| over the pairs of `v`, in O(n log n): sorted, the
/// k-th smallest of n is the larger of k pairs and the smaller of n-1-k.
fn pair_sum(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_unstable_by(f64::total_cmp);
    let n = s.len() as f64;
    let weight = |k: usize| 2.0 * k as f64 + 1.0 - n;
    s.iter().enumerate().map(|(k, x)| x * weight(k)).sum()
}

/// Whether the split at `split` is a change: the means before and after and
/// the pooled t-test's two-sided p-value, or None when any of the three
/// conditions fails (p-value, relative size, every post point past the
/// midpoint). The baseline is tested without its outliers.
fn test_split(v: &[f64], split: usize, p: &Params) -> Option<(f64, f64, f64)> {
    let (x, y) = v.split_at(split);
    let x = &without_outliers(x);
    if x.len() < 2 {
        return None;
    }
    let (mx, my) = (mean(x), mean(y));
    let diff = my - mx;
    let big = diff.abs() >= p.min_change * mx.abs() && diff != 0.0;
    let mid = (mx + my) / 2.0;
    let past = y.iter().all(|&b| (b - mid) * diff.signum() > 0.0);
    if !big || !past {
        return None;
    }
    let df = (x.len() + y.len() - 2) as f64;
    let ss = sum_sq(x, mx) + sum_sq(y, my);
    let se = (ss / df * (1.0 / x.len() as f64 + 1.0 / y.len() as f64)).sqrt();
    // No spread at all and a step: as certain as data gets.
    let pv = if se == 0.0 {
        0.0
    } else {
        let t = (diff / se).abs();
        // An overflowing sum is no evidence either way.
        if !t.is_finite() {
            return None;
        }
        2.0 * StudentsT::new(0.0, 1.0, df).ok()?.sf(t)
    };
    (pv < p.alpha).then_some((mx, my, pv))
}

/// How far from the baseline's median, in robust standard deviations
/// (1.4826 MAD), a point is an outlier the t-test leaves out. Wide, so
/// Gaussian noise loses nothing, but one run 15% off at CV 1% no longer
/// inflates the pooled variance until it leaves the window (some 40 runs
/// blind to a 5% step).
const OUTLIER_MADS: f64 = 8.0;

/// The baseline without its outliers (Hampel's identifier). A baseline
/// more than half of one value (MAD 0) is kept whole.
fn without_outliers(x: &[f64]) -> Vec<f64> {
    let med = median(x);
    let mad = 1.4826 * median(&x.iter().map(|a| (a - med).abs()).collect::<Vec<_>>());
    x.iter()
        .copied()
        .filter(|a| mad == 0.0 || (a - med).abs() <= OUTLIER_MADS * mad)
        .collect()
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_unstable_by(f64::total_cmp);
    (s[(s.len() - 1) / 2] + s[s.len() / 2]) / 2.0
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn sum_sq(v: &[f64], m: f64) -> f64 {
    v.iter().map(|x| (x - m).powi(2)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use rand_distr::{Distribution, Normal, StudentT};

    /// The noise around a series' level, as a fraction of it.
    #[derive(Clone, Copy)]
    enum Noise {
        Gauss(f64),
        /// Student-t with 3 degrees of freedom (variance 3) scaled to this CV.
        T3(f64),
        /// Gaussian at CV 1%, and 1 run in 20 is 15% off (either way).
        Outliers,
    }

    /// `levels` as (level, runs) in turn, times 1 + noise, from `seed`.
    fn series(seed: u64, levels: &[(f64, usize)], noise: Noise) -> Vec<f64> {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut draw = move || match noise {
            Noise::Gauss(cv) => 1.0 + Normal::new(0.0, cv).unwrap().sample(&mut rng),
            Noise::T3(cv) => 1.0 + StudentT::new(3.0).unwrap().sample(&mut rng) * cv / 3f64.sqrt(),
            Noise::Outliers => {
                let off = [0.15, -0.15].get(rng.random_range(0..40)).unwrap_or(&0.0);
                (1.0 + off) * (1.0 + Normal::new(0.0, 0.01).unwrap().sample(&mut rng))
            }
        };
        let levels = levels.iter().flat_map(|&(m, n)| std::iter::repeat_n(m, n));
        levels.map(|m| m * draw()).collect()
    }

    /// 1000 stationary series of 100 runs, each watched run by run: no
    /// more than 1% of runs may alarm.
    fn assert_quiet(noise: Noise, name: &str) {
        let (mut alarms, mut any) = (0, 0);
        for seed in 0..1000 {
            let found = replay(&series(seed, &[(100.0, 100)], noise), &Params::default());
            alarms += found.len();
            any += usize::from(!found.is_empty());
        }
        let (runs, series) = (alarms as f64 / 1000.0, any as f64 / 10.0);
        eprintln!("{name}: alarms in {runs:.3}% of runs, {series:.1}% of series");
        assert!(
            runs <= 1.0,
            "{name}: {runs:.3}% of runs, {series:.1}% of series"
        );
    }

    #[test]
    fn gaussian_noise_at_1_percent_rarely_alarms() {
        assert_quiet(Noise::Gauss(0.01), "Gaussian CV 1%");
    }

    #[test]
    fn gaussian_noise_at_3_percent_rarely_alarms() {
        assert_quiet(Noise::Gauss(0.03), "Gaussian CV 3%");
    }

    #[test]
    fn heavy_tailed_noise_rarely_alarms() {
        assert_quiet(Noise::T3(0.01), "Student-t(3) CV 1%");
    }

    #[test]
    fn single_outliers_rarely_alarm() {
        assert_quiet(Noise::Outliers, "1 in 20 runs 15% off");
    }

    /// Of `seeds` series of `base` runs at 100 then 3 at `to`, in percent:
    /// those where the watch, holding the whole baseline, reported the
    /// step within a run of where it is by the step's third run; those
    /// placed exactly; and those a replay from the first run finds within
    /// a run (a false alarm in the baseline can cut it too short).
    fn found(to: f64, base: usize, noise: Noise, seeds: u64) -> [f64; 3] {
        let p = Params::default();
        let near = |c: &Change| c.index + 1 >= base && c.index <= base + 1;
        let mut hits = [0usize; 3];
        for seed in 0..seeds {
            let xs = series(seed, &[(100.0, base), (to, 3)], noise);
            let seen = |ok: &dyn Fn(&Change) -> bool| {
                (base + 1..=base + 3).any(|end| newest(&xs[..end], 0, &p).is_some_and(|c| ok(&c)))
            };
            hits[0] += usize::from(seen(&near));
            hits[1] += usize::from(seen(&|c| c.index == base));
            hits[2] += usize::from(replay(&xs, &p).iter().any(|(c, _)| near(c)));
        }
        let rates = hits.map(|h| 100.0 * h as f64 / seeds as f64);
        eprintln!("{base} runs, then {to}: {rates:.2?}% found/exact/replayed");
        rates
    }

    fn assert_found(noise: Noise, least: f64) {
        for to in [95.0, 105.0] {
            let r = found(to, 10, noise, 5000);
            assert!(r[0] >= least, "to {to}: {r:?}% found/exact/replayed");
        }
    }

    #[test]
    fn a_five_percent_step_is_found_within_three_runs() {
        assert_found(Noise::Gauss(0.01), 99.0);
    }

    #[test]
    fn a_five_percent_step_is_found_in_heavy_tailed_noise() {
        assert_found(Noise::T3(0.01), 95.0);
    }

    /// One run 15% off in the baseline must not blind the watch (it would
    /// for some 40 runs without `without_outliers`).
    #[test]
    fn a_five_percent_step_is_found_despite_outliers() {
        let r = found(95.0, 30, Noise::Outliers, 2000);
        assert!(r[0] >= 90.0, "{r:?}% found/exact/replayed");
    }

    /// Up 5% at run 20 and back at run 40: the watch finds the second too,
    /// against the baseline the first started. Found: reported by the
    /// step's third run, once it has begun, placed within 3 runs of it
    /// (a low run or two just before a step can pull the split earlier).
    /// A miss is a false alarm just before a step, which leaves it too
    /// short a baseline. Twice: two reports within 5 runs of a step, the
    /// rest of a step first placed early and underestimated.
    #[test]
    fn each_step_is_found_and_once() {
        let p = Params::default();
        let (mut both, mut twice) = (0, 0);
        for seed in 0..1000 {
            let levels = [(100.0, 20), (105.0, 20), (100.0, 20)];
            let xs = series(seed, &levels, Noise::Gauss(0.01));
            let seen = replay(&xs, &p);
            let by = |s: usize, c: &Change, end: usize| {
                (s + 1..=s + 3).contains(&end) && c.index + 3 >= s
            };
            let found = |s| seen.iter().any(|(c, end)| by(s, c, *end));
            let near = |s: usize| {
                seen.iter()
                    .filter(|(c, _)| (s..s + 8).contains(&(c.index + 3)))
                    .count()
            };
            both += usize::from(found(20) && found(40));
            twice += usize::from(near(20) > 1 || near(40) > 1);
        }
        eprintln!("two steps: both found in {both} of 1000, one twice in {twice}");
        assert!(both >= 960 && twice <= 5, "{both} both, {twice} twice");
    }

    #[test]
    fn a_clean_step_is_one_change_at_its_index() {
        let xs = [[100.0; 20], [105.0; 20]].concat();
        let found = replay(&xs, &Params::default());
        let got: Vec<_> = found
            .iter()
            .map(|(c, _)| (c.index, c.before, c.after, c.p))
            .collect();
        assert_eq!(got, [(20, 100.0, 105.0, 0.0)]);
        assert!((found[0].0.relative() - 0.05).abs() < 1e-12);
        assert!(replay(&[100.0; 30], &Params::default()).is_empty());
    }

    /// Only the newest `window` points count: 30 steady runs show a 3%
    /// step the newest 5 are too few to show.
    #[test]
    fn the_window_bounds_the_baseline() {
        let xs = [[99.0, 101.0].repeat(15), vec![103.0, 103.0]].concat();
        let p = Params::default();
        assert_eq!(newest(&xs, 0, &p).map(|c| c.index), Some(30));
        assert_eq!(newest(&xs, 0, &Params { window: 7, ..p }), None);
    }

    /// Failed runs are skipped; nothing odd panics.
    #[test]
    fn non_finite_short_or_empty_give_no_panic() {
        let p = Params::default();
        assert_eq!(newest(&[], 0, &p), None);
        let short = [100.0, 100.0, 100.0, 100.0, 100.0, 200.0];
        assert_eq!(newest(&short, 0, &p), None);
        assert_eq!(newest(&[100.0; 10], 11, &p), None);
        let (n, i) = (f64::NAN, f64::INFINITY);
        let xs = [
            100.0, 101.0, 99.0, n, 100.0, 101.0, 99.0, i, 100.0, 99.0, 105.0, n, 106.0, 104.0, -i,
        ];
        let found: Vec<_> = replay(&xs, &p).iter().map(|(c, _)| c.index).collect();
        assert_eq!(found, [10]);
        assert_eq!(newest(&xs[..12], 0, &p), None); // a failed run confirms nothing
        assert_eq!(newest(&[n; 20], 0, &p), None);
        let huge = [1e308, -1e308, 1e308, -1e308, 1e308, 1e308, 1e308];
        assert_eq!(newest(&huge, 0, &p), None);
    }
}
