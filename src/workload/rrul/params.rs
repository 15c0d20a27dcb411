//! RRUL (flent's Realtime Response Under Load) as data: what `linerate run
//! rrul` adds to a test's spec (its phases and probes, the spec's section
//! `rrul`), and the section it adds to a result, `latency_under_load`
//! (docs/result-schema.md); the schema carries both as the kind's own
//! (`model::own`).
//!
//! The timeline: the probes (an rr and a udp-rr, open loop at a modest
//! rate) run alone for `idle_s`, then the streams start (N up, N down);
//! their first `ramp_s` (the spec's warm-up: slow start) count for neither
//! phase, and the loaded phase is the `duration_s` after it. Times are
//! seconds since the common start (the probes' first request).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::error::Invalid;
pub use crate::model::phase::Phase;
use crate::model::sample::LatencySummary;

/// The spec's section (`spec.own`) that holds `RrulSpec`.
pub const SECTION: &str = "rrul";
/// The iterations' and summary's section that holds `LatencyUnderLoad`.
pub const FIGURES: &str = "latency_under_load";

/// What rrul adds to a spec.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct RrulSpec {
    /// Seconds the probes run alone before the streams start.
    pub idle_s: f64,
    /// Each probe's open-loop rate, requests/s.
    pub probe_rate: f64,
    /// TCP streams each way.
    pub streams: u32,
}

impl RrulSpec {
    /// A spec's rrul section.
    pub fn of(spec: &crate::model::spec::TestSpec) -> Result<RrulSpec, String> {
        spec.own.need(SECTION, "rrul needs its phases and probes")
    }

    /// Its phases begin on interval edges (each phase's latency is the
    /// merge of whole intervals'): the idle phase and the ramp (`warmup_s`)
    /// are whole intervals.
    pub fn validate(&self, warmup_s: f64, interval_s: f64) -> Result<(), Invalid> {
        let whole = |v: f64| (v / interval_s - (v / interval_s).round()).abs() < 1e-6;
        if !whole(self.idle_s) || !whole(warmup_s) {
            return Err(format!(
                "rrul's phases begin on interval edges: --idle {} s and --warmup {} s must be whole intervals (--interval {} s)",
                self.idle_s, warmup_s, interval_s
            )
            .into());
        }
        if !(self.idle_s >= 0.0 && self.idle_s <= MAX_IDLE_S) {
            return Err(format!("--idle {} s: from 0 to {MAX_IDLE_S:.0} s", self.idle_s).into());
        }
        if !(self.probe_rate > 0.0 && self.probe_rate <= 100_000.0) {
            return Err(format!(
                "--probe-rate {}: above 0 and at most 100k requests/s",
                self.probe_rate
            )
            .into());
        }
        if !(1..=1024).contains(&self.streams) {
            return Err(format!("--streams {}: 1 to 1024 each way", self.streams).into());
        }
        Ok(())
    }

    /// The phases on the common timeline: idle, the streams' ramp (when
    /// there is one), loaded (`loaded_s`, the spec's duration).
    pub fn phases(&self, ramp_s: f64, loaded_s: f64) -> Vec<Phase> {
        let mut out = Vec::new();
        let mut at = 0.0;
        for (name, len) in [
            ("idle", self.idle_s),
            ("ramp", ramp_s),
            ("loaded", loaded_s),
        ] {
            if len > 0.0 {
                out.push(Phase {
                    name: name.into(),
                    start_s: at,
                    end_s: at + len,
                });
            }
            at += len;
        }
        out
    }
}

impl Default for RrulSpec {
    fn default() -> Self {
        RrulSpec {
            idle_s: 3.0,
            probe_rate: 20.0,
            streams: 4,
        }
    }
}

/// The longest idle phase: the streams' agents wait for their start with
/// their connections open, and an agent gives up on a start that does not
/// come within a minute of its setup.
pub const MAX_IDLE_S: f64 = 30.0;

/// Requests each probe may have in flight: at 20/s a probe waits for an
/// earlier one only past a 1.6 s round trip.
pub const PROBE_OUTSTANDING: u32 = 32;

/// One probe's round trips per phase (from each request's actual send).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct ProbeLatency {
    /// The probe's workload: `rr` (TCP) or `udp-rr`.
    pub probe: String,
    /// Its group in the result's `groups[]`.
    pub group: String,
    pub idle_us: Option<LatencySummary>,
    /// The streams' first seconds (their slow start): in neither phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp_us: Option<LatencySummary>,
    pub loaded_us: Option<LatencySummary>,
    /// udp-rr: requests unanswered within the timeout, per phase.
    #[serde(default)]
    pub idle_lost: u64,
    #[serde(default)]
    pub loaded_lost: u64,
}

/// One probe in one interval.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct PointLatency {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    pub count: u64,
}

/// One interval of the timeline (flent's plot over time).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct SeriesPoint {
    /// Seconds since the common start.
    pub start_s: f64,
    pub end_s: f64,
    /// The phase the interval belongs to.
    pub phase: String,
    /// Probe (`rr`, `udp-rr`) -> its round trips in this interval, µs.
    pub latency_us: BTreeMap<String, PointLatency>,
    /// The streams' throughput each way in this interval (None: not
    /// started, the idle phase).
    pub up_bps: Option<f64>,
    pub down_bps: Option<f64>,
}

/// `summary.latency_under_load` (and each iteration's): the probes' round
/// trips idle and under load, the streams' throughput, the phases, and
/// the timeline.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct LatencyUnderLoad {
    /// The TCP probe's (rr) round trips, µs: the headline.
    pub idle_p50_us: Option<f64>,
    pub idle_p99_us: Option<f64>,
    pub loaded_p50_us: Option<f64>,
    pub loaded_p99_us: Option<f64>,
    /// Loaded minus idle (what the load added), µs.
    pub added_p50_us: Option<f64>,
    pub added_p99_us: Option<f64>,
    /// The streams' goodput each way over the loaded phase (payload bits/s
    /// counted at the receivers): up = client to agent.
    pub up_bps: f64,
    pub down_bps: f64,
    /// TCP streams each way.
    pub streams: u32,
    /// Each probe's rate, requests/s.
    pub probe_rate: f64,
    /// Phase lengths, seconds.
    pub idle_s: f64,
    pub ramp_s: f64,
    pub loaded_s: f64,
    /// The phases as planned on the common timeline.
    pub phases: Vec<Phase>,
    /// Every probe (rr first), per phase.
    pub probes: Vec<ProbeLatency>,
    /// Per interval, seconds since the common start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<SeriesPoint>,
}

impl LatencyUnderLoad {
    /// An iteration's or a summary's figures (None: not an rrul result).
    pub fn of(own: &crate::model::own::Own) -> Option<LatencyUnderLoad> {
        own.get(FIGURES)
    }

    /// The phase an instant (seconds since the common start) falls in.
    pub fn phase_at(&self, t_s: f64) -> Option<&Phase> {
        self.phases
            .iter()
            .find(|p| t_s >= p.start_s - 1e-6 && t_s < p.end_s - 1e-6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instant_falls_in_one_phase() {
        let l = LatencyUnderLoad {
            phases: vec![
                Phase {
                    name: "idle".into(),
                    start_s: 0.0,
                    end_s: 3.0,
                },
                Phase {
                    name: "loaded".into(),
                    start_s: 3.0,
                    end_s: 13.0,
                },
            ],
            ..Default::default()
        };
        assert_eq!(l.phase_at(0.0).unwrap().name, "idle");
        assert_eq!(l.phase_at(3.0).unwrap().name, "loaded");
        assert_eq!(l.phase_at(12.5).unwrap().name, "loaded");
        assert!(l.phase_at(13.0).is_none());
    }
}
