//! A mixed test's groups as text: one line per group with its own main
//! figure (and latency, loss or operations where it has them), below the
//! total the result's table shows. CPU is per end and shared, so it is
//! the total's alone.

use std::fmt::Write;

use crate::model::result::{GroupResult, TestResult};
use crate::model::spec::MainMetric;
use crate::units::{fmt_bps, fmt_rate, fmt_us};

/// The group's main figure as people read it.
fn main_figure(g: &GroupResult) -> String {
    let s = &g.summary;
    match s.main_metric {
        Some(MainMetric::TransactionRate) => format!(
            "{} ({})",
            fmt_rate(s.transactions_per_s),
            fmt_bps(s.throughput_bps)
        ),
        Some(MainMetric::PacketRate) => match &s.udp {
            Some(u) => format!(
                "{} pkt/s ({})",
                fmt_rate(u.packets_per_s).trim_end_matches("/s"),
                fmt_bps(s.throughput_bps)
            ),
            None => fmt_bps(s.throughput_bps),
        },
        _ => fmt_bps(s.throughput_bps),
    }
}

/// The rest of a group's line: latency, loss, operations.
fn extras(g: &GroupResult) -> String {
    let s = &g.summary;
    let mut parts = Vec::new();
    if let Some(l) = &s.latency_us {
        parts.push(format!("p50 {} p99 {}", fmt_us(l.p50), fmt_us(l.p99)));
    }
    if let Some(u) = &s.udp {
        parts.push(format!("loss {:.2}%", u.loss_pct));
        // Beside a load, which direction's queue grew.
        if let (Some(up), Some(down)) = (&u.owd_up_us, &u.owd_down_us) {
            parts.push(format!(
                "one-way p50 up {} down {}",
                fmt_us(up.p50),
                fmt_us(down.p50)
            ));
        }
    }
    // The kind's own figures in a few words (memcache: operations).
    if let Some(w) = crate::workload::kind_of(g.spec.workload).words(s) {
        parts.push(w);
    }
    if !s.status.is_ok() {
        parts.push(s.status.word().to_string());
    }
    parts.join(", ")
}

/// The groups' lines, appended to `o` (nothing for a single test).
pub fn lines(o: &mut String, r: &TestResult) {
    if r.groups.is_empty() {
        return;
    }
    let late = r.groups.iter().any(|g| g.offset_s > 0.0);
    let _ = writeln!(
        o,
        "  groups       on one {}; the CPU above is every group's",
        if late { "timeline" } else { "window" }
    );
    let width = r
        .groups
        .iter()
        .map(|g| g.command.len())
        .max()
        .unwrap_or(0)
        .min(48);
    let names = r
        .groups
        .iter()
        .map(|g| g.name.len())
        .max()
        .unwrap_or(0)
        .max(4);
    for g in &r.groups {
        let mut command = g.command.clone();
        if command.len() > width {
            command.truncate(width.saturating_sub(1));
            command.push('…');
        }
        let mut extra = extras(g);
        if g.offset_s > 0.0 {
            let from = format!("from {} s", g.offset_s);
            extra = if extra.is_empty() {
                from
            } else {
                format!("{extra}, {from}")
            };
        }
        let _ = writeln!(
            o,
            "    {:<names$} {:<width$}  {}{}",
            g.name,
            command,
            main_figure(g),
            if extra.is_empty() {
                String::new()
            } else {
                format!("  {extra}")
            }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::own::Own;
    use crate::model::result::Summary;
    use crate::model::spec::{MainMetric, TestSpec, Workload};

    fn group(name: &str, workload: &'static str, summary: Summary) -> GroupResult {
        GroupResult {
            name: name.into(),
            command: workload.into(),
            workload: workload.into(),
            spec: TestSpec {
                workload: Workload::named(workload),
                ..Default::default()
            },
            summary: Summary {
                main_metric: Some(MainMetric::TransactionRate),
                ..summary
            },
            iterations: Vec::new(),
            offset_s: 0.0,
        }
    }

    #[test]
    fn a_group_line_carries_its_kinds_own_words() {
        // memcache's figures ride in the summary's own section: its kind
        // says them (`Kind::words`), the line does not name memcache.
        let kv = serde_json::json!({
            "ops_per_s": 120000.0, "gets_per_s": 108000.0, "sets_per_s": 12000.0,
            "gets": 1, "sets": 1, "hits": 1, "misses": 0, "hit_ratio": 0.995,
            "bad_values": 0, "errors": 0, "get_latency_us": null, "set_latency_us": null,
            "sent_bps": 0.0, "received_bps": 0.0, "client_us_per_op": null,
            "server_us_per_op": null
        });
        let mut own = Own::default();
        own.set_raw("kv", kv);
        let memcache = group(
            "g1",
            "memcache",
            Summary {
                own,
                ..Default::default()
            },
        );
        let rr = group("g2", "rr", Summary::default());
        let r = TestResult {
            groups: vec![memcache, rr],
            ..Default::default()
        };
        let mut o = String::new();
        lines(&mut o, &r);
        let line = |name: &str| {
            o.lines()
                .find(|l| l.trim_start().starts_with(name))
                .unwrap()
                .to_string()
        };
        assert!(line("g1").contains("120.0k/s ops, hit ratio 99.5%"), "{o}");
        assert!(!line("g2").contains("ops"), "{o}");
    }
}
