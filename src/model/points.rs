//! A study's points as a kind reads them for its key points and charts
//! (`Kind::key_points`, `Kind::charts`): each point's parameters, label,
//! spec, results and the mean of every metric the report measured there.
//! The report builds them from its landscape; the kind never sees the
//! landscape, so a kind's rules live in its folder. Also the words and
//! curves such rules are made of, shared with the report's own rules.

use std::collections::BTreeMap;

use super::result::TestResult;
use super::spec::TestSpec;
use crate::units;

/// A sentence derived from the numbers by a rule, with what to change.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyPoint {
    /// The rule's name (stable, for tests and scripts).
    pub rule: &'static str,
    pub text: String,
    /// What to change, and where.
    pub advice: String,
}

/// One point of a study.
pub struct PointView<'a> {
    /// Its sweep parameters, in the study's order.
    pub params: &'a [(String, String)],
    pub spec: &'a TestSpec,
    /// One result per finished repetition.
    pub results: &'a [TestResult],
    /// Metric key -> mean over every iteration of every repetition.
    pub means: BTreeMap<&'static str, f64>,
}

impl PointView<'_> {
    /// The mean of metric `key` at this point.
    pub fn mean(&self, key: &str) -> Option<f64> {
        self.means.get(key).copied()
    }

    /// The value of parameter `key`.
    pub fn param(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// "flows=4 rtt=10ms" ("test" for a point without parameters).
    pub fn label(&self) -> String {
        if self.params.is_empty() {
            return "test".into();
        }
        params_label(self.params)
    }

    /// The label without one parameter ("" when nothing else is left):
    /// what groups points along that parameter.
    pub fn label_except(&self, key: &str) -> String {
        params_label(self.params.iter().filter(|(k, _)| k != key))
    }
}

/// A case's label and a mixed point's group name themselves: shown as
/// their value alone, not `key=value`.
pub fn stands_alone(key: &str) -> bool {
    key == "case" || key == "group"
}

/// Parameters as a label: "flows=4 rtt=10ms", a case by its name.
pub fn params_label<'a>(params: impl IntoIterator<Item = &'a (String, String)>) -> String {
    params
        .into_iter()
        .map(|(k, v)| {
            if stands_alone(k) {
                v.clone()
            } else {
                format!("{k}={v}")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Axes whose values are durations: the factor from seconds and the unit
/// they are drawn in (round trips in ms, test lengths in s).
pub fn duration_axis(dim: &str) -> Option<(f64, &'static str)> {
    match dim {
        "rtt" => Some((1e3, "ms")),
        "duration" | "warmup" | "interval" => Some((1.0, "s")),
        _ => None,
    }
}

/// A sweep value of axis `dim` as a number: durations ("50ms") in the
/// axis's unit (see `duration_axis`), others as `axis_number`.
pub fn axis_value(dim: &str, v: &str) -> Option<f64> {
    match duration_axis(dim) {
        Some((factor, _)) => units::parse_duration(v)
            .ok()
            .map(|d| d.as_secs_f64() * factor),
        None => axis_number(v),
    }
}

/// A sweep value as a number when it is one (sizes such as "32K" included).
pub fn axis_number(v: &str) -> Option<f64> {
    v.parse::<f64>()
        .ok()
        .or_else(|| units::parse_size(v).ok().map(|b| b as f64))
}

/// One metric along `dim`: points grouped by every other parameter, each
/// group as (value of `dim`, mean of `metric`) sorted by `dim`; points
/// without the metric are left out.
pub fn curves(points: &[PointView], dim: &str, metric: &str) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut out: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for p in points {
        let (Some(x), Some(y)) = (
            p.param(dim).and_then(|v| axis_value(dim, v)),
            p.mean(metric),
        ) else {
            continue;
        };
        let key = p.label_except(dim);
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push((x, y)),
            None => out.push((key, vec![(x, y)])),
        }
    }
    for (_, v) in &mut out {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// " (flows=4)" after a sentence's figure; nothing for the only group.
pub fn suffix(group: &str) -> String {
    if group.is_empty() {
        String::new()
    } else {
        format!(" ({group})")
    }
}

/// "1 connection", "4 connections".
pub fn plural(n: f64, one: &str, many: &str) -> String {
    if n == 1.0 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curves_group_points_by_the_other_parameters_and_sort_them() {
        let spec = TestSpec::default();
        let point = |flows: &str, size: &str, ops: f64| {
            (
                vec![
                    ("flows".to_string(), flows.to_string()),
                    ("size".to_string(), size.to_string()),
                ],
                ops,
            )
        };
        let data = [
            point("4", "1K", 40.0),
            point("1", "1K", 10.0),
            point("2", "4K", 15.0),
        ];
        let points: Vec<PointView> = data
            .iter()
            .map(|(params, ops)| PointView {
                params,
                spec: &spec,
                results: &[],
                means: [("ops_per_s", *ops)].into(),
            })
            .collect();
        assert_eq!(points[0].label(), "flows=4 size=1K");
        assert_eq!(points[0].label_except("flows"), "size=1K");
        let c = curves(&points, "flows", "ops_per_s");
        assert_eq!(
            c,
            vec![
                ("size=1K".to_string(), vec![(1.0, 10.0), (4.0, 40.0)]),
                ("size=4K".to_string(), vec![(2.0, 15.0)]),
            ]
        );
        assert!(curves(&points, "flows", "gets_per_s").is_empty());
        assert_eq!(axis_value("rtt", "50ms"), Some(50.0));
        assert_eq!(axis_value("message", "32K"), Some(32768.0));
        assert_eq!(
            (plural(1.0, "flow", "flows"), suffix("")),
            ("1 flow".into(), String::new())
        );
    }
}
