//! Folding both sides' interval samples into one result: each interval
//! combined, one iteration's figures, and the summary over iterations.
//! Bytes are counted at the receivers; throughput is the bytes over the
//! client's window (the controller's clock), so that throughput, bytes and
//! duration agree in every result. Each receiver over its own window
//! (before) disagreed with `bytes / duration_s` by up to 4% when one end
//! closed an interval late under load, and a finite transfer's agent
//! window (which ends at its last byte, not at the reply) made 20 MiB in
//! 12.7 ms read as 6.00 Gbit/s instead of 13.3 (issue 30).
//!
//! A continuous clear-text stream counts its bytes where they reached the
//! receiving TCP, not where the receiving application read them
//! (`Figures::delivered`, from the senders' TCP_INFO): the reads lag by
//! whatever waits behind a lost segment, which after a queue overflow is up
//! to a round trip and a queue of data, handed over at once when the
//! retransmission arrives. 4 flows through a 1 Gbit/s lab with a 100 ms
//! queue read 124 MB in the first second of a window that opened just
//! after the first overflow, while the link passed 117.7 (issue 25).

use crate::measure::histogram::{self, new_hist, Hist};
use crate::measure::{cpu, stats};
use crate::model::flow::FlowReport;
use crate::model::result::{
    CpuFields, Iteration, LatencyFields, Pair, Status, Summary, TestInterval, UdpFigures,
};
use crate::model::sample::{
    Counters, CpuWindow, IntervalSample, KernelUdp, LatencySummary, ServiceWindow, WorkerPlacement,
};
use crate::model::spec::{Figures, MainMetric, TestSpec};

/// The bytes a test moved in `c` and `a` (one interval or the window, both
/// ends): received, or delivered when the workload counts them so, or
/// the client's both ways when only it reports.
pub fn moved(c: &Counters, a: &Counters, figures: Figures) -> u64 {
    if figures.client_only {
        c.bytes_rx + c.bytes_tx
    } else if figures.delivered {
        c.bytes_delivered + a.bytes_delivered
    } else {
        c.bytes_rx + a.bytes_rx
    }
}

pub fn combine(
    client: &IntervalSample,
    agent: Option<&IntervalSample>,
    figures: Figures,
) -> TestInterval {
    let a = agent.map(|a| a.counters).unwrap_or_default();
    let c = client.counters;
    let secs = (client.end_s - client.start_s).max(1e-9);
    let bytes = moved(&c, &a, figures);
    TestInterval {
        index: client.index,
        start_s: client.start_s,
        end_s: client.end_s,
        bytes,
        throughput_bps: 8.0 * bytes as f64 / secs,
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
    figures: Figures,
) -> Iteration {
    let intervals: Vec<TestInterval> = client
        .samples
        .iter()
        .map(|c| {
            let a = agent.samples.iter().find(|a| a.index == c.index);
            combine(c, a, figures)
        })
        .collect();
    let sum = |s: &[IntervalSample]| {
        let mut t = Counters::default();
        for x in s {
            t += x.counters;
        }
        t
    };
    let (c, a) = (sum(client.samples), sum(agent.samples));
    let bytes = moved(&c, &a, figures);
    let secs = client.window_s.max(1e-9);
    let cost = |w: &Option<CpuWindow>, polled: &Counters| {
        w.as_ref()
            .map(|w| cpu::cost(w, bytes, c.transactions, polled.rx_poll_ns as f64 / 1e9))
            .unwrap_or_default()
    };
    Iteration {
        index,
        status: if error.is_some() {
            Status::Partial
        } else {
            Status::Ok
        },
        error,
        duration_s: client.window_s,
        bytes,
        throughput_bps: 8.0 * bytes as f64 / secs,
        transactions: c.transactions,
        transactions_per_s: c.transactions as f64 / secs,
        connections: c.connections,
        connections_per_s: c.connections as f64 / secs,
        latency_us: client.latency,
        latency_corrected_us: client.latency_corrected,
        waits: None,
        cost: Pair {
            client: cost(&client.window_cpu, &c),
            agent: cost(&agent.window_cpu, &a),
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
        udp: None,
        hosts: Vec::new(),
        start_skew_us: None,
        load_beside_bps: None,
        own: Default::default(),
        auto: None,
    }
}

/// A UDP iteration's figures from both ends' counters, flow reports and
/// CPU; `kernel` is each end's kernel UDP counters over its window.
pub fn udp_figures(
    spec: &TestSpec,
    it: &Iteration,
    kernel: Pair<Option<KernelUdp>>,
    figures: Figures,
) -> Option<UdpFigures> {
    if !figures.udp {
        return None;
    }
    let (c, a) = (&it.counters.client, &it.counters.agent);
    let secs = it.duration_s.max(1e-9);
    let packets = c.packets_rx + a.packets_rx;
    let sent = c.packets_tx + a.packets_tx;
    let lost = c.lost() + a.lost();
    let drops = c.rcv_drops + a.rcv_drops;
    // Per datagram on the wire beyond its payload: UDP 8, IP 20 or 40,
    // Ethernet framing 38 (preamble, header, FCS, gap).
    let overhead = 8 + if spec.ipv6 { 40 } else { 20 } + crate::model::lab::FRAMING_BYTES;
    let wire_bytes = c.bytes_rx + a.bytes_rx + packets * overhead;
    let jitters: Vec<f64> = it
        .flows
        .client
        .iter()
        .chain(it.flows.agent.iter())
        .filter_map(|f| f.udp.as_ref().and_then(|u| u.jitter_us))
        .collect();
    let deltas = c.transit_deltas + a.transit_deltas;
    let per_packet = |w: &Option<CpuWindow>, n: u64| {
        w.as_ref()
            .filter(|_| n > 0)
            .map(|w| w.process_cpu_s * 1e6 / n as f64)
    };
    Some(UdpFigures {
        packets_per_s: packets as f64 / secs,
        packets_sent_per_s: sent as f64 / secs,
        packets,
        packets_sent: sent,
        wire_bps: 8.0 * wire_bytes as f64 / secs,
        lost,
        loss_pct: if packets + lost > 0 {
            100.0 * lost as f64 / (packets + lost) as f64
        } else {
            0.0
        },
        receiver_drops: drops,
        network_lost: lost.saturating_sub(drops),
        reordered: c.late + a.late,
        duplicates: c.duplicates + a.duplicates,
        jitter_us: (!jitters.is_empty())
            .then(|| jitters.iter().sum::<f64>() / jitters.len() as f64),
        transit_delta_us: (deltas > 0)
            .then(|| (c.transit_delta_ns + a.transit_delta_ns) as f64 / deltas as f64 / 1e3),
        timeouts: c.timeouts + a.timeouts,
        kernel_in_datagrams: kernel.agent.or(kernel.client).map(|k| k.in_datagrams),
        kernel_rcvbuf_errors: kernel.agent.or(kernel.client).map(|k| k.rcvbuf_errors),
        client_us_per_packet: per_packet(&it.cpu.client, c.packets_rx + c.packets_tx),
        agent_us_per_packet: per_packet(&it.cpu.agent, a.packets_rx + a.packets_tx),
        datagrams_per_send: per_call(sent, c.udp_send_calls + a.udp_send_calls),
        datagrams_per_recv: per_call(
            packets + c.duplicates + a.duplicates,
            c.udp_recv_calls + a.udp_recv_calls,
        ),
        // From the client flows' histograms: `one_way`.
        owd_up_us: None,
        owd_down_us: None,
        owd_offset_uncertainty_us: None,
        owd_clamped: None,
    })
}

/// udp-rr's one-way delays merged over flows (and, kept by the caller,
/// over iterations), up and down.
pub struct OwdHists {
    pub up: Hist,
    pub down: Hist,
}

impl Default for OwdHists {
    fn default() -> Self {
        OwdHists {
            up: new_hist(),
            down: new_hist(),
        }
    }
}

/// udp-rr: an iteration's one-way delays from its client flows, where
/// their offset to the agent's clock was known (else nothing is added):
/// the histograms the flows carried are merged into the iteration's
/// figures and into `totals`, and dropped from the flow reports; the
/// uncertainty is the largest of the flows' (a fleet's pairs differ), the
/// clamped delays their sum.
pub fn one_way(it: &mut Iteration, totals: &mut OwdHists) {
    let mut h = OwdHists::default();
    let mut uncertainty: Option<f64> = None;
    let mut clamped = 0;
    for f in it.flows.client.iter_mut() {
        let Some(u) = f.udp.as_mut() else { continue };
        let Some(unc) = u.owd_offset_uncertainty_us else {
            continue;
        };
        uncertainty = Some(uncertainty.map_or(unc, |x: f64| x.max(unc)));
        clamped += u.owd_clamped.unwrap_or(0);
        if let Some(t) = u.owd_hists.take() {
            for (text, into) in [(&t.up, &mut h.up), (&t.down, &mut h.down)] {
                if let Ok(x) = histogram::decode(text) {
                    histogram::merge(into, &x);
                }
            }
        }
    }
    let (Some(unc), Some(udp)) = (uncertainty, it.udp.as_mut()) else {
        return;
    };
    histogram::merge(&mut totals.up, &h.up);
    histogram::merge(&mut totals.down, &h.down);
    udp.owd_up_us = histogram::summarize(&h.up);
    udp.owd_down_us = histogram::summarize(&h.down);
    udp.owd_offset_uncertainty_us = Some(unc);
    udp.owd_clamped = Some(clamped);
}

/// udp-rr: the summary's one-way delays, from every iteration's
/// histograms (`totals`), the largest uncertainty and the clamped summed;
/// absent unless an iteration had them.
pub fn one_way_summary(s: &mut Summary, its: &[Iteration], totals: &OwdHists) {
    let known: Vec<&UdpFigures> = its
        .iter()
        .filter_map(|i| i.udp.as_ref())
        .filter(|u| u.owd_offset_uncertainty_us.is_some())
        .collect();
    let Some(udp) = s.udp.as_mut().filter(|_| !known.is_empty()) else {
        return;
    };
    udp.owd_up_us = histogram::summarize(&totals.up);
    udp.owd_down_us = histogram::summarize(&totals.down);
    udp.owd_offset_uncertainty_us = known
        .iter()
        .filter_map(|u| u.owd_offset_uncertainty_us)
        .reduce(f64::max);
    udp.owd_clamped = Some(known.iter().filter_map(|u| u.owd_clamped).sum());
}

fn per_call(datagrams: u64, calls: u64) -> Option<f64> {
    (calls > 0).then(|| datagrams as f64 / calls as f64)
}

/// Means of the iterations' UDP figures (counts summed).
fn mean_udp(its: &[Iteration]) -> Option<UdpFigures> {
    let us: Vec<&UdpFigures> = its.iter().filter_map(|i| i.udp.as_ref()).collect();
    if us.is_empty() {
        return None;
    }
    let n = us.len() as f64;
    let mean = |f: fn(&UdpFigures) -> f64| us.iter().map(|u| f(u)).sum::<f64>() / n;
    let mean_opt = |f: fn(&UdpFigures) -> Option<f64>| {
        let v: Vec<f64> = us.iter().filter_map(|u| f(u)).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let sum = |f: fn(&UdpFigures) -> u64| us.iter().map(|u| f(u)).sum::<u64>();
    let sum_opt = |f: fn(&UdpFigures) -> Option<u64>| us.iter().map(|u| f(u)).sum::<Option<u64>>();
    let packets = sum(|u| u.packets);
    let lost = sum(|u| u.lost);
    Some(UdpFigures {
        packets_per_s: mean(|u| u.packets_per_s),
        packets_sent_per_s: mean(|u| u.packets_sent_per_s),
        packets,
        packets_sent: sum(|u| u.packets_sent),
        wire_bps: mean(|u| u.wire_bps),
        lost,
        loss_pct: if packets + lost > 0 {
            100.0 * lost as f64 / (packets + lost) as f64
        } else {
            0.0
        },
        receiver_drops: sum(|u| u.receiver_drops),
        network_lost: sum(|u| u.network_lost),
        reordered: sum(|u| u.reordered),
        duplicates: sum(|u| u.duplicates),
        jitter_us: mean_opt(|u| u.jitter_us),
        transit_delta_us: mean_opt(|u| u.transit_delta_us),
        timeouts: sum(|u| u.timeouts),
        kernel_in_datagrams: sum_opt(|u| u.kernel_in_datagrams),
        kernel_rcvbuf_errors: sum_opt(|u| u.kernel_rcvbuf_errors),
        client_us_per_packet: mean_opt(|u| u.client_us_per_packet),
        agent_us_per_packet: mean_opt(|u| u.agent_us_per_packet),
        datagrams_per_send: mean_opt(|u| u.datagrams_per_send),
        datagrams_per_recv: mean_opt(|u| u.datagrams_per_recv),
        // From every iteration's histograms: `one_way_summary`.
        owd_up_us: None,
        owd_down_us: None,
        owd_offset_uncertainty_us: None,
        owd_clamped: None,
    })
}

/// The summary over all iterations. Latency comes from the merged
/// histograms of every iteration (passed in: as measured, and corrected for
/// coordinated omission), not from averaging percentiles. A kind's own
/// figures are its own to fold (`workload::OwnFold`).
pub fn summarize(
    spec: &TestSpec,
    figures: Figures,
    its: &[Iteration],
    latency: (Option<LatencySummary>, Option<LatencySummary>),
    level_pct: f64,
    metric: MainMetric,
) -> Summary {
    let (latency, latency_corrected) = latency;
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
    let values: Vec<f64> = its.iter().map(|i| i.main_value(metric)).collect();
    let is_tx = figures.latency;
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
        connections_per_s: figures.connections.then(|| mean(&|i| i.connections_per_s)),
        latency_corrected_us: latency_corrected.as_ref().map(LatencyFields::from),
        confidence: (its.len() > 1).then(|| stats::estimate(&values, level_pct)),
        main_metric: Some(metric),
        status: if its.iter().all(|i| i.status.is_ok()) && !its.is_empty() {
            Status::Ok
        } else {
            Status::Partial
        },
        tls: its
            .iter()
            .flat_map(|i| i.flows.client.iter())
            .find_map(|f| f.tls.clone()),
        tls_handshakes_per_s: (spec.tls.is_some() && figures.connections)
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
        udp: mean_udp(its),
        load_beside_bps: None,
        search_figure: None,
        latency_buckets: None,
        auto: its.last().and_then(|i| i.auto.clone()),
        waits: None,
        own: Default::default(),
    }
}

/// Many hosts: several hosts' samples of one interval as one (counters
/// added, latency histograms merged, CPU merged as one machine).
pub fn merge_samples(
    k: usize,
    parts: &[(&IntervalSample, Option<&Hist>, Option<&Hist>)],
) -> IntervalSample {
    let mut counters = Counters::default();
    let mut lat = new_hist();
    let mut cor = new_hist();
    let mut cpus = Vec::new();
    let mut edges: Option<(f64, f64)> = None;
    for (s, l, c) in parts {
        counters += s.counters;
        if let Some(l) = l {
            histogram::merge(&mut lat, l);
        }
        if let Some(c) = c {
            histogram::merge(&mut cor, c);
        }
        if let Some(c) = &s.cpu {
            cpus.push(c);
        }
        edges.get_or_insert((s.start_s, s.end_s));
    }
    let (start_s, end_s) = edges.unwrap_or_default();
    IntervalSample {
        index: k,
        start_s,
        end_s,
        counters,
        latency_us: histogram::summarize(&lat),
        latency_corrected_us: histogram::summarize(&cor),
        cpu: cpu::merge_hosts(&cpus),
    }
}

/// Many hosts: the kernel's UDP counters of several hosts, added up.
pub fn sum_kernel_udp<'a>(ks: impl Iterator<Item = &'a KernelUdp>) -> Option<KernelUdp> {
    let mut sum: Option<KernelUdp> = None;
    for k in ks {
        let s = sum.get_or_insert_with(Default::default);
        s.in_datagrams += k.in_datagrams;
        s.rcvbuf_errors += k.rcvbuf_errors;
        s.in_errors += k.in_errors;
    }
    sum
}

/// Many hosts: every server's memcached counts over one window, added up.
pub fn sum_services<'a>(ws: impl Iterator<Item = &'a ServiceWindow>) -> Option<ServiceWindow> {
    let mut sum: Option<ServiceWindow> = None;
    for w in ws {
        let s = sum.get_or_insert_with(|| ServiceWindow {
            name: w.name.clone(),
            ..Default::default()
        });
        for (k, v) in &w.delta {
            *s.delta.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &w.end {
            *s.end.entry(k.clone()).or_default() += v;
        }
    }
    sum
}

/// One host's figures over its own samples of the common window.
#[derive(Clone, Debug, Default)]
pub struct HostFigures {
    pub counters: Counters,
    pub window_s: f64,
    pub throughput_bps: f64,
    pub transactions_per_s: f64,
    pub cost: crate::model::sample::CpuCost,
}

/// A host's counters, window, throughput (bytes it moved either way),
/// transactions/s and CPU cost over `own` samples.
pub fn host_figures(own: &[&IntervalSample], window_cpu: Option<&CpuWindow>) -> HostFigures {
    let mut counters = Counters::default();
    for s in own {
        counters += s.counters;
    }
    let window_s = match (own.first(), own.last()) {
        (Some(f), Some(l)) => l.end_s - f.start_s,
        _ => 0.0,
    };
    let per_s = |x: f64| if window_s > 0.0 { x / window_s } else { 0.0 };
    let moved = counters.bytes_rx + counters.bytes_tx;
    HostFigures {
        counters,
        window_s,
        throughput_bps: 8.0 * per_s(moved as f64),
        transactions_per_s: per_s(counters.transactions as f64),
        cost: window_cpu
            .map(|w| {
                let polled_s = counters.rx_poll_ns as f64 / 1e9;
                cpu::cost(w, moved, counters.transactions, polled_s)
            })
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::spec::Workload;

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
        let it = iteration(0, side(client), side(agent), None, Figures::default());
        assert_eq!(it.bytes, 2200);
        assert_eq!(it.intervals.iter().map(|i| i.bytes).sum::<u64>(), it.bytes);
        assert!((it.throughput_bps - 2200.0 * 8.0 / 2.0).abs() < 1e-9);
        assert_eq!(it.transactions, 10);
        let spec = TestSpec {
            workload: Workload::named("rr"),
            ..Default::default()
        };
        let s = summarize(
            &spec,
            Figures {
                latency: true,
                ..Default::default()
            },
            &[it.clone(), it],
            (None, None),
            99.0,
            MainMetric::TransactionRate,
        );
        assert_eq!(s.bytes, 4400);
        assert_eq!(s.iterations, 2);
        assert!(s.confidence.is_some());
        assert_eq!(s.status, Status::Ok);
    }

    #[test]
    fn one_way_delays_merge_over_flows_and_iterations_and_need_a_known_offset() {
        use crate::model::flow::{OwdHistText, UdpFlowStats};
        let flow = |unc: Option<f64>, up_ns: u64, down_ns: u64, clamped: u64| {
            let (mut up, mut down) = (new_hist(), new_hist());
            histogram::record_ns(&mut up, up_ns);
            histogram::record_ns(&mut down, down_ns);
            FlowReport {
                udp: Some(UdpFlowStats {
                    owd_offset_uncertainty_us: unc,
                    owd_clamped: unc.map(|_| clamped),
                    owd_hists: Some(OwdHistText {
                        up: histogram::encode(&up),
                        down: histogram::encode(&down),
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }
        };
        let iteration = |flows: Vec<FlowReport>| Iteration {
            udp: Some(UdpFigures::default()),
            flows: Pair {
                client: flows,
                agent: vec![],
            },
            ..Default::default()
        };
        let mut totals = OwdHists::default();
        let mut it = iteration(vec![
            flow(Some(3.0), 10_000_000, 30_000_000, 1),
            flow(Some(40.0), 10_000_000, 30_000_000, 2),
        ]);
        one_way(&mut it, &mut totals);
        let u = it.udp.as_ref().unwrap();
        let up = u.owd_up_us.as_ref().unwrap();
        assert_eq!(up.count, 2);
        assert!((up.p50 - 10_000.0).abs() < 10.0, "{up:?}");
        assert!((u.owd_down_us.as_ref().unwrap().p99 - 30_000.0).abs() < 30.0);
        assert_eq!(u.owd_offset_uncertainty_us, Some(40.0), "the largest");
        assert_eq!(u.owd_clamped, Some(3));
        assert!(
            it.flows
                .client
                .iter()
                .all(|f| f.udp.as_ref().unwrap().owd_hists.is_none()),
            "the histograms are in the figures now"
        );
        // A second iteration, and the summary over both.
        let mut it2 = iteration(vec![flow(Some(5.0), 20_000_000, 20_000_000, 0)]);
        one_way(&mut it2, &mut totals);
        let its = [it, it2];
        let spec = TestSpec {
            workload: crate::model::spec::Workload::named("udp-rr"),
            ..Default::default()
        };
        let figures = Figures {
            udp: true,
            latency: true,
            one_way: true,
            ..Default::default()
        };
        let mut s = summarize(
            &spec,
            figures,
            &its,
            (None, None),
            99.0,
            MainMetric::TransactionRate,
        );
        assert_eq!(
            s.udp.as_ref().unwrap().owd_up_us,
            None,
            "only from the totals"
        );
        one_way_summary(&mut s, &its, &totals);
        let u = s.udp.as_ref().unwrap();
        assert_eq!(u.owd_up_us.as_ref().unwrap().count, 3);
        assert_eq!(u.owd_offset_uncertainty_us, Some(40.0));
        assert_eq!(u.owd_clamped, Some(3));
        // No flow knew its offset: nothing, not a guess.
        let mut totals = OwdHists::default();
        let mut it = iteration(vec![flow(None, 10_000_000, 30_000_000, 0)]);
        one_way(&mut it, &mut totals);
        let u = it.udp.as_ref().unwrap();
        assert!(u.owd_up_us.is_none() && u.owd_offset_uncertainty_us.is_none());
        assert!(totals.up.is_empty());
        let its = [it];
        let mut s = summarize(
            &spec,
            figures,
            &its,
            (None, None),
            99.0,
            MainMetric::TransactionRate,
        );
        one_way_summary(&mut s, &its, &totals);
        let json = serde_json::to_string(&s).unwrap();
        assert!(!json.contains("owd"), "{json}");
    }

    #[test]
    fn a_stream_counts_what_reached_the_receivers() {
        // The receiver read 124 MB in a second in which the senders saw
        // 117.7 MB arrive: the rest had waited behind a lost segment.
        let mut c = sample(0, 0, 125_000_000, 0);
        c.counters.bytes_delivered = 117_700_000;
        let mut a = sample(0, 124_000_000, 0, 0);
        a.counters.bytes_delivered = 0;
        let by_reads = combine(&c, Some(&a), Figures::default());
        assert_eq!(by_reads.bytes, 124_000_000);
        let delivered = Figures {
            delivered: true,
            ..Default::default()
        };
        let by_arrival = combine(&c, Some(&a), delivered);
        assert_eq!(by_arrival.bytes, 117_700_000);
        assert!((by_arrival.throughput_bps - 941.6e6).abs() < 1.0);
        // Both ends' senders count (bidir).
        a.counters.bytes_delivered = 1_000;
        assert_eq!(moved(&c.counters, &a.counters, delivered), 117_701_000);
    }
}
