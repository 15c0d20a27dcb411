//! A series over time, in the reports' own form: each tracked figure
//! drawn against the run number with the level of each stretch between
//! changes dashed beside it, the runs and changes as tables, the
//! environments the series ran on (a fingerprint that changes with a
//! figure is the first suspect), and the changes as key points.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::detect::Track;
use super::store::{Filter, StoredChange};
use super::{HistoryError, Store};
use crate::model::chart::{Chart, Curve, Series};
use crate::model::points::KeyPoint;
use crate::report::analysis::landscape::Table;
use crate::report::analysis::metrics;
use crate::report::render::document::{Figure, Report};
use crate::report::render::{html, markdown, plot};

fn io(path: &Path) -> impl Fn(std::io::Error) -> HistoryError + '_ {
    move |source| HistoryError::Io {
        path: path.into(),
        source,
    }
}

/// The level of each stretch between changes, as a step curve over the
/// run numbers `xs` (one value per run).
fn levels(xs: &[(f64, f64)], at: &[f64]) -> Vec<(f64, f64)> {
    let mut cuts: Vec<f64> = at.to_vec();
    cuts.sort_by(f64::total_cmp);
    let mut out = Vec::new();
    let mut start = 0;
    for end in cuts
        .iter()
        .map(|c| xs.iter().position(|(x, _)| x >= c).unwrap_or(xs.len()))
        .chain([xs.len()])
    {
        if end <= start {
            continue;
        }
        let part = &xs[start..end];
        let mean = part.iter().map(|(_, y)| y).sum::<f64>() / part.len() as f64;
        out.push((part[0].0, mean));
        out.push((part[part.len() - 1].0, mean));
        start = end;
    }
    out
}

/// One chart per tracked metric: a series per point.
fn charts(
    store: &Store,
    series: &str,
    tracks: &[(String, String)],
    changes: &[StoredChange],
) -> Result<Vec<Figure>, HistoryError> {
    let mut by_metric: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (p, m) in tracks {
        by_metric.entry(m.as_str()).or_default().push(p.as_str());
    }
    let mut figures = Vec::new();
    for (metric, points) in by_metric {
        let Some(m) = metrics::find(metric) else {
            continue;
        };
        let scale = m.plot_scale();
        let mut chart = Chart {
            title: format!("{} over time", m.title),
            x_label: "run".into(),
            y_label: m.axis_label(),
            log_x: false,
            log_y: false,
            x_categories: None,
            zoom_y: true,
            series: Vec::new(),
            hlines: Vec::new(),
            curves: Vec::new(),
        };
        for p in points {
            let xs: Vec<(f64, f64)> = store
                .values(series, p, metric)?
                .into_iter()
                .map(|(id, v)| (id as f64, v / scale))
                .collect();
            let at: Vec<f64> = changes
                .iter()
                .filter(|c| c.point == p && c.metric == metric)
                .map(|c| c.run as f64)
                .collect();
            let name = if p.is_empty() {
                m.key.to_string()
            } else {
                p.to_string()
            };
            // The levels only where they say something: around a change.
            if !at.is_empty() {
                chart.curves.push(Curve {
                    label: format!("{name}: level between changes"),
                    series: chart.series.len(),
                    points: levels(&xs, &at),
                });
            }
            chart.series.push(Series {
                name,
                points: xs.into_iter().map(|(x, y)| (x, y, None)).collect(),
            });
        }
        let svg = plot::svg(&chart).map_err(|e| HistoryError::Sql {
            path: store.path().into(),
            why: format!("cannot draw {metric}: {e}"),
        })?;
        figures.push(Figure {
            title: chart.title.clone(),
            svg,
            file: format!("history-{metric}.svg"),
        });
    }
    Ok(figures)
}

/// The runs as a table: when, status, environment, and each tracked figure.
fn runs_table(
    store: &Store,
    series: &str,
    tracks: &[(String, String)],
) -> Result<Table, HistoryError> {
    let runs = store.runs(&Filter {
        series: Some(series.into()),
        ..Default::default()
    })?;
    let mut headers: Vec<String> = ["run", "at", "status", "fingerprint"]
        .map(String::from)
        .to_vec();
    headers.extend(tracks.iter().map(|(p, m)| {
        if p.is_empty() {
            m.clone()
        } else {
            format!("{p} {m}")
        }
    }));
    let mut rows = Vec::new();
    for r in &runs {
        let figs = store.figures(r.id)?;
        let mut row = vec![
            r.id.to_string(),
            r.at.clone(),
            r.status.clone(),
            r.fingerprint.clone(),
        ];
        for (p, m) in tracks {
            let v = figs.iter().find(|f| &f.point == p && &f.metric == m);
            row.push(match (v, metrics::find(m)) {
                (Some(f), Some(m)) => m.fmt(f.value),
                _ => r
                    .error
                    .clone()
                    .filter(|_| r.status == "failed")
                    .map_or("-".into(), |e| e.chars().take(60).collect()),
            });
        }
        rows.push(row);
    }
    Ok(Table {
        title: format!("Runs of series {series}, oldest first"),
        headers,
        rows,
    })
}

/// Builds the series' report and writes report.html, report.md and the
/// plots into `dir`; returns report.html's path.
pub fn write(
    store: &Store,
    series: &str,
    track: &Track,
    dir: &Path,
) -> Result<PathBuf, HistoryError> {
    let runs = store.runs(&Filter {
        series: Some(series.into()),
        ..Default::default()
    })?;
    let Some(last) = runs.last() else {
        return Err(HistoryError::Usage(format!("no runs in series {series}")));
    };
    let tracks = track.pick(&store.tracks(&last.series)?);
    let changes = store.changes(&last.series)?;
    let figures = charts(store, &last.series, &tracks, &changes)?;
    let mut config = vec![Table {
        title: "Environments (fingerprint: hosts, kernels, CPUs, linerate build)".into(),
        headers: ["fingerprint", "runs", "first run", "client"]
            .map(String::from)
            .to_vec(),
        rows: Vec::new(),
    }];
    let mut prints: Vec<&str> = Vec::new();
    for r in &runs {
        if !prints.contains(&r.fingerprint.as_str()) {
            prints.push(&r.fingerprint);
        }
    }
    for f in prints {
        let of: Vec<_> = runs.iter().filter(|r| r.fingerprint == f).collect();
        let (_, e) = store.details(of[0].id)?;
        let c = &e.client;
        config[0].rows.push(vec![
            f.to_string(),
            of.len().to_string(),
            of[0].id.to_string(),
            format!(
                "{} · {} · {} × {} · linerate {} {}",
                c.hostname, c.kernel, c.cpus, c.cpu_model, c.linerate_version, c.git_commit
            ),
        ]);
    }
    let change_rows = changes
        .iter()
        .map(|c| {
            let fmt = |v: f64| super::detect::fmt_value(&c.metric, v);
            vec![
                c.run.to_string(),
                c.found_at.to_string(),
                if c.point.is_empty() {
                    "-".into()
                } else {
                    c.point.clone()
                },
                c.metric.clone(),
                fmt(c.before),
                fmt(c.after),
                format!("{:+.1}%", (c.after - c.before) / c.before * 100.0),
                format!("{:.1e}", c.p),
            ]
        })
        .collect::<Vec<_>>();
    let change_rows = if change_rows.is_empty() {
        vec![vec![
            "-".into(),
            "-".into(),
            "-".into(),
            format!("no change found in {} runs", runs.len()),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
        ]]
    } else {
        change_rows
    };
    let tables = vec![
        Table {
            title: "Changes found (E-divisive means places each, a t-test accepts it)".into(),
            headers: [
                "from run",
                "found at run",
                "point",
                "metric",
                "before",
                "after",
                "change",
                "p",
            ]
            .map(String::from)
            .to_vec(),
            rows: change_rows,
        },
        runs_table(store, &last.series, &tracks)?,
    ];
    let key_points = changes
        .iter()
        .map(|c| KeyPoint {
            rule: "history_change",
            text: super::detect::line(c),
            advice: "Compare the runs on each side (`linerate history show ID`) and their environments' fingerprints: a kernel, driver or linerate change shows there.".into(),
        })
        .collect();
    let report = Report {
        title: format!("History of {} {} (series {})", last.kind.word(), last.name, last.series),
        subtitle: format!(
            "{} runs · {} to {} · {} change(s)",
            runs.len(),
            runs[0].at,
            last.at,
            changes.len()
        ),
        tables,
        figures,
        missing_figures: Vec::new(),
        line_rate_note: None,
        config,
        description: format!(
            "The same command, run again and again ({}), where: {}.\n\nAfter each run, every tracked figure of the series is tested for a change since the last one found: E-divisive means (Matteson and James, 2014) places the split among the newest runs, and a two-sample t-test must accept it, as Hunter does (Fleming et al., ICPE 2023). Failed runs are listed but carry no figure.",
            last.command,
            if last.lab.is_empty() { last.target.clone() } else { format!("lab {}", last.lab) }
        ),
        details: vec![
            ("series".into(), last.series.clone()),
            ("store".into(), store.path().display().to_string()),
        ],
        commands: vec![(last.name.clone(), last.command.clone())],
        key_points,
    };
    let plots = dir.join("plots");
    std::fs::create_dir_all(&plots).map_err(io(&plots))?;
    for f in &report.figures {
        let p = plots.join(&f.file);
        std::fs::write(&p, &f.svg).map_err(io(&p))?;
    }
    let md = dir.join("report.md");
    std::fs::write(&md, markdown::render(&report)).map_err(io(&md))?;
    let path = dir.join("report.html");
    std::fs::write(&path, html::render(&report)).map_err(io(&path))?;
    Ok(path)
}
