//! `linerate run rrul` (flent's Realtime Response Under Load) on loopback
//! with short phases, its study case form, and the open-loop udp-rr its
//! UDP probe is.

mod common;
use common::*;
use std::time::Duration;

#[test]
fn udp_rr_open_loop_carries_its_rate() {
    let r = run_json(
        "udp-rr-open.json",
        "udp-rr --rate 200 --flows 2 -d 1 --warmup 0.2",
        Duration::from_secs(60),
    );
    let s = &r["summary"];
    assert_eq!(s["status"], "ok", "{s}");
    let rate = f(&s["transactions_per_s"]);
    assert!((rate / 200.0 - 1.0).abs() < 0.05, "{rate}/s, asked 200/s");
    // From the intended send time too, as rr's open loop.
    assert!(s["latency_corrected_us"]["p50"].as_f64().is_some(), "{s}");
    assert_eq!(u(&s["udp"]["timeouts"]), 0, "{s}");
}
