//! Per-interval counters on a timeline shared by every worker of a side.
//!
//! The timeline starts at `t0` (the start signal). Warm-up runs from t0 to
//! `t0 + warmup`; the measurement window follows, cut into intervals of
//! `interval` (the last may be shorter). Each worker closes an interval when
//! it first sees the clock past its edge, so every worker counts the same
//! window, and aggregates are sums of interval counters (never averages of
//! per-flow rates taken over different times: netperf's skew error).

use serde::{Deserialize, Serialize};
use std::ops::{AddAssign, Sub};
use std::time::Duration;

use super::cpu::CpuWindow;
use super::histogram::LatencySummary;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Payload bytes received and sent (control headers excluded).
    pub bytes_rx: u64,
    pub bytes_tx: u64,
    /// Completed transactions (counted where the response is received).
    pub transactions: u64,
    /// Connections completed (crr) or accepted (agent side of crr).
    pub connections: u64,
    /// crr connections that ended with a FIN / with a reset.
    pub graceful_closes: u64,
    pub resets: u64,
    /// Flow errors (resets or failures before the window ended).
    pub errors: u64,
    /// TLS handshakes completed on connections made during the test (crr,
    /// tls-handshake), and how many of them resumed a session.
    #[serde(default)]
    pub tls_handshakes: u64,
    #[serde(default)]
    pub tls_resumed: u64,
}

impl AddAssign for Counters {
    fn add_assign(&mut self, o: Counters) {
        self.bytes_rx += o.bytes_rx;
        self.bytes_tx += o.bytes_tx;
        self.transactions += o.transactions;
        self.connections += o.connections;
        self.graceful_closes += o.graceful_closes;
        self.resets += o.resets;
        self.errors += o.errors;
        self.tls_handshakes += o.tls_handshakes;
        self.tls_resumed += o.tls_resumed;
    }
}

impl Sub for Counters {
    type Output = Counters;
    fn sub(self, o: Counters) -> Counters {
        Counters {
            bytes_rx: self.bytes_rx - o.bytes_rx,
            bytes_tx: self.bytes_tx - o.bytes_tx,
            transactions: self.transactions - o.transactions,
            connections: self.connections - o.connections,
            graceful_closes: self.graceful_closes - o.graceful_closes,
            resets: self.resets - o.resets,
            errors: self.errors - o.errors,
            tls_handshakes: self.tls_handshakes - o.tls_handshakes,
            tls_resumed: self.tls_resumed - o.tls_resumed,
        }
    }
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

/// One side's totals over one interval, after merging its workers.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct IntervalSample {
    pub index: usize,
    /// Seconds since the window started (warm-up end).
    pub start_s: f64,
    pub end_s: f64,
    pub counters: Counters,
    /// Latency of transactions completed in this interval (client side).
    pub latency_us: Option<LatencySummary>,
    /// Latency from the intended send time (open-loop rr only).
    pub latency_corrected_us: Option<LatencySummary>,
    /// Host and process CPU over this interval.
    pub cpu: Option<CpuWindow>,
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

    #[test]
    fn counters_add_and_subtract() {
        let a = Counters {
            bytes_rx: 10,
            transactions: 2,
            ..Default::default()
        };
        let mut b = Counters {
            bytes_rx: 5,
            resets: 1,
            ..Default::default()
        };
        b += a;
        assert_eq!(b.bytes_rx, 15);
        assert_eq!(
            b - a,
            Counters {
                bytes_rx: 5,
                resets: 1,
                ..Default::default()
            }
        );
    }
}
