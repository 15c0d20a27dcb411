//! Every renderer and every key-point rule over committed real results
//! (flent keeps real result files for this): `tests/fixtures/quick` is a
//! `linerate quick -d 1` folder from loopback, `tests/fixtures/wan-lite` a
//! lab study (exact-window transfers and real scp at 2 and 20 ms); `udp`,
//! `memcache`, `tls`, `tls-handshake`, `conn`, `mix`, `search`, `cipher`,
//! `rrul`, `exec`, `hosts` and `environments/{loopback, lab}` are short
//! studies made by `bench/fixtures.sh` (how, and on what
//! machine: tests/fixtures/README.md), drawn through the command line
//! below. They are inputs only (manifest, study file, point results); the
//! reports are drawn again here, so a change in analysis or rendering that
//! breaks on real data, or silently drops a finding, fails.

mod common;

use linerate::units::{fmt_bps, fmt_rate, fmt_us};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

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
        ("tail_source", keypoints::tail_source),
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

// ---------------------------------------------------------------------------
// Fixtures drawn through the command line: udp, memcache, tls, tls-handshake,
// hosts, and environments/{loopback,lab} merged by `linerate report A B`
// (made by bench/fixtures.sh; tests/fixtures/README.md says with what command
// and on what machine). `linerate report` runs every key-point rule and every
// renderer (markdown, html, csv, svg plots); `linerate compare --json` the
// comparison and its JSON. Every figure a table shows and every key point of
// the fixture's topic is checked against the fixture's own result JSON, so a
// rule that breaks, or silently stops firing, on real data fails here. Only
// the binary is used (and `linerate::units` to format numbers as it does):
// the report's modules may move, its command line stays.

/// A point of a fixture, with its one stored result.
struct Pt {
    id: String,
    params: Vec<(String, String)>,
    r: Value,
}

fn label_of<'a>(params: impl Iterator<Item = &'a (String, String)>) -> String {
    params
        .map(|(k, v)| {
            if k == "case" {
                v.clone()
            } else {
                format!("{k}={v}")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

impl Pt {
    /// "udp-stream flows=4 batch=32", as the report names the point.
    fn label(&self) -> String {
        label_of(self.params.iter())
    }

    /// The label without one parameter: what groups points along it.
    fn except(&self, key: &str) -> String {
        label_of(self.params.iter().filter(|(k, _)| k != key))
    }

    fn param(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn fig(&self, key: &str) -> Option<f64> {
        figure(&self.r, key)
    }
}

fn read_json(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A fixture's points in study order, each with its result (one run of
/// one iteration, complete: what the fixtures hold).
fn points_of(dir: &Path) -> Vec<Pt> {
    let m = read_json(&dir.join("manifest.json"));
    assert_eq!(m["status"], "complete", "{}", dir.display());
    let runs = m["runs"].as_array().unwrap();
    m["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let id = p["id"].as_str().unwrap().to_string();
            let mine: Vec<&Value> = runs.iter().filter(|r| r["point"] == p["id"]).collect();
            assert_eq!(mine.len(), 1, "{id}: one run");
            let r = read_json(&dir.join(mine[0]["file"].as_str().unwrap()));
            assert_eq!(r["summary"]["status"], "ok", "{id}");
            assert_eq!(r["iterations"].as_array().unwrap().len(), 1, "{id}");
            let params = p["params"]
                .as_array()
                .unwrap()
                .iter()
                .map(|kv| {
                    (
                        kv[0].as_str().unwrap().to_string(),
                        kv[1].as_str().unwrap().to_string(),
                    )
                })
                .collect();
            Pt { id, params, r }
        })
        .collect()
}

/// The metrics these fixtures show, read from a result's `summary` (one
/// iteration each, so the summary is the point's value); None where the
/// report shows "-".
const FIGURES: &[&str] = &[
    "throughput_bps",
    "transactions_per_s",
    "latency_p50_us",
    "latency_p99_us",
    "packets_per_s",
    "packets_sent_per_s",
    "loss_pct",
    "receiver_drop_pct",
    "jitter_us",
    "client_us_per_packet",
    "agent_us_per_packet",
    "ops_per_s",
    "gets_per_s",
    "sets_per_s",
    "hit_ratio_pct",
    "get_p50_us",
    "get_p99_us",
    "set_p99_us",
    "client_us_per_op",
    "server_us_per_op",
    "client_us_per_kb",
    "agent_us_per_kb",
    "client_us_per_tx",
    "agent_us_per_tx",
    "capacity_per_s",
    "capacity_achieved_per_s",
    "capacity_p99_us",
    "cipher_ops_per_s",
    "cipher_mb_per_s",
    "cipher_us_per_kb",
    "cipher_us_per_op",
    "rpm",
    "foreign_rpm",
    "self_rpm",
    "rpm_idle_rtt_us",
    "rpm_down_bps",
    "rpm_up_bps",
    "idle_p50_us",
    "idle_p99_us",
    "loaded_p50_us",
    "loaded_p99_us",
    "added_p99_us",
    "up_bps",
    "down_bps",
    "transfer_s",
];

fn figure(r: &Value, key: &str) -> Option<f64> {
    let s = &r["summary"];
    let transactional = s["main_metric"] == "transaction_rate" || !s["latency_us"].is_null();
    let bulk = s["main_metric"] != "transaction_rate";
    let side = if key.starts_with("client") {
        "client"
    } else {
        "agent"
    };
    match key {
        "throughput_bps" => s[key].as_f64(),
        "transactions_per_s" => s[key].as_f64().filter(|_| transactional),
        "latency_p50_us" => s["latency_us"]["p50"].as_f64().filter(|_| transactional),
        "latency_p99_us" => s["latency_us"]["p99"].as_f64().filter(|_| transactional),
        "packets_per_s"
        | "packets_sent_per_s"
        | "loss_pct"
        | "jitter_us"
        | "client_us_per_packet"
        | "agent_us_per_packet" => s["udp"][key].as_f64(),
        "receiver_drop_pct" => {
            let u = &s["udp"];
            let all = u["packets"].as_u64()? + u["lost"].as_u64()?;
            Some(100.0 * u["receiver_drops"].as_u64()? as f64 / all.max(1) as f64)
        }
        "ops_per_s" | "gets_per_s" | "sets_per_s" | "client_us_per_op" | "server_us_per_op" => {
            s["kv"][key].as_f64()
        }
        "hit_ratio_pct" => s["kv"]["hit_ratio"].as_f64().map(|h| 100.0 * h),
        "get_p50_us" => s["kv"]["get_latency_us"]["p50"].as_f64(),
        "get_p99_us" => s["kv"]["get_latency_us"]["p99"].as_f64(),
        "set_p99_us" => s["kv"]["set_latency_us"]["p99"].as_f64(),
        "client_us_per_kb" | "agent_us_per_kb" => {
            s["cpu"][side]["us_per_kb"].as_f64().filter(|_| bulk)
        }
        "client_us_per_tx" | "agent_us_per_tx" => s["cpu"][side]["us_per_tx"]
            .as_f64()
            .filter(|_| transactional),
        "capacity_per_s" => r["search"]["capacity_per_s"].as_f64(),
        "capacity_achieved_per_s" => r["search"]["achieved_per_s"].as_f64(),
        "capacity_p99_us" => {
            let c = r["search"]["capacity_per_s"].as_f64()?;
            r["search"]["points"]
                .as_array()?
                .iter()
                .find(|p| p["rate_per_s"].as_f64() == Some(c))?["p99_us"]
                .as_f64()
        }
        // One iteration per fixture point: its figures are the point's.
        "cipher_ops_per_s" => r["iterations"][0]["cipher"]["ops_per_s"].as_f64(),
        "cipher_mb_per_s" => r["iterations"][0]["cipher"]["bytes_per_s"].as_f64(),
        "cipher_us_per_kb" => r["iterations"][0]["cipher"]["cpu_us_per_kb"].as_f64(),
        "cipher_us_per_op" => r["iterations"][0]["cipher"]["cpu_us_per_op"].as_f64(),
        "idle_p50_us" | "idle_p99_us" | "loaded_p50_us" | "loaded_p99_us" | "added_p99_us"
        | "up_bps" | "down_bps" => s["latency_under_load"][key].as_f64(),
        "rpm" | "foreign_rpm" | "self_rpm" => r["iterations"][0]["responsiveness"][key].as_f64(),
        "rpm_idle_rtt_us" => r["iterations"][0]["responsiveness"]["idle_rtt_us"].as_f64(),
        "rpm_down_bps" => r["iterations"][0]["responsiveness"]["capacity_down_bps"].as_f64(),
        "rpm_up_bps" => r["iterations"][0]["responsiveness"]["capacity_up_bps"].as_f64(),
        "transfer_s" => r["exec"]
            .is_object()
            .then(|| r["iterations"][0]["duration_s"].as_f64())
            .flatten(),
        _ => panic!("no figure {key}"),
    }
}

/// A figure as the report's tables print it.
fn shown(key: &str, v: f64) -> String {
    match key {
        "throughput_bps" => fmt_bps(v),
        "transactions_per_s" | "packets_per_s" | "packets_sent_per_s" | "ops_per_s"
        | "gets_per_s" | "sets_per_s" => fmt_rate(v),
        "loss_pct" | "receiver_drop_pct" | "hit_ratio_pct" => format!("{v:.1}%"),
        "client_us_per_kb" | "agent_us_per_kb" => format!("{v:.3} µs/KB"),
        "client_us_per_tx" | "agent_us_per_tx" => format!("{v:.2} µs/tx"),
        "capacity_per_s" | "capacity_achieved_per_s" | "cipher_ops_per_s" => fmt_rate(v),
        "cipher_mb_per_s" => format!("{:.1} MB/s", v / 1e6),
        "cipher_us_per_kb" => format!("{v:.3} µs/KB"),
        "up_bps" | "down_bps" | "rpm_down_bps" | "rpm_up_bps" => fmt_bps(v),
        "rpm" | "foreign_rpm" | "self_rpm" => format!("{v:.0} RPM"),
        "transfer_s" if v >= 100.0 => format!("{v:.0} s"),
        "transfer_s" if v >= 10.0 => format!("{v:.1} s"),
        "transfer_s" if v >= 1.0 => format!("{v:.2} s"),
        "transfer_s" => format!("{v:.3} s"),
        _ => fmt_us(v),
    }
}

/// "1 flow", "4 flows" (a count the way the key points write it).
fn count(n: f64, one: &str) -> String {
    if n == 1.0 {
        format!("1 {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// One metric along a numeric parameter: points grouped by all their other
/// parameters (in order of appearance), each group sorted along `dim`.
fn curves(points: &[Pt], dim: &str, key: &str) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut out: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for p in points {
        let (Some(x), Some(y)) = (p.param(dim), p.fig(key)) else {
            continue;
        };
        let x: f64 = x.parse().unwrap();
        let g = p.except(dim);
        match out.iter_mut().find(|(k, _)| *k == g) {
            Some((_, v)) => v.push((x, y)),
            None => out.push((g, vec![(x, y)])),
        }
    }
    for (_, v) in &mut out {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// (headers, rows) of every table of a markdown report.
fn md_tables(md: &str) -> Vec<(Vec<String>, Vec<Vec<String>>)> {
    let cells = |l: &str| -> Vec<String> {
        l.trim()
            .trim_matches('|')
            .split(" | ")
            .map(|c| c.trim().to_string())
            .collect()
    };
    let lines: Vec<&str> = md.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < lines.len() {
        if lines[i].starts_with('|') && lines[i + 1].starts_with("| ---") {
            let headers = cells(lines[i]);
            let mut rows = Vec::new();
            i += 2;
            while i < lines.len() && lines[i].starts_with('|') {
                rows.push(cells(lines[i]));
                i += 1;
            }
            out.push((headers, rows));
        } else {
            i += 1;
        }
    }
    out
}

/// (headers, rows) of every table of an HTML report, cells unescaped.
fn html_tables(html: &str) -> Vec<(Vec<String>, Vec<Vec<String>>)> {
    let between = |s: &str, open: &str, close: &str| -> Vec<String> {
        s.split(open)
            .skip(1)
            .map(|c| unescape(c.split(close).next().unwrap()))
            .collect()
    };
    html.split("<table")
        .skip(1)
        .map(|t| {
            let t = t.split("</table>").next().unwrap();
            let (head, body) = t.split_once("<tbody>").unwrap_or(("", t));
            let rows = body
                .split("<tr>")
                .skip(1)
                .map(|r| between(r, "<td>", "</td>"))
                .collect();
            (between(head, "<th>", "</th>"), rows)
        })
        .collect()
}

/// The table whose headers begin with `first`.
fn table_with<'a>(
    tables: &'a [(Vec<String>, Vec<Vec<String>>)],
    first: &[&str],
    what: &str,
) -> &'a (Vec<String>, Vec<Vec<String>>) {
    tables
        .iter()
        .find(|(h, _)| h.len() >= first.len() && h.iter().zip(first).all(|(a, b)| a == b))
        .unwrap_or_else(|| panic!("{what}: no table with headers {first:?}"))
}

/// The row whose first cells are `lead`.
fn row_with<'a>(rows: &'a [Vec<String>], lead: &[&str], what: &str) -> &'a Vec<String> {
    rows.iter()
        .find(|r| r.len() >= lead.len() && r.iter().zip(lead).all(|(a, b)| a == b))
        .unwrap_or_else(|| panic!("{what}: no row {lead:?} in {rows:?}"))
}

/// A metric's column title, from `linerate study metrics` ("Title (unit)").
fn titles() -> Vec<(String, String)> {
    let o = common::run(&["study", "metrics"], Duration::from_secs(30));
    assert!(o.status.success(), "{}", common::stderr(&o));
    common::stdout(&o)
        .lines()
        .filter_map(|l| {
            let (key, label) = l.split_once(' ')?;
            let label = label.trim();
            let title = label.rsplit_once(" (").map(|(t, _)| t).unwrap_or(label);
            Some((key.to_string(), title.to_string()))
        })
        .collect()
}

/// A fixture's reports, drawn by `linerate report` in a copy of its folder.
struct Drawn {
    points: Vec<Pt>,
    dir: PathBuf,
    md: String,
    html: String,
    /// (rule, text) of every key point, from the HTML (which names rules).
    key_points: Vec<(String, String)>,
}

impl Drawn {
    /// The key points a rule gave.
    fn rule(&self, rule: &str) -> Vec<&str> {
        self.key_points
            .iter()
            .filter(|(r, _)| r == rule)
            .map(|(_, t)| t.as_str())
            .collect()
    }

    /// `rule` gave exactly one key point for each of `want` (each the start
    /// or a part of one), and at least one: the fixture exercises it.
    fn expect(&self, rule: &str, want: &[String]) {
        assert!(
            !want.is_empty(),
            "{rule}: nothing in the fixture for it to find"
        );
        let got = self.rule(rule);
        assert_eq!(
            got.len(),
            want.len(),
            "{rule}: {got:#?}, expected {want:#?}"
        );
        for w in want {
            assert!(
                got.iter().any(|g| g.contains(w.as_str())),
                "{rule}: no key point says {w:?}; it gave {got:#?}"
            );
        }
    }

    fn silent(&self, rule: &str) {
        assert!(
            self.rule(rule).is_empty(),
            "{rule} should find nothing here: {:?}",
            self.rule(rule)
        );
    }
}

impl Drop for Drawn {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "linerate-fixture-cli-{}-{}",
        name.replace('/', "-"),
        std::process::id()
    ))
}

fn linerate(args: &[&str]) -> std::process::Output {
    let o = common::run(args, Duration::from_secs(120));
    common::assert_no_panic(&o);
    assert!(
        o.status.success(),
        "linerate {args:?}: {}\n{}",
        o.status,
        common::stderr(&o)
    );
    o
}

/// Checks a drawn report folder (`out`) of `points`: the sections, every
/// table figure in markdown and HTML, the CSV's numbers, the plots, and
/// that markdown and HTML list the same key points.
fn check_drawn(out: &Path, points: Vec<Pt>, title: &str, lead: &[&str], plots: usize) -> Drawn {
    check_drawn_with(out, points, title, lead, plots, 0)
}

/// `check_drawn` for a kind whose report adds `charts` of its own (rrul's
/// latency over time, a search's p99 against offered load) to the study's
/// plots.
fn check_drawn_with(
    out: &Path,
    points: Vec<Pt>,
    title: &str,
    lead: &[&str],
    plots: usize,
    charts: usize,
) -> Drawn {
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let what = out.display().to_string();
    assert!(md.starts_with(&format!("# {title}")), "{what}: {md:.200}");
    assert!(
        html.contains(&title.replace('\'', "&#39;")),
        "{what}: html title"
    );
    for section in [
        "Performance Landscape",
        "Configuration Summary",
        "Benchmark Description",
        "Key Points and Best Practices",
    ] {
        assert!(
            md.contains(&format!("## {section}")),
            "{what}: md {section}"
        );
        assert!(html.contains(section), "{what}: html {section}");
    }
    // Every point, and every figure the landscape table shows, in both.
    let titles = titles();
    for (format, tables) in [("md", md_tables(&md)), ("html", html_tables(&html))] {
        let (headers, rows) = table_with(&tables, lead, &format!("{what} {format}"));
        assert_eq!(rows.len(), points.len(), "{what} {format}: {rows:?}");
        for p in &points {
            let values: Vec<&str> = p.params.iter().map(|(_, v)| v.as_str()).collect();
            let row = row_with(rows, &values, &format!("{what} {format}"));
            let mut checked = 0;
            for (col, h) in headers.iter().enumerate() {
                let Some((key, _)) = titles
                    .iter()
                    .find(|(k, t)| t == h && FIGURES.contains(&k.as_str()))
                else {
                    continue;
                };
                let want = p.fig(key).map(|v| shown(key, v)).unwrap_or("-".into());
                assert_eq!(row[col], want, "{what} {format} {}: {h}", p.label());
                checked += 1;
            }
            // At least three figures, or every column of a smaller table.
            let columns = headers.len() - lead.len();
            assert!(
                checked >= columns.min(3),
                "{what} {format}: {checked} figures checked"
            );
        }
    }
    // The CSV: a row per point, every figure's mean as the result has it.
    let csv = std::fs::read_to_string(out.join("landscape.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), points.len(), "{what}: {csv}");
    for p in &points {
        let row = rows
            .iter()
            .find(|r| r[0] == p.id)
            .unwrap_or_else(|| panic!("{what}: no csv row {}", p.id));
        for key in FIGURES {
            let Some(col) = header.iter().position(|h| h == key) else {
                continue;
            };
            match (p.fig(key), row[col]) {
                (None, cell) => assert_eq!(cell, "", "{what} {} {key}", p.id),
                (Some(v), cell) => {
                    let c: f64 = cell
                        .parse()
                        .unwrap_or_else(|_| panic!("{what} {key}: {cell:?}"));
                    assert!(
                        (c - v).abs() <= 1e-9 * v.abs().max(1.0),
                        "{what} {} {key}: csv {c}, result {v}",
                        p.id
                    );
                }
            }
        }
    }
    // A plot per [[plot]] of the study: a file, inline in the HTML,
    // linked from the markdown.
    assert!(plots >= 1, "{what}: no plot");
    for i in 1..=plots {
        let svg = std::fs::read_to_string(out.join(format!("plots/plot-{i}.svg")))
            .unwrap_or_else(|e| panic!("{what}: plot {i}: {e}"));
        assert!(svg.contains("<svg"), "{what}: plot {i}");
        assert!(
            md.contains(&format!("(plots/plot-{i}.svg)")),
            "{what}: md plot {i}"
        );
    }
    assert_eq!(
        html.matches("<svg").count(),
        plots + charts,
        "{what}: inline plots"
    );
    // The key points: markdown and HTML say the same, HTML names each rule.
    let key_points: Vec<(String, String)> = html
        .split("<li data-rule=\"")
        .skip(1)
        .map(|li| {
            let (rule, rest) = li.split_once("\">").unwrap();
            (
                rule.to_string(),
                // Its text ends at a detail line or at the item's end.
                unescape(
                    rest.split("<br>")
                        .next()
                        .unwrap()
                        .split("</li>")
                        .next()
                        .unwrap(),
                ),
            )
        })
        .collect();
    let md_points: Vec<&str> = md
        .split("## Key Points and Best Practices")
        .nth(1)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("- "))
        .collect();
    let html_points: Vec<&str> = key_points.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(md_points, html_points, "{what}");
    for (rule, text) in &key_points {
        assert!(!text.is_empty(), "{what}: {rule} gave an empty point");
    }
    Drawn {
        points,
        dir: out.to_path_buf(),
        md,
        html,
        key_points,
    }
}

/// `linerate report` over a copy of fixture `name`, then `check_drawn`.
fn draw(name: &str, lead: &[&str]) -> Drawn {
    draw_with(name, lead, 0)
}

/// `draw` for a kind whose report adds `charts` of its own.
fn draw_with(name: &str, lead: &[&str], charts: usize) -> Drawn {
    let dir = scratch(name);
    let _ = std::fs::remove_dir_all(&dir);
    copy_dir(&fixture(name), &dir);
    let points = points_of(&dir);
    let o = linerate(&["report", dir.to_str().unwrap()]);
    assert_eq!(
        common::stdout(&o).trim(),
        dir.join("report.html").display().to_string()
    );
    let title = read_json(&dir.join("manifest.json"))["title"]
        .as_str()
        .unwrap()
        .to_string();
    let plots = plot_count(&dir);
    check_drawn_with(&dir, points, &title, lead, plots, charts)
}

/// How many plots a fixture's study asks for.
fn plot_count(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("study.toml"))
        .unwrap()
        .matches("[[plot]]")
        .count()
}

/// The rules every loopback fixture fires: single runs, one host.
fn loopback_rules(d: &Drawn) {
    assert!(
        d.rule("noise")
            .iter()
            .any(|t| t.starts_with("Every point ran once")),
        "noise: {:?}",
        d.rule("noise")
    );
    d.expect(
        "shared_host",
        &["Client and agent ran on the same host (vm, 2 CPUs)".to_string()],
    );
    d.silent("missing");
    d.silent("contradiction");
}

/// transaction_cost's sentences from the fixture: per end, the cheapest and
/// the dearest transaction when they are 1.5x apart.
fn transaction_costs(points: &[Pt]) -> Vec<String> {
    let mut want = Vec::new();
    for (side, key) in [("client", "client_us_per_tx"), ("agent", "agent_us_per_tx")] {
        let v: Vec<(String, f64)> = points
            .iter()
            .filter_map(|p| Some((p.label(), p.fig(key)?)))
            .collect();
        if v.len() < 2 {
            continue;
        }
        let lo = v.iter().min_by(|a, b| a.1.total_cmp(&b.1)).unwrap();
        let hi = v.iter().max_by(|a, b| a.1.total_cmp(&b.1)).unwrap();
        if hi.1 / lo.1 >= 1.5 {
            want.push(format!(
                "The {side}'s CPU per transaction ranges from {:.1} µs ({}) to {:.1} µs ({}), {:.1}x.",
                lo.1,
                lo.0,
                hi.1,
                hi.0,
                hi.1 / lo.1
            ));
        }
    }
    want
}

/// `linerate compare DIR DIR --json`: every point matched, nothing changed,
/// and the human table names each point.
fn compare_with_itself(name: &str) {
    let dir = fixture(name);
    let json = scratch(&format!("{name}-compare.json"));
    let o = linerate(&[
        "compare",
        dir.to_str().unwrap(),
        dir.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let text = common::stdout(&o);
    let points = points_of(&dir);
    for p in &points {
        assert!(
            text.contains(&p.label()),
            "{name}: {} not compared: {text}",
            p.label()
        );
    }
    let v = read_json(&json);
    let _ = std::fs::remove_file(&json);
    assert_eq!(v["unmatched"], serde_json::json!([]), "{name}");
    let changes = v["changes"].as_array().unwrap();
    assert!(changes.len() >= points.len(), "{name}: {changes:?}");
    assert!(changes.iter().all(|c| c["change_pct"] == 0.0), "{name}");
}

#[test]
fn udp_fixture_reports_packets_loss_drops_and_batching() {
    let d = draw("udp", &["case", "flows", "batch", "runs"]);
    // Where receivers start dropping: per group along flows, the first
    // count with more than 1% of the datagrams dropped by the sockets.
    let mut drops = Vec::new();
    for (group, v) in curves(&d.points, "flows", "receiver_drop_pct") {
        if let Some(&(n, pct)) = v.iter().find(|(_, p)| *p > 1.0) {
            drops.push(format!(
                "Receiver drops start at {} ({group}): {pct:.1}% of the datagrams were dropped by the receiving sockets",
                count(n, "flow")
            ));
        }
    }
    d.expect("udp_receiver_drops", &drops);
    // What batching bought: the largest batch against the smallest, with
    // the sender's CPU per datagram.
    let cost = curves(&d.points, "batch", "client_us_per_packet");
    let mut batching = Vec::new();
    for (group, v) in curves(&d.points, "batch", "packets_per_s") {
        if v.len() < 2 {
            continue;
        }
        let (first, last) = (v[0], v[v.len() - 1]);
        let c = &cost.iter().find(|(g, _)| *g == group).unwrap().1;
        batching.push(format!(
            "Batches of {} datagrams per system call give {:.2}x the packets/s of batches of {} ({group}) ({} vs {}), at {:.2} instead of {:.2} µs of sender CPU per datagram.",
            last.0,
            last.1 / first.1,
            first.0,
            fmt_rate(last.1),
            fmt_rate(first.1),
            c[c.len() - 1].1,
            c[0].1
        ));
    }
    d.expect("udp_batching", &batching);
    // udp-rr's transactions have a CPU cost; datagrams are not bytes.
    d.expect("transaction_cost", &transaction_costs(&d.points));
    d.silent("service_demand_trend");
    d.silent("tls_cost");
    d.silent("kv_cost");
    loopback_rules(&d);
    // The plots of packets and drops are drawn along flows, a series per batch.
    let plot = std::fs::read_to_string(d.dir.join("plots/plot-1.svg")).unwrap();
    assert!(
        plot.contains("batch=32") && plot.contains("batch=1"),
        "{plot:.300}"
    );
    compare_with_itself("udp");
}

#[test]
fn memcache_fixture_reports_operations_hit_ratio_and_saturation() {
    let d = draw("memcache", &["keys", "flows", "runs"]);
    // Where more connections stop buying operations: the first step that
    // doubles them (or more) for less than 10% more, with no later point
    // 10% above it either. On this fixture the step 1 -> 2 connections is
    // flat within noise while 4 connections give far more: no plateau, so
    // the rule stays silent (it once said memcached saturated at 1).
    let mut saturation = Vec::new();
    for (group, v) in curves(&d.points, "flows", "ops_per_s") {
        if v.len() < 3 {
            continue;
        }
        let Some(i) = (1..v.len())
            .find(|&i| v[i].0 >= 2.0 * v[i - 1].0 && v[i..].iter().all(|p| p.1 < 1.1 * v[i - 1].1))
        else {
            continue;
        };
        let ((n0, r0), (n, r)) = (v[i - 1], v[v.len() - 1]);
        saturation.push(format!(
            "memcached saturates at {} ({group}): {} operations; {} give {:+.0}% ({})",
            count(n0, "connection"),
            fmt_rate(r0),
            count(n, "connection"),
            100.0 * (r / r0 - 1.0),
            fmt_rate(r)
        ));
    }
    // No plateau in this fixture's curve: the rule must stay silent (the
    // unit tests in keypoints/tests.rs feed it one that has a plateau).
    assert!(saturation.is_empty(), "{saturation:?}");
    d.silent("kv_saturation");
    // memcached's CPU per operation at the most connections, per group,
    // with the client's beside it.
    let client = curves(&d.points, "flows", "client_us_per_op");
    let mut parts = Vec::new();
    let mut at = 0.0;
    for (group, v) in curves(&d.points, "flows", "server_us_per_op") {
        let (n, us) = v[v.len() - 1];
        at = n;
        let c = client
            .iter()
            .find(|(g, _)| *g == group)
            .unwrap()
            .1
            .last()
            .unwrap()
            .1;
        parts.push(format!("{us:.2} µs (client {c:.2}) with {group}"));
    }
    d.expect(
        "kv_cost",
        &[format!(
            "memcached's CPU per operation at {}: {}.",
            count(at, "connection"),
            parts.join(", ")
        )],
    );
    // The hit ratio below 99% only where the key space outgrew memcached's
    // memory (its own stats count the evictions).
    let mut hits = Vec::new();
    for (group, v) in curves(&d.points, "flows", "hit_ratio_pct") {
        if let Some(&(n, h)) = v.iter().find(|p| p.1 < 99.0) {
            hits.push(format!(
                "The hit ratio is {h:.1}% at {} ({group}): gets miss keys the prefill had set.",
                count(n, "connection")
            ));
        }
    }
    d.expect("kv_hit_ratio", &hits);
    for p in &d.points {
        let evictions = p.r["summary"]["kv"]["server"]["delta"]["evictions"]
            .as_u64()
            .unwrap();
        let hit = p.fig("hit_ratio_pct").unwrap();
        assert_eq!(
            hit < 99.0,
            evictions > 0,
            "{}: {hit}% hits, {evictions} evictions",
            p.label()
        );
    }
    // memcached's rules speak of operations, not bytes or transactions.
    d.silent("transaction_cost");
    // Written before memcache's sections left `model/` (its spec, figures
    // and flow counts ride in `model::own` now), and before the counters'
    // `bytes_delivered`: every key it has reads back, in its order.
    reads_back_every_key("memcache");
    d.silent("scaling_peak");
    d.silent("service_demand_trend");
    loopback_rules(&d);
    compare_with_itself("memcache");
}

/// Pairs of points that differ only in `dim` (`on` against `off`), keyed by
/// their other parameters.
fn pairs<'a>(points: &'a [Pt], dim: &str, on: &str, off: &str) -> Vec<(String, &'a Pt, &'a Pt)> {
    points
        .iter()
        .filter(|p| p.param(dim) == Some(on))
        .filter_map(|a| {
            let b = points
                .iter()
                .find(|b| b.param(dim) == Some(off) && b.except(dim) == a.except(dim))?;
            Some((a.except(dim), a, b))
        })
        .collect()
}

#[test]
fn tls_fixture_reports_what_tls_and_crypto_hardware_cost() {
    let d = draw("tls", &["case", "tls", "crypto_hw", "runs"]);
    // TLS against clear, per end: a pair's cost per KB where it has one,
    // else per transaction; each unit its own key point (the stream's per
    // KB and crr's per transaction once shared one range), with the first
    // pair's figures and the throughput ratio of that unit's pairs.
    let tls = pairs(&d.points, "tls", "true", "false");
    assert_eq!(tls.len(), 2, "a stream and a crr pair");
    let mut want = Vec::new();
    for side in ["client", "agent"] {
        let (kb, tx) = (format!("{side}_us_per_kb"), format!("{side}_us_per_tx"));
        let unit_of = |e: &Pt, c: &Pt| match (e.fig(&kb), c.fig(&kb)) {
            (Some(a), Some(b)) => Some(("KB", a, b)),
            _ => Some(("transaction", e.fig(&tx)?, c.fig(&tx)?)),
        };
        for per in ["KB", "transaction"] {
            let mine: Vec<_> = tls
                .iter()
                .filter_map(|(k, e, c)| {
                    let (u, a, b) = unit_of(e, c)?;
                    (u == per).then_some((k, *e, *c, a, b))
                })
                .collect();
            let Some((key, _, _, a, b)) = mine.first() else {
                continue;
            };
            let mut w = format!(
                "the {side}'s CPU per {per} of clear over {} point{} ({:.1}x at {key}: {a:.3} vs {b:.3} µs)",
                mine.len(),
                if mine.len() == 1 { "" } else { "s" },
                a / b
            );
            if side == "client" {
                let t: Vec<f64> = mine
                    .iter()
                    .map(|(_, e, c, _, _)| {
                        e.fig("throughput_bps").unwrap() / c.fig("throughput_bps").unwrap()
                    })
                    .collect();
                let lo = format!("{:.2}", t.iter().cloned().fold(f64::INFINITY, f64::min));
                let hi = format!("{:.2}", t.iter().cloned().fold(f64::NEG_INFINITY, f64::max));
                // One range, or one figure when both ends print alike.
                let range = if lo == hi { lo } else { format!("{lo}-{hi}") };
                w += &format!("; throughput under TLS is {range}x of clear");
            }
            want.push(w);
        }
    }
    d.expect("tls_cost", &want);
    // Crypto hardware on against off, TLS both: per KB for the stream, per
    // transaction (a handshake each) for crr, both ends.
    let mut saving = Vec::new();
    for (key, on, off) in pairs(&d.points, "crypto_hw", "true", "false") {
        let (per, unit) = if on.fig("client_us_per_kb").is_some() {
            ("kb", "per KB")
        } else {
            ("tx", "per transaction")
        };
        let parts: Vec<String> = ["client", "agent"]
            .iter()
            .map(|side| {
                let k = format!("{side}_us_per_{per}");
                let (a, b) = (on.fig(&k).unwrap(), off.fig(&k).unwrap());
                format!(
                    "the {side} {:.0}% ({a:.3} instead of {b:.3} µs {unit}, {:.1}x)",
                    100.0 * (1.0 - a / b),
                    b / a
                )
            })
            .collect();
        saving.push(format!(
            "Crypto hardware saves {} at {key}.",
            parts.join(" and ")
        ));
    }
    d.expect("crypto_hw_saving", &saving);
    d.expect("transaction_cost", &transaction_costs(&d.points));
    loopback_rules(&d);
    // Every TLS point names its suite in its command.
    assert!(d.md.contains("--tls") && d.md.contains("--cipher aes256-gcm"));
    assert!(
        d.md.contains("--crypto-hw off"),
        "the masked points' command"
    );
    compare_with_itself("tls");
}

#[test]
fn tls_handshake_fixture_reports_the_cost_of_each_certificate() {
    let d = draw("tls-handshake", &["cert", "runs"]);
    // The agent signs once per full handshake: RSA-2048 costs it more.
    let costs = transaction_costs(&d.points);
    assert!(
        costs.iter().any(|c| c.starts_with("The agent's")),
        "{costs:?}"
    );
    d.expect("transaction_cost", &costs);
    // Each point ran with its certificate (ECDSA P-256 is the default, so
    // only RSA's command names it).
    for p in &d.points {
        assert_eq!(p.r["summary"]["tls"]["cert"], p.param("cert").unwrap());
    }
    assert!(d.md.contains("linerate run tls-handshake") && d.md.contains("--cert rsa2048"));
    d.silent("tls_cost");
    loopback_rules(&d);
    compare_with_itself("tls-handshake");
}

#[test]
fn hosts_fixture_reports_every_host_of_every_point() {
    let d = draw("hosts", &["case", "runs"]);
    // A row per host and point, with what that host moved.
    for (format, tables) in [("md", md_tables(&d.md)), ("html", html_tables(&d.html))] {
        let (_, rows) = table_with(&tables, &["point", "host", "role", "machine"], format);
        let mut n = 0;
        for p in &d.points {
            let hosts = p.r["hosts"].as_array().unwrap();
            assert_eq!(hosts.len(), 3, "{}", p.label());
            for h in hosts {
                n += 1;
                let (name, role) = (h["name"].as_str().unwrap(), h["role"].as_str().unwrap());
                let label = p.label();
                let row = row_with(rows, &[label.as_str(), name, role], format);
                let e = &h["environment"];
                assert_eq!(
                    row[3],
                    format!(
                        "{} ({} CPUs, {})",
                        e["hostname"].as_str().unwrap(),
                        e["cpus"],
                        e["kernel"].as_str().unwrap()
                    )
                );
                assert_eq!(row[4], h["flows"].as_array().unwrap().len().to_string());
                assert_eq!(
                    row[5],
                    fmt_bps(h["throughput_bps"].as_f64().unwrap()),
                    "{label} {name}"
                );
                let tx = h["counters"]["transactions"].as_u64().unwrap();
                let want = if role == "client" && tx > 0 {
                    fmt_rate(h["transactions_per_s"].as_f64().unwrap())
                } else {
                    "-".into()
                };
                assert_eq!(row[6], want, "{label} {name}");
                let p50 = h["latency_us"]["p50"]
                    .as_f64()
                    .map(fmt_us)
                    .unwrap_or("-".into());
                assert_eq!(row[7], p50, "{label} {name}");
            }
        }
        assert_eq!(rows.len(), n, "{format}");
    }
    // Two clients into one server: the flows split between the clients.
    for p in &d.points {
        assert_eq!(p.r["agent"]["address"], "d1, d2 -> sut");
        let flows: usize = p.r["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|h| h["role"] == "client")
            .map(|h| h["flows"].as_array().unwrap().len())
            .sum();
        assert_eq!(flows, 4);
    }
    assert!(d.md.contains("d1, d2 -> sut") && d.html.contains("d1, d2 -&gt; sut"));
    assert!(!d.rule("host_saturated").is_empty(), "{:?}", d.key_points);
    loopback_rules(&d);
    compare_with_itself("hosts");
}

#[test]
fn two_environments_merge_into_one_report() {
    let labels = ["loopback", "lab"];
    let dirs: Vec<PathBuf> = labels
        .iter()
        .map(|l| fixture(&format!("environments/{l}")))
        .collect();
    let out = scratch("environments-merged");
    let _ = std::fs::remove_dir_all(&out);
    let o = linerate(&[
        "report",
        dirs[0].to_str().unwrap(),
        dirs[1].to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(
        common::stdout(&o).trim(),
        out.join("report.html").display().to_string()
    );
    // The merged folder names its sources (labels: the folder names).
    let sources = read_json(&out.join("environments.json"));
    assert_eq!(sources["labels"], serde_json::json!(labels));
    // Its points: each environment's, `env` first.
    let mut points = Vec::new();
    let mut each: Vec<Vec<Pt>> = Vec::new();
    for (l, d) in labels.iter().zip(&dirs) {
        let mine = points_of(d);
        for p in points_of(d) {
            let mut params = vec![("env".to_string(), l.to_string())];
            params.extend(p.params);
            // The merged folder names a point `LABEL--ID`.
            points.push(Pt {
                id: format!("{l}--{}", p.id),
                params,
                r: p.r,
            });
        }
        each.push(mine);
    }
    let title = read_json(&dirs[0].join("manifest.json"))["title"]
        .as_str()
        .unwrap()
        .to_string();
    let d = check_drawn(
        &out,
        points,
        &title,
        &["env", "case", "runs"],
        plot_count(&dirs[0]),
    );
    assert!(d.md.contains("_2 environments (loopback, lab)"));
    // Where each ran: loopback, and the study's own emulated link, whose
    // record every lab result keeps.
    let networks: Vec<String> = labels
        .iter()
        .zip(&dirs)
        .map(|(l, d)| {
            let n = read_json(&d.join("manifest.json"))["network"].clone();
            format!("{l}: {}", n.as_str().unwrap())
        })
        .collect();
    assert!(networks[1].starts_with("lab: lab (rtt 1 ms, rate 1.00 Gbit/s"));
    assert!(d.md.contains(&networks.join("; ")), "{networks:?}");
    assert!(each[1].iter().all(|p| p.r["lab"].is_object()));
    // The overview: each point's ratio of lab to loopback, metric by metric,
    // and their geometric mean.
    let titles = titles();
    for (format, tables) in [("md", md_tables(&d.md)), ("html", html_tables(&d.html))] {
        let (headers, rows) = table_with(&tables, &["environment", "point"], format);
        for a in &each[0] {
            let b = each[1].iter().find(|b| b.id == a.id).unwrap();
            let row = row_with(rows, &["lab / loopback", &a.label()], format);
            for (col, h) in headers.iter().enumerate().skip(2) {
                let key = &titles.iter().find(|(_, t)| t == h).unwrap().0;
                let want = match (a.fig(key), b.fig(key)) {
                    (Some(x), Some(y)) if x != 0.0 => format!("{:.2}x", y / x),
                    _ => "-".into(),
                };
                assert_eq!(row[col], want, "{format} {} {h}", a.label());
            }
        }
        row_with(rows, &["lab / loopback", "geometric mean"], format);
        // The settings that differ, a column per environment: every
        // sysctl the two hosts record differently is there.
        let (h, rows) = table_with(&tables, &["setting", "loopback", "lab"], format);
        assert_eq!(h.len(), 3);
        let sysctls = |i: usize| each[i][0].r["environment"]["client"]["sysctls"].clone();
        let (x, y) = (sysctls(0), sysctls(1));
        let mut differ = 0;
        for (k, v) in x.as_object().unwrap() {
            let Some(w) = y[k].as_str() else { continue };
            if v.as_str().unwrap() != w {
                row_with(rows, &[k, v.as_str().unwrap(), w], format);
                differ += 1;
            }
        }
        assert!(differ >= 1, "{format}: no sysctl differs");
    }
    // The environments rule: lab against loopback where they differ most, on
    // the headline metric (transactions: the study has an rr), with the
    // median ratio over the points both measured.
    let metric = "transactions_per_s";
    let mut ratios = Vec::new();
    let mut most: Option<(String, f64, f64, f64)> = None;
    for a in &each[0] {
        let b = each[1].iter().find(|b| b.id == a.id).unwrap();
        let (Some(va), Some(vb)) = (a.fig(metric), b.fig(metric)) else {
            continue;
        };
        let c = b.fig("client_us_per_tx").unwrap() / a.fig("client_us_per_tx").unwrap();
        ratios.push(vb / va);
        if most
            .as_ref()
            .is_none_or(|m| (vb / va - 1.0).abs() > (m.2 / m.1 - 1.0).abs())
        {
            most = Some((a.label(), va, vb, c));
        }
    }
    let (at, va, vb, c) = most.expect("a point both environments measured");
    ratios.sort_by(|a, b| a.total_cmp(b));
    let change = 100.0 * (vb / va - 1.0);
    d.expect(
        "environments",
        &[format!(
            "lab is {:.0}% {} than loopback at {at} ({} vs {}), with {:.0}% {} client CPU per transaction — one sample each",
            change.abs(),
            if change >= 0.0 { "faster" } else { "slower" },
            fmt_rate(vb),
            fmt_rate(va),
            (100.0 * (1.0 - c)).abs(),
            if c <= 1.0 { "less" } else { "more" },
        )],
    );
    assert!(
        d.rule("environments")[0].ends_with(&format!(
            "the median ratio is {:.2}x.",
            ratios[ratios.len() / 2]
        )),
        "{:?}",
        d.rule("environments")
    );
    // Every plot has a series per environment.
    for i in 1..=plot_count(&dirs[0]) {
        let svg = std::fs::read_to_string(out.join(format!("plots/plot-{i}.svg"))).unwrap();
        for l in labels {
            let series = format!("env={l}");
            assert!(
                svg.lines().any(|x| x.trim() == series),
                "plot {i}: no {series}"
            );
        }
    }
    loopback_rules(&d);
    // `linerate report OUT` draws the merged folder again from its sources.
    let md = d.md.clone();
    linerate(&["report", out.to_str().unwrap()]);
    assert_eq!(std::fs::read_to_string(out.join("report.md")).unwrap(), md);
    for l in labels {
        compare_with_itself(&format!("environments/{l}"));
    }
}

/// The kinds that are not plain flows, and conn: each fixture draws in
/// every renderer, and compares with itself without a change (they guard
/// the redesign of how a test kind plugs in: these results must read back
/// unchanged).
#[test]
fn conn_fixture_reports_transactions_by_connections() {
    let d = draw("conn", &["flows", "runs"]);
    for p in &d.points {
        let flows: f64 = p.param("flows").unwrap().parse().unwrap();
        assert_eq!(p.r["spec"]["flows"].as_f64(), Some(flows));
        assert!(p.fig("transactions_per_s").unwrap() > 0.0);
    }
    loopback_rules(&d);
    compare_with_itself("conn");
}

#[test]
fn mix_fixture_reports_each_group() {
    // A row per group of each point: its command, and its own figures.
    let dir = scratch("mix");
    let _ = std::fs::remove_dir_all(&dir);
    copy_dir(&fixture("mix"), &dir);
    let points = points_of(&dir);
    let o = linerate(&["report", dir.to_str().unwrap()]);
    assert_eq!(
        common::stdout(&o).trim(),
        dir.join("report.html").display().to_string()
    );
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let titles = titles();
    for (format, tables) in [("md", md_tables(&md)), ("html", html_tables(&html))] {
        let (headers, rows) = table_with(&tables, &["case", "group", "runs"], format);
        let mut groups = 0;
        for p in &points {
            let gs = p.r["groups"].as_array().unwrap();
            assert_eq!(gs.len(), 2, "{}", p.id);
            assert_eq!(gs[0]["workload"], "rr");
            assert_eq!(gs[1]["workload"], "stream");
            for g in gs {
                groups += 1;
                let name = format!(
                    "{} {}",
                    g["name"].as_str().unwrap(),
                    g["command"].as_str().unwrap()
                );
                let row = row_with(rows, &[p.param("case").unwrap(), &name], format);
                let mut checked = 0;
                for (col, h) in headers.iter().enumerate() {
                    let Some((key, _)) = titles
                        .iter()
                        .find(|(k, t)| t == h && FIGURES.contains(&k.as_str()))
                    else {
                        continue;
                    };
                    let want = figure(g, key).map(|v| shown(key, v)).unwrap_or("-".into());
                    assert_eq!(row[col], want, "{format} {name}: {h}");
                    checked += 1;
                }
                assert_eq!(checked, 3, "{format}: {headers:?}");
            }
        }
        assert_eq!(rows.len(), groups, "{format}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    compare_with_itself("mix");
}

#[test]
fn search_fixture_reports_the_capacity_and_its_steps() {
    // Its own chart: p99 against offered load, the target and the knee.
    let d = draw_with("search", &["case", "runs"], 1);
    for p in &d.points {
        let s = &p.r["search"];
        let cap = s["capacity_per_s"].as_f64().unwrap();
        assert!(cap > 0.0, "{s}");
        assert!(s["points"].as_array().unwrap().len() >= 3);
        assert_eq!(p.fig("capacity_per_s"), Some(cap));
    }
    compare_with_itself("search");
}

#[test]
fn cipher_fixture_reports_each_cipher_and_record_size() {
    let d = draw("cipher", &["cipher", "message", "runs"]);
    assert_eq!(d.points.len(), 4);
    for p in &d.points {
        assert!(p.fig("cipher_mb_per_s").unwrap() > 0.0);
    }
    compare_with_itself("cipher");
    // Written before cipher's sections left `model/`.
    reads_back_byte_for_byte("cipher");
}

#[test]
fn rrul_fixture_reports_latency_idle_and_under_load() {
    // Its own charts: each point's probe latency over the phases.
    let d = draw_with("rrul", &["lab.aqm", "runs"], 2);
    for p in &d.points {
        let l = &p.r["summary"]["latency_under_load"];
        assert!(l.is_object(), "{}", p.id);
        assert!(p.r["lab"].is_object());
    }
    compare_with_itself("rrul");
    // Written before rrul's sections left `model/`.
    reads_back_byte_for_byte("rrul");
}

#[test]
fn rpm_fixture_reports_responsiveness_and_reads_back_byte_for_byte() {
    // Its own charts: RPM and goodput per interval.
    let d = draw_with("rpm", &["case", "runs"], 2);
    assert_eq!(d.points.len(), 2);
    for p in &d.points {
        assert!(p.fig("rpm").unwrap() > 0.0, "{}", p.id);
        assert!(p.fig("rpm_down_bps").unwrap() > 0.0, "{}", p.id);
        assert!(p.r["summary"]["responsiveness"]["intervals"].is_array());
    }
    compare_with_itself("rpm");
    // Written by the binary before rpm's sections left `model/` (they
    // ride in `model::own` now).
    reads_back_byte_for_byte("rpm");
}

#[test]
fn http_fixture_reports_requests_and_reads_back_byte_for_byte() {
    let d = draw_with("http", &["case", "runs"], 0);
    assert_eq!(d.points.len(), 2);
    for p in &d.points {
        assert!(p.fig("transactions_per_s").unwrap() > 0.0, "{}", p.id);
        let x = &p.r["summary"]["http_figures"];
        let n = p.r["summary"]["transactions"].as_u64().unwrap();
        assert_eq!(x["bytes_down"].as_u64(), Some(n * 1024), "{}", p.id);
    }
    compare_with_itself("http");
    reads_back_byte_for_byte("http");
}

/// Each result of fixture `name` reads and writes back as it was, key for
/// key, in the same order (floats included): for kinds whose sections
/// moved out of `model/` after their fixture was written.
fn reads_back_byte_for_byte(name: &str) {
    for e in std::fs::read_dir(fixture(name).join("points")).unwrap() {
        let path = e.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let r: linerate::model::result::TestResult = serde_json::from_str(&text).unwrap();
        let again = serde_json::to_string_pretty(&r).unwrap();
        assert!(
            again.trim_end() == text.trim_end(),
            "{}: the result does not write back as it was read",
            path.display()
        );
    }
}

/// Each result of fixture `name` writes back with every key it has, each
/// with its value and in its order, where newer fields only add keys.
fn reads_back_every_key(name: &str) {
    fn same(was: &Value, now: &Value, at: &str) {
        match (was, now) {
            (Value::Object(w), Value::Object(n)) => {
                let order: Vec<usize> = w
                    .keys()
                    .map(|k| {
                        n.keys()
                            .position(|m| m == k)
                            .unwrap_or_else(|| panic!("{at}.{k}: gone"))
                    })
                    .collect();
                assert!(
                    order.windows(2).all(|p| p[0] < p[1]),
                    "{at}: keys reordered"
                );
                for (k, v) in w {
                    same(v, &n[k], &format!("{at}.{k}"));
                }
            }
            (Value::Array(w), Value::Array(n)) => {
                assert_eq!(w.len(), n.len(), "{at}: length");
                for (i, (a, b)) in w.iter().zip(n).enumerate() {
                    same(a, b, &format!("{at}[{i}]"));
                }
            }
            _ => assert_eq!(was, now, "{at}"),
        }
    }
    for e in std::fs::read_dir(fixture(name).join("points")).unwrap() {
        let path = e.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let r: linerate::model::result::TestResult = serde_json::from_str(&text).unwrap();
        let again: Value = serde_json::to_value(&r).unwrap();
        let was: Value = serde_json::from_str(&text).unwrap();
        same(&was, &again, &path.display().to_string());
    }
}

#[test]
fn exec_fixture_reports_a_timed_command_in_a_lab() {
    let d = draw("exec", &["rtt", "runs"]);
    for p in &d.points {
        assert!(p.r["exec"].is_object(), "{}", p.id);
        assert!(p.fig("transfer_s").unwrap() > 0.0);
    }
    compare_with_itself("exec");
}
