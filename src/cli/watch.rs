//! `linerate watch --every 1h -- run rr ...`: a command (`run`, `study
//! run`, `quick`) run on a schedule, each run recorded in the history,
//! and after each one every tracked figure of its series tested for a
//! change (`history::detect`). A change is one line, a row in the
//! series' report, a command hook, and with `--exit-on-change` exit 4.
//!
//! Each run is this binary again, as a child: a run that fails or hangs
//! up cannot take the watch with it, and a run that could not reach its
//! agent is recorded as a failed run while the watch goes on. The wait
//! between runs has a random slip (as systemd's RandomizedDelaySec), so
//! watchers started together do not measure one path at the same time.

use clap::Args;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{usage, Error, Result};
use crate::history::changepoint::Params;
use crate::history::detect::{self, Track};
use crate::history::entry::{self, Entry, RunKind};
use crate::history::store::{Filter, Run, StoredChange};
use crate::history::{self, Store};

#[derive(Args, Debug)]
pub struct WatchArgs {
    /// Time from one run's start to the next's (30s, 15m, 1h, 1d).
    #[arg(long, default_value = "1h", value_parser = crate::units::parse_span)]
    pub every: Duration,
    /// A random delay added to each wait, up to this share of --every (0% to 50%), so watchers started together spread out.
    #[arg(long, default_value = "10%", value_name = "PCT", value_parser = pct_0_50)]
    pub slip: f64,
    /// Stop after this many runs (default: until Ctrl-C).
    #[arg(long, value_name = "N")]
    pub runs: Option<u32>,
    /// The figures tested for a change: headline (each point's main figure and its p99 latency), all, or metrics (comma separated, `linerate study metrics`).
    #[arg(long, default_value = "headline", value_name = "WHAT", value_parser = Track::parse)]
    pub track: Track,
    /// The smallest change reported, as a share of the level before it.
    #[arg(long, default_value = "1%", value_name = "PCT", value_parser = pct_0_50)]
    pub min_change: f64,
    /// The change test's significance level (the chance that a series with no change passes one run's test).
    #[arg(long, default_value_t = Params::default().alpha, value_name = "P")]
    pub alpha: f64,
    /// A shell command run on each change, with LINERATE_CHANGE (the line), LINERATE_SERIES, LINERATE_METRIC, LINERATE_BEFORE, LINERATE_AFTER and LINERATE_RUN set.
    #[arg(long, value_name = "CMD")]
    pub on_change: Option<String>,
    /// Stop with exit code 4 when a change is found.
    #[arg(long)]
    pub exit_on_change: bool,
    /// The watch's name in the history (default: its command line).
    #[arg(long, value_name = "NAME")]
    pub label: Option<String>,
    /// Write the series' report (report.html, report.md: each figure over time, its changes) into this folder after each run.
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
    /// Serve the watch's metrics for Prometheus to scrape at http://HOST:PORT/metrics (Prometheus's text format: runs, changes, the newest run's figures).
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_listen: Option<String>,
    /// Show each run's own output (default: one line per run).
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// The store (default: $LINERATE_HISTORY, else ~/.local/share/linerate/history.db).
    #[arg(long, value_name = "FILE")]
    pub history: Option<PathBuf>,
    /// The linerate command to run, after `--`: run ..., study run ..., or quick.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// A share given in percent, 0% to 50% (--slip, --min-change).
fn pct_0_50(s: &str) -> std::result::Result<f64, String> {
    crate::units::parse_share_pct(s, 50.0)
}

/// The kind and name a command line runs, checked by the command-line
/// parser itself before the first run.
fn check_command(cmd: &[String]) -> Result<(RunKind, String)> {
    let argv = std::iter::once("linerate".to_string()).chain(cmd.iter().cloned());
    let cli = <super::Cli as clap::Parser>::try_parse_from(argv).map_err(|e| {
        let first = e.to_string();
        let first = first
            .lines()
            .next()
            .unwrap_or("")
            .trim_start_matches("error: ");
        usage(format!(
            "the watched command `{}` is not a linerate command line: {first}",
            cmd.join(" ")
        ))
    })?;
    match cli.command {
        Some(super::Command::Run(r)) => Ok((RunKind::Run, r.workload.name().into())),
        Some(super::Command::Study(super::study::StudyArgs {
            command: super::study::StudyCommand::Run(s),
        })) => Ok((RunKind::Study, s.study)),
        Some(super::Command::Quick(_)) => Ok((RunKind::Study, "quick".into())),
        _ => Err(usage(format!(
            "watch runs `run ...`, `study run ...` or `quick`, not `{}`",
            cmd.join(" ")
        ))),
    }
}

/// Sleeps `d`, or less when Ctrl-C comes; true when it did.
fn wait(d: Duration) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if crate::engine::signals::raised().load(std::sync::atomic::Ordering::SeqCst) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100).min(end - Instant::now()));
    }
    crate::engine::signals::raised().load(std::sync::atomic::Ordering::SeqCst)
}

/// One run of the command: the run recorded, or why it failed.
struct Outcome {
    run: Option<Run>,
    failure: Option<String>,
}

/// Runs the command once as a child that records itself in `path`.
fn run_once(a: &WatchArgs, path: &Path, label: &str, store: &Store) -> Result<Outcome> {
    let dir = std::env::temp_dir().join(format!("linerate-watch-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::Failed(format!("cannot make {}: {e}", dir.display())))?;
    let id_file = dir.join("id");
    let log = dir.join("output");
    let _ = std::fs::remove_file(&id_file);
    let exe =
        std::env::current_exe().map_err(|e| Error::Failed(format!("cannot find linerate: {e}")))?;
    let mut c = Command::new(exe);
    c.args(&a.command)
        .env("LINERATE_HISTORY", path)
        .env(history::WATCH_ENV, label)
        .env(history::ID_FILE_ENV, &id_file)
        .stdin(Stdio::null());
    if !a.verbose {
        let out = std::fs::File::create(&log)
            .map_err(|e| Error::Failed(format!("cannot write {}: {e}", log.display())))?;
        let err = out.try_clone().map_err(|e| Error::Failed(e.to_string()))?;
        c.stdout(out).stderr(err);
    }
    let status = c
        .status()
        .map_err(|e| Error::Failed(format!("cannot run linerate: {e}")))?;
    let id: Option<i64> = std::fs::read_to_string(&id_file)
        .ok()
        .and_then(|t| t.trim().parse().ok());
    let run = id.map(|id| store.run(id)).transpose()?.flatten();
    let failure = match (&run, status.code()) {
        (Some(_), _) => None,
        (None, Some(0)) => Some("the run ended well but was not recorded".into()),
        (None, _) => {
            Some(last_words(&log).unwrap_or_else(|| format!("linerate ended with {status}")))
        }
    };
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Outcome { run, failure })
}

/// The last line a failed run wrote (its one-line error).
fn last_words(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    let line = text.lines().rev().find(|l| !l.trim().is_empty())?;
    Some(line.trim_start_matches("linerate: ").to_string())
}

/// A run that measured nothing, recorded in the series of the watch's
/// runs before it (so a list of the series shows the gap).
fn record_failure(
    store: &mut Store,
    a: &WatchArgs,
    label: &str,
    kind: RunKind,
    name: &str,
    at: String,
    why: &str,
) -> Result<i64> {
    let before = store.runs(&Filter {
        watch: Some(label.into()),
        status: None,
        ..Default::default()
    })?;
    let like = before.iter().rev().find(|r| r.status != "failed");
    let (spec, target, lab) = match like {
        Some(r) => {
            let (spec, _) = store.details(r.id)?;
            (spec, r.target.clone(), r.lab.clone())
        }
        None => (
            serde_json::json!({"command": a.command}).to_string(),
            String::new(),
            String::new(),
        ),
    };
    let e = Entry {
        at,
        kind,
        name: name.into(),
        spec,
        target,
        lab,
        environment: entry::this_host(),
        status: "failed".into(),
        error: Some(why.into()),
        results: None,
        watch: Some(label.into()),
        command: shlex::try_join(
            std::iter::once("linerate").chain(a.command.iter().map(String::as_str)),
        )
        .unwrap_or_default(),
        figures: Vec::new(),
    };
    Ok(store.record(&e)?)
}

/// Runs the hook for a change; its failure is said, not fatal.
fn hook(cmd: &str, c: &StoredChange) {
    let status = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .env("LINERATE_CHANGE", detect::line(c))
        .env("LINERATE_SERIES", &c.series)
        .env("LINERATE_POINT", &c.point)
        .env("LINERATE_METRIC", &c.metric)
        .env("LINERATE_BEFORE", c.before.to_string())
        .env("LINERATE_AFTER", c.after.to_string())
        .env("LINERATE_RUN", c.run.to_string())
        .stdin(Stdio::null())
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => eprintln!("warning: --on-change ended with {s}"),
        Err(e) => eprintln!("warning: cannot run --on-change: {e}"),
    }
}

pub fn watch(a: WatchArgs) -> Result<()> {
    let (kind, name) = check_command(&a.command)?;
    if !(a.alpha > 0.0 && a.alpha < 0.5) {
        return Err(usage(format!(
            "--alpha {}: give a level between 0 and 0.5, e.g. 0.001",
            a.alpha
        )));
    }
    let path = history::store_path(a.history.as_deref()).ok_or_else(|| {
        usage("watch records every run: the history is off (LINERATE_HISTORY=off, or no HOME): give --history FILE")
    })?;
    // A damaged or locked store is said before the first run.
    let mut store = Store::open(&path)?;
    let label = a.label.clone().unwrap_or_else(|| a.command.join(" "));
    let params = Params {
        alpha: a.alpha,
        min_change: a.min_change,
        ..Params::default()
    };
    let exporter = match &a.metrics_listen {
        Some(addr) => {
            let e = crate::history::exporter::Exporter::start(addr)?;
            e.set(crate::history::exporter::render(&store, &label)?);
            eprintln!("metrics: http://{}/metrics", e.addr);
            Some(e)
        }
        None => None,
    };
    crate::engine::signals::on_signals(&[libc::SIGINT, libc::SIGTERM], true);
    eprintln!(
        "watch '{label}': every {} (+ up to {:.0}% slip), {}, history {}",
        crate::units::fmt_secs(a.every.as_secs_f64()),
        a.slip * 100.0,
        a.runs
            .map_or("until Ctrl-C".to_string(), |n| format!("{n} runs")),
        path.display()
    );
    let mut done = 0u32;
    let mut found = 0usize;
    loop {
        let start = Instant::now();
        let at = crate::units::rfc3339_now();
        let o = run_once(&a, &path, &label, &store)?;
        done += 1;
        let changes = match (o.run, o.failure) {
            (Some(r), _) => {
                let changes = detect::after_run(&mut store, &r.series, r.id, &a.track, &params)?;
                let n = store.run_count(&r.series)?;
                eprintln!(
                    "run {} ({done}) {at}: {}, series {} ({n} runs)",
                    r.id, r.status, r.series
                );
                if let Some(dir) = &a.report {
                    let html = crate::history::report::write(&store, &r.series, &a.track, dir)?;
                    if done == 1 {
                        eprintln!("report: {}", html.display());
                    }
                }
                changes
            }
            (None, why) => {
                let why = why.unwrap_or_default();
                let id = record_failure(&mut store, &a, &label, kind, &name, at.clone(), &why)?;
                eprintln!("run {id} ({done}) {at}: failed: {why}");
                Vec::new()
            }
        };
        if let Some(e) = &exporter {
            e.set(crate::history::exporter::render(&store, &label)?);
        }
        for c in &changes {
            println!("{}", detect::line(c));
            if let Some(cmd) = &a.on_change {
                hook(cmd, c);
            }
        }
        found += changes.len();
        if crate::engine::signals::raised().load(std::sync::atomic::Ordering::SeqCst) {
            return Err(Error::Partial(format!(
                "watch stopped by a signal after {done} runs (all recorded in {})",
                path.display()
            )));
        }
        if a.exit_on_change && !changes.is_empty() {
            return Err(Error::Threshold(format!(
                "watch '{label}': {} change(s) found at run {done}",
                changes.len()
            )));
        }
        if a.runs.is_some_and(|n| done >= n) {
            eprintln!("watch '{label}': {done} runs, {found} change(s)");
            return Ok(());
        }
        let slip = a.every.mul_f64(a.slip * rand::random::<f64>());
        let next = (a.every + slip).saturating_sub(start.elapsed());
        if wait(next) {
            return Err(Error::Partial(format!(
                "watch stopped by a signal after {done} runs (all recorded in {})",
                path.display()
            )));
        }
    }
}
