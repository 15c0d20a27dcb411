//! Several environments in one report (`linerate report A B C --label ...`):
//! results folders of the same study (or of studies with common metrics)
//! taken on different hosts, kernels or settings, merged into one landscape
//! with an `env` dimension first, so every table gets a row per environment
//! and every plot a series per environment. Beside it: an overview of
//! ratios against the first environment (IBM's "jumbo MTU vs default: RR
//! 1.12x"), each with its confidence interval when both sides have
//! repetitions, and the hosts' settings with the ones that differ first.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::model::host::HostInfo;
use crate::report::analysis::compare::welch;
use crate::report::analysis::hosts::host_rows;
use crate::report::analysis::landscape::{Landscape, Table};
use crate::report::analysis::metrics;
use crate::study::folder::{Loaded, RunRecord};
use crate::study::sweep::Point;

/// The dimension that names an environment.
pub const ENV: &str = "env";

/// Labels for `dirs`: the given ones (comma separated, one per folder), or
/// each folder's name. Labels that do not fit the folders are a usage error.
pub fn labels(dirs: &[PathBuf], given: Option<&str>) -> Result<Vec<String>> {
    let labels: Vec<String> = match given {
        Some(g) => g.split(',').map(|s| s.trim().to_string()).collect(),
        None => dirs
            .iter()
            .map(|d| {
                d.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| d.display().to_string())
            })
            .collect(),
    };
    if labels.len() != dirs.len() {
        return Err(Error::Usage(format!(
            "--label gives {} for {}: one per folder, comma separated",
            crate::units::plural(labels.len() as u64, "name", "names"),
            crate::units::plural(dirs.len() as u64, "folder", "folders")
        )));
    }
    if let Some(l) = labels.iter().find(|l| l.is_empty() || l.contains('=')) {
        return Err(Error::Usage(format!(
            "--label '{l}': a label is a non-empty word without '='"
        )));
    }
    for (i, l) in labels.iter().enumerate() {
        if labels[..i].contains(l) {
            return Err(Error::Usage(format!(
                "--label '{l}' names two folders: labels must differ"
            )));
        }
    }
    Ok(labels)
}

/// One folder holding every environment's points, each with `env` first.
/// The first folder's study gives the tables and plots; a plot's series
/// becomes the environment (other parameters stay in the series names).
pub fn merge(all: Vec<Loaded>, labels: &[String], out: PathBuf) -> Result<Loaded> {
    let mut iter = all.into_iter().zip(labels);
    let (first, first_label) = iter
        .next()
        .ok_or_else(|| Error::Failed("no results folder to report".into()))?;
    let mut study = first.study.clone();
    study.title = format!("{} — {}", study.title, labels.join(" vs "));
    for p in &mut study.plots {
        p.series = Some(ENV.into());
    }
    let mut manifest = first.manifest.clone();
    manifest.points.clear();
    manifest.runs.clear();
    let mut results = Vec::new();
    let mut networks = Vec::new();
    let mut add = |l: Loaded,
                   label: &String,
                   results: &mut Vec<_>,
                   manifest: &mut crate::study::folder::Manifest| {
        networks.push(format!("{label}: {}", l.manifest.network));
        let offset = manifest.points.len();
        for p in &l.manifest.points {
            let mut params = vec![(ENV.to_string(), label.clone())];
            params.extend(p.params.iter().cloned());
            manifest.points.push(Point {
                groups: Vec::new(),
                index: offset + p.index,
                id: format!("{label}--{}", p.id),
                params,
                spec: p.spec.clone(),
                confidence: p.confidence,
            });
        }
        for r in &l.manifest.runs {
            manifest.runs.push(RunRecord {
                point: format!("{label}--{}", r.point),
                ..r.clone()
            });
        }
        for (r, res) in l.results {
            results.push((
                RunRecord {
                    point: format!("{label}--{}", r.point),
                    ..r
                },
                res,
            ));
        }
    };
    add(first, first_label, &mut results, &mut manifest);
    for (l, label) in iter {
        add(l, label, &mut results, &mut manifest);
    }
    manifest.network = networks.join("; ");
    Ok(Loaded {
        dir: out,
        study,
        manifest,
        results,
    })
}

/// Ratios of each environment's metrics to the first's, per point matched
/// by its other parameters; "1.12x ± 0.04" with repetitions on both sides.
/// `dim` names the environment: `env` for merged folders, or a study's
/// own axis (`lab.mtu`: jumbo frames against the default).
pub fn overview(
    land: &Landscape,
    dim: &str,
    labels: &[String],
    metric_keys: &[String],
) -> Option<Table> {
    let base = labels.first()?;
    let ms: Vec<&'static metrics::Metric> = metric_keys
        .iter()
        .filter_map(|k| metrics::find(k))
        .filter(|m| land.rows.iter().any(|r| r.value(m.key).is_some()))
        .collect();
    if ms.is_empty() || labels.len() < 2 {
        return None;
    }
    let mut t = Table {
        title: if dim == ENV {
            format!("Overview: each environment against {base} (ratio of means)")
        } else {
            format!("Overview: each {dim} against {dim}={base} (ratio of means)")
        },
        headers: ["environment", "point"]
            .into_iter()
            .map(String::from)
            .chain(ms.iter().map(|m| m.title.to_string()))
            .collect(),
        rows: vec![],
    };
    let name = |v: &str| {
        if dim == ENV {
            v.to_string()
        } else {
            format!("{dim}={v}")
        }
    };
    for other in &labels[1..] {
        let mut logs: Vec<Vec<f64>> = vec![Vec::new(); ms.len()];
        let first_row = t.rows.len();
        for (key, a, b) in land.pairs(dim, base, other) {
            let mut row = vec![
                format!("{} / {}", name(other), name(base)),
                if key.is_empty() { "test".into() } else { key },
            ];
            for (i, m) in ms.iter().enumerate() {
                row.push(match (a.value(m.key), b.value(m.key)) {
                    (Some(ea), Some(eb)) if ea.mean != 0.0 => {
                        let ratio = eb.mean / ea.mean;
                        if ratio > 0.0 {
                            logs[i].push(ratio.ln());
                        }
                        match welch(ea, eb, crate::report::analysis::landscape::LEVEL_PCT) {
                            Some((_, hw)) => format!("{ratio:.2}x ± {:.2}", hw / ea.mean.abs()),
                            None => format!("{ratio:.2}x"),
                        }
                    }
                    _ => "-".into(),
                });
            }
            t.rows.push(row);
        }
        if t.rows.len() > first_row + 1 {
            let mut row = vec![
                format!("{} / {}", name(other), name(base)),
                "geometric mean".into(),
            ];
            for l in &logs {
                row.push(if l.is_empty() {
                    "-".into()
                } else {
                    format!("{:.2}x", (l.iter().sum::<f64>() / l.len() as f64).exp())
                });
            }
            t.rows.push(row);
        }
    }
    Some(t)
}

/// Each environment's hosts as (setting, value): client and agent in one
/// value when they agree, "client / agent" when not.
fn settings(h: &(HostInfo, HostInfo)) -> Vec<(String, String)> {
    host_rows(&h.0, &h.1)
        .into_iter()
        .map(|(k, c, a)| {
            let v = if c == a || a.is_empty() {
                c
            } else {
                format!("{c} / {a}")
            };
            (k, v)
        })
        .collect()
}

/// The Configuration Summary across environments: the settings that
/// differ (one column per environment), then those they share (one value).
pub fn config(hosts: &[(String, Option<(HostInfo, HostInfo)>)]) -> Vec<Table> {
    let per: Vec<Vec<(String, String)>> = hosts
        .iter()
        .map(|(_, h)| h.as_ref().map(settings).unwrap_or_default())
        .collect();
    let mut keys: Vec<String> = Vec::new();
    for s in &per {
        for (k, _) in s {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    let value = |i: usize, k: &str| {
        per[i]
            .iter()
            .find(|(x, _)| x == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| "-".into())
    };
    let mut differ = Table {
        title: "Settings that differ between the environments".into(),
        headers: std::iter::once("setting".to_string())
            .chain(hosts.iter().map(|(l, _)| l.clone()))
            .collect(),
        rows: vec![],
    };
    let mut same = Table {
        title: "Settings every environment shares".into(),
        headers: vec!["setting".into(), "value".into()],
        rows: vec![],
    };
    for k in keys {
        let vals: Vec<String> = (0..hosts.len()).map(|i| value(i, &k)).collect();
        if vals.iter().all(|v| *v == vals[0]) {
            same.rows.push(vec![k, vals[0].clone()]);
        } else {
            let mut row = vec![k];
            row.extend(vals);
            differ.rows.push(row);
        }
    }
    if differ.rows.is_empty() {
        differ.rows.push(
            std::iter::once(
                "(none: as far as linerate collects them, the hosts are alike)".to_string(),
            )
            .chain(hosts.iter().map(|_| String::new()))
            .collect(),
        );
    }
    vec![differ, same]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_one_per_folder_and_distinct() {
        let d = vec![
            PathBuf::from("results/awm-a"),
            PathBuf::from("results/awm-b"),
        ];
        assert_eq!(labels(&d, None).unwrap(), ["awm-a", "awm-b"]);
        assert_eq!(labels(&d, Some("sles, rhel")).unwrap(), ["sles", "rhel"]);
        assert!(labels(&d, Some("sles"))
            .unwrap_err()
            .to_string()
            .contains("2 folders"));
        assert!(labels(&d, Some("x,x"))
            .unwrap_err()
            .to_string()
            .contains("must differ"));
        assert!(labels(&d, Some("a=b,c")).is_err());
    }

    #[test]
    fn differing_settings_come_first() {
        let a = HostInfo {
            kernel: "6.1".into(),
            hostname: "h".into(),
            ..Default::default()
        };
        let mut b = a.clone();
        b.kernel = "6.18".into();
        let t = config(&[
            ("sles".into(), Some((a.clone(), a))),
            ("rhel".into(), Some((b.clone(), b))),
        ]);
        assert_eq!(t[0].headers, ["setting", "sles", "rhel"]);
        assert_eq!(t[0].rows, [["kernel", "6.1", "6.18"]]);
        assert!(t[1].rows.iter().any(|r| r[0] == "host" && r[1] == "h"));
        assert!(t[1].rows.iter().all(|r| r[0] != "kernel"));
    }
}
