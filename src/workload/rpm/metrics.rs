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

/// What an rpm test measured beside the draft's figures, whether one
/// client ran it here or several clients' runs were pooled (`fleet`).
pub struct Measured {
    /// The loaded phases' length, seconds.
    pub secs: f64,
    /// What the load carried both ways.
    pub bytes: u64,
    pub status: crate::model::result::Status,
    /// Why it ended early, if it did.
    pub error: Option<String>,
    /// The client's and the server's CPU (None where not this run's).
    pub cpu: crate::model::result::Pair<Option<crate::model::sample::CpuWindow>>,
}

/// An rpm result's one iteration and its summary: the draft's figures
/// `f` as its own, probes as its transactions, the load as its bytes and
/// throughput, each end's CPU per KB of the load (per probe means little).
pub fn iteration_and_summary(
    spec: &crate::model::spec::TestSpec,
    f: &Responsiveness,
    m: Measured,
) -> (Iteration, crate::model::result::Summary) {
    use crate::model::result::{CpuFields, Pair, Summary};
    use crate::model::sample::{CpuCost, CpuWindow};
    let cost = |w: &Option<CpuWindow>| {
        w.as_ref()
            .map(|w| crate::measure::cpu::cost(w, m.bytes, 0, 0.0))
            .unwrap_or_default()
    };
    let costs = Pair {
        client: cost(&m.cpu.client),
        agent: cost(&m.cpu.agent),
    };
    let fields = |w: &Option<CpuWindow>, c: &CpuCost| CpuFields {
        host_util_pct: w.as_ref().map(|_| c.host_util_pct),
        process_util_pct: w.as_ref().map(|_| c.process_util_pct),
        us_per_kb: c.us_per_kb,
        us_per_tx: None,
    };
    let summary_cpu = Pair {
        client: fields(&m.cpu.client, &costs.client),
        agent: fields(&m.cpu.agent, &costs.agent),
    };
    let own = crate::model::own::Own::with(super::params::FIGURES, f);
    let throughput = f.capacity_down_bps + f.capacity_up_bps;
    let probes = f.foreign_probes + f.self_probes;
    let it = Iteration {
        index: 0,
        own: own.clone(),
        status: m.status,
        error: m.error,
        duration_s: m.secs,
        bytes: m.bytes,
        throughput_bps: throughput,
        cpu: m.cpu,
        cost: costs,
        transactions: probes,
        transactions_per_s: probes as f64 / m.secs.max(1e-9),
        ..Default::default()
    };
    let summary = Summary {
        workload: spec.workload.name().into(),
        duration_s: m.secs,
        bytes: m.bytes,
        throughput_bps: throughput,
        transactions: probes,
        transactions_per_s: it.transactions_per_s,
        iterations: 1,
        cpu: summary_cpu,
        flows: f.down_connections + f.up_connections,
        status: m.status,
        own,
        search_figure: spec.search.as_ref().map(|_| search_figure(f, probes)),
        ..Default::default()
    };
    (it, summary)
}

/// A step of `--search 'rpm>=N'`: the RPM, and what the load carried of
/// what was offered, the slower direction's goodput (each is capped at
/// the offered rate). One test per step: the draft's own stability rules
/// decided when it had measured, so the figure has no interval of its
/// own (low and high are the figure).
fn search_figure(f: &Responsiveness, probes: u64) -> crate::model::search::SearchFigure {
    let carried = [f.capacity_down_bps, f.capacity_up_bps]
        .into_iter()
        .filter(|b| *b > 0.0)
        .fold(f64::INFINITY, f64::min);
    crate::model::search::SearchFigure {
        value: f.rpm,
        low: f.rpm,
        high: f.rpm,
        samples: probes,
        achieved: Some(if carried.is_finite() { carried } else { 0.0 }),
    }
}
