//! The metrics a landscape can show, by the names study files use in plots
//! and tables. Each is read per iteration from a stored result, so a point's
//! value is the mean over every iteration of every repetition and its error
//! bar the confidence interval over the same samples.

use crate::result::{Iteration, TestResult};
use crate::spec::MainMetric;
use crate::units::{fmt_bps, fmt_rate, fmt_us};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    BitsPerSecond,
    PerSecond,
    Micros,
    Percent,
    MicrosPerKb,
    MicrosPerTx,
}

pub struct Metric {
    pub key: &'static str,
    pub title: &'static str,
    pub unit: Unit,
    /// True when a larger value is better (throughput), false for costs.
    pub higher_is_better: bool,
    get: fn(&TestResult, &Iteration) -> Option<f64>,
}

impl Metric {
    pub fn value(&self, r: &TestResult, it: &Iteration) -> Option<f64> {
        (self.get)(r, it).filter(|v| v.is_finite())
    }

    /// A value in this metric's unit, for tables and key points.
    pub fn fmt(&self, v: f64) -> String {
        match self.unit {
            Unit::BitsPerSecond => fmt_bps(v),
            Unit::PerSecond => format!("{}/s", fmt_rate(v)),
            Unit::Micros => fmt_us(v),
            Unit::Percent => format!("{v:.1}%"),
            Unit::MicrosPerKb => format!("{v:.3} µs/KB"),
            Unit::MicrosPerTx => format!("{v:.2} µs/tx"),
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
        };
        format!("{} ({unit})", self.title)
    }

    /// The factor plots divide by (bits/s are drawn in Gbit/s).
    pub fn plot_scale(&self) -> f64 {
        if self.unit == Unit::BitsPerSecond {
            1e9
        } else {
            1.0
        }
    }
}

fn is_transactional(r: &TestResult) -> bool {
    r.summary.main_metric == Some(MainMetric::TransactionRate) || r.summary.latency_us.is_some()
}

fn latency(
    r: &TestResult,
    it: &Iteration,
    pick: fn(&crate::measure::histogram::LatencySummary) -> f64,
) -> Option<f64> {
    if !is_transactional(r) {
        return None;
    }
    it.latency_us.as_ref().map(pick)
}

pub const METRICS: &[Metric] = &[
    Metric {
        key: "throughput_bps",
        title: "Throughput",
        unit: Unit::BitsPerSecond,
        higher_is_better: true,
        get: |_, it| Some(it.throughput_bps),
    },
    Metric {
        key: "transactions_per_s",
        title: "Transactions",
        unit: Unit::PerSecond,
        higher_is_better: true,
        get: |r, it| is_transactional(r).then_some(it.transactions_per_s),
    },
    Metric {
        key: "connections_per_s",
        title: "Connections",
        unit: Unit::PerSecond,
        higher_is_better: true,
        get: |r, it| r.summary.connections_per_s.map(|_| it.connections_per_s),
    },
    Metric {
        key: "latency_p50_us",
        title: "Latency p50",
        unit: Unit::Micros,
        higher_is_better: false,
        get: |r, it| latency(r, it, |l| l.p50),
    },
    Metric {
        key: "latency_p90_us",
        title: "Latency p90",
        unit: Unit::Micros,
        higher_is_better: false,
        get: |r, it| latency(r, it, |l| l.p90),
    },
    Metric {
        key: "latency_p99_us",
        title: "Latency p99",
        unit: Unit::Micros,
        higher_is_better: false,
        get: |r, it| latency(r, it, |l| l.p99),
    },
    Metric {
        key: "latency_p999_us",
        title: "Latency p99.9",
        unit: Unit::Micros,
        higher_is_better: false,
        get: |r, it| latency(r, it, |l| l.p999),
    },
    Metric {
        key: "client_cpu_pct",
        title: "Client process CPU",
        unit: Unit::Percent,
        higher_is_better: false,
        get: |_, it| {
            it.cpu
                .client
                .as_ref()
                .map(|_| it.cost.client.process_util_pct)
        },
    },
    Metric {
        key: "agent_cpu_pct",
        title: "Agent process CPU",
        unit: Unit::Percent,
        higher_is_better: false,
        get: |_, it| {
            it.cpu
                .agent
                .as_ref()
                .map(|_| it.cost.agent.process_util_pct)
        },
    },
    Metric {
        key: "client_host_cpu_pct",
        title: "Client host CPU",
        unit: Unit::Percent,
        higher_is_better: false,
        get: |_, it| it.cpu.client.as_ref().map(|_| it.cost.client.host_util_pct),
    },
    Metric {
        key: "agent_host_cpu_pct",
        title: "Agent host CPU",
        unit: Unit::Percent,
        higher_is_better: false,
        get: |_, it| it.cpu.agent.as_ref().map(|_| it.cost.agent.host_util_pct),
    },
    Metric {
        key: "client_us_per_kb",
        title: "Client CPU per KB",
        unit: Unit::MicrosPerKb,
        higher_is_better: false,
        get: |r, it| {
            (!is_transactional(r))
                .then_some(it.cost.client.us_per_kb)
                .flatten()
        },
    },
    Metric {
        key: "agent_us_per_kb",
        title: "Agent CPU per KB",
        unit: Unit::MicrosPerKb,
        higher_is_better: false,
        get: |r, it| {
            (!is_transactional(r))
                .then_some(it.cost.agent.us_per_kb)
                .flatten()
        },
    },
    Metric {
        key: "client_us_per_tx",
        title: "Client CPU per transaction",
        unit: Unit::MicrosPerTx,
        higher_is_better: false,
        get: |r, it| {
            is_transactional(r)
                .then_some(it.cost.client.us_per_tx)
                .flatten()
        },
    },
    Metric {
        key: "agent_us_per_tx",
        title: "Agent CPU per transaction",
        unit: Unit::MicrosPerTx,
        higher_is_better: false,
        get: |r, it| {
            is_transactional(r)
                .then_some(it.cost.agent.us_per_tx)
                .flatten()
        },
    },
];

pub fn find(key: &str) -> Option<&'static Metric> {
    METRICS.iter().find(|m| m.key == key)
}

pub fn names() -> String {
    METRICS.iter().map(|m| m.key).collect::<Vec<_>>().join(", ")
}
