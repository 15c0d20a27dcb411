//! `--metrics`: a result as OpenMetrics text, checked by Prometheus's own
//! promtool (`promtool check metrics`: the text parser and its lints),
//! and read back: the histogram is cumulative and counts every latency,
//! the gauges carry the JSON result's figures in base units.
//! scripts/test.sh takes promtool from Debian's prometheus package
//! (target/tools/promtool) without installing it.

mod common;
use common::*;
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

fn promtool() -> PathBuf {
    let mut places: Vec<PathBuf> = std::env::var_os("LINERATE_PROMTOOL")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    places.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/tools/promtool"));
    places.push(PathBuf::from("/usr/bin/promtool"));
    places.into_iter().find(|p| p.exists()).expect(
        "promtool not found: scripts/test.sh puts it in target/tools (or set LINERATE_PROMTOOL)",
    )
}

/// promtool's verdict on `text`: it must parse and lint clean.
fn check(text: &str) {
    use std::io::Write;
    let mut c = Command::new(promtool())
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs");
    c.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let o = c.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "promtool: {said}\n{text}");
    assert!(said.trim().is_empty(), "promtool's lints: {said}\n{text}");
}

/// The samples of `text`: series (name with labels) to value.
fn samples(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').expect("a sample");
            let v = if v == "+Inf" {
                f64::INFINITY
            } else {
                v.parse().expect("a number")
            };
            (k.to_string(), v)
        })
        .collect()
}

#[test]
fn an_rr_result_is_promtool_clean_with_a_latency_histogram() {
    let out = tmp("metrics-rr.txt");
    let json = tmp("metrics-rr.json");
    let o = run(
        &[
            "run",
            "rr",
            "-d",
            "2",
            "-q",
            "--metrics",
            out.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&out).unwrap();
    check(&text);
    assert!(text.ends_with("# EOF\n"));
    let s = samples(&text);
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let l = r#"{workload="rr",lab=""}"#;
    // The gauges are the result's figures, in base units.
    let tps = s[&format!("linerate_transactions_per_second{l}")];
    let want = r["summary"]["transactions_per_s"].as_f64().unwrap();
    assert!((tps / want - 1.0).abs() < 1e-6, "{tps} vs {want}");
    let p99 = s[&format!("linerate_latency_p99_seconds{l}")];
    let want = r["summary"]["latency_us"]["p99"].as_f64().unwrap() * 1e-6;
    assert!((p99 / want - 1.0).abs() < 1e-6, "{p99} vs {want}");
    // The histogram: cumulative, its +Inf bucket every latency, the
    // median's bucket about half of them.
    let buckets: Vec<(f64, f64)> = s
        .iter()
        .filter_map(|(k, v)| {
            let le = k.strip_prefix("linerate_latency_seconds_bucket{")?;
            let le = le.split("le=\"").nth(1)?.trim_end_matches("\"}");
            Some((
                if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().unwrap()
                },
                *v,
            ))
        })
        .collect();
    let mut sorted = buckets.clone();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert!(sorted.len() >= 20, "{sorted:?}");
    assert!(sorted.windows(2).all(|w| w[0].1 <= w[1].1), "{sorted:?}");
    let count = s[&format!("linerate_latency_seconds_count{l}")];
    assert_eq!(sorted.last().unwrap().1, count);
    assert!(
        count >= r["summary"]["transactions"].as_f64().unwrap() * 0.9,
        "{count}"
    );
    let p50 = r["summary"]["latency_us"]["p50"].as_f64().unwrap() * 1e-6;
    let below = sorted
        .iter()
        .filter(|b| b.0 < p50)
        .map(|b| b.1)
        .fold(0.0, f64::max);
    let above = sorted.iter().find(|b| b.0 >= p50).unwrap().1;
    assert!(
        below <= count * 0.51 && above >= count * 0.49,
        "{sorted:?} p50 {p50}"
    );
    let sum = s[&format!("linerate_latency_seconds_sum{l}")];
    assert!(sum > 0.0 && sum / count < 0.1, "mean {}", sum / count);
}

#[test]
fn a_stream_to_standard_output_is_the_metrics_alone() {
    let o = run(
        &["run", "stream", "-d", "1", "--metrics", "-"],
        Duration::from_secs(60),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    check(&text);
    let s = samples(&text);
    // Bytes, Prometheus's base unit.
    let bytes = s[r#"linerate_throughput_bytes_per_second{workload="stream",lab=""}"#];
    assert!(bytes > 1e5, "{bytes}");
    let cpu = s[r#"linerate_client_cpu_ratio{workload="stream",lab=""}"#];
    assert!(cpu > 0.0 && cpu <= 1.0, "{cpu}");
    // The table went to standard error.
    assert!(stderr(&o).contains("throughput"), "{}", stderr(&o));
}

#[test]
fn metrics_bad_input_is_one_line() {
    for (args, says) in [
        (
            "run rr -d 1 --metrics - --json -",
            "both write to standard output",
        ),
        (
            "run rr -d 1 --metrics /nonexistent-dir/m.txt",
            "--metrics /nonexistent-dir/m.txt",
        ),
    ] {
        let o = run_str(args, Duration::from_secs(30));
        assert_no_panic(&o);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args}: {e}");
        assert!(e.contains(says), "{args}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{args}: {e}");
    }
}

/// Every kind's result lints clean: its own metrics (rpm's, UDP's CPU per
/// packet, ...) are named in base units too.
#[test]
fn other_kinds_results_are_promtool_clean() {
    for args in [
        "run udp-stream -d 1 --metrics -",
        "run udp-rr -d 1 --metrics -",
        "run crr -d 1 --metrics -",
        "run tls-handshake -d 1 --metrics -",
        "run rpm -d 3 --rpm-interval 250ms --metrics -",
    ] {
        let o = run_str(args, Duration::from_secs(60));
        assert!(o.status.success(), "{args}: {}", stderr(&o));
        let text = stdout(&o);
        check(&text);
        assert!(
            text.lines().filter(|l| !l.starts_with('#')).count() >= 5,
            "{args}: {text}"
        );
    }
    let o = run_str(
        "run rpm -d 3 --rpm-interval 250ms --metrics -",
        Duration::from_secs(60),
    );
    assert!(stdout(&o).contains("linerate_rpm{workload=\"rpm\",lab=\"\"} "));
}

/// GET `path` from `addr` over HTTP/1.1: (status line, body).
fn get(addr: &str, path: &str) -> Option<(String, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    Some((head.lines().next()?.to_string(), body.to_string()))
}

/// `watch --metrics-listen`: a scrape between two runs gets the runs, the
/// changes and the newest run's figures, and promtool takes it.
#[test]
fn a_watch_serves_its_metrics_to_a_scrape() {
    let store = tmp("scrape.db");
    let _ = std::fs::remove_file(&store);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let child = spawn(&[
        "watch",
        "--every",
        "4s",
        "--runs",
        "2",
        "--label",
        "scrape",
        "--metrics-listen",
        &addr,
        "--history",
        store.to_str().unwrap(),
        "--",
        "run",
        "rr",
        "-d",
        "0.3",
    ]);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let body = loop {
        assert!(std::time::Instant::now() < deadline, "no scrape with a run");
        if let Some((status, body)) = get(&addr, "/metrics") {
            assert!(status.contains("200"), "{status}");
            if body.contains("status=\"ok\"} 1") {
                break body;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    check(&body);
    let s = samples(&body);
    assert_eq!(
        s["linerate_watch_runs_total{watch=\"scrape\",status=\"failed\"}"],
        0.0
    );
    assert_eq!(s["linerate_watch_changes_total{watch=\"scrape\"}"], 0.0);
    // When the run started, from the store: after the watch began, not in
    // the future (whole seconds).
    let last = s["linerate_watch_last_run_timestamp_seconds{watch=\"scrape\"}"];
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        last >= started.floor() && last <= now,
        "{last} not in {started}..{now}"
    );
    let tps = s
        .iter()
        .find(|(k, _)| k.starts_with("linerate_transactions_per_second{watch=\"scrape\",series=\""))
        .map(|(_, v)| *v)
        .unwrap_or_else(|| panic!("{body}"));
    assert!(tps > 100.0, "{tps}");
    let (status, _) = get(&addr, "/other").unwrap();
    assert!(status.contains("404"), "{status}");
    let o = wait(child, Duration::from_secs(60));
    assert!(o.status.success(), "{}", stderr(&o));
    // A port in use: one line, exit 2, before any run.
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = held.local_addr().unwrap().to_string();
    let o = run(
        &[
            "watch",
            "--metrics-listen",
            &taken,
            "--history",
            store.to_str().unwrap(),
            "--",
            "run",
            "rr",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot listen there"), "{}", stderr(&o));
}
