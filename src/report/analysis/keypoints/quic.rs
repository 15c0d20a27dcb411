//! What QUIC costs against TLS over TCP, from a study that ran both: each
//! QUIC point is paired with the TLS over TCP point of the same TLS
//! settings at the same coordinates (its case aside), as a QUIC test run
//! alone is paired with its twin.

use super::shared::{cost_text, min_max, CostRatio, KeyPoint};
use crate::model::spec::MainMetric;
use crate::report::analysis::landscape::{Landscape, Row};

/// The QUIC rows with their TLS over TCP twin rows.
fn pairs(l: &Landscape) -> Vec<(&Row, &Row)> {
    let key = |r: &Row| r.point.label_except("case");
    let quic = |r: &Row| crate::workload::kind_of(r.point.spec.workload).twin_keeps_tls();
    l.rows
        .iter()
        .filter(|q| quic(q) && q.point.spec.tls.is_some())
        .filter_map(|q| {
            let twin = crate::workload::twin(&q.point.spec);
            let t = l.rows.iter().find(|t| {
                !quic(t)
                    && t.point.spec.workload == twin.workload
                    && t.point.spec.tls == twin.tls
                    && key(t) == key(q)
            })?;
            Some((q, t))
        })
        // A point the window's edges decide compares nothing.
        .filter(|(q, t)| super::evidence::steady(q) && super::evidence::steady(t))
        .collect()
}

/// Whether a row's headline is transactions (rr over QUIC), so its cost
/// is per transaction, not per KB.
fn per_transaction(r: &Row) -> bool {
    crate::workload::main_metric(&r.point.spec) == MainMetric::TransactionRate
}

/// "QUIC costs 2.3-2.7x the client's CPU per KB of TLS over TCP ...", and
/// per transaction for request/response tests: a line per side and unit.
pub fn quic_cost(l: &Landscape) -> Vec<KeyPoint> {
    let all = pairs(l);
    let mut out = Vec::new();
    for per_tx in [false, true] {
        let pairs: Vec<(&Row, &Row)> = all
            .iter()
            .copied()
            .filter(|(q, _)| per_transaction(q) == per_tx)
            .collect();
        out.extend(cost_points(&pairs, per_tx));
    }
    out
}

fn cost_points(pairs: &[(&Row, &Row)], per_tx: bool) -> Vec<KeyPoint> {
    let mut out = Vec::new();
    let (what, rate, rate_word) = if per_tx {
        ("transaction", "transactions_per_s", "transaction rate")
    } else {
        ("KB", "throughput_bps", "throughput")
    };
    let sides = if per_tx {
        [("client", "client_us_per_tx"), ("agent", "agent_us_per_tx")]
    } else {
        [("client", "client_us_per_kb"), ("agent", "agent_us_per_kb")]
    };
    for (side, kb) in sides {
        let ratios: Vec<CostRatio> = pairs
            .iter()
            .filter_map(|(q, t)| {
                let (a, b) = (q.mean(kb)?, t.mean(kb).filter(|b| *b > 0.0)?);
                Some((a / b, a, b, q.point.label_except("case")))
            })
            .collect();
        if ratios.is_empty() {
            continue;
        }
        let tput: Vec<f64> = pairs
            .iter()
            .filter_map(|(q, t)| Some(q.mean(rate)? / t.mean(rate).filter(|v| *v > 0.0)?))
            .collect();
        let mut rest = match min_max(&tput) {
            Some(t) if side == "client" => {
                format!("; QUIC's {rate_word} is {t}x of TLS over TCP's")
            }
            _ => String::new(),
        };
        if side == "client" {
            rest.push_str(&in_a_lab(pairs, per_tx, what));
        }
        out.push(KeyPoint {
            rule: "quic_cost",
            text: cost_text(
                "QUIC",
                side,
                what,
                "TLS over TCP with the same TLS settings,",
                &ratios.iter().collect::<Vec<_>>(),
                &rest,
            ),
            advice: if per_tx {
                "QUIC runs in user space what TCP runs in the kernel (its handshake, acknowledgements, loss recovery and pacing) and seals each datagram apart, which shows most where transactions are small: compare at the request sizes, concurrency (--outstanding) and connection reuse the application uses; several streams at once on one connection are where QUIC avoids TCP's head-of-line blocking, and resumption with 0-RTT where it saves a round trip.".into()
            } else {
                "QUIC seals each datagram (about 1.4 KB) where TLS over TCP seals 16 KiB records that the kernel segments, and runs its acknowledgements, loss recovery and pacing in user space: keep GSO and GRO on (linerate uses both), raise the path MTU where the network allows, and count on the difference per byte when choosing QUIC for bulk transfer.".into()
            },
        });
    }
    out
}

/// Where the points ran in a lab (both ends and the emulator on one host),
/// the whole host's cost ratio: TCP's receive work runs in the kernel in
/// the emulator's context there (the verdict's softirq delivers each
/// released packet), so it is in neither end's process CPU while QUIC's
/// is in its processes. Empty outside a lab.
fn in_a_lab(pairs: &[(&Row, &Row)], per_tx: bool, what: &str) -> String {
    let lab = |r: &Row| r.results.first().is_some_and(|x| x.lab.is_some());
    let host: Vec<f64> = pairs
        .iter()
        .filter(|(q, t)| lab(q) && lab(t))
        .filter_map(|(q, t)| {
            q.results
                .first()?
                .summary
                .host_cost_ratio(&t.results.first()?.summary, per_tx)
        })
        .collect();
    match min_max(&host) {
        Some(h) => format!(
            "; these ran in a lab, where TCP's receive work (its segments and acknowledgements) runs in the kernel in the emulator's context, in neither end's figure, and QUIC's in its processes: the whole host spent {h}x per {what}"
        ),
        None => String::new(),
    }
}
