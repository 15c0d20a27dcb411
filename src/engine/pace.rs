//! An open loop's schedule: when each of a flow's requests is due, counted
//! from the flow's first request. One schedule for every open-loop workload
//! (rr, udp-rr, memcache), so `--rate`, `--rate-ramp` and `--arrivals` mean
//! the same in each and the corrected latency of each is measured from the
//! same due times.
//!
//! A request's due time is its position along the load curve mapped to
//! time: position i is the moment i requests are due by (N(t) = i). Even
//! spacing puts request i at position i; a Poisson process puts it at the
//! sum of i exponential gaps of mean 1, which the same mapping turns into a
//! Poisson process of the curve's rate, ramped or not (time rescaling).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::model::spec::{Arrivals, TestSpec};

/// Flow `id`'s schedule under `spec`: its share of `--rate` (one of
/// `flows`), ramped and spaced as the spec says. None: a closed loop.
pub fn for_flow(spec: &TestSpec, flows: usize, id: u32) -> Option<Schedule> {
    let rate = spec.rate.map(|r| r / flows.max(1) as f64);
    let pace = Pace::new(rate, spec.rate_ramp_s)?.spaced(spec.arrivals);
    let seed = (id as u64) << 32 ^ std::process::id() as u64 ^ super::udp::mono_ns();
    Some(Schedule::new(pace, seed))
}

/// A flow's offered rate, steady or rising (`--rate-ramp`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pace {
    /// Requests per second of this flow, once ramped.
    rate: f64,
    /// Seconds over which the rate rises from a tenth of `rate` to all of
    /// it (None: `rate` from the first request).
    ramp_s: Option<f64>,
    arrivals: Arrivals,
}

impl Pace {
    /// None for a closed loop: no rate, or one that is not positive.
    pub fn new(rate: Option<f64>, ramp_s: Option<f64>) -> Option<Pace> {
        rate.filter(|r| *r > 0.0 && r.is_finite()).map(|rate| Pace {
            rate,
            ramp_s: ramp_s.filter(|r| *r > 0.0),
            arrivals: Arrivals::Uniform,
        })
    }

    /// The same rate with requests spaced as `arrivals` says.
    pub fn spaced(mut self, arrivals: Arrivals) -> Pace {
        self.arrivals = arrivals;
        self
    }

    /// Seconds from the start at which position `x` of the load curve is
    /// reached (`x` requests due by then).
    pub fn due_s(&self, x: f64) -> f64 {
        match self.ramp_s {
            Some(ramp) => ramped_due_s(x, self.rate, ramp),
            None => x / self.rate,
        }
    }
}

/// One flow's schedule: its requests' due times, in order. Workloads peek
/// at the next ones (how many are due now) and take each as it is sent.
#[derive(Debug)]
pub struct Schedule {
    pace: Pace,
    start: Option<Instant>,
    /// Positions of the next requests, drawn but not yet taken.
    ahead: VecDeque<f64>,
    /// Requests drawn so far, and the last one's position.
    drawn: u64,
    last: f64,
    rng: SmallRng,
}

impl Schedule {
    /// `seed` makes each flow's Poisson gaps its own.
    pub fn new(pace: Pace, seed: u64) -> Self {
        Schedule {
            pace,
            start: None,
            ahead: VecDeque::new(),
            drawn: 0,
            last: 0.0,
            rng: SmallRng::seed_from_u64(seed),
        }
    }

    /// Starts the schedule at `now` (its first call; later ones keep it).
    pub fn begin(&mut self, now: Instant) -> Instant {
        *self.start.get_or_insert(now)
    }

    fn draw(&mut self) -> f64 {
        let x = match self.pace.arrivals {
            Arrivals::Uniform => self.drawn as f64,
            // An exponential gap of mean 1 (1 - u is in (0, 1]).
            Arrivals::Poisson => self.last - (1.0 - self.rng.random::<f64>()).ln(),
        };
        self.drawn += 1;
        self.last = x;
        x
    }

    /// When the `k`-th next request is due (0: the next); None before
    /// `begin`.
    pub fn peek(&mut self, k: usize) -> Option<Instant> {
        let start = self.start?;
        while self.ahead.len() <= k {
            let x = self.draw();
            self.ahead.push_back(x);
        }
        Some(start + Duration::from_secs_f64(self.pace.due_s(self.ahead[k])))
    }

    /// The next request's due time, which it now takes; None before
    /// `begin`.
    pub fn take(&mut self) -> Option<Instant> {
        let due = self.peek(0)?;
        self.ahead.pop_front();
        Some(due)
    }

    /// The next request if it is due by `now` (taken), else when it will
    /// be (left for later); None before `begin`.
    pub fn next_by(&mut self, now: Instant) -> Option<Next> {
        let due = self.peek(0)?;
        if due > now {
            return Some(Next::At(due));
        }
        self.ahead.pop_front();
        Some(Next::Due(due))
    }
}

/// What `Schedule::next_by` found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// The next request was due at this time: send it now.
    Due(Instant),
    /// The next request falls due then: wait for it.
    At(Instant),
}

/// The time, seconds from the start, at which request `i` is due when the
/// rate rises linearly from `rate / 10` to `rate` over `ramp_s` and then
/// holds: the inverse of the requests due by t, N(t) = r0 t + (r - r0)
/// t^2 / (2 T) while ramping.
pub fn ramped_due_s(i: f64, rate: f64, ramp_s: f64) -> f64 {
    let r0 = rate / 10.0;
    let by_end = ramp_s * (rate + r0) / 2.0;
    if i >= by_end {
        return ramp_s + (i - by_end) / rate;
    }
    let a = (rate - r0) / (2.0 * ramp_s);
    (-r0 + (r0 * r0 + 4.0 * a * i).sqrt()) / (2.0 * a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ramped_schedule_rises_from_a_tenth_and_then_holds() {
        // 1000/s over 10 s: 100/s at first; 5500 due by 10 s, then 1000/s.
        let t = |i: f64| ramped_due_s(i, 1000.0, 10.0);
        assert!(t(0.0).abs() < 1e-12);
        assert!((t(5500.0) - 10.0).abs() < 1e-9);
        assert!((t(6500.0) - 11.0).abs() < 1e-9);
        // The first second carries 145 requests (100/s rising by 90/s/s).
        assert!((t(145.0) - 1.0).abs() < 1e-9);
        let gaps: Vec<f64> = (1..5500).map(|i| t(i as f64) - t(i as f64 - 1.0)).collect();
        assert!(
            gaps.windows(2).all(|w| w[1] <= w[0] + 1e-12),
            "the gaps shrink"
        );
    }

    #[test]
    fn a_steady_pace_is_evenly_spaced_and_a_closed_loop_has_none() {
        let p = Pace::new(Some(4000.0), None).unwrap();
        assert_eq!(p.due_s(0.0), 0.0);
        assert!((p.due_s(4000.0) - 1.0).abs() < 1e-12);
        let mut s = Schedule::new(p, 1);
        assert_eq!(s.peek(0), None, "not begun");
        let t0 = Instant::now();
        s.begin(t0);
        assert_eq!(s.peek(2).unwrap() - t0, Duration::from_micros(500));
        assert_eq!(s.take().unwrap(), t0);
        assert_eq!(s.take().unwrap() - t0, Duration::from_micros(250));
        assert_eq!(s.begin(t0 + Duration::from_secs(1)), t0, "the start holds");
        // Taken only once due: the third is due 500 µs in.
        assert_eq!(
            s.next_by(t0 + Duration::from_micros(100)),
            Some(Next::At(t0 + Duration::from_micros(500)))
        );
        assert_eq!(
            s.next_by(t0 + Duration::from_micros(600)),
            Some(Next::Due(t0 + Duration::from_micros(500)))
        );
        assert_eq!(s.peek(0).unwrap() - t0, Duration::from_micros(750));
        assert_eq!(Pace::new(None, Some(5.0)), None);
        assert_eq!(Pace::new(Some(0.0), None), None);
        // A ramp of zero seconds is no ramp.
        assert_eq!(
            Pace::new(Some(10.0), Some(0.0)),
            Pace::new(Some(10.0), None)
        );
        let r = Pace::new(Some(1000.0), Some(10.0)).unwrap();
        assert!((r.due_s(5500.0) - 10.0).abs() < 1e-9);
    }

    /// Gaps of a schedule, seconds, over `n` requests.
    fn gaps(p: Pace, n: usize) -> Vec<f64> {
        let t0 = Instant::now();
        let mut s = Schedule::new(p, 7);
        s.begin(t0);
        let due: Vec<f64> = (0..n)
            .map(|_| (s.take().unwrap() - t0).as_secs_f64())
            .collect();
        due.windows(2).map(|w| w[1] - w[0]).collect()
    }

    #[test]
    fn poisson_arrivals_have_exponential_gaps_of_the_rate() {
        let n = 200_000;
        let g = gaps(
            Pace::new(Some(1000.0), None)
                .unwrap()
                .spaced(Arrivals::Poisson),
            n,
        );
        let mean = g.iter().sum::<f64>() / g.len() as f64;
        let var = g.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / g.len() as f64;
        // Mean 1 ms (its standard error is 1 ms / sqrt(n) = 2.2 µs), and a
        // coefficient of variation of 1 (even spacing's is 0).
        assert!((mean - 1e-3).abs() < 10e-6, "mean gap {mean}");
        let cv = var.sqrt() / mean;
        assert!((cv - 1.0).abs() < 0.02, "cv {cv}");
        // Memoryless: P(gap > 2 ms) = e^-2.
        let over = g.iter().filter(|x| **x > 2e-3).count() as f64 / g.len() as f64;
        assert!((over - (-2.0f64).exp()).abs() < 0.005, "{over}");
        let even = gaps(Pace::new(Some(1000.0), None).unwrap(), 1000);
        assert!(even.iter().all(|x| (x - 1e-3).abs() < 1e-9));
        // Ramped: the first second of 1000/s over 10 s holds about 145.
        let mut s = Schedule::new(
            Pace::new(Some(1000.0), Some(10.0))
                .unwrap()
                .spaced(Arrivals::Poisson),
            3,
        );
        let t0 = Instant::now();
        s.begin(t0);
        let mut first_s = 0;
        while s.take().unwrap() - t0 < Duration::from_secs(1) {
            first_s += 1;
        }
        // Poisson with mean 145: 4 sigma is 48.
        assert!((97..=193).contains(&first_s), "{first_s}");
    }
}
