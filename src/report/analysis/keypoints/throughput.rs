//! Throughput along the flow count: the stream count that reaches line
//! rate, and a peak past which more flows give less.

use super::shared::{all_kv, all_udp, curves, plural, suffix, KeyPoint};
use crate::report::analysis::landscape::Landscape;
use crate::units::fmt_bps;

/// The point with the largest value.
fn peak(v: &[(f64, f64)]) -> (f64, f64) {
    v.iter()
        .copied()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap_or_default()
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
