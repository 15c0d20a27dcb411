//! A study's overview over several axes (`overview = ["lab.link",
//! "lab.mtu"]`): beside each axis's own ratio table (environments.rs), a
//! table per pair of axes and per metric, rows one axis and columns the
//! other, each cell the ratio of its points to the points at both axes'
//! first values (seed 003's connection types by MTU); with cases, first
//! a summary per metric: each axis's values against its first, one column
//! per case.

use super::environments;
use super::landscape::{Landscape, Table};
use super::metrics;

/// The values `dim` takes in the landscape, in the order met.
pub fn values(land: &Landscape, dim: &str) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for r in &land.rows {
        if let Some(x) = r.point.param(dim) {
            if !v.iter().any(|y| y == x) {
                v.push(x.to_string());
            }
        }
    }
    v
}

/// With cases, first a summary per metric in the seed's shape (seed 003:
/// "advantage of large MTU ... of 10GbE ... of virtual networks" by
/// workload); then one ratio table per axis, then one per pair of axes
/// and metric.
pub fn tables(land: &Landscape, dims: &[String], metric_keys: &[String]) -> Vec<Table> {
    let mut out = by_case(land, dims, metric_keys);
    for d in dims {
        if let Some(t) = environments::overview(land, d, &values(land, d), metric_keys) {
            out.push(t);
        }
    }
    for (i, a) in dims.iter().enumerate() {
        for b in &dims[i + 1..] {
            out.extend(pair(land, a, b, metric_keys));
        }
    }
    out
}

/// The label of a row's point without axes `a` and `b`: which points of
/// two cells are the same test otherwise.
fn rest(r: &super::landscape::Row, a: &str, b: &str) -> String {
    r.point
        .params
        .iter()
        .filter(|(k, _)| k != a && k != b)
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Per metric: rows the values of `a`, columns those of `b`; each cell the
/// geometric mean, over the points that differ only in `a` and `b`, of
/// the cell's mean over the (first, first) cell's ("1.00x" there).
pub fn pair(land: &Landscape, a: &str, b: &str, metric_keys: &[String]) -> Vec<Table> {
    let (va, vb) = (values(land, a), values(land, b));
    if va.len() < 2 && vb.len() < 2 || va.is_empty() || vb.is_empty() {
        return Vec::new();
    }
    let ms = metric_keys
        .iter()
        .filter_map(|k| metrics::find(k))
        .filter(|m| land.rows.iter().any(|r| r.value(m.key).is_some()));
    let mut out = Vec::new();
    for m in ms {
        let at = |x: &str, y: &str| -> Vec<&super::landscape::Row> {
            land.rows
                .iter()
                .filter(|r| r.point.param(a) == Some(x) && r.point.param(b) == Some(y))
                .collect()
        };
        let mut rows = Vec::new();
        for x in &va {
            let mut row = vec![format!("{a}={x}")];
            for y in &vb {
                let mut logs = Vec::new();
                for r in at(x, y) {
                    let key = rest(r, a, b);
                    let base = at(&va[0], &vb[0])
                        .into_iter()
                        .find(|r0| rest(r0, a, b) == key);
                    if let (Some(v), Some(v0)) = (r.mean(m.key), base.and_then(|r0| r0.mean(m.key)))
                    {
                        if v > 0.0 && v0 > 0.0 {
                            logs.push((v / v0).ln());
                        }
                    }
                }
                row.push(if logs.is_empty() {
                    "-".into()
                } else {
                    format!(
                        "{:.2}x",
                        (logs.iter().sum::<f64>() / logs.len() as f64).exp()
                    )
                });
            }
            rows.push(row);
        }
        out.push(Table {
            title: format!(
                "Overview: {} by {a} and {b}, against {a}={} {b}={} (ratio of means{})",
                m.title,
                va[0],
                vb[0],
                if land.dims.len() > 2 {
                    ", geometric mean over the other parameters"
                } else {
                    ""
                }
            ),
            headers: std::iter::once(format!("{a} by {b}"))
                .chain(vb.iter().map(|y| format!("{b}={y}")))
                .collect(),
            rows,
        });
    }
    out
}

/// Per metric: a row per axis value after the first ("lab.mtu=8992 /
/// lab.mtu=1492"), a column per case and one for all, each cell the
/// geometric mean of the ratios of the points at that value to the same
/// points at the axis's first value. None without cases or axes.
pub fn by_case(land: &Landscape, dims: &[String], metric_keys: &[String]) -> Vec<Table> {
    let cases = values(land, "case");
    if cases.len() < 2 || dims.is_empty() {
        return Vec::new();
    }
    let geo = |logs: &[f64]| {
        if logs.is_empty() {
            "-".to_string()
        } else {
            format!(
                "{:.2}x",
                (logs.iter().sum::<f64>() / logs.len() as f64).exp()
            )
        }
    };
    let mut out = Vec::new();
    for m in metric_keys.iter().filter_map(|k| metrics::find(k)) {
        let mut rows = Vec::new();
        for d in dims {
            let vs = values(land, d);
            let Some(base) = vs.first() else { continue };
            for v in &vs[1..] {
                let mut per_case: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
                for (_, a, b) in land.pairs(d, base, v) {
                    let (Some(x), Some(y)) = (a.mean(m.key), b.mean(m.key)) else {
                        continue;
                    };
                    let i = cases.iter().position(|c| b.point.param("case") == Some(c));
                    if let (Some(i), true) = (i, x > 0.0 && y > 0.0) {
                        per_case[i].push((y / x).ln());
                    }
                }
                if per_case.iter().all(|l| l.is_empty()) {
                    continue;
                }
                let mut row = vec![format!("{d}={v} / {d}={base}")];
                row.extend(per_case.iter().map(|l| geo(l)));
                row.push(geo(&per_case.concat()));
                rows.push(row);
            }
        }
        if rows.is_empty() {
            continue;
        }
        out.push(Table {
            title: format!(
                "Overview by case: {}, each setting against the first (ratio of means, geometric mean over the other parameters)",
                m.title
            ),
            headers: std::iter::once("setting".to_string())
                .chain(cases.iter().cloned())
                .chain(std::iter::once("all".to_string()))
                .collect(),
            rows,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::stats::estimate;
    use crate::report::analysis::landscape::Row;
    use crate::study::sweep::Point;

    fn row(case: &str, mtu: &str, tps: f64) -> Row {
        let params = vec![
            ("case".to_string(), case.to_string()),
            ("lab.mtu".to_string(), mtu.to_string()),
        ];
        Row {
            point: Point {
                groups: Vec::new(),
                index: 0,
                id: "p".into(),
                params,
                spec: Default::default(),
                confidence: Default::default(),
            },
            results: vec![],
            values: [("transactions_per_s", estimate(&[tps], 99.0))].into(),
        }
    }

    #[test]
    fn by_case_puts_each_axis_value_against_the_first_per_case() {
        let land = Landscape {
            rows: vec![
                row("rr", "1492", 100.0),
                row("rr", "8992", 150.0),
                row("get", "1492", 10.0),
                row("get", "8992", 40.0),
            ],
            dims: vec!["case".into(), "lab.mtu".into()],
            line_rate_bps: None,
            line_rate_measured: false,
            line_rate_note: None,
            threshold: 0.9,
            window_rtt: false,
            model_note: None,
        };
        let keys = ["transactions_per_s".to_string()];
        let t = by_case(&land, &["lab.mtu".to_string()], &keys);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].headers, ["setting", "rr", "get", "all"]);
        // All: the geometric mean of 1.5 and 4 (2.45).
        assert_eq!(
            t[0].rows,
            [["lab.mtu=8992 / lab.mtu=1492", "1.50x", "4.00x", "2.45x"]]
        );
        assert!(t[0].title.contains("Transactions"), "{}", t[0].title);
        // It leads the overview tables.
        let all = tables(&land, &["lab.mtu".to_string()], &keys);
        assert_eq!(all[0].rows, t[0].rows);
        // Without cases there is nothing to split by.
        let mut one = land;
        one.rows.retain(|r| r.point.param("case") == Some("rr"));
        assert!(by_case(&one, &["lab.mtu".to_string()], &keys).is_empty());
    }
}
