//! Changing a study from the command line instead of copying its file:
//! `--set KEY=VALUE` and `--unset KEY` on any key a study file takes, and
//! `--no-lab`, which runs a lab study's points where the user points them
//! (`--hosts`, `--agent`) without the lab and without the axes only a lab
//! can turn.
//!
//! The overrides work on the file's TOML before it is parsed, so they reach
//! every key the file format has and are checked by the same parser as the
//! file; the study stored with the results is the changed one (what ran).

use crate::study::StudyError;

/// What the command line changes in a study file.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `KEY=VALUE` in order; a later one wins.
    pub sets: Vec<String>,
    /// Keys to remove.
    pub unsets: Vec<String>,
    /// Drop `[lab]` and whatever only a lab can turn.
    pub no_lab: bool,
}

/// Settings of a point that only a lab gives: the emulated round trip, the
/// lab's own settings and the firewall it loads in its server namespace.
const LAB_KEYS: &[&str] = &["rtt", "lab", "firewall"];

impl Overrides {
    pub fn is_empty(&self) -> bool {
        self.sets.is_empty() && self.unsets.is_empty() && !self.no_lab
    }

    /// The command-line flags that made these overrides (for the study's
    /// stored file, and for a process that runs part of the study again).
    pub fn describe(&self) -> String {
        let mut v: Vec<String> = Vec::new();
        if self.no_lab {
            v.push("--no-lab".into());
        }
        v.extend(self.sets.iter().map(|s| format!("--set '{s}'")));
        v.extend(self.unsets.iter().map(|s| format!("--unset {s}")));
        v.join(" ")
    }

    /// The study text with the overrides applied, and a line for each
    /// thing `--no-lab` dropped. `origin` names the file in errors.
    pub fn apply(&self, text: &str, origin: &str) -> Result<(String, Vec<String>), StudyError> {
        let err = |message: String| StudyError::In {
            origin: origin.into(),
            message,
        };
        let mut doc: toml::Table = toml::from_str(text).map_err(|e| {
            err(format!(
                "cannot read it to apply overrides: {}",
                e.message().trim()
            ))
        })?;
        flatten_sweep(&mut doc);
        let mut notes = Vec::new();
        if self.no_lab {
            notes = drop_lab(&mut doc).map_err(err)?;
        }
        for s in &self.unsets {
            let path = key_path(s).map_err(err)?;
            if !remove(&mut doc, &path) {
                return Err(err(format!(
                    "--unset {s}: the study has no such key (see `linerate study show`)"
                )));
            }
        }
        for s in &self.sets {
            let (key, value) = s.split_once('=').ok_or_else(|| {
                err(format!(
                    "--set {s}: write KEY=VALUE, e.g. --set lab.rate=10gbit or --set 'sweep.flows=[1,4]'"
                ))
            })?;
            let path = key_path(key.trim()).map_err(err)?;
            set(&mut doc, &path, parse_value(value.trim())).map_err(err)?;
        }
        let body = toml::to_string(&doc)
            .map_err(|e| err(format!("cannot write the changed study: {e}")))?;
        let header = format!("# {origin}, changed by {}\n", self.describe());
        Ok((header + &body, notes))
    }
}

/// A key as the file writes it (`lab.rate`, `sweep."lab.cc"`,
/// `test.sysctl."net.core.somaxconn"`), split the way TOML splits it. A
/// key under `sweep` is one axis name however it is written.
fn key_path(key: &str) -> Result<Vec<String>, String> {
    let bad = |why: String| format!("--set/--unset key `{key}`: {why}");
    let doc: toml::Table =
        toml::from_str(&format!("{key} = 0")).map_err(|e| bad(e.message().trim().into()))?;
    let mut path = Vec::new();
    let mut t = &doc;
    loop {
        let (k, v) = t.iter().next().ok_or_else(|| bad("empty".into()))?;
        path.push(k.clone());
        match v {
            toml::Value::Table(inner) => t = inner,
            _ => break,
        }
    }
    if path.first().is_some_and(|k| k == "sweep") && path.len() > 2 {
        let axis = path[1..].join(".");
        path.truncate(1);
        path.push(axis);
    }
    Ok(path)
}

/// A value as TOML reads it (`4`, `true`, `[1, 2]`, `"x"`), else the text
/// as a string: `10gbit` and `50ms` need no quotes on a command line.
fn parse_value(v: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {v}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(v.to_string()))
}

fn set(doc: &mut toml::Table, path: &[String], value: toml::Value) -> Result<(), String> {
    let (last, tables) = path.split_last().expect("a key has a name");
    let mut t = doc;
    for (i, k) in tables.iter().enumerate() {
        let entry = t
            .entry(k.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        t = match entry {
            toml::Value::Table(inner) => inner,
            _ => {
                return Err(format!(
                    "--set {}: `{}` is a value, not a table",
                    path.join("."),
                    tables[..=i].join(".")
                ))
            }
        };
    }
    t.insert(last.clone(), value);
    Ok(())
}

fn remove(doc: &mut toml::Table, path: &[String]) -> bool {
    let (last, tables) = path.split_last().expect("a key has a name");
    let mut t = doc;
    for k in tables {
        match t.get_mut(k) {
            Some(toml::Value::Table(inner)) => t = inner,
            _ => return false,
        }
    }
    t.remove(last).is_some()
}

/// `[sweep] lab.cc = [...]` and `"lab.cc" = [...]` name one axis: the
/// sweep's nested tables become dotted keys, so an override finds the
/// axis however the file wrote it.
fn flatten_sweep(doc: &mut toml::Table) {
    fn walk(prefix: &str, v: toml::Value, out: &mut toml::Table) {
        match v {
            toml::Value::Table(t) => {
                for (k, v) in t {
                    walk(&format!("{prefix}.{k}"), v, out);
                }
            }
            other => {
                out.insert(prefix.to_string(), other);
            }
        }
    }
    let Some(toml::Value::Table(sweep)) = doc.remove("sweep") else {
        return;
    };
    let mut flat = toml::Table::new();
    for (k, v) in sweep {
        match v {
            // An axis written as a table of values (`{ from, to, ... }`)
            // is a value, not a group of axes.
            toml::Value::Table(t)
                if matches!(k.as_str(), "lab" | "sysctl" | "nic" | "firewall") =>
            {
                walk(&k, toml::Value::Table(t), &mut flat)
            }
            other => {
                flat.insert(k, other);
            }
        }
    }
    doc.insert("sweep".into(), toml::Value::Table(flat));
}

fn is_lab_key(axis: &str) -> bool {
    LAB_KEYS
        .iter()
        .any(|k| axis == *k || axis.starts_with(&format!("{k}.")))
}

/// Removes `[lab]`, the lab's settings from `[test]` and every `[[case]]`,
/// the axes over them, and the plots and overviews drawn over those axes.
fn drop_lab(doc: &mut toml::Table) -> Result<Vec<String>, String> {
    if doc.remove("lab").is_none() {
        return Err(
            "--no-lab: the study has no [lab] (it runs where --agent or --hosts point it already)"
                .into(),
        );
    }
    let mut notes = Vec::new();
    let mut dropped_settings = Vec::new();
    let mut strip = |t: &mut toml::Table| {
        for k in LAB_KEYS {
            if t.remove(*k).is_some() && !dropped_settings.contains(k) {
                dropped_settings.push(*k);
            }
        }
    };
    if let Some(toml::Value::Table(t)) = doc.get_mut("test") {
        strip(t);
    }
    if let Some(toml::Value::Array(cases)) = doc.get_mut("case") {
        for c in cases.iter_mut() {
            if let toml::Value::Table(t) = c {
                strip(t);
            }
        }
    }
    if !dropped_settings.is_empty() {
        notes.push(format!(
            "--no-lab: the points' {} settings dropped (the hosts' own path is measured)",
            dropped_settings.join(", ")
        ));
    }
    let mut axes = Vec::new();
    if let Some(toml::Value::Table(sweep)) = doc.get_mut("sweep") {
        axes = sweep.keys().filter(|k| is_lab_key(k)).cloned().collect();
        for a in &axes {
            sweep.remove(a);
        }
    }
    if axes.is_empty() {
        return Ok(notes);
    }
    notes.push(format!(
        "--no-lab: axes {} dropped (only a lab turns them; the hosts' own path is measured)",
        axes.join(", ")
    ));
    let on_dropped = |v: Option<&toml::Value>| v.and_then(|v| v.as_str()).is_some_and(is_lab_key);
    if let Some(toml::Value::Array(plots)) = doc.get_mut("plot") {
        let before = plots.len();
        for p in plots.iter_mut() {
            let toml::Value::Table(t) = p else { continue };
            if on_dropped(t.get("series")) {
                t.remove("series");
            }
            // A plot over a dropped axis draws its series instead (the
            // cases side by side); its title named the dropped axis.
            if on_dropped(t.get("x")) {
                if let Some(series) = t.remove("series") {
                    t.insert("x".into(), series);
                    t.remove("title");
                    t.remove("log_x");
                }
            }
        }
        plots.retain(|p| !on_dropped(p.get("x")));
        if plots.len() < before {
            notes.push(format!(
                "--no-lab: {} plot(s) over those axes dropped",
                before - plots.len()
            ));
        }
    }
    match doc.get_mut("overview") {
        Some(toml::Value::String(s)) if is_lab_key(s) => {
            doc.remove("overview");
        }
        Some(toml::Value::Array(list)) => {
            list.retain(|v| !v.as_str().is_some_and(is_lab_key));
            if list.is_empty() {
                doc.remove("overview");
            }
        }
        _ => {}
    }
    // The window/RTT bound needs the lab's round trip.
    let model = match doc.get_mut("model") {
        Some(toml::Value::Table(m)) => m.remove("window_rtt").is_some(),
        _ => false,
    };
    if model {
        notes.push(
            "--no-lab: the window/RTT model line dropped (it needs the lab's round trip)".into(),
        );
        if let Some(toml::Value::Array(plots)) = doc.get_mut("plot") {
            for p in plots.iter_mut() {
                if let Some(toml::Value::Array(models)) = p.get_mut("models") {
                    models.retain(|m| m.as_str() != Some("window_rtt"));
                }
            }
        }
    }
    Ok(notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::file::Study;

    fn apply(o: &Overrides, text: &str) -> Result<(Study, Vec<String>), String> {
        let (t, notes) = o.apply(text, "t.toml").map_err(|e| e.to_string())?;
        Study::parse(&t, "t.toml", "t")
            .map(|s| (s, notes))
            .map_err(|e| e.to_string())
    }

    const LABBED: &str = r#"
title = "t"
description = "d"
[lab]
rate = "1gbit"
[test]
workload = "stream"
duration = "2s"
sysctl."net.ipv4.tcp_rmem" = "4096 131072 33554432"
[sweep]
"lab.cc" = ["reno", "cubic"]
rtt = ["10ms", "50ms"]
flows = [1, 2]
[[plot]]
x = "rtt"
y = "throughput_bps"
series = "flows"
[[plot]]
x = "flows"
y = "throughput_bps"
series = "lab.cc"
"#;

    #[test]
    fn set_reaches_any_key_and_takes_bare_words_as_strings() {
        let o = Overrides {
            sets: vec![
                "lab.rate=10gbit".into(),
                "test.duration=5s".into(),
                "sweep.flows=[1, 4, 8]".into(),
                "sweep.lab.cc=[\"bbr\"]".into(),
                "test.sysctl.\"net.ipv4.tcp_rmem\"=\"4096 1 2\"".into(),
            ],
            ..Default::default()
        };
        let (s, notes) = apply(&o, LABBED).unwrap();
        assert!(notes.is_empty());
        assert_eq!(s.lab.as_ref().unwrap().rate.as_deref(), Some("10gbit"));
        let axis = |k: &str| s.axes.iter().find(|a| a.key == k).unwrap().values.clone();
        assert_eq!(axis("flows").len(), 3);
        // Written nested or quoted, it is the file's one "lab.cc" axis.
        assert_eq!(axis("lab.cc"), vec![toml::Value::String("bbr".into())]);
        assert_eq!(s.axes.len(), 3);
        assert!(s.source.starts_with("# t.toml, changed by --set"));
    }

    #[test]
    fn bad_overrides_say_which_and_how() {
        let o = |sets: &[&str], unsets: &[&str]| Overrides {
            sets: sets.iter().map(|s| s.to_string()).collect(),
            unsets: unsets.iter().map(|s| s.to_string()).collect(),
            no_lab: false,
        };
        let e = apply(&o(&["lab.rate"], &[]), LABBED).unwrap_err();
        assert!(e.contains("KEY=VALUE"), "{e}");
        let e = apply(&o(&["lab.rat=1gbit"], &[]), LABBED).unwrap_err();
        assert!(e.contains("rat"), "{e}");
        let e = apply(&o(&["title.x=1"], &[]), LABBED).unwrap_err();
        assert!(e.contains("not a table"), "{e}");
        let e = apply(&o(&[], &["sweep.nothing"]), LABBED).unwrap_err();
        assert!(e.contains("no such key"), "{e}");
        let e = apply(&o(&["a..b=1"], &[]), LABBED).unwrap_err();
        assert!(e.contains("a..b"), "{e}");
    }

    #[test]
    fn unset_removes_an_axis() {
        let o = Overrides {
            unsets: vec!["sweep.rtt".into()],
            sets: vec!["plot=[]".into()],
            ..Default::default()
        };
        let (s, _) = apply(&o, LABBED).unwrap();
        assert!(s.axes.iter().all(|a| a.key != "rtt"));
    }

    #[test]
    fn no_lab_drops_the_lab_its_axes_and_their_plots() {
        let o = Overrides {
            no_lab: true,
            ..Default::default()
        };
        let (s, notes) = apply(&o, LABBED).unwrap();
        assert!(s.lab.is_none());
        let keys: Vec<&str> = s.axes.iter().map(|a| a.key.as_str()).collect();
        assert_eq!(keys, ["flows"]);
        // The plot over rtt by flows draws flows; the plot by lab.cc
        // loses its series.
        assert_eq!(s.plots.len(), 2);
        assert!(s.plots.iter().all(|p| p.x == "flows" && p.series.is_none()));
        assert!(notes.iter().any(|n| n.contains("lab.cc, rtt")), "{notes:?}");
        // What is not the lab's stays.
        assert!(s
            .test
            .place
            .sysctl
            .as_ref()
            .unwrap()
            .contains_key("net.ipv4.tcp_rmem"));
        let e = apply(
            &o,
            "title = \"t\"\ndescription = \"d\"\n[test]\nworkload = \"rr\"\n",
        )
        .unwrap_err();
        assert!(e.contains("no [lab]"), "{e}");
    }
}
