//! Capacity at a latency target (`--search`) and runs that size themselves
//! (`--duration auto`), on loopback with real sockets and a real memcached.

mod common;

use common::*;
use serde_json::Value;
use std::time::Duration;

/// Each test here loads both cores (searches, a steady run that must look
/// steady): they take turns, or one's load makes the other's figures drift.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A closed-loop rr under `-d auto`, its ends pinned apart (unpinned on
/// 2 CPUs it switches between two levels). On a quiet host it is steady;
/// on a VM whose neighbours come and go it is not: on the AMD EPYC VM of
/// 2026-11-29 its rate sat 20-30% low for 1-4 s at a time, three times in
/// 20 s, and no honest interval of its mean is narrow then.
const PINNED_AUTO_RR: &[&str] = &[
    "rr",
    "--cpus",
    "0",
    "--agent-cpus",
    "1",
    "-d",
    "auto",
    "--max-duration",
    "20s",
    "-i",
    "0.2",
    "--warmup",
    "0.2",
];

/// A load that is steady on any host: an open loop offering 5,000
/// transactions/s as a Poisson process, far under what either kind of VM
/// serves (12-20k/s), so a slow or stalled second is caught up and each
/// interval's count varies only as the arrivals do (about 3%). What `-d
/// auto` must do with it does not depend on the host's mood. Pinned and
/// sized as `PINNED_AUTO_RR`.
fn steady_auto_rr() -> Vec<&'static str> {
    let mut a = vec!["rr", "--rate", "5000", "--arrivals", "poisson"];
    a.extend_from_slice(&PINNED_AUTO_RR[1..]);
    a
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The search's points bracket its capacity: the capacity is the highest
/// offered rate that met on every run there (a rate that met once and
/// missed its confirmation counts as missed), it was confirmed (its last
/// step is a confirmation that met) unless the search says why not, a rate
/// above it missed, and the capacity and the missed rate are within the
/// resolution.
fn assert_brackets(r: &Value) {
    let s = &r["search"];
    let cap = f(&s["capacity_per_s"]);
    let points = s["points"].as_array().expect("points");
    assert!(points.len() >= 3, "{s}");
    assert_eq!(
        points[0]["phase"], "peak",
        "the search starts at the closed-loop peak"
    );
    assert!(points[0]["rate_per_s"].is_null());
    let open: Vec<&Value> = points
        .iter()
        .filter(|p| !p["rate_per_s"].is_null())
        .collect();
    let rate = |p: &Value| f(&p["rate_per_s"]);
    let missed_at = |x: f64| open.iter().any(|p| p["met"] == false && rate(p) == x);
    let met_max = open
        .iter()
        .filter(|p| p["met"] == true && !missed_at(rate(p)))
        .map(|p| rate(p))
        .fold(0.0, f64::max);
    assert_eq!(
        met_max, cap,
        "the capacity is the highest rate that met on every run: {s}"
    );
    let stopped = s["stopped"].as_str().unwrap();
    if stopped.contains("resolution") {
        let last = points.last().unwrap();
        assert_eq!(last["phase"], "confirm", "{s}");
        assert_eq!(rate(last), cap, "{s}");
        assert_eq!(last["met"], true, "{s}");
    }
    let above: Vec<&&Value> = open.iter().filter(|p| rate(p) > cap).collect();
    assert!(
        !above.is_empty(),
        "no rate above the capacity was tried: {s}"
    );
    // Above it, every rate missed on some run.
    assert!(above.iter().all(|p| missed_at(rate(p))), "{s}");
    let missed = f(&s["missed_per_s"]);
    assert!(missed > cap);
    if s["stopped"].as_str().unwrap().contains("resolution") {
        assert!(missed <= cap * 1.02 + 1e-6, "{s}");
    }
    for p in &open {
        // Each point carries its percentiles and its verdict in words.
        assert!(p["p99_us"].as_f64().is_some(), "{p}");
        assert!(!p["why"].as_str().unwrap().is_empty());
        // A point that met had its samples: 100 beyond p99, unless the
        // window's cap cut it short (60 s: never here).
        if p["met"] == true {
            assert!(f(&p["figure"]["samples"]) >= 10_000.0, "{p}");
            assert!(f(&p["figure"]["value"]) <= f(&s_limit(r)), "{p}");
        }
    }
    // The result is the step at the capacity.
    assert_eq!(f(&r["spec"]["rate"]), cap);
}

/// The target's limit in µs, read back from its text.
fn s_limit(r: &Value) -> Value {
    let t = r["search"]["target"].as_str().unwrap();
    let us = if let Some(v) = t.strip_suffix("us") {
        v.split("<=").nth(1).unwrap().parse::<f64>().unwrap()
    } else if let Some(v) = t.strip_suffix("ms") {
        1e3 * v.split("<=").nth(1).unwrap().parse::<f64>().unwrap()
    } else {
        panic!("{t}")
    };
    Value::from(us)
}

#[test]
fn an_rr_search_on_loopback_brackets_its_capacity() {
    let _turn = alone();
    let (text, r) = run_json_text(
        "search-rr",
        &[
            "rr",
            "--search",
            "p99<=300us",
            "--warmup",
            "0.2",
            "--flows",
            "2",
        ],
        Duration::from_secs(240),
    );
    assert_brackets(&r);
    assert_eq!(r["search"]["target"], "p99<=300us");
    assert!(
        text.contains("capacity at p99 <= 300.0 µs"),
        "the capacity in words: {text}"
    );
    assert!(text.contains("capacity search p99<=300us"), "{text}");
}

#[test]
fn a_memcached_search_brackets_its_capacity() {
    let _turn = alone();
    if std::process::Command::new("memcached")
        .arg("-V")
        .output()
        .is_err()
    {
        eprintln!("skipped: memcached is not installed (scripts/test.sh installs it)");
        return;
    }
    let r = run_json_args(
        "search-mc",
        &[
            "memcache",
            "--service",
            "memcached -t 1 -m 64",
            "--keys",
            "1000",
            "--values",
            "100",
            "--flows",
            "4",
            "--search",
            "p99<=1ms",
            "--warmup",
            "0.2",
        ],
        Duration::from_secs(300),
    );
    assert_brackets(&r);
    // memcached's own CPU share is on every open-loop point.
    let pts = r["search"]["points"].as_array().unwrap();
    assert!(pts
        .iter()
        .filter(|p| !p["rate_per_s"].is_null())
        .all(|p| p["server_cpu_pct"].as_f64().is_some()));
}

#[test]
fn duration_auto_stops_early_when_steady_and_runs_to_its_bound_when_drifting() {
    let _turn = alone();
    // A steady load settles within seconds.
    let steady = run_json_args("auto-steady", &steady_auto_rr(), Duration::from_secs(60));
    let a = &steady["summary"]["auto"];
    assert_eq!(a["stopped"], "stationary", "{a}");
    let ran_steady = f(&a["ran_s"]);
    assert!(ran_steady < 15.0, "a steady test ran {ran_steady} s: {a}");
    assert!(f(&a["half_width_pct"]) <= 2.5, "{a}");
    // Its mean is the offered rate's, within the claim.
    let mean = f(&a["mean"]);
    assert!((mean / 5000.0 - 1.0).abs() < 0.05, "{a}");
    // The figures are the kept intervals': the window is theirs.
    let it = &steady["iterations"][0];
    let ivs = it["intervals"].as_array().unwrap();
    assert_eq!(ivs.len() as f64, f(&a["intervals"]), "{a}");
    let spans: f64 = ivs.iter().map(|i| f(&i["end_s"]) - f(&i["start_s"])).sum();
    let window = f(&it["duration_s"]);
    assert!(
        (window - spans).abs() < 0.05,
        "{window} s for intervals of {spans} s"
    );
    assert!(window <= ran_steady + 1e-6);
    // A closed loop is as steady as the host: it settles with a narrow
    // interval or runs to its bound and says why, never stops early on
    // a wide one nor runs past the bound.
    let closed = run_json_args("auto-closed", PINNED_AUTO_RR, Duration::from_secs(60));
    let c = &closed["summary"]["auto"];
    eprintln!("closed loop under -d auto: {c}");
    let ran = f(&c["ran_s"]);
    assert!(ran <= 20.25, "{c}");
    if c["stopped"] == "stationary" {
        assert!(f(&c["half_width_pct"]) <= 2.5, "{c}");
    } else {
        assert!(ran >= 19.75, "{c}");
        let why = c["stopped"].as_str().unwrap();
        assert!(why == "bound_wide" || why == "bound_trending", "{c}");
        if why == "bound_wide" {
            assert!(f(&c["half_width_pct"]) > 2.5, "{c}");
        }
    }
    // An open loop whose rate keeps rising never settles: it runs to its
    // bound, and not past it.
    let bound = 12.0;
    let drifting = run_json_args(
        "auto-drift",
        &[
            "rr",
            "--rate",
            "2000",
            "--rate-ramp",
            "60s",
            "-d",
            "auto",
            "--max-duration",
            "12s",
            "-i",
            "0.2",
            "--warmup",
            "0.2",
        ],
        Duration::from_secs(60),
    );
    let d = &drifting["summary"]["auto"];
    let ran = f(&d["ran_s"]);
    assert!(
        ran >= bound - 0.25 && ran <= bound + 0.25,
        "bound {bound} s, ran {ran} s: {d}"
    );
    assert_eq!(d["stopped"], "bound_trending", "{d}");
    assert!(f(&d["trend_z"]) > 1.96, "{d}");
}

/// Issue 37: on a host that loses its CPUs now and then (a VM's stolen
/// time; with root, 3 ms in every 30 on both CPUs together) a steady load
/// still settles within its bound in at least 9 of 10 tries: the trend
/// test and the mean's interval read batch means, which a stall that
/// lasts a few intervals does not pass for a trend (measured before: a
/// steady rr ended at its bound with z -1.99). The load is the open loop
/// (`steady_auto_rr`): a closed loop on a VM is as steady as its
/// neighbours, which is the host's figure, not the estimator's. A ramp
/// too slow to see in a few seconds never settles either: the window does
/// not end while the offered load rises.
#[test]
fn duration_auto_settles_a_steady_rr_on_a_stalling_host_and_never_a_slow_ramp() {
    let _turn = alone();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let stalls = root.then(|| {
        Stalls::start(
            Duration::from_millis(3),
            Duration::from_millis(30),
            Duration::from_secs(300),
        )
    });
    let mut seen = Vec::new();
    for i in 0..10 {
        // A steady load, on a host that stalls.
        let r = run_json_args(
            &format!("auto-noisy-{i}"),
            &steady_auto_rr(),
            Duration::from_secs(60),
        );
        let a = &r["summary"]["auto"];
        seen.push(format!(
            "{} after {:.1} s (±{:.2}%, z {:.2})",
            a["stopped"],
            f(&a["ran_s"]),
            f(&a["half_width_pct"]),
            f(&a["trend_z"])
        ));
    }
    let settled = seen
        .iter()
        .filter(|s| s.starts_with("\"stationary\""))
        .count();
    eprintln!(
        "auto on a stalling host (stalls: {}): {seen:?}",
        stalls.is_some()
    );
    // The goal.
    assert!(settled >= 9, "{settled} of 10 settled: {seen:?}");
    // 10% of 2000/s rising to all of it over 10 minutes: over 5 s the
    // offered load rises by less than the noise of its intervals.
    let r = run_json_args(
        "auto-slow-ramp",
        &[
            "rr",
            "--rate",
            "2000",
            "--rate-ramp",
            "600s",
            "-d",
            "auto",
            "--max-duration",
            "5s",
            "-i",
            "0.2",
            "--warmup",
            "0.2",
        ],
        Duration::from_secs(60),
    );
    let a = &r["summary"]["auto"];
    assert_eq!(a["stopped"], "bound_trending", "{a}");
    drop(stalls);
}

#[test]
fn search_and_auto_refuse_what_they_cannot_do() {
    for (args, says) in [
        (vec!["rr", "--search", "p99<=300"], "unit"),
        (
            vec!["stream", "--search", "p99<=1ms"],
            "does not apply to stream",
        ),
        (
            vec!["rr", "--search", "p99<=1ms", "--rate", "100"],
            "drop --rate",
        ),
        (
            vec!["rr", "--search", "loss_pct<=1"],
            "does not apply to rr",
        ),
        (
            vec!["rr", "--search", "p99<=1ms", "-d", "auto"],
            "drop --duration auto",
        ),
        (vec!["rr", "--search-resolution", "2"], "needs --search"),
        (vec!["rr", "--max-duration", "5s"], "-d auto"),
        (vec!["stream", "--bytes", "1M", "-d", "auto"], "finite"),
        (vec!["stream", "--rate-ramp", "5s"], "--rate-ramp"),
        (
            vec!["stream", "--arrivals", "poisson"],
            "--arrivals poisson",
        ),
        (vec!["rr", "--arrivals", "poisson"], "with --rate"),
        (vec!["rr", "--arrivals", "bursty"], "uniform, poisson"),
    ] {
        let mut all = vec!["run"];
        all.extend_from_slice(&args);
        let o = run(&all, Duration::from_secs(20));
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains(says), "{args:?}: {e}");
        assert_no_panic(&o);
    }
}

/// `--rate-ramp` on every open loop (rr, udp-rr, memcache): each flow's
/// rate rises from a tenth of its share to all of it over the ramp, then
/// holds; the workload's line says so.
#[test]
fn a_rate_ramp_rises_on_every_open_loop() {
    let _turn = alone();
    let rate = 4000.0;
    for w in [
        vec!["rr", "--flows", "2"],
        vec!["udp-rr", "--flows", "2"],
        vec!["memcache", "--service", "memcached", "--flows", "2"],
    ] {
        let mut args = w.clone();
        args.extend_from_slice(&[
            "--rate",
            "4000",
            "--rate-ramp",
            "1s",
            "-d",
            "1.5",
            "-i",
            "0.25",
            "--warmup",
            "0",
        ]);
        let (text, r) = run_json_text(&format!("ramp-{}", w[0]), &args, Duration::from_secs(60));
        assert!(
            text.contains("open loop at 4000/s total, rising from 400/s over 1.00 s"),
            "{text}"
        );
        let ivs = r["iterations"][0]["intervals"].as_array().unwrap();
        assert_eq!(ivs.len(), 6, "{}", w[0]);
        let tps: Vec<f64> = ivs.iter().map(|i| f(&i["transactions_per_s"])).collect();
        // The first quarter second: 0.1 R rising by 0.9 R/s, 0.2125 R on average.
        assert!(
            (0.15 * rate..0.3 * rate).contains(&tps[0]),
            "{}: {tps:?}",
            w[0]
        );
        assert!(
            tps.windows(2).take(4).all(|p| p[1] > p[0]),
            "{}: {tps:?}",
            w[0]
        );
        assert!(tps[5] > 0.95 * rate, "{}: {tps:?}", w[0]);
    }
}

/// `--arrivals poisson` on every open loop: the offered rate holds, the
/// line says so, and the requests come in Poisson bursts. Per 0.1 s at
/// 4000/s a Poisson count has a standard deviation of 20; even spacing's
/// counts differ by one or two at the interval edges.
#[test]
fn poisson_arrivals_keep_the_rate_and_vary_as_poisson_on_every_open_loop() {
    let _turn = alone();
    for w in [
        vec!["rr", "--flows", "2"],
        vec!["udp-rr", "--flows", "2"],
        vec!["memcache", "--service", "memcached", "--flows", "2"],
    ] {
        let counts_of = |arrivals: &str| {
            let mut args = w.clone();
            args.extend_from_slice(&[
                "--rate",
                "4000",
                "--arrivals",
                arrivals,
                "-d",
                "1.5",
                "-i",
                "0.1",
                "--warmup",
                "0.3",
            ]);
            let name = format!("arrivals-{}-{arrivals}", w[0]);
            let (text, r) = run_json_text(&name, &args, Duration::from_secs(60));
            assert_eq!(
                text.contains("open loop at 4000/s total, Poisson arrivals"),
                arrivals == "poisson",
                "{text}"
            );
            let it = &r["iterations"][0];
            let tps = f(&it["transactions_per_s"]);
            assert!((tps - 4000.0).abs() < 0.08 * 4000.0, "{}: {tps}/s", w[0]);
            let counts: Vec<f64> = it["intervals"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|i| (f(&i["end_s"]) - f(&i["start_s"]) - 0.1).abs() < 0.01)
                .map(|i| f(&i["transactions_per_s"]) * 0.1)
                .collect();
            assert!(counts.len() >= 10, "{}: {counts:?}", w[0]);
            let mean = counts.iter().sum::<f64>() / counts.len() as f64;
            let var =
                counts.iter().map(|c| (c - mean).powi(2)).sum::<f64>() / (counts.len() - 1) as f64;
            (var.sqrt(), counts)
        };
        let (_, ce) = counts_of("uniform");
        let (poisson, cp) = counts_of("poisson");
        // Even spacing: the middle half of the intervals' counts within 8
        // (measured: rr and udp-rr 0-1, memcache 396-400). The quartiles
        // leave out a host stall across an interval's edge, which moves
        // requests from one interval to the next.
        let mut q = ce.clone();
        q.sort_by(f64::total_cmp);
        let iqr = q[q.len() * 3 / 4] - q[q.len() / 4];
        assert!(iqr < 8.0, "{}: uniform counts {ce:?}", w[0]);
        // Measured about 15 (completions smooth the bursts a little); 6 is
        // a chance below 0.1% for a Poisson sample of 14, and a stall only
        // widens it.
        assert!(poisson > 6.0, "{}: Poisson counts {cp:?}", w[0]);
    }
}

/// An open loop's waits: each request's lateness against its due time,
/// how long requests waited in the agent's socket and responses in the
/// client's, one sample per transaction, on every open loop.
#[test]
fn every_open_loop_records_what_each_ends_scheduling_added() {
    let _turn = alone();
    for args in [
        "rr --rate 2000 -d 1.5 --warmup 0.5",
        "udp-rr --rate 2000 -d 1.5 --warmup 0.5",
        "memcache --service memcached --rate 2000 -d 1.5 --warmup 0.5",
    ] {
        let (text, r) = run_json_text(
            &format!("waits-{}", args.split(' ').next().unwrap()),
            &args.split(' ').collect::<Vec<_>>(),
            Duration::from_secs(60),
        );
        let w = &r["summary"]["waits"];
        let tx = r["summary"]["transactions"].as_u64().unwrap() as f64;
        let count = |k: &str| w[k]["count"].as_u64().unwrap_or(0) as f64;
        // One per transaction (the window's edges cut a few either way).
        assert!(
            (count("send_late_us") - tx).abs() <= 0.02 * tx + 5.0,
            "{args}: {w}"
        );
        assert!(
            (count("client_read_delay_us") - tx).abs() <= 0.02 * tx + 5.0,
            "{args}: {w}"
        );
        if !args.starts_with("memcache") {
            assert!(
                (count("agent_read_delay_us") - tx).abs() <= 0.02 * tx + 5.0,
                "{args}: {w}"
            );
        }
        assert!(text.contains("sent late"), "{args}: {text}");
        assert!(text.contains("read delay"), "{args}: {text}");
    }
    // A closed loop records none.
    let r = run_json(
        "waits-closed.json",
        "rr -d 1 --warmup 0.3",
        Duration::from_secs(60),
    );
    assert!(r["summary"]["waits"].is_null(), "{}", r["summary"]["waits"]);
}

/// Issue 37: whose wake-ups set an open loop's tail, told apart. With
/// root, one CPU at a time is taken away 2 ms in every 10 (the client
/// pinned to CPU 0, the agent to CPU 1): stalling the agent's CPU makes
/// requests wait in its socket, stalling the client's makes its sends
/// late, and the output says which. A request held back by
/// `--outstanding` while the agent stalls is the agent's doing, not the
/// sender's (its lateness counts from when a slot came free).
#[test]
fn an_open_loop_says_which_end_set_its_tail() {
    let _turn = alone();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if !root || cpus < 2 {
        eprintln!("skipped: needs root (SCHED_FIFO stalls) and two CPUs");
        return;
    }
    let p99 = |r: &Value, k: &str| f(&r["summary"]["waits"][k]["p99"]);
    for (cpu, who, slow, quick) in [
        (
            1,
            "the agent's reads",
            "agent_read_delay_us",
            "send_late_us",
        ),
        (
            0,
            "the client's sender",
            "send_late_us",
            "agent_read_delay_us",
        ),
    ] {
        let stalls = Stalls::on_cpus(
            &[cpu],
            Duration::from_millis(2),
            Duration::from_millis(10),
            Duration::from_secs(60),
        );
        let (text, r) = run_json_text(
            &format!("tail-cpu{cpu}"),
            &[
                "rr",
                "--rate",
                "2000",
                "-d",
                "2",
                "--warmup",
                "0.5",
                "--cpus",
                "0",
                "--agent-cpus",
                "1",
                "--pacing",
                "sleep",
            ],
            Duration::from_secs(60),
        );
        drop(stalls);
        assert!(
            p99(&r, slow) >= 1000.0,
            "stalling CPU {cpu}: {}",
            r["summary"]["waits"]
        );
        // The other end's wait stays well under: on a noisy host (a busy
        // loop beside the agent) it is not zero, but far from the stall's.
        assert!(
            p99(&r, quick) < 0.5 * p99(&r, slow),
            "stalling CPU {cpu}: {}",
            r["summary"]["waits"]
        );
        // A stalled agent also queues the requests behind the one it was
        // slow to read: the tail then names the queue and the agent's reads.
        let tail = text
            .lines()
            .find(|l| l.trim_start().starts_with("tail"))
            .unwrap_or("");
        assert!(tail.contains(who), "stalling CPU {cpu}: {text}");
    }
}

/// `--pacing hybrid` wakes early by the lateness its own wake-ups showed and
/// busy-polls to each due time: sends leave on time, and the spin is
/// counted. Sleeping to the due time pays the host's wake-up each time (a
/// median of 25 µs on an idle AMD VM, more on an Intel one).
#[test]
fn hybrid_pacing_sends_on_time_and_counts_its_spin() {
    let _turn = alone();
    let mut seen = Vec::new();
    for round in 0..2 {
        for how in ["sleep", "hybrid"] {
            let r = run_json_args(
                &format!("pacing-{how}-{round}"),
                &[
                    "rr", "--rate", "4000", "-d", "2", "--warmup", "0.5", "--pacing", how,
                ],
                Duration::from_secs(60),
            );
            assert_eq!(r["spec"]["pacing"].as_str().unwrap_or("sleep"), how);
            let late = f(&r["summary"]["waits"]["send_late_us"]["p50"]);
            let spin = r["iterations"][0]["counters"]["client"]["pacing_spin_ns"]
                .as_u64()
                .unwrap_or(0);
            seen.push(format!("{how}: late p50 {late:.1} µs, spin {spin} ns"));
            if how == "hybrid" {
                assert!(late < 5.0, "{seen:?}");
                assert!(spin > 0, "{seen:?}");
            } else {
                assert_eq!(spin, 0, "{seen:?}");
            }
        }
    }
    eprintln!("pacing: {seen:?}");
}
