//! `--duration auto` on the controller: watches each interval's main
//! figure as both ends report it, ends the window once
//! `measure::stationary::judge` says it has settled, and afterwards leaves
//! the warm-up it found out of the iteration (its samples, its CPU and its
//! latency: each interval's client histogram is kept, encoded, until then).

use crate::engine::side::SideReport;
use crate::measure::histogram::{self, new_hist, Hist};
use crate::measure::stationary::{self, Verdict};
use crate::model::auto::{AutoRecord, AutoSpec, AutoStop};
use crate::model::result::TestInterval;
use crate::model::spec::{MainMetric, TestSpec};

/// An auto window in progress.
pub struct AutoWatch {
    spec: AutoSpec,
    metric: MainMetric,
    /// The main figure per interval, in index order.
    series: Vec<f64>,
    /// Each interval's client latency (encoded: a histogram in memory is
    /// hundreds of KiB), by index.
    hists: Vec<Option<(String, String)>>,
    verdict: Option<Verdict>,
    done: bool,
    /// Seconds into the window until which the offered load still rises
    /// (`--rate-ramp`): the window never ends while it does (a ramp
    /// slower than the noise looks flat over the first intervals).
    ramp_until_s: Option<f64>,
}

impl AutoWatch {
    /// A watch for `spec` when it asks for an auto window.
    pub fn new(spec: &TestSpec) -> Option<AutoWatch> {
        spec.auto.as_ref().map(|a| AutoWatch {
            spec: a.clone(),
            metric: crate::workload::main_metric(spec),
            series: Vec::new(),
            hists: Vec::new(),
            verdict: None,
            done: false,
            ramp_until_s: spec.rate.and(spec.rate_ramp_s).map(|r| r - spec.warmup_s),
        })
    }

    /// The next interval, as both ends reported it.
    pub fn interval(&mut self, i: &TestInterval) {
        // Once settled the verdict stands: the interval cut short by the
        // stop that follows it says nothing.
        if self.done || i.index != self.series.len() {
            return;
        }
        self.series.push(match self.metric {
            MainMetric::Throughput => i.throughput_bps,
            MainMetric::TransactionRate => i.transactions_per_s,
            MainMetric::PacketRate => {
                let secs = (i.end_s - i.start_s).max(1e-9);
                i.counters
                    .client
                    .packets_rx
                    .max(i.counters.agent.packets_rx) as f64
                    / secs
            }
        });
        let mut v = stationary::judge(&self.series, self.spec.level_pct, self.spec.width_pct);
        if self.ramp_until_s.is_some_and(|r| i.end_s < r) {
            v.stationary = false;
            v.done = false;
        }
        self.done = v.done;
        self.verdict = Some(v);
    }

    /// The client's latency over interval `index`.
    pub fn hists(&mut self, index: usize, latency: &Hist, corrected: &Hist) {
        if self.hists.len() <= index {
            self.hists.resize(index + 1, None);
        }
        self.hists[index] = Some((histogram::encode(latency), histogram::encode(corrected)));
    }

    /// The leading intervals found to be warm-up, as things stand.
    pub fn warmup(&self) -> usize {
        self.verdict.map_or(0, |v| v.warmup)
    }

    /// The window has settled: end it now.
    pub fn settled(&self) -> bool {
        self.done
    }

    /// Leaves the warm-up out of what both ends measured and says what the
    /// window did (the agent's side: its samples and window CPU).
    pub fn finish(
        self,
        client: &mut SideReport,
        agent_samples: &mut Vec<crate::model::sample::IntervalSample>,
        agent_cpu: &mut Option<crate::model::sample::CpuWindow>,
    ) -> AutoRecord {
        let v = self.verdict.unwrap_or(Verdict {
            warmup: 0,
            stationary: false,
            trend_z: 0.0,
            mean: 0.0,
            half_width_pct: f64::INFINITY,
            done: false,
        });
        let ran_s = client.window_s;
        let at_bound = ran_s >= self.spec.bound_s * 0.98;
        let k = v.warmup;
        let warmup_s = client
            .samples
            .iter()
            .filter(|s| s.index < k)
            .map(|s| s.end_s - s.start_s)
            // An empty sum is -0.0: "-0" in the result.
            .sum::<f64>()
            + 0.0;
        if k > 0 && client.samples.iter().any(|s| s.index >= k) {
            client.samples.retain(|s| s.index >= k);
            agent_samples.retain(|s| s.index >= k);
            client.window_s = client.samples.iter().map(|s| s.end_s - s.start_s).sum();
            let over = |ss: &[crate::model::sample::IntervalSample]| {
                let ws: Vec<&crate::model::sample::CpuWindow> =
                    ss.iter().filter_map(|s| s.cpu.as_ref()).collect();
                crate::measure::cpu::over_time(&ws)
            };
            if let Some(w) = over(&client.samples) {
                client.window_cpu = Some(w);
            }
            if let Some(w) = over(agent_samples) {
                *agent_cpu = Some(w);
            }
            // Latency over the kept intervals only, when every one of them
            // has its histogram (else the whole window's stays).
            let kept: Vec<&(String, String)> = self
                .hists
                .iter()
                .skip(k)
                .take(client.samples.len())
                .flatten()
                .collect();
            if kept.len() == client.samples.len() {
                let (mut h, mut hc) = (new_hist(), new_hist());
                let mut ok = true;
                for (l, c) in kept {
                    match (histogram::decode(l), histogram::decode(c)) {
                        (Ok(l), Ok(c)) => {
                            histogram::merge(&mut h, &l);
                            histogram::merge(&mut hc, &c);
                        }
                        _ => ok = false,
                    }
                }
                if ok {
                    client.hist = h;
                    client.hist_corrected = hc;
                }
            }
        }
        let stopped = stationary::stop_reason(&v, at_bound);
        let unsettled = matches!(stopped, AutoStop::BoundWide | AutoStop::BoundTrending);
        AutoRecord {
            ran_s,
            warmup_intervals: k,
            warmup_s,
            intervals: client.samples.len(),
            stopped,
            levels: unsettled
                .then(|| stationary::levels(&self.series))
                .flatten()
                .map(|(lo, hi)| [lo, hi]),
            trend_z: v.trend_z,
            mean: v.mean,
            half_width_pct: v.half_width_pct,
        }
    }
}
