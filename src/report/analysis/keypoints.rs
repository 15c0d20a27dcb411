//! Key Points and Best Practices: sentences derived from the numbers by
//! rules, each with the option or sysctl that would change the result. Every
//! rule fires only on the evidence it names; the tests below feed each one
//! crafted landscapes on both sides of its threshold.

use crate::model::spec::Workload;
use crate::report::analysis::landscape::{axis_value, Landscape, Row};
use crate::report::analysis::wanmodel::{
    self, Limit, PointModel, WindowSource, SSH_CHANNEL_WINDOW,
};
use crate::units::{fmt_bps, fmt_bytes, fmt_us};

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
        let (Some(x), Some(y)) = (
            r.point.param(dim).and_then(|v| axis_value(dim, v)),
            r.mean(metric),
        ) else {
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

/// Every point of the study is a UDP test: packets, not bytes, are its unit.
fn all_udp(l: &Landscape) -> bool {
    !l.rows.is_empty() && l.rows.iter().all(|r| r.point.spec.workload.is_udp())
}

/// Where UDP receivers start dropping: the first flow count (per group)
/// at which more than 1% of the datagrams were dropped by the receiving
/// sockets, with what the network lost beside it.
pub fn udp_receiver_drops(l: &Landscape) -> Vec<KeyPoint> {
    let mut out = Vec::new();
    let dim = if l.rows.iter().any(|r| r.point.param("flows").is_some()) {
        "flows"
    } else {
        return out;
    };
    for (group, v) in curves(l, dim, "receiver_drop_pct") {
        let Some(&(n, pct)) = v.iter().find(|(_, p)| *p > 1.0) else {
            continue;
        };
        let before = v.iter().take_while(|(x, _)| *x < n).last();
        out.push(KeyPoint {
            rule: "udp_receiver_drops",
            text: format!(
                "Receiver drops start at {}{}: {pct:.1}% of the datagrams were dropped by the receiving sockets (their buffers were full){}.",
                plural(n, "flow", "flows"),
                suffix(&group),
                match before {
                    Some((b, bp)) => format!(", against {bp:.1}% with {}", plural(*b, "flow", "flows")),
                    None => String::new(),
                }
            ),
            advice: "The senders outrun the receivers: that is the receiving host's limit, not the network's. Raise --rcvbuf (net.core.rmem_max caps it), give the receiver more workers (--agent-workers) or pace the senders (--rate) to find the rate it sustains without drops.".into(),
        });
    }
    out
}

/// What batching bought: packets/s and CPU per packet with the largest
/// batch against the smallest, per group.
pub fn udp_batching(l: &Landscape) -> Vec<KeyPoint> {
    let mut out = Vec::new();
    let pps = curves(l, "batch", "packets_per_s");
    let cost = curves(l, "batch", "client_us_per_packet");
    for (group, v) in pps {
        let (Some(first), Some(last)) = (v.first(), v.last()) else {
            continue;
        };
        if v.len() < 2 || first.1 <= 0.0 {
            continue;
        }
        let c = cost
            .iter()
            .find(|(g, _)| *g == group)
            .and_then(|(_, c)| Some((c.first()?.1, c.last()?.1)));
        out.push(KeyPoint {
            rule: "udp_batching",
            text: format!(
                "Batches of {} datagrams per system call give {:.2}x the packets/s of batches of {}{} ({} vs {}){}.",
                last.0,
                last.1 / first.1,
                first.0,
                suffix(&group),
                crate::units::fmt_rate(last.1),
                crate::units::fmt_rate(first.1),
                match c {
                    Some((a, b)) if a > 0.0 => format!(
                        ", at {:.2} instead of {:.2} µs of sender CPU per datagram",
                        b, a
                    ),
                    _ => String::new(),
                }
            ),
            advice: "sendmmsg/recvmmsg amortize a system call over the batch (--batch); the kernel's per-datagram work stays, so the gain is largest where the calls dominated.".into(),
        });
    }
    out
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
    // memcache: operations, not bytes, and its own rule (kv_saturation).
    if all_kv(l) {
        return out;
    }
    let (metric, what): (&str, fn(f64) -> String) = if all_udp(l) {
        ("packets_per_s", crate::units::fmt_rate)
    } else {
        ("throughput_bps", fmt_bps)
    };
    for (group, measured) in curves(l, "flows", metric) {
        if measured.len() < 3 {
            continue;
        }
        let (peak_n, peak) = peak(&measured);
        let (last_n, last) = *measured.last().expect("3 or more");
        if last_n > peak_n && last < 0.9 * peak {
            out.push(KeyPoint {
                rule: "scaling_peak",
                text: format!(
                    "{} peaks at {}{} ({}); {} give {:.0}% less ({}).",
                    if all_udp(l) {
                        "The packet rate"
                    } else {
                        "Throughput"
                    },
                    plural(peak_n, "flow", "flows"),
                    suffix(&group),
                    what(peak),
                    plural(last_n, "flow", "flows"),
                    100.0 * (1.0 - last / peak),
                    what(last)
                ),
                advice: "Past the peak, flows compete for the same cores and caches; use about as many busy flows as cores, or spread them over more hosts.".into(),
            });
        }
    }
    out
}

/// Every point is a memcache test.
fn all_kv(l: &Landscape) -> bool {
    !l.rows.is_empty()
        && l.rows
            .iter()
            .all(|r| r.point.spec.workload == Workload::Memcache)
}

/// memcache: where more connections stop buying operations (the server
/// saturates), per group, and what the extra connections cost in latency.
pub fn kv_saturation(l: &Landscape) -> Vec<KeyPoint> {
    let mut out = Vec::new();
    if !all_kv(l) {
        return out;
    }
    let p99 = curves(l, "flows", "get_p99_us");
    for (group, v) in curves(l, "flows", "ops_per_s") {
        if v.len() < 3 {
            continue;
        }
        // The first step where doubling (or more) the connections adds
        // less than 10% of operations.
        let Some(i) =
            (1..v.len()).find(|&i| v[i].0 >= 2.0 * v[i - 1].0 && v[i].1 < 1.1 * v[i - 1].1)
        else {
            continue;
        };
        let (n0, r0) = v[i - 1];
        let (last_n, last) = *v.last().expect("3 or more");
        let lat = p99.iter().find(|(g, _)| *g == group).and_then(|(_, c)| {
            let a = c.iter().find(|p| p.0 == n0)?.1;
            let b = c.iter().find(|p| p.0 == last_n)?.1;
            Some((a, b))
        });
        out.push(KeyPoint {
            rule: "kv_saturation",
            text: format!(
                "memcached saturates at {}{}: {} operations; {} give {:+.0}% ({}){}.",
                plural(n0, "connection", "connections"),
                suffix(&group),
                crate::units::fmt_rate(r0),
                plural(last_n, "connection", "connections"),
                100.0 * (last / r0 - 1.0),
                crate::units::fmt_rate(last),
                match lat {
                    Some((a, b)) if b > a => format!(
                        " while the get p99 grows from {} to {}",
                        fmt_us(a),
                        fmt_us(b)
                    ),
                    _ => String::new(),
                }
            ),
            advice: "Past this point requests queue in memcached's worker threads: raise its threads (--service 'memcached -t N'), or compare its CPU per operation with the client's to see which end is the limit.".into(),
        });
    }
    out
}

/// memcache: the server's CPU per operation and the hit ratio, per group at
/// the most connections measured; a hit ratio below 99% is named (the key
/// space does not fit memcached's memory, or sets fail).
pub fn kv_cost(l: &Landscape) -> Vec<KeyPoint> {
    let mut out = Vec::new();
    if !all_kv(l) {
        return out;
    }
    let hits = curves(l, "flows", "hit_ratio_pct");
    let client = curves(l, "flows", "client_us_per_op");
    let mut parts = Vec::new();
    let mut at = 0.0;
    for (group, v) in curves(l, "flows", "server_us_per_op") {
        let Some(&(n, us)) = v.last() else { continue };
        at = n;
        let c = client
            .iter()
            .find(|(g, _)| *g == group)
            .and_then(|(_, c)| c.iter().find(|p| p.0 == n).map(|p| p.1));
        parts.push(format!(
            "{us:.2} µs{}{}",
            c.map(|c| format!(" (client {c:.2})")).unwrap_or_default(),
            if group.is_empty() {
                String::new()
            } else {
                format!(" with {group}")
            }
        ));
    }
    if !parts.is_empty() {
        out.push(KeyPoint {
            rule: "kv_cost",
            text: format!(
                "memcached's CPU per operation at {}: {}.",
                plural(at, "connection", "connections"),
                parts.join(", ")
            ),
            advice: "CPU per operation is the server's cost that scales out: a core's 1,000,000 µs divided by it is the operations/s one memcached thread can serve; large values cost more in copies and syscalls.".into(),
        });
    }
    for (group, v) in hits {
        if let Some(&(n, h)) = v.iter().find(|p| p.1 < 99.0) {
            out.push(KeyPoint {
                rule: "kv_hit_ratio",
                text: format!(
                    "The hit ratio is {h:.1}% at {}{}: gets miss keys the prefill had set.",
                    plural(n, "connection", "connections"),
                    suffix(&group)
                ),
                advice: "Evictions: memcached's memory (-m) is smaller than keys x value size; raise -m or lower --keys so that hits measure a cache that holds its data.".into(),
            });
        }
    }
    out
}

/// TLS with and without crypto hardware (`crypto_hw` = true / false, the
/// rest of the point the same): the CPU the hardware saves on each end, per
/// KB for bulk transfer and per transaction for connections.
pub fn crypto_hw_saving(l: &Landscape) -> Vec<KeyPoint> {
    let mut out = Vec::new();
    for (key, on, off) in l.pairs("crypto_hw", "true", "false") {
        let (per, unit) = if on.mean("client_us_per_kb").is_some() {
            ("kb", "per KB")
        } else {
            ("tx", "per transaction")
        };
        let mut parts = Vec::new();
        for side in ["client", "agent"] {
            let k = format!("{side}_us_per_{per}");
            if let (Some(a), Some(b)) = (on.mean(&k), off.mean(&k)) {
                if b > 0.0 {
                    parts.push(format!(
                        "the {side} {:.0}% ({a:.3} instead of {b:.3} µs {unit}, {:.1}x)",
                        100.0 * (1.0 - a / b),
                        b / a.max(1e-12)
                    ));
                }
            }
        }
        if parts.is_empty() {
            continue;
        }
        out.push(KeyPoint {
            rule: "crypto_hw_saving",
            text: format!(
                "Crypto hardware saves {} at {key}.",
                parts.join(" and ")
            ),
            advice: "Check that every host's TLS library uses the CPU's crypto extensions (the crypto line of the Configuration Summary; `linerate crypto`): without them, TLS costs this much more CPU.".into(),
        });
    }
    out
}

type EnvPair = (String, f64, f64, Option<f64>, Option<f64>);

/// Several environments (`report A B --label ...`): how each compares with
/// the first on the headline metric, at the point where they differ most
/// and as the median over the points both measured, with the CPU cost
/// beside it.
pub fn environments(l: &Landscape) -> Vec<KeyPoint> {
    use crate::report::analysis::environments::ENV;
    let mut out = Vec::new();
    let mut envs: Vec<&str> = Vec::new();
    for r in &l.rows {
        if let Some(e) = r.point.param(ENV) {
            if !envs.contains(&e) {
                envs.push(e);
            }
        }
    }
    if envs.len() < 2 {
        return out;
    }
    let (metric, cost, unit_word) = if l.rows.iter().any(|r| r.mean("ops_per_s").is_some()) {
        ("ops_per_s", "server_us_per_op", "CPU per operation")
    } else if l.rows.iter().any(|r| r.mean("packets_per_s").is_some()) {
        ("packets_per_s", "agent_us_per_packet", "CPU per packet")
    } else if l.rows.iter().any(|r| {
        r.results
            .iter()
            .any(|x| x.summary.main_metric == Some(crate::model::spec::MainMetric::TransactionRate))
    }) {
        (
            "transactions_per_s",
            "client_us_per_tx",
            "client CPU per transaction",
        )
    } else {
        ("throughput_bps", "client_us_per_kb", "client CPU per KB")
    };
    let m = crate::report::analysis::metrics::find(metric).expect("a metric");
    let base = envs[0];
    for other in &envs[1..] {
        // (point, first's mean, other's mean, cost ratio, CI of the difference).
        let mut pairs: Vec<EnvPair> = Vec::new();
        for (key, a, b) in l.pairs(ENV, base, other) {
            let (Some(ea), Some(eb)) = (a.value(metric), b.value(metric)) else {
                continue;
            };
            if ea.mean <= 0.0 {
                continue;
            }
            let c = match (a.mean(cost), b.mean(cost)) {
                (Some(ca), Some(cb)) if ca > 0.0 => Some(cb / ca),
                _ => None,
            };
            // The 95% CI of the difference, as a share of the first's mean.
            let hw =
                crate::report::analysis::compare::welch(ea, eb, 95.0).map(|(_, h)| h / ea.mean);
            pairs.push((key, ea.mean, eb.mean, c, hw));
        }
        if pairs.is_empty() {
            continue;
        }
        let mut ratios: Vec<f64> = pairs.iter().map(|p| p.2 / p.1).collect();
        ratios.sort_by(|a, b| a.total_cmp(b));
        let median = ratios[ratios.len() / 2];
        let (key, va, vb, c, hw) = pairs
            .iter()
            .max_by(|x, y| (x.2 / x.1 - 1.0).abs().total_cmp(&(y.2 / y.1 - 1.0).abs()))
            .expect("non-empty")
            .clone();
        let change = 100.0 * (vb / va - 1.0);
        let at = if key.is_empty() {
            String::new()
        } else {
            format!(" at {key}")
        };
        let noise = match hw {
            Some(h) if change.abs() <= 100.0 * h => {
                format!(
                    " — within noise: the 95% confidence interval of the difference is ±{:.0}%",
                    100.0 * h
                )
            }
            Some(_) => String::new(),
            None => " — one sample each, no confidence interval (use --repeat)".into(),
        };
        out.push(KeyPoint {
            rule: "environments",
            text: format!(
                "{other} is {:.0}% {} than {base}{at} ({} vs {}){}{noise}; over the {} points both measured the median ratio is {median:.2}x.",
                change.abs(),
                if change >= 0.0 { "faster" } else { "slower" },
                m.fmt(vb),
                m.fmt(va),
                match c {
                    Some(c) => format!(
                        ", with {:.0}% {} {unit_word}",
                        (100.0 * (1.0 - c)).abs(),
                        if c <= 1.0 { "less" } else { "more" }
                    ),
                    None => String::new(),
                },
                pairs.len()
            ),
            advice: "The Configuration Summary lists the settings that differ between the environments first: those are the candidates for the difference.".into(),
        });
    }
    out
}

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
                r.point.spec.workers
            } else {
                r.point.spec.agent_workers
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
    // A pair where TLS came out clearly cheaper or faster contradicts what
    // encryption is (more work per byte): it is reported as such, with
    // what may have distorted it, and left out of the cost figures.
    let (odd, pairs): (Vec<_>, Vec<_>) = pairs.into_iter().partition(|(e, c)| {
        clearly(e, c, "client_us_per_kb", |r| r < 1.0 / CONTRADICTION)
            || clearly(e, c, "throughput_bps", |r| r > CONTRADICTION)
    });
    for (e, c) in &odd {
        out.push(tls_contradiction(e, c, &key_of(e)));
    }
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

/// How far past equal TLS must come out (cheaper per KB, or faster) before
/// it contradicts what encryption costs: within 5% is measurement noise.
const CONTRADICTION: f64 = 1.05;

/// `test(a / b)` for metric `key` of rows `a` and `b`, only when the two
/// confidence intervals (if any) do not overlap: a difference inside the
/// noise contradicts nothing.
fn clearly(a: &Row, b: &Row, key: &str, test: impl Fn(f64) -> bool) -> bool {
    let (Some(x), Some(y)) = (a.value(key), b.value(key)) else {
        return false;
    };
    if y.mean <= 0.0 || !test(x.mean / y.mean) {
        return false;
    }
    match (x.half_width, y.half_width) {
        (Some(hx), Some(hy)) => (x.mean - y.mean).abs() > hx + hy,
        _ => true,
    }
}

/// The CPU each end's first worker ran on most, in a point's first
/// iteration.
fn main_cpus(r: &Row) -> Option<(usize, usize)> {
    let it = r.results.first()?.iterations.first()?;
    let top = |p: &[crate::model::sample::WorkerPlacement]| {
        p.first()?
            .seen
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|s| s.0)
    };
    Some((top(&it.placement.client)?, top(&it.placement.agent)?))
}

/// Highest steal (percent of the host) either end saw in a point's runs.
fn worst_steal(r: &Row) -> f64 {
    r.results
        .iter()
        .flat_map(|res| res.iterations.iter())
        .flat_map(|it| [it.cpu.client.as_ref(), it.cpu.agent.as_ref()])
        .flatten()
        .map(|w| w.steal_pct)
        .fold(0.0, f64::max)
}

/// TLS measured cheaper or faster than clear at one point: say that it
/// cannot be, and name what in the results may explain it.
fn tls_contradiction(enc: &Row, clear: &Row, at: &str) -> KeyPoint {
    let ratio = |k: &str| Some(enc.mean(k)? / clear.mean(k).filter(|v| *v > 0.0)?);
    let mut seen = Vec::new();
    if let Some(r) = ratio("client_us_per_kb").filter(|r| *r < 1.0) {
        seen.push(format!("{r:.2}x the client's CPU per KB"));
    }
    if let Some(r) = ratio("throughput_bps").filter(|r| *r > 1.0) {
        seen.push(format!("{r:.2}x the throughput"));
    }
    let mut causes = Vec::new();
    if let (Some(a), Some(b)) = (main_cpus(enc), main_cpus(clear)) {
        let shared = |(c, g): (usize, usize)| c == g;
        if shared(a) != shared(b) {
            let how = |x: (usize, usize)| {
                if shared(x) {
                    format!("shared CPU {}", x.0)
                } else {
                    format!("ran on CPUs {} and {}", x.0, x.1)
                }
            };
            causes.push(format!(
                "placement: clear's sender and receiver {}, TLS's {}",
                how(b),
                how(a)
            ));
        }
    }
    let steal = worst_steal(enc).max(worst_steal(clear));
    if steal >= 2.0 {
        causes.push(format!(
            "the hypervisor took up to {steal:.0}% of the host (steal)"
        ));
    }
    let runs = enc.results.len().min(clear.results.len());
    if runs <= 1 {
        causes.push(
            "each side ran once, minutes apart: absolute figures on a shared host drift 25-40% within half an hour"
                .into(),
        );
    }
    if causes.is_empty() {
        causes.push(
            "the receivers woke differently: TLS hands over whole 16 KiB records, while a clear receiver reads whatever has arrived and may wake more often per byte"
                .into(),
        );
    }
    KeyPoint {
        rule: "contradiction",
        text: format!(
            "At {}, TLS measured {} of clear. Encryption only adds work, so this contradicts itself: one of the two measurements is off. Likely cause{}: {}.",
            if at.is_empty() { "the test" } else { at },
            if seen.is_empty() { "better than clear".to_string() } else { seen.join(" and ") },
            if causes.len() == 1 { "" } else { "s" },
            causes.join("; ")
        ),
        advice: "Run both points interleaved and repeated (`--repeat 3 --shuffle`) with both ends pinned (`--cpus`, `--agent-cpus`) before reading a TLS cost from them.".into(),
    }
}

/// Firewall rules on either end: every packet walks them (seed 003 found
/// loaded iptables rules serializing its traffic).
pub fn firewall(l: &Landscape) -> Vec<KeyPoint> {
    let Some(r) = l.rows.iter().find_map(|r| r.results.first()) else {
        return vec![];
    };
    let (c, a) = (&r.environment.client, &r.environment.agent);
    let one_host = c.hostname == a.hostname && r.agent.local;
    let mut ends: Vec<(&str, &crate::model::host::Firewall)> = Vec::new();
    for (side, h) in [("client", c), ("agent", a)] {
        if let Some(f) = h.firewall.as_ref().filter(|f| f.rules() > 0) {
            if !(one_host && side == "agent" && !ends.is_empty()) {
                ends.push((if one_host { "host" } else { side }, f));
            }
        }
    }
    ends.into_iter()
        .map(|(side, f)| KeyPoint {
            rule: "firewall",
            text: format!(
                "The {side} has firewall rules loaded: {}. Every packet of these tests walked them{}, so the figures include their cost.",
                f.describe(),
                if f.conntrack.is_some() { " and was looked up in the connection tracking table" } else { "" }
            ),
            advice: "To see what they cost, repeat a point with the rules unloaded (or in a lab, whose namespaces have none); a long chain or a rule matched late can serialize traffic on one core (seed 003), where an early ACCEPT for established flows or an nftables set avoids it.".into(),
        })
        .collect()
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
    if let Some(lab) = &r.lab {
        return vec![KeyPoint {
            rule: "shared_host",
            text: format!(
                "Both ends ran on one host ({}, {} CPUs) in lab {}'s namespaces: the network is the emulated link ({}, applied by {}), and each end's CPU competes with the other's and with the emulator's.",
                if c.hostname.is_empty() { "this host" } else { &c.hostname },
                c.cpus,
                lab.name,
                lab.link,
                lab.backend
            ),
            advice: "Delay, rate and loss are emulated faithfully (see each point's calibration); CPU costs are one host's. For a real WAN, run `linerate serve` on the far host and use --agent.".into(),
        }];
    }
    vec![KeyPoint {
        rule: "shared_host",
        text: format!(
            "Client and agent ran on the same host ({}, {} CPUs): each end's CPU competes with the other's, and the figures describe the host's network stack over loopback, not a network.",
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
        let key = match crate::workload::main_metric(&r.point.spec) {
            crate::model::spec::MainMetric::Throughput => "throughput_bps",
            crate::model::spec::MainMetric::TransactionRate => "transactions_per_s",
            crate::model::spec::MainMetric::PacketRate => "packets_per_s",
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
        .filter(|r| r.results.iter().any(|x| !x.summary.status.is_ok()))
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

/// How far a measurement may be from a bound or the model and still be
/// said to follow it (the write-up's "within 15%").
pub const MODEL_TOLERANCE: f64 = 0.15;

/// A row with its window/RTT model and measured throughput (bits/s).
type Modelled<'a> = (&'a Row, PointModel, f64);

/// Rows with a window/RTT model and a measured throughput, when the study
/// asks for the model.
fn modelled(l: &Landscape) -> Vec<Modelled<'_>> {
    if !l.window_rtt {
        return vec![];
    }
    l.rows
        .iter()
        .filter_map(|r| {
            let measured = r.mean("throughput_bps").filter(|v| *v > 0.0)?;
            Some((r, r.model()?, measured))
        })
        .collect()
}

/// "50 ms", "0.5 ms".
fn fmt_ms(s: f64) -> String {
    let ms = s * 1e3;
    if ms >= 10.0 || ms == ms.round() {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

/// A size that need not be a whole number of KiB or MiB.
fn fmt_window(b: f64) -> String {
    fmt_bytes(b.max(0.0).round() as u64)
}

/// "84" or "73-84": the range of some fractions, in percent.
fn pct_range(v: &[f64]) -> String {
    let lo = (100.0 * v.iter().copied().fold(f64::INFINITY, f64::min)).round();
    let hi = (100.0 * v.iter().copied().fold(f64::NEG_INFINITY, f64::max)).round();
    if lo == hi {
        format!("{lo}")
    } else {
        format!("{lo}-{hi}")
    }
}

/// Up to four names, then "...".
fn some(names: &[String]) -> String {
    let mut s = names.iter().take(4).cloned().collect::<Vec<_>>().join("; ");
    if names.len() > 4 {
        s.push_str("; ...");
    }
    s
}

/// Which points are window-bound (throughput within 15% of W/RTT, the
/// window the binding limit), which rate-bound (within 15% of the path's
/// goodput C), and where the two meet: W = C x RTT, the bandwidth-delay
/// product, against the largest window tested.
pub fn window_or_rate_bound(l: &Landscape) -> Vec<KeyPoint> {
    // scp's time holds its login and SSH's own window: the scp rules
    // explain those points; these are linerate's own transfers.
    let rows: Vec<Modelled> = modelled(l).into_iter().filter(|x| !x.1.scp).collect();
    if rows.is_empty() {
        return vec![];
    }
    let near = |measured: f64, bound: f64| (measured / bound - 1.0).abs() <= MODEL_TOLERANCE;
    let (mut window, mut rate) = (Vec::new(), Vec::new());
    // Neither bound: as the model expects (slow start), or off the model.
    let (mut short, mut off) = (Vec::new(), Vec::new());
    for (r, m, measured) in &rows {
        let t = &m.transfer;
        let by_window = (t.rtt_s > 0.0).then(|| t.window as f64 * 8.0 / t.rtt_s);
        let window_binds = match (by_window, t.goodput_bps) {
            (Some(w), Some(c)) => w < c,
            (Some(_), None) => true,
            _ => false,
        };
        match (window_binds, by_window, t.goodput_bps) {
            (true, Some(w), _) if near(*measured, w) => {
                window.push((r.point.label(), *measured, w));
            }
            (false, _, Some(c)) if near(*measured, c) => rate.push(r.point.label()),
            _ => {
                let of_bound = measured / m.prediction.bound_bps;
                let expected = m.prediction.throughput_bps / m.prediction.bound_bps;
                if expected < 1.0 - MODEL_TOLERANCE {
                    short.push((r.point.label(), of_bound));
                } else {
                    off.push((r.point.label(), of_bound));
                }
            }
        }
    }
    let n = rows.len();
    let mut parts = Vec::new();
    if let Some((label, measured, bound)) = window.first() {
        parts.push(format!(
            "{} of {n} points are window-bound, within 15% of W/RTT (e.g. {label}: {} of {})",
            window.len(),
            fmt_bps(*measured),
            fmt_bps(*bound)
        ));
    }
    let c = rows.iter().find_map(|(_, m, _)| m.transfer.goodput_bps);
    if !rate.is_empty() {
        parts.push(format!(
            "{} {} rate-bound, within 15% of the {} the path carries ({})",
            rate.len(),
            if parts.is_empty() {
                format!("of {n} points are")
            } else {
                "are".into()
            },
            c.map(fmt_bps).unwrap_or_default(),
            some(&rate)
        ));
    }
    for (other, why) in [
        (&short, "transfers of a few round trips, where slow start and the final round trip weigh, as the model expects"),
        (&off, "below what the model expects (see the model comparison)"),
    ] {
        if other.is_empty() {
            continue;
        }
        let names: Vec<String> = other.iter().map(|o| o.0.clone()).collect();
        let shares: Vec<f64> = other.iter().map(|o| o.1).collect();
        parts.push(format!(
            "{} {} neither, at {}% of min(C, W/RTT): {why} ({})",
            other.len(),
            if parts.is_empty() {
                format!("of {n} points follow")
            } else {
                "follow".into()
            },
            pct_range(&shares),
            some(&names)
        ));
    }
    let mut text = format!("{}.", parts.join("; "));
    let mut rtts: Vec<f64> = rows
        .iter()
        .map(|(_, m, _)| m.transfer.rtt_s)
        .filter(|r| *r > 0.0)
        .collect();
    rtts.sort_by(f64::total_cmp);
    rtts.dedup();
    let w_max = rows
        .iter()
        .map(|(_, m, _)| m.transfer.window)
        .max()
        .unwrap_or(0) as f64;
    let mut advice = "A window-bound transfer moves one window per round trip whatever the link: give the receiver a window of C x RTT by raising net.ipv4.tcp_rmem's max to about 1.4 x that (Linux advertises 0.63-0.77 of it), and the sender's net.ipv4.tcp_wmem max to match; where the window cannot grow, parallel streams each bring their own.".to_string();
    if let (Some(c), Some(&first), Some(&last)) = (c, rtts.first(), rtts.last()) {
        let at = |r: f64| {
            let bdp = wanmodel::bdp_bytes(c, r);
            (bdp, 100.0 * w_max / bdp)
        };
        let (b1, p1) = at(first);
        let (b2, p2) = at(last);
        let pct = |p: f64, r: f64| {
            format!(
                "{p:.0}% of it at {}{}",
                fmt_ms(r),
                if p >= 100.0 {
                    " (enough: the rate limits there)"
                } else {
                    ""
                }
            )
        };
        if rtts.len() == 1 {
            text.push_str(&format!(
                " Window and rate meet where W = C x RTT, the bandwidth-delay product: at {} a {} path needs a {} window; the largest window tested, {}, is {}.",
                fmt_ms(first),
                fmt_bps(c),
                fmt_window(b1),
                fmt_window(w_max),
                pct(p1, first)
            ));
        } else {
            text.push_str(&format!(
                " Window and rate meet where W = C x RTT, the bandwidth-delay product: a {} path needs a {} window at {} and {} at {}; the largest window tested, {}, is {} and {}.",
                fmt_bps(c),
                fmt_window(b1),
                fmt_ms(first),
                fmt_window(b2),
                fmt_ms(last),
                fmt_window(w_max),
                pct(p1, first),
                pct(p2, last)
            ));
        }
        advice = format!(
            "A window-bound transfer moves one window per round trip whatever the link: to fill this path at {} the receiver needs a {} window; raise net.ipv4.tcp_rmem's max to about 1.4 x that (Linux advertises 0.63-0.77 of it) and the sender's net.ipv4.tcp_wmem max to match; where the window cannot grow, parallel streams each bring their own.",
            fmt_ms(last),
            fmt_window(b2)
        );
    }
    vec![KeyPoint {
        rule: "window_or_rate_bound",
        text,
        advice,
    }]
}

/// A window N times larger that gives much less than N times the
/// throughput (15% short or more), explained by the model: the larger
/// window is past C x RTT, or the transfer is over in a few round trips,
/// so slow start and the last round trip take a large share of it.
pub fn window_not_proportional(l: &Landscape) -> Vec<KeyPoint> {
    let rows = modelled(l);
    let mut groups: Vec<(String, Vec<&Modelled>)> = Vec::new();
    // scp's login and SSH window have rules of their own.
    for x in rows.iter().filter(|x| x.1.transfer.rtt_s > 0.0 && !x.1.scp) {
        let key = x.0.point.label_except("rcvbuf");
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(x),
            None => groups.push((key, vec![x])),
        }
    }
    // (group, window ratio, measured ratio, model ratio, small, large)
    type Hit<'a> = (String, f64, f64, f64, &'a Modelled<'a>, &'a Modelled<'a>);
    let mut hits: Vec<Hit> = Vec::new();
    for (key, v) in groups {
        let (Some(lo), Some(hi)) = (
            v.iter().min_by_key(|x| x.1.transfer.window),
            v.iter().max_by_key(|x| x.1.transfer.window),
        ) else {
            continue;
        };
        let wr = hi.1.transfer.window as f64 / lo.1.transfer.window as f64;
        let measured = hi.2 / lo.2;
        let model = hi.1.prediction.throughput_bps / lo.1.prediction.throughput_bps;
        if wr >= 1.5 && measured < (1.0 - MODEL_TOLERANCE) * wr {
            hits.push((key, wr, measured, model, lo, hi));
        }
    }
    let Some(worst) = hits
        .iter()
        .min_by(|a, b| (a.2 / a.1).total_cmp(&(b.2 / b.1)))
    else {
        return vec![];
    };
    let (key, wr, measured, model, lo, hi) = worst;
    let p = &hi.1.prediction;
    let t = &hi.1.transfer;
    let reason = if p.limit == Limit::Rate {
        format!(
            "{} is past C x RTT ({}), so the path's {} caps it",
            fmt_window(t.window as f64),
            fmt_window(wanmodel::bdp_bytes(t.goodput_bps.unwrap_or(0.0), t.rtt_s)),
            fmt_bps(p.bound_bps)
        )
    } else {
        format!(
            "with {} the transfer is over in {:.0} round trips, {:.0} of them in slow start (cwnd doubling from 10 segments), so {:.0}% of its time goes to slow start and the final round trip",
            fmt_window(t.window as f64),
            p.rounds + 1.0,
            p.slow_start_rounds,
            100.0 * p.overhead_share()
        )
    };
    let model_says = if *measured < (1.0 - MODEL_TOLERANCE) * model {
        format!("the model expects {model:.1}x, so more than the model holds it back (see below)")
    } else {
        format!("the model expects {model:.1}x")
    };
    vec![KeyPoint {
        rule: "window_not_proportional",
        text: format!(
            "A window {wr:.0}x larger does not give {wr:.0}x the throughput{}: {} gives {measured:.1}x the throughput of {} ({} vs {}); {model_says}: {reason}.{}",
            if key.is_empty() {
                String::new()
            } else {
                format!(" at {key}")
            },
            fmt_window(t.window as f64),
            fmt_window(lo.1.transfer.window as f64),
            fmt_bps(hi.2),
            fmt_bps(lo.2),
            if hits.len() > 1 {
                format!(" The same holds at {} other settings.", hits.len() - 1)
            } else {
                String::new()
            }
        ),
        advice: "Past C x RTT a larger window buys nothing, and a transfer that lasts a few round trips is spent in slow start: fewer round trips (a reused connection, a larger initial window with `ip route ... initcwnd`, parallel streams) help it more than window does.".into(),
    }]
}

/// What in a result could explain a point far from the model.
fn mismatch_causes(r: &Row, m: &PointModel, ratio: f64) -> Vec<String> {
    let mut out = Vec::new();
    let emu = r
        .results
        .iter()
        .filter_map(|x| x.lab.as_ref()?.emulator.as_ref());
    let queue: u64 = emu
        .clone()
        .flat_map(|e| e.dirs.iter().map(|d| d.dropped_queue))
        .sum();
    let lost: u64 = emu
        .clone()
        .flat_map(|e| e.dirs.iter().map(|d| d.dropped_loss))
        .sum();
    if queue > 0 {
        out.push(format!("the emulator's queue dropped {queue} packets"));
    }
    if lost > 0 {
        out.push(format!("{lost} packets lost to the emulated loss"));
    }
    if let Some(c) = emu
        .filter_map(|e| e.cpu_pct)
        .fold(None, |a: Option<f64>, c| Some(a.map_or(c, |a| a.max(c))))
        .filter(|c| *c > 80.0)
    {
        out.push(format!("the emulator used {c:.0}% of a core"));
    }
    let flows = || {
        r.results.iter().flat_map(|x| {
            x.iterations.iter().flat_map(|it| {
                it.flows
                    .client
                    .iter()
                    .chain(it.flows.agent.iter())
                    .map(move |f| (it.duration_s, f))
            })
        })
    };
    let retrans: u64 = flows()
        .filter_map(|(_, f)| f.tcp_info.as_ref())
        .map(|t| u64::from(t.total_retrans))
        .sum();
    if retrans > 0 {
        out.push(format!("{retrans} retransmitted segments"));
    }
    let sndbuf = flows()
        .filter_map(|(d, f)| {
            let us = f.tcp_info.as_ref()?.sndbuf_limited_us? as f64;
            (d > 0.0).then(|| us / (d * 1e6))
        })
        .fold(0.0f64, f64::max);
    if sndbuf >= 0.1 {
        out.push(format!(
            "the sender's buffer limited it {:.0}% of the time",
            100.0 * sndbuf.min(1.0)
        ));
    }
    if m.scp && m.transfer.window > SSH_CHANNEL_WINDOW && ratio < 1.0 {
        out.push(format!(
            "SSH's {} channel window, below the {} TCP window",
            fmt_window(SSH_CHANNEL_WINDOW as f64),
            fmt_window(m.transfer.window as f64)
        ));
    }
    let rtt_ms = m.transfer.rtt_s * 1e3;
    if let Some(measured) = r.mean("rtt_measured_ms") {
        if (measured - rtt_ms).abs() > (0.1 * rtt_ms).max(1.0) {
            out.push(format!(
                "the measured RTT was {measured:.1} ms for {} asked",
                fmt_ms(m.transfer.rtt_s)
            ));
        }
    }
    if out.is_empty() {
        out.push(if ratio < 1.0 {
            "no drops, loss or retransmissions recorded: check the sender's buffer (net.ipv4.tcp_wmem max at least the window) and CPU".into()
        } else if m.source == WindowSource::Observed {
            "faster than the model: the window observed mid-transfer may understate the window over the whole transfer".into()
        } else {
            "faster than the model: the receiver's window was larger than rcvbuf for part of the transfer".into()
        });
    }
    out
}

/// Points more than 15% from the window/RTT model, each with what its
/// result says could explain it (queue drops, loss, retransmissions, a
/// sender buffer, SSH's channel window, an RTT other than asked).
pub fn model_mismatch(l: &Landscape) -> Vec<KeyPoint> {
    let rows = modelled(l);
    let off: Vec<String> = rows
        .iter()
        .filter_map(|(r, m, measured)| {
            let ratio = measured / m.prediction.throughput_bps;
            ((ratio - 1.0).abs() > MODEL_TOLERANCE).then(|| {
                format!(
                    "{} at {ratio:.2}x of the model ({})",
                    r.point.label(),
                    mismatch_causes(r, m, ratio).join(", ")
                )
            })
        })
        .collect();
    if off.is_empty() {
        return vec![];
    }
    vec![KeyPoint {
        rule: "model_mismatch",
        text: format!(
            "{} of {} points differ from the window/RTT model by more than 15%: {}.",
            off.len(),
            rows.len(),
            some(&off)
        ),
        advice: "Each result holds the evidence: its lab block (emulator queue drops, loss, the calibrated RTT) and each flow's TCP_INFO (retransmits, sndbuf_limited). A sender buffer smaller than the window caps like a small window (raise net.ipv4.tcp_wmem's max); a queue that overflows makes a window test a loss test (raise the lab's queue).".into(),
    }]
}

/// scp's SSH login as a share of its time (10% or more at some point):
/// each copy pays key exchange, authentication and channel setup, about
/// 18 round trips, before any data moves.
pub fn scp_login(l: &Landscape) -> Vec<KeyPoint> {
    let v: Vec<(&Row, f64, f64)> = l
        .rows
        .iter()
        .filter(|r| r.point.spec.workload == Workload::Scp)
        .filter_map(|r| {
            let (login, total) = (r.mean("login_s")?, r.mean("transfer_s")?);
            (total > 0.0 && login >= 0.0).then_some((r, login, total))
        })
        .collect();
    let Some(worst) = v.iter().max_by(|a, b| (a.1 / a.2).total_cmp(&(b.1 / b.2))) else {
        return vec![];
    };
    let (r, login, total) = *worst;
    let share = login / total;
    if share < 0.1 {
        return vec![];
    }
    let rtt = r
        .model()
        .map(|m| m.transfer.rtt_s)
        .or(r.point.spec.rtt_s)
        .filter(|x| *x > 0.0);
    let shares: Vec<f64> = v.iter().map(|x| x.1 / x.2).collect();
    vec![KeyPoint {
        rule: "scp_login",
        text: format!(
            "scp's SSH login takes {login:.2} s of its {total:.2} s at {} ({:.0}%{}){}.",
            r.point.label(),
            100.0 * share,
            rtt.map(|x| format!(", about {:.0} round trips", login / x))
                .unwrap_or_default(),
            if v.len() > 1 {
                format!(
                    "; over the {} scp points the login is {}% of the time",
                    v.len(),
                    pct_range(&shares)
                )
            } else {
                String::new()
            }
        ),
        advice: "Every scp pays a new SSH login (key exchange, authentication, channel setup) in round trips: reuse one connection for many copies (ssh -o ControlMaster=auto -o ControlPersist=60), or copy many files in one scp; compare copies net of the login (login_s).".into(),
    }]
}

/// scp held near 2 MiB per round trip by OpenSSH's channel window while
/// the TCP window would allow more: within 15% of (or below) the model
/// with a 2 MiB window and 15% or more below the model with the TCP one.
pub fn scp_channel_window(l: &Landscape) -> Vec<KeyPoint> {
    let hits: Vec<(String, PointModel, f64, wanmodel::Prediction)> = l
        .rows
        .iter()
        .filter(|r| r.point.spec.workload == Workload::Scp)
        .filter_map(|r| {
            let measured = r.mean("throughput_bps").filter(|v| *v > 0.0)?;
            let m = r.model().filter(|m| {
                m.scp && m.transfer.rtt_s > 0.0 && m.transfer.window > SSH_CHANNEL_WINDOW
            })?;
            let ssh = m.with_window(SSH_CHANNEL_WINDOW)?;
            let capped = measured <= (1.0 + MODEL_TOLERANCE) * ssh.throughput_bps
                && measured < (1.0 - MODEL_TOLERANCE) * m.prediction.throughput_bps;
            capped.then(|| (r.point.label(), m, measured, ssh))
        })
        .collect();
    let Some((label, m, measured, ssh)) = hits.iter().max_by(|a, b| {
        (a.1.prediction.throughput_bps / a.2).total_cmp(&(b.1.prediction.throughput_bps / b.2))
    }) else {
        return vec![];
    };
    vec![KeyPoint {
        rule: "scp_channel_window",
        text: format!(
            "scp is capped near {} per round trip by OpenSSH's channel window (sftp's 64 outstanding 32 KiB requests are the same {}), even with a larger TCP window: at {label} the {} TCP window would allow {}, scp got {}, and the model with a {} window gives {} ({} at most).{}",
            fmt_window(SSH_CHANNEL_WINDOW as f64),
            fmt_window(SSH_CHANNEL_WINDOW as f64),
            fmt_window(m.transfer.window as f64),
            fmt_bps(m.prediction.throughput_bps),
            fmt_bps(*measured),
            fmt_window(SSH_CHANNEL_WINDOW as f64),
            fmt_bps(ssh.throughput_bps),
            fmt_bps(ssh.bound_bps),
            if hits.len() > 1 {
                format!(" The same holds at {} other scp points.", hits.len() - 1)
            } else {
                String::new()
            }
        ),
        advice: "A TCP window past 2 MiB does not speed up stock OpenSSH on a long path; HPN-SSH (larger, dynamic channel windows) or several copies in parallel do.".into(),
    }]
}

/// Every rule, in the order the report lists them.
pub fn derive(l: &Landscape) -> Vec<KeyPoint> {
    let rules: &[fn(&Landscape) -> Vec<KeyPoint>] = &[
        missing,
        environments,
        streams_to_line_rate,
        scaling_peak,
        cpu_bound,
        host_saturated,
        service_demand_trend,
        transaction_cost,
        tls_cost,
        window_or_rate_bound,
        window_not_proportional,
        model_mismatch,
        scp_login,
        scp_channel_window,
        udp_receiver_drops,
        udp_batching,
        kv_saturation,
        kv_cost,
        crypto_hw_saving,
        tail_latency,
        noise,
        firewall,
        shared_host,
    ];
    rules.iter().flat_map(|r| r(l)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::stats::estimate;
    use crate::model::result::TestResult;
    use crate::model::spec::TestSpec;
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
            groups: Vec::new(),
            index: 0,
            id: "p".into(),
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            spec: TestSpec {
                flows,
                workers: threads,
                agent_workers: threads,
                ..Default::default()
            },
            confidence: Default::default(),
        };
        let mut values = BTreeMap::new();
        for (k, s) in metrics {
            values.insert(*k, estimate(s, 99.0));
        }
        let mut res = TestResult::default();
        res.summary.status = crate::model::result::Status::Ok;
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
            window_rtt: false,
            model_note: None,
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

    fn udp_row(flows: &str, batch: &str, pps: f64, drops: f64, cost: f64) -> Row {
        let mut r = row(
            &[("flows", flows), ("batch", batch)],
            &[
                ("packets_per_s", &[pps]),
                ("receiver_drop_pct", &[drops]),
                ("client_us_per_packet", &[cost]),
                ("throughput_bps", &[pps * 512.0]),
            ],
            2,
        );
        r.point.spec.workload = Workload::UdpStream;
        r
    }

    #[test]
    fn udp_drops_and_batching_speak_of_datagrams() {
        let l = land(
            vec![
                udp_row("1", "1", 600e3, 0.2, 1.5),
                udp_row("10", "1", 400e3, 50.0, 1.2),
                udp_row("1", "32", 750e3, 0.1, 1.3),
                udp_row("10", "32", 440e3, 60.0, 0.9),
            ],
            None,
        );
        let d = udp_receiver_drops(&l);
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(d[0].text.contains("start at 10 flows"), "{}", d[0].text);
        assert!(
            d[0].text.contains("against 0.2% with 1 flow"),
            "{}",
            d[0].text
        );
        let b = udp_batching(&l);
        assert_eq!(b.len(), 2, "{b:?}");
        assert!(b[0].text.contains("1.25x the packets/s"), "{}", b[0].text);
        assert!(b[0].text.contains("1.30 instead of 1.50"), "{}", b[0].text);
        // No drops over 1%: no drop point.
        let calm = land(
            vec![
                udp_row("1", "1", 1e5, 0.0, 1.0),
                udp_row("10", "1", 2e5, 0.5, 1.0),
            ],
            None,
        );
        assert!(udp_receiver_drops(&calm).is_empty());
        // Bytes-per-KB trends stay quiet for datagram studies.
        assert!(service_demand_trend(&l).is_empty());
    }

    fn kv_row(flows: &str, ops: f64, p99: f64, server: f64, hit: f64) -> Row {
        let mut r = row(
            &[("flows", flows), ("values", "1K")],
            &[
                ("ops_per_s", &[ops]),
                ("get_p99_us", &[p99]),
                ("server_us_per_op", &[server]),
                ("client_us_per_op", &[server / 2.0]),
                ("hit_ratio_pct", &[hit]),
                ("throughput_bps", &[ops * 8e3]),
                ("client_us_per_tx", &[1.0 + ops / 1e5]),
            ],
            2,
        );
        r.point.spec.workload = Workload::Memcache;
        r
    }

    #[test]
    fn crypto_hardware_saving_pairs_on_and_off() {
        let r = |hw: &str, client: f64, agent: f64| {
            row(
                &[("case", "stream"), ("crypto_hw", hw)],
                &[
                    ("client_us_per_kb", &[client]),
                    ("agent_us_per_kb", &[agent]),
                ],
                1,
            )
        };
        let l = land(vec![r("true", 0.4, 0.25), r("false", 4.0, 4.0)], None);
        let k = crypto_hw_saving(&l);
        assert_eq!(k.len(), 1, "{k:?}");
        assert!(
            k[0].text
                .contains("the client 90% (0.400 instead of 4.000 µs per KB, 10.0x)"),
            "{}",
            k[0].text
        );
        assert!(k[0].text.contains("at stream"), "{}", k[0].text);
        // Without an off point there is nothing to say.
        assert!(crypto_hw_saving(&land(vec![r("true", 0.4, 0.25)], None)).is_empty());
    }

    #[test]
    fn memcached_saturation_cost_and_hit_ratio() {
        let l = land(
            vec![
                kv_row("1", 50e3, 100.0, 8.0, 100.0),
                kv_row("4", 200e3, 120.0, 3.0, 100.0),
                kv_row("16", 210e3, 400.0, 2.5, 100.0),
                kv_row("64", 190e3, 1500.0, 2.6, 100.0),
            ],
            None,
        );
        let s = kv_saturation(&l);
        assert_eq!(s.len(), 1, "{s:?}");
        assert!(
            s[0].text.contains("saturates at 4 connections"),
            "{}",
            s[0].text
        );
        assert!(s[0].text.contains("give -5%"), "{}", s[0].text);
        assert!(
            s[0].text.contains("from 120.0 µs to 1.50 ms"),
            "{}",
            s[0].text
        );
        let c = kv_cost(&l);
        assert_eq!(c.len(), 1, "{c:?}");
        assert!(
            c[0].text
                .contains("at 64 connections: 2.60 µs (client 1.30)"),
            "{}",
            c[0].text
        );
        // Byte-stream and per-transaction rules stay quiet for memcache.
        assert!(scaling_peak(&l).is_empty());
        assert!(transaction_cost(&l).is_empty());
        // Still growing at every step: no saturation; evictions named.
        let grow = land(
            vec![
                kv_row("1", 50e3, 100.0, 8.0, 100.0),
                kv_row("4", 150e3, 110.0, 3.0, 98.0),
                kv_row("16", 400e3, 130.0, 2.5, 97.0),
            ],
            None,
        );
        assert!(kv_saturation(&grow).is_empty());
        let h: Vec<_> = kv_cost(&grow)
            .into_iter()
            .filter(|k| k.rule == "kv_hit_ratio")
            .collect();
        assert_eq!(h.len(), 1);
        assert!(
            h[0].text.contains("98.0% at 4 connections"),
            "{}",
            h[0].text
        );
        assert!(kv_cost(&l).iter().all(|k| k.rule != "kv_hit_ratio"));
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
    fn loaded_firewall_rules_are_a_key_point() {
        let mut r = row(&[("flows", "1")], &[("throughput_bps", &[1e9])], 1);
        let mut res = TestResult::default();
        res.environment.client.hostname = "a".into();
        res.environment.agent.hostname = "b".into();
        res.environment.agent.firewall = Some(crate::model::host::Firewall {
            iptables: [("iptables filter".to_string(), 12)].into(),
            nft_rules: Some(3),
            conntrack: Some(40),
            unknown: vec![],
        });
        res.environment.client.firewall = Some(Default::default());
        r.results = vec![res.clone()];
        let k = firewall(&land(vec![r], None));
        assert_eq!(k.len(), 1, "{k:?}");
        assert!(k[0].text.starts_with("The agent has firewall rules loaded: 15 rules loaded (iptables filter 12, nftables 3); conntrack on, tracking 40 connections."), "{}", k[0].text);
        // No rules anywhere: nothing to say.
        res.environment.agent.firewall = Some(Default::default());
        let mut r = row(&[("flows", "1")], &[("throughput_bps", &[1e9])], 1);
        r.results = vec![res];
        assert!(firewall(&land(vec![r], None)).is_empty());
    }

    #[test]
    fn tls_cheaper_than_clear_is_called_a_contradiction() {
        let mk = |tls: &str, flows: &str, kb: f64, t: f64| {
            row(
                &[("tls", tls), ("flows", flows)],
                &[("client_us_per_kb", &[kb]), ("throughput_bps", &[t])],
                1,
            )
        };
        let l = land(
            vec![
                mk("false", "1", 0.30, 20e9),
                mk("true", "1", 0.25, 22e9),
                mk("false", "4", 0.20, 40e9),
                mk("true", "4", 0.44, 30e9),
            ],
            None,
        );
        let k = tls_cost(&l);
        let odd: Vec<&KeyPoint> = k.iter().filter(|p| p.rule == "contradiction").collect();
        assert_eq!(odd.len(), 1, "{k:?}");
        let t = &odd[0].text;
        assert!(t.starts_with("At flows=1, TLS measured 0.83x the client's CPU per KB and 1.10x the throughput of clear."), "{t}");
        assert!(t.contains("each side ran once"), "{t}");
        // The plausible pair alone makes the cost figure.
        let cost: Vec<&KeyPoint> = k.iter().filter(|p| p.rule == "tls_cost").collect();
        assert_eq!(cost.len(), 1, "{k:?}");
        assert!(
            cost[0]
                .text
                .starts_with("TLS costs 2.2x the client's CPU per KB of clear over 1 point"),
            "{}",
            cost[0].text
        );

        // Within the noise (intervals overlap) it is no contradiction.
        let noisy = |tls: &str, kb: &[f64]| row(&[("tls", tls)], &[("client_us_per_kb", kb)], 1);
        let l = land(
            vec![
                noisy("false", &[0.30, 0.20, 0.40]),
                noisy("true", &[0.27, 0.20, 0.34]),
            ],
            None,
        );
        assert!(tls_cost(&l).iter().all(|p| p.rule != "contradiction"));
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

    use crate::report::analysis::wanmodel::testing::{model_bps, wan_result, MIB};

    /// 1 Gbit/s at MTU 1500: the TCP goodput the lab's rate allows.
    const C: f64 = 1e9 * 1448.0 / 1538.0;

    fn wan_row(res: TestResult, params: &[(&str, String)]) -> Row {
        let point = Point {
            groups: Vec::new(),
            index: 0,
            id: "p".into(),
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            spec: res.spec.clone(),
            confidence: Default::default(),
        };
        crate::report::analysis::landscape::row(point, vec![res])
    }

    fn wan(rtt_ms: u32, rcvbuf: &str, tput: f64) -> Row {
        wan_row(
            wan_result(rtt_ms, rcvbuf, tput),
            &[("rtt", format!("{rtt_ms}ms")), ("rcvbuf", rcvbuf.into())],
        )
    }

    fn wan_land(rows: Vec<Row>) -> Landscape {
        Landscape {
            rows,
            dims: vec!["rtt".into(), "rcvbuf".into()],
            line_rate_bps: None,
            line_rate_note: None,
            line_rate_measured: false,
            threshold: 0.9,
            window_rtt: true,
            model_note: None,
        }
    }

    #[test]
    fn window_bound_within_15_percent_of_w_over_rtt() {
        let w_over_r = 65_536.0 * 8.0 / 0.1;
        let k = window_or_rate_bound(&wan_land(vec![wan(100, "64K", 0.86 * w_over_r)]));
        assert_eq!(k.len(), 1, "{k:?}");
        assert!(
            k[0].text
                .starts_with("1 of 1 points are window-bound, within 15% of W/RTT (e.g. rtt=100ms rcvbuf=64K: 4.51 Mbit/s of 5.24 Mbit/s)"),
            "{}",
            k[0].text
        );
        assert!(
            k[0].text.contains("at 100 ms a 941.48 Mbit/s path needs a 11.2 MiB window; the largest window tested, 64 KiB, is 1% of it at 100 ms"),
            "{}",
            k[0].text
        );
        assert!(k[0].advice.contains("11.2 MiB"), "{}", k[0].advice);
        let k = window_or_rate_bound(&wan_land(vec![wan(100, "64K", 0.84 * w_over_r)]));
        assert!(
            k[0].text
                .starts_with("1 of 1 points follow neither, at 84% of min(C, W/RTT): below what the model expects"),
            "{}",
            k[0].text
        );
        // The write-up's numbers: 2 MiB is 18% of the 100 ms BDP; a window
        // above the BDP at 0 ms is rate-bound.
        let l = wan_land(vec![
            wan(0, "2M", 0.9 * C),
            wan(50, "2M", 0.8 * model_bps(50, "2M")),
            wan(100, "2M", 0.99 * 2.0 * 8.0 * MIB as f64 / 0.1),
        ]);
        let t = &window_or_rate_bound(&l)[0].text;
        assert!(t.starts_with("1 of 3 points are window-bound"), "{t}");
        assert!(
            t.contains("1 are rate-bound, within 15% of the 941.48 Mbit/s the path carries (rtt=0ms rcvbuf=2M)"),
            "{t}"
        );
        assert!(
            t.contains("1 follow neither, at 61% of min(C, W/RTT): transfers of a few round trips, where slow start and the final round trip weigh, as the model expects (rtt=50ms rcvbuf=2M)"),
            "{t}"
        );
        assert!(
            t.contains("needs a 5.61 MiB window at 50 ms and 11.2 MiB at 100 ms; the largest window tested, 2 MiB, is 36% of it at 50 ms and 18% of it at 100 ms"),
            "{t}"
        );
        // Without [model] window_rtt, nothing.
        let mut l = wan_land(vec![wan(100, "64K", w_over_r)]);
        l.window_rtt = false;
        assert!(window_or_rate_bound(&l).is_empty());
    }

    #[test]
    fn a_larger_window_is_not_proportionally_faster() {
        let lo = model_bps(100, "64K");
        let mk = |f: f64| wan_land(vec![wan(100, "64K", lo), wan(100, "640K", f * 10.0 * lo)]);
        let k = window_not_proportional(&mk(0.84));
        assert_eq!(k.len(), 1, "{k:?}");
        assert!(
            k[0].text.starts_with(
                "A window 10x larger does not give 10x the throughput at rtt=100ms: 640 KiB gives 8.4x the throughput of 64 KiB"
            ),
            "{}",
            k[0].text
        );
        assert!(window_not_proportional(&mk(0.86)).is_empty());
        // 2 MiB vs 48 KiB at 50 ms, both as the model says: slow start is
        // most of the 2 MiB transfer.
        let l = wan_land(vec![
            wan(50, "48K", model_bps(50, "48K")),
            wan(50, "2M", model_bps(50, "2M")),
        ]);
        let k = window_not_proportional(&l);
        assert_eq!(k.len(), 1, "{k:?}");
        assert!(
            k[0].text.contains("the model expects 32.8x: with 2 MiB the transfer is over in 31 round trips, 8 of them in slow start"),
            "{}",
            k[0].text
        );
        // Past the BDP the rate caps it.
        let l = wan_land(vec![
            wan(50, "1M", model_bps(50, "1M")),
            wan(50, "16M", model_bps(50, "16M")),
        ]);
        let k = window_not_proportional(&l);
        assert!(
            k[0].text
                .contains("16 MiB is past C x RTT (5.61 MiB), so the path's 941.48 Mbit/s caps it"),
            "{}",
            k[0].text
        );
    }

    #[test]
    fn mismatch_names_points_more_than_15_percent_off_and_why() {
        let p = model_bps(100, "256K");
        let k = model_mismatch(&wan_land(vec![wan(100, "256K", 0.84 * p)]));
        assert_eq!(k.len(), 1, "{k:?}");
        assert!(
            k[0].text.starts_with("1 of 1 points differ from the window/RTT model by more than 15%: rtt=100ms rcvbuf=256K at 0.84x of the model (no drops, loss or retransmissions recorded"),
            "{}",
            k[0].text
        );
        assert!(model_mismatch(&wan_land(vec![wan(100, "256K", 0.86 * p)])).is_empty());
        assert!(model_mismatch(&wan_land(vec![wan(100, "256K", 1.14 * p)])).is_empty());
        // The emulator's counters are the evidence.
        let mut res = wan_result(100, "256K", 0.5 * p);
        let mut emu = crate::model::lab::EmulatorDelta::default();
        emu.dirs[0].dropped_queue = 12;
        res.lab.as_mut().unwrap().emulator = Some(emu);
        res.lab.as_mut().unwrap().calibration.rtt_rr_ms = 130.0;
        let row = wan_row(res, &[("rtt", "100ms".into()), ("rcvbuf", "256K".into())]);
        let k = model_mismatch(&wan_land(vec![row]));
        assert!(
            k[0].text.contains("at 0.50x of the model (the emulator's queue dropped 12 packets, the measured RTT was 130.0 ms for 100 ms asked)"),
            "{}",
            k[0].text
        );
    }

    /// An scp point: 48 MiB in `elapsed` s, `login` s of it the SSH login,
    /// with the TCP window the sender saw.
    fn scp(rtt_ms: u32, window: u64, login: f64, elapsed: f64) -> Row {
        let mut res = wan_result(rtt_ms, "64K", (48 * MIB * 8) as f64 / elapsed);
        res.spec.workload = Workload::Scp;
        res.spec.window = crate::model::spec::WindowMode::Buffer;
        res.spec.rcvbuf = None;
        res.exec = Some(crate::model::exec::ExecRecord {
            elapsed_s: elapsed,
            login_s: Some(login),
            observed_window: Some(crate::model::flow::ObservedWindow {
                median_bytes: window as u32,
                max_bytes: window as u32,
                samples: 100,
            }),
            ..Default::default()
        });
        wan_row(
            res,
            &[("case", "scp".into()), ("rtt", format!("{rtt_ms}ms"))],
        )
    }

    #[test]
    fn scp_login_share_from_ten_percent() {
        let k = scp_login(&wan_land(vec![
            scp(50, 6 * MIB, 0.9, 2.9),
            scp(100, 6 * MIB, 1.0, 5.0),
        ]));
        assert_eq!(k.len(), 1, "{k:?}");
        assert!(
            k[0].text.starts_with("scp's SSH login takes 0.90 s of its 2.90 s at scp rtt=50ms (31%, about 18 round trips); over the 2 scp points the login is 20-31%"),
            "{}",
            k[0].text
        );
        assert_eq!(
            scp_login(&wan_land(vec![scp(50, 6 * MIB, 0.30, 2.9)])).len(),
            1
        );
        assert!(scp_login(&wan_land(vec![scp(50, 6 * MIB, 0.28, 2.9)])).is_empty());
        // Linerate's own transfer has no login.
        assert!(scp_login(&wan_land(vec![wan(50, "64K", 1e6)])).is_empty());
        // The window/rate classification is for linerate's own transfers.
        assert!(window_or_rate_bound(&wan_land(vec![scp(50, 6 * MIB, 0.9, 2.9)])).is_empty());
    }

    #[test]
    fn scp_capped_by_the_ssh_channel_window() {
        let m = wanmodel::for_result(&scp(100, 6 * MIB, 1.8, 5.0).results[0]).unwrap();
        let ssh = m.with_window(SSH_CHANNEL_WINDOW).unwrap();
        let at = |bps: f64| (48 * MIB * 8) as f64 / bps;
        let k = scp_channel_window(&wan_land(vec![scp(
            100,
            6 * MIB,
            1.8,
            at(1.14 * ssh.throughput_bps),
        )]));
        assert_eq!(k.len(), 1, "{k:?}");
        assert!(
            k[0].text
                .starts_with("scp is capped near 2 MiB per round trip by OpenSSH's channel window"),
            "{}",
            k[0].text
        );
        assert!(
            k[0].text
                .contains("at scp rtt=100ms the 6 MiB TCP window would allow"),
            "{}",
            k[0].text
        );
        assert!(
            k[0].text.contains("(167.77 Mbit/s at most)"),
            "{}",
            k[0].text
        );
        // Above the 2 MiB model by more than 15%: something else.
        assert!(scp_channel_window(&wan_land(vec![scp(
            100,
            6 * MIB,
            1.8,
            at(1.16 * ssh.throughput_bps)
        )]))
        .is_empty());
        // As fast as the TCP window allows: not capped.
        assert!(scp_channel_window(&wan_land(vec![scp(
            100,
            6 * MIB,
            1.8,
            at(0.95 * m.prediction.throughput_bps)
        )]))
        .is_empty());
        // A TCP window under 2 MiB: the channel window is not the limit.
        assert!(
            scp_channel_window(&wan_land(vec![scp(100, MIB, 1.8, at(ssh.throughput_bps))]))
                .is_empty()
        );
    }
}
