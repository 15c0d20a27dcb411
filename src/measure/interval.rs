//! Per-interval counters on a timeline shared by every worker of a side.
//!
//! The timeline starts at `t0` (the start signal). Warm-up runs from t0 to
//! `t0 + warmup`; the measurement window follows, cut into intervals of
//! `interval` (the last may be shorter). Each worker closes an interval when
//! it first sees the clock past its edge, so every worker counts the same
//! window, and aggregates are sums of interval counters (never averages of
//! per-flow rates taken over different times: netperf's skew error).

use std::time::Duration;

/// This host's CLOCK_MONOTONIC in nanoseconds (what `Instant` reads): UDP
/// send stamps, and the clock agents' offsets are measured against.
#[inline]
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The edges of the warm-up and the measurement intervals, relative to t0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timeline {
    pub warmup: Duration,
    pub interval: Duration,
    /// Length of the window; None for finite tests, which end when done.
    pub duration: Option<Duration>,
}

impl Timeline {
    /// Offset from t0 of the end of interval `k` (interval k spans
    /// `edge(k-1)..edge(k)`, with `edge(-1)` = warm-up end), or None when the
    /// window has fewer intervals.
    pub fn edge(&self, k: usize) -> Option<Duration> {
        let end = self.warmup + self.interval * (k as u32 + 1);
        match (self.duration, self.intervals()) {
            (Some(d), Some(n)) => (k < n).then(|| end.min(self.warmup + d)),
            _ => Some(end),
        }
    }

    /// Number of intervals in a timed window (the last may be partial).
    pub fn intervals(&self) -> Option<usize> {
        self.duration.map(|d| {
            let n = (d.as_secs_f64() / self.interval.as_secs_f64() - 1e-9).ceil();
            (n as usize).max(1)
        })
    }

    /// Offset of the window's end, for timed tests.
    pub fn window_end(&self) -> Option<Duration> {
        self.duration.map(|d| self.warmup + d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn edges_cover_the_window_exactly() {
        let t = Timeline {
            warmup: ms(2000),
            interval: ms(1000),
            duration: Some(ms(3500)),
        };
        assert_eq!(t.intervals(), Some(4));
        assert_eq!(t.edge(0), Some(ms(3000)));
        assert_eq!(t.edge(2), Some(ms(5000)));
        assert_eq!(t.edge(3), Some(ms(5500)), "last interval is partial");
        assert_eq!(t.edge(4), None);
        assert_eq!(t.window_end(), Some(ms(5500)));

        let t = Timeline {
            warmup: ms(0),
            interval: ms(500),
            duration: Some(ms(1000)),
        };
        assert_eq!(t.intervals(), Some(2));
        assert_eq!(t.edge(1), Some(ms(1000)));
        assert_eq!(t.edge(2), None);

        let open = Timeline {
            warmup: ms(0),
            interval: ms(250),
            duration: None,
        };
        assert_eq!(open.edge(9), Some(ms(2500)));
        assert_eq!(open.intervals(), None);
    }
}
