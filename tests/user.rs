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

/// Every figure agrees with those it is derived from: throughput is the
/// bytes over the duration of the same window (a finite transfer once
/// printed 6.00 Gbit/s for 20 MiB in 0.0127 s, which is 13.3), in the
/// summary and in each interval.
#[test]
fn throughput_bytes_and_duration_agree_for_every_workload() {
    let cases = [
        "stream",
        "stream --direction rx",
        "stream --direction bidir -F 2",
        "stream --bytes 8M --reply 20",
        "stream --bytes 4M --reply 20 -F 3",
        "stream --bytes 1M --per transaction --reply 20",
        "rr",
        "rr --request 200 --response 1000 -F 4",
        "crr",
        "tls-handshake",
        "stream --tls --no-baseline",
        "udp-stream",
        "udp-stream --message 64 -F 200",
        "udp-rr",
        "memcache",
    ];
    for (n, args) in cases.iter().enumerate() {
        let r = run_json(
            &format!("agree-{n}.json"),
            &format!("{args} -d 0.5 --warmup 0.2 -i 0.25"),
            LIMIT,
        );
        let it = &r["iterations"][0];
        let (bytes, secs, bps) = (
            f(&it["bytes"]),
            f(&it["duration_s"]),
            f(&it["throughput_bps"]),
        );
        assert!(bytes > 0.0 && secs > 0.0, "{args}: {it}");
        let derived = bytes * 8.0 / secs;
        assert!(
            (bps / derived - 1.0).abs() < 0.01,
            "{args}: throughput {bps} vs {bytes} B x 8 / {secs} s = {derived}"
        );
        assert_eq!(
            f(&r["summary"]["throughput_bps"]),
            bps,
            "{args}: one iteration"
        );
        // Intervals follow each other: no label overlaps the next (the
        // workers stamp an edge within a millisecond of each other; it
        // once read 0.0-1.2 s then 1.0-2.1 s).
        let iv = it["intervals"].as_array().unwrap();
        for w in iv.windows(2) {
            assert!(
                f(&w[1]["start_s"]) >= f(&w[0]["end_s"]) - 0.01,
                "{args}: overlapping intervals {} and {}",
                w[0],
                w[1]
            );
        }
        for i in it["intervals"].as_array().unwrap() {
            let secs = f(&i["end_s"]) - f(&i["start_s"]);
            let derived = f(&i["bytes"]) * 8.0 / secs;
            let bps = f(&i["throughput_bps"]);
            assert!(
                derived == 0.0 && bps == 0.0 || (bps / derived - 1.0).abs() < 0.01,
                "{args}: interval {i}"
            );
        }
    }
}

#[test]
fn options_that_do_not_apply_are_refused_alike() {
    for (args, says) in [
        ("run rr --direction rx", "--direction does not apply to rr"),
        (
            "run stream --request 200",
            "--request does not apply to stream",
        ),
        ("run crr --bytes 1M", "--bytes does not apply to crr"),
        (
            "run udp-stream --timeout 2s",
            "--timeout does not apply to udp-stream",
        ),
    ] {
        let o = run_str(args, LIMIT);
        assert_eq!(o.status.code(), Some(2), "{args}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args}: {}", stderr(&o));
    }
}

#[test]
fn a_hosts_file_error_names_its_file_and_line() {
    let file = tmp("typo-hosts.toml");
    std::fs::write(&file, "[defaults]\nprot = 7470\n").unwrap();
    let o = run(&["run", "rr", "--hosts", file.to_str().unwrap()], LIMIT);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains(&format!("{}:2: unknown field `prot`", file.display())),
        "{e}"
    );
    assert_eq!(
        e.trim().lines().count(),
        1,
        "one line, not a TOML excerpt: {e}"
    );
}

/// Sizes go through one formatter: no count in a binary unit runs past
/// 1023 (a run once printed `(6779648 KiB in 2.00 s)`).
#[test]
fn sizes_in_the_human_output_stay_within_their_unit() {
    for args in [
        "run stream -d 1 --warmup 0.2",
        "run stream --bytes 20M --reply 20",
    ] {
        let o = run_str(args, LIMIT);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let out = stdout(&o);
        let words: Vec<&str> = out.split_whitespace().collect();
        for w in words.windows(2) {
            let unit = w[1].trim_end_matches([',', ')', ';']);
            if ["B", "KiB", "MiB", "GiB"].contains(&unit) {
                let n: f64 = w[0].trim_start_matches('(').parse().unwrap_or(0.0);
                assert!(n < 1024.0, "{args}: '{} {}' in {out}", w[0], w[1]);
            }
        }
        if args.contains("--bytes") {
            assert!(out.contains("transfer     1 transfer, "), "{out}");
        }
    }
}

/// linerate's whole output, read as it comes (a completion script is larger
/// than a pipe holds).
fn output_of(args: &[&str]) -> std::process::Output {
    std::process::Command::new(bin())
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("linerate runs")
}

/// The long flags a help page lists.
fn long_flags(help: &str) -> std::collections::BTreeSet<String> {
    help.split(|c: char| c.is_whitespace() || c == ',' || c == '=')
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| {
            w.trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
                .to_string()
        })
        .filter(|w| w.len() > 2)
        .collect()
}

/// Completions and man pages come from the command-line definitions:
/// every flag `run --help` lists is in the bash script and in
/// linerate-run.1, and every command `linerate --help` lists has its page.
#[test]
fn completions_and_man_pages_cover_every_command_and_flag() {
    let help = stdout(&run(&["run", "--help"], LIMIT));
    let flags = long_flags(&help);
    assert!(
        flags.contains("--rpm-interval") && flags.len() > 80,
        "{flags:?}"
    );
    let o = output_of(&["completions", "bash"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let bash = stdout(&o);
    assert!(bash.contains("_linerate()"), "{bash}");
    for f in &flags {
        assert!(bash.contains(f.as_str()), "bash completion lacks {f}");
    }
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let o = output_of(&["completions", shell]);
        assert!(o.status.success() && o.stdout.len() > 1000, "{shell}");
    }
    let o = output_of(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("possible values"), "{}", stderr(&o));
    let dir = tmp("man-pages");
    let _ = std::fs::remove_dir_all(&dir);
    let o = run(&["man", "--out", dir.to_str().unwrap()], LIMIT);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("man pages in"), "{}", stdout(&o));
    let page = std::fs::read_to_string(dir.join("linerate-run.1")).unwrap();
    assert!(page.starts_with(".ie") || page.contains(".TH"), "{page}");
    let text = page.replace('\\', "");
    for f in &flags {
        assert!(text.contains(f.as_str()), "linerate-run.1 lacks {f}");
    }
    // Every command of `linerate --help` (its "Commands:" section).
    let top = stdout(&run(&["--help"], LIMIT));
    let commands: Vec<&str> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A command's line, not its description's continuation.
        .filter(|l| !l[2..].starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() >= 10, "{top}");
    for c in commands {
        assert!(
            dir.join(format!("linerate-{c}.1")).exists(),
            "no page for {c}"
        );
    }
    for sub in ["lab-up", "study-run", "cluster-up"] {
        assert!(dir.join(format!("linerate-{sub}.1")).exists(), "{sub}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
