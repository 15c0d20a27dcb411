//! Every workload and direction over real loopback sockets, with the local
//! agent started by linerate itself. Each test checks that the numbers add up
//! the way the workload says they must.

mod common;
use common::*;
use serde_json::Value;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// Runs `linerate run ARGS -q --json FILE` (ARGS split at spaces) and
/// returns the result it wrote.
fn run_json(name: &str, args: &str) -> Value {
    common::run_json(name, args, LIMIT)
}

/// Interval sums equal the iteration totals, and intervals tile the window.
fn check_intervals(it: &Value) {
    let ivs = it["intervals"].as_array().unwrap();
    assert!(!ivs.is_empty());
    let sum: u64 = ivs.iter().map(|i| u(&i["bytes"])).sum();
    assert_eq!(
        sum,
        u(&it["bytes"]),
        "interval bytes must add up to the total"
    );
    let tsum: u64 = ivs.iter().map(|i| u(&i["transactions"])).sum();
    assert_eq!(tsum, u(&it["transactions"]));
    for w in ivs.windows(2) {
        let gap = f(&w[1]["start_s"]) - f(&w[0]["end_s"]);
        assert!(gap.abs() < 0.05, "intervals must be contiguous, gap {gap}");
    }
}

/// A continuous stream counts its bytes where they reached the receiving
/// TCP (the senders' acknowledged bytes, `bytes_delivered`); the
/// receivers' reads differ from that by what their receive buffers held
/// at the window's edges, and by the two ends' edges being apart (their
/// clocks agree within a few ms: at 20 Gbit/s on lo, 1% of a second).
fn counted_where_it_arrived(it: &Value) {
    let c = &it["counters"];
    let bytes = u(&it["bytes"]);
    let delivered = u(&c["client"]["bytes_delivered"]) + u(&c["agent"]["bytes_delivered"]);
    assert_eq!(
        bytes, delivered,
        "a stream counts what its senders saw arrive"
    );
    let read = u(&c["client"]["bytes_rx"]) + u(&c["agent"]["bytes_rx"]);
    let held: u64 = ["client", "agent"]
        .iter()
        .flat_map(|side| it["flows"][side].as_array().unwrap())
        .filter(|f| u(&f["bytes_rx"]) > 0)
        .map(|f| u(&f["rcvbuf"]))
        .sum();
    assert!(
        bytes.abs_diff(read) <= held + bytes / 50,
        "arrived {bytes}, read {read}: more apart than the receive buffers ({held}) and 2%"
    );
}

#[test]
fn stream_tx_counts_at_the_agent() {
    let r = run_json("tx.json", "stream -F 2 -d 2 --warmup 0.5 --interval 0.5");
    let it = &r["iterations"][0];
    check_intervals(it);
    assert_eq!(it["intervals"].as_array().unwrap().len(), 4);
    let agent_rx = u(&it["counters"]["agent"]["bytes_rx"]);
    counted_where_it_arrived(it);
    assert_eq!(u(&it["counters"]["agent"]["bytes_delivered"]), 0);
    assert_eq!(u(&it["counters"]["client"]["bytes_rx"]), 0);
    assert!(agent_rx > 10_000_000, "moved only {agent_rx} bytes");
    // Received bytes cannot exceed what the client wrote over the whole test.
    let sent: u64 = it["flows"]["client"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| u(&f["bytes_tx"]))
        .sum();
    assert!(sent >= agent_rx);
    let s = &r["summary"];
    assert_eq!(s["workload"], "stream");
    assert!(s["latency_us"].is_null());
    let bps = f(&s["throughput_bps"]);
    let expect = u(&s["bytes"]) as f64 * 8.0 / f(&s["duration_s"]);
    assert!(
        (bps / expect - 1.0).abs() < 0.05,
        "throughput {bps} vs bytes/duration {expect}"
    );
    for side in ["client", "agent"] {
        let c = &s["cpu"][side];
        assert!(f(&c["host_util_pct"]) > 1.0 && f(&c["host_util_pct"]) <= 100.0);
        assert!(f(&c["process_util_pct"]) > 0.5, "{side} process cpu");
        assert!(f(&c["us_per_kb"]) > 0.0);
        assert!(c["us_per_tx"].is_null());
    }
    // Kernel view per flow, on both ends.
    let flows = it["flows"]["client"].as_array().unwrap();
    assert_eq!(flows.len(), 2);
    assert!(u(&flows[0]["tcp_info"]["snd_mss"]) > 0);
    assert!(u(&flows[0]["sndbuf"]) > 0);
    assert_eq!(it["flows"]["agent"].as_array().unwrap().len(), 2);
    assert_eq!(it["placement"]["client"].as_array().unwrap().len(), 2);
}

#[test]
fn stream_rx_and_bidir_count_at_the_right_receivers() {
    let r = run_json("rx.json", "stream --direction rx -d 1 --warmup 0.3");
    let it = &r["iterations"][0];
    check_intervals(it);
    counted_where_it_arrived(it);
    assert_eq!(u(&it["counters"]["client"]["bytes_delivered"]), 0);
    assert_eq!(u(&it["counters"]["agent"]["bytes_rx"]), 0);
    assert!(u(&it["bytes"]) > 1_000_000);

    let r = run_json(
        "bidir.json",
        "stream --direction bidir -F 2 -d 1 --warmup 0.3",
    );
    let it = &r["iterations"][0];
    check_intervals(it);
    counted_where_it_arrived(it);
    assert!(u(&it["counters"]["client"]["bytes_rx"]) > 1_000_000);
    assert!(u(&it["counters"]["agent"]["bytes_rx"]) > 1_000_000);
    assert!(u(&it["counters"]["client"]["bytes_delivered"]) > 1_000_000);
    assert!(u(&it["counters"]["agent"]["bytes_delivered"]) > 1_000_000);
}

#[test]
fn rr_transactions_times_sizes_equal_bytes() {
    let r = run_json(
        "rr.json",
        "rr --request 200 --response 1000 -F 3 -d 1 --warmup 0.3",
    );
    let it = &r["iterations"][0];
    check_intervals(it);
    let tx = u(&it["transactions"]);
    assert!(tx > 500, "only {tx} transactions");
    // Whole-flow counters are exact: every response byte belongs to a request.
    for f in it["flows"]["client"].as_array().unwrap() {
        let (t, rx, sent) = (u(&f["transactions"]), u(&f["bytes_rx"]), u(&f["bytes_tx"]));
        assert!(
            rx >= t * 1000 && rx < (t + 1) * 1000,
            "client flow: {t} transactions, {rx} bytes received"
        );
        assert!(
            sent >= t * 200 && sent <= (t + 1) * 200,
            "client flow: {t} transactions, {sent} bytes sent"
        );
    }
    for f in it["flows"]["agent"].as_array().unwrap() {
        let (t, rx, sent) = (u(&f["transactions"]), u(&f["bytes_rx"]), u(&f["bytes_tx"]));
        assert_eq!(rx, t * 200, "agent flow: requests are 200 bytes");
        assert!(sent <= t * 1000);
    }
    // In the window: responses received = transactions x 1000 (1000 B fits one read).
    let c = &it["counters"]["client"];
    let rx = u(&c["bytes_rx"]);
    assert!(
        rx.abs_diff(tx * 1000) <= 3 * 1000,
        "window: {tx} tx vs {rx} bytes"
    );
    let lat = &r["summary"]["latency_us"];
    for k in ["p50", "p90", "p99", "p999", "max"] {
        assert!(f(&lat[k]) > 0.0, "latency {k}");
    }
    assert!(f(&lat["p50"]) <= f(&lat["p99"]) && f(&lat["p99"]) <= f(&lat["max"]));
    // µs per transaction is CPU time over transactions.
    let s = &r["summary"];
    let us_tx = f(&s["cpu"]["client"]["us_per_tx"]);
    let cores = f(&it["cpu"]["client"]["process_cores"]);
    let expect = cores * f(&it["cpu"]["client"]["wall_s"]) * 1e6 / tx as f64;
    assert!((us_tx / expect - 1.0).abs() < 0.05, "{us_tx} vs {expect}");
}

/// `--io threads` (a blocking thread per flow) counts what the event loop
/// counts: rr sizes add up per flow, streams count at their receivers in
/// both directions with intervals that tile the window, a finite transfer
/// moves exactly its bytes, TLS works on blocking sockets; and it is what
/// a closed-loop rr with a worker per flow gets by default.
#[test]
fn io_threads_counts_what_the_event_loop_counts() {
    let r = run_json(
        "rr-threads.json",
        "rr --io threads --request 200 --response 1000 -F 2 -d 1 --warmup 0.3",
    );
    assert_eq!(r["spec"]["io"], "threads");
    assert_eq!(u(&r["spec"]["workers"]), 2);
    let it = &r["iterations"][0];
    check_intervals(it);
    assert!(u(&it["transactions"]) > 500);
    for f in it["flows"]["agent"].as_array().unwrap() {
        assert_eq!(u(&f["bytes_rx"]), u(&f["transactions"]) * 200);
    }
    for f in it["flows"]["client"].as_array().unwrap() {
        let (t, rx) = (u(&f["transactions"]), u(&f["bytes_rx"]));
        assert!(rx >= t * 1000 && rx < (t + 1) * 1000, "{t} tx, {rx} bytes");
    }

    let r = run_json(
        "st-threads.json",
        "stream --io threads -F 2 -d 1 --warmup 0.3 --interval 0.5",
    );
    let it = &r["iterations"][0];
    check_intervals(it);
    assert_eq!(it["intervals"].as_array().unwrap().len(), 2);
    counted_where_it_arrived(it);
    assert!(u(&it["bytes"]) > 10_000_000);
    let r = run_json(
        "rx-threads.json",
        "stream --io threads --direction rx -d 1 --warmup 0.3",
    );
    let it = &r["iterations"][0];
    counted_where_it_arrived(it);
    assert!(u(&it["bytes"]) > 10_000_000);

    let r = run_json("put-threads.json", "stream --io threads --bytes 20M -F 2");
    let it = &r["iterations"][0];
    assert_eq!(
        u(&it["counters"]["agent"]["bytes_rx"]),
        2 * 20 * 1024 * 1024
    );
    assert_eq!(u(&it["counters"]["client"]["bytes_rx"]), 2 * 20);

    let r = run_json(
        "tls-threads.json",
        "rr --io threads --tls --no-baseline -d 1 --warmup 0.3",
    );
    assert!(u(&r["summary"]["transactions"]) > 100);

    // crr: the agent serves each listener's connections in turn; both
    // close modes and TLS.
    for (name, args) in [
        (
            "crr-threads.json",
            "crr --io threads -F 2 --request 64 --response 8K -d 1 --warmup 0.3",
        ),
        (
            "crr-reset-threads.json",
            "crr --io threads --close reset -d 1 --warmup 0.3",
        ),
        (
            "crr-tls-threads.json",
            "crr --io threads --tls --no-baseline -d 1 --warmup 0.3",
        ),
    ] {
        let r = run_json(name, args);
        let it = &r["iterations"][0];
        let tx = u(&it["transactions"]);
        assert!(tx > 100, "{args}: {tx} transactions");
        let c = &it["counters"]["client"];
        assert_eq!(u(&c["connections"]), tx, "{args}");
        assert_eq!(u(&c["errors"]), 0, "{args}");
    }

    // Defaults: a closed-loop rr with a worker per flow blocks; an open
    // loop needs the event loop's timers.
    let r = run_json("rr-default.json", "rr -d 0.5 --warmup 0.2");
    assert_eq!(r["spec"]["io"], "threads");
    let r = run_json("rr-open.json", "rr --rate 500 -d 0.5 --warmup 0.2");
    assert_eq!(r["spec"]["io"], "epoll");
}

#[test]
fn rr_open_loop_holds_the_rate_and_reports_corrected_latency() {
    let r = run_json("rate.json", "rr --rate 1000 -F 2 -d 2 --warmup 0.5");
    let s = &r["summary"];
    let rate = f(&s["transactions_per_s"]);
    assert!(
        (rate - 1000.0).abs() < 60.0,
        "open loop at 1000/s gave {rate}"
    );
    let c = &s["latency_corrected_us"];
    assert!(!c.is_null());
    assert!(f(&c["p50"]) >= f(&s["latency_us"]["p50"]) * 0.99);
}

#[test]
fn rr_outstanding_keeps_several_in_flight() {
    let r = run_json("burst.json", "rr --outstanding 4 -d 1 --warmup 0.3");
    let it = &r["iterations"][0];
    let f0 = &it["flows"]["client"][0];
    let (t, rx) = (u(&f0["transactions"]), u(&f0["bytes_rx"]));
    assert!(rx >= t && rx <= t + 4);
    assert!(
        u(&f0["bytes_tx"]) >= t + 3,
        "4 outstanding: requests sent run ahead of responses"
    );
}

#[test]
fn crr_connections_equal_transactions() {
    let r = run_json(
        "crr.json",
        "crr --request 64 --response 8192 -F 2 -d 1 --warmup 0.3",
    );
    let it = &r["iterations"][0];
    check_intervals(it);
    let c = &it["counters"]["client"];
    let tx = u(&c["transactions"]);
    assert!(tx > 200, "only {tx} connections");
    assert_eq!(u(&c["connections"]), tx);
    assert_eq!(
        u(&c["graceful_closes"]),
        tx,
        "graceful mode: every connection ends with FIN"
    );
    assert_eq!(u(&c["resets"]), 0);
    // Each connection brings one response; at the window's two edges each of
    // the 2 flows may have a response counted without its close, or the reverse.
    let rx = u(&c["bytes_rx"]);
    assert!(
        rx.abs_diff(tx * 8192) <= 2 * 2 * 8192,
        "{rx} bytes for {tx} connections"
    );
    let agent_conns = u(&it["counters"]["agent"]["connections"]);
    assert!(
        agent_conns.abs_diff(tx) <= tx / 10 + 10,
        "agent accepted {agent_conns}, client completed {tx}"
    );
    assert!(f(&r["summary"]["connections_per_s"]) > 0.0);

    let r = run_json("crr-reset.json", "crr --close reset -d 1 --warmup 0.3");
    let c = &r["iterations"][0]["counters"]["client"];
    assert_eq!(u(&c["resets"]), u(&c["transactions"]));
    assert_eq!(u(&c["graceful_closes"]), 0);
}

#[test]
fn conn_measures_connections_per_second_and_connect_latency() {
    for (name, args, tls) in [
        ("conn.json", "conn -F 2 -d 1 --warmup 0.3", false),
        (
            "conn-tls.json",
            "conn --tls --no-baseline -d 1 --warmup 0.3",
            true,
        ),
    ] {
        let r = run_json(name, args);
        let it = &r["iterations"][0];
        check_intervals(it);
        let c = &it["counters"]["client"];
        let tx = u(&c["transactions"]);
        assert!(tx > 50, "{args}: only {tx} connections");
        // A transaction is a connection, closed by the agent first.
        assert_eq!(u(&c["connections"]), tx, "{args}");
        assert_eq!(u(&c["graceful_closes"]), tx, "{args}");
        assert_eq!(u(&c["errors"]), 0, "{args}");
        assert_eq!(u(&it["bytes"]), 0, "{args}: no payload");
        let agent = u(&it["counters"]["agent"]["connections"]);
        assert!(
            agent.abs_diff(tx) <= tx / 10 + 10,
            "{args}: agent accepted {agent}, client completed {tx}"
        );
        let s = &r["summary"];
        assert_eq!(s["main_metric"], "transaction_rate", "{args}");
        assert!(f(&s["connections_per_s"]) > 0.0, "{args}");
        assert!(f(&s["transactions_per_s"]) > 0.0, "{args}");
        // Connect latency: SYN to established (or handshake done).
        let l = &s["latency_us"];
        let (p50, p99, max) = (f(&l["p50"]), f(&l["p99"]), f(&l["max"]));
        assert!(p50 > 0.0 && p50 <= p99 && p99 <= max, "{args}: {l}");
        if tls {
            assert_eq!(u(&c["tls_handshakes"]), tx, "{args}");
            assert!(f(&s["tls_handshakes_per_s"]) > 0.0, "{args}");
            assert!(!s["tls"].is_null(), "{args}: what was negotiated");
        } else {
            assert_eq!(u(&c["tls_handshakes"]), 0, "{args}");
        }
    }
    // The client resets instead, with or without TLS.
    for args in [
        "conn --close reset -d 1 --warmup 0.3",
        "conn --close reset --tls --no-baseline -d 1 --warmup 0.3",
    ] {
        let r = run_json("conn-reset.json", args);
        let c = &r["iterations"][0]["counters"]["client"];
        assert!(u(&c["transactions"]) > 50, "{args}");
        assert_eq!(u(&c["resets"]), u(&c["transactions"]), "{args}");
        assert_eq!(u(&c["graceful_closes"]), 0, "{args}");
        assert_eq!(u(&c["errors"]), 0, "{args}");
    }
}

#[test]
fn finite_transfers_put_and_get() {
    // stream put 20M/20: each flow sends 20 MiB, gets 20 bytes back.
    let r = run_json("put.json", "stream --bytes 20M -F 2");
    let it = &r["iterations"][0];
    assert_eq!(
        u(&it["counters"]["agent"]["bytes_rx"]),
        2 * 20 * 1024 * 1024
    );
    assert_eq!(u(&it["counters"]["client"]["bytes_rx"]), 2 * 20);
    assert_eq!(u(&it["transactions"]), 2);
    for f in it["flows"]["client"].as_array().unwrap() {
        assert!(f["completed_s"].as_f64().unwrap() > 0.0);
    }
    // stream get 20/20M.
    let r = run_json("get.json", "stream --bytes 20M --direction rx");
    let it = &r["iterations"][0];
    assert_eq!(u(&it["counters"]["client"]["bytes_rx"]), 20 * 1024 * 1024);
    assert_eq!(u(&it["counters"]["agent"]["bytes_rx"]), 20);
    // Repeated transactions for a duration.
    let r = run_json(
        "put-loop.json",
        "stream --bytes 1M --per transaction -d 1 --warmup 0.2",
    );
    assert!(u(&r["summary"]["transactions"]) > 10);
}

#[test]
fn options_reach_the_socket_and_are_reported() {
    let r = run_json("opts.json", "stream --cc reno --sndbuf 256K --rcvbuf 256K --nodelay -d 1 --warmup 0.2 --cpus 0 --agent-cpus 0");
    let it = &r["iterations"][0];
    let f0 = &it["flows"]["client"][0];
    assert_eq!(f0["congestion_control"], "reno");
    // Linux doubles SO_SNDBUF/SO_RCVBUF requests.
    assert_eq!(u(&f0["sndbuf"]), 512 * 1024);
    assert_eq!(u(&f0["rcvbuf"]), 512 * 1024);
    assert_eq!(it["flows"]["agent"][0]["congestion_control"], "reno");
    let p = &it["placement"]["client"][0];
    assert_eq!(p["pinned"], serde_json::json!([0]));
    assert_eq!(p["seen"][0][0], 0);
    assert_eq!(
        it["placement"]["agent"][0]["pinned"],
        serde_json::json!([0])
    );
}

/// The read size reaches the receive calls on the receiving end, in both
/// directions: no read moves more than it, and a bulk receiver's reads
/// are nearly all full ones. By default a receiver reads what the sender
/// writes (16 KiB writes, 16 KiB reads).
#[test]
fn the_read_size_is_what_each_receive_asks_for() {
    let per_read = |r: &Value, side: &str| {
        let it = &r["iterations"][0];
        let fl = &it["flows"][side][0];
        let reads = u(&fl["reads"]);
        assert!(reads > 0, "{side}: no reads counted");
        u(&fl["bytes_rx"]) as f64 / reads as f64
    };
    let r = run_json("rs.json", "stream --read-size 4K -d 1 --warmup 0.2");
    assert_eq!(u(&r["spec"]["read_size"]), 4096);
    let b = per_read(&r, "agent");
    assert!(
        b <= 4096.0 && b > 3000.0,
        "agent reads of {b} B, asked 4 KiB"
    );
    let r = run_json(
        "rs-rx.json",
        "stream --direction rx --read-size 8K -d 1 --warmup 0.2",
    );
    let b = per_read(&r, "client");
    assert!(
        b <= 8192.0 && b > 6000.0,
        "client reads of {b} B, asked 8 KiB"
    );
    let r = run_json("rs-default.json", "stream -m 16K -d 1 --warmup 0.2");
    assert_eq!(u(&r["spec"]["read_size"]), 16384);
    assert!(per_read(&r, "agent") <= 16384.0);
}

#[test]
fn zerocopy_and_ipv6() {
    let r = run_json("zc.json", "stream --zerocopy -d 1 --warmup 0.2");
    assert!(u(&r["summary"]["bytes"]) > 1_000_000);
    let out = tmp("v6.json");
    let args = [
        "run",
        "stream",
        "-6",
        "-d",
        "1",
        "--warmup",
        "0.2",
        "-q",
        "--json",
        out.to_str().unwrap(),
    ];
    let o = run(&args, LIMIT);
    if o.status.success() {
        let r = json(&out);
        assert!(r["agent"]["address"].as_str().unwrap().starts_with("[::1]"));
        assert!(u(&r["summary"]["bytes"]) > 1_000_000);
    } else {
        // Hosts without IPv6 loopback must say so clearly.
        assert!(stderr(&o).contains("linerate:"), "{}", stderr(&o));
    }
}

#[test]
fn two_thousand_flows_on_two_workers() {
    let r = run_json("2000.json", "stream -F 2000 -T 2 -d 2 --warmup 1");
    let it = &r["iterations"][0];
    assert_eq!(it["flows"]["client"].as_array().unwrap().len(), 2000);
    assert_eq!(it["flows"]["agent"].as_array().unwrap().len(), 2000);
    assert_eq!(it["placement"]["client"].as_array().unwrap().len(), 2);
    assert!(u(&r["summary"]["bytes"]) > 100_000_000);
    assert_eq!(u(&it["counters"]["client"]["errors"]), 0);
}

#[test]
fn iterations_report_a_confidence_interval() {
    let r = run_json(
        "iters.json",
        "rr --iterations 3 -d 0.5 --warmup 0.1 --interval 0.25",
    );
    assert_eq!(r["iterations"].as_array().unwrap().len(), 3);
    let c = &r["summary"]["confidence"];
    assert_eq!(u(&c["n"]), 3);
    assert!(f(&c["half_width"]) >= 0.0);
    assert_eq!(f(&c["level_pct"]), 99.0);
}

#[test]
fn json_stream_prints_each_interval_live() {
    let o = run_str(
        "run rr -d 1 --warmup 0.2 --interval 0.25 --json-stream",
        LIMIT,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    let intervals = lines.iter().filter(|l| l["type"] == "interval").count();
    assert_eq!(intervals, 4);
    assert_eq!(lines.last().unwrap()["type"], "summary");
    assert!(
        stderr(&o).contains("trans/s"),
        "the human table goes to stderr with --json-stream"
    );
}

/// The loopback interface's byte counters of the current network namespace.
const LO_BYTES: &str = "awk '/^ *lo:/ {print $2, $10}' /proc/net/dev";

#[test]
fn receivers_count_what_the_kernel_carried() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: a network namespace of its own needs root (CI runs as root)");
        return;
    }
    // A fresh network namespace: its lo carries this test's traffic only,
    // so /proc/net/dev there is the kernel's count of what linerate moved.
    for (name, args) in [
        ("netdev-tx", "stream -m 128K"),
        ("netdev-rx", "stream --direction rx -m 64K -F 2"),
    ] {
        let out = tmp(&format!("{name}.json"));
        let script = format!(
            "ip link set lo up && {LO_BYTES} && {} run {args} -d 2 --warmup 1 -q --json {} >/dev/null && {LO_BYTES}",
            bin(),
            out.display()
        );
        let o = std::process::Command::new("unshare")
            .args(["-n", "sh", "-c", &script])
            .output()
            .unwrap();
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let lines: Vec<Vec<u64>> = stdout(&o)
            .lines()
            .map(|l| l.split_whitespace().map(|v| v.parse().unwrap()).collect())
            .collect();
        // On lo every byte sent is a byte received: rx delta = wire bytes.
        let wire = lines[1][0] - lines[0][0];
        let r = json(&out);
        let it = &r["iterations"][0];
        let side = if args.contains("rx") {
            "client"
        } else {
            "agent"
        };
        let received: u64 = it["flows"][side]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| u(&f["bytes_rx"]))
            .sum();
        // Payload is the wire minus headers (52-66 B per 64 KiB segment on
        // lo) and the control connection: within 1%, and never more.
        assert!(
            received <= wire,
            "{name}: {received} payload > {wire} on the wire"
        );
        assert!(
            received as f64 >= 0.99 * wire as f64,
            "{name}: {received} payload of {wire} on the wire"
        );
        // The window is a part of the flows' whole life.
        assert!(u(&it["bytes"]) <= received && u(&it["bytes"]) > received / 3);
    }
}

#[test]
fn an_agent_frees_every_crr_connection_while_the_test_runs() {
    // Both close modes: the agent closes first (graceful), or reads the
    // client's reset. A connection the agent kept would hold a descriptor
    // until the test ends: thousands per second.
    for close in ["graceful", "reset"] {
        let agent = Agent::start("fd-token", &[]);
        let tf = token_file("fd-token-file", "fd-token");
        let args = remote(
            &agent.addr,
            &tf,
            &["crr", "--close", close, "-d", "2", "--warmup", "0", "-q"],
        );
        let child = spawn(&args);
        std::thread::sleep(Duration::from_millis(1500));
        let fds = std::fs::read_dir(format!("/proc/{}/fd", agent.child.id()))
            .unwrap()
            .count();
        let o = wait(child, LIMIT);
        assert!(o.status.success(), "{close}: {}", stderr(&o));
        assert!(
            fds < 200,
            "{close}: the agent held {fds} descriptors mid-test"
        );
    }
}

/// `--ports N` on one agent: the local agent listens on N loopback
/// addresses and flow i goes to address i mod N, as on a fleet; an agent
/// given by --agent has only its control address, and more ports than an
/// agent has are refused with what it has.
#[test]
fn ports_spread_one_agents_flows_over_its_addresses() {
    for w in ["stream", "rr", "udp-stream"] {
        let r = run_json(
            &format!("ports-{w}.json"),
            &format!("{w} --ports 2 --flows 4 -d 1 --warmup 0.2"),
        );
        let flows = r["iterations"][0]["flows"]["client"]
            .as_array()
            .unwrap_or_else(|| panic!("{w}: no client flows"));
        let mut at = std::collections::BTreeMap::new();
        for f in flows {
            let peer = f["peer"].as_str().unwrap();
            let ip = peer.rsplit_once(':').unwrap().0.to_string();
            *at.entry(ip).or_insert(0) += 1;
        }
        let want: std::collections::BTreeMap<String, i32> =
            [("127.0.0.1".to_string(), 2), ("127.0.0.2".to_string(), 2)].into();
        assert_eq!(at, want, "{w}: flows per address");
        assert!(f(&r["summary"]["throughput_bps"]) > 0.0, "{w}");
    }
    // crr's server listens on both addresses, an acceptor each: with one
    // flow per end (--io threads by default) its worker polls them both.
    let r = run_json(
        "ports-crr.json",
        "crr --ports 2 --flows 2 -d 1 --warmup 0.2",
    );
    let it = &r["iterations"][0];
    assert!(u(&it["transactions"]) > 100, "crr: {}", it["transactions"]);
    assert_eq!(
        u(&it["counters"]["agent"]["errors"]),
        0,
        "crr: {}",
        it["errors"]
    );
    let o = run_str("run rr --ports 17 -d 1", LIMIT);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("--ports 17: this agent has 16 data addresses"),
        "{}",
        stderr(&o)
    );
    let agent = Agent::start("ports-token", &[]);
    let tf = token_file("ports-token-file", "ports-token");
    let o = run(
        &remote(&agent.addr, &tf, &["rr", "--ports", "2", "-d", "1"]),
        LIMIT,
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("--ports 2: this agent has 1 data address "),
        "{}",
        stderr(&o)
    );
}

/// `--rx-poll`: a lone stream's receiver polls an empty socket before it
/// sleeps (auto, on a host with two CPUs or more), in an event loop and in
/// a thread of its own, and counts the time; the CPU per KB leaves the
/// poll out (waiting, not work) while the process CPU keeps it. Off, with
/// several flows, in a mix group or under TLS, nothing polls.
#[test]
fn a_lone_stream_receiver_polls_before_it_sleeps_and_its_cost_leaves_the_poll_out() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Counters at zero are not written.
    let polls = |r: &Value, side: &str| {
        r["iterations"][0]["counters"][side]["rx_polls"]
            .as_u64()
            .unwrap_or(0)
    };
    let r = run_json("poll-auto.json", "stream -d 1 --warmup 0.2");
    assert!(r["spec"].get("rx_poll_us").is_none(), "auto is not written");
    if cpus >= 2 {
        let it = &r["iterations"][0];
        let c = &it["counters"]["agent"];
        assert!(polls(&r, "agent") > 0, "auto polls a lone receiver: {c}");
        // Zero counters are not written: on a busy host every poll may miss.
        assert!(c["rx_poll_hits"].as_u64().unwrap_or(0) <= polls(&r, "agent"));
        assert_eq!(polls(&r, "client"), 0, "the sender never polls");
        let polled_s = c["rx_poll_ns"].as_u64().unwrap_or(0) as f64 / 1e9;
        let cpu_s = f(&it["cpu"]["agent"]["process_cpu_s"]);
        let kb = u(&it["bytes"]) as f64 / 1024.0;
        let want = (cpu_s - polled_s).max(0.0) * 1e6 / kb;
        let got = f(&it["cost"]["agent"]["us_per_kb"]);
        assert!(
            (got - want).abs() <= want * 1e-6 + 1e-9,
            "µs/KB {got} must be the process CPU less the poll ({want})"
        );
    }
    // In a thread of its own, the client receiving: polls, then sleeps in
    // poll(2) after a miss, and the stream still moves.
    let r = run_json(
        "poll-threads.json",
        "stream --direction rx --io threads --rx-poll 50us -d 1 --warmup 0.2",
    );
    assert_eq!(u(&r["spec"]["rx_poll_us"]), 50);
    assert!(polls(&r, "client") > 0);
    assert!(f(&r["summary"]["throughput_bps"]) > 1e8);
    for (name, args) in [
        ("poll-off.json", "stream --rx-poll off -d 1 --warmup 0.2"),
        ("poll-flows.json", "stream -F 2 -d 1 --warmup 0.2"),
        ("poll-mix.json", "mix stream rr -d 1 --warmup 0.2"),
        (
            "poll-tls.json",
            "stream --tls --no-baseline -d 1 --warmup 0.2",
        ),
    ] {
        let r = run_json(name, args);
        // A mix's stream is its first group.
        let r = r["groups"].get(0).unwrap_or(&r);
        assert!(u(&r["iterations"][0]["bytes"]) > 0, "{args}: nothing moved");
        for side in ["client", "agent"] {
            assert_eq!(polls(r, side), 0, "{args}: {side} polled");
        }
    }
}

/// `--rx-poll` is a stream's, with its unit, in its range, on a receiver
/// that has its worker to itself.
#[test]
fn rx_poll_refuses_what_it_cannot_do() {
    for (args, says) in [
        ("run rr --rx-poll 20us -d 1", "applies to stream"),
        ("run stream --rx-poll 20 -d 1", "with its unit"),
        ("run stream --rx-poll 5ms -d 1", "1us to 1000us"),
        (
            "run stream -F 4 --workers 1 --rx-poll 20us -d 1",
            "its worker to itself",
        ),
        (
            "run stream --direction bidir --rx-poll 20us -d 1",
            "only receives",
        ),
    ] {
        let o = run_str(args, LIMIT);
        assert_eq!(o.status.code(), Some(2), "{args}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args}: {}", stderr(&o));
        assert_no_panic(&o);
    }
}
