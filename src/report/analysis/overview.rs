//! A study's overview over several axes (`overview = ["lab.link",
//! "lab.mtu"]`): beside each axis's own ratio table (environments.rs), a
//! table per pair of axes and per metric, rows one axis and columns the
//! other, each cell the ratio of its points to the points at both axes'
//! first values (seed 003's connection types by MTU).

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

/// One ratio table per axis, then one per pair of axes and metric.
pub fn tables(land: &Landscape, dims: &[String], metric_keys: &[String]) -> Vec<Table> {
    let mut out = Vec::new();
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
