//! Which figures a watch tracks, and the test of each after a run: the
//! series' values of one (point, metric), oldest first, handed to
//! `changepoint::newest` from the last change stored for it, so a change
//! is reported once and the next one is measured against the new level.

use super::changepoint::{self, Params};
use super::store::{Store, StoredChange};
use super::HistoryError;

/// A point's headline figure, the first of these it has: what a person
/// would plot first for that kind of test.
const HEADLINES: &[&str] = &[
    "capacity_per_s",
    "capacity_bps",
    "rpm",
    "ops_per_s",
    "cipher_mb_per_s",
    "connections_per_s",
    "transactions_per_s",
    "packets_per_s",
    "transfer_s",
    "throughput_bps",
];

/// Tail latency, tracked beside the headline where a test has it.
const TAILS: &[&str] = &["latency_p99_us", "get_p99_us"];

/// What a watch tests.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Track {
    /// Each point's headline figure and its p99 latency.
    #[default]
    Headline,
    /// Every figure.
    All,
    /// These metrics (catalogue keys), in every point that has them.
    These(Vec<String>),
}

impl Track {
    pub fn parse(s: &str) -> Result<Track, String> {
        match s {
            "headline" => Ok(Track::Headline),
            "all" => Ok(Track::All),
            list => {
                let keys: Vec<String> = list.split(',').map(|k| k.trim().to_string()).collect();
                for k in &keys {
                    if crate::report::analysis::metrics::find(k).is_none() {
                        return Err(format!(
                            "no metric '{k}': --track takes headline, all, or metrics from `linerate study metrics` (comma separated)"
                        ));
                    }
                }
                Ok(Track::These(keys))
            }
        }
    }

    /// The (point, metric) pairs of `have` this tracks.
    pub fn pick(&self, have: &[(String, String)]) -> Vec<(String, String)> {
        match self {
            Track::All => have.to_vec(),
            Track::These(keys) => have
                .iter()
                .filter(|(_, m)| keys.contains(m))
                .cloned()
                .collect(),
            Track::Headline => {
                let mut points: Vec<&String> = have.iter().map(|(p, _)| p).collect();
                points.dedup();
                let has = |p: &String, m: &str| have.iter().any(|(q, k)| q == p && k == m);
                let mut out = Vec::new();
                for p in points {
                    for group in [HEADLINES, TAILS] {
                        if let Some(m) = group.iter().find(|m| has(p, m)) {
                            out.push((p.clone(), m.to_string()));
                        }
                    }
                }
                out
            }
        }
    }
}

/// Tests every tracked figure of `series` with the runs stored so far
/// (the newest is `found_at`), stores the new changes and returns them.
pub fn after_run(
    store: &mut Store,
    series: &str,
    found_at: i64,
    track: &Track,
    params: &Params,
) -> Result<Vec<StoredChange>, HistoryError> {
    let stored = store.changes(series)?;
    let mut new = Vec::new();
    for (point, metric) in track.pick(&store.tracks(series)?) {
        let values = store.values(series, &point, &metric)?;
        let xs: Vec<f64> = values.iter().map(|(_, v)| *v).collect();
        let last = stored
            .iter()
            .filter(|c| c.point == point && c.metric == metric)
            .map(|c| c.run)
            .max();
        // The segment starts at the last change's run (its position now).
        let since = last
            .and_then(|run| values.iter().position(|(id, _)| *id == run))
            .unwrap_or(0);
        let Some(c) = changepoint::newest(&xs, since, params) else {
            continue;
        };
        let change = as_stored(series, (&point, &metric), &values, &c, found_at);
        if Some(change.run) != last {
            store.add_change(&change)?;
            new.push(change);
        }
    }
    Ok(new)
}

/// Every series (`prefix`: those whose key starts so), tested as a watch
/// would have after each of its runs: the changes found that were not
/// stored yet, stored (for histories imported, or recorded without a
/// watch).
pub fn scan(
    store: &mut Store,
    prefix: &str,
    track: &Track,
    params: &Params,
) -> Result<Vec<StoredChange>, HistoryError> {
    let runs = store.runs(&super::store::Filter {
        series: Some(prefix.into()),
        ..Default::default()
    })?;
    let mut keys: Vec<String> = runs.into_iter().map(|r| r.series).collect();
    keys.sort();
    keys.dedup();
    let mut new = Vec::new();
    for series in keys {
        let stored = store.changes(&series)?;
        for (point, metric) in track.pick(&store.tracks(&series)?) {
            let values = store.values(&series, &point, &metric)?;
            let xs: Vec<f64> = values.iter().map(|(_, v)| *v).collect();
            for (c, n) in changepoint::replay(&xs, params) {
                let change = as_stored(&series, (&point, &metric), &values, &c, values[n - 1].0);
                let known = stored
                    .iter()
                    .any(|s| s.point == point && s.metric == metric && s.run == change.run);
                if !known {
                    store.add_change(&change)?;
                    new.push(change);
                }
            }
        }
    }
    Ok(new)
}

/// A stored figure as people read it ("94.1 Mbit/s"), by its metric's
/// unit; a key the catalogue no longer has, as a bare number.
pub fn fmt_value(metric: &str, v: f64) -> String {
    crate::report::analysis::metrics::find(metric).map_or_else(|| format!("{v}"), |m| m.fmt(v))
}

/// The change `c` (found among `values`, the series' (run, value) pairs,
/// when run `found_at` ended) as the store keeps it.
fn as_stored(
    series: &str,
    (point, metric): (&str, &str),
    values: &[(i64, f64)],
    c: &changepoint::Change,
    found_at: i64,
) -> StoredChange {
    StoredChange {
        series: series.into(),
        point: point.into(),
        metric: metric.into(),
        run: values[c.index].0,
        found_at,
        before: c.before,
        after: c.after,
        p: c.p,
    }
}

/// One line for a change: "throughput_bps: 100.0 Mbit/s -> 95.0 Mbit/s
/// (-5.0%) from run 12, p = 0.0001".
pub fn line(c: &StoredChange) -> String {
    let m = crate::report::analysis::metrics::find(&c.metric);
    let fmt = |v: f64| fmt_value(&c.metric, v);
    let point = if c.point.is_empty() {
        String::new()
    } else {
        format!(" [{}]", c.point)
    };
    let worse = m.is_some_and(|m| (c.after > c.before) != m.higher_is_better);
    format!(
        "change: {}{point} {} -> {} ({:+.1}%, {}) from run {}, p = {:.1e} (E-divisive means, t-test)",
        c.metric,
        fmt(c.before),
        fmt(c.after),
        (c.after - c.before) / c.before * 100.0,
        if worse { "worse" } else { "better" },
        c.run,
        c.p
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn have(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(p, m)| (p.to_string(), m.to_string()))
            .collect()
    }

    #[test]
    fn the_headline_is_each_points_main_figure_and_its_tail() {
        let h = have(&[
            ("a", "client_cpu_pct"),
            ("a", "latency_p99_us"),
            ("a", "throughput_bps"),
            ("a", "transactions_per_s"),
            ("b", "throughput_bps"),
        ]);
        assert_eq!(
            Track::Headline.pick(&h),
            have(&[
                ("a", "transactions_per_s"),
                ("a", "latency_p99_us"),
                ("b", "throughput_bps")
            ])
        );
        assert_eq!(Track::All.pick(&h).len(), 5);
        let these = Track::parse("client_cpu_pct,throughput_bps").unwrap();
        assert_eq!(these.pick(&h).len(), 3);
        assert!(Track::parse("speed")
            .unwrap_err()
            .contains("no metric 'speed'"));
    }
}
