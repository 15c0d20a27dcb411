//! The result schema (docs/result-schema.md): one self-describing JSON
//! document per test. `summary` carries names scripts rely on; never rename
//! them, only add.

use serde::{Deserialize, Serialize};

use crate::engine::flow::FlowReport;
use crate::env::HostInfo;
use crate::measure::cpu::{self, CpuCost, CpuWindow};
use crate::measure::histogram::LatencySummary;
use crate::measure::interval::{Counters, IntervalSample};
use crate::measure::placement::WorkerPlacement;
use crate::measure::stats::{self, Confidence, Estimate};
use crate::spec::{MainMetric, TestSpec, Workload};

pub const SCHEMA: &str = "linerate.result";
pub const SCHEMA_VERSION: u32 = 1;

/// Client and agent values of one quantity.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Pair<T> {
    pub client: T,
    pub agent: T,
}

/// Both ends' view of one interval, combined.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TestInterval {
    pub index: usize,
    pub start_s: f64,
    pub end_s: f64,
    /// Payload counted at the receivers (client rx + agent rx).
    pub bytes: u64,
    pub throughput_bps: f64,
    pub transactions: u64,
    pub transactions_per_s: f64,
    pub connections_per_s: f64,
    pub latency_us: Option<LatencySummary>,
    pub latency_corrected_us: Option<LatencySummary>,
    pub cpu: Pair<Option<CpuWindow>>,
    pub counters: Pair<Counters>,
}

pub fn combine(client: &IntervalSample, agent: Option<&IntervalSample>) -> TestInterval {
    let a = agent.map(|a| a.counters).unwrap_or_default();
    let c = client.counters;
    let secs = (client.end_s - client.start_s).max(1e-9);
    let agent_secs = agent
        .map(|a| (a.end_s - a.start_s).max(1e-9))
        .unwrap_or(secs);
    let bytes = c.bytes_rx + a.bytes_rx;
    TestInterval {
        index: client.index,
        start_s: client.start_s,
        end_s: client.end_s,
        bytes,
        // Each receiver's bytes over its own clock's interval.
        throughput_bps: 8.0 * (c.bytes_rx as f64 / secs + a.bytes_rx as f64 / agent_secs),
        transactions: c.transactions,
        transactions_per_s: c.transactions as f64 / secs,
        connections_per_s: c.connections as f64 / secs,
        latency_us: client.latency_us.clone(),
        latency_corrected_us: client.latency_corrected_us.clone(),
        cpu: Pair {
            client: client.cpu.clone(),
            agent: agent.and_then(|a| a.cpu.clone()),
        },
        counters: Pair {
            client: c,
            agent: a,
        },
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Iteration {
    pub index: usize,
    /// "ok", or "partial" when the test ended early (see `error`).
    pub status: String,
    pub error: Option<String>,
    /// Length of the common measurement window (client clock), seconds.
    pub duration_s: f64,
    pub bytes: u64,
    pub throughput_bps: f64,
    pub transactions: u64,
    pub transactions_per_s: f64,
    pub connections: u64,
    pub connections_per_s: f64,
    pub latency_us: Option<LatencySummary>,
    pub latency_corrected_us: Option<LatencySummary>,
    pub cpu: Pair<Option<CpuWindow>>,
    pub cost: Pair<CpuCost>,
    pub counters: Pair<Counters>,
    pub intervals: Vec<TestInterval>,
    pub flows: Pair<Vec<FlowReport>>,
    pub placement: Pair<Vec<WorkerPlacement>>,
    pub errors: Pair<Vec<String>>,
}

impl Iteration {
    pub fn main_value(&self, m: MainMetric) -> f64 {
        match m {
            MainMetric::Throughput => self.throughput_bps,
            MainMetric::TransactionRate => self.transactions_per_s,
        }
    }
}

/// The summary's fixed names (see docs/result-schema.md).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LatencyFields {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl From<&LatencySummary> for LatencyFields {
    fn from(l: &LatencySummary) -> Self {
        LatencyFields {
            p50: l.p50,
            p90: l.p90,
            p99: l.p99,
            p999: l.p999,
            max: l.max,
        }
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct CpuFields {
    pub host_util_pct: Option<f64>,
    pub process_util_pct: Option<f64>,
    pub us_per_kb: Option<f64>,
    pub us_per_tx: Option<f64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub workload: String,
    /// Total length of the measurement windows, seconds.
    pub duration_s: f64,
    /// Payload counted at the receivers in the windows (all iterations).
    pub bytes: u64,
    /// Mean over iterations.
    pub throughput_bps: f64,
    pub transactions: u64,
    pub transactions_per_s: f64,
    pub latency_us: Option<LatencyFields>,
    pub cpu: Pair<CpuFields>,
    // Additions (free to extend):
    pub direction: String,
    pub flows: u32,
    pub iterations: usize,
    pub connections_per_s: Option<f64>,
    pub latency_corrected_us: Option<LatencyFields>,
    /// Confidence interval of the main metric over iterations.
    pub confidence: Option<Estimate>,
    pub main_metric: Option<MainMetric>,
    pub status: String,
    /// What TLS negotiated (the first client flow's session; None: clear).
    #[serde(default)]
    pub tls: Option<crate::engine::tls::TlsInfo>,
    /// TLS handshakes completed per second on the client (crr, tls-handshake).
    #[serde(default)]
    pub tls_handshakes_per_s: Option<f64>,
    /// The receive window the senders saw mid-transfer (tcpi_snd_wnd while
    /// their writes were blocked; median over flows). None: never blocked.
    #[serde(default)]
    pub observed_window_bytes: Option<u64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct AgentInfo {
    pub address: String,
    /// True when linerate started the agent itself on this host.
    pub local: bool,
    pub pid: Option<u32>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TestResult {
    pub schema: String,
    pub schema_version: u32,
    pub started_at: String,
    pub command: Vec<String>,
    pub spec: TestSpec,
    pub confidence_target: Confidence,
    pub agent: AgentInfo,
    pub environment: Pair<HostInfo>,
    pub summary: Summary,
    pub iterations: Vec<Iteration>,
    /// With TLS: the same test in clear text, run right after, so the cost
    /// of encryption is a ratio measured side by side (None: not run).
    #[serde(default)]
    pub baseline: Option<Summary>,
    /// The lab the test ran in: link, emulator, calibration, counters.
    #[serde(default)]
    pub lab: Option<crate::lab::record::LabRecord>,
    /// exec/scp: the command, its exit status, times and CPU.
    #[serde(default)]
    pub exec: Option<crate::workload::exec::ExecRecord>,
}

impl TestResult {
    /// Why nothing at all was measured (every connection failed), if so:
    /// such a result is a failure, not a zero, wherever it is run.
    pub fn nothing_measured(&self) -> Option<String> {
        let nothing = self
            .iterations
            .iter()
            .all(|i| i.bytes == 0 && i.transactions == 0);
        let first_error = self
            .iterations
            .iter()
            .find_map(|i| i.errors.client.first().or(i.errors.agent.first()))?;
        nothing.then(|| {
            format!("nothing was measured: every connection failed, first with: {first_error}")
        })
    }
}

/// Builds one iteration's figures from both sides' interval samples.
pub struct SideData<'a> {
    pub samples: &'a [IntervalSample],
    pub window_s: f64,
    pub window_cpu: Option<CpuWindow>,
    pub latency: Option<LatencySummary>,
    pub latency_corrected: Option<LatencySummary>,
    pub flows: Vec<FlowReport>,
    pub placement: Vec<WorkerPlacement>,
    pub errors: Vec<String>,
}

pub fn iteration(
    index: usize,
    client: SideData<'_>,
    agent: SideData<'_>,
    error: Option<String>,
) -> Iteration {
    let intervals: Vec<TestInterval> = client
        .samples
        .iter()
        .map(|c| combine(c, agent.samples.iter().find(|a| a.index == c.index)))
        .collect();
    let sum = |s: &[IntervalSample]| {
        let mut t = Counters::default();
        for x in s {
            t += x.counters;
        }
        t
    };
    let (c, a) = (sum(client.samples), sum(agent.samples));
    let bytes = c.bytes_rx + a.bytes_rx;
    let secs = client.window_s.max(1e-9);
    let agent_secs = if agent.window_s > 0.0 {
        agent.window_s
    } else {
        secs
    };
    let cost = |w: &Option<CpuWindow>| {
        w.as_ref()
            .map(|w| cpu::cost(w, bytes, c.transactions))
            .unwrap_or_default()
    };
    Iteration {
        index,
        status: if error.is_some() {
            "partial".into()
        } else {
            "ok".into()
        },
        error,
        duration_s: client.window_s,
        bytes,
        // Counted at each receiver over its own window (the agent's clock
        // starts a control message later than the client's).
        throughput_bps: 8.0 * (c.bytes_rx as f64 / secs + a.bytes_rx as f64 / agent_secs),
        transactions: c.transactions,
        transactions_per_s: c.transactions as f64 / secs,
        connections: c.connections,
        connections_per_s: c.connections as f64 / secs,
        latency_us: client.latency,
        latency_corrected_us: client.latency_corrected,
        cost: Pair {
            client: cost(&client.window_cpu),
            agent: cost(&agent.window_cpu),
        },
        cpu: Pair {
            client: client.window_cpu,
            agent: agent.window_cpu,
        },
        counters: Pair {
            client: c,
            agent: a,
        },
        intervals,
        flows: Pair {
            client: client.flows,
            agent: agent.flows,
        },
        placement: Pair {
            client: client.placement,
            agent: agent.placement,
        },
        errors: Pair {
            client: client.errors,
            agent: agent.errors,
        },
    }
}

/// The summary over all iterations. Latency comes from the merged histogram
/// of every iteration (passed in), not from averaging percentiles.
pub fn summarize(
    spec: &TestSpec,
    its: &[Iteration],
    latency: Option<LatencySummary>,
    latency_corrected: Option<LatencySummary>,
    level_pct: f64,
) -> Summary {
    let n = its.len().max(1) as f64;
    let mean = |f: &dyn Fn(&Iteration) -> f64| its.iter().map(f).sum::<f64>() / n;
    let mean_opt = |f: &dyn Fn(&Iteration) -> Option<f64>| {
        let v: Vec<f64> = its.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let cpu_side = |agent: bool| {
        let pick = move |i: &Iteration| {
            if agent {
                i.cost.agent.clone()
            } else {
                i.cost.client.clone()
            }
        };
        let has = |i: &Iteration| {
            if agent {
                i.cpu.agent.is_some()
            } else {
                i.cpu.client.is_some()
            }
        };
        CpuFields {
            host_util_pct: mean_opt(&|i| has(i).then(|| pick(i).host_util_pct)),
            process_util_pct: mean_opt(&|i| has(i).then(|| pick(i).process_util_pct)),
            us_per_kb: mean_opt(&|i| pick(i).us_per_kb),
            us_per_tx: mean_opt(&|i| pick(i).us_per_tx),
        }
    };
    let metric = spec.main_metric();
    let values: Vec<f64> = its.iter().map(|i| i.main_value(metric)).collect();
    let is_tx = spec.workload != Workload::Stream || spec.bytes.is_some();
    Summary {
        workload: spec.workload.name().into(),
        duration_s: its.iter().map(|i| i.duration_s).sum(),
        bytes: its.iter().map(|i| i.bytes).sum(),
        throughput_bps: mean(&|i| i.throughput_bps),
        transactions: its.iter().map(|i| i.transactions).sum(),
        transactions_per_s: mean(&|i| i.transactions_per_s),
        latency_us: latency.as_ref().filter(|_| is_tx).map(LatencyFields::from),
        cpu: Pair {
            client: cpu_side(false),
            agent: cpu_side(true),
        },
        direction: format!("{:?}", spec.direction).to_lowercase(),
        flows: spec.flows,
        iterations: its.len(),
        connections_per_s: spec
            .workload
            .per_connection()
            .then(|| mean(&|i| i.connections_per_s)),
        latency_corrected_us: latency_corrected.as_ref().map(LatencyFields::from),
        confidence: (its.len() > 1).then(|| stats::estimate(&values, level_pct)),
        main_metric: Some(metric),
        status: if its.iter().all(|i| i.status == "ok") && !its.is_empty() {
            "ok".into()
        } else {
            "partial".into()
        },
        tls: its
            .iter()
            .flat_map(|i| i.flows.client.iter())
            .find_map(|f| f.tls.clone()),
        tls_handshakes_per_s: (spec.tls.is_some() && spec.workload.per_connection())
            .then(|| mean(&|i| i.counters.client.tls_handshakes as f64 / i.duration_s.max(1e-9))),
        observed_window_bytes: {
            let mut w: Vec<u32> = its
                .iter()
                .flat_map(|i| i.flows.client.iter().chain(i.flows.agent.iter()))
                .filter_map(|f| f.observed_window.as_ref().map(|o| o.median_bytes))
                .collect();
            w.sort_unstable();
            w.get(w.len() / 2).map(|&v| v as u64)
        },
    }
}

/// Seconds since the epoch as an RFC 3339 UTC time, without a date crate.
pub fn rfc3339_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(index: usize, rx: u64, tx: u64, trans: u64) -> IntervalSample {
        IntervalSample {
            index,
            start_s: index as f64,
            end_s: index as f64 + 1.0,
            counters: Counters {
                bytes_rx: rx,
                bytes_tx: tx,
                transactions: trans,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn nothing_measured_needs_zero_figures_and_an_error() {
        let mut r = TestResult {
            iterations: vec![Iteration::default()],
            ..Default::default()
        };
        assert_eq!(
            r.nothing_measured(),
            None,
            "zero without an error is a result"
        );
        r.iterations[0]
            .errors
            .client
            .push("flow 0: TLS: bad certificate".into());
        assert!(r
            .nothing_measured()
            .unwrap()
            .ends_with("first with: flow 0: TLS: bad certificate"));
        r.iterations[0].transactions = 1;
        assert_eq!(r.nothing_measured(), None);
    }

    #[test]
    fn bytes_are_counted_at_the_receivers() {
        let client = [sample(0, 100, 1000, 5), sample(1, 100, 1000, 5)];
        let agent = [sample(0, 1000, 100, 5), sample(1, 1000, 100, 5)];
        let side = |s: &'static [IntervalSample]| SideData {
            samples: s,
            window_s: 2.0,
            window_cpu: None,
            latency: None,
            latency_corrected: None,
            flows: vec![],
            placement: vec![],
            errors: vec![],
        };
        let client: &'static [IntervalSample] = Box::leak(Box::new(client));
        let agent: &'static [IntervalSample] = Box::leak(Box::new(agent));
        let it = iteration(0, side(client), side(agent), None);
        assert_eq!(it.bytes, 2200);
        assert_eq!(it.intervals.iter().map(|i| i.bytes).sum::<u64>(), it.bytes);
        assert!((it.throughput_bps - 2200.0 * 8.0 / 2.0).abs() < 1e-9);
        assert_eq!(it.transactions, 10);
        let spec = TestSpec {
            workload: Workload::Rr,
            ..Default::default()
        };
        let s = summarize(&spec, &[it.clone(), it], None, None, 99.0);
        assert_eq!(s.bytes, 4400);
        assert_eq!(s.iterations, 2);
        assert!(s.confidence.is_some());
        assert_eq!(s.status, "ok");
    }

    #[test]
    fn time_format() {
        let t = rfc3339_now();
        assert_eq!(t.len(), 20);
        assert!(t.starts_with("20") && t.ends_with('Z'));
    }
}
