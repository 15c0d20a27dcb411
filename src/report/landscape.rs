//! The Performance Landscape: every point of a study with each metric's mean
//! and confidence interval over all its samples (every iteration of every
//! repetition), the model lines, and the tables and charts the study asks
//! for. Built from a results folder alone.

use std::collections::BTreeMap;

use crate::measure::stats::{self, Estimate};
use crate::report::metrics::{self, Metric, METRICS};
use crate::report::plot::{Chart, HLine, Series};
use crate::result::TestResult;
use crate::study::file::{LineRate, PlotSpec, Study};
use crate::study::folder::Loaded;
use crate::study::sweep::{params_label, Point};
use crate::units;

pub struct Row {
    pub point: Point,
    /// One result per finished repetition.
    pub results: Vec<TestResult>,
    /// Metric key -> estimate over every iteration of every repetition.
    pub values: BTreeMap<&'static str, Estimate>,
}

impl Row {
    pub fn value(&self, key: &str) -> Option<&Estimate> {
        self.values.get(key)
    }
    pub fn mean(&self, key: &str) -> Option<f64> {
        self.value(key).map(|e| e.mean)
    }
}

pub struct Landscape {
    pub rows: Vec<Row>,
    /// The study's dimensions: "case" (when it has cases) then its axes.
    pub dims: Vec<String>,
    pub line_rate_bps: Option<f64>,
    /// Where the line rate comes from, for the report.
    pub line_rate_note: Option<String>,
    /// True when the line rate is the best measured result ("best").
    pub line_rate_measured: bool,
    pub threshold: f64,
}

/// Confidence level of the landscape's intervals and error bars. A test's
/// own `confidence` target (99% by default, netperf's) decides when its
/// iterations stop; the landscape shows the 95% interval, the usual level
/// for error bars, so two runs of a point do not draw a 64x-wide t bar.
pub const LEVEL_PCT: f64 = 95.0;

/// Estimates for one point from its results.
pub fn row(point: Point, results: Vec<TestResult>) -> Row {
    let mut values = BTreeMap::new();
    for m in METRICS {
        let samples: Vec<f64> = results
            .iter()
            .flat_map(|r| r.iterations.iter().filter_map(move |it| m.value(r, it)))
            .collect();
        if !samples.is_empty() {
            values.insert(m.key, stats::estimate(&samples, LEVEL_PCT));
        }
    }
    Row {
        point,
        results,
        values,
    }
}

pub fn build(loaded: &Loaded) -> Landscape {
    let study = &loaded.study;
    let rows: Vec<Row> = loaded
        .manifest
        .points
        .iter()
        .map(|p| {
            let results = loaded
                .results
                .iter()
                // A failed run (nothing measured) holds no figures.
                .filter(|(run, _)| run.point == p.id && run.status != "failed")
                .map(|(_, r)| r.clone())
                .collect();
            row(p.clone(), results)
        })
        .collect();
    let mut dims: Vec<String> = Vec::new();
    if !study.cases.is_empty() {
        dims.push("case".into());
    }
    dims.extend(study.axes.iter().map(|a| a.key.clone()));
    let (line_rate_bps, line_rate_note) = match study.model.line_rate() {
        Some(LineRate::Given(r)) => (Some(r), Some(format!("{} (given)", units::fmt_bps(r)))),
        Some(LineRate::Best) => {
            let best = rows
                .iter()
                .filter_map(|r| r.mean("throughput_bps").map(|v| (v, r)))
                .max_by(|a, b| a.0.total_cmp(&b.0));
            match best {
                Some((v, r)) => (
                    Some(v),
                    Some(format!(
                        "{}, the best measured result ({})",
                        units::fmt_bps(v),
                        r.point.label()
                    )),
                ),
                None => (None, None),
            }
        }
        None => (None, None),
    };
    Landscape {
        rows,
        dims,
        line_rate_bps,
        line_rate_note,
        line_rate_measured: study.model.line_rate() == Some(LineRate::Best),
        threshold: study.model.threshold(),
    }
}

/// A table of strings, rendered by each output format.
pub struct Table {
    pub title: String,
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// "41.2 Gbit/s ± 3.1%" (the ± only with more than one sample).
pub fn fmt_estimate(m: &Metric, e: &Estimate) -> String {
    match e.half_width_pct {
        Some(p) if e.n > 1 => format!("{} ± {p:.1}%", m.fmt(e.mean)),
        _ => m.fmt(e.mean),
    }
}

impl Landscape {
    /// Metrics with a value at any point, in catalogue order.
    pub fn present(&self) -> Vec<&'static Metric> {
        METRICS
            .iter()
            .filter(|m| self.rows.iter().any(|r| r.value(m.key).is_some()))
            .collect()
    }

    /// The study's tables, or one table of every metric present.
    pub fn tables(&self, study: &Study) -> Vec<Table> {
        let specs: Vec<(String, Vec<&'static Metric>)> = if study.tables.is_empty() {
            vec![("All metrics".into(), self.present())]
        } else {
            study
                .tables
                .iter()
                .map(|t| {
                    (
                        t.title.clone().unwrap_or_else(|| "Results".into()),
                        t.columns.iter().filter_map(|c| metrics::find(c)).collect(),
                    )
                })
                .collect()
        };
        specs
            .into_iter()
            .map(|(title, cols)| {
                let mut headers: Vec<String> = self.dims.clone();
                if headers.is_empty() {
                    headers.push("test".into());
                }
                headers.push("runs".into());
                // Measured/model: the share of line rate beside throughput.
                let ratio = self
                    .line_rate_bps
                    .filter(|_| cols.iter().any(|m| m.key == "throughput_bps"));
                for m in &cols {
                    headers.push(m.title.to_string());
                    if m.key == "throughput_bps" && ratio.is_some() {
                        headers.push("of line rate".into());
                    }
                }
                let rows = self
                    .rows
                    .iter()
                    .map(|r| {
                        let mut cells: Vec<String> = if self.dims.is_empty() {
                            vec![r.point.label()]
                        } else {
                            self.dims
                                .iter()
                                .map(|d| r.point.param(d).unwrap_or("").to_string())
                                .collect()
                        };
                        cells.push(r.results.len().to_string());
                        for m in &cols {
                            cells.push(
                                r.value(m.key)
                                    .map(|e| fmt_estimate(m, e))
                                    .unwrap_or_else(|| "-".into()),
                            );
                            if let (true, Some(rate)) = (m.key == "throughput_bps", ratio) {
                                cells.push(
                                    r.mean(m.key)
                                        .map(|v| format!("{:.0}%", 100.0 * v / rate))
                                        .unwrap_or_else(|| "-".into()),
                                );
                            }
                        }
                        cells
                    })
                    .collect();
                Table {
                    title,
                    headers,
                    rows,
                }
            })
            .collect()
    }

    /// The chart for one plot spec: one series per combination of the
    /// parameters other than x, points in study order, CI error bars.
    pub fn chart(&self, p: &PlotSpec) -> Chart {
        let m = metrics::find(&p.y).expect("plot metrics are checked at parse time");
        let scale = m.plot_scale();
        let xs: Vec<&str> = self
            .rows
            .iter()
            .filter_map(|r| r.point.param(&p.x))
            .collect();
        let numeric: Option<Vec<f64>> = xs.iter().map(|v| axis_number(v)).collect();
        let categories: Option<Vec<String>> = if numeric.is_some() {
            None
        } else {
            let mut c: Vec<String> = Vec::new();
            for v in &xs {
                if !c.iter().any(|x| x == v) {
                    c.push(v.to_string());
                }
            }
            Some(c)
        };
        let mut series: Vec<Series> = Vec::new();
        for r in &self.rows {
            let (Some(xv), Some(e)) = (r.point.param(&p.x), r.value(m.key)) else {
                continue;
            };
            let x = match &categories {
                Some(c) => c.iter().position(|v| v == xv).unwrap_or(0) as f64,
                None => axis_number(xv).unwrap_or(0.0),
            };
            let mut rest: Vec<&(String, String)> =
                r.point.params.iter().filter(|(k, _)| *k != p.x).collect();
            if let Some(s) = &p.series {
                // The named series parameter leads the series name.
                rest.sort_by_key(|(k, _)| k != s);
            }
            let name = if rest.is_empty() {
                m.title.to_string()
            } else {
                params_label(rest)
            };
            let hw = e.half_width.filter(|_| e.n > 1).map(|h| h / scale);
            let pt = (x, e.mean / scale, hw);
            match series.iter_mut().find(|s| s.name == name) {
                Some(s) => s.points.push(pt),
                None => series.push(Series {
                    name,
                    points: vec![pt],
                }),
            }
        }
        let mut hlines = Vec::new();
        if let Some(rate) = self.line_rate_bps {
            let s = if m.key == "throughput_bps" {
                scale
            } else {
                f64::NAN
            };
            if s.is_finite() {
                if p.models.iter().any(|x| x == "line_rate") {
                    hlines.push(HLine {
                        label: format!("line rate {}", units::fmt_bps(rate)),
                        y: rate / s,
                    });
                }
                if p.models.iter().any(|x| x == "threshold") {
                    hlines.push(HLine {
                        label: format!("{:.0}% of line rate", self.threshold * 100.0),
                        y: rate * self.threshold / s,
                    });
                }
            }
        }
        Chart {
            title: p
                .title
                .clone()
                .unwrap_or_else(|| format!("{} vs {}", m.title, p.x)),
            x_label: if p.x == "case" {
                "test".into()
            } else {
                p.x.clone()
            },
            y_label: m.axis_label(),
            log_x: p.log_x && categories.is_none(),
            log_y: p.log_y,
            x_categories: categories,
            series,
            hlines,
        }
    }
}

/// A sweep value as a number when it is one (sizes such as "32K" included).
pub fn axis_number(v: &str) -> Option<f64> {
    v.parse::<f64>()
        .ok()
        .or_else(|| units::parse_size(v).ok().map(|b| b as f64))
}
