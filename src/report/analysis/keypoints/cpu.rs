//! CPU: an end or a host bound by its cores, CPU per KB along the flow
//! count, and the spread of CPU per transaction.

use super::shared::{all_kv, all_udp, curves, plural, suffix, KeyPoint};
use crate::report::analysis::landscape::Landscape;

/// CPU per KB that changes by more than 20% across the flow counts.
pub fn service_demand_trend(l: &Landscape) -> Vec<KeyPoint> {
    let mut out = Vec::new();
    if all_udp(l) {
        // Datagrams, not bytes: the batching and drop rules speak of them.
        return out;
    }
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

/// The share of a host's cores (percent) an end's receiver spent polling
/// an empty socket (`--rx-poll`), mean over a row's runs: waiting, which a
/// CPU-bound end does not do.
fn polled_pct(results: &[crate::model::result::TestResult], client: bool, cpus: f64) -> f64 {
    let per_run = results.iter().map(|r| {
        let (ns, s) = r.iterations.iter().fold((0u64, 0.0), |(ns, s), it| {
            let c = if client {
                &it.counters.client
            } else {
                &it.counters.agent
            };
            (ns + c.rx_poll_ns, s + it.duration_s)
        });
        if s > 0.0 {
            100.0 * ns as f64 / 1e9 / s / cpus
        } else {
            0.0
        }
    });
    per_run.sum::<f64>() / results.len().max(1) as f64
}

/// Either end using (nearly) all the cores its workers could use, its
/// receiver's polling left out.
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
                r.point.spec.workers
            } else {
                r.point.spec.agent_workers
            };
            let usable = (workers as f64).min(cpus);
            let pct = pct - polled_pct(&r.results, side == "client", cpus);
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
                "Give the {side} more workers (--{}workers) and cores, pin it away from the other end (--{}cpus), or use a faster host.",
                if side == "agent" { "agent-" } else { "" },
                if side == "agent" { "agent-" } else { "" }
            ),
        });
    }
    out
}

/// A host at (nearly) full CPU: whatever the workers' share, the machine
/// itself had no cycles left, so the result measures CPU, not the path.
/// A receiver's polling (`--rx-poll`) on that host is left out: it waits.
pub fn host_saturated(l: &Landscape) -> Vec<KeyPoint> {
    let mut out = Vec::new();
    let shared = l
        .rows
        .iter()
        .find_map(|r| r.results.first())
        .map(|r| r.agent.local)
        .unwrap_or(false);
    for (side, key) in [
        ("client", "client_host_cpu_pct"),
        ("agent", "agent_host_cpu_pct"),
    ] {
        let with: Vec<(String, f64)> = l
            .rows
            .iter()
            .filter_map(|r| {
                let cpus = r.results.first().map_or(1, |x| {
                    if side == "client" {
                        x.environment.client.cpus
                    } else {
                        x.environment.agent.cpus
                    }
                });
                let cpus = cpus.max(1) as f64;
                let mut polled = polled_pct(&r.results, side == "client", cpus);
                if shared {
                    polled += polled_pct(&r.results, side != "client", cpus);
                }
                r.mean(key).map(|v| (r.point.label(), v - polled))
            })
            .collect();
        let hot: Vec<&(String, f64)> = with.iter().filter(|(_, v)| *v >= 95.0).collect();
        if hot.is_empty() {
            continue;
        }
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

/// The cheapest and the most expensive transaction, per end.
pub fn transaction_cost(l: &Landscape) -> Vec<KeyPoint> {
    let mut out = Vec::new();
    // One transfer per test (window/RTT studies, exec): a "transaction" is
    // the whole copy, and its CPU follows its duration, not a workload's shape.
    let single_transfers = l.rows.iter().all(|r| {
        r.results
            .iter()
            .all(|x| x.spec.is_finite() || x.exec.is_some())
    });
    // memcache has its own rule on CPU per operation (kv_cost).
    if single_transfers || all_kv(l) {
        return out;
    }
    for (side, key) in [("client", "client_us_per_tx"), ("agent", "agent_us_per_tx")] {
        let v: Vec<(String, f64)> = l
            .rows
            .iter()
            .filter(|r| super::evidence::steady(r))
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
