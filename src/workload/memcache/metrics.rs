//! memcache's metrics: operations by type, hit ratio, latency per type
//! and CPU per operation, from the iterations' `kv` figures.

use super::params::KvFigures;
use crate::model::metric::{Metric, Unit};
use crate::model::result::Iteration;
use crate::model::sample::LatencySummary;

pub const METRICS: &[Metric] = &[
    Metric {
        key: "ops_per_s",
        title: "memcached operations",
        unit: Unit::PerSecond,
        higher_is_better: true,
        main_of: None,
        get: |_, it| KvFigures::of(&it.own).as_ref().map(|k| k.ops_per_s),
    },
    Metric {
        key: "gets_per_s",
        title: "Gets (keys)",
        unit: Unit::PerSecond,
        higher_is_better: true,
        main_of: None,
        get: |_, it| KvFigures::of(&it.own).as_ref().map(|k| k.gets_per_s),
    },
    Metric {
        key: "sets_per_s",
        title: "Sets",
        unit: Unit::PerSecond,
        higher_is_better: true,
        main_of: None,
        get: |_, it| KvFigures::of(&it.own).as_ref().map(|k| k.sets_per_s),
    },
    Metric {
        key: "hit_ratio_pct",
        title: "Hit ratio",
        unit: Unit::Percent,
        higher_is_better: true,
        main_of: None,
        get: |_, it| {
            KvFigures::of(&it.own)
                .as_ref()
                .and_then(|k| k.hit_ratio)
                .map(|h| 100.0 * h)
        },
    },
    Metric {
        key: "get_p50_us",
        title: "Get latency p50",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |_, it| kv_latency(it, true, |l| l.p50),
    },
    Metric {
        key: "get_p99_us",
        title: "Get latency p99",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |_, it| kv_latency(it, true, |l| l.p99),
    },
    Metric {
        key: "get_p999_us",
        title: "Get latency p99.9",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |_, it| kv_latency(it, true, |l| l.p999),
    },
    Metric {
        key: "set_p50_us",
        title: "Set latency p50",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |_, it| kv_latency(it, false, |l| l.p50),
    },
    Metric {
        key: "set_p99_us",
        title: "Set latency p99",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |_, it| kv_latency(it, false, |l| l.p99),
    },
    Metric {
        key: "client_us_per_op",
        title: "Client CPU per operation",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |_, it| {
            KvFigures::of(&it.own)
                .as_ref()
                .and_then(|k| k.client_us_per_op)
        },
    },
    Metric {
        key: "server_us_per_op",
        title: "memcached CPU per operation",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |_, it| {
            KvFigures::of(&it.own)
                .as_ref()
                .and_then(|k| k.server_us_per_op)
        },
    },
];

/// memcache: a percentile of the gets' (or sets') latency, µs.
fn kv_latency(it: &Iteration, get: bool, pick: fn(&LatencySummary) -> f64) -> Option<f64> {
    let k = KvFigures::of(&it.own)?;
    let l = if get {
        k.get_latency_us.as_ref()
    } else {
        k.set_latency_us.as_ref()
    };
    l.map(pick)
}
