//! Key Points and Best Practices: sentences derived from the numbers by
//! rules, each with the option or sysctl that would change the result. Every
//! rule fires only on the evidence it names; the tests below feed each one
//! crafted landscapes on both sides of its threshold.

use crate::report::landscape::{axis_number, Landscape, Row};

use crate::units::{fmt_bps, fmt_us};

#[derive(Clone, Debug, PartialEq)]
pub struct KeyPoint {
    /// The rule's name (stable, for tests and scripts).
    pub rule: &'static str,
    pub text: String,
    /// What to change, and where.
    pub advice: String,
}

/// One metric along `dim`: rows grouped by every other parameter, each
/// group as (value of `dim`, mean of `metric`) sorted by `dim`; rows
/// without the metric are left out.
fn curves(l: &Landscape, dim: &str, metric: &str) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut out: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for r in &l.rows {
        let (Some(x), Some(y)) = (r.point.param(dim).and_then(axis_number), r.mean(metric)) else {
            continue;
        };
        let key = r.point.label_except(dim);
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push((x, y)),
            None => out.push((key, vec![(x, y)])),
        }
    }
    for (_, v) in &mut out {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// The point with the largest value.
fn peak(v: &[(f64, f64)]) -> (f64, f64) {
    v.iter()
        .copied()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap_or_default()
}

fn suffix(group: &str) -> String {
    if group.is_empty() {
        String::new()
    } else {
        format!(" ({group})")
    }
}

fn plural(n: f64, one: &str, many: &str) -> String {
    if n == 1.0 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// The first stream count reaching the threshold fraction of line rate.
pub fn streams_to_line_rate(l: &Landscape) -> Vec<KeyPoint> {
    let Some(rate) = l.line_rate_bps else {
        return vec![];
    };
    let mut out = Vec::new();
    for (group, measured) in curves(l, "flows", "throughput_bps") {
        if measured.len() < 2 {
            continue;
        }
        let need = rate * l.threshold;
        let pct = (l.threshold * 100.0).round();
        let mut notes: Vec<&str> = Vec::new();
        if !group.is_empty() {
            notes.push(&group);
        }
        if l.line_rate_measured {
            notes.push("line rate taken as the best measured result");
        }
        let ctx = if notes.is_empty() {
            String::new()
        } else {
            format!(" ({})", notes.join("; "))
        };
        match measured.iter().find(|(_, v)| *v >= need) {
            Some((n, v)) => out.push(KeyPoint {
                rule: "streams_to_line_rate",
                text: format!(
                    "{} reach {pct}% of line rate{ctx}: {} of {} ({:.0}%).",
                    plural(*n, "stream", "streams"),
                    fmt_bps(*v),
                    fmt_bps(rate),
                    100.0 * v / rate
                ),
                advice: if *n > 1.0 {
                    "One stream is bound by one core per end; applications that need line rate should use parallel connections (or faster per-stream paths: larger writes, zero-copy, offloads).".into()
                } else {
                    "A single stream already reaches line rate here; more streams only add CPU cost.".into()
                },
            }),
            None => {
                let (n, v) = peak(&measured);
                out.push(KeyPoint {
                    rule: "streams_to_line_rate",
                    text: format!(
                        "No stream count reaches {pct}% of line rate{ctx}: the best is {} with {} ({:.0}% of {}).",
                        fmt_bps(v),
                        plural(n, "stream", "streams"),
                        100.0 * v / rate,
                        fmt_bps(rate)
                    ),
                    advice: "Check whether either end is CPU bound (below); more cores per end, larger socket buffers (net.core.wmem_max/rmem_max, tcp_wmem/tcp_rmem) or offloads would raise it.".into(),
                });
            }
        }
    }
    out
}

/// Throughput that falls again as flows are added beyond a peak.
pub fn scaling_peak(l: &Landscape) -> Vec<KeyPoint> {
    let mut out = Vec::new();
    for (group, measured) in curves(l, "flows", "throughput_bps") {
        if measured.len() < 3 {
            continue;
        }
        let (peak_n, peak) = peak(&measured);
        let (last_n, last) = *measured.last().expect("3 or more");
        if last_n > peak_n && last < 0.9 * peak {
            out.push(KeyPoint {
                rule: "scaling_peak",
                text: format!(
                    "Throughput peaks at {}{} ({}); {} give {:.0}% less ({}).",
                    plural(peak_n, "flow", "flows"),
                    suffix(&group),
                    fmt_bps(peak),
                    plural(last_n, "flow", "flows"),
                    100.0 * (1.0 - last / peak),
                    fmt_bps(last)
                ),
                advice: "Past the peak, flows compete for the same cores and caches; use about as many busy flows as cores, or spread them over more hosts.".into(),
            });
        }
    }
    out
}

/// CPU per KB that changes by more than 20% across the flow counts.
pub fn service_demand_trend(l: &Landscape) -> Vec<KeyPoint> {
    let mut out = Vec::new();
    for key in ["client_us_per_kb", "agent_us_per_kb"] {
        for (group, v) in curves(l, "flows", key) {
            let (Some(first), Some(last)) = (v.first(), v.last()) else {
                continue;
            };
            if v.len() < 2 || first.1 <= 0.0 {
                continue;
            }
            let ratio = last.1 / first.1;
            if !(0.8..=1.2).contains(&ratio) {
                let side = if key.starts_with("client") {
                    "Client"
                } else {
                    "Agent"
                };
                out.push(KeyPoint {
                    rule: "service_demand_trend",
                    text: format!(
                        "{side} CPU per KB goes from {:.3} µs with {} to {:.3} µs with {}{} ({ratio:.2}x).",
                        first.1,
                        plural(first.0, "flow", "flows"),
                        last.1,
                        plural(last.0, "flow", "flows"),
                        suffix(&group)
                    ),
                    advice: if ratio > 1.0 {
                        "Each byte costs more with many flows (less batching per wake-up, more context switches); fewer, busier flows are cheaper.".into()
                    } else {
                        "Each byte costs less with more flows (more batching per wake-up); a single flow wastes CPU waiting.".into()
                    },
                });
            }
        }
    }
    out
}

/// Either end using (nearly) all the cores its workers could use.
pub fn cpu_bound(l: &Landscape) -> Vec<KeyPoint> {
    let mut out = Vec::new();
    for (side, key) in [("client", "client_cpu_pct"), ("agent", "agent_cpu_pct")] {
        let mut hits: Vec<(String, f64, u32)> = Vec::new();
        let mut considered = 0;
        for r in &l.rows {
            let (Some(pct), Some(res)) = (r.mean(key), r.results.first()) else {
                continue;
            };
            considered += 1;
            let host = if side == "client" {
                &res.environment.client
            } else {
                &res.environment.agent
            };
            let cpus = host.cpus.max(1) as f64;
            let workers = if side == "client" {
                r.point.spec.threads
            } else {
                r.point.spec.agent_threads
            };
            let usable = (workers as f64).min(cpus);
            let of_usable = pct / 100.0 * cpus / usable;
            if of_usable >= 0.9 {
                hits.push((r.point.label(), of_usable * 100.0, workers));
            }
        }
        if hits.is_empty() {
            continue;
        }
        let worst = hits
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .expect("non-empty");
        let names: Vec<&str> = hits.iter().take(4).map(|h| h.0.as_str()).collect();
        out.push(KeyPoint {
            rule: "cpu_bound",
            text: format!(
                "The {side} was CPU bound in {} of {considered} points (up to {:.0}% of the cores its {} could use, at {}): there the result measures the {side}'s CPU, not the network.{}",
                hits.len(),
                worst.1,
                plural(worst.2 as f64, "worker", "workers"),
                worst.0,
                if hits.len() > 1 {
                    format!(" Points: {}{}.", names.join(", "), if hits.len() > 4 { ", ..." } else { "" })
                } else {
                    String::new()
                }
            ),
            advice: format!(
                "Give the {side} more workers (--{}threads) and cores, pin it away from the other end (--{}cpus), or use a faster host.",
                if side == "agent" { "agent-" } else { "" },
                if side == "agent" { "agent-" } else { "" }
            ),
        });
    }
    out
}

/// A host at (nearly) full CPU: whatever the workers' share, the machine
/// itself had no cycles left, so the result measures CPU, not the path.
pub fn host_saturated(l: &Landscape) -> Vec<KeyPoint> {
    let mut out = Vec::new();
    for (side, key) in [
        ("client", "client_host_cpu_pct"),
        ("agent", "agent_host_cpu_pct"),
    ] {
        let with: Vec<(String, f64)> = l
            .rows
            .iter()
            .filter_map(|r| r.mean(key).map(|v| (r.point.label(), v)))
            .collect();
        let hot: Vec<&(String, f64)> = with.iter().filter(|(_, v)| *v >= 95.0).collect();
        if hot.is_empty() {
            continue;
        }
        let shared = l
            .rows
            .iter()
            .find_map(|r| r.results.first())
            .map(|r| r.agent.local)
            .unwrap_or(false);
        if side == "agent" && shared {
            // One host: the client's line already says it.
            continue;
        }
        out.push(KeyPoint {
            rule: "host_saturated",
            text: format!(
                "The {side}'s host was at {:.0}% CPU or more in {} of {} points (first: {}): every core was busy, so there the result is bound by CPU{}.",
                hot.iter().map(|h| h.1).fold(f64::INFINITY, f64::min).floor(),
                hot.len(),
                with.len(),
                hot[0].0,
                if shared { " shared by both ends" } else { "" }
            ),
            advice: "Check the softirq and system shares in each result's CPU block; more cores, interrupt/RPS spreading (net.core.rps_sock_flow_entries, /sys/class/net/*/queues), or separate hosts for the two ends would move the bound.".into(),
        });
    }
    out
}

/// What TLS costs: points that differ only in `tls` (true vs false),
/// compared per KB (streams) or per transaction.
pub fn tls_cost(l: &Landscape) -> Vec<KeyPoint> {
    let key_of = |r: &Row| r.point.label_except("tls");
    let mut pairs: Vec<(&Row, &Row)> = Vec::new();
    for enc in l
        .rows
        .iter()
        .filter(|r| r.point.param("tls") == Some("true"))
    {
        if let Some(clear) = l
            .rows
            .iter()
            .find(|r| r.point.param("tls") == Some("false") && key_of(r) == key_of(enc))
        {
            pairs.push((enc, clear));
        }
    }
    let mut out = Vec::new();
    for (side, kb, tx) in [
        ("client", "client_us_per_kb", "client_us_per_tx"),
        ("agent", "agent_us_per_kb", "agent_us_per_tx"),
    ] {
        let ratios: Vec<(f64, f64, f64, String)> = pairs
            .iter()
            .filter_map(|(e, c)| {
                let (a, b) = match (e.mean(kb), c.mean(kb)) {
                    (Some(a), Some(b)) => (a, b),
                    _ => (e.mean(tx)?, c.mean(tx)?),
                };
                (b > 0.0).then(|| (a / b, a, b, key_of(e)))
            })
            .collect();
        if ratios.is_empty() {
            continue;
        }
        let lo = ratios.iter().map(|r| r.0).fold(f64::INFINITY, f64::min);
        let hi = ratios.iter().map(|r| r.0).fold(f64::NEG_INFINITY, f64::max);
        let per = if pairs[0].0.mean(kb).is_some() {
            "KB"
        } else {
            "transaction"
        };
        let first = &ratios[0];
        let range = if (hi - lo) / lo < 0.05 {
            format!("{lo:.1}x")
        } else {
            format!("{lo:.1}-{hi:.1}x")
        };
        let tput: Vec<f64> = pairs
            .iter()
            .filter_map(|(e, c)| {
                Some(e.mean("throughput_bps")? / c.mean("throughput_bps").filter(|v| *v > 0.0)?)
            })
            .collect();
        out.push(KeyPoint {
            rule: "tls_cost",
            text: format!(
                "TLS costs {range} the {side}'s CPU per {per} of clear over {} point{} ({:.1}x at {}: {:.3} vs {:.3} µs){}.",
                ratios.len(),
                if ratios.len() == 1 { "" } else { "s" },
                first.0,
                if first.3.is_empty() { "the test" } else { &first.3 },
                first.1,
                first.2,
                if side == "client" && !tput.is_empty() {
                    format!(
                        "; throughput under TLS is {:.2}-{:.2}x of clear",
                        tput.iter().cloned().fold(f64::INFINITY, f64::min),
                        tput.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
                    )
                } else {
                    String::new()
                }
            ),
            advice: "Encryption is CPU per byte: check that the suite uses the CPU's AES instructions (`linerate crypto`), prefer AES-GCM where the CPU has VAES, and spread streams over cores; this kernel has no kTLS offload.".into(),
        });
    }
    out
}

/// Both ends on one host share its cores.
pub fn shared_host(l: &Landscape) -> Vec<KeyPoint> {
    let Some(r) = l.rows.iter().find_map(|r| r.results.first()) else {
        return vec![];
    };
    let (c, a) = (&r.environment.client, &r.environment.agent);
    if !(r.agent.local || (!c.hostname.is_empty() && c.hostname == a.hostname)) {
        return vec![];
    }
    vec![KeyPoint {
        rule: "shared_host",
        text: format!(
            "Client and agent ran on the same host ({}, {} CPUs): each end's CPU competes with the other's, and the figures describe the host's TCP stack over loopback, not a network.",
            if c.hostname.is_empty() { "this host" } else { &c.hostname },
            c.cpus
        ),
        advice: "Run `linerate serve` on a second machine and give its address with --agent (or [network] agent in the study) to measure a real link.".into(),
    }]
}

/// Points whose confidence interval is wider than the target, or that ran
/// once and have none.
pub fn noise(l: &Landscape) -> Vec<KeyPoint> {
    let mut wide: Vec<(String, f64, f64, f64)> = Vec::new();
    let mut single = 0;
    let mut measured = 0;
    for r in &l.rows {
        let key = match r.point.spec.main_metric() {
            crate::spec::MainMetric::Throughput => "throughput_bps",
            crate::spec::MainMetric::TransactionRate => "transactions_per_s",
        };
        let Some(e) = r.value(key) else { continue };
        measured += 1;
        match e.half_width_pct {
            Some(hw) if e.n > 1 => {
                let target = r.point.confidence.width_pct / 2.0;
                if hw > target {
                    wide.push((r.point.label(), hw, target, e.level_pct));
                }
            }
            _ => single += 1,
        }
    }
    let mut out = Vec::new();
    if measured > 0 && single == measured {
        out.push(KeyPoint {
            rule: "noise",
            text: "Every point ran once: no confidence intervals, so differences of 10-30% between points may be noise on a shared machine.".into(),

            advice: "Repeat the study (--repeat 5 --shuffle) or each test (iterations = \"3..10\" in [test]) for error bars.".into(),
        });
    }
    if let Some(worst) = wide.iter().max_by(|a, b| a.1.total_cmp(&b.1)) {
        out.push(KeyPoint {
            rule: "noise",
            text: format!(
                "{} of {measured} points have a {:.0}% confidence interval wider than ±{:.1}% (worst: {} at ±{:.1}%): treat their differences with care.",
                wide.len(),
                worst.3,
                worst.2,
                worst.0,
                worst.1
            ),
            advice: "Add repetitions (--repeat, --shuffle spreads drift), lengthen the window (duration), or pin the ends (cpus, agent_cpus).".into(),
        });
    }
    out
}

/// A p99 far above the p50.
pub fn tail_latency(l: &Landscape) -> Vec<KeyPoint> {
    let mut out = Vec::new();
    for r in &l.rows {
        let (Some(p50), Some(p99)) = (r.mean("latency_p50_us"), r.mean("latency_p99_us")) else {
            continue;
        };
        if p50 > 0.0 && p99 / p50 >= 10.0 {
            out.push(KeyPoint {
                rule: "tail_latency",
                text: format!(
                    "{}: p99 latency is {:.0}x the median ({} vs {}).",
                    r.point.label(),
                    p99 / p50,
                    fmt_us(p99),
                    fmt_us(p50)
                ),
                advice: "A long tail on an idle path usually means scheduling: pin client and agent workers (--cpus, --agent-cpus) and compare; check softirq and steal time in the CPU columns.".into(),
            });
        }
    }
    out
}

/// The cheapest and the most expensive transaction, per end.
pub fn transaction_cost(l: &Landscape) -> Vec<KeyPoint> {
    let mut out = Vec::new();
    for (side, key) in [("client", "client_us_per_tx"), ("agent", "agent_us_per_tx")] {
        let v: Vec<(String, f64)> = l
            .rows
            .iter()
            .filter_map(|r| r.mean(key).map(|v| (r.point.label(), v)))
            .collect();
        if v.len() < 2 {
            continue;
        }
        let lo = v
            .iter()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .expect("2 or more");
        let hi = v
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .expect("2 or more");
        if lo.1 > 0.0 && hi.1 / lo.1 >= 1.5 {
            out.push(KeyPoint {
                rule: "transaction_cost",
                text: format!(
                    "The {side}'s CPU per transaction ranges from {:.1} µs ({}) to {:.1} µs ({}), {:.1}x.",
                    lo.1,
                    lo.0,
                    hi.1,
                    hi.0,
                    hi.1 / lo.1
                ),
                advice: "Connection setup (CRR) and large payloads dominate per-transaction cost; persistent connections and fewer, larger transfers are cheaper.".into(),
            });
        }
    }
    out
}

/// Points without a result, or with a partial one.
pub fn missing(l: &Landscape) -> Vec<KeyPoint> {
    let none: Vec<String> = l
        .rows
        .iter()
        .filter(|r| r.results.is_empty())
        .map(|r| r.point.label())
        .collect();
    let partial = l
        .rows
        .iter()
        .filter(|r| r.results.iter().any(|x| x.summary.status != "ok"))
        .count();
    let mut out = Vec::new();
    if !none.is_empty() {
        out.push(KeyPoint {
            rule: "missing",
            text: format!(
                "{} of {} points have no result yet (the study stopped early): {}{}.",
                none.len(),
                l.rows.len(),
                none.iter().take(4).cloned().collect::<Vec<_>>().join(", "),
                if none.len() > 4 { ", ..." } else { "" }
            ),
            advice:
                "Continue with `linerate study run STUDY --resume DIR`; finished points are kept."
                    .into(),
        });
    }
    if partial > 0 {
        out.push(KeyPoint {
            rule: "missing",
            text: format!("{partial} points hold a partial result (a test ended early)."),
            advice: "See each result's error; rerun those points.".into(),
        });
    }
    out
}

/// Every rule, in the order the report lists them.
pub fn derive(l: &Landscape) -> Vec<KeyPoint> {
    let rules: &[fn(&Landscape) -> Vec<KeyPoint>] = &[
        missing,
        streams_to_line_rate,
        scaling_peak,
        cpu_bound,
        host_saturated,
        service_demand_trend,
        transaction_cost,
        tls_cost,
        tail_latency,
        noise,
        shared_host,
    ];
    rules.iter().flat_map(|r| r(l)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::stats::estimate;
    use crate::result::TestResult;
    use crate::spec::TestSpec;
    use crate::study::sweep::Point;
    use std::collections::BTreeMap;

    /// A row with the given params and metric samples.
    fn row(params: &[(&str, &str)], metrics: &[(&'static str, &[f64])], threads: u32) -> Row {
        let flows = params
            .iter()
            .find(|(k, _)| *k == "flows")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(1);
        let point = Point {
            index: 0,
            id: "p".into(),
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            spec: TestSpec {
                flows,
                threads,
                agent_threads: threads,
                ..Default::default()
            },
            confidence: Default::default(),
        };
        let mut values = BTreeMap::new();
        for (k, s) in metrics {
            values.insert(*k, estimate(s, 99.0));
        }
        let mut res = TestResult::default();
        res.summary.status = "ok".into();
        res.environment.client.cpus = 2;
        res.environment.agent.cpus = 2;
        res.environment.client.hostname = "a".into();
        res.environment.agent.hostname = "b".into();
        Row {
            point,
            results: vec![res],
            values,
        }
    }

    fn land(rows: Vec<Row>, line_rate: Option<f64>) -> Landscape {
        Landscape {
            rows,
            dims: vec!["flows".into()],
            line_rate_bps: line_rate,
            line_rate_note: None,
            line_rate_measured: false,
            threshold: 0.9,
        }
    }

    fn streams(tputs: &[(u32, f64)]) -> Vec<Row> {
        tputs
            .iter()
            .map(|(n, t)| {
                row(
                    &[("flows", &n.to_string())],
                    &[("throughput_bps", &[*t])],
                    1,
                )
            })
            .collect()
    }

    #[test]
    fn line_rate_names_the_first_count_over_the_threshold() {
        let l = land(
            streams(&[(1, 4e9), (2, 7e9), (4, 9.2e9), (8, 9.4e9)]),
            Some(10e9),
        );
        let k = streams_to_line_rate(&l);
        assert_eq!(k.len(), 1);
        assert!(
            k[0].text.starts_with("4 streams reach 90% of line rate"),
            "{}",
            k[0].text
        );
        let l = land(streams(&[(1, 4e9), (2, 7e9), (4, 8.9e9)]), Some(10e9));
        let k = streams_to_line_rate(&l);
        assert!(
            k[0].text.starts_with("No stream count reaches 90%"),
            "{}",
            k[0].text
        );
        assert!(k[0].text.contains("4 streams (89%"), "{}", k[0].text);
        assert!(streams_to_line_rate(&land(streams(&[(1, 4e9), (2, 9e9)]), None)).is_empty());
    }

    #[test]
    fn peak_fires_only_on_a_real_drop() {
        let l = land(streams(&[(1, 10e9), (8, 30e9), (64, 20e9)]), None);
        let k = scaling_peak(&l);
        assert_eq!(k.len(), 1);
        assert!(k[0].text.contains("peaks at 8 flows"), "{}", k[0].text);
        assert!(k[0].text.contains("33% less"), "{}", k[0].text);
        let l = land(streams(&[(1, 10e9), (8, 30e9), (64, 28e9)]), None);
        assert!(scaling_peak(&l).is_empty());
    }

    #[test]
    fn cpu_bound_counts_the_cores_the_workers_could_use() {
        // 50% of 2 CPUs = 1 core = all of one worker's core.
        let l = land(
            vec![row(&[("flows", "1")], &[("client_cpu_pct", &[49.5])], 1)],
            None,
        );
        let k = cpu_bound(&l);
        assert_eq!(k.len(), 1, "{k:?}");
        assert!(
            k[0].text.contains("The client was CPU bound in 1 of 1"),
            "{}",
            k[0].text
        );
        assert!(k[0].text.contains("99%"), "{}", k[0].text);
        // The same 50% with 2 workers leaves half the usable cores idle.
        let l = land(
            vec![row(&[("flows", "2")], &[("client_cpu_pct", &[49.5])], 2)],
            None,
        );
        assert!(cpu_bound(&l).is_empty());
    }

    #[test]
    fn a_saturated_host_is_named_once_when_shared() {
        let mk = |v: f64| {
            let mut r = row(
                &[("flows", "8")],
                &[("client_host_cpu_pct", &[v]), ("agent_host_cpu_pct", &[v])],
                2,
            );
            r.results[0].agent.local = true;
            land(vec![r], None)
        };
        let k = host_saturated(&mk(99.9));
        assert_eq!(k.len(), 1, "one line for a shared host: {k:?}");
        assert!(
            k[0].text
                .starts_with("The client's host was at 99% CPU or more in 1 of 1 points"),
            "{}",
            k[0].text
        );
        assert!(k[0].text.contains("shared by both ends"));
        assert!(host_saturated(&mk(90.0)).is_empty());
    }

    #[test]
    fn service_demand_trend_needs_a_20_percent_change() {
        let mk = |a: f64, b: f64| {
            land(
                vec![
                    row(&[("flows", "1")], &[("client_us_per_kb", &[a])], 1),
                    row(&[("flows", "64")], &[("client_us_per_kb", &[b])], 1),
                ],
                None,
            )
        };
        let k = service_demand_trend(&mk(0.30, 0.45));
        assert_eq!(k.len(), 1);
        assert!(k[0].text.contains("1.50x"), "{}", k[0].text);
        assert!(service_demand_trend(&mk(0.30, 0.33)).is_empty());
    }

    #[test]
    fn noise_flags_single_runs_and_wide_intervals() {
        let l = land(streams(&[(1, 4e9), (2, 7e9)]), None);
        let k = noise(&l);
        assert_eq!(k.len(), 1);
        assert!(k[0].text.starts_with("Every point ran once"));
        let wide = row(
            &[("flows", "1")],
            &[("throughput_bps", &[4e9, 6e9, 5e9])],
            1,
        );
        let tight = row(
            &[("flows", "2")],
            &[("throughput_bps", &[5e9, 5.01e9, 5.02e9])],
            1,
        );
        let k = noise(&land(vec![wide, tight], None));
        assert_eq!(k.len(), 1, "{k:?}");
        assert!(k[0].text.starts_with("1 of 2 points"), "{}", k[0].text);
        assert!(k[0].text.contains("flows=1"), "{}", k[0].text);
    }

    #[test]
    fn tail_and_transaction_cost() {
        let rr = row(
            &[("case", "RR 200/1000")],
            &[
                ("latency_p50_us", &[20.0]),
                ("latency_p99_us", &[250.0]),
                ("client_us_per_tx", &[10.0]),
            ],
            1,
        );
        let crr = row(
            &[("case", "CRR 64/8k")],
            &[
                ("latency_p50_us", &[60.0]),
                ("latency_p99_us", &[120.0]),
                ("client_us_per_tx", &[45.0]),
            ],
            1,
        );
        let l = land(vec![rr, crr], None);
        let t = tail_latency(&l);
        assert_eq!(t.len(), 1);
        assert!(
            t[0].text.starts_with("RR 200/1000: p99 latency is 12x"),
            "{}",
            t[0].text
        );
        let c = transaction_cost(&l);
        assert_eq!(c.len(), 1);
        assert!(
            c[0].text
                .contains("from 10.0 µs (RR 200/1000) to 45.0 µs (CRR 64/8k), 4.5x"),
            "{}",
            c[0].text
        );
    }

    #[test]
    fn tls_cost_pairs_points_that_differ_only_in_tls() {
        let mk = |tls: &str, flows: &str, kb: f64, t: f64| {
            row(
                &[("tls", tls), ("flows", flows)],
                &[
                    ("client_us_per_kb", &[kb]),
                    ("agent_us_per_kb", &[kb / 2.0]),
                    ("throughput_bps", &[t]),
                ],
                1,
            )
        };
        let l = land(
            vec![
                mk("false", "1", 0.25, 20e9),
                mk("false", "4", 0.20, 40e9),
                mk("true", "1", 0.50, 12e9),
                mk("true", "4", 0.44, 30e9),
            ],
            None,
        );
        let k = tls_cost(&l);
        assert_eq!(k.len(), 2, "{k:?}");
        assert!(k[0].text.starts_with("TLS costs 2.0-2.2x the client's CPU per KB of clear over 2 points (2.0x at flows=1: 0.500 vs 0.250 µs)"), "{}", k[0].text);
        assert!(
            k[0].text
                .contains("throughput under TLS is 0.60-0.75x of clear"),
            "{}",
            k[0].text
        );
        assert!(
            k[1].text.starts_with("TLS costs 2.0-2.2x the agent's"),
            "{}",
            k[1].text
        );
        // Without clear twins there is nothing to compare.
        let l = land(vec![mk("true", "1", 0.5, 12e9)], None);
        assert!(tls_cost(&l).is_empty());
    }

    #[test]
    fn shared_host_and_missing_points() {
        let mut l = land(streams(&[(1, 4e9)]), None);
        assert!(
            shared_host(&l).is_empty(),
            "different hostnames, remote agent"
        );
        l.rows[0].results[0].agent.local = true;
        assert_eq!(shared_host(&l).len(), 1);
        assert!(missing(&l).is_empty());
        l.rows[0].results.clear();
        assert!(missing(&l)[0]
            .text
            .starts_with("1 of 1 points have no result"));
    }
}
