//! UDP on loopback with a real local agent: counts against the kernel's,
//! receiver drops told apart from network loss, udp-rr, IPv6, bad input.

mod common;
use common::*;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// The kernel's UDP counters are the namespace's: tests that send take turns.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn udp(r: &serde_json::Value) -> &serde_json::Value {
    &r["iterations"][0]["udp"]
}

#[test]
fn received_packets_agree_with_the_kernel() {
    let _turn = alone();
    // Paced well below what loopback takes: nothing is dropped, so every
    // datagram the kernel delivered in the agent's window was counted.
    let r = run_json(
        "udp-kernel.json",
        "udp-stream --message 64 --flows 2 --rate 40k -d 2 --warmup 0.5",
        LIMIT,
    );
    let x = udp(&r);
    let got = u(&x["packets"]);
    let kernel = u(&x["kernel_in_datagrams"]);
    assert!(got > 60_000, "{got} packets in 2 s at 40k/s");
    // The kernel counts datagrams as they enter the socket, linerate as it
    // reads them: they differ by what sat in the two sockets' buffers at
    // the window's edges (a few hundred datagrams each at most).
    let diff = got.abs_diff(kernel);
    assert!(
        diff <= 1200,
        "linerate {got} vs kernel InDatagrams {kernel}"
    );
    assert_eq!(u(&x["lost"]), 0, "{x}");
    assert_eq!(u(&x["receiver_drops"]), 0);
    let rate = f(&x["packets_per_s"]);
    assert!(
        (rate / 40_000.0 - 1.0).abs() < 0.05,
        "paced at 40k/s, got {rate}"
    );
    assert_eq!(r["summary"]["main_metric"], "packet_rate");
    // Payload and wire rates: 64 B, plus 8 + 20 + 38 B per datagram.
    let wire = f(&x["wire_bps"]);
    let payload = f(&r["summary"]["throughput_bps"]);
    assert!(
        (wire / payload - 130.0 / 64.0).abs() < 0.02,
        "{wire} vs {payload}"
    );
    for fl in r["iterations"][0]["flows"]["agent"].as_array().unwrap() {
        assert!(fl["udp"]["jitter_us"].as_f64().is_some(), "{fl}");
    }
}

#[test]
fn a_tiny_receive_buffer_shows_receiver_drops_not_network_loss() {
    let _turn = alone();
    let r = run_json(
        "udp-drops.json",
        "udp-stream --message 64 --rcvbuf 4K -d 1.5 --warmup 0.5",
        LIMIT,
    );
    let x = udp(&r);
    let lost = u(&x["lost"]);
    let drops = u(&x["receiver_drops"]);
    // How many overflow depends on how far the receiver falls behind on this
    // host (a CI run saw 774 of 360k): that some do, and that linerate's count
    // agrees with the kernel's (window edges differ by a few %, and drops
    // come in bursts: a full-suite run saw 7,122 against 6,238, 14%), is
    // the point.
    assert!(drops > 0, "an unpaced sender into 4 KiB must overflow: {x}");
    let kernel = u(&x["kernel_rcvbuf_errors"]);
    assert!(
        drops <= kernel + kernel / 4 + 64 && kernel <= 2 * drops + 256,
        "receiver drops {drops} vs the kernel's {kernel}: {x}"
    );
    // Loopback loses nothing on the way: what is lost was dropped at the
    // receiving socket (window edges aside).
    let network = u(&x["network_lost"]);
    assert!(
        network * 100 <= lost.max(1),
        "network loss {network} of {lost} lost, drops {drops}"
    );
    assert!(u(&x["kernel_rcvbuf_errors"]) > 0);
    let text = run_str(
        "run udp-stream --message 64 --rcvbuf 4K -d 1 --warmup 0.3 -q",
        LIMIT,
    );
    let out = stdout(&text);
    assert!(out.contains("receiver drops"), "{out}");
    assert!(out.contains("socket buffer full"), "{out}");
}

#[test]
fn udp_rr_measures_transactions_and_latency() {
    let _turn = alone();
    let r = run_json(
        "udp-rr.json",
        "udp-rr --request 64 --response 200 --flows 2 --outstanding 2 -d 1.5 --warmup 0.5",
        LIMIT,
    );
    let s = &r["summary"];
    assert!(f(&s["transactions_per_s"]) > 1000.0, "{s}");
    assert!(f(&s["latency_us"]["p50"]) > 0.0);
    let x = udp(&r);
    assert_eq!(u(&x["timeouts"]), 0, "loopback loses nothing: {x}");
    // Every transaction is one request and one response received.
    let it = &r["iterations"][0];
    assert_eq!(
        u(&it["counters"]["client"]["packets_rx"]),
        u(&it["transactions"])
    );
}

#[test]
fn udp_rr_splits_each_round_trip_into_one_way_delays() {
    let _turn = alone();
    let r = run_json(
        "udp-rr-owd.json",
        "udp-rr --flows 2 --outstanding 2 -d 1.5 --warmup 0.5",
        LIMIT,
    );
    let it = &r["iterations"][0];
    let x = &it["udp"];
    let (up, down, lat) = (&x["owd_up_us"], &x["owd_down_us"], &it["latency_us"]);
    // One pair of delays per transaction of the window.
    assert_eq!(u(&up["count"]), u(&it["transactions"]), "{x}");
    assert_eq!(u(&down["count"]), u(&it["transactions"]), "{x}");
    // Loopback: each way takes microseconds, and the two ways add up to
    // the round trip less the agent's time (HDR rounds within 0.1%).
    for d in [up, down] {
        assert!(f(&d["p50"]) > 0.0 && f(&d["p50"]) < 1000.0, "{d}");
    }
    let sum = f(&up["mean"]) + f(&down["mean"]);
    let rtt = f(&lat["mean"]);
    assert!(
        sum <= rtt * 1.01 && sum >= rtt * 0.5,
        "up + down {sum:.1} µs against a round trip of {rtt:.1} µs: {x}"
    );
    // Both ends run on this kernel: the offset is exact, nothing clamped.
    assert_eq!(f(&x["owd_offset_uncertainty_us"]), 0.0, "{x}");
    assert_eq!(u(&x["owd_clamped"]), 0, "{x}");
    let s = &r["summary"]["udp"];
    assert_eq!(u(&s["owd_up_us"]["count"]), u(&up["count"]), "{s}");
    assert!(f(&s["owd_down_us"]["p99"]) > 0.0, "{s}");
    // Each flow keeps its means; the histograms it carried are merged.
    for fl in it["flows"]["client"].as_array().unwrap() {
        let fu = &fl["udp"];
        assert!(f(&fu["owd_up_mean_us"]) > 0.0, "{fu}");
        assert!(u(&fu["owd_samples"]) > 0, "{fu}");
        assert!(fu.get("owd_hists").is_none(), "{fu}");
    }
    // A response too short for the agent's stamps: no one-way delays, and
    // nothing guessed in their place.
    let r = run_json(
        "udp-rr-short.json",
        "udp-rr --response 32 -d 0.5 --warmup 0.2",
        LIMIT,
    );
    for x in [&r["iterations"][0]["udp"], &r["summary"]["udp"]] {
        assert!(x["packets"].is_u64(), "{x}");
        assert!(x.get("owd_up_us").is_none(), "{x}");
        assert!(x.get("owd_offset_uncertainty_us").is_none(), "{x}");
    }
}

#[test]
fn ipv6_works() {
    let _turn = alone();
    let r = run_json(
        "udp-v6.json",
        "udp-stream -6 --message 1400 --rate 200mbit -d 1 --warmup 0.3",
        LIMIT,
    );
    let x = udp(&r);
    assert!(u(&x["packets"]) > 10_000, "{x}");
    let payload = f(&r["summary"]["throughput_bps"]);
    assert!(
        (payload / 200e6 - 1.0).abs() < 0.05,
        "paced at 200 Mbit/s: {payload}"
    );
    let peer = r["iterations"][0]["flows"]["client"][0]["peer"]
        .as_str()
        .unwrap();
    assert!(peer.starts_with("[::1]"), "{peer}");
}

#[test]
fn gso_and_gro_split_and_count_every_datagram() {
    let _turn = alone();
    // The sender hands the kernel 32 datagrams at once; with GRO the
    // receiver gets them coalesced and splits them itself: each is still
    // counted by its own sequence number.
    let r = run_json(
        "udp-gro.json",
        "udp-stream --message 100 --gso --gro --rate 100k -d 1.5 --warmup 0.5",
        LIMIT,
    );
    let x = udp(&r);
    let rate = f(&x["packets_per_s"]);
    assert!((rate / 100e3 - 1.0).abs() < 0.05, "paced at 100k/s: {x}");
    assert_eq!(u(&x["lost"]), 0, "{x}");
    assert_eq!(u(&x["duplicates"]), 0, "{x}");
    // The kernel delivered super-datagrams: far fewer than linerate counted.
    assert!(u(&x["kernel_in_datagrams"]) * 4 < u(&x["packets"]), "{x}");
    assert_eq!(r["spec"]["gro"], true);
}

#[test]
fn defaults_fit_in_a_datagram() {
    let _turn = alone();
    let r = run_json("udp-defaults.json", "udp-stream -d 0.5 --warmup 0.2", LIMIT);
    assert_eq!(u(&r["spec"]["message"]), 1400);
    let r = run_json("udp-rr-defaults.json", "udp-rr -d 0.5 --warmup 0.2", LIMIT);
    assert_eq!(u(&r["spec"]["request"]), 64);
    assert_eq!(u(&r["spec"]["response"]), 64);
}

#[test]
fn bad_udp_input_gets_one_line_errors() {
    for (args, needle) in [
        ("run udp-stream --message 16 -d 1", "UDP message is 32 to"),
        ("run udp-stream --rate 0 -d 1", "positive"),
        ("run udp-stream --batch 0 -d 1", "--batch"),
        (
            "run udp-rr --gso -d 1",
            "--gso and --gro apply to udp-stream",
        ),
        ("run udp-rr --request 20 -d 1", "UDP message is 32 to"),
        ("run udp-stream --tls -d 1", "TCP"),
        ("run stream --batch 8 -d 1", "apply to udp-stream"),
        (
            "run udp-rr --rate 10mbit -d 1",
            "bit rate applies to udp-stream",
        ),
    ] {
        let o = run_str(args, LIMIT);
        assert_no_panic(&o);
        assert_eq!(o.status.code(), Some(2), "{args}: {}", stderr(&o));
        let e = stderr(&o);
        // One line says why (clap adds its usual "--help" hint below).
        let first = e.lines().next().unwrap_or("");
        assert!(first.contains(needle), "{args}: {e}");
    }
}
