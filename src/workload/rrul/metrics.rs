//! rrul's metrics: the TCP probe's round trips idle and under load, what
//! the load added, and the streams' goodput each way.

use super::params::LatencyUnderLoad;
use crate::model::metric::{Metric, Unit};
use crate::model::result::Iteration;

/// An iteration's probes idle and under load.
fn under_load(it: &Iteration) -> Option<LatencyUnderLoad> {
    LatencyUnderLoad::of(&it.own)
}

pub const METRICS: &[Metric] = &[
    Metric {
        key: "idle_p50_us",
        title: "Idle latency p50",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |_, it| under_load(it)?.idle_p50_us,
    },
    Metric {
        key: "idle_p99_us",
        title: "Idle latency p99",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |_, it| under_load(it)?.idle_p99_us,
    },
    Metric {
        key: "loaded_p50_us",
        title: "Loaded latency p50",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |_, it| under_load(it)?.loaded_p50_us,
    },
    Metric {
        key: "loaded_p99_us",
        title: "Loaded latency p99",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |_, it| under_load(it)?.loaded_p99_us,
    },
    Metric {
        key: "added_p99_us",
        title: "Latency p99 added under load",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |_, it| under_load(it)?.added_p99_us,
    },
    Metric {
        key: "up_bps",
        title: "Upload under load",
        unit: Unit::BitsPerSecond,
        higher_is_better: true,
        main_of: None,
        get: |_, it| Some(under_load(it)?.up_bps),
    },
    Metric {
        key: "down_bps",
        title: "Download under load",
        unit: Unit::BitsPerSecond,
        higher_is_better: true,
        main_of: None,
        get: |_, it| Some(under_load(it)?.down_bps),
    },
];
