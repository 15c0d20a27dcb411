//! The rules on what a transaction costs: points the window's edges
//! decide, and QUIC against its TLS over TCP twin.

use super::super::*;
use super::{land, row};
use crate::model::spec::Workload;

/// A point that completed fewer transactions than it kept under way is
/// named, and its CPU per transaction left out of the comparison.
#[test]
fn points_decided_by_the_windows_edges_are_named_and_left_out() {
    let mk = |case: &str, outstanding: u32, done: u64, us: f64| {
        let mut r = row(
            &[("case", case), ("flows", "16")],
            &[("client_us_per_tx", &[us])],
            1,
        );
        r.point.spec.workload = Workload::named("rr");
        r.point.spec.outstanding = outstanding;
        r.results[0].iterations = vec![crate::model::result::Iteration {
            transactions: done,
            ..Default::default()
        }];
        r
    };
    let l = land(
        vec![
            mk("small", 1, 5000, 10.0),
            mk("pages", 1, 400, 30.0),
            // 128 under way, 7 done: 31 ms "per page".
            mk("big", 8, 7, 31_000.0),
        ],
        None,
    );
    let w = window_edges(&l);
    assert_eq!(w.len(), 1);
    assert!(
        w[0].text
            .starts_with("1 point completed fewer transactions")
            && w[0].text.contains("big flows=16 (7 of 128)"),
        "{}",
        w[0].text
    );
    let c = transaction_cost(&l);
    assert_eq!(c.len(), 1);
    assert!(c[0].text.contains("to 30.0 µs"), "{}", c[0].text);
    // 128 done of 128 under way is enough.
    let l = land(vec![mk("big", 8, 128, 31_000.0)], None);
    assert!(window_edges(&l).is_empty());
    // TLS against clear: a pair with an edge-bound side compares nothing.
    let tls = |on: &str, done: u64, us: f64| {
        let mut r = mk("big", 8, done, us);
        r.point.params.push(("tls".into(), on.into()));
        r
    };
    let l = land(
        vec![tls("true", 7, 31_000.0), tls("false", 500, 400.0)],
        None,
    );
    assert!(tls_cost(&l).is_empty());
    let l = land(
        vec![tls("true", 900, 600.0), tls("false", 500, 400.0)],
        None,
    );
    assert_eq!(tls_cost(&l).len(), 1);
}

/// QUIC against its TLS over TCP twin: the per-end ratio, and in a lab
/// the whole host's, since TCP's receive work runs in the emulator's
/// context there and is in neither end's figure.
#[test]
fn quic_cost_pairs_quic_with_tls_over_tcp_and_in_a_lab_adds_the_hosts_cost() {
    let mk = |case: &str, kind: &'static str, kb: f64, bps: f64, host: f64, lab: bool| {
        let mut r = row(
            &[("case", case), ("flows", "1")],
            &[
                ("client_us_per_kb", &[kb]),
                ("agent_us_per_kb", &[kb]),
                ("throughput_bps", &[bps]),
            ],
            1,
        );
        r.point.spec.workload = Workload::named(kind);
        r.point.spec.tls = Some(Default::default());
        let s = &mut r.results[0].summary;
        s.throughput_bps = bps;
        s.cpu.client.host_util_pct = Some(host);
        if lab {
            r.results[0].lab = Some(Default::default());
        }
        r
    };
    // QUIC: 13.7 µs/KB at 38.5 Mbit/s, the host 15% busy; TLS over TCP:
    // 0.66 µs/KB (its receive work elsewhere) at 44.8 Mbit/s, 13% busy.
    let rows = |lab| {
        vec![
            mk("QUIC", "quic-stream", 13.7, 38.5e6, 15.2, lab),
            mk("TLS", "stream", 0.66, 44.8e6, 13.0, lab),
        ]
    };
    let k = quic_cost(&land(rows(true), None));
    assert_eq!(k.len(), 2, "{k:?}");
    assert!(k[0].text.contains("20.8x"), "{}", k[0].text);
    // (15.2 / 38.5) / (13.0 / 44.8) = 1.36
    assert!(
        k[0].text.contains("in a lab") && k[0].text.contains("the whole host spent 1.36x per KB"),
        "{}",
        k[0].text
    );
    let k = quic_cost(&land(rows(false), None));
    assert!(!k[0].text.contains("whole host"), "{}", k[0].text);
}
