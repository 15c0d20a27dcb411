//! Sweep expansion: a study's cases times its axes (crossed or zipped) become
//! points, each a complete test spec. Points are named by their parameters,
//! not their position, so a resumed or compared study finds the same point
//! even when axes grew (hyperfine's `parameter/` idea).

use serde::{Deserialize, Serialize};

use crate::model::options::TestOptions;
use crate::model::sample::Confidence;
use crate::model::spec::TestSpec;
use crate::model::Invalid;
use crate::study::file::{display_value, Mode, Study};
use crate::study::StudyError;

/// One test of a study.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Point {
    /// Position in the study's order (before any shuffle).
    pub index: usize,
    /// File-safe name from the parameters, e.g. `flows-8_direction-tx`.
    pub id: String,
    /// ("case", label) first when the study has cases, then one per axis.
    pub params: Vec<(String, String)>,
    pub spec: TestSpec,
    pub confidence: Confidence,
    /// A mixed case: its groups on one window (`spec` is their mix).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<crate::workload::group::Group>,
}

/// "flows=8 direction=tx": parameters as people name a point; a case's
/// label stands alone. The one place point and series names are made.
/// One parameter as people say it: the on/off switches the seeds compare
/// by name ("clear" and "TLS", not "tls=false" and "tls=true"), a case by
/// its label, anything else as `key=value`.
pub fn param_phrase(key: &str, value: &str) -> String {
    let on = match value {
        "true" => true,
        "false" => false,
        _ => {
            return if stands_alone(key) {
                value.to_string()
            } else {
                format!("{key}={value}")
            }
        }
    };
    let (yes, no) = match key {
        "tls" => ("TLS", "clear"),
        "crypto_hw" => ("crypto hw on", "crypto hw off"),
        "zerocopy" => ("zero-copy", "copy"),
        "nodelay" => ("nodelay", "Nagle"),
        "gso" => ("GSO", "no GSO"),
        "lab.offloads" | "offloads" => ("offloads on", "offloads off"),
        _ => return format!("{key}={value}"),
    };
    (if on { yes } else { no }).to_string()
}

/// Parameters as a chart's legend names them (`param_phrase` each): the
/// exact `key=value` form stays in tables, commands and errors.
pub fn params_phrase<'a>(params: impl IntoIterator<Item = &'a (String, String)>) -> String {
    params
        .into_iter()
        .map(|(k, v)| param_phrase(k, v))
        .collect::<Vec<_>>()
        .join(" ")
}

pub use crate::model::points::params_label;
use crate::model::points::stands_alone;

impl Point {
    /// "flows=8 direction=tx", or the case label alone.
    pub fn label(&self) -> String {
        if self.params.is_empty() {
            return "test".into();
        }
        params_label(&self.params)
    }

    /// The label without one parameter ("" when nothing else is left):
    /// what groups points along that parameter.
    pub fn label_except(&self, key: &str) -> String {
        params_label(self.params.iter().filter(|(k, _)| k != key))
    }

    pub fn param(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// The axis value combinations, each a list of (axis index, value index).
fn combinations(study: &Study) -> Vec<Vec<usize>> {
    let axes = &study.axes;
    if axes.is_empty() {
        return vec![vec![]];
    }
    match study.mode {
        Mode::Zip => (0..axes[0].values.len())
            .map(|i| vec![i; axes.len()])
            .collect(),
        Mode::Cross => {
            let mut out: Vec<Vec<usize>> = vec![vec![]];
            for a in axes {
                out = out
                    .into_iter()
                    .flat_map(|prefix| {
                        (0..a.values.len()).map(move |i| {
                            let mut p = prefix.clone();
                            p.push(i);
                            p
                        })
                    })
                    .collect();
            }
            out
        }
    }
}

/// `study` when every point of it is a valid test: checked for all of them
/// before any runs, wherever a study is read for use (a file, a built-in
/// study, a results folder). `Study::parse` checks the file alone.
pub fn checked(study: Study) -> Result<Study, StudyError> {
    expand(&study, &TestOptions::default())?;
    Ok(study)
}

/// Every point of `study`, with `overrides` (from the command line, e.g. a
/// shorter duration) applied on top of each. Fails on the first point that
/// is not a valid test, naming it.
pub fn expand(study: &Study, overrides: &TestOptions) -> Result<Vec<Point>, StudyError> {
    let base_cases: Vec<Option<&TestOptions>> = if study.cases.is_empty() {
        vec![None]
    } else {
        study.cases.iter().map(Some).collect()
    };
    let mut points = Vec::new();
    for case in base_cases {
        for combo in combinations(study) {
            let mut params = Vec::new();
            let mut config = study.test.clone();
            if let Some(c) = case {
                config = config.overlay(c);
                params.push(("case".to_string(), c.run.label.clone().unwrap_or_default()));
            }
            let mut pairs = std::collections::BTreeMap::new();
            for (a, &vi) in study.axes.iter().zip(&combo) {
                let v = &a.values[vi];
                pairs.insert(a.key.clone(), v.clone());
                params.push((a.key.clone(), display_value(v)));
            }
            let axis_config = TestOptions::from_pairs(&pairs)?;
            let mut config = config.overlay(&axis_config).overlay(overrides);
            config.run.label = None;
            let label = params_label(&params);
            let named = |source: Invalid| StudyError::Point {
                origin: study.origin.clone(),
                label: label.clone(),
                source,
            };
            let local = study.network.agent.is_none() && study.network.hosts.is_none();
            let composite = config
                .run
                .workload
                .and_then(|w| crate::workload::kind_of(w).composite());
            let (spec, groups) = if let Some(c) = composite {
                // A composite: its groups (a mix's as written, over the
                // point's options; rrul's built in, axes applying to every
                // group that takes them), each checked as a group is
                // (`group::check`).
                let as_invalid = |e: crate::workload::group::GroupError| Invalid(e.to_string());
                let groups = c
                    .groups(&config, local, &mut |o: TestOptions| {
                        crate::workload::build(&o, local).map_err(|e| e.to_string())
                    })
                    .map_err(as_invalid)
                    .map_err(named)?;
                let spec = c
                    .spec(&config, local, &groups)
                    .map_err(as_invalid)
                    .map_err(named)?;
                (spec, groups)
            } else if config.run.groups.is_some() {
                return Err(named(
                    "groups are the groups of a mix: add workload = \"mix\"".into(),
                ));
            } else {
                let spec = crate::workload::build(&config, local).map_err(named)?;
                // A point this build cannot run (the OpenSSL backend left
                // out) is recorded as such when the study runs, not refused.
                if crate::study::available::missing_here(&spec, false).is_none() {
                    crate::control::check(&spec).map_err(|e| StudyError::PointCheck {
                        origin: study.origin.clone(),
                        label: label.clone(),
                        source: Box::new(e),
                    })?;
                }
                (spec, Vec::new())
            };
            let confidence = config.confidence();
            let id = if params.is_empty() {
                "test".to_string()
            } else {
                params
                    .iter()
                    .map(|(k, v)| {
                        if k == "case" {
                            slug(v)
                        } else {
                            format!("{}-{}", slug(k), slug(v))
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("_")
            };
            points.push(Point {
                index: points.len(),
                id,
                params,
                spec,
                confidence,
                groups,
            });
        }
    }
    // Points that reshape a lab run grouped by their lab settings (each
    // change restarts emulators and calibrates again), in study order
    // within a group.
    if points
        .iter()
        .any(|p| p.spec.lab.is_some() || !p.spec.sysctl.is_empty())
    {
        let key =
            |p: &Point| serde_json::to_string(&(&p.spec.lab, &p.spec.sysctl)).unwrap_or_default();
        let mut order: Vec<String> = Vec::new();
        for p in &points {
            let k = key(p);
            if !order.contains(&k) {
                order.push(k);
            }
        }
        points.sort_by_key(|p| order.iter().position(|k| *k == key(p)));
        for (i, p) in points.iter_mut().enumerate() {
            p.index = i;
        }
    }
    let mut ids: Vec<&str> = points.iter().map(|p| p.id.as_str()).collect();
    ids.sort_unstable();
    if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
        return Err(StudyError::In {
            origin: study.origin.clone(),
            message: format!(
                "two points share the name {} (case labels must differ once made file-safe)",
                w[0]
            ),
        });
    }
    Ok(points)
}

/// A mixed point's groups: each group's options over the point's own
/// (the study's table, its case, its axes), checked as one window.
/// Its errors are the groups' rules, as the mix's own checks (the
/// controller's, in their words) and each group's spec say them.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::spec::{Direction, Workload};

    fn study(extra: &str) -> Study {
        let text = format!("title = \"t\"\ndescription = \"d\"\n[test]\nduration = 1\n{extra}");
        Study::parse(&text, "t.toml", "t").unwrap()
    }

    #[test]
    fn cross_varies_the_last_axis_fastest() {
        let s = study("[sweep]\nflows = [1, 2, 4]\ndirection = [\"tx\", \"rx\"]\n");
        let p = expand(&s, &TestOptions::default()).unwrap();
        assert_eq!(p.len(), 6);
        assert_eq!(p[0].label(), "flows=1 direction=tx");
        assert_eq!(p[1].label(), "flows=1 direction=rx");
        assert_eq!(p[5].spec.flows, 4);
        assert_eq!(p[5].spec.direction, Direction::Rx);
        assert_eq!(p[5].id, "flows-4_direction-rx");
        assert_eq!(p[5].spec.duration_s, 1.0);
    }

    #[test]
    fn zip_pairs_values_and_ranges_expand() {
        let s = study(
            "[sweep]\nmode = \"zip\"\nrequest = [200, 200]\nresponse = [\"1000\", \"32K\"]\n",
        );
        let p = expand(&s, &TestOptions::default()).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[1].spec.response, 32768);
        let s = study("[sweep]\nmessage = { from = \"64\", to = \"1M\", times = 4 }\n");
        let sizes: Vec<usize> = expand(&s, &TestOptions::default())
            .unwrap()
            .iter()
            .map(|p| p.spec.message)
            .collect();
        assert_eq!(
            sizes,
            vec![64, 256, 1024, 4096, 16384, 65536, 262144, 1048576]
        );
        let s = study("[sweep]\nflows = { from = 10, to = 40, step = 10 }\n");
        assert_eq!(expand(&s, &TestOptions::default()).unwrap().len(), 4);
    }

    #[test]
    fn cases_cross_axes_and_overrides_win() {
        let s = study(
            "[sweep]\nflows = [1, 10]\n[[case]]\nlabel = \"RR 200/1000\"\nworkload = \"rr\"\nrequest = 200\nresponse = 1000\n[[case]]\nlabel = \"stream put 20M/20\"\nbytes = \"20M\"\nper = \"transaction\"\n",
        );
        let mut over = TestOptions::default();
        over.run.duration = Some(crate::model::options::Length::Secs(0.25));
        let p = expand(&s, &over).unwrap();
        assert_eq!(p.len(), 4);
        assert_eq!(p[0].label(), "RR 200/1000 flows=1");
        assert_eq!(p[0].spec.workload, Workload::named("rr"));
        assert_eq!(p[3].spec.bytes, Some(20 << 20));
        assert_eq!(p[3].id, "stream-put-20M-20_flows-10");
        assert!(p.iter().all(|p| p.spec.duration_s == 0.25));
    }

    #[test]
    fn legends_name_switches_as_people_do() {
        let p = |k: &str, v: &str| (k.to_string(), v.to_string());
        assert_eq!(params_phrase(&[p("tls", "false")]), "clear");
        assert_eq!(
            params_phrase(&[p("tls", "true"), p("flows", "4")]),
            "TLS flows=4"
        );
        assert_eq!(params_phrase(&[p("crypto_hw", "false")]), "crypto hw off");
        assert_eq!(
            params_phrase(&[p("case", "rr 1/1"), p("zerocopy", "true")]),
            "rr 1/1 zero-copy"
        );
        // Unknown switches and other values keep the exact form.
        assert_eq!(params_phrase(&[p("verify", "true")]), "verify=true");
        assert_eq!(params_label(&[p("tls", "false")]), "tls=false");
    }

    #[test]
    fn an_invalid_point_is_named() {
        let text = "title = \"t\"\ndescription = \"d\"\n[test]\nworkload = \"crr\"\n[sweep]\nzerocopy = [false, true]\n";
        let e = Study::parse(text, "t.toml", "t")
            .and_then(checked)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "t.toml: point zerocopy=true: --zerocopy applies to stream"
        );
        assert!(e.contains("point zerocopy=true"), "{e}");
        assert!(e.contains("--zerocopy applies to stream"), "{e}");
        // A value no test takes, found when the points are made.
        let text =
            "title = \"t\"\ndescription = \"d\"\n[test]\nduration = 1\n[sweep]\nflows = [0]\n";
        let e = Study::parse(text, "t.toml", "t")
            .and_then(checked)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--flows must be at least 1"), "{e}");
    }

    #[test]
    fn cases_may_search_and_size_their_windows_themselves() {
        let text = "title = \"t\"\ndescription = \"d\"\n[test]\nworkload = \"rr\"\n[[case]]\nlabel = \"search\"\nsearch = \"p99<=1ms\"\nsearch_resolution = 5\n[[case]]\nlabel = \"auto\"\nduration = \"auto\"\nmax_duration = \"30s\"\n[[case]]\nlabel = \"fixed\"\nduration = 3\n";
        let s = Study::parse(text, "t.toml", "t").unwrap();
        let p = expand(&s, &TestOptions::default()).unwrap();
        assert_eq!(p.len(), 3);
        let search = p[0].spec.search.as_ref().expect("a search");
        assert_eq!(search.target.to_string(), "p99<=1ms");
        assert_eq!(search.resolution_pct, 5.0);
        assert_eq!(p[0].spec.io, crate::model::spec::IoMode::Epoll);
        let auto = p[1].spec.auto.as_ref().expect("an auto window");
        assert_eq!((auto.bound_s, p[1].spec.duration_s), (30.0, 30.0));
        assert!(p[2].spec.auto.is_none() && p[2].spec.search.is_none());
        assert_eq!(p[2].spec.duration_s, 3.0);
    }

    #[test]
    fn an_rrul_case_expands_into_its_groups_with_axes_applied() {
        let text = "title = \"t\"\ndescription = \"d\"\n[lab]\nrtt = \"20ms\"\nrate = \"20mbit\"\n[test]\nworkload = \"rrul\"\nidle = \"2s\"\nduration = \"5s\"\n[sweep]\n\"lab.aqm\" = [\"fifo\", \"fq_codel\"]\nstreams = [1, 8]\n";
        let s = Study::parse(text, "t.toml", "t").unwrap();
        let p = expand(&s, &TestOptions::default()).unwrap();
        assert_eq!(p.len(), 4);
        let last = &p[3];
        assert_eq!(
            last.spec.workload,
            crate::model::spec::Workload::named("rrul")
        );
        let r = crate::workload::rrul::params::RrulSpec::of(&last.spec).unwrap();
        assert_eq!(r.streams, 8);
        assert_eq!(last.groups.len(), 4);
        assert_eq!(last.groups[2].spec.flows, 8);
        assert_eq!(last.groups[2].offset_s, 2.0);
        // The lab's point settings reach every group (the runner reshapes
        // the lab by the point's spec).
        assert!(last.spec.lab.is_some());
        assert_eq!(last.groups[0].spec.lab, last.spec.lab);
        // What rrul sets itself is refused, naming the point.
        let bad = text.replace("streams = [1, 8]", "flows = [2]");
        let e = Study::parse(&bad, "t.toml", "t")
            .and_then(checked)
            .unwrap_err()
            .to_string();
        assert!(e.contains("point") && e.contains("--streams"), "{e}");
    }
}
