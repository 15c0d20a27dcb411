//! rpm's metrics, as studies name them in tables, plots, sweeps and
//! searches: the draft's figures, and the round trip an RPM stands for (to
//! read beside rrul's loaded latency).

use super::params::Responsiveness;
use crate::model::metric::{Metric, Unit};
use crate::model::result::Iteration;

/// An iteration's responsiveness test.
fn responsiveness(it: &Iteration) -> Option<Responsiveness> {
    Responsiveness::of(&it.own)
}

pub const METRICS: &[Metric] = &[
    Metric {
        key: "rpm",
        title: "Responsiveness",
        unit: Unit::PerMinute,
        higher_is_better: true,
        main_of: None,
        get: |_, it| Some(responsiveness(it)?.rpm),
    },
    Metric {
        key: "foreign_rpm",
        title: "Responsiveness, new connections (foreign)",
        unit: Unit::PerMinute,
        higher_is_better: true,
        main_of: None,
        get: |_, it| Some(responsiveness(it)?.foreign_rpm),
    },
    Metric {
        key: "self_rpm",
        title: "Responsiveness, loaded connections (self)",
        unit: Unit::PerMinute,
        higher_is_better: true,
        main_of: None,
        get: |_, it| Some(responsiveness(it)?.self_rpm),
    },
    Metric {
        key: "rpm_rtt_us",
        title: "Round trip under load (60,000 / RPM)",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |_, it| {
            let r = responsiveness(it)?.rpm;
            (r > 0.0).then(|| 60e6 / r)
        },
    },
    Metric {
        key: "rpm_idle_rtt_us",
        title: "Idle round trip (rpm)",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |_, it| Some(responsiveness(it)?.idle_rtt_us),
    },
    Metric {
        key: "rpm_self_down_us",
        title: "Self probes on download connections (rpm)",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |_, it| responsiveness(it)?.http_self_down_us,
    },
    Metric {
        key: "rpm_self_up_us",
        title: "Self probes on upload connections (rpm)",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |_, it| responsiveness(it)?.http_self_up_us,
    },
    Metric {
        key: "rpm_down_bps",
        title: "Capacity down (rpm)",
        unit: Unit::BitsPerSecond,
        higher_is_better: true,
        main_of: None,
        get: |_, it| Some(responsiveness(it)?.capacity_down_bps),
    },
    Metric {
        key: "rpm_up_bps",
        title: "Capacity up (rpm)",
        unit: Unit::BitsPerSecond,
        higher_is_better: true,
        main_of: None,
        get: |_, it| Some(responsiveness(it)?.capacity_up_bps),
    },
];

/// The CPU an rpm result carries from the windows measured (`cpu`: the
/// client's and the server's, None where not this run's): each end's cost
/// per KB of the load (`bytes`; per probe means little) and the summary's
/// fields.
pub fn cpu_figures(
    cpu: &crate::model::result::Pair<Option<crate::model::sample::CpuWindow>>,
    bytes: u64,
) -> (
    crate::model::result::Pair<crate::model::sample::CpuCost>,
    crate::model::result::Pair<crate::model::result::CpuFields>,
) {
    use crate::model::result::{CpuFields, Pair};
    use crate::model::sample::{CpuCost, CpuWindow};
    let cost = |w: &Option<CpuWindow>| {
        w.as_ref()
            .map(|w| crate::measure::cpu::cost(w, bytes, 0, 0.0))
            .unwrap_or_default()
    };
    let costs = Pair {
        client: cost(&cpu.client),
        agent: cost(&cpu.agent),
    };
    let fields = |w: &Option<CpuWindow>, c: &CpuCost| CpuFields {
        host_util_pct: w.as_ref().map(|_| c.host_util_pct),
        process_util_pct: w.as_ref().map(|_| c.process_util_pct),
        us_per_kb: c.us_per_kb,
        us_per_tx: None,
    };
    let summary = Pair {
        client: fields(&cpu.client, &costs.client),
        agent: fields(&cpu.agent, &costs.agent),
    };
    (costs, summary)
}
