//! The metrics a landscape can show, by the names study files use in plots
//! and tables. Each is read per iteration from a stored result, so a point's
//! value is the mean over every iteration of every repetition and its error
//! bar the confidence interval over the same samples.

pub use crate::model::metric::{Metric, Unit};
use crate::model::result::{Iteration, TestResult};
use crate::model::spec::MainMetric;
use crate::report::analysis::wanmodel;
use std::sync::OnceLock;

/// A transfer with an end: an iteration's duration is then the time of the
/// transfer (first byte to the reply, or the command's wall time), not a
/// measurement window chosen in advance.
fn is_transfer(r: &TestResult) -> bool {
    r.spec.is_finite() || r.exec.is_some()
}

fn is_transactional(r: &TestResult) -> bool {
    r.summary.main_metric == Some(MainMetric::TransactionRate) || r.summary.latency_us.is_some()
}

/// CPU per KB is the cost figure of a test that moves bulk data: a
/// stream, a finite transfer (which also records its duration as a
/// latency, so it cannot be told by that) or a datagram flood. An rr's
/// per-KB cost is its per-transaction cost in disguise.
fn moves_bulk(r: &TestResult) -> bool {
    match r.summary.main_metric {
        Some(m) => m != MainMetric::TransactionRate,
        None => !is_transactional(r),
    }
}

fn latency(
    r: &TestResult,
    it: &Iteration,
    pick: fn(&crate::model::sample::LatencySummary) -> f64,
) -> Option<f64> {
    if !is_transactional(r) {
        return None;
    }
    it.latency_us.as_ref().map(pick)
}

/// udp-rr's one-way delay up (client to agent) or down, where measured.
fn owd(
    it: &Iteration,
    up: bool,
    pick: fn(&crate::model::sample::LatencySummary) -> f64,
) -> Option<f64> {
    let u = it.udp.as_ref()?;
    if up { &u.owd_up_us } else { &u.owd_down_us }
        .as_ref()
        .map(pick)
}

/// A search's capacity when its rates are bit rates (`bits`: an RPM
/// search's load) or per second (the others), None otherwise.
fn capacity_of(r: &TestResult, bits: bool) -> Option<f64> {
    r.search
        .as_ref()
        .filter(|s| s.target.metric.bits() == bits)
        .and_then(|s| s.capacity_per_s)
}

/// The metrics every kind may have (a kind's own are its `Kind::metrics`).
pub const METRICS: &[Metric] = &[
    // A capacity search's answer (`--search`): per result, not per iteration.
    Metric {
        key: "capacity_per_s",
        title: "Capacity at the latency target (offered rate)",
        unit: Unit::PerSecond,
        higher_is_better: true,
        main_of: None,
        get: |r, _| capacity_of(r, false),
    },
    Metric {
        key: "capacity_bps",
        title: "Capacity at the RPM floor (load each way)",
        unit: Unit::BitsPerSecond,
        higher_is_better: true,
        main_of: None,
        get: |r, _| capacity_of(r, true),
    },
    Metric {
        key: "capacity_achieved_per_s",
        title: "Achieved at the capacity",
        unit: Unit::PerSecond,
        higher_is_better: true,
        main_of: None,
        get: |r, _| {
            capacity_of(r, false)?;
            r.search.as_ref()?.achieved_per_s
        },
    },
    Metric {
        key: "capacity_p99_us",
        title: "p99 at the capacity (net: from intended send, less the sender's lateness)",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |r, _| {
            let s = r.search.as_ref()?;
            let c = s.capacity_per_s?;
            s.points
                .iter()
                .find(|p| p.rate_per_s == Some(c))
                .and_then(|p| p.p99_us)
        },
    },
    Metric {
        key: "throughput_bps",
        title: "Throughput",
        unit: Unit::BitsPerSecond,
        higher_is_better: true,
        main_of: Some(MainMetric::Throughput),
        get: |_, it| Some(it.throughput_bps),
    },
    Metric {
        key: "transactions_per_s",
        title: "Transactions",
        unit: Unit::PerSecond,
        higher_is_better: true,
        main_of: Some(MainMetric::TransactionRate),
        get: |r, it| is_transactional(r).then_some(it.transactions_per_s),
    },
    Metric {
        key: "packets_per_s",
        title: "Packets received",
        unit: Unit::PerSecond,
        higher_is_better: true,
        main_of: Some(MainMetric::PacketRate),
        get: |_, it| it.udp.as_ref().map(|u| u.packets_per_s),
    },
    Metric {
        key: "packets_sent_per_s",
        title: "Packets sent",
        unit: Unit::PerSecond,
        higher_is_better: true,
        main_of: None,
        get: |_, it| it.udp.as_ref().map(|u| u.packets_sent_per_s),
    },
    Metric {
        key: "wire_bps",
        title: "Wire rate",
        unit: Unit::BitsPerSecond,
        higher_is_better: true,
        main_of: None,
        get: |_, it| it.udp.as_ref().map(|u| u.wire_bps),
    },
    Metric {
        key: "loss_pct",
        title: "Loss",
        unit: Unit::Percent,
        higher_is_better: false,
        main_of: None,
        get: |_, it| it.udp.as_ref().map(|u| u.loss_pct),
    },
    Metric {
        key: "receiver_drop_pct",
        title: "Receiver drops",
        unit: Unit::Percent,
        higher_is_better: false,
        main_of: None,
        get: |_, it| {
            it.udp
                .as_ref()
                .map(|u| 100.0 * u.receiver_drops as f64 / (u.packets + u.lost).max(1) as f64)
        },
    },
    Metric {
        key: "jitter_us",
        title: "Jitter (RFC 3550)",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |_, it| it.udp.as_ref().and_then(|u| u.jitter_us),
    },
    Metric {
        key: "client_us_per_packet",
        title: "Client CPU per packet",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |_, it| it.udp.as_ref().and_then(|u| u.client_us_per_packet),
    },
    Metric {
        key: "agent_us_per_packet",
        title: "Agent CPU per packet",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |_, it| it.udp.as_ref().and_then(|u| u.agent_us_per_packet),
    },
    Metric {
        key: "connections_per_s",
        title: "Connections",
        unit: Unit::PerSecond,
        higher_is_better: true,
        main_of: None,
        get: |r, it| r.summary.connections_per_s.map(|_| it.connections_per_s),
    },
    Metric {
        key: "latency_p50_us",
        title: "Latency p50",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |r, it| latency(r, it, |l| l.p50),
    },
    Metric {
        key: "latency_p90_us",
        title: "Latency p90",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |r, it| latency(r, it, |l| l.p90),
    },
    Metric {
        key: "latency_p99_us",
        title: "Latency p99",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |r, it| latency(r, it, |l| l.p99),
    },
    Metric {
        key: "load_beside_bps",
        title: "Load beside (other groups)",
        unit: Unit::BitsPerSecond,
        higher_is_better: false,
        main_of: None,
        get: |_, it| it.load_beside_bps,
    },
    Metric {
        key: "latency_p999_us",
        title: "Latency p99.9",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |r, it| latency(r, it, |l| l.p999),
    },
    // udp-rr's one-way delays (where the ends' clock offset was known):
    // beside a load, which direction's queue grows.
    Metric {
        key: "owd_up_p50_us",
        title: "One-way up (client to agent) p50",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |_, it| owd(it, true, |l| l.p50),
    },
    Metric {
        key: "owd_up_p99_us",
        title: "One-way up (client to agent) p99",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |_, it| owd(it, true, |l| l.p99),
    },
    Metric {
        key: "owd_down_p50_us",
        title: "One-way down (agent to client) p50",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |_, it| owd(it, false, |l| l.p50),
    },
    Metric {
        key: "owd_down_p99_us",
        title: "One-way down (agent to client) p99",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |_, it| owd(it, false, |l| l.p99),
    },
    Metric {
        key: "client_cpu_pct",
        title: "Client process CPU",
        unit: Unit::Percent,
        higher_is_better: false,
        main_of: None,
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
        main_of: None,
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
        main_of: None,
        get: |_, it| it.cpu.client.as_ref().map(|_| it.cost.client.host_util_pct),
    },
    Metric {
        key: "agent_host_cpu_pct",
        title: "Agent host CPU",
        unit: Unit::Percent,
        higher_is_better: false,
        main_of: None,
        get: |_, it| it.cpu.agent.as_ref().map(|_| it.cost.agent.host_util_pct),
    },
    Metric {
        key: "client_us_per_kb",
        title: "Client CPU per KB",
        unit: Unit::MicrosPerKb,
        higher_is_better: false,
        main_of: None,
        get: |r, it| moves_bulk(r).then_some(it.cost.client.us_per_kb).flatten(),
    },
    Metric {
        key: "agent_us_per_kb",
        title: "Agent CPU per KB",
        unit: Unit::MicrosPerKb,
        higher_is_better: false,
        main_of: None,
        get: |r, it| moves_bulk(r).then_some(it.cost.agent.us_per_kb).flatten(),
    },
    Metric {
        key: "client_us_per_tx",
        title: "Client CPU per transaction",
        unit: Unit::MicrosPerTx,
        higher_is_better: false,
        main_of: None,
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
        main_of: None,
        get: |r, it| {
            is_transactional(r)
                .then_some(it.cost.agent.us_per_tx)
                .flatten()
        },
    },
    Metric {
        key: "transfer_s",
        title: "Transfer time",
        unit: Unit::Seconds,
        higher_is_better: false,
        main_of: None,
        get: |r, it| is_transfer(r).then_some(it.duration_s),
    },
    Metric {
        key: "observed_window_bytes",
        title: "Observed window",
        unit: Unit::Bytes,
        higher_is_better: true,
        main_of: None,
        get: |r, _| {
            r.summary
                .observed_window_bytes
                .or_else(|| {
                    let e = r.exec.as_ref()?;
                    e.observed_window
                        .as_ref()
                        .map(|o| u64::from(o.median_bytes))
                })
                .map(|b| b as f64)
        },
    },
    Metric {
        key: "rtt_measured_ms",
        title: "Measured RTT",
        unit: Unit::Millis,
        higher_is_better: false,
        main_of: None,
        get: |r, _| {
            r.lab
                .as_ref()
                .map(|l| l.calibration.rtt_rr_ms)
                .filter(|v| *v > 0.0)
        },
    },
    Metric {
        key: "login_s",
        title: "SSH login time",
        unit: Unit::Seconds,
        higher_is_better: false,
        main_of: None,
        get: |r, _| r.exec.as_ref().and_then(|e| e.login_s),
    },
    Metric {
        key: "model_ratio",
        title: "Throughput / window-RTT model",
        unit: Unit::Ratio,
        higher_is_better: true,
        main_of: None,
        get: |r, it| {
            let m = wanmodel::for_result(r)?;
            Some(it.throughput_bps / m.prediction.throughput_bps)
        },
    },
];

/// Every metric: the common ones (`METRICS`), then each kind's own
/// (`Kind::metrics`, in the registry's order).
pub fn all() -> &'static [&'static Metric] {
    static ALL: OnceLock<Vec<&'static Metric>> = OnceLock::new();
    ALL.get_or_init(|| {
        METRICS
            .iter()
            .chain(crate::workload::KINDS.iter().flat_map(|k| k.metrics()))
            .collect()
    })
}

/// Every metric `r` has, with its mean over the result's ok iterations
/// (or its only one), in the catalogue's order: a single result's figures,
/// as `--metrics` and the history record them.
pub fn means(r: &TestResult) -> Vec<(&'static Metric, f64)> {
    let its: Vec<_> = r
        .iterations
        .iter()
        .filter(|i| i.status.is_ok() || r.iterations.len() == 1)
        .collect();
    all()
        .iter()
        .filter_map(|m| {
            let v: Vec<f64> = its.iter().filter_map(|i| m.value(r, i)).collect();
            let mean = v.iter().sum::<f64>() / v.len() as f64;
            (!v.is_empty() && mean.is_finite()).then_some((*m, mean))
        })
        .collect()
}

pub fn find(key: &str) -> Option<&'static Metric> {
    all().iter().copied().find(|m| m.key == key)
}

pub fn names() -> String {
    all().iter().map(|m| m.key).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::analysis::wanmodel::testing::{model_bps, wan_result};

    fn get(key: &str, r: &TestResult) -> Option<f64> {
        find(key).unwrap().value(r, &r.iterations[0])
    }

    #[test]
    fn every_metric_key_names_one_metric_common_or_a_kinds() {
        let mut keys: Vec<&str> = all().iter().map(|m| m.key).collect();
        let n = keys.len();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), n, "a kind's metric shadows another's key");
        // The kinds' own are in the catalogue.
        for k in ["rpm", "cipher_mb_per_s", "idle_p99_us"] {
            assert!(find(k).is_some(), "{k}");
        }
    }

    #[test]
    fn rates_print_their_unit_once() {
        let m = find("transactions_per_s").unwrap();
        assert_eq!(m.fmt(16_100.0), "16.1k/s");
        assert_eq!(find("connections_per_s").unwrap().fmt(950.0), "950/s");
    }

    #[test]
    fn wan_metrics_read_the_transfer_the_lab_and_the_model() {
        let mut r = wan_result(100, "64K", 0.9 * model_bps(100, "64K"));
        let t = get("transfer_s", &r).unwrap();
        assert!((t - r.iterations[0].duration_s).abs() < 1e-12);
        assert!((get("model_ratio", &r).unwrap() - 0.9).abs() < 1e-9);
        assert_eq!(get("rtt_measured_ms", &r), None, "not calibrated");
        r.lab.as_mut().unwrap().calibration.rtt_rr_ms = 100.4;
        assert_eq!(get("rtt_measured_ms", &r), Some(100.4));
        assert_eq!(get("observed_window_bytes", &r), None);
        r.summary.observed_window_bytes = Some(65_535);
        assert_eq!(get("observed_window_bytes", &r), Some(65_535.0));
        assert_eq!(
            find("observed_window_bytes").unwrap().fmt(65_535.0),
            "64.0 KiB"
        );
        assert_eq!(get("login_s", &r), None);
        // A test over a time window has no transfer time and no model.
        r.spec.bytes = None;
        assert_eq!(get("transfer_s", &r), None);
        assert_eq!(get("model_ratio", &r), None);
        // scp: its wall time and login.
        r.spec.workload = crate::model::spec::Workload::named("scp");
        r.exec = Some(crate::model::exec::ExecRecord {
            elapsed_s: 2.9,
            login_s: Some(0.9),
            ..Default::default()
        });
        assert!(get("transfer_s", &r).is_some());
        assert_eq!(get("login_s", &r), Some(0.9));
        assert_eq!(find("login_s").unwrap().fmt(0.9), "0.900 s");
        assert_eq!(find("transfer_s").unwrap().fmt(77.04), "77.0 s");
        assert_eq!(find("model_ratio").unwrap().fmt(0.8712), "0.87");
    }
}
