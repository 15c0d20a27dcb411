//! `linerate history`: the runs recorded in the history store, listed and
//! filtered, one run's figures, the series, the changes found, and the
//! import of results folders written before (or without) the store.

use clap::{Args, Subcommand};
use std::path::PathBuf;

use crate::error::{usage, Error, Result};
use crate::history::store::{Filter, Run, Store};
use crate::history::{detect, import};

#[derive(Args, Debug)]
pub struct HistoryArgs {
    #[command(subcommand)]
    pub command: Option<HistoryCommand>,
    /// The store (default: $LINERATE_HISTORY, else ~/.local/share/linerate/history.db).
    #[arg(long, global = true, value_name = "FILE")]
    pub history: Option<PathBuf>,
    #[command(flatten)]
    pub list: ListArgs,
}

#[derive(Subcommand, Debug)]
pub enum HistoryCommand {
    /// The runs, oldest first (the default): when, what, where, status and headline figure.
    List(ListArgs),
    /// One run: what ran, where, on what, and every figure it recorded.
    Show {
        /// The run's id (the first column of `history list`).
        id: i64,
        /// Print it as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The series (what ran, where): runs, first and last, changes found.
    Series,
    /// The changes found in each series (by `watch`, or by --scan), oldest first.
    Changes {
        /// Only this series (a prefix of its key).
        #[arg(long, value_name = "KEY")]
        series: Option<String>,
        /// First test every series as a watch would have after each run (for imported runs), and store what is found.
        #[arg(long)]
        scan: bool,
        /// With --scan: the figures tested (headline, all, or metrics).
        #[arg(long, default_value = "headline", value_name = "WHAT", value_parser = detect::Track::parse)]
        track: detect::Track,
        /// With --scan: the smallest change reported.
        #[arg(long, default_value = "1%", value_name = "PCT", value_parser = |s: &str| crate::units::parse_share_pct(s, 50.0))]
        min_change: f64,
    },
    /// Record results written before: study folders, result JSON files, or a folder of them (e.g. results/).
    Import {
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
    },
    /// Print the store's path.
    Path,
}

#[derive(Args, Debug, Default, Clone)]
pub struct ListArgs {
    /// Only runs of this workload or study.
    #[arg(long)]
    pub name: Option<String>,
    /// Only this series (a prefix of its key).
    #[arg(long, value_name = "KEY")]
    pub series: Option<String>,
    /// Only runs of this watch.
    #[arg(long, value_name = "LABEL")]
    pub watch: Option<String>,
    /// Only runs that ended so: ok, partial or failed.
    #[arg(long, value_parser = ["ok", "partial", "failed"])]
    pub status: Option<String>,
    /// Only runs since this date (2026-11-29, an RFC 3339 time) or this long ago (7d, 12h).
    #[arg(long, value_name = "WHEN")]
    pub since: Option<String>,
    /// The newest N runs (0: all).
    #[arg(short = 'n', long, default_value_t = 20)]
    pub limit: usize,
    /// Print the runs as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The store these commands read: it must exist (a history command
/// does not make an empty one).
pub fn open(flag: Option<&std::path::Path>) -> Result<Store> {
    let path = crate::history::store_path(flag).ok_or_else(|| {
        usage("the history is off (LINERATE_HISTORY=off, or no HOME): give --history FILE")
    })?;
    if !path.exists() {
        return Err(usage(format!(
            "no history store at {}: runs are recorded there as they finish, or `linerate history import results/` records earlier ones",
            path.display()
        )));
    }
    Ok(Store::open(&path)?)
}

/// "7d" (ago) or a date, as the RFC 3339 prefix the store compares.
fn since(s: &str) -> Result<String> {
    if s.starts_with(|c: char| c.is_ascii_digit()) && s.contains('-') {
        return Ok(s.to_string());
    }
    let ago = crate::units::parse_span(s).map_err(|e| {
        usage(format!(
            "--since {s}: {e} (give a date such as 2026-11-29, or a time ago such as 7d or 12h)"
        ))
    })?;
    let t = std::time::SystemTime::now() - ago;
    Ok(crate::units::rfc3339(t))
}

pub fn history(a: HistoryArgs) -> Result<()> {
    let flag = a.history.as_deref();
    match a.command {
        None => list(open(flag)?, &a.list),
        Some(HistoryCommand::List(l)) => list(open(flag)?, &l),
        Some(HistoryCommand::Show { id, json }) => show(&open(flag)?, id, json),
        Some(HistoryCommand::Series) => series(&open(flag)?),
        Some(HistoryCommand::Changes {
            series,
            scan,
            track,
            min_change,
        }) => {
            let mut s = open(flag)?;
            let prefix = series.as_deref().unwrap_or("");
            if scan {
                let params = crate::history::changepoint::Params {
                    min_change,
                    ..Default::default()
                };
                let n = detect::scan(&mut s, prefix, &track, &params)?.len();
                eprintln!("scan: {n} new change(s)");
            }
            for c in s.changes(prefix)? {
                println!("{} {}", c.series, detect::line(&c));
            }
            Ok(())
        }
        Some(HistoryCommand::Import { paths }) => {
            let path = crate::history::store_path(flag).ok_or_else(|| {
                usage("the history is off (LINERATE_HISTORY=off): give --history FILE")
            })?;
            let mut s = Store::open(&path)?;
            let done = import::import(&mut s, &paths)?;
            let ok = done.iter().filter(|d| d.outcome.is_ok()).count();
            for d in &done {
                match &d.outcome {
                    Ok(id) => println!("run {id}: {}", d.path.display()),
                    Err(why) => eprintln!("skipped {}: {why}", d.path.display()),
                }
            }
            println!("{ok} of {} imported into {}", done.len(), path.display());
            Ok(())
        }
        Some(HistoryCommand::Path) => {
            match crate::history::store_path(flag) {
                Some(p) => println!("{}", p.display()),
                None => println!("off"),
            }
            Ok(())
        }
    }
}

/// The headline figure of a run, formatted ("941 Mbit/s"), or "".
fn headline(s: &Store, r: &Run) -> Result<String> {
    let figs = s.figures(r.id)?;
    let have: Vec<(String, String)> = figs
        .iter()
        .map(|f| (f.point.clone(), f.metric.clone()))
        .collect();
    let picked = detect::Track::Headline.pick(&have);
    let Some((p, m)) = picked.first() else {
        return Ok(String::new());
    };
    let v = figs
        .iter()
        .find(|f| &f.point == p && &f.metric == m)
        .map(|f| f.value);
    let fmt = v.map(|v| detect::fmt_value(m, v)).unwrap_or_default();
    let points = figs
        .iter()
        .map(|f| &f.point)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    Ok(match (points, p.is_empty()) {
        (1, true) => format!("{m} {fmt}"),
        _ => format!("{p}: {m} {fmt} ({points} points)"),
    })
}

fn list(s: Store, l: &ListArgs) -> Result<()> {
    let f = Filter {
        name: l.name.clone(),
        series: l.series.clone(),
        watch: l.watch.clone(),
        status: l.status.clone(),
        since: l.since.as_deref().map(since).transpose()?,
        limit: l.limit,
    };
    let runs = s.runs(&f)?;
    if l.json {
        return super::write_json(std::path::Path::new("-"), &runs);
    }
    if runs.is_empty() {
        eprintln!("no runs match (the store: {})", s.path().display());
        return Ok(());
    }
    println!(
        "{:>5}  {:<20}  {:<12}  {:<5}  {:<16}  {:<7}  {:<12}  figure",
        "run", "at", "series", "kind", "name", "status", "where"
    );
    for r in &runs {
        let at: String = r.at.chars().take(19).collect();
        let place = match r.lab.as_str() {
            "" => r.target.clone(),
            lab => format!("lab {lab}"),
        };
        let fig = match r.status.as_str() {
            "failed" => r.error.clone().unwrap_or_default(),
            _ => headline(&s, r)?,
        };
        println!(
            "{:>5}  {at:<20}  {:<12}  {:<5}  {:<16}  {:<7}  {:<12}  {fig}",
            r.id,
            r.series,
            r.kind.word(),
            r.name,
            r.status,
            place
        );
    }
    Ok(())
}

fn show(s: &Store, id: i64, json: bool) -> Result<()> {
    let r = s
        .run(id)?
        .ok_or_else(|| usage(format!("no run {id} in {}", s.path().display())))?;
    let (spec, env) = s.details(id)?;
    let figs = s.figures(id)?;
    if json {
        let spec: serde_json::Value = serde_json::from_str(&spec).unwrap_or_default();
        let v = serde_json::json!({"run": r, "spec": spec, "environment": env, "figures": figs});
        return super::write_json(std::path::Path::new("-"), &v);
    }
    println!(
        "run {} · {} {} · {} · {}",
        r.id,
        r.kind.word(),
        r.name,
        r.status,
        r.at
    );
    println!("series       {}", r.series);
    println!(
        "where        {}{}",
        r.target,
        if r.lab.is_empty() {
            String::new()
        } else {
            format!(" (lab {})", r.lab)
        }
    );
    let host = |h: &crate::history::entry::HostBrief| {
        format!(
            "{} · {} · {} × {} · linerate {} {}",
            h.hostname, h.kernel, h.cpus, h.cpu_model, h.linerate_version, h.git_commit
        )
    };
    println!(
        "environment  {} (fingerprint {})",
        host(&env.client),
        r.fingerprint
    );
    if let Some(sv) = &env.server {
        println!("server       {}", host(sv));
    }
    println!("command      {}", r.command);
    if let Some(w) = &r.watch {
        println!("watch        {w}");
    }
    if let Some(p) = &r.results {
        println!("results      {p}");
    }
    if let Some(e) = &r.error {
        println!("error        {e}");
    }
    for f in figs {
        let v = detect::fmt_value(&f.metric, f.value);
        let point = if f.point.is_empty() {
            String::new()
        } else {
            format!("{}  ", f.point)
        };
        println!("  {point}{:<24} {v}", f.metric);
    }
    Ok(())
}

fn series(s: &Store) -> Result<()> {
    let runs = s.runs(&Filter::default())?;
    let mut keys: Vec<&str> = runs.iter().map(|r| r.series.as_str()).collect();
    keys.sort();
    keys.dedup();
    if keys.is_empty() {
        eprintln!("no runs in {}", s.path().display());
        return Ok(());
    }
    println!(
        "{:<12}  {:<5}  {:<16}  {:<12}  {:>4}  {:<19}  {:<19}  changes",
        "series", "kind", "name", "where", "runs", "first", "last"
    );
    for k in keys {
        let of: Vec<&Run> = runs.iter().filter(|r| r.series == k).collect();
        let (first, last) = (of[0], of[of.len() - 1]);
        let changes = s.changes(k).map_err(Error::from)?.len();
        let place = if last.lab.is_empty() {
            last.target.clone()
        } else {
            format!("lab {}", last.lab)
        };
        println!(
            "{k:<12}  {:<5}  {:<16}  {place:<12}  {:>4}  {:<19}  {:<19}  {changes}",
            last.kind.word(),
            last.name,
            of.len(),
            first.at.chars().take(19).collect::<String>(),
            last.at.chars().take(19).collect::<String>(),
        );
    }
    Ok(())
}
