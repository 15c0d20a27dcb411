//! The Performance Landscape: every point of a study with each metric's mean
//! and confidence interval over all its samples (every iteration of every
//! repetition), the model lines, and the tables and charts the study asks
//! for. Built from a results folder alone.

use std::collections::BTreeMap;

use crate::measure::stats;
use crate::model::chart::{Chart, Curve, HLine, Series};
use crate::model::result::TestResult;
use crate::model::sample::Estimate;
use crate::report::analysis::metrics::{self, Metric};
use crate::report::analysis::wanmodel::{self, PointModel, WindowSource};
use crate::study::file::{LineRate, PlotSpec, Study};
use crate::study::folder::Loaded;
use crate::study::sweep::{params_phrase, Point};
use crate::units;

pub use crate::model::points::{axis_number, axis_value, duration_axis};

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

    /// The window/RTT model of this point's transfer, from its results
    /// (None: not a finite transfer in a lab with a known window).
    pub fn model(&self) -> Option<PointModel> {
        wanmodel::for_results(&self.results)
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
    /// The study asks for the window/RTT model (`[model] window_rtt`, or a
    /// plot that draws it): tables gain model columns, key points compare.
    pub window_rtt: bool,
    /// How the model was applied (inputs, where W came from), for the report.
    pub model_note: Option<String>,
}

/// Confidence level of the landscape's intervals and error bars. A test's
/// own `confidence` target (99% by default, netperf's) decides when its
/// iterations stop; the landscape shows the 95% interval, the usual level
/// for error bars, so two runs of a point do not draw a 64x-wide t bar.
pub const LEVEL_PCT: f64 = 95.0;

/// Estimates for one point from its results.
pub fn row(point: Point, results: Vec<TestResult>) -> Row {
    let mut values = BTreeMap::new();
    for m in metrics::all() {
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

/// A mixed point as one row per group: the group's own figures (its
/// spec, summary and iterations, with the load the other groups carried
/// beside it), named by the point's parameters and the group.
fn group_rows(p: &Point, results: &[TestResult]) -> Vec<Row> {
    let split: Vec<Vec<TestResult>> = results.iter().map(|r| r.group_results()).collect();
    p.groups
        .iter()
        .enumerate()
        .map(|(g, group)| {
            let mut point = p.clone();
            point.id = format!("{}_{}", p.id, group.name);
            point
                .params
                .push(("group".into(), format!("{} {}", group.name, group.command)));
            point.spec = group.spec.clone();
            point.groups = Vec::new();
            let results = split.iter().filter_map(|rs| rs.get(g).cloned()).collect();
            row(point, results)
        })
        .collect()
}

pub fn build(loaded: &Loaded) -> Landscape {
    let study = &loaded.study;
    let window_rtt = study.model.window_rtt
        || study
            .plots
            .iter()
            .any(|p| p.models.iter().any(|m| m == "window_rtt"));
    let mut rows: Vec<Row> = loaded
        .manifest
        .points
        .iter()
        // A point this host could not run is said in a key point
        // (keypoints::unavailable), not drawn as a gap.
        .filter(|p| !unavailable(&loaded.manifest, &p.id))
        .flat_map(|p| {
            let results: Vec<TestResult> = loaded
                .results
                .iter()
                // A failed run (nothing measured) holds no figures.
                .filter(|(run, _)| {
                    run.point == p.id && run.status != crate::model::result::Status::Failed
                })
                .map(|(_, r)| r.clone())
                .collect();
            // A composite like rrul is one row: its figures are the whole
            // timeline's.
            let one_row = crate::workload::kind_of(p.spec.workload).one_row();
            if p.groups.is_empty() || one_row {
                vec![row(p.clone(), results)]
            } else {
                group_rows(p, &results)
            }
        })
        .collect();
    let mixed = rows
        .iter()
        .any(|r| r.point.params.iter().any(|(k, _)| k == "group"));
    if !window_rtt {
        // The ratio is only shown where the study asked for the model.
        for r in &mut rows {
            r.values.remove("model_ratio");
        }
    }
    let model_note = if window_rtt {
        let models: Vec<PointModel> = rows.iter().filter_map(|r| r.model()).collect();
        let without = rows
            .iter()
            .filter(|r| !r.results.is_empty())
            .count()
            .saturating_sub(models.len());
        Some(wanmodel::describe(&models, without))
    } else {
        None
    };
    let mut dims: Vec<String> = Vec::new();
    if !study.cases.is_empty() {
        dims.push("case".into());
    }
    dims.extend(study.axes.iter().map(|a| a.key.clone()));
    if mixed {
        dims.push("group".into());
    }
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
        window_rtt,
        model_note,
    }
}

/// Every run of point `id` was found not runnable on its host.
pub fn unavailable(m: &crate::study::folder::Manifest, id: &str) -> bool {
    let mut runs = m.runs.iter().filter(|r| r.point == id).peekable();
    runs.peek().is_some() && runs.all(|r| r.status == crate::model::result::Status::Unavailable)
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
    /// Its rows as a kind reads them (`Kind::key_points`, `Kind::charts`).
    pub fn views(&self) -> Vec<crate::model::points::PointView<'_>> {
        self.rows
            .iter()
            .map(|r| crate::model::points::PointView {
                params: &r.point.params,
                spec: &r.point.spec,
                results: &r.results,
                means: r.values.iter().map(|(k, e)| (*k, e.mean)).collect(),
            })
            .collect()
    }

    /// Each row at `dim = other` with the row at `dim = base` that agrees on
    /// every other parameter: (those parameters' label, base row, other
    /// row). What environment ratios and on/off comparisons pair up.
    pub fn pairs<'a>(
        &'a self,
        dim: &str,
        base: &str,
        other: &str,
    ) -> Vec<(String, &'a Row, &'a Row)> {
        self.rows
            .iter()
            .filter(|b| b.point.param(dim) == Some(other))
            .filter_map(|b| {
                let key = b.point.label_except(dim);
                let a = self.rows.iter().find(|r| {
                    r.point.param(dim) == Some(base) && r.point.label_except(dim) == key
                })?;
                Some((key, a, b))
            })
            .collect()
    }

    /// Metrics with a value at any point, in catalogue order.
    pub fn present(&self) -> Vec<&'static Metric> {
        metrics::all()
            .iter()
            .copied()
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
                // The window/RTT model beside transfer time and throughput.
                let modelled = self.window_rtt && self.rows.iter().any(|r| r.model().is_some());
                let beside_model =
                    |m: &Metric| modelled && (m.key == "throughput_bps" || m.key == "transfer_s");
                for m in &cols {
                    headers.push(m.title.to_string());
                    if m.key == "throughput_bps" && ratio.is_some() {
                        headers.push("of line rate".into());
                    }
                    if beside_model(m) {
                        headers.push("model".into());
                        headers.push("measured/model".into());
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
                        let model = if modelled { r.model() } else { None };
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
                            if beside_model(m) {
                                let p = model.as_ref().map(|x| &x.prediction);
                                let predicted = p.map(|p| {
                                    if m.key == "transfer_s" {
                                        p.time_s
                                    } else {
                                        p.throughput_bps
                                    }
                                });
                                cells.push(
                                    predicted.map(|v| m.fmt(v)).unwrap_or_else(|| "-".into()),
                                );
                                cells.push(match (r.mean(m.key), predicted) {
                                    (Some(v), Some(p)) if p > 0.0 => format!("{:.2}", v / p),
                                    _ => "-".into(),
                                });
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

    /// The rows a plot of `m` shows: those with a value, and when the
    /// metric is some tests' main figure (throughput of a bulk stream,
    /// transactions of rr), only those tests: an rr's few Mbit/s beside a
    /// stream's Gbit/s on a "throughput" plot reads as a collapse.
    fn plotted_rows(&self, m: &Metric) -> Vec<&Row> {
        let mut rows: Vec<&Row> = self
            .rows
            .iter()
            .filter(|r| r.value(m.key).is_some())
            .collect();
        if let Some(main) = m.main_of {
            let is_main = |r: &&Row| crate::workload::main_metric(&r.point.spec) == main;
            if rows.iter().any(is_main) {
                rows.retain(is_main);
            }
        }
        rows
    }

    /// The chart for one plot spec: one series per combination of the
    /// parameters other than x, points in study order, CI error bars; with
    /// `window_rtt` among its models, the model's curve per series.
    pub fn chart(&self, p: &PlotSpec) -> Chart {
        let m = metrics::find(&p.y).expect("plot metrics are checked at parse time");
        let scale = m.plot_scale();
        let rows = self.plotted_rows(m);
        let xs: Vec<&str> = rows.iter().filter_map(|r| r.point.param(&p.x)).collect();
        let numeric: Option<Vec<f64>> = xs.iter().map(|v| axis_value(&p.x, v)).collect();
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
        // (series index, x, row) of every point drawn, for the model curves.
        let mut placed: Vec<(usize, f64, &Row)> = Vec::new();
        for r in rows {
            let (Some(xv), Some(e)) = (r.point.param(&p.x), r.value(m.key)) else {
                continue;
            };
            let x = match &categories {
                Some(c) => c.iter().position(|v| v == xv).unwrap_or(0) as f64,
                None => axis_value(&p.x, xv).unwrap_or(0.0),
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
                params_phrase(rest)
            };
            let hw = e.half_width.filter(|_| e.n > 1).map(|h| h / scale);
            let pt = (x, e.mean / scale, hw);
            let index = match series.iter().position(|s| s.name == name) {
                Some(i) => {
                    series[i].points.push(pt);
                    i
                }
                None => {
                    series.push(Series {
                        name,
                        points: vec![pt],
                    });
                    series.len() - 1
                }
            };
            placed.push((index, x, r));
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
        let mut title = p
            .title
            .clone()
            .unwrap_or_else(|| format!("{} vs {}", m.title, p.x));
        let mut curves = Vec::new();
        if p.models.iter().any(|x| x == "window_rtt") {
            if m.key == "model_ratio" {
                hlines.push(HLine {
                    label: "window/RTT model".into(),
                    y: 1.0,
                });
            }
            let dense = categories.is_none();
            curves = model_curves(p, m.key, scale, &series, &placed, dense);
            // Seven series and seven models would bury the plot under its
            // legend: past four, the title says what the dashes are.
            if curves.len() > MODEL_LEGEND_MAX {
                for c in &mut curves {
                    c.label.clear();
                }
                title.push_str(" (dashed: window/RTT model)");
            }
        }
        Chart {
            title,
            x_label: match p.x.as_str() {
                "case" => "test".into(),
                x => match duration_axis(x) {
                    Some((_, unit)) => format!("{x} ({unit})"),
                    None => x.to_string(),
                },
            },
            y_label: m.axis_label(),
            log_x: p.log_x && categories.is_none(),
            log_y: p.log_y,
            x_categories: categories,
            zoom_y: false,
            series,
            hlines,
            curves,
        }
    }
}

/// Model curves with their own legend entries, at most.
const MODEL_LEGEND_MAX: usize = 4;

/// Points per dense model curve: smooth enough to show where a curve bends
/// (the window meeting the bandwidth-delay product) between measured points.
const MODEL_CURVE_POINTS: usize = 64;

/// The window/RTT model per measured series, for y = transfer time or
/// throughput. Along rtt (or rcvbuf, with exact windows) the model is
/// evaluated densely from the series' own inputs; otherwise (observed
/// windows, scp logins, categories) it joins the model at each point.
fn model_curves(
    p: &PlotSpec,
    key: &str,
    scale: f64,
    series: &[Series],
    placed: &[(usize, f64, &Row)],
    dense: bool,
) -> Vec<Curve> {
    let value = |pr: &wanmodel::Prediction| match key {
        "transfer_s" => Some(pr.time_s / scale),
        "throughput_bps" => Some(pr.throughput_bps / scale),
        _ => None,
    };
    let mut out = Vec::new();
    for (i, s) in series.iter().enumerate() {
        let at: Vec<(f64, PointModel)> = placed
            .iter()
            .filter(|(si, ..)| *si == i)
            .filter_map(|(_, x, r)| Some((*x, r.model()?)))
            .collect();
        let Some((_, first)) = at.first() else {
            continue;
        };
        let same_window = at
            .iter()
            .all(|(_, m)| m.transfer.window == first.transfer.window);
        // Inputs that vary only with x: the model can be drawn between points.
        let vary = |m: &PointModel| match p.x.as_str() {
            "rtt" if !m.scp => Some(wanmodel::Transfer {
                rtt_s: first.transfer.rtt_s,
                ..m.transfer.clone()
            }),
            "rcvbuf" if m.source == WindowSource::Rcvbuf => Some(wanmodel::Transfer {
                window: first.transfer.window,
                ..m.transfer.clone()
            }),
            _ => None,
        };
        let smooth = dense
            && at.len() >= 2
            && at
                .iter()
                .all(|(_, m)| vary(m).is_some_and(|t| t == first.transfer));
        let mut points: Vec<(f64, f64)> = Vec::new();
        if smooth {
            let lo = at.iter().map(|a| a.0).fold(f64::INFINITY, f64::min);
            let hi = at.iter().map(|a| a.0).fold(f64::NEG_INFINITY, f64::max);
            let geometric = p.log_x && lo > 0.0;
            let mut xs: Vec<f64> = (0..=MODEL_CURVE_POINTS)
                .map(|k| {
                    let f = k as f64 / MODEL_CURVE_POINTS as f64;
                    if geometric {
                        lo * (hi / lo).powf(f)
                    } else {
                        lo + (hi - lo) * f
                    }
                })
                .chain(at.iter().map(|a| a.0))
                .collect();
            xs.sort_by(f64::total_cmp);
            xs.dedup();
            for x in xs {
                let mut t = first.transfer.clone();
                if p.x == "rtt" {
                    t.rtt_s = x / 1e3;
                } else {
                    t.window = x.max(0.0).round() as u64;
                }
                if let Some(y) = wanmodel::predict(&t).as_ref().and_then(value) {
                    points.push((x, y));
                }
            }
        } else {
            points = at
                .iter()
                .filter_map(|(x, m)| Some((*x, value(&m.prediction)?)))
                .collect();
        }
        if points.is_empty() {
            continue;
        }
        out.push(Curve {
            label: if same_window {
                format!("model W={}", units::fmt_bytes(first.transfer.window))
            } else {
                format!("model {}", s.name)
            },
            series: i,
            points,
        });
    }
    out
}

/// Window/RTT landscapes and plots as the wan-window study makes them, for
/// the tests of the landscape and of the plots drawn from it.
#[cfg(test)]
pub mod testing {
    use super::*;
    use crate::report::analysis::wanmodel::testing::{model_bps, wan_result};

    /// A point at `rtt_ms` through an exact `rcvbuf` window, measured at
    /// `f` times the model.
    pub fn point(rtt_ms: u32, rcvbuf: &str, f: f64) -> Row {
        let res = wan_result(rtt_ms, rcvbuf, f * model_bps(rtt_ms, rcvbuf));
        row(
            Point {
                groups: Vec::new(),
                index: 0,
                id: "p".into(),
                params: vec![
                    ("rtt".into(), format!("{rtt_ms}ms")),
                    ("rcvbuf".into(), rcvbuf.into()),
                ],
                spec: res.spec.clone(),
                confidence: Default::default(),
            },
            vec![res],
        )
    }

    pub fn land(rows: Vec<Row>) -> Landscape {
        Landscape {
            rows,
            dims: vec!["rtt".into(), "rcvbuf".into()],
            line_rate_bps: None,
            line_rate_note: None,
            line_rate_measured: false,
            threshold: 0.9,
            window_rtt: true,
            model_note: None,
        }
    }

    /// Transfer time along rtt, log y, with the window/RTT model.
    pub fn plot(series: Option<&str>) -> PlotSpec {
        PlotSpec {
            title: None,
            x: "rtt".into(),
            y: "transfer_s".into(),
            series: series.map(String::from),
            log_x: false,
            log_y: true,
            models: vec!["window_rtt".into()],
            line: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{land, plot, point};
    use super::*;

    #[test]
    fn durations_are_numbers_on_their_axes() {
        assert_eq!(axis_value("rtt", "50ms"), Some(50.0));
        assert_eq!(axis_value("rtt", "0ms"), Some(0.0));
        assert_eq!(axis_value("rtt", "0.2"), Some(200.0));
        assert_eq!(axis_value("duration", "500ms"), Some(0.5));
        assert_eq!(axis_value("rcvbuf", "48K"), Some(49152.0));
        assert_eq!(axis_value("flows", "8"), Some(8.0));
        assert_eq!(axis_value("rtt", "soon"), None);
    }

    fn study(table: &str) -> Study {
        let text = format!(
            "title = \"t\"\ndescription = \"d\"\n[test]\nbytes = \"48M\"\n[sweep]\nrcvbuf = [\"64K\"]\n{table}"
        );
        Study::parse(&text, "t.toml", "t").unwrap()
    }

    #[test]
    fn model_columns_follow_transfer_time_and_throughput() {
        let l = land(vec![point(100, "64K", 0.9), point(0, "64K", 1.0)]);
        let s =
            study("[[table]]\ncolumns = [\"transfer_s\", \"throughput_bps\", \"model_ratio\"]\n");
        let t = &l.tables(&s)[0];
        assert_eq!(
            t.headers,
            [
                "rtt",
                "rcvbuf",
                "runs",
                "Transfer time",
                "model",
                "measured/model",
                "Throughput",
                "model",
                "measured/model",
                "Throughput / window-RTT model"
            ]
        );
        let r = &t.rows[0];
        // 48 MiB through 64 KiB at 100 ms: 76.8 s at W/RTT, 77.0 s by the model.
        assert_eq!(r[4], "77.0 s", "{r:?}");
        assert_eq!(r[5], "1.11", "{r:?}");
        assert_eq!(r[8], "0.90", "{r:?}");
        assert_eq!(r[9], "0.90", "{r:?}");
        // Without the model: no model columns (and no model_ratio values).
        let mut l = l;
        l.window_rtt = false;
        let t = &l.tables(&s)[0];
        assert!(!t.headers.iter().any(|h| h == "model"), "{:?}", t.headers);
    }

    #[test]
    fn window_rtt_curves_per_series() {
        let mut rows = Vec::new();
        for w in ["64K", "2M"] {
            for rtt in [0, 50, 100, 200] {
                rows.push(point(rtt, w, 0.95));
            }
        }
        let l = land(rows);
        let c = l.chart(&plot(Some("rcvbuf")));
        assert_eq!(c.x_label, "rtt (ms)");
        assert_eq!(c.series.len(), 2);
        assert_eq!(c.curves.len(), 2);
        assert_eq!(c.curves[1].label, "model W=2 MiB");
        assert_eq!(c.curves[1].series, 1);
        // Drawn densely, and through the model at the measured points.
        assert!(c.curves[0].points.len() > 60);
        let at100 = c.curves[0].points.iter().find(|p| p.0 == 100.0).unwrap();
        let measured = c.series[0].points.iter().find(|p| p.0 == 100.0).unwrap();
        assert!((measured.1 / at100.1 - 1.0 / 0.95).abs() < 1e-9);
        // Throughput: the same curve in Gbit/s.
        let mut p = plot(Some("rcvbuf"));
        p.y = "throughput_bps".into();
        let c = l.chart(&p);
        let at0 = c.curves[1].points[0];
        assert_eq!(at0.0, 0.0);
        assert!((at0.1 - 1448.0 / 1538.0).abs() < 1e-9, "{at0:?}");
        // Without the model in the plot, no curves.
        let mut p = plot(Some("rcvbuf"));
        p.models.clear();
        assert!(l.chart(&p).curves.is_empty());
    }

    #[test]
    fn many_model_curves_share_one_title_note() {
        let rows = ["48K", "64K", "128K", "256K", "512K"]
            .iter()
            .flat_map(|w| [50, 100].map(|r| point(r, w, 1.0)))
            .collect();
        let c = land(rows).chart(&plot(Some("rcvbuf")));
        assert_eq!(c.curves.len(), 5);
        assert!(c.curves.iter().all(|x| x.label.is_empty()));
        assert!(
            c.title.ends_with("(dashed: window/RTT model)"),
            "{}",
            c.title
        );
    }
}
