//! Every renderer and every key-point rule over committed real results
//! (flent keeps real result files for this): `tests/fixtures/quick` is a
//! `linerate quick -d 1` folder from loopback, `tests/fixtures/wan-lite` a
//! lab study (exact-window transfers and real scp at 2 and 20 ms). They are
//! inputs only (manifest, study file, point results); the reports are drawn
//! again here, so a change in analysis or rendering that breaks on real
//! data, or silently drops a finding, fails.

use std::path::{Path, PathBuf};

use linerate::report::analysis::{check, compare, keypoints, landscape};
use linerate::report::pipeline;
use linerate::report::render::{csv, document, html, human, markdown};
use linerate::study::folder;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// A copy to write reports into (the committed folder stays inputs only).
fn copy(name: &str) -> PathBuf {
    let to = std::env::temp_dir().join(format!("linerate-fixture-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&to);
    copy_dir(&fixture(name), &to);
    to
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

type Rule = fn(&landscape::Landscape) -> Vec<keypoints::KeyPoint>;

/// Every key-point rule, by name, so each one runs on real data.
fn rules() -> Vec<(&'static str, Rule)> {
    vec![
        ("streams_to_line_rate", keypoints::streams_to_line_rate),
        ("scaling_peak", keypoints::scaling_peak),
        ("service_demand_trend", keypoints::service_demand_trend),
        ("cpu_bound", keypoints::cpu_bound),
        ("host_saturated", keypoints::host_saturated),
        ("tls_cost", keypoints::tls_cost),
        ("shared_host", keypoints::shared_host),
        ("noise", keypoints::noise),
        ("tail_latency", keypoints::tail_latency),
        ("transaction_cost", keypoints::transaction_cost),
        ("missing", keypoints::missing),
        ("window_or_rate_bound", keypoints::window_or_rate_bound),
        (
            "window_not_proportional",
            keypoints::window_not_proportional,
        ),
        ("model_mismatch", keypoints::model_mismatch),
        ("scp_login", keypoints::scp_login),
        ("scp_channel_window", keypoints::scp_channel_window),
    ]
}

/// The rules that must find something in `name`'s results.
fn expected(name: &str) -> &'static [&'static str] {
    match name {
        "quick" => &["cpu_bound", "transaction_cost", "noise", "shared_host"],
        "wan-lite" => &[
            "window_or_rate_bound",
            "window_not_proportional",
            "model_mismatch",
            "scp_login",
            "noise",
            "shared_host",
        ],
        _ => &[],
    }
}

fn points(name: &str) -> usize {
    match name {
        "quick" => 5,
        "wan-lite" => 8,
        _ => 0,
    }
}

#[test]
fn every_key_point_rule_runs_on_real_results_and_finds_what_they_show() {
    for name in ["quick", "wan-lite"] {
        let loaded = folder::load(&fixture(name)).unwrap();
        check::study(&loaded.study).unwrap();
        let land = landscape::build(&loaded);
        assert_eq!(land.rows.len(), points(name), "{name}");
        let mut found = Vec::new();
        for (rule, f) in rules() {
            let k = f(&land);
            for p in &k {
                assert!(!p.text.is_empty(), "{name}: {rule} gave an empty point");
            }
            if !k.is_empty() {
                found.push(rule);
            }
        }
        for want in expected(name) {
            assert!(
                found.contains(want),
                "{name}: {want} found nothing; found {found:?}"
            );
        }
        let all = keypoints::derive(&land);
        assert!(
            all.len() >= expected(name).len(),
            "{name}: {} key points",
            all.len()
        );
    }
}

#[test]
fn every_renderer_draws_the_real_results() {
    for name in ["quick", "wan-lite"] {
        let dir = copy(name);
        let html_path = pipeline::write_all(&dir).unwrap();
        let loaded = folder::load(&dir).unwrap();
        let land = landscape::build(&loaded);
        let report = document::build(&loaded, &land);
        let page = html::render(&report);
        assert_eq!(page, std::fs::read_to_string(&html_path).unwrap());
        assert!(page.contains(&html::esc(&loaded.study.title)), "{name}");
        for section in [
            "Performance Landscape",
            "Configuration Summary",
            "Benchmark Description",
            "Key Points",
        ] {
            assert!(page.contains(section), "{name}: html lacks {section}");
        }
        let md = markdown::render(&report);
        assert!(md.contains("## Key Points"), "{name}");
        let table = csv::landscape(&land).unwrap();
        assert_eq!(table.lines().count(), 1 + points(name), "{name}: {table}");
        for (i, _) in loaded.study.plots.iter().enumerate() {
            let svg = std::fs::read_to_string(dir.join(format!("plots/plot-{}.svg", i + 1)))
                .unwrap_or_else(|e| panic!("{name}: plot {}: {e}", i + 1));
            if loaded.study.plots[i].x == "case" {
                // Tests side by side are categories: bars, no line through
                // unrelated tests and no point markers.
                assert!(
                    svg.contains("<svg") && !svg.contains("<circle"),
                    "{name}: plot {} of cases has markers",
                    i + 1
                );
                let bars = svg
                    .lines()
                    .filter(|l| l.starts_with("<rect") && l.contains(r##"fill="#1F77B4""##))
                    .count();
                // One bar per test of the first series, and its legend key.
                assert!(bars >= 3, "{name}: plot {} has {bars} bars", i + 1);
            } else {
                assert!(
                    svg.contains("<svg") && svg.contains("<circle"),
                    "{name}: no data marks"
                );
            }
        }
        if name == "quick" {
            // A plot shows only the tests its metric is the main figure
            // of: streams on the throughput plot, rr and crr on the
            // transactions plot.
            let plot = |i: usize| {
                std::fs::read_to_string(dir.join(format!("plots/plot-{i}.svg"))).unwrap()
            };
            let (bulk, tx) = (plot(1), plot(2));
            for case in ["stream 1 flow", "stream 4 flows"] {
                assert!(bulk.contains(case) && !tx.contains(case), "{case}");
            }
            for case in ["rr 1/1", "rr 200/1000", "crr 64/8192"] {
                assert!(tx.contains(case) && !bulk.contains(case), "{case}");
            }
        }
        let labelled: Vec<(String, linerate::model::result::TestResult)> = loaded
            .results
            .iter()
            .map(|(run, r)| (run.point.clone(), r.clone()))
            .collect();
        let quick = human::quick_table(&labelled);
        assert_eq!(quick.lines().count(), 1 + points(name), "{name}: {quick}");
        for (_, r) in &loaded.results {
            let text = human::render(r, true);
            assert!(text.starts_with("linerate "), "{name}: {text}");
            assert!(text.contains(&human::describe(&r.spec)), "{name}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn every_cost_a_bulk_result_has_reaches_the_landscape() {
    // A finite transfer also records a latency (its duration): that must
    // not hide its CPU per KB, which its JSON summary has.
    for name in ["quick", "wan-lite"] {
        let land = landscape::build(&folder::load(&fixture(name)).unwrap());
        let mut checked = 0;
        for row in &land.rows {
            let Some(r) = row.results.first() else {
                continue;
            };
            if r.summary.main_metric != Some(linerate::model::spec::MainMetric::Throughput) {
                continue;
            }
            for (key, v) in [
                ("client_us_per_kb", r.summary.cpu.client.us_per_kb),
                ("agent_us_per_kb", r.summary.cpu.agent.us_per_kb),
            ] {
                if v.is_some() {
                    assert!(
                        row.value(key).is_some(),
                        "{name} {}: {key} lost",
                        row.point.label()
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked >= 4, "{name}: {checked} costs checked");
    }
}

#[test]
fn a_folder_compared_with_itself_shows_no_change() {
    for name in ["quick", "wan-lite"] {
        let land = landscape::build(&folder::load(&fixture(name)).unwrap());
        let (changes, unmatched) = compare::compare(&land, &land, &[], 95.0);
        assert!(!changes.is_empty(), "{name}");
        assert!(unmatched.is_empty(), "{name}: {unmatched:?}");
        assert!(changes.iter().all(|c| c.change_pct == 0.0), "{name}");
    }
}

#[test]
fn results_of_schema_1_still_read() {
    // Version 1 called the workers `threads`: the same result with the old
    // names must load into the same spec.
    let p = fixture("quick").join("points/rr-1-1.r1.json");
    let text = std::fs::read_to_string(p).unwrap();
    let now: linerate::model::result::TestResult = serde_json::from_str(&text).unwrap();
    let old = text
        .replace("\"agent_workers\"", "\"agent_threads\"")
        .replace("\"workers\"", "\"threads\"");
    assert!(old.contains("\"threads\""));
    let then: linerate::model::result::TestResult = serde_json::from_str(&old).unwrap();
    assert_eq!(then.spec, now.spec);
}
