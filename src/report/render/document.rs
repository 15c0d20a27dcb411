//! The report's content, in the seeds' order (Performance Landscape,
//! Configuration Summary, Benchmark Description, Key Points), built once from
//! a results folder and rendered by each format (html, markdown) the way
//! hyperfine's exporters share one model. Writing a report never runs a test.

use crate::report::analysis::hosts::host_rows;
use crate::report::analysis::keypoints::{self, KeyPoint};
use crate::report::analysis::landscape::{Landscape, Table};
use crate::report::render::plot;
use crate::study::folder::Loaded;

pub struct Figure {
    pub title: String,
    /// An inline `<svg>` element.
    pub svg: String,
    /// File name under `plots/` (for Markdown, which cannot inline SVG).
    pub file: String,
}

pub struct Report {
    pub title: String,
    /// "study quick · 5 points × 1 run · complete · 2026-11-22T10:00:00Z"
    pub subtitle: String,
    pub tables: Vec<Table>,
    pub figures: Vec<Figure>,
    /// Charts that could not be drawn (no data yet), with the reason.
    pub missing_figures: Vec<String>,
    pub line_rate_note: Option<String>,
    /// The hosts' settings (several environments: those that differ, then those they share).
    pub config: Vec<Table>,
    pub description: String,
    /// Facts about the run: network, repetitions, order, overrides.
    pub details: Vec<(String, String)>,
    /// (point, the `linerate run` command line that reproduces it).
    pub commands: Vec<(String, String)>,
    pub key_points: Vec<KeyPoint>,
}

/// Many hosts: each host's own figures beside the aggregate, per point
/// (means over the point's repetitions), with what each host is. None when
/// no result ran on more than one pair of hosts.
/// Per server data address (port) at each point where a server had
/// several: flows, throughput and share, means over repetitions.
fn ports_table(loaded: &Loaded) -> Option<Table> {
    use std::collections::BTreeMap;
    type Key = (usize, String, String);
    let mut by: BTreeMap<Key, Vec<&crate::model::result::AddressRun>> = BTreeMap::new();
    let mut labels: BTreeMap<usize, String> = BTreeMap::new();
    for (run, r) in &loaded.results {
        let Some(p) = loaded.manifest.point(&run.point) else {
            continue;
        };
        for h in r.hosts.iter().filter(|h| h.role == "server") {
            for a in &h.per_address {
                labels.insert(p.index, p.label());
                by.entry((p.index, h.name.clone(), a.address.clone()))
                    .or_default()
                    .push(a);
            }
        }
    }
    if by.is_empty() {
        return None;
    }
    let mut t = Table {
        title: "Ports: each server data address's throughput (flows by the address they connected to; means over repetitions)".into(),
        headers: ["point", "server", "address", "flows", "throughput", "share"]
            .map(String::from)
            .to_vec(),
        rows: vec![],
    };
    for ((i, host, addr), v) in &by {
        let n = v.len() as f64;
        let mean = |f: fn(&crate::model::result::AddressRun) -> f64| {
            v.iter().map(|a| f(a)).sum::<f64>() / n
        };
        t.rows.push(vec![
            labels[i].clone(),
            host.clone(),
            addr.clone(),
            v[0].flows.len().to_string(),
            crate::units::fmt_bps(mean(|a| a.throughput_bps)),
            format!("{:.0}%", 100.0 * mean(|a| a.share)),
        ]);
    }
    Some(t)
}

/// Where each host of a fleet ran, as its hosts file says (`linerate k8s
/// up`: node, zone, network, path, kernel, CNI, runtime) with the MTU of
/// each link its agent saw: one row per host, for the Configuration
/// Summary. None when no host says.
fn sites_table(loaded: &Loaded) -> Option<Table> {
    const KEYS: [&str; 7] = [
        "node", "zone", "network", "path", "kernel", "cni", "runtime",
    ];
    let mut seen: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (_, r) in &loaded.results {
        for h in r.hosts.iter().filter(|h| !h.site.is_empty()) {
            seen.entry(h.name.clone()).or_insert_with(|| {
                let mut row = vec![h.name.clone()];
                row.extend(
                    KEYS.iter()
                        .map(|k| h.site.get(*k).cloned().unwrap_or_default()),
                );
                row.push(
                    h.environment
                        .links
                        .iter()
                        .filter(|l| l.name != "lo")
                        .filter_map(|l| l.mtu.map(|m| format!("{} {m}", l.name)))
                        .collect::<Vec<_>>()
                        .join(", "),
                );
                row
            });
        }
    }
    if seen.is_empty() {
        return None;
    }
    Some(Table {
        title: "Where each host ran (its hosts file's site; MTU as its agent saw it)".into(),
        headers: [
            "host", "node", "zone", "network", "path", "kernel", "CNI", "runtime", "MTU",
        ]
        .map(String::from)
        .to_vec(),
        rows: seen.into_values().collect(),
    })
}

fn hosts_table(loaded: &Loaded) -> Option<Table> {
    use crate::units::{fmt_bps, fmt_rate, fmt_us};
    use std::collections::BTreeMap;
    let mut by: BTreeMap<(usize, String, String), Vec<&crate::model::result::HostRun>> =
        BTreeMap::new();
    let mut labels: BTreeMap<usize, String> = BTreeMap::new();
    for (run, r) in &loaded.results {
        let Some(p) = loaded.manifest.point(&run.point) else {
            continue;
        };
        for h in &r.hosts {
            labels.insert(p.index, p.label());
            by.entry((p.index, h.role.clone(), h.name.clone()))
                .or_default()
                .push(h);
        }
    }
    if by.is_empty() {
        return None;
    }
    let mut t = Table {
        title: "Hosts: each host's share of the aggregate (means over repetitions)".into(),
        headers: [
            "point",
            "host",
            "role",
            "machine",
            "flows",
            "throughput",
            "trans/s",
            "p50",
            "host CPU",
            "process cores",
            "clock offset",
        ]
        .map(String::from)
        .to_vec(),
        rows: vec![],
    };
    // Servers first, then clients, in name order within a point.
    let mut keys: Vec<&(usize, String, String)> = by.keys().collect();
    keys.sort_by_key(|(i, role, name)| (*i, role != "server", name.clone()));
    for key in keys {
        let hs = &by[key];
        let n = hs.len() as f64;
        let mean =
            |f: fn(&crate::model::result::HostRun) -> f64| hs.iter().map(|h| f(h)).sum::<f64>() / n;
        let h = hs[hs.len() - 1];
        t.rows.push(vec![
            labels[&key.0].clone(),
            h.name.clone(),
            h.role.clone(),
            format!(
                "{} ({} CPUs, {}){}",
                h.environment.hostname,
                h.environment.cpus,
                h.environment.kernel,
                h.site_line().map(|l| format!(" · {l}")).unwrap_or_default()
            ),
            h.flows.len().to_string(),
            fmt_bps(mean(|h| h.throughput_bps)),
            if h.role == "client" && h.counters.transactions > 0 {
                fmt_rate(mean(|h| h.transactions_per_s))
            } else {
                "-".into()
            },
            h.latency_us
                .as_ref()
                .map(|l| fmt_us(l.p50))
                .unwrap_or_else(|| "-".into()),
            h.cpu
                .as_ref()
                .map(|c| format!("{:.0}%", c.host_util_pct))
                .unwrap_or_else(|| "-".into()),
            format!("{:.2}", mean(|h| h.cost.process_cores)),
            format!(
                "{:+.1} µs ± {}",
                h.clock.offset_ns as f64 / 1e3,
                fmt_us(h.clock.uncertainty_ns as f64 / 1e3)
            ),
        ]);
    }
    Some(t)
}

/// A study's `overview` axis: its values compared as environments.
fn axis_overview(study: &crate::study::file::Study, land: &Landscape) -> Option<Table> {
    let dim = study.overview.as_deref()?;
    let mut values: Vec<String> = Vec::new();
    for r in &land.rows {
        if let Some(v) = r.point.param(dim) {
            if !values.iter().any(|x| x == v) {
                values.push(v.to_string());
            }
        }
    }
    let keys: Vec<String> = study
        .tables
        .iter()
        .flat_map(|t| t.columns.clone())
        .collect();
    crate::report::analysis::environments::overview(land, dim, &values, &keys)
}

/// Draws `charts` as SVG figures named `{prefix}-N.svg`; a chart that
/// cannot be drawn is listed with why.
fn draw(
    charts: impl IntoIterator<Item = crate::model::chart::Chart>,
    prefix: &str,
    figures: &mut Vec<Figure>,
    missing: &mut Vec<String>,
) {
    for (i, chart) in charts.into_iter().enumerate() {
        match plot::svg(&chart) {
            Ok(svg) => figures.push(Figure {
                title: chart.title.clone(),
                svg,
                file: format!("{prefix}-{}.svg", i + 1),
            }),
            Err(e) => missing.push(format!("{}: {e}", chart.title)),
        }
    }
}

/// The hosts' settings as linerate collected them on each end (one column
/// when client and agent are one host), from the first result, with the
/// lab's tunnel and links and a note when later results differ.
fn config_table(loaded: &Loaded, first: Option<&crate::model::result::TestResult>) -> Table {
    match first {
        Some(r) => {
            let (c, a) = (&r.environment.client, &r.environment.agent);
            // Another tool's server (`--perf-server`): nothing of its host
            // was collected, so only the client's column is shown.
            let foreign = r.agent.foreign.as_deref();
            let same = foreign.is_none() && (c == a || (r.agent.local && c.hostname == a.hostname));
            // One column of values: one host, or only the client's known.
            let two = same || foreign.is_some();
            let mut t = Table {
                title: "Hosts, as linerate collected them on each end".into(),
                headers: match (foreign, same) {
                    (Some(what), _) => vec![
                        "setting".into(),
                        format!(
                            "client (the server, {what} at {}, is not collected)",
                            r.agent.address
                        ),
                    ],
                    (None, true) => vec!["setting".into(), "client and agent (one host)".into()],
                    (None, false) => vec!["setting".into(), "client".into(), "agent".into()],
                },
                rows: vec![],
            };
            for (k, cv, av) in host_rows(c, a) {
                t.rows.push(if two { vec![k, cv] } else { vec![k, cv, av] });
            }
            if let Some(v) =
                crate::report::analysis::tunnel::summary(loaded.results.iter().map(|(_, r)| r))
            {
                let k = "lab tunnel".to_string();
                t.rows.push(if two {
                    vec![k, v]
                } else {
                    vec![k, v.clone(), v]
                });
            }
            let differ = loaded
                .results
                .iter()
                .filter(|(_, x)| {
                    x.environment.client.kernel != c.kernel
                        || x.environment.agent.kernel != a.kernel
                        || x.environment.client.sysctls != c.sysctls
                        || x.environment.agent.sysctls != a.sysctls
                })
                .count();
            // The lab's links: their kind (veth, bridge, macvlan) and MTU,
            // every combination the results ran on.
            let mut links: Vec<String> = Vec::new();
            for (_, x) in &loaded.results {
                if let Some(l) = x.lab.as_ref().and_then(|l| l.spec.as_ref()) {
                    let mut v = format!("{} links, MTU {}", l.link.name(), l.mtu);
                    if l.ports > 1 {
                        v.push_str(&format!(", {} server ports", l.ports));
                    }
                    if !links.contains(&v) {
                        links.push(v);
                    }
                }
            }
            if !links.is_empty() {
                let mut row = vec!["lab links".to_string(), links.join("; ")];
                if !two {
                    row.push(String::new());
                }
                t.rows.push(row);
            }
            if differ > 0 {
                t.rows.push(vec![
                    "note".into(),
                    format!("{differ} results were taken with a different kernel or sysctls than the first; see their JSON"),
                ]);
                if !two {
                    t.rows.last_mut().expect("pushed").push(String::new());
                }
            }
            t
        }
        None => Table {
            title: "Hosts".into(),
            headers: vec!["setting".into(), "value".into()],
            rows: vec![vec!["hosts".into(), "no result stored yet".into()]],
        },
    }
}

/// Facts about the run: the study, network, agent, runs, order, times,
/// command, and the overrides and notes there are.
fn run_details(
    loaded: &Loaded,
    land: &Landscape,
    first: Option<&crate::model::result::TestResult>,
) -> Vec<(String, String)> {
    let done = loaded.results.len();
    let study = &loaded.study;
    let m = &loaded.manifest;
    let mut details = vec![
        (
            "study".to_string(),
            format!("{} ({})", study.name, study.origin),
        ),
        ("network".into(), m.network.clone()),
        (
            "agent".into(),
            first
                .map(|r| {
                    let by = match (&r.agent.foreign, r.agent.local) {
                        (Some(what), _) => format!(" ({what}, not a linerate agent)"),
                        (None, true) => " (started by linerate)".into(),
                        (None, false) => String::new(),
                    };
                    format!("{}{by}", r.agent.address)
                })
                .unwrap_or_else(|| "-".into()),
        ),
        (
            "runs".into(),
            format!(
                "{} × {} = {}, {done} stored; status {}",
                crate::units::plural(m.points.len() as u64, "point", "points"),
                crate::units::plural(m.repeat as u64, "repetition", "repetitions"),
                crate::units::plural(m.runs.len() as u64, "run", "runs"),
                m.status
            ),
        ),
        (
            "order".into(),
            match m.seed {
                Some(s) => {
                    format!("repetitions interleaved, shuffled within each round (seed {s})")
                }
                None => "repetitions interleaved, study order".into(),
            },
        ),
        ("started".into(), m.created_at.clone()),
        ("last result".into(), m.updated_at.clone()),
        ("command".into(), m.command.join(" ")),
    ];
    let overrides = serde_json::to_value(&m.overrides)
        .ok()
        .and_then(|v| v.as_object().cloned())
        .map(|o| {
            o.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| format!("{k} = {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    if !overrides.is_empty() {
        details.push(("overrides (command line)".into(), overrides));
    }
    if let Some(n) = &land.line_rate_note {
        details.push(("line rate".into(), n.clone()));
    }
    if let Some(n) = &land.model_note {
        details.push(("window/RTT model".into(), n.clone()));
    }
    details
}

pub fn build(loaded: &Loaded, land: &Landscape) -> Report {
    let study = &loaded.study;
    let m = &loaded.manifest;
    let mut figures = Vec::new();
    let mut missing_figures = Vec::new();
    let charts = study.plots.iter().map(|p| land.chart(p));
    draw(charts, "plot", &mut figures, &mut missing_figures);
    // Each kind's own charts of its points (rrul: flent's latency over
    // time and its distribution; rpm: RPM and the load per interval).
    let points = land.views();
    for kind in crate::workload::KINDS {
        let charts = kind.charts(&points);
        draw(
            charts,
            kind.workload().name(),
            &mut figures,
            &mut missing_figures,
        );
    }
    // Capacity searches: the figure against offered load, target and knee.
    let charts = crate::report::analysis::search::charts(land);
    draw(charts, "capacity", &mut figures, &mut missing_figures);
    let first = loaded.results.first().map(|(_, r)| r);
    let config = config_table(loaded, first);
    let details = run_details(loaded, land, first);
    let commands = m
        .points
        .iter()
        .map(|p| {
            (
                p.label(),
                crate::model::options::to_command_line(
                    &p.spec,
                    &crate::workload::facts(p.spec.workload),
                ),
            )
        })
        .collect();
    Report {
        title: study.title.clone(),
        subtitle: format!(
            "study {} · {} points × {} · {} · {}",
            study.name,
            m.points.len(),
            if m.repeat == 1 {
                "1 run".to_string()
            } else {
                format!("{} runs", m.repeat)
            },
            m.status,
            m.created_at
        ),
        tables: {
            let mut t = land.tables(study);
            t.extend(hosts_table(loaded));
            t.extend(ports_table(loaded));
            if study.overviews.len() > 1 {
                // Several axes: each one's ratios, then each pair's.
                let keys: Vec<String> = study
                    .tables
                    .iter()
                    .flat_map(|t| t.columns.clone())
                    .collect();
                let o = crate::report::analysis::overview::tables(land, &study.overviews, &keys);
                t.splice(0..0, o);
            } else if let Some(o) = axis_overview(study, land) {
                t.insert(0, o);
            }
            t
        },
        figures,
        missing_figures,
        line_rate_note: land.line_rate_note.clone(),
        config: std::iter::once(config).chain(sites_table(loaded)).collect(),
        description: study.description.clone(),
        details,
        commands,
        key_points: keypoints::unavailable(m)
            .into_iter()
            .chain(keypoints::derive(land))
            .chain(keypoints::against_target(
                land,
                study.model.latency_target_s(),
            ))
            .collect(),
    }
}
