//! Runs that size themselves (`--duration auto`, after Lancet): what the
//! option adds to a spec, and what the result records of it
//! (docs/result-schema.md, `iterations[].auto` and `summary.auto`).
//!
//! A fixed window is either too short for a drifting system or wastes
//! time on a steady one. With `auto` the controller watches the main
//! figure interval by interval: the warm-up ends when the intervals stop
//! trending, and the window ends once what follows the warm-up is
//! stationary and its mean is known within the confidence target, or at
//! the bound.

use serde::{Deserialize, Serialize};

/// The bound when none is given.
pub const DEFAULT_BOUND_S: f64 = 60.0;
/// At least this many stationary intervals before a window may end.
pub const MIN_INTERVALS: usize = 5;

/// What `--duration auto` adds to a spec (its `duration_s` is the bound).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AutoSpec {
    /// The longest window, seconds (`--max-duration`).
    pub bound_s: f64,
    /// The mean of the stationary intervals is known within +/- width/2
    /// percent at this level (the test's confidence target).
    pub level_pct: f64,
    pub width_pct: f64,
}

/// Why an auto window ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AutoStop {
    /// Stationary after the warm-up, and the confidence target met.
    Stationary,
    /// The bound came first: the intervals were still trending.
    BoundTrending,
    /// The bound came first: stationary, but the mean not yet known well
    /// enough.
    BoundWide,
    /// The test ended for another reason (Ctrl-C, an error).
    Ended,
}

impl AutoStop {
    pub fn words(self) -> &'static str {
        match self {
            AutoStop::Stationary => "stationary, confidence target met",
            AutoStop::BoundTrending => "reached its bound still trending",
            AutoStop::BoundWide => "reached its bound with the confidence target not met",
            AutoStop::Ended => "ended before it settled",
        }
    }
}

/// What an auto window did: `iterations[].auto`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AutoRecord {
    /// Seconds from the start of the window to its end.
    pub ran_s: f64,
    /// The leading intervals that trended (the warm-up the test found),
    /// left out of the figures.
    pub warmup_intervals: usize,
    pub warmup_s: f64,
    /// The intervals the figures are from.
    pub intervals: usize,
    pub stopped: AutoStop,
    /// The Mann-Kendall statistic of the kept intervals (|z| < 1.96: no
    /// trend at 95%).
    pub trend_z: f64,
    /// The kept intervals' mean and the half-width of its confidence
    /// interval, percent of the mean.
    pub mean: f64,
    pub half_width_pct: f64,
    /// A window that reached its bound with intervals at two levels
    /// (lower, upper; `measure::stationary::levels`): why its mean stayed
    /// wide or looked like a trend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels: Option<[f64; 2]>,
}
