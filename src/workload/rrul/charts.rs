//! rrul's figures, drawn for every study with rrul points (flent's plots):
//! the TCP probe's latency over time, one line per point, idle phase then
//! loaded; and its latency distribution over the loaded phase per point.
//!
//! The distribution is drawn from the percentiles the result keeps (min,
//! p50, p90, p99, p99.9, max of the merged histogram), not from every
//! round trip: a sketch of the CDF through those six points, exact at
//! each, straight between them. The idle phase's is the dashed line in
//! the point's colour. Several repetitions of a point are averaged per
//! interval and per percentile.

use super::params::{LatencyUnderLoad, ProbeLatency};
use crate::model::chart::{Chart, Curve, Series};
use crate::model::points::PointView;
use crate::model::sample::LatencySummary;

/// The probe the figures draw: the first, rrul's headline (the TCP one;
/// the kind lists its probes in that order).
fn headline(l: &LatencyUnderLoad) -> Option<&ProbeLatency> {
    l.probes.first()
}

/// The summaries of a point's results that have rrul's figures.
fn under_load(r: &PointView) -> Vec<LatencyUnderLoad> {
    r.results
        .iter()
        .filter_map(|x| LatencyUnderLoad::of(&x.summary.own))
        .collect()
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The probe's per-interval p50 over time (ms), repetitions averaged.
fn over_time(ls: &[LatencyUnderLoad]) -> Vec<(f64, f64, Option<f64>)> {
    let n = ls.iter().map(|l| l.series.len()).min().unwrap_or(0);
    (0..n)
        .filter_map(|k| {
            let p = &ls[0].series[k];
            let t = (p.start_s + p.end_s) / 2.0;
            let v: Vec<f64> = ls
                .iter()
                .filter_map(|l| {
                    let probe = &headline(l)?.probe;
                    l.series[k].latency_us.get(probe).map(|x| x.p50 / 1e3)
                })
                .collect();
            Some((t, mean(&v)?, None))
        })
        .collect()
}

/// (latency ms, percentile) through a phase's percentiles, repetitions
/// averaged; empty when no repetition has the phase.
fn cdf(
    ls: &[LatencyUnderLoad],
    pick: fn(&LatencyUnderLoad) -> Option<&LatencySummary>,
) -> Vec<(f64, f64)> {
    let phases: Vec<&LatencySummary> = ls.iter().filter_map(|l| pick(l)).collect();
    let at = |f: fn(&LatencySummary) -> f64| {
        mean(&phases.iter().map(|s| f(s) / 1e3).collect::<Vec<_>>())
    };
    [
        (at(|s| s.min), 0.0),
        (at(|s| s.p50), 50.0),
        (at(|s| s.p90), 90.0),
        (at(|s| s.p99), 99.0),
        (at(|s| s.p999), 99.9),
        (at(|s| s.max), 100.0),
    ]
    .into_iter()
    .filter_map(|(x, y)| Some((x?, y)))
    .collect()
}

fn loaded(l: &LatencyUnderLoad) -> Option<&LatencySummary> {
    headline(l)?.loaded_us.as_ref()
}

fn idle(l: &LatencyUnderLoad) -> Option<&LatencySummary> {
    headline(l)?.idle_us.as_ref()
}

/// rrul's charts of a study's points (none without rrul points).
pub fn charts(points: &[PointView]) -> Vec<Chart> {
    let rows: Vec<(&PointView, Vec<LatencyUnderLoad>)> = points
        .iter()
        .map(|r| (r, under_load(r)))
        .filter(|(_, ls)| !ls.is_empty())
        .collect();
    if rows.is_empty() {
        return Vec::new();
    }
    let idle_s = rows[0].1[0].idle_s;
    let mut time = Vec::new();
    let mut dist = Vec::new();
    let mut dashed = Vec::new();
    for (r, ls) in &rows {
        let name = r.label();
        time.push(Series {
            name: name.clone(),
            points: over_time(ls),
        });
        dist.push(Series {
            name: format!("{name} loaded"),
            points: cdf(ls, loaded)
                .into_iter()
                .map(|(x, y)| (x, y, None))
                .collect(),
        });
        dashed.push(Curve {
            label: format!("{name} idle"),
            series: dashed.len(),
            points: cdf(ls, idle),
        });
    }
    vec![
        Chart {
            title: format!(
                "rrul: TCP probe latency over time (p50 per interval; streams from {idle_s} s)"
            ),
            x_label: "time since the probes started (s)".into(),
            y_label: "round trip (ms)".into(),
            log_x: false,
            log_y: true,
            x_categories: None,
            zoom_y: false,
            series: time,
            hlines: Vec::new(),
            curves: Vec::new(),
        },
        Chart {
            title: "rrul: TCP probe latency CDF, loaded phase (dashed: idle)".into(),
            x_label: "round trip (ms), through min, p50, p90, p99, p99.9 and max".into(),
            y_label: "percentile (%)".into(),
            log_x: true,
            log_y: false,
            x_categories: None,
            zoom_y: false,
            series: dist,
            hlines: Vec::new(),
            curves: dashed,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::result::TestResult;
    use crate::workload::rrul::params::{PointLatency, ProbeLatency, SeriesPoint};

    fn summary(p50: f64) -> LatencySummary {
        LatencySummary {
            count: 100,
            min: p50 * 0.5,
            p50,
            p90: p50 * 2.0,
            p99: p50 * 4.0,
            p999: p50 * 5.0,
            max: p50 * 6.0,
            ..Default::default()
        }
    }

    type Row = (Vec<(String, String)>, Vec<TestResult>);

    fn row(rate: &str, idle_us: f64, loaded_us: f64) -> Row {
        let series = (0..4)
            .map(|k| SeriesPoint {
                start_s: k as f64,
                end_s: k as f64 + 1.0,
                phase: if k < 2 { "idle" } else { "loaded" }.into(),
                latency_us: [(
                    "rr".to_string(),
                    PointLatency {
                        p50: if k < 2 { idle_us } else { loaded_us },
                        ..Default::default()
                    },
                )]
                .into(),
                ..Default::default()
            })
            .collect();
        let mut r = TestResult::default();
        r.spec.workload = crate::workload::rrul::NAME;
        r.summary.own.set(
            crate::workload::rrul::params::FIGURES,
            &LatencyUnderLoad {
                idle_s: 2.0,
                probes: vec![ProbeLatency {
                    probe: "rr".into(),
                    idle_us: Some(summary(idle_us)),
                    loaded_us: Some(summary(loaded_us)),
                    ..Default::default()
                }],
                series,
                ..Default::default()
            },
        );
        (vec![("lab.rate".into(), rate.into())], vec![r])
    }

    fn points(rows: &[Row]) -> Vec<PointView<'_>> {
        static SPEC: std::sync::LazyLock<crate::model::spec::TestSpec> =
            std::sync::LazyLock::new(Default::default);
        rows.iter()
            .map(|(params, results)| PointView {
                params,
                spec: &SPEC,
                results,
                means: Default::default(),
            })
            .collect()
    }

    #[test]
    fn latency_over_time_and_its_distribution_per_point() {
        let rows = [
            row("20mbit", 10_000.0, 130_000.0),
            row("1gbit", 1_000.0, 3_000.0),
        ];
        let c = charts(&points(&rows));
        assert_eq!(c.len(), 2);
        let t = &c[0];
        assert_eq!(t.series.len(), 2);
        assert_eq!(t.series[0].name, "lab.rate=20mbit");
        assert_eq!(t.series[0].points[0], (0.5, 10.0, None));
        assert_eq!(t.series[0].points[3], (3.5, 130.0, None));
        assert!(t.title.contains("streams from 2 s"));
        let d = &c[1];
        assert_eq!(d.series[1].points.len(), 6);
        assert_eq!(d.series[1].points[1], (3.0, 50.0, None));
        assert_eq!(d.curves[0].series, 0);
        assert_eq!(d.curves[1].points[3], (4.0, 99.0));
        // Without rrul points, nothing.
        assert!(charts(&[]).is_empty());
        let other = [(
            vec![("flows".to_string(), "1".to_string())],
            vec![TestResult::default()],
        )];
        assert!(charts(&points(&other)).is_empty());
    }
}
