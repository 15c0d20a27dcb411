//! The responsiveness test's figures, drawn for every study with rpm
//! points: RPM interval by interval (the probes that ended in each), one
//! line per point, and the goodput each way over the same intervals, the
//! load that RPM was measured under (connections are added until it is
//! stable). Time runs from the loaded phase's start; a sequential test's
//! upload phase follows its download phase.

use super::params::{Responsiveness, RpmInterval};
use crate::model::chart::{Chart, Series};
use crate::model::points::PointView;

/// A point's first result with the responsiveness figures (a point's
/// repetitions run the method to their own ends: their intervals do not
/// line up, so one is drawn).
fn first(r: &PointView) -> Option<Responsiveness> {
    r.results
        .iter()
        .find_map(|x| Responsiveness::of(&x.summary.own))
}

/// rpm's charts of a study's points (none without rpm points).
pub fn charts(points: &[PointView]) -> Vec<Chart> {
    let rows: Vec<(&PointView, Responsiveness)> =
        points.iter().filter_map(|r| Some((r, first(r)?))).collect();
    if rows.is_empty() {
        return Vec::new();
    }
    let mut rpm = Vec::new();
    let mut goodput = Vec::new();
    for (r, x) in &rows {
        let name = r.label();
        rpm.push(Series {
            name: name.clone(),
            points: x
                .intervals
                .iter()
                .filter_map(|i| Some((i.t_s, i.rpm?, None)))
                .collect(),
        });
        for (way, pick) in [
            ("down", (|i: &RpmInterval| i.down_bps) as fn(_) -> f64),
            ("up", |i| i.up_bps),
        ] {
            let points: Vec<(f64, f64, Option<f64>)> = x
                .intervals
                .iter()
                .map(|i| (i.t_s, pick(i) / 1e6, None))
                .filter(|p| p.1 > 0.0)
                .collect();
            if !points.is_empty() {
                goodput.push(Series {
                    name: format!("{name} {way}"),
                    points,
                });
            }
        }
    }
    vec![
        Chart {
            title: "rpm: responsiveness per interval (the probes that ended in it)".into(),
            x_label: "time since the load started (s)".into(),
            y_label: "RPM (round trips per minute)".into(),
            log_x: false,
            log_y: true,
            x_categories: None,
            zoom_y: false,
            series: rpm,
            hlines: Vec::new(),
            curves: Vec::new(),
        },
        Chart {
            title: "rpm: goodput each way per interval (the load RPM ran under)".into(),
            x_label: "time since the load started (s)".into(),
            y_label: "goodput (Mbit/s)".into(),
            log_x: false,
            log_y: false,
            x_categories: None,
            zoom_y: false,
            series: goodput,
            hlines: Vec::new(),
            curves: Vec::new(),
        },
    ]
}
