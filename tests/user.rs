//! What a user sees and keeps: Ctrl-C keeps what was measured, output
//! paths are checked before any traffic, `--json -` is standard output.

mod common;

use common::*;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn ctrl_c_ends_a_run_with_its_summary_its_json_and_exit_3() {
    for workload in ["rr", "stream"] {
        let file = tmp(&format!("interrupted-{workload}.json"));
        let _ = std::fs::remove_file(&file);
        let child = spawn_group(&[
            "run",
            workload,
            "-d",
            "20",
            "--warmup",
            "0.5",
            "--json",
            file.to_str().unwrap(),
        ]);
        std::thread::sleep(Duration::from_millis(3000));
        let t0 = Instant::now();
        interrupt_group(&child);
        let o = wait(child, LIMIT);
        let took = t0.elapsed();
        assert_no_panic(&o);
        assert_eq!(o.status.code(), Some(3), "{workload}: {}", stderr(&o));
        assert!(
            took < Duration::from_secs(5),
            "{workload}: ended {took:?} after Ctrl-C"
        );
        let out = stdout(&o);
        assert!(
            out.contains("throughput"),
            "{workload}: the summary so far: {out}"
        );
        assert!(out.contains("PARTIAL"), "{out}");
        assert!(
            stderr(&o).contains("interrupted (Ctrl-C)"),
            "{}",
            stderr(&o)
        );
        let r = json(&file);
        assert_eq!(r["summary"]["status"], "partial");
        let d = f(&r["iterations"][0]["duration_s"]);
        assert!((1.0..5.0).contains(&d), "{workload}: window {d} s");
        // Both ends stopped together: neither saw the other's close as an
        // error of its window, and the local agent was not killed by the
        // terminal's signal.
        assert_eq!(
            r["iterations"][0]["errors"]["agent"],
            serde_json::json!([]),
            "{r}"
        );
        assert_eq!(
            r["iterations"][0]["errors"]["client"],
            serde_json::json!([])
        );
        assert!(f(&r["summary"]["throughput_bps"]) > 0.0);
    }
}

#[test]
fn an_unwritable_output_fails_before_any_traffic() {
    let cases: [&[&str]; 4] = [
        &[
            "run",
            "stream",
            "-d",
            "5",
            "--json",
            "/nonexistent/dir/x.json",
        ],
        &["quick", "-d", "5", "--out", "/proc/linerate-cannot-be-here"],
        &[
            "study",
            "run",
            "quick",
            "-d",
            "5",
            "--out",
            "/proc/linerate-cannot-be-here",
        ],
        &["quick", "-d", "5", "--json", "/nonexistent/dir/x.json"],
    ];
    for args in cases {
        let t0 = Instant::now();
        let o = run(args, LIMIT);
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "{args:?} took {:?}",
            t0.elapsed()
        );
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains("cannot write there"), "{e}");
        assert_eq!(e.trim().lines().count(), 1, "{e}");
    }
    let o = run(
        &[
            "run",
            "stream",
            "-d",
            "5",
            "--json",
            "/nonexistent/dir/x.json",
        ],
        LIMIT,
    );
    assert!(
        stderr(&o).contains("the folder /nonexistent/dir does not exist"),
        "{}",
        stderr(&o)
    );
    // A file the check made is not left behind when the run then fails.
    let file = tmp("never-written.json");
    let _ = std::fs::remove_file(&file);
    let o = run(
        &[
            "run",
            "rr",
            "--agent",
            "127.0.0.1:1",
            "--json",
            file.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert_ne!(o.status.code(), Some(0));
    assert!(!file.exists());
}

#[test]
fn json_dash_is_standard_output() {
    let o = run(
        &["run", "rr", "-d", "0.3", "--warmup", "0.1", "--json", "-"],
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("stdout is the JSON alone");
    assert_eq!(r["summary"]["status"], "ok");
    assert!(
        stderr(&o).contains("trans/s"),
        "the table goes to stderr: {}",
        stderr(&o)
    );
    assert!(!std::path::Path::new("-").exists(), "no file named '-'");
    let o = run(
        &["run", "rr", "-d", "0.3", "--json", "-", "--json-stream"],
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}
