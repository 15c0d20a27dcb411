//! memcache's own figures, folded: each iteration's from the client's
//! counters and its flows' per-type latency histograms (merged here, then
//! dropped from the flow reports: the figures hold them), and the
//! summary's over every iteration (rates are means, counts summed, latency
//! from every iteration's merged histograms).

use super::params::{KvFigures, KvFlowStats, HIT_RATIO, SECTION};
use crate::measure::histogram::{self, new_hist, Hist};
use crate::model::result::{Iteration, Summary};
use crate::model::sample::{CpuWindow, KvPrefill, ServiceWindow};
use crate::workload::{Beside, OwnFold};

/// One memcache test's fold: the per-type histograms over its iterations.
#[derive(Default)]
pub struct KvFold {
    totals: KvHists,
}

impl OwnFold for KvFold {
    fn iteration(&mut self, it: &mut Iteration, beside: Beside) {
        let k = figures(
            it,
            beside.prefill.cloned(),
            beside.service.cloned(),
            &mut self.totals,
        );
        it.own.set(SECTION, &k);
    }

    fn summary(&self, its: &[Iteration], s: &mut Summary) {
        let Some(k) = mean(its, &self.totals) else {
            return;
        };
        if let Some(h) = k.hit_ratio {
            s.own.set(HIT_RATIO, &h);
        }
        s.own.set(SECTION, &k);
    }
}

/// memcache: per-type latency histograms merged over flows (and, kept by
/// the caller, over iterations).
struct KvHists {
    get: Hist,
    set: Hist,
    get_corrected: Hist,
    set_corrected: Hist,
}

impl Default for KvHists {
    fn default() -> Self {
        KvHists {
            get: new_hist(),
            set: new_hist(),
            get_corrected: new_hist(),
            set_corrected: new_hist(),
        }
    }
}

impl KvHists {
    fn add(&mut self, o: &KvHists) {
        histogram::merge(&mut self.get, &o.get);
        histogram::merge(&mut self.set, &o.set);
        histogram::merge(&mut self.get_corrected, &o.get_corrected);
        histogram::merge(&mut self.set_corrected, &o.set_corrected);
    }
}

/// A memcache iteration's figures from the client's counters and flow
/// reports; the flows' histograms are merged into `totals` and dropped
/// from the flow reports (they are in the figures now).
fn figures(
    it: &mut Iteration,
    prefill: Option<KvPrefill>,
    server: Option<ServiceWindow>,
    totals: &mut KvHists,
) -> KvFigures {
    let mut h = KvHists::default();
    let mut first_problem = None;
    for f in it.flows.client.iter_mut() {
        let Some(mut k) = f.own.get::<KvFlowStats>(SECTION) else {
            continue;
        };
        let pairs = [
            (&mut k.get_latency, &mut h.get),
            (&mut k.set_latency, &mut h.set),
            (&mut k.get_corrected, &mut h.get_corrected),
            (&mut k.set_corrected, &mut h.set_corrected),
        ];
        for (text, into) in pairs {
            if let Some(t) = text.take() {
                if let Ok(x) = histogram::decode(&t) {
                    histogram::merge(into, &x);
                }
            }
        }
        if first_problem.is_none() {
            first_problem = k.first_problem.clone();
        }
        f.own.set(SECTION, &k);
    }
    totals.add(&h);
    let c = &it.counters.client;
    let secs = it.duration_s.max(1e-9);
    let ops = c.kv_gets + c.kv_sets;
    let per_op = |w: &Option<CpuWindow>| {
        w.as_ref()
            .filter(|_| ops > 0)
            .map(|w| w.process_cpu_s * 1e6 / ops as f64)
    };
    KvFigures {
        ops_per_s: ops as f64 / secs,
        gets_per_s: c.kv_gets as f64 / secs,
        sets_per_s: c.kv_sets as f64 / secs,
        gets: c.kv_gets,
        sets: c.kv_sets,
        hits: c.kv_hits,
        misses: c.kv_misses,
        hit_ratio: (c.kv_hits + c.kv_misses > 0)
            .then(|| c.kv_hits as f64 / (c.kv_hits + c.kv_misses) as f64),
        bad_values: c.kv_bad_values,
        errors: c.kv_errors,
        first_problem,
        get_latency_us: histogram::summarize(&h.get),
        set_latency_us: histogram::summarize(&h.set),
        get_corrected_us: histogram::summarize(&h.get_corrected),
        set_corrected_us: histogram::summarize(&h.set_corrected),
        sent_bps: 8.0 * c.bytes_tx as f64 / secs,
        received_bps: 8.0 * c.bytes_rx as f64 / secs,
        client_us_per_op: per_op(&it.cpu.client),
        server_us_per_op: per_op(&it.cpu.agent),
        prefill,
        server,
    }
}

/// Means of the iterations' memcache figures (counts summed, latency from
/// every iteration's histograms).
fn mean(its: &[Iteration], totals: &KvHists) -> Option<KvFigures> {
    let ks: Vec<KvFigures> = its.iter().filter_map(|i| KvFigures::of(&i.own)).collect();
    let last = ks.last()?;
    let n = ks.len() as f64;
    let mean = |f: fn(&KvFigures) -> f64| ks.iter().map(f).sum::<f64>() / n;
    let mean_opt = |f: fn(&KvFigures) -> Option<f64>| {
        let v: Vec<f64> = ks.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let sum = |f: fn(&KvFigures) -> u64| ks.iter().map(f).sum::<u64>();
    let (hits, misses) = (sum(|k| k.hits), sum(|k| k.misses));
    let lat = |pick: fn(&KvHists) -> &Hist| histogram::summarize(pick(totals));
    Some(KvFigures {
        ops_per_s: mean(|k| k.ops_per_s),
        gets_per_s: mean(|k| k.gets_per_s),
        sets_per_s: mean(|k| k.sets_per_s),
        gets: sum(|k| k.gets),
        sets: sum(|k| k.sets),
        hits,
        misses,
        hit_ratio: (hits + misses > 0).then(|| hits as f64 / (hits + misses) as f64),
        bad_values: sum(|k| k.bad_values),
        errors: sum(|k| k.errors),
        first_problem: ks.iter().find_map(|k| k.first_problem.clone()),
        get_latency_us: lat(|t| &t.get),
        set_latency_us: lat(|t| &t.set),
        get_corrected_us: lat(|t| &t.get_corrected),
        set_corrected_us: lat(|t| &t.set_corrected),
        sent_bps: mean(|k| k.sent_bps),
        received_bps: mean(|k| k.received_bps),
        client_us_per_op: mean_opt(|k| k.client_us_per_op),
        server_us_per_op: mean_opt(|k| k.server_us_per_op),
        prefill: ks.iter().find_map(|k| k.prefill.clone()),
        server: last.server.clone(),
    })
}
