//! An open loop's schedule: when a flow's request `i` is due, counted from
//! the flow's first request. One schedule for every open-loop workload (rr,
//! udp-rr, memcache), so `--rate` and `--rate-ramp` mean the same in each
//! and the corrected latency of each is measured from the same due times.

use std::time::{Duration, Instant};

/// A flow's offered rate, steady or rising (`--rate-ramp`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pace {
    /// Requests per second of this flow, once ramped.
    rate: f64,
    /// Seconds over which the rate rises from a tenth of `rate` to all of
    /// it (None: `rate` from the first request).
    ramp_s: Option<f64>,
}

impl Pace {
    /// None for a closed loop: no rate, or one that is not positive.
    pub fn new(rate: Option<f64>, ramp_s: Option<f64>) -> Option<Pace> {
        rate.filter(|r| *r > 0.0 && r.is_finite()).map(|rate| Pace {
            rate,
            ramp_s: ramp_s.filter(|r| *r > 0.0),
        })
    }

    /// Requests per second once ramped.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// When request `i` is due, the schedule having started at `start`.
    pub fn due(&self, start: Instant, i: u64) -> Instant {
        start + Duration::from_secs_f64(self.due_s(i))
    }

    /// Seconds from the start at which request `i` is due.
    pub fn due_s(&self, i: u64) -> f64 {
        match self.ramp_s {
            Some(ramp) => ramped_due_s(i as f64, self.rate, ramp),
            None => i as f64 / self.rate,
        }
    }
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
        assert_eq!(p.due_s(0), 0.0);
        assert!((p.due_s(4000) - 1.0).abs() < 1e-12);
        let t0 = Instant::now();
        assert_eq!(p.due(t0, 2) - t0, Duration::from_micros(500));
        assert_eq!(Pace::new(None, Some(5.0)), None);
        assert_eq!(Pace::new(Some(0.0), None), None);
        // A ramp of zero seconds is no ramp.
        assert_eq!(
            Pace::new(Some(10.0), Some(0.0)),
            Pace::new(Some(10.0), None)
        );
        let r = Pace::new(Some(1000.0), Some(10.0)).unwrap();
        assert!((r.due_s(5500) - 10.0).abs() < 1e-9);
    }
}
