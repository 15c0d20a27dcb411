//! Running one test: iterations until the confidence target is met, each a
//! full setup/start/window/stop cycle on the agent, folded into one result.

use super::error::ControllerError;
use crate::controller::driver::{IterationRun, Live};
use crate::measure::fold::OwdHists;
use crate::measure::histogram::{self, new_hist, Hist, WaitHists};
use crate::model::result::HostRun;

use crate::measure::fold::SideData;
use crate::model::result::{self, AgentInfo, Iteration, Pair, Summary, TestResult};
use crate::model::sample::Confidence;
use crate::model::spec::{Figures, MainMetric, TestSpec};

pub use super::driver::Driver;

/// Each host's figures over all iterations: the last iteration's record,
/// with throughput and transactions/s as means over iterations.
pub fn mean_hosts(its: &[Iteration]) -> Vec<HostRun> {
    let Some(last) = its.last() else {
        return Vec::new();
    };
    last.hosts
        .iter()
        .map(|h| {
            let same: Vec<&HostRun> = its
                .iter()
                .flat_map(|i| i.hosts.iter())
                .filter(|x| x.name == h.name && x.role == h.role)
                .collect();
            let n = same.len().max(1) as f64;
            let per_address = h
                .per_address
                .iter()
                .map(|a| {
                    let mean = |v: fn(&crate::model::result::AddressRun) -> f64| {
                        same.iter()
                            .flat_map(|x| x.per_address.iter())
                            .filter(|x| x.address == a.address)
                            .map(v)
                            .sum::<f64>()
                            / n
                    };
                    crate::model::result::AddressRun {
                        throughput_bps: mean(|x| x.throughput_bps),
                        transactions_per_s: mean(|x| x.transactions_per_s),
                        share: mean(|x| x.share),
                        ..a.clone()
                    }
                })
                .collect();
            HostRun {
                per_address,
                throughput_bps: same.iter().map(|x| x.throughput_bps).sum::<f64>() / n,
                transactions_per_s: same.iter().map(|x| x.transactions_per_s).sum::<f64>() / n,
                ..h.clone()
            }
        })
        .collect()
}

/// One test's iterations folded as they arrive: latency histograms merged
/// over iterations, the main figure's values kept for the confidence
/// target. `run_test` folds one test; a mixed test folds each group.
pub struct Folder {
    spec: TestSpec,
    metric: MainMetric,
    figures: Figures,
    pub iterations: Vec<Iteration>,
    /// Per iteration, the client's latency per phase (a group with
    /// phases, `together::Lane`; empty otherwise).
    pub phase_hists: Vec<Vec<Hist>>,
    values: Vec<f64>,
    hist: Hist,
    hist_c: Hist,
    /// Each end's waits over every iteration: (client, agent).
    waits: (WaitHists, WaitHists),
    owd_hists: OwdHists,
    /// The kind's own figures (memcache's `kv`), folded by the kind.
    own: Option<Box<dyn crate::workload::OwnFold>>,
}

impl Folder {
    pub fn new(spec: &TestSpec) -> Folder {
        Folder {
            spec: spec.clone(),
            metric: crate::workload::main_metric(spec),
            figures: crate::workload::figures(spec),
            iterations: Vec::new(),
            phase_hists: Vec::new(),
            values: Vec::new(),
            hist: new_hist(),
            hist_c: new_hist(),
            waits: Default::default(),
            owd_hists: OwdHists::default(),
            own: crate::workload::own_fold(spec),
        }
    }

    /// Folds the next iteration and returns it.
    pub fn add(&mut self, run: IterationRun) -> &Iteration {
        // Another tool's server reports nothing: the client's counts are
        // the test's (for every figure of the summary too).
        self.figures.client_only |= run.client_only;
        let index = self.iterations.len();
        let spec = &self.spec;
        let c = &run.client;
        histogram::merge(&mut self.hist, &c.hist);
        histogram::merge(&mut self.hist_c, &c.hist_corrected);
        let mut errors_client = c.errors.clone();
        errors_client.dedup();
        let client = SideData {
            samples: &c.samples,
            window_s: c.window_s,
            window_cpu: c.window_cpu.clone(),
            latency: histogram::summarize(&c.hist),
            latency_corrected: histogram::summarize(&c.hist_corrected),
            flows: c.flows.clone(),
            placement: c.placement.clone(),
            errors: errors_client,
        };
        let a = &run.agent;
        let agent_window = match (a.samples.first(), a.samples.last()) {
            (Some(f), Some(l)) => l.end_s - f.start_s,
            _ => 0.0,
        };
        let agent_side = SideData {
            samples: &a.samples,
            window_s: agent_window,
            window_cpu: a.window_cpu.clone(),
            latency: None,
            latency_corrected: None,
            flows: a.flows.clone(),
            placement: a.placement.clone(),
            errors: a.errors.clone(),
        };
        let mut it = crate::measure::fold::iteration(
            index,
            client,
            agent_side,
            run.error.clone(),
            self.figures,
        );
        it.hosts = run.hosts;
        it.auto = run.auto.clone();
        it.waits = WaitHists::summary(&run.client.waits, &run.agent.waits);
        self.waits.0.merge(&run.client.waits);
        self.waits.1.merge(&run.agent.waits);
        it.start_skew_us = run.start_skew_us;
        it.udp = crate::measure::fold::udp_figures(
            spec,
            &it,
            Pair {
                client: run.client.kernel_udp,
                agent: run.agent.kernel_udp,
            },
            self.figures,
        );
        crate::measure::fold::one_way(&mut it, &mut self.owd_hists);
        if let Some(own) = &mut self.own {
            own.iteration(
                &mut it,
                crate::workload::Beside {
                    prefill: run.prefill.as_ref(),
                    service: run.agent.service.as_ref().or(run.client.service.as_ref()),
                },
            );
        }
        self.values.push(it.main_value(self.metric));
        self.iterations.push(it);
        self.phase_hists.push(run.phase_hists);
        self.iterations.last().expect("pushed above")
    }

    /// An iteration after the first could not run: the last one measured
    /// carries the error, and the result is partial.
    pub fn cut_short(&mut self, e: String) {
        if let Some(last) = self.iterations.last_mut() {
            last.status = crate::model::result::Status::Partial;
            last.error.get_or_insert(e);
        }
    }

    /// Whether the confidence target is met. A step of a capacity search
    /// (an open loop with a search target) is satisfied once its verdict
    /// is clear: the searched figure's interval lies wholly on one side of
    /// the limit, or the generator fell behind; within noise it repeats,
    /// and its percentile comes from every repetition's samples.
    pub fn satisfied(&self, conf: &Confidence) -> bool {
        if let (Some(s), Some(rate)) = (&self.spec.search, self.spec.rate) {
            if self.iterations.len() < conf.min {
                return false;
            }
            let achieved = self.values_mean_tx();
            if !crate::measure::search::kept_up(rate, achieved) {
                return true;
            }
            return self
                .search_figure()
                .is_none_or(|f| f.high <= s.target.limit || f.low > s.target.limit);
        }
        crate::measure::stats::satisfied(conf, &self.values)
    }

    /// A step of a capacity search (its iterations stop on a clear verdict).
    pub fn searching(&self) -> bool {
        self.spec.search.is_some() && self.spec.rate.is_some()
    }

    /// Transactions (or datagrams) per second over the iterations so far.
    fn values_mean_tx(&self) -> f64 {
        let n = self.iterations.len().max(1) as f64;
        // A kind whose headline is packets (udp-stream): packets sent.
        let packets = crate::workload::main_metric(&self.spec) == MainMetric::PacketRate;
        self.iterations
            .iter()
            .map(|i| match (&i.udp, packets) {
                (Some(u), true) => u.packets_sent_per_s,
                _ => i.transactions_per_s,
            })
            .sum::<f64>()
            / n
    }

    /// A search step's figure over every iteration so far, with its
    /// confidence interval: the percentile of an open loop's net latency
    /// (from the intended send time, less the sender's own lateness: what
    /// the system under test imposed, whatever the generator's host did),
    /// or the loss with its counts.
    fn search_figure(&self) -> Option<crate::model::search::SearchFigure> {
        use crate::measure::search;
        let s = self.spec.search.as_ref()?;
        let z = crate::model::search::z_of(s.level_pct);
        match s.target.metric.quantile() {
            Some(q) => {
                // An open loop's net latency (less the sender's own
                // lateness) where it was measured, else from the due time.
                let h = if self.spec.rate.is_some() && !self.waits.0.net.is_empty() {
                    &self.waits.0.net
                } else if self.spec.rate.is_some() && !self.hist_c.is_empty() {
                    &self.hist_c
                } else {
                    &self.hist
                };
                let (v, lo, hi, n) = search::quantile_bounds(h, q, z)?;
                Some(crate::model::search::SearchFigure {
                    value: v / 1000.0,
                    low: lo / 1000.0,
                    high: hi / 1000.0,
                    samples: n,
                    achieved: None,
                })
            }
            None => {
                let (lost, sent) = self
                    .iterations
                    .iter()
                    .filter_map(|i| i.udp.as_ref())
                    .fold((0, 0), |(l, s), u| (l + u.lost, s + u.packets_sent));
                let (v, lo, hi) = search::loss_bounds(lost, sent, z)?;
                Some(crate::model::search::SearchFigure {
                    value: v,
                    low: lo,
                    high: hi,
                    samples: sent,
                    achieved: None,
                })
            }
        }
    }

    /// The summary over the iterations folded.
    pub fn summary(&self, conf: &Confidence) -> Summary {
        let mut s = crate::measure::fold::summarize(
            &self.spec,
            self.figures,
            &self.iterations,
            (
                histogram::summarize(&self.hist),
                histogram::summarize(&self.hist_c),
            ),
            conf.level_pct,
            self.metric,
        );
        if let Some(own) = &self.own {
            own.summary(&self.iterations, &mut s);
        }
        crate::measure::fold::one_way_summary(&mut s, &self.iterations, &self.owd_hists);
        s.search_figure = self.search_figure();
        s.latency_buckets = histogram::buckets(&self.hist);
        s.waits = WaitHists::summary(&self.waits.0, &self.waits.1);
        s
    }
}

/// Runs `spec` on `conn` and returns the result, partial if an iteration
/// ended early (its error is in the iteration and the summary status).
/// Errors before anything was measured are returned as Err.
pub fn run_test(
    conn: &mut Driver,
    spec: &TestSpec,
    conf: Confidence,
    agent: AgentInfo,
    command: Vec<String>,
    live: &mut dyn Live,
    on_iteration: &mut dyn FnMut(&Iteration),
) -> Result<TestResult, ControllerError> {
    crate::control::check(spec)?;
    let started_at = crate::units::rfc3339_now();
    let mut folder = Folder::new(spec);
    for _ in 0..conf.max.max(1) {
        let run = match conn.run_iteration(spec, live, None) {
            Ok(r) => r,
            Err(e) if folder.iterations.is_empty() => return Err(e),
            Err(e) => {
                folder.cut_short(e.to_string());
                break;
            }
        };
        let failed = run.error.is_some();
        on_iteration(folder.add(run));
        if failed || folder.satisfied(&conf) || crate::engine::signals::test_interrupted() {
            break;
        }
    }
    let summary = folder.summary(&conf);
    let iterations = folder.iterations;
    Ok(TestResult {
        schema: result::SCHEMA.into(),
        schema_version: result::SCHEMA_VERSION,
        started_at,
        command,
        spec: spec.clone(),
        confidence_target: conf,
        agent,
        environment: conn.environment(),
        summary,
        baseline: None,
        lab: None,
        exec: None,
        hosts: mean_hosts(&iterations),
        flow_map: conn.flow_map(spec),
        iterations,
        groups: Vec::new(),
        firewall: None,
        search: None,
    })
}

/// The clear-text twin of a TLS test, run once right after it on the same
/// agent, so the result carries the cost of encryption as a ratio measured
/// side by side (tls-handshake's twin is crr with the same sizes).
pub fn clear_baseline(
    conn: &mut Driver,
    spec: &TestSpec,
    agent: AgentInfo,
    live: &mut dyn Live,
) -> Result<crate::model::result::Summary, ControllerError> {
    let mut clear = crate::workload::twin(spec);
    // Its receivers wait as the TLS test's did: `--rx-poll auto` does not
    // poll under TLS, so neither does its twin.
    crate::workload::receivers_sleep(&mut clear);
    let r = run_test(
        conn,
        &clear,
        Confidence::default(),
        agent,
        vec![],
        live,
        &mut |_| {},
    )?;
    Ok(r.summary)
}
