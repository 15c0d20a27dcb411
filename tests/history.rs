//! The history store, `linerate history`, `report --series` and `watch`,
//! with real runs on loopback (and, as root, in a lab whose rate changes
//! during a watch). Each test has a store of its own (`--history FILE`).

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(120);

/// The lab test measures alone; the others run beside each other.
static SERIAL: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn beside() -> std::sync::RwLockReadGuard<'static, ()> {
    SERIAL.read().unwrap_or_else(|e| e.into_inner())
}

/// A fresh store path for one test.
fn store(name: &str) -> PathBuf {
    let p = tmp(&format!("{name}.db"));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", p.display()));
    }
    let _ = std::fs::remove_dir_all(format!("{}.pending", p.display()));
    p
}

fn db(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `history list --json` of a store: every run.
fn runs(store: &Path) -> Vec<serde_json::Value> {
    let o = run(
        &["history", "--history", db(store), "-n", "0", "--json"],
        LIMIT,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_str::<serde_json::Value>(&stdout(&o))
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn ok(args: &[&str]) -> String {
    let o = run(args, LIMIT);
    assert_no_panic(&o);
    assert!(o.status.success(), "{args:?}: {}{}", stdout(&o), stderr(&o));
    stdout(&o)
}

/// A real stream result written with the history off, as JSON (`--json
/// FILE`), for imports and synthetic series built from it.
fn stream_result(json: &Path, secs: &str) -> serde_json::Value {
    ok(&[
        "run",
        "stream",
        "-d",
        secs,
        "-q",
        "--history",
        "off",
        "--json",
        json.to_str().unwrap(),
    ]);
    serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap()
}

#[test]
fn runs_are_recorded_listed_shown_and_filtered_and_off_records_nothing() {
    let _serial = beside();
    let s = store("list");
    ok(&["run", "rr", "-d", "0.5", "-q", "--history", db(&s)]);
    ok(&["run", "stream", "-d", "0.5", "-q", "--history", db(&s)]);
    ok(&["run", "rr", "-d", "0.5", "-q", "--history", db(&s)]);
    // Off: nothing more.
    ok(&["run", "rr", "-d", "0.3", "-q", "--history", "off"]);
    let all = runs(&s);
    assert_eq!(all.len(), 3, "{all:?}");
    let names: Vec<&str> = all.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["rr", "stream", "rr"]);
    // One command line, one series; the stream is another.
    assert_eq!(all[0]["series"], all[2]["series"]);
    assert_ne!(all[0]["series"], all[1]["series"]);
    assert_eq!(all[0]["target"], "local");
    assert!(all.iter().all(|r| r["status"] == "ok"));

    let table = ok(&["history", "--history", db(&s), "--name", "rr"]);
    assert_eq!(table.lines().count(), 3, "header and two rr runs: {table}");
    assert!(table.contains("transactions_per_s"), "{table}");
    let id = all[1]["id"].as_i64().unwrap().to_string();
    let shown = ok(&["history", "show", &id, "--history", db(&s)]);
    assert!(shown.contains("throughput_bps"), "{shown}");
    assert!(shown.contains("fingerprint"), "{shown}");
    let series = ok(&["history", "series", "--history", db(&s)]);
    assert_eq!(series.lines().count(), 3, "{series}");
    let since = ok(&[
        "history",
        "--history",
        db(&s),
        "--since",
        "1h",
        "--status",
        "ok",
    ]);
    assert_eq!(since.lines().count(), 4, "{since}");
    let future = ok(&["history", "--history", db(&s), "--since", "2999-01-01"]);
    assert!(future.is_empty(), "{future}");

    // Bad input: one line each, exit 2.
    for (args, says) in [
        (vec!["history", "show", "999"], "no run 999"),
        (vec!["history", "--since", "yesterday"], "--since yesterday"),
        (
            vec!["history", "import", "/nonexistent/x"],
            "does not exist",
        ),
    ] {
        let mut a = args.clone();
        a.extend(["--history", db(&s)]);
        let o = run(&a, LIMIT);
        assert_eq!(o.status.code(), Some(2), "{a:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{a:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
    }
    let o = run(&["history", "--history", db(&store("none"))], LIMIT);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no history store"), "{}", stderr(&o));
}

const STUDY: &str = r#"
title = "History import"
description = "Two tiny points."
[test]
workload = "rr"
duration = "0.3s"
warmup = "0.1s"
interval = "0.1s"
[sweep]
request = [1, 64]
"#;

#[test]
fn import_records_study_folders_and_result_files_once() {
    let _serial = beside();
    let s = store("import");
    let out = tmp("import-results");
    let _ = std::fs::remove_dir_all(&out);
    let file = tmp("import-study.toml");
    std::fs::write(&file, STUDY).unwrap();
    // Written with the history off: only the import records them.
    let dir = study_ok_with(&file, &out, &["--history", "off"], LIMIT);
    let json = out.join("one.json");
    stream_result(&json, "0.3");
    let said = ok(&[
        "history",
        "import",
        out.to_str().unwrap(),
        "--history",
        db(&s),
    ]);
    assert!(said.contains("2 of 2 imported"), "{said}");
    let all = runs(&s);
    assert_eq!(all.len(), 2, "{all:?}");
    let study = all.iter().find(|r| r["kind"] == "study").unwrap();
    assert_eq!(study["name"], "import-study");
    let dir = std::fs::canonicalize(dir).unwrap();
    assert_eq!(study["results"], dir.display().to_string());
    // Both points' figures.
    let shown = ok(&[
        "history",
        "show",
        &study["id"].to_string(),
        "--history",
        db(&s),
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&shown).unwrap();
    let points: std::collections::BTreeSet<&str> = v["figures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["point"].as_str().unwrap())
        .collect();
    assert_eq!(points.len(), 2, "{points:?}");
    // Again: replaced, not doubled.
    ok(&[
        "history",
        "import",
        out.to_str().unwrap(),
        "--history",
        db(&s),
    ]);
    assert_eq!(runs(&s).len(), 2);
}

/// `n` copies of one real stream result, as if run an hour apart, with
/// throughputs `level(i)`.
fn synthetic(dir: &Path, base: &serde_json::Value, n: usize, level: impl Fn(usize) -> f64) {
    std::fs::create_dir_all(dir).unwrap();
    for i in 0..n {
        let mut r = base.clone();
        r["started_at"] = format!("2026-01-{:02}T{:02}:00:00Z", 1 + i / 24, i % 24).into();
        for it in r["iterations"].as_array_mut().unwrap() {
            it["throughput_bps"] = level(i).into();
        }
        std::fs::write(dir.join(format!("r{i:03}.json")), r.to_string()).unwrap();
    }
}

/// A small deterministic noise in [-1, 1].
fn noise(i: usize) -> f64 {
    ((i * 7919 % 101) as f64 / 50.0) - 1.0
}

#[test]
fn a_step_in_an_imported_series_is_found_by_a_scan_and_drawn() {
    let _serial = beside();
    let s = store("scan");
    let json = tmp("scan-base.json");
    let base = stream_result(&json, "0.3");
    let dir = tmp("scan-series");
    let _ = std::fs::remove_dir_all(&dir);
    // 12 runs at 10 Gbit/s ± 0.5%, then 4 at 5% less.
    synthetic(&dir, &base, 16, |i| {
        let level = if i < 12 { 10e9 } else { 9.5e9 };
        level * (1.0 + 0.005 * noise(i))
    });
    ok(&[
        "history",
        "import",
        dir.to_str().unwrap(),
        "--history",
        db(&s),
    ]);
    let all = runs(&s);
    assert_eq!(all.len(), 16);
    let o = run(
        &["history", "changes", "--scan", "--history", db(&s)],
        LIMIT,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<String> = stdout(&o).lines().map(String::from).collect();
    assert_eq!(lines.len(), 1, "one change: {lines:?}");
    let first_after = all[12]["id"].as_i64().unwrap();
    assert!(
        lines[0].contains(&format!("from run {first_after},")),
        "{lines:?}"
    );
    assert!(lines[0].contains("throughput_bps"), "{lines:?}");
    assert!(lines[0].contains("worse"), "{lines:?}");
    // Scanning again finds nothing new.
    let o = run(
        &["history", "changes", "--scan", "--history", db(&s)],
        LIMIT,
    );
    assert!(stderr(&o).contains("0 new"), "{}", stderr(&o));
    // The series over time.
    let series = all[0]["series"].as_str().unwrap();
    let out = tmp("scan-report");
    let html = ok(&[
        "report",
        "--series",
        &series[..6],
        "--history",
        db(&s),
        "--out",
        out.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(html.trim()).unwrap();
    assert!(text.contains("<svg"), "a chart");
    assert!(text.contains("Throughput over time"), "{text}");
    assert!(
        text.contains(&format!("from run {first_after},")),
        "the change"
    );
}

#[test]
fn a_locked_store_warns_spools_and_loses_no_run() {
    let _serial = beside();
    let s = store("locked");
    ok(&["run", "rr", "-d", "0.3", "-q", "--history", db(&s)]);
    let conn = rusqlite::Connection::open(&s).unwrap();
    conn.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let t = Instant::now();
    let o = run(
        &["run", "rr", "-d", "0.3", "-q", "--history", db(&s)],
        LIMIT,
    );
    // The measurement stands: exit 0, the table printed.
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("transactions"), "{}", stdout(&o));
    let err = stderr(&o);
    assert!(err.contains("locked by another process"), "{err}");
    assert!(err.contains(".pending"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(t.elapsed() < Duration::from_secs(30));
    conn.execute_batch("ROLLBACK").unwrap();
    drop(conn);
    // The next process that opens the store records the spooled run.
    assert_eq!(runs(&s).len(), 2);
    assert!(!Path::new(&format!("{}.pending", s.display())).exists());
}

#[test]
fn a_damaged_store_is_refused_left_as_it_was_and_runs_are_spooled() {
    let _serial = beside();
    let s = store("damaged");
    ok(&["run", "rr", "-d", "0.3", "-q", "--history", db(&s)]);
    ok(&["run", "rr", "-d", "0.3", "-q", "--history", db(&s)]);
    // A checkpoint puts every row in the main file, then cut it short.
    let c = rusqlite::Connection::open(&s).unwrap();
    c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
    drop(c);
    let bytes = std::fs::read(&s).unwrap();
    std::fs::write(&s, &bytes[..bytes.len() / 2]).unwrap();
    let cut = std::fs::read(&s).unwrap();
    let o = run(&["history", "--history", db(&s)], LIMIT);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("is damaged"), "{}", stderr(&o));
    assert!(stderr(&o).contains("mv "), "{}", stderr(&o));
    assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
    // A run still measures, warns, and keeps its entry beside the store.
    let o = run(
        &["run", "rr", "-d", "0.3", "-q", "--history", db(&s)],
        LIMIT,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("is damaged"), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(&s).unwrap(),
        cut,
        "the file is left as it was"
    );
    // Moved aside as the message says: a new store takes the spooled run.
    std::fs::rename(&s, format!("{}.bad", s.display())).unwrap();
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", s.display()));
    }
    let o = run(
        &["run", "rr", "-d", "0.3", "-q", "--history", db(&s)],
        LIMIT,
    );
    assert!(
        o.status.success() && stderr(&o).is_empty(),
        "{}",
        stderr(&o)
    );
    assert_eq!(runs(&s).len(), 2, "the spooled run and the new one");
}

#[test]
fn a_watch_records_an_unreachable_agent_as_failed_runs_and_goes_on() {
    let _serial = beside();
    let s = store("dead");
    let o = run(
        &[
            "watch",
            "--every",
            "0.2s",
            "--runs",
            "3",
            "--history",
            db(&s),
            "--",
            "run",
            "rr",
            "-d",
            "0.3",
            "--agent",
            "127.0.0.1:1",
        ],
        LIMIT,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let all = runs(&s);
    assert_eq!(all.len(), 3, "{all:?}");
    for r in &all {
        assert_eq!(r["status"], "failed");
        assert!(
            r["error"].as_str().unwrap().contains("cannot reach agent"),
            "{r}"
        );
        assert_eq!(r["watch"], "run rr -d 0.3 --agent 127.0.0.1:1");
    }
    // Bad watches: one line, exit 2, nothing run.
    for (args, says) in [
        (vec!["watch", "--", "lab", "status"], "watch runs `run ...`"),
        (
            vec!["watch", "--", "run", "rr", "--bogus"],
            "not a linerate command line",
        ),
        (vec!["watch", "--every", "soon", "--", "run", "rr"], "soon"),
        (
            vec!["watch", "--slip", "80%", "--", "run", "rr"],
            "0% to 50%",
        ),
        (
            vec!["watch", "--track", "speed", "--", "run", "rr"],
            "no metric 'speed'",
        ),
    ] {
        let o = run(&args, LIMIT);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn ctrl_c_between_runs_stops_the_watch_and_leaves_the_store_consistent() {
    let _serial = beside();
    let s = store("ctrlc");
    let child = spawn_group(&[
        "watch",
        "--every",
        "60s",
        "--history",
        db(&s),
        "--",
        "run",
        "rr",
        "-d",
        "0.3",
    ]);
    let deadline = Instant::now() + LIMIT;
    while !s.exists() || runs(&s).is_empty() {
        assert!(Instant::now() < deadline, "no run recorded");
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    interrupt_group(&child);
    let o = wait(child, Duration::from_secs(20));
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("stopped by a signal after 1 runs"),
        "{}",
        stderr(&o)
    );
    assert_eq!(runs(&s).len(), 1);
    let c = rusqlite::Connection::open(&s).unwrap();
    let check: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
}

#[test]
fn a_watch_finds_a_change_runs_its_hook_and_exits_4() {
    let _serial = beside();
    let s = store("hook");
    let json = tmp("hook-base.json");
    let base = stream_result(&json, "0.5");
    let measured = f(&base["summary"]["throughput_bps"]);
    // The series' past: 12 runs at three times what this host gives.
    let dir = tmp("hook-series");
    let _ = std::fs::remove_dir_all(&dir);
    synthetic(&dir, &base, 12, |i| {
        3.0 * measured * (1.0 + 0.005 * noise(i))
    });
    ok(&[
        "history",
        "import",
        dir.to_str().unwrap(),
        "--history",
        db(&s),
    ]);
    let said = tmp("hook-said");
    let _ = std::fs::remove_file(&said);
    let hook = format!(
        "echo \"$LINERATE_METRIC $LINERATE_RUN\" >> {}",
        said.display()
    );
    let out = tmp("hook-report");
    let o = run(
        &[
            "watch",
            "--every",
            "0.1s",
            "--runs",
            "4",
            "--exit-on-change",
            "--on-change",
            &hook,
            "--report",
            out.to_str().unwrap(),
            "--history",
            db(&s),
            "--",
            "run",
            "stream",
            "-d",
            "0.5",
        ],
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(4), "{}{}", stdout(&o), stderr(&o));
    let lines: Vec<String> = stdout(&o).lines().map(String::from).collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].starts_with("change: throughput_bps"), "{lines:?}");
    let all = runs(&s);
    let watched: Vec<_> = all.iter().filter(|r| !r["watch"].is_null()).collect();
    // Found within 3 runs of the step (the first watched run).
    assert!((2..=3).contains(&watched.len()), "{}", watched.len());
    assert!(
        lines[0].contains(&format!("from run {},", watched[0]["id"])),
        "{lines:?}"
    );
    let hooked = std::fs::read_to_string(&said).unwrap();
    assert_eq!(
        hooked.trim(),
        format!("throughput_bps {}", watched[0]["id"]),
        "{hooked}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("Changes found"), "the report has it");
}

/// As root: a watch on a lab path whose rate drops 5% (100 to 95 Mbit/s)
/// after ten runs reports the change within three runs of the new rate.
#[test]
fn a_watch_reports_a_lab_rate_change_within_3_runs() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: the lab needs root (CI runs as root)");
        return;
    }
    let _alone = SERIAL.write().unwrap_or_else(|e| e.into_inner());
    let s = store("lab");
    let (lab, _) = Lab::up("watch", "--rtt 2ms --rate 100mbit --no-calibrate");
    let child = spawn(&[
        "watch",
        "--every",
        "2.5s",
        "--slip",
        "0%",
        "--runs",
        "16",
        "--exit-on-change",
        "--history",
        db(&s),
        "--",
        "run",
        "stream",
        "-d",
        "0.5",
        "--warmup",
        "0.2",
        "--lab",
        &lab.name,
    ]);
    let ok_runs = |all: &[serde_json::Value]| all.iter().filter(|r| r["status"] == "ok").count();
    let deadline = Instant::now() + LIMIT;
    while !s.exists() || ok_runs(&runs(&s)) < 10 {
        assert!(Instant::now() < deadline, "ten runs did not come");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Between two runs: the same lab again, 5% slower.
    let before = runs(&s).len();
    let name = lab.name.clone();
    ok(&["lab", "down", &name]);
    ok(&[
        "lab",
        "up",
        &name,
        "--rtt",
        "2ms",
        "--rate",
        "95mbit",
        "--no-calibrate",
    ]);
    let o = wait(child, LIMIT);
    assert_eq!(o.status.code(), Some(4), "{}{}", stdout(&o), stderr(&o));
    let all = runs(&s);
    let after: Vec<&serde_json::Value> = all[before..]
        .iter()
        .filter(|r| r["status"] == "ok")
        .collect();
    assert!(
        !after.is_empty() && after.len() <= 3,
        "found after {} runs at 95 Mbit/s: {}",
        after.len(),
        stderr(&o)
    );
    let line = stdout(&o);
    assert!(line.starts_with("change: throughput_bps"), "{line}");
    assert!(
        line.contains(&format!("from run {},", after[0]["id"])),
        "{line}"
    );
    // About -5%: the link's rate, not noise.
    let pct: f64 = line
        .split('(')
        .nth(1)
        .unwrap()
        .split('%')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!((-6.5..=-3.5).contains(&pct), "{line}");
}

#[test]
fn two_watchers_share_one_store() {
    let _serial = beside();
    let s = store("two");
    let watch = |label: &str| {
        spawn(&[
            "watch",
            "--every",
            "0.1s",
            "--runs",
            "3",
            "--label",
            label,
            "--history",
            db(&s),
            "--",
            "run",
            "rr",
            "-d",
            "0.3",
        ])
    };
    let (a, b) = (watch("a"), watch("b"));
    for o in [wait(a, LIMIT), wait(b, LIMIT)] {
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
    }
    let all = runs(&s);
    assert_eq!(all.len(), 6, "{all:?}");
    for label in ["a", "b"] {
        let of = all.iter().filter(|r| r["watch"] == label).count();
        assert_eq!(of, 3, "{label}");
    }
    assert!(all
        .iter()
        .all(|r| r["status"] == "ok" && r["series"] == all[0]["series"]));
}
