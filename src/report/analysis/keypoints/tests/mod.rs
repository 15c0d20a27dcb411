//! The rules on crafted landscapes, each on both sides of its threshold.

use super::*;
use crate::measure::stats::estimate;
use crate::model::result::TestResult;
use crate::model::spec::TestSpec;
use crate::model::spec::Workload;
use crate::report::analysis::landscape::{Landscape, Row};
use crate::report::analysis::wanmodel::{self, SSH_CHANNEL_WINDOW};
use crate::study::sweep::Point;
use std::collections::BTreeMap;

/// The kinds' own key points (`Kind::key_points`, through `kinds`) of
/// these rules.
pub(super) fn kind_rules(l: &Landscape, rules: &[&str]) -> Vec<KeyPoint> {
    kinds(l)
        .into_iter()
        .filter(|k| rules.contains(&k.rule))
        .collect()
}

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
    r.point.spec.workload = Workload::named("udp-stream");
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
    r.point.spec.workload = Workload::named("memcache");
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
    let s = kind_rules(&l, &["kv_saturation"]);
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
    let c = kind_rules(&l, &["kv_cost", "kv_hit_ratio"]);
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
    assert!(kind_rules(&grow, &["kv_saturation"]).is_empty());
    let h: Vec<_> = kind_rules(&grow, &["kv_cost", "kv_hit_ratio"])
        .into_iter()
        .filter(|k| k.rule == "kv_hit_ratio")
        .collect();
    assert_eq!(h.len(), 1);
    assert!(
        h[0].text.contains("98.0% at 4 connections"),
        "{}",
        h[0].text
    );
    assert!(kind_rules(&l, &["kv_cost", "kv_hit_ratio"])
        .iter()
        .all(|k| k.rule != "kv_hit_ratio"));
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
    // A receiver that polled a third of a core over its 2 s was waiting,
    // not bound (--rx-poll).
    let mut r = row(&[("flows", "1")], &[("agent_cpu_pct", &[49.5])], 1);
    let mut it = crate::model::result::Iteration {
        duration_s: 2.0,
        ..Default::default()
    };
    it.counters.agent.rx_poll_ns = 700_000_000;
    r.results[0].iterations.push(it);
    assert!(cpu_bound(&land(vec![r], None)).is_empty());
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
    // The agent's receiver polled 0.4 of the 2 cores over its 2 s: the
    // host was 80% busy with work, not saturated (--rx-poll).
    let mut l = mk(99.9);
    let mut it = crate::model::result::Iteration {
        duration_s: 2.0,
        ..Default::default()
    };
    it.counters.agent.rx_poll_ns = 800_000_000;
    l.rows[0].results[0].iterations.push(it);
    assert!(host_saturated(&l).is_empty());
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
        k[0].text.starts_with(
            "1 of 1 points follow neither, at 84% of min(C, W/RTT): below what the model expects"
        ),
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
    res.spec.workload = Workload::named("scp");
    res.spec.window = crate::model::spec::WindowMode::Buffer;
    res.spec.rcvbuf = None;
    res.exec = Some(crate::model::exec::ExecRecord {
        ssh_version: Some("OpenSSH_9.2p1".into()),
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
        scp_channel_window(&wan_land(vec![scp(100, MIB, 1.8, at(ssh.throughput_bps))])).is_empty()
    );
}

#[test]
fn latency_beside_load_compares_a_group_with_itself_alone() {
    let rr = |params: &[(&str, &str)], p99: f64, load: Option<f64>| {
        let mut m: Vec<(&'static str, &[f64])> = vec![("latency_p50_us", &[30.0])];
        let p = [p99];
        let l = [load.unwrap_or(0.0)];
        m.push(("latency_p99_us", &p));
        if load.is_some() {
            m.push(("load_beside_bps", &l));
        }
        let mut r = row(params, &m, 1);
        r.point.spec.workload = crate::model::spec::Workload::named("rr");
        r.point.spec.rate = Some(200.0);
        r
    };
    let alone = rr(&[("case", "alone")], 40.0, None);
    let mixed = rr(
        &[("case", "beside streams"), ("group", "g1 rr --rate 200")],
        1200.0,
        Some(4e10),
    );
    let bulk = row(
        &[("case", "beside streams"), ("group", "g2 stream")],
        &[("throughput_bps", &[4e10]), ("load_beside_bps", &[1e5])],
        1,
    );
    let l = land(vec![alone, mixed, bulk], None);
    let k = latency_beside_load(&l);
    assert_eq!(k.len(), 1, "only the latency group: {k:?}");
    assert!(
        k[0].text.contains("p99 latency 1.20 ms beside 40.00 Gbit/s of other traffic, 30.0x its 40.0 µs alone (alone)"),
        "{}",
        k[0].text
    );
    // Without the group alone in the study: the figures, no ratio.
    let l = land(vec![rr(&[("group", "g1 rr")], 1200.0, Some(4e10))], None);
    let k = latency_beside_load(&l);
    assert!(
        k[0].text
            .contains("beside 40.00 Gbit/s of other traffic on the same window"),
        "{}",
        k[0].text
    );
    // No load beside (a group alone in a mix of one): nothing to say.
    let l = land(vec![rr(&[("group", "g1 rr")], 1200.0, Some(0.0))], None);
    assert!(latency_beside_load(&l).is_empty());
}

/// An open-loop row whose latency p99 is `p99` with the given waits' p99s.
fn open_loop_row(p99: f64, send_late: Option<f64>, agent_read: Option<f64>) -> Row {
    use crate::model::result::LatencyFields;
    use crate::model::sample::{LatencySummary, Waits};
    let lat = |p: f64| LatencySummary {
        count: 1000,
        p50: p / 4.0,
        p99: p,
        max: p * 2.0,
        ..Default::default()
    };
    let mut r = row(&[("rate", "10000")], &[], 1);
    let res = &mut r.results[0];
    res.summary.latency_corrected_us = Some(LatencyFields::from(&lat(p99)));
    res.summary.waits = Some(Waits {
        net_us: None,
        held_us: Some(lat(1.0)),
        send_late_us: send_late.map(lat),
        client_read_delay_us: Some(lat(900.0)),
        agent_read_delay_us: agent_read.map(lat),
    });
    r
}

#[test]
fn tail_source_names_the_end_whose_waits_made_the_tail() {
    let k = tail_source(&land(
        vec![open_loop_row(1000.0, Some(950.0), Some(30.0))],
        None,
    ));
    assert_eq!(k.len(), 1, "{k:?}");
    assert!(k[0].text.contains("the client's sender"), "{}", k[0].text);
    assert!(k[0].text.contains("950.0 µs"), "{}", k[0].text);
    let k = tail_source(&land(
        vec![open_loop_row(1000.0, Some(40.0), Some(700.0))],
        None,
    ));
    assert!(k[0].text.contains("the agent's reads"), "{}", k[0].text);
    // Neither is half the tail: the path or the server's work set it. The
    // client's own read delay (900 µs) is after the latency ends: no part.
    assert!(tail_source(&land(
        vec![open_loop_row(1000.0, Some(300.0), Some(200.0))],
        None
    ))
    .is_empty());
    assert!(tail_source(&land(vec![open_loop_row(1000.0, None, None)], None)).is_empty());
}

/// The costs per transaction and QUIC against TLS over TCP.
mod cost;
mod queues;
