//! `linerate run rpm`, the responsiveness test's client
//! (draft-ietf-ippm-responsiveness-08): on loopback against a server it
//! starts, against an agent's `serve --rpm` named by `--url`, sequentially,
//! through a lab with a deep FIFO and with fq_codel, and bad input.

mod common;
use common::*;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

/// Quick settings: quarter-second intervals, so the draft's MAD of 4 fits
/// a short test.
const QUICK: &[&str] = &["--rpm-interval", "250ms", "-d", "6"];

/// The responsiveness figures of a result, checked for what every run has.
fn figures(r: &serde_json::Value) -> &serde_json::Value {
    let x = &r["summary"]["responsiveness"];
    assert!(f(&x["rpm"]) > 0.0, "{x}");
    assert!(f(&x["foreign_rpm"]) > 0.0 && f(&x["self_rpm"]) > 0.0, "{x}");
    assert!(
        (f(&x["rpm"]) - (f(&x["foreign_rpm"]) + f(&x["self_rpm"])) / 2.0).abs() < 1e-6,
        "RPM is the mean of foreign and self RPM: {x}"
    );
    assert!(f(&x["idle_rtt_us"]) > 0.0, "{x}");
    assert!(
        u(&x["foreign_probes"]) > 0 && u(&x["self_probes"]) > 0,
        "{x}"
    );
    assert!(
        ["low", "medium", "high"].contains(&x["confidence"].as_str().unwrap_or("")),
        "{x}"
    );
    assert_eq!(x["draft"], "draft-ietf-ippm-responsiveness-08");
    assert!(!x["intervals"].as_array().unwrap().is_empty(), "{x}");
    x
}

#[test]
fn on_loopback_rpm_loads_both_ways_and_reports_the_drafts_figures() {
    let mut args = vec!["rpm"];
    args.extend_from_slice(QUICK);
    let (text, r) = run_json_text("rpm-loopback.json", &args, LIMIT);
    let x = figures(&r);
    assert_eq!(r["summary"]["status"], "ok", "{r}");
    // Both directions at once, each with at least one connection.
    assert!(f(&x["capacity_down_bps"]) > 1e8, "{x}");
    assert!(f(&x["capacity_up_bps"]) > 1e8, "{x}");
    assert!(
        u(&x["down_connections"]) >= 1 && u(&x["up_connections"]) >= 1,
        "{x}"
    );
    // Over TLS: a TLS handshake per foreign probe.
    assert!(f(&x["tls_handshake_us"]) > 0.0, "{x}");
    // CPU of each end: the client's threads and the server's, apart.
    let cpu = &r["summary"]["cpu"];
    assert!(f(&cpu["client"]["process_util_pct"]) > 0.0, "{cpu}");
    assert!(f(&cpu["agent"]["process_util_pct"]) > 0.0, "{cpu}");
    assert!(f(&cpu["client"]["us_per_kb"]) > 0.0, "{cpu}");
    // The human lines, in the draft's words.
    assert!(text.contains(" RPM ("), "{text}");
    assert!(text.contains("confidence"), "{text}");
    assert!(text.contains("capacity"), "{text}");
}

#[test]
fn sequential_loads_download_then_upload_in_clear() {
    let mut args = vec!["rpm", "--rpm-order", "sequential", "--rpm-clear"];
    args.extend_from_slice(QUICK);
    let r = run_json_args("rpm-sequential.json", &args, Duration::from_secs(180));
    let x = figures(&r);
    // No TLS: no TLS handshake in the foreign probes.
    assert_eq!(f(&x["tls_handshake_us"]), 0.0, "{x}");
    let iv = x["intervals"].as_array().unwrap();
    let first = &iv[0];
    let last = iv.last().unwrap();
    assert!(
        u(&first["down_connections"]) >= 1 && u(&first["up_connections"]) == 0,
        "{first}"
    );
    assert!(
        u(&last["up_connections"]) >= 1 && u(&last["down_connections"]) == 0,
        "{last}"
    );
}

/// `--url` names another server: an agent's `serve --rpm` here.
#[test]
fn url_tests_an_agents_rpm_server() {
    let agent = RpmAgent::start(true);
    let url = agent.url.clone();
    let mut args = vec!["rpm", "--url", &url];
    args.extend_from_slice(QUICK);
    let r = run_json_args("rpm-url.json", &args, LIMIT);
    drop(agent);
    let x = figures(&r);
    assert_eq!(x["url"], url.as_str());
    // The server is another process: its CPU is not this run's to claim.
    assert!(
        r["summary"]["cpu"]["agent"]["process_util_pct"].is_null(),
        "{r}"
    );
    assert!(f(&r["summary"]["cpu"]["client"]["process_util_pct"]) > 0.0);
    assert!(f(&x["capacity_down_bps"]) > 1e8, "{x}");
}

#[test]
fn bad_rpm_input_is_one_line_and_quick() {
    for (args, code, says) in [
        ("run rpm --url ftp://x/", 2, "an http:// or https:// URL"),
        ("run rpm --mad 1", 2, "--mad 1"),
        ("run stream --mad 4", 2, "apply to rpm"),
        ("run rpm --agent 127.0.0.1:1", 2, "drop --agent"),
        ("run rpm --rate 100", 2, "a bit rate"),
        ("run rpm --rate 100kbit", 2, "at least 1.00 Mbit/s"),
        ("run rpm --search p99<=1ms", 2, "rpm>=VALUE"),
        ("run rr --search rpm>=1000", 2, "rpm>= on rpm"),
        ("run rpm --search rpm>=1000 --rate 10mbit", 2, "drop --rate"),
        (
            "run rpm --url http://127.0.0.1:1/.well-known/nq",
            1,
            "cannot reach 127.0.0.1:1",
        ),
    ] {
        let o = run_str(args, Duration::from_secs(30));
        assert_no_panic(&o);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(code), "{args}: {e}");
        assert!(e.contains(says), "{args}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{args}: {e}");
    }
    // A target the command line parses: its usage error.
    let o = run_str("run rpm --search rpm<=1000", Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("RPM is a floor"), "{}", stderr(&o));
}

/// The issue's lab: 100 Mbit/s, 20 ms. A deep FIFO (4 MiB, 335 ms) holds
/// every probe behind the load: RPM at least 5x below the idle round
/// trip's; fq_codel keeps new flows' packets apart from the load's and
/// gives at least 3x the FIFO's RPM.
#[test]
fn through_a_slow_link_a_fifo_bloats_and_fq_codel_keeps_rpm_up() {
    if !is_root() {
        eprintln!("skipped: needs root for the lab");
        return;
    }
    let mut rpm = Vec::new();
    for aqm in ["fifo", "fq_codel"] {
        let (lab, _) = Lab::up(
            &format!("rpm-{}", &aqm[..2]),
            &format!("--rtt 20ms --rate 100mbit --queue 4M --aqm {aqm} --no-calibrate"),
        );
        let r = run_json_args(
            &format!("rpm-lab-{aqm}.json"),
            &[
                "rpm",
                "--lab",
                &lab.name,
                "--rpm-interval",
                "500ms",
                "-d",
                "10",
            ],
            LIMIT,
        );
        let x = figures(&r).clone();
        // The link's rate bounds what was counted each way.
        assert!(f(&x["capacity_down_bps"]) < 101e6, "{x}");
        assert!(f(&x["capacity_up_bps"]) < 101e6, "{x}");
        assert!(f(&x["capacity_down_bps"]) > 50e6, "{x}");
        // The idle round trip is the lab's.
        let idle_ms = f(&x["idle_rtt_us"]) / 1e3;
        assert!((19.0..40.0).contains(&idle_ms), "{x}");
        assert!(r["lab"].is_object(), "the lab's record: {r}");
        rpm.push((f(&x["rpm"]), 60_000.0 / idle_ms));
    }
    let (fifo, idle) = rpm[0];
    let (fq, _) = rpm[1];
    assert!(fifo * 5.0 <= idle, "FIFO RPM {fifo:.0} vs idle {idle:.0}");
    assert!(fq >= 3.0 * fifo, "fq_codel RPM {fq:.0} vs FIFO {fifo:.0}");
}

/// `--search 'rpm>=1000'` through the FIFO lab: the saturating test
/// bloats the queue (RPM far under 1000), a load well under the link's
/// rate leaves it empty (RPM near the idle round trip's), so the search
/// finds the most load each way that keeps RPM at 1000: below the link's
/// rate, and every step's load is what was offered (the cap holds).
#[test]
fn an_rpm_search_finds_the_load_a_fifo_carries_at_1000_rpm() {
    if !is_root() {
        eprintln!("skipped: needs root for the lab");
        return;
    }
    let (lab, _) = Lab::up(
        "rpm-se",
        "--rtt 20ms --rate 100mbit --queue 4M --aqm fifo --no-calibrate",
    );
    let r = run_json_args(
        "rpm-search.json",
        &[
            "rpm",
            "--lab",
            &lab.name,
            "--rpm-interval",
            "500ms",
            "-d",
            "8",
            "--search",
            "rpm>=1000",
            "--search-resolution",
            "5",
        ],
        Duration::from_secs(400),
    );
    let s = &r["search"];
    eprintln!("rpm search: {s}");
    assert_eq!(s["target"], "rpm>=1000", "{s}");
    let pts = s["points"].as_array().unwrap();
    assert!(pts.iter().all(|p| p["bits"] == true), "{s}");
    // The saturating step: the FIFO's bloat.
    let peak = &pts[0];
    assert_eq!(peak["phase"], "peak", "{s}");
    assert!(f(&peak["figure"]["value"]) < 1000.0, "{s}");
    assert!(f(&peak["achieved_per_s"]) > 50e6, "{s}");
    // A capacity under the link's rate, met there with the load offered.
    let cap = f(&s["capacity_per_s"]);
    assert!((10e6..100e6).contains(&cap), "capacity {cap}: {s}");
    for p in pts.iter().filter(|p| p["met"] == true) {
        assert!(f(&p["figure"]["value"]) >= 1000.0, "{p}");
        let offered = f(&p["rate_per_s"]);
        let carried = f(&p["achieved_per_s"]);
        assert!(
            carried >= 0.97 * offered && carried <= 1.03 * offered,
            "{p}"
        );
    }
    // Every missed rate is above the capacity.
    for p in pts
        .iter()
        .filter(|p| p["met"] == false && p["phase"] != "peak")
    {
        assert!(f(&p["rate_per_s"]) > cap, "{p}");
    }
    // The result is the step at the capacity; the text says so in bits.
    let x = figures(&r);
    assert!(f(&x["rpm"]) >= 1000.0, "{x}");
    assert!(f(&x["capacity_down_bps"]) <= 1.03 * cap, "{x}");
}

/// An rpm search as a study point: its report has the capacity in bits/s
/// (`capacity_bps`), the RPM drawn against the offered load in Mbit/s with
/// the floor, and the capacity in words ("the path holds rpm >= ...").
/// On loopback RPM falls as the capped load nears what the host carries.
#[test]
fn an_rpm_search_in_a_study_reports_its_curve_and_capacity() {
    let study = tmp("rpm-search.toml");
    std::fs::write(
        &study,
        r#"title = "rpm: the most load at 20,000 RPM"
description = "An RPM search as a study point."
[test]
workload = "rpm"
duration = "3s"
rpm_interval = "250ms"
search = "rpm>=20000"
search_resolution = 25
[[case]]
label = "loopback"
"#,
    )
    .unwrap();
    let dir = study_ok(&study, &tmp("rpm-search-out"), Duration::from_secs(300));
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        md.contains("Capacity at the RPM floor (load each way)"),
        "{md}"
    );
    assert!(md.contains("rpm against offered load"), "{md}");
    let svg = std::fs::read_to_string(dir.join("plots/capacity-1.svg")).unwrap();
    assert!(svg.contains("offered load each way (Mbit/s)"), "{svg}");
    assert!(svg.contains("target rpm &gt;= 20000 RPM") || svg.contains("target rpm >= 20000 RPM"));
    // Light loads keep loopback's RPM far above the floor (about 100,000
    // at an eighth of the peak's load): a capacity is found.
    assert!(
        md.contains("loopback: the path holds rpm >= 20000 RPM up to "),
        "{md}"
    );
}

/// Several clients toward one server in a rack lab (`lab up --clients
/// 2`): an agent in each client namespace runs the draft's method from one
/// scheduled start against the RPM server this run starts in the server's
/// namespace (its generated certificate carried to the agents in the
/// spec); each client's path is its own 100 Mbit/s link, so together they
/// carry more than one link's rate.
#[test]
fn two_rack_clients_run_rpm_against_one_server_on_one_window() {
    if !is_root() {
        eprintln!("skipped: needs root for the lab");
        return;
    }
    let (lab, _) = Lab::up(
        "rpm-rack",
        "--clients 2 --servers 1 --rtt 10ms --rate 100mbit --queue 1M --aqm fq_codel --no-calibrate",
    );
    let (text, r) = run_json_text(
        "rpm-rack.json",
        &[
            "rpm",
            "--lab",
            &lab.name,
            "--rpm-interval",
            "250ms",
            "-d",
            "6",
        ],
        LIMIT,
    );
    let x = figures(&r).clone();
    let clients = x["clients"].as_array().expect("each client's figures");
    assert_eq!(clients.len(), 2, "{x}");
    for c in clients {
        assert!(f(&c["capacity_down_bps"]) > 30e6, "{c}");
        assert!(f(&c["capacity_down_bps"]) < 101e6, "one link's rate: {c}");
        let idle_ms = f(&c["idle_rtt_us"]) / 1e3;
        assert!((9.0..30.0).contains(&idle_ms), "{c}");
    }
    assert!(f(&x["capacity_down_bps"]) > 101e6, "two links at once: {x}");
    assert!(
        u(&x["foreign_probes"]) > 0 && u(&x["self_probes"]) > 0,
        "{x}"
    );
    // Both started together, and the server's CPU is this process's.
    let skew = f(&r["iterations"][0]["start_skew_us"]);
    assert!(skew < 50_000.0, "{skew} µs");
    assert!(
        f(&r["summary"]["cpu"]["agent"]["process_util_pct"]) > 0.0,
        "{r}"
    );
    assert!(r["lab"].is_object(), "the lab's record: {r}");
    assert!(text.contains("clients      c1 "), "{text}");
    // A study's rpm point in that lab runs on both clients too.
    let file = tmp("rpm-rack-study.toml");
    std::fs::write(
        &file,
        "title = \"rpm, two clients\"\ndescription = \"a rack\"\n[test]\nduration = \"4s\"\nrpm_interval = \"250ms\"\n[[case]]\nlabel = \"rpm\"\nworkload = \"rpm\"\n",
    )
    .unwrap();
    let out = tmp("rpm-rack-study");
    let _ = std::fs::remove_dir_all(&out);
    let o = run(
        &[
            "study",
            "run",
            file.to_str().unwrap(),
            "--lab",
            &lab.name,
            "--out",
            out.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let point = std::fs::read_to_string(first_dir(&out).join("points/rpm.r1.json")).unwrap();
    let p: serde_json::Value = serde_json::from_str(&point).unwrap();
    assert_eq!(
        p["hosts"].as_array().map(Vec::len),
        Some(2),
        "{}",
        p["hosts"]
    );
    let _ = std::fs::remove_dir_all(&out);
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The other way round: linerate's client against the network-quality
/// project's Go server (networkqualityd, built from its public source by
/// bench/nq_server.sh), over HTTP/2 and TLS with a certificate made here.
#[test]
fn rpm_measures_the_network_quality_go_server() {
    let built = std::process::Command::new("bench/nq_server.sh")
        .output()
        .unwrap();
    if !built.status.success() {
        eprintln!(
            "skipped: networkqualityd could not be built here (Go and its module proxy): {}",
            String::from_utf8_lossy(&built.stderr)
        );
        return;
    }
    let server = String::from_utf8_lossy(&built.stdout).trim().to_string();
    // A leaf, not a CA: rustls refuses a CA certificate as the server's.
    let c = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let (crt, key) = (tmp("nq-crt.pem"), tmp("nq-key.pem"));
    std::fs::write(&crt, c.cert.pem()).unwrap();
    std::fs::write(&key, c.signing_key.serialize_pem()).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let mut go = std::process::Command::new(&server)
        .args(["-listen-addr", "127.0.0.1", "-public-name", "127.0.0.1"])
        .args(["-public-port", &port])
        .args([
            "-cert-file",
            crt.to_str().unwrap(),
            "-key-file",
            key.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let up = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        std::net::TcpStream::connect(format!("127.0.0.1:{port}")).is_ok()
    });
    let url = format!("https://127.0.0.1:{port}/.well-known/nq");
    let mut args = vec!["rpm", "--url", &url, "--tls-ca", crt.to_str().unwrap()];
    args.extend_from_slice(&["--tls-name", "127.0.0.1"]);
    args.extend_from_slice(QUICK);
    let result = up.then(|| run_json_args("rpm-goserver.json", &args, LIMIT));
    let _ = go.kill();
    let _ = go.wait();
    let r = result.expect("networkqualityd did not listen");
    let x = figures(&r);
    assert!(f(&x["capacity_down_bps"]) > 1e8, "{x}");
    assert!(f(&x["capacity_up_bps"]) > 1e8, "{x}");
    assert!(f(&x["tls_handshake_us"]) > 0.0, "{x}");
}
