//! The capacity search's arithmetic, free of sockets so that a synthetic
//! latency curve can drive it: which rate to try next (a closed-loop peak,
//! a ramp by factors of two to bracket the knee, then bisection down to
//! the resolution), and how sure a step's verdict is (the confidence
//! interval of a percentile from its histogram's order statistics, of a
//! loss from its counts).
//!
//! mutilate bisects between 1 and the peak and then walks down 2% at a
//! time; starting from the peak's eighth and doubling brackets the knee in
//! at most four steps wherever it is, and bisection then needs about
//! log2(1 / resolution) more (six at 2%). The rate found is then run once
//! more (a confirmation step): a tail that stalls now and then can meet in
//! one window and miss in the next, further apart than one window's own
//! sampling interval, and a capacity should hold in both. A confirmation
//! that misses makes that rate a missed one and the search goes on below.
//!
//! When even the ramp's first rate misses, the search halves the rate
//! until one meets, and each halving doubles a step's window (it needs the
//! same number of samples). A tail that does not come from the load (a
//! host whose other work stalls the generator, a path's own jitter) never
//! meets that way: after two halvings in a row that each leave the
//! figure's excess over the limit above four fifths of what it was, the
//! search says so and stops, rather than spend minutes at rates that
//! cannot matter. (A queue's excess shrinks by more than half per halving
//! near a knee, and goes negative where its floor is below the limit.)

use super::histogram::Hist;
use crate::model::search::{SearchPhase, ACHIEVED_FLOOR, MAX_STEPS};

/// The next step: its phase and its offered rate (None: closed loop).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Step {
    pub phase: SearchPhase,
    pub rate: Option<f64>,
}

/// Where the search stands.
#[derive(Clone, Debug)]
pub struct Search {
    resolution: f64,
    peak: Option<f64>,
    /// Lowest rate that missed.
    missed: Option<f64>,
    /// Every rate that met and was not missed later (a confirmation); the
    /// highest is the bracket's floor.
    met_rates: Vec<f64>,
    /// The bracket is within the resolution: its met rate runs again.
    confirming: bool,
    /// Rates that met once and missed on their confirmation.
    unconfirmed: Vec<f64>,
    /// While nothing has met: each missed ramp rate and its figure's
    /// excess over the limit, in the order run (halving down).
    falling: Vec<(f64, Option<f64>)>,
    /// Ramping down stops below this rate (its steps could not gather
    /// their samples).
    slowest: f64,
    /// Rates are bit rates (an RPM search's load), read as such.
    bits: bool,
    steps: u32,
    done: Option<String>,
}

/// Confirmations that may miss before the search stops saying the tail is
/// not stable (each one costs a step or more below it).
const MAX_UNCONFIRMED: usize = 3;

/// The ramp starts here, as a fraction of the closed-loop peak.
const RAMP_START: f64 = 1.0 / 8.0;
/// Ramping down stops below this fraction of the peak: nothing met.
const RAMP_FLOOR: f64 = 1.0 / 1024.0;
/// A halving that leaves the figure's excess over the limit above this
/// fraction of the one before did not lower it: the miss is not the
/// load's.
const FLAT: f64 = 0.8;
/// Halvings in a row that may leave the figure flat before the search
/// stops (one could be a stall in the lower rate's window).
const FLAT_HALVINGS: usize = 2;
/// Ramping up stops above this multiple of the peak (an open loop with
/// more requests in flight may pass a closed loop's peak, not by far).
const RAMP_CEILING: f64 = 4.0;

impl Search {
    /// A search to `resolution_pct` (2: stop when the bracket is within 2%).
    pub fn new(resolution_pct: f64) -> Search {
        Search {
            resolution: resolution_pct / 100.0,
            peak: None,
            missed: None,
            met_rates: Vec::new(),
            confirming: false,
            unconfirmed: Vec::new(),
            falling: Vec::new(),
            slowest: 0.0,
            bits: false,
            steps: 0,
            done: None,
        }
    }

    /// The same search, ramping down no lower than `rate` (see
    /// `SearchSpec::slowest_rate`).
    pub fn slowest(mut self, rate: f64) -> Search {
        self.slowest = rate;
        self
    }

    /// The same search, its rates bit rates (in its messages).
    pub fn in_bits(mut self, bits: bool) -> Search {
        self.bits = bits;
        self
    }

    /// The step to run now, or None when the search is over (`stopped`
    /// says why).
    pub fn next(&self) -> Option<Step> {
        if self.done.is_some() {
            return None;
        }
        let Some(peak) = self.peak else {
            return Some(Step {
                phase: SearchPhase::Peak,
                rate: None,
            });
        };
        if self.confirming {
            return Some(Step {
                phase: SearchPhase::Confirm,
                rate: self.met(),
            });
        }
        let rate = match (self.met(), self.missed) {
            (None, None) => peak * RAMP_START,
            (Some(m), None) => m * 2.0,
            (None, Some(x)) => x / 2.0,
            (Some(m), Some(x)) => (m + x) / 2.0,
        };
        let phase = match (self.met(), self.missed) {
            (Some(_), Some(_)) => SearchPhase::Bisect,
            _ => SearchPhase::Ramp,
        };
        Some(Step {
            phase,
            rate: Some(rate),
        })
    }

    /// Records what the step `next` gave did: the rate it achieved,
    /// whether it met the target, and by how much its searched figure (a
    /// percentile or a loss) exceeded the limit, in the target's unit
    /// (None when it had no samples).
    pub fn record(&mut self, step: Step, achieved: f64, met: bool, excess: Option<f64>) {
        self.steps += 1;
        match step.rate {
            None => {
                if achieved.is_nan() || achieved <= 0.0 {
                    self.done = Some("the closed-loop peak completed nothing".into());
                    return;
                }
                self.peak = Some(achieved);
            }
            Some(rate) if step.phase == SearchPhase::Confirm => {
                self.confirming = false;
                if met {
                    self.done = Some(format!(
                        "the met and missed rates are within {:.1}% (the resolution), and the met rate met again",
                        100.0 * self.resolution
                    ));
                    return;
                }
                // It met once and missed now: a missed rate, and the
                // highest rate below it that met is the bracket's floor.
                self.missed = Some(self.missed.map_or(rate, |x| x.min(rate)));
                self.met_rates.retain(|m| *m < rate);
                self.unconfirmed.push(rate);
                if self.unconfirmed.len() >= MAX_UNCONFIRMED {
                    self.done = Some(format!(
                        "the tail is not stable here: {} met once and missed on a second run; the capacity given met once",
                        rates(self.unconfirmed.iter().copied(), ", ", self.bits)
                    ));
                    return;
                }
            }
            Some(rate) if met => {
                self.met_rates.push(rate);
            }
            Some(rate) => {
                self.missed = Some(self.missed.map_or(rate, |x| x.min(rate)));
                if self.met().is_none() {
                    self.falling.push((rate, excess));
                }
            }
        }
        self.settle();
    }

    fn settle(&mut self) {
        let peak = self.peak.unwrap_or(0.0);
        let flat = self
            .flat_run()
            .map(|run| rates(run.iter().map(|x| x.0), " -> ", self.bits));
        match (self.met(), self.missed) {
            _ if self.steps >= MAX_STEPS => {
                self.done = Some(format!("{MAX_STEPS} steps run (the most a search runs)"));
            }
            (Some(m), Some(x)) if x <= m * (1.0 + self.resolution) => {
                self.confirming = true;
            }
            (None, Some(_)) if flat.is_some() => {
                self.done = Some(format!(
                    "halving the offered rate ({}) did not bring it nearer the limit: the tail does not come from the load here (the host's other work or the path holds it above the target)",
                    flat.unwrap_or_default()
                ));
            }
            (None, Some(x)) if x / 2.0 < peak * RAMP_FLOOR => {
                self.done = Some(format!(
                    "no rate met the target down to {:.4} of the closed-loop peak",
                    x / peak.max(1e-9)
                ));
            }
            (None, Some(x)) if x / 2.0 < self.slowest => {
                self.done = Some(format!(
                    "no rate met the target down to {x:.0}/s; below {:.0}/s a step cannot gather its samples in its longest window",
                    self.slowest
                ));
            }
            (Some(m), None) if m * 2.0 > peak * RAMP_CEILING => {
                self.done = Some(format!(
                    "every rate met the target up to {RAMP_CEILING}x the closed-loop peak: the generator, not the target, is the limit"
                ));
            }
            _ => {}
        }
    }

    /// The last FLAT_HALVINGS halvings and the rate before them, when
    /// (nothing met) each left the figure's excess above FLAT of the one
    /// before.
    fn flat_run(&self) -> Option<&[(f64, Option<f64>)]> {
        let run = self
            .falling
            .get(self.falling.len().checked_sub(FLAT_HALVINGS + 1)?..)?;
        run.windows(2)
            .all(|w| match (w[0].1, w[1].1) {
                (Some(a), Some(b)) => b >= FLAT * a,
                _ => false,
            })
            .then_some(run)
    }

    /// The highest offered rate that met the target.
    pub fn capacity(&self) -> Option<f64> {
        self.met()
    }

    /// The highest rate that met (and was not missed on a second run).
    fn met(&self) -> Option<f64> {
        self.met_rates.iter().copied().reduce(f64::max)
    }

    /// The lowest offered rate above it that missed.
    pub fn missed(&self) -> Option<f64> {
        self.missed
    }

    pub fn peak(&self) -> Option<f64> {
        self.peak
    }

    pub fn steps(&self) -> u32 {
        self.steps
    }

    /// Why the search ended (None while it runs).
    pub fn stopped(&self) -> Option<&str> {
        self.done.as_deref()
    }

    /// Ends the search early (an error, Ctrl-C), saying why.
    pub fn stop(&mut self, why: String) {
        self.done.get_or_insert(why);
    }
}

/// Rates as a stop reason lists them ("12500/s -> 6250/s").
fn rates(rates: impl Iterator<Item = f64>, sep: &str, bits: bool) -> String {
    rates
        .map(|r| {
            if bits {
                crate::units::fmt_bps(r)
            } else {
                format!("{r:.0}/s")
            }
        })
        .collect::<Vec<_>>()
        .join(sep)
}

/// Whether an open loop kept up: achieved at least ACHIEVED_FLOOR of the
/// offered rate.
pub fn kept_up(rate: f64, achieved: f64) -> bool {
    achieved >= ACHIEVED_FLOOR * rate
}

/// The q-quantile of `h` with a confidence interval from its order
/// statistics: the sample ranks n*q -/+ z*sqrt(n*q*(1-q)) (the rank of a
/// quantile is binomial), read back as values. In the histogram's unit.
pub fn quantile_bounds(h: &Hist, q: f64, z: f64) -> Option<(f64, f64, f64, u64)> {
    let n = h.len();
    if n == 0 {
        return None;
    }
    let nf = n as f64;
    let spread = z * (nf * q * (1.0 - q)).sqrt();
    let at = |rank: f64| {
        let r = rank.clamp(0.0, nf);
        h.value_at_quantile((r / nf).clamp(0.0, 1.0)) as f64
    };
    Some((
        h.value_at_quantile(q) as f64,
        at(nf * q - spread),
        at(nf * q + spread + 1.0),
        n,
    ))
}

/// A loss percentage with its Wilson score interval: `lost` of `sent`.
pub fn loss_bounds(lost: u64, sent: u64, z: f64) -> Option<(f64, f64, f64)> {
    if sent == 0 {
        return None;
    }
    let n = sent as f64;
    let p = (lost.min(sent)) as f64 / n;
    let z2 = z * z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / (1.0 + z2 / n);
    Some((
        100.0 * p,
        100.0 * (centre - half).max(0.0),
        100.0 * (centre + half).min(1.0),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::histogram::{new_hist, record_ns};

    /// A server whose p99 is `base / (1 - rate/cap)` (a queue: flat, then
    /// a knee), and whose closed loop gets `cap` through.
    fn drive(cap: f64, base_us: f64, limit_us: f64, resolution: f64) -> (Search, Vec<Step>) {
        let mut s = Search::new(resolution);
        let mut steps = Vec::new();
        while let Some(step) = s.next() {
            steps.push(step);
            let (achieved, p99) = match step.rate {
                None => (cap, f64::INFINITY),
                Some(r) if r >= cap => (cap, f64::INFINITY),
                Some(r) => (r, base_us / (1.0 - r / cap)),
            };
            let met = step.rate.is_some_and(|r| kept_up(r, achieved)) && p99 <= limit_us;
            s.record(step, achieved, met, Some(p99 - limit_us));
            assert!(steps.len() <= 30, "the search never ends");
        }
        (s, steps)
    }

    #[test]
    fn a_synthetic_knee_is_found_within_the_resolution_in_twelve_steps() {
        // Knees at 83%, 40% and 4% of the peak, and one at 99%.
        for (cap, base, limit) in [
            (100_000.0, 50.0, 300.0),
            (250_000.0, 60.0, 100.0),
            (50_000.0, 96.0, 100.0),
            (10_000.0, 3.0, 300.0),
        ] {
            let knee = cap * (1.0 - base / limit);
            let (s, steps) = drive(cap, base, limit, 2.0);
            let found = s.capacity().expect("a capacity");
            assert!(found <= knee, "{found} above the knee {knee}");
            assert!(
                found >= knee / 1.02,
                "{found} more than 2% below the knee {knee}"
            );
            let missed = s.missed().expect("a missed rate");
            assert!(missed > knee && missed <= found * 1.02 + 1e-6);
            // Twelve to the bracket, and the confirmation.
            assert!(steps.len() <= 13, "{} steps for knee {knee}", steps.len());
            assert_eq!(steps[0].phase, SearchPhase::Peak);
            let last = steps.last().unwrap();
            assert_eq!(last.phase, SearchPhase::Confirm);
            assert_eq!(last.rate, Some(found));
            assert!(s.stopped().unwrap().contains("met again"));
        }
    }

    /// Runs a search against `meets(rate, nth run at that rate)`.
    fn drive_runs(meets: impl Fn(f64, u32) -> bool) -> (Search, Vec<Step>) {
        let mut s = Search::new(2.0);
        let mut runs_at: std::collections::BTreeMap<u64, u32> = Default::default();
        let mut steps = Vec::new();
        while let Some(step) = s.next() {
            steps.push(step);
            let (achieved, met) = match step.rate {
                None => (100_000.0, false),
                Some(r) => {
                    let n = runs_at.entry(r as u64).or_default();
                    *n += 1;
                    (r, meets(r, *n))
                }
            };
            s.record(step, achieved, met, None);
            assert!(steps.len() <= 25, "the search never ends");
        }
        (s, steps)
    }

    #[test]
    fn a_capacity_that_misses_its_confirmation_is_searched_below() {
        // The knee is at 60k; a first window between 60k and 61k meets by
        // luck (a stall that did not come). The lucky rate misses on its
        // confirmation and the search goes on below it, to a rate that
        // meets twice.
        let (s, steps) = drive_runs(|r, n| r < 60_000.0 || (r < 61_000.0 && n == 1));
        let cap = s.capacity().expect("a capacity");
        assert!(
            (60_000.0 / 1.03..60_000.0).contains(&cap),
            "{cap}: {steps:?}"
        );
        let confirms: Vec<&Step> = steps
            .iter()
            .filter(|x| x.phase == SearchPhase::Confirm)
            .collect();
        assert!(confirms.len() >= 2, "{steps:?}");
        assert!(confirms[0].rate.unwrap() >= 60_000.0, "{steps:?}");
        assert_eq!(
            confirms.last().unwrap().rate,
            Some(cap),
            "{:?} {steps:?}",
            s.stopped()
        );
        assert!(
            s.stopped().unwrap().contains("met again"),
            "{:?}",
            s.stopped()
        );
        // Every first window in 60k-70k meets: three confirmations miss
        // and the search says the tail is not stable, below all three.
        let (s, steps) = drive_runs(|r, n| r < 60_000.0 || (r < 70_000.0 && n == 1));
        let why = s.stopped().unwrap();
        assert!(why.contains("not stable"), "{why}: {steps:?}");
        let missed: Vec<f64> = steps
            .iter()
            .filter(|x| x.phase == SearchPhase::Confirm)
            .filter_map(|x| x.rate)
            .collect();
        assert_eq!(missed.len(), 3, "{steps:?}");
        assert!(s.capacity().unwrap() < missed.iter().copied().fold(f64::MAX, f64::min));
        assert!(steps.len() <= 20, "{}", steps.len());
    }

    #[test]
    fn nothing_met_and_everything_met_end_with_their_reasons() {
        // The floor of the latency is above the limit: the excess over
        // it stays (271, 233, 216 µs at 1/8, 1/16, 1/32 of the peak), and
        // the search stops there, not 7 halvings and minutes lower.
        let (s, steps) = drive(100_000.0, 500.0, 300.0, 2.0);
        assert_eq!(s.capacity(), None);
        let why = s.stopped().unwrap();
        assert!(
            why.contains("halving") && why.contains("does not come from the load"),
            "{why}"
        );
        assert!(why.contains("12500/s -> 6250/s -> 3125/s"), "{why}");
        assert_eq!(steps.len(), 4, "{steps:?}");
        // A floor just under the limit (97 of 100 µs): halving shrinks the
        // excess (10.9, 3.4, 0.1 µs) and the search goes on down to the
        // knee at 3% of the peak.
        let (s, _) = drive(100_000.0, 97.0, 100.0, 2.0);
        let cap = s.capacity().expect("a capacity");
        assert!((3000.0 / 1.02..=3000.0).contains(&cap), "{cap}");
        // A host whose stalls set the tail (excess 2550, 2430, 2610 µs as
        // measured with two busy loops beside memcached), with one
        // halving that happened to fall: two flat halvings in a row.
        let mut s = Search::new(2.0);
        let excess = [2550.0, 1000.0, 1100.0, 1050.0, 900.0];
        let mut i = 0;
        while let Some(step) = s.next() {
            let e = step.rate.map(|_| excess[i]);
            i += step.rate.is_some() as usize;
            s.record(step, step.rate.unwrap_or(80_000.0), false, e);
            assert!(i < excess.len(), "{:?}", s.stopped());
        }
        assert_eq!(i, 4, "{:?}", s.stopped());
        assert!(s.stopped().unwrap().contains("1250/s"), "{:?}", s.stopped());
        // No figure (nothing sampled): not taken for flat.
        let mut s = Search::new(2.0);
        while let Some(step) = s.next() {
            s.record(step, step.rate.unwrap_or(80_000.0), false, None);
        }
        assert!(
            s.stopped().unwrap().contains("down to"),
            "{:?}",
            s.stopped()
        );
        // A limit no rate below the cap can miss: only the generator stops it.
        let mut s = Search::new(2.0);
        while let Some(step) = s.next() {
            s.record(step, step.rate.unwrap_or(1000.0), step.rate.is_some(), None);
        }
        assert!(s.stopped().unwrap().contains("generator"));
        assert_eq!(s.capacity(), Some(4000.0));
    }

    #[test]
    fn a_quantile_interval_narrows_with_samples_and_holds_the_quantile() {
        let mut small = new_hist();
        let mut big = new_hist();
        for i in 0..1_000u64 {
            record_ns(&mut small, 1_000 + i * 10);
        }
        for i in 0..100_000u64 {
            record_ns(&mut big, 1_000 + (i % 1000) * 10);
        }
        let (v1, lo1, hi1, n1) = quantile_bounds(&small, 0.99, 1.96).unwrap();
        let (v2, lo2, hi2, n2) = quantile_bounds(&big, 0.99, 1.96).unwrap();
        assert_eq!((n1, n2), (1_000, 100_000));
        assert!(lo1 <= v1 && v1 <= hi1 && lo2 <= v2 && v2 <= hi2);
        assert!(
            hi1 - lo1 > 3.0 * (hi2 - lo2),
            "{lo1}..{hi1} vs {lo2}..{hi2}"
        );
        // 1000 samples: ranks 990 -/+ 6.2, about 60 ns either side.
        assert!(lo1 < 10_900.0 && hi1 > 10_900.0 && hi1 - lo1 < 200.0);
        assert!(quantile_bounds(&new_hist(), 0.99, 1.96).is_none());
    }

    #[test]
    fn loss_bounds_hold_the_rate_and_never_leave_zero_to_hundred() {
        let (p, lo, hi) = loss_bounds(10, 10_000, 1.96).unwrap();
        assert!((p - 0.1).abs() < 1e-12 && lo > 0.04 && lo < 0.1 && hi > 0.1 && hi < 0.2);
        let (p, lo, hi) = loss_bounds(0, 1000, 1.96).unwrap();
        assert_eq!((p, lo), (0.0, 0.0));
        assert!(hi > 0.0 && hi < 0.5);
        assert!(loss_bounds(0, 0, 1.96).is_none());
    }
}
