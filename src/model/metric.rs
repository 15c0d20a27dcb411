//! A metric a landscape can show: its key (as study files name it in
//! plots and tables), its title and unit, and how it is read from one
//! iteration of a stored result. Here, below the kinds, so that a kind
//! declares its own (`Kind::metrics`) beside the common ones the report
//! keeps (`report::analysis::metrics`).

use crate::model::result::{Iteration, TestResult};
use crate::model::spec::MainMetric;
use crate::units::{fmt_bps, fmt_bytes, fmt_rate, fmt_us};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    BitsPerSecond,
    PerSecond,
    Micros,
    Percent,
    MicrosPerKb,
    MicrosPerTx,
    Seconds,
    Millis,
    Bytes,
    /// A dimensionless measured/model ratio.
    Ratio,
    /// Megabytes (10^6 bytes) per second: a cipher's speed on one core.
    MegabytesPerSecond,
    /// Round trips per minute (the responsiveness test's RPM).
    PerMinute,
}

pub struct Metric {
    pub key: &'static str,
    pub title: &'static str,
    pub unit: Unit,
    /// True when a larger value is better (throughput), false for costs.
    pub higher_is_better: bool,
    /// The workloads whose main figure this metric is (None: any test's).
    /// A plot of it leaves the other tests out when both kinds are there.
    pub main_of: Option<MainMetric>,
    /// The value of one iteration of a result (None: it has none).
    pub get: fn(&TestResult, &Iteration) -> Option<f64>,
}

impl Metric {
    pub fn value(&self, r: &TestResult, it: &Iteration) -> Option<f64> {
        (self.get)(r, it).filter(|v| v.is_finite())
    }

    /// A value in this metric's unit, for tables and key points.
    pub fn fmt(&self, v: f64) -> String {
        match self.unit {
            Unit::BitsPerSecond => fmt_bps(v),
            // fmt_rate carries its own "/s".
            Unit::PerSecond => fmt_rate(v),
            Unit::Micros => fmt_us(v),
            Unit::Percent => format!("{v:.1}%"),
            Unit::MicrosPerKb => format!("{v:.3} µs/KB"),
            Unit::MicrosPerTx => format!("{v:.2} µs/tx"),
            Unit::Seconds => fmt_seconds(v),
            Unit::Millis => format!("{v:.2} ms"),
            Unit::Bytes => fmt_bytes(v.max(0.0).round() as u64),
            Unit::Ratio => format!("{v:.2}"),
            Unit::MegabytesPerSecond => format!("{:.1} MB/s", v / 1e6),
            Unit::PerMinute => format!("{v:.0} RPM"),
        }
    }

    /// Axis label with the unit the plot scales to.
    pub fn axis_label(&self) -> String {
        let unit = match self.unit {
            Unit::BitsPerSecond => "Gbit/s",
            Unit::PerSecond => "per second",
            Unit::Micros => "µs",
            Unit::Percent => "%",
            Unit::MicrosPerKb => "µs per KB",
            Unit::MicrosPerTx => "µs per transaction",
            Unit::Seconds => "s",
            Unit::Millis => "ms",
            Unit::Bytes => "KiB",
            Unit::Ratio => "measured/model",
            Unit::MegabytesPerSecond => "MB/s",
            Unit::PerMinute => "round trips per minute",
        };
        format!("{} ({unit})", self.title)
    }

    /// The factor plots divide by (bits/s are drawn in Gbit/s, bytes in KiB).
    pub fn plot_scale(&self) -> f64 {
        match self.unit {
            Unit::BitsPerSecond => 1e9,
            Unit::Bytes => 1024.0,
            Unit::MegabytesPerSecond => 1e6,
            _ => 1.0,
        }
    }
}

/// Seconds with about three significant digits: transfer times run from
/// milliseconds (loopback) to minutes (a small window on a long path).
fn fmt_seconds(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0} s")
    } else if a >= 10.0 {
        format!("{v:.1} s")
    } else if a >= 1.0 {
        format!("{v:.2} s")
    } else {
        format!("{v:.3} s")
    }
}
