//! A capacity search in a report: per point, its figure against the
//! offered rate (the curve the search walked), the target as a line, the
//! capacity (the knee) marked. The key point is `keypoints::capacity`.

use crate::model::chart::{Chart, HLine, Series};
use crate::model::search::{SearchPoint, SearchResult};
use crate::report::analysis::landscape::{Landscape, Row};

/// The searches of a row (one per repetition).
pub fn searches(r: &Row) -> Vec<&SearchResult> {
    r.results.iter().filter_map(|x| x.search.as_ref()).collect()
}

/// The searched figure of a step, in the chart's unit (µs, or percent).
pub fn figure(p: &SearchPoint) -> Option<f64> {
    p.figure.as_ref().map(|f| f.value)
}

/// One chart per point with a search: the figure at each offered rate
/// (steps in rate order; a repetition is a series of its own), the target
/// line, and the capacity as a one-point series.
pub fn charts(l: &Landscape) -> Vec<Chart> {
    let mut out = Vec::new();
    for r in &l.rows {
        let ss = searches(r);
        let Some(first) = ss.first() else {
            continue;
        };
        let metric = first.target.metric.name();
        let loss = first.target.metric == crate::model::search::SearchMetric::LossPct;
        let rpm = first.target.metric.bits();
        // An RPM search's load reads in Mbit/s, not 2.5e9.
        let x = |r: f64| if rpm { r / 1e6 } else { r };
        let mut series = Vec::new();
        for (k, s) in ss.iter().enumerate() {
            let mut pts: Vec<(f64, f64, Option<f64>)> = s
                .points
                .iter()
                .filter_map(|p| Some((x(p.rate_per_s?), figure(p)?, None)))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            series.push(Series {
                name: if ss.len() > 1 {
                    format!("{metric}, run {}", k + 1)
                } else if rpm {
                    "RPM (one responsiveness test per step)".into()
                } else {
                    format!("{metric} (net: from intended send, less the sender's lateness)")
                },
                points: pts,
            });
        }
        let knees: Vec<(f64, f64, Option<f64>)> = ss
            .iter()
            .filter_map(|s| {
                let c = s.capacity_per_s?;
                let p = s.points.iter().find(|p| p.rate_per_s == Some(c))?;
                Some((x(c), figure(p)?, None))
            })
            .collect();
        if let Some(c) = first.capacity_per_s.filter(|_| !knees.is_empty()) {
            series.push(Series {
                name: format!("capacity {}", first.target.fmt_rate(c)),
                points: knees,
            });
        }
        out.push(Chart {
            title: format!("{}: {} against offered load", r.point.label(), metric),
            x_label: if rpm {
                "offered load each way (Mbit/s)".into()
            } else {
                "offered rate (per second)".into()
            },
            y_label: if loss {
                "loss (%)".into()
            } else if rpm {
                "RPM".into()
            } else {
                format!("{metric} (µs)")
            },
            log_x: false,
            log_y: !loss && !rpm,
            x_categories: None,
            zoom_y: false,
            series,
            hlines: vec![HLine {
                label: format!("target {}", first.target.words()),
                y: first.target.limit,
            }],
            curves: Vec::new(),
        });
    }
    out
}
