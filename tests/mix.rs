//! Mixed tests (`linerate run mix`): several groups on one window, each
//! measured as it would be alone, on loopback with real agents; the lab's
//! shared slow link is in tests/lab.rs, many hosts in tests/hosts.rs.

mod common;
use common::*;
use std::time::Duration;

/// `linerate run mix GROUPS... COMMON -q --json FILE`.
fn mix_json(name: &str, groups: &[&str], common: &str) -> serde_json::Value {
    let out = tmp(name);
    let mut all: Vec<&str> = vec!["run", "mix"];
    all.extend_from_slice(groups);
    all.extend(common.split_whitespace());
    all.extend_from_slice(&["-q", "--json", out.to_str().unwrap()]);
    let o = run(&all, Duration::from_secs(90));
    assert_no_panic(&o);
    assert!(o.status.success(), "{all:?}: {}", stderr(&o));
    json(&out)
}

fn group<'a>(r: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    r["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .find(|g| g["name"] == name)
        .unwrap_or_else(|| panic!("no group {name}: {}", r["groups"]))
}

#[test]
fn groups_on_an_unloaded_path_match_their_runs_alone() {
    // Paced groups leave the path idle: each must carry exactly its
    // offered rate, alone and beside the other.
    let rr = "rr --rate 400 --request 64 --response 64 --flows 2";
    let udp = "udp-stream --rate 2k --message 200";
    let common = "-d 2 --warmup 0.3";
    let alone_rr = run_json(
        "mix-rr-alone.json",
        &format!("{rr} {common}"),
        Duration::from_secs(60),
    );
    let alone_udp = run_json(
        "mix-udp-alone.json",
        &format!("{udp} {common}"),
        Duration::from_secs(60),
    );
    let r = mix_json("mix-paced.json", &[rr, udp], common);
    assert_eq!(r["spec"]["workload"], "mix");
    assert_eq!(r["summary"]["workload"], "mix");
    assert_eq!(r["summary"]["status"], "ok", "{}", r["summary"]);
    let g1 = group(&r, "g1");
    let g2 = group(&r, "g2");
    assert_eq!(
        (g1["workload"].as_str(), g2["workload"].as_str()),
        (Some("rr"), Some("udp-stream"))
    );
    assert_eq!(g1["command"], rr);
    assert_eq!(u(&g1["spec"]["flows"]), 2);
    let near = |a: f64, b: f64, what: &str| {
        assert!((a / b - 1.0).abs() < 0.05, "{what}: mixed {a} vs alone {b}");
    };
    near(
        f(&g1["summary"]["transactions_per_s"]),
        f(&alone_rr["summary"]["transactions_per_s"]),
        "rr transactions/s",
    );
    near(
        f(&g1["summary"]["transactions_per_s"]),
        400.0,
        "rr at its offered rate",
    );
    near(
        f(&g2["summary"]["udp"]["packets_per_s"]),
        f(&alone_udp["summary"]["udp"]["packets_per_s"]),
        "udp packets/s",
    );
    near(
        f(&g2["summary"]["udp"]["packets_per_s"]),
        2000.0,
        "udp at its offered rate",
    );
    // The total adds what adds up; the window is one.
    let sum = f(&g1["summary"]["throughput_bps"]) + f(&g2["summary"]["throughput_bps"]);
    near(f(&r["summary"]["throughput_bps"]), sum, "total throughput");
    assert_eq!(
        u(&r["summary"]["transactions"]),
        u(&g1["summary"]["transactions"]) + u(&g2["summary"]["transactions"])
    );
    for g in [g1, g2] {
        assert!(
            (f(&g["summary"]["duration_s"]) - 2.0).abs() < 0.1,
            "{}",
            g["summary"]
        );
        // An end's CPU is shared: no group carries a cost of its own.
        assert!(g["summary"]["cpu"]["client"]["us_per_kb"].is_null());
        assert!(g["iterations"][0]["intervals"].as_array().unwrap().len() >= 2);
    }
    assert!(r["summary"]["cpu"]["client"]["us_per_kb"]
        .as_f64()
        .is_some());
    // Both groups' intervals close on the same edges (each side reads its
    // edge a moment after it passes).
    let e1 = f(&g1["iterations"][0]["intervals"][0]["end_s"]);
    let e2 = f(&g2["iterations"][0]["intervals"][0]["end_s"]);
    assert!((e1 - e2).abs() < 0.02, "{e1} vs {e2}");
}

#[test]
fn the_human_table_has_a_line_per_group_and_tls_is_per_group() {
    let o = run(
        &[
            "run",
            "mix",
            "stream --tls",
            "rr --request 64 --response 64",
            "-d",
            "1",
            "--warmup",
            "0.2",
            "-q",
        ],
        Duration::from_secs(60),
    );
    assert_no_panic(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("several workloads on one window"), "{text}");
    let g1 = text
        .lines()
        .find(|l| l.trim_start().starts_with("g1"))
        .expect("g1 line");
    let g2 = text
        .lines()
        .find(|l| l.trim_start().starts_with("g2"))
        .expect("g2 line");
    assert!(g1.contains("stream --tls") && g1.contains("bit/s"), "{g1}");
    assert!(g2.contains("rr --request 64") && g2.contains("p99"), "{g2}");
    // TLS is the group's: the stream's result names its session, the rr's none.
    let r = mix_json("mix-tls.json", &["stream --tls", "rr"], "-d 1 --warmup 0.2");
    assert!(
        group(&r, "g1")["summary"]["tls"]["protocol"].is_string(),
        "{}",
        r["groups"]
    );
    assert!(group(&r, "g2")["summary"]["tls"].is_null());
    assert!(r["baseline"].is_null(), "a mix runs no clear twin");
}

#[test]
fn bad_mixes_get_one_line_errors_naming_the_group() {
    let cases: &[(&[&str], &str)] = &[
        (&["run", "mix"], "at least one group"),
        (
            &["run", "mix", "stream", "rr --flows"],
            "group 'rr --flows'",
        ),
        (&["run", "mix", "stream", "strem"], "strem"),
        (&["run", "mix", "stream --bytes 1M"], "--bytes"),
        (&["run", "mix", "stream", "rr -d 3"], "one window"),
        (
            &["run", "mix", "stream", "rr --agent 127.0.0.1:1"],
            "after the groups",
        ),
        (&["run", "mix", "scp --bytes 1M"], "program"),
        (
            &["run", "mix", "stream", "crr --rate 10"],
            "group g2 (crr --rate 10)",
        ),
        (
            &["run", "stream", "rr"],
            "only `linerate run mix` takes groups",
        ),
    ];
    for (args, want) in cases {
        let o = run(args, Duration::from_secs(20));
        assert_no_panic(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains(want), "{args:?}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{args:?}: {e}");
    }
}

#[test]
fn a_study_case_runs_groups_on_one_window() {
    let dir = tmp("mix-study");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("mix.toml");
    std::fs::write(
        &file,
        r#"
title = "rr beside streams"
description = "rr latency with and without bulk traffic beside it."
[test]
duration = "1s"
warmup = "0.2s"
[[case]]
label = "alone"
workload = "rr"
rate = "200"
[[case]]
label = "beside 2 streams"
workload = "mix"
groups = ["rr --rate 200", "stream --flows 2"]
"#,
    )
    .unwrap();
    let out = dir.join("out");
    let folder = study_ok(&file, &out, Duration::from_secs(120));
    let mut found = false;
    for e in std::fs::read_dir(folder.join("points")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "json") {
            let r = json(&p);
            if r["spec"]["workload"] == "mix" {
                found = true;
                assert_eq!(r["groups"].as_array().unwrap().len(), 2, "{p:?}");
                assert_eq!(group(&r, "g1")["workload"], "rr");
                assert!(f(&group(&r, "g1")["summary"]["transactions_per_s"]) > 150.0);
                assert!(f(&group(&r, "g2")["summary"]["throughput_bps"]) > 1e8);
            }
        }
    }
    assert!(found, "no mixed point in {folder:?}");
    let report = std::fs::read_to_string(folder.join("report.md")).unwrap();
    assert!(report.contains("beside 2 streams"), "{report}");
}
