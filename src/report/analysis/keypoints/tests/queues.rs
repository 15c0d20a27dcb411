//! The rules on latency under load: rrul's probes idle and loaded, the
//! queue disciplines against a FIFO, and rpm's responsiveness.

use super::{kind_rules, land, row};

#[test]
fn latency_under_load_says_what_the_load_added_per_point() {
    let rrul = |rate: &str, idle: f64, p50: f64| {
        row(
            &[("lab.rate", rate)],
            &[
                ("idle_p50_us", &[idle]),
                ("loaded_p50_us", &[p50]),
                ("loaded_p99_us", &[p50 * 1.5]),
                ("up_bps", &[18e6]),
                ("down_bps", &[17e6]),
            ],
            1,
        )
    };
    let one = land(vec![rrul("20mbit", 20_000.0, 370_000.0)], None);
    let k = kind_rules(&one, &["latency_under_load"]);
    assert_eq!(k.len(), 1);
    assert_eq!(
        k[0].text,
        "lab.rate=20mbit: under load (18.00 Mbit/s up, 17.00 Mbit/s down) the TCP probe's round trip went from 20.00 ms idle to 370.00 ms at p50 (18.5x) and 555.00 ms at p99."
    );
    let two = land(
        vec![
            rrul("20mbit", 20_000.0, 370_000.0),
            rrul("100mbit", 20_000.0, 90_000.0),
        ],
        None,
    );
    let k = kind_rules(&two, &["latency_under_load"]);
    assert_eq!(k.len(), 3);
    // One piece of advice for the rule, not one per point.
    assert!(!k[0].advice.is_empty());
    assert!(k[1].advice.is_empty() && k[2].advice.is_empty());
    assert!(
        k[2].text.contains(
            "least at lab.rate=100mbit (+70.00 ms at p50) and most at lab.rate=20mbit (+350.00 ms)"
        ),
        "{}",
        k[2].text
    );
    // Not an rrul point: nothing.
    let other = land(
        vec![row(&[("flows", "1")], &[("latency_p50_us", &[30.0])], 1)],
        None,
    );
    assert!(kind_rules(&other, &["latency_under_load"]).is_empty());
}

#[test]
fn queue_discipline_compares_each_aqm_with_the_fifo_at_the_same_rest() {
    let rrul = |rate: &str, aqm: &str, p50: f64, p99: f64, bps: f64| {
        row(
            &[("lab.rate", rate), ("lab.aqm", aqm)],
            &[
                ("idle_p50_us", &[20_000.0]),
                ("idle_p99_us", &[21_000.0]),
                ("loaded_p50_us", &[p50]),
                ("loaded_p99_us", &[p99]),
                ("up_bps", &[bps]),
                ("down_bps", &[bps]),
            ],
            1,
        )
    };
    let l = land(
        vec![
            rrul("20mbit", "fifo", 350_000.0, 980_000.0, 18e6),
            rrul("20mbit", "codel", 97_000.0, 279_000.0, 17.3e6),
            rrul("20mbit", "fq_codel", 21_500.0, 23_400.0, 18e6),
            rrul("100mbit", "fifo", 293_000.0, 393_000.0, 88e6),
        ],
        None,
    );
    let k = kind_rules(&l, &["queue_discipline"]);
    assert_eq!(k.len(), 1, "100mbit has no AQM point to compare");
    assert_eq!(
        k[0].text,
        "At lab.rate=20mbit: with a FIFO the probes wait 330.00 ms under load (p50; p99 980.00 ms); fq_codel keeps p99 within 2.40 ms of idle at 100% of the FIFO's throughput; codel keeps p99 within 258.00 ms of idle at 96% of the FIFO's throughput."
    );
    // Without an lab.aqm axis: nothing.
    assert!(kind_rules(&land(vec![], None), &["queue_discipline"]).is_empty());
}

#[test]
fn responsiveness_says_rpm_against_idle_and_which_queue_grew() {
    let rpm = |aqm: &str, v: f64, down: f64, up: f64| {
        row(
            &[("lab.aqm", aqm)],
            &[
                ("rpm", &[v]),
                ("foreign_rpm", &[v * 1.2]),
                ("self_rpm", &[v * 0.8]),
                ("rpm_idle_rtt_us", &[20_000.0]),
                ("rpm_self_down_us", &[down]),
                ("rpm_self_up_us", &[up]),
            ],
            1,
        )
    };
    let l = land(
        vec![
            rpm("fifo", 150.0, 500_000.0, 450_000.0),
            rpm("fq_codel", 1500.0, 120_000.0, 60_000.0),
        ],
        None,
    );
    let k = kind_rules(&l, &["responsiveness"]);
    assert_eq!(k.len(), 3, "{k:?}");
    assert_eq!(
        k[0].text,
        "lab.aqm=fifo: 150 RPM (Poor) (new connections 180, loaded connections 120); idle, a round trip took 20.00 ms (3000 RPM): the load cut RPM 20.0x."
    );
    assert!(!k[0].advice.is_empty() && k[1].advice.is_empty());
    assert!(
        k[1].text.ends_with("waited longest on the download side (120.00 ms against 60.00 ms): that direction's queue grew."),
        "{}",
        k[1].text
    );
    assert_eq!(
        k[2].text,
        "Responsiveness was highest at lab.aqm=fq_codel (1500 RPM) and lowest at lab.aqm=fifo (150 RPM), 10.0x apart."
    );
    // No rpm points: nothing.
    assert!(kind_rules(&land(vec![], None), &["responsiveness"]).is_empty());
}
