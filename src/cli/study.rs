//! The `study`, `report` and `compare` subcommands: thin front ends over the
//! study runner, the report writer and the comparison.

use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

use super::write_json;
use crate::controller::target::ConnectArgs;
use crate::error::{usage, Error, Result};
use crate::model::options::{Iterations, Secs, TestOptions};
use crate::report::analysis::{check, compare, landscape, metrics};
use crate::report::pipeline;
use crate::study::{builtin, folder, runner, sweep};

#[derive(Args, Debug)]
pub struct StudyArgs {
    #[command(subcommand)]
    pub command: StudyCommand,
}

// Parsed once per process: the size difference between variants is moot.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum StudyCommand {
    /// The built-in studies, one line each.
    List,
    /// Print a built-in study's file (a starting point for your own).
    Show { name: String },
    /// The metrics plots, tables and --fail-if can name.
    Metrics,
    /// Run a study (built-in name or .toml file) into results/<study>-<time>/ and write its report.
    Run(StudyRunArgs),
}

#[derive(Args, Debug)]
pub struct StudyRunArgs {
    /// A built-in study name (see `study list`) or a study file.
    pub study: String,
    /// Runs of every point (repetitions are interleaved round by round).
    #[arg(long)]
    pub repeat: Option<u32>,
    /// Shuffle the points within each round (spreads drift over all points).
    #[arg(long)]
    pub shuffle: bool,
    /// Continue a stopped study in this folder; points with a stored result are skipped.
    #[arg(long, value_name = "DIR")]
    pub resume: Option<PathBuf>,
    /// Folder under which the study's results folder is made.
    #[arg(long, value_name = "DIR", default_value = "results")]
    pub out: PathBuf,
    /// Override every point's measurement window.
    #[arg(short = 'd', long, value_parser = crate::units::parse_duration)]
    pub duration: Option<Duration>,
    /// Override every point's warm-up.
    #[arg(long, value_parser = crate::units::parse_duration)]
    pub warmup: Option<Duration>,
    /// Override every point's interval.
    #[arg(short = 'i', long, value_parser = crate::units::parse_duration)]
    pub interval: Option<Duration>,
    /// Override every point's iterations (N or MIN..MAX).
    #[arg(long, value_name = "MIN..MAX", value_parser = Iterations::parse)]
    pub iterations: Option<Iterations>,
    /// Do not write report.html/report.md/landscape.csv at the end.
    #[arg(long)]
    pub no_report: bool,
    /// Change any key of the study file: lab.rate=10gbit, test.duration=5s,
    /// 'sweep.flows=[1,4]' (a bare word is a string; repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Remove a key of the study file, e.g. an axis: sweep.rtt (repeatable).
    #[arg(long = "unset", value_name = "KEY")]
    pub unset: Vec<String>,
    /// Run a lab study's points where --agent/--hosts point, without its
    /// lab: its [lab], the axes only a lab turns (rtt, lab.*, firewall.*)
    /// and the plots over them are dropped.
    #[arg(long)]
    pub no_lab: bool,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// No progress lines.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Record the study in this history store ("off": not at all; default: $LINERATE_HISTORY, else ~/.local/share/linerate/history.db).
    #[arg(long, value_name = "FILE|off")]
    pub history: Option<PathBuf>,
    /// Internal: run only the TLS points with crypto hardware on (with the
    /// clear ones) or off (a study with both runs itself again, masked).
    #[arg(long, hide = true, value_parser = crate::model::options::Switch::parse)]
    pub crypto_pass: Option<crate::model::options::Switch>,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// A study results folder (results/<study>-<time>); several folders
    /// (the same study in other environments) make one report with a
    /// series per environment and an overview of ratios against the first.
    #[arg(required_unless_present = "series", num_args = 1.., value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Instead of folders: a series of the history (its key, or a prefix: `linerate history series`), each tracked figure drawn over time with its changes.
    #[arg(long, value_name = "KEY", conflicts_with_all = ["dirs", "label"])]
    pub series: Option<String>,
    /// With --series: the figures drawn (headline, all, or metrics, comma separated).
    #[arg(long, default_value = "headline", value_name = "WHAT", requires = "series", value_parser = crate::history::detect::Track::parse)]
    pub track: crate::history::detect::Track,
    /// With --series: the history store (default: $LINERATE_HISTORY, else ~/.local/share/linerate/history.db).
    #[arg(long, value_name = "FILE", requires = "series")]
    pub history: Option<PathBuf>,
    /// Several folders: their names in the report, comma separated (default: the folder names).
    #[arg(long, value_name = "A,B,...")]
    pub label: Option<String>,
    /// Several folders (or --series): where the report goes (default: a new folder beside the first; results/history-KEY).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The baseline results folder.
    pub a: PathBuf,
    /// The results folder to compare with the baseline.
    pub b: PathBuf,
    /// Metrics to compare (repeatable); default throughput, transactions, p99 and CPU cost.
    #[arg(long = "metric", value_name = "METRIC")]
    pub metrics: Vec<String>,
    /// Exit 4 when a change crosses this, e.g. 'throughput_bps<-5%' or 'latency_p99_us>+10%' (repeatable).
    #[arg(long = "fail-if", value_name = "METRIC<PCT%", value_parser = compare::parse_threshold)]
    pub fail_if: Vec<compare::Threshold>,
    /// Confidence level of the significance test, percent.
    #[arg(long, default_value_t = 95.0)]
    pub level: f64,
    /// Write the comparison as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

impl StudyRunArgs {
    fn overrides(&self) -> TestOptions {
        TestOptions {
            run: crate::model::options::RunOptions {
                duration: self
                    .duration
                    .map(|d| crate::model::options::Length::Secs(d.as_secs_f64())),
                warmup: self.warmup.map(|d| Secs(d.as_secs_f64())),
                interval: self.interval.map(|d| Secs(d.as_secs_f64())),
                iterations: self.iterations,
                ..Default::default()
            },
            ..Default::default()
        }
    }
}

pub fn study(args: StudyArgs) -> Result<()> {
    match args.command {
        StudyCommand::List => {
            println!(
                "# {:<26} {:>6}  {:<12} title (seed rows: docs/seeds.md)",
                "study", "points", "seed rows"
            );
            for b in builtin::BUILTIN {
                let s = builtin::get(b.name)
                    .expect("listed")
                    .map_err(|e| Error::Failed(e.to_string()))?;
                let points = sweep::expand(&s, &TestOptions::default())
                    .map(|p| p.len())
                    .unwrap_or(0);
                let rows = if b.rows.is_empty() {
                    "-".to_string()
                } else {
                    b.rows.join(",")
                };
                let was = if b.aliases.is_empty() {
                    String::new()
                } else {
                    format!(" (was {})", b.aliases.join(", "))
                };
                println!("{:<28} {points:>6}  {rows:<12} {}{was}", b.name, s.title);
            }
            Ok(())
        }
        StudyCommand::Show { name } => match builtin::find(&name) {
            Some(b) => {
                print!("{}", b.text);
                Ok(())
            }
            None => Err(usage(format!(
                "no built-in study named '{name}' (built in: {})",
                builtin::names().join(", ")
            ))),
        },
        StudyCommand::Metrics => {
            for m in metrics::all() {
                println!("{:<22} {}", m.key, m.axis_label());
            }
            Ok(())
        }
        StudyCommand::Run(a) => run(a).map(|_| ()),
    }
}

/// Runs a study and writes its report; returns the results folder.
pub fn run(a: StudyRunArgs) -> Result<PathBuf> {
    if a.resume.is_none() {
        super::check_dir(&a.out, "--out")?;
    }
    let changes = crate::study::overrides::Overrides {
        sets: a.set.clone(),
        unsets: a.unset.clone(),
        no_lab: a.no_lab,
    };
    if a.resume.is_some() && !changes.is_empty() {
        return Err(usage(
            "--resume runs the study stored in that folder as it was: --set, --unset and --no-lab apply to a new run",
        ));
    }
    let study = match &a.resume {
        // A resumed study runs the file stored with its results.
        Some(dir) => {
            let s = folder::load(dir)?.study;
            let named = builtin::resolve(&a.study)?;
            if named.name != s.name {
                return Err(usage(format!(
                    "{} holds study '{}', not '{}'",
                    dir.display(),
                    s.name,
                    named.name
                )));
            }
            s
        }
        None => {
            let (s, notes) = builtin::resolve_with(&a.study, &changes)?;
            if !a.quiet {
                for n in notes {
                    eprintln!("{n}");
                }
            }
            s
        }
    };
    check::study(&study)?;
    let opts = runner::RunOptions {
        repeat: a.repeat,
        shuffle: a.shuffle,
        resume: a.resume.clone(),
        out: a.out.clone(),
        overrides: a.overrides(),
        connect: a.connect.clone(),
        quiet: a.quiet,
        crypto_pass: None,
    };
    if a.repeat == Some(0) {
        return Err(usage("--repeat must be at least 1"));
    }
    // Crypto hardware is the process's (the libraries read the mask once):
    // TLS points with it off run in this study run again with the mask,
    // on the same folder, after the others.
    let points = crate::study::sweep::expand(&study, &opts.overrides)?;
    let off = points.iter().any(|p| {
        (p.spec.tls.is_some() || crate::workload::facts(p.spec.workload).crypto_alone)
            && !p.spec.crypto_hw
    });
    let masked = crate::measure::crypto::hw_masked();
    let mut opts = opts;
    opts.crypto_pass = Some(a.crypto_pass.map_or(!masked, |s| s.0));
    if masked && a.crypto_pass.is_none() {
        return Err(usage(
            "OPENSSL_ia32cap is set: unset it (a study masks the crypto extensions itself for its crypto_hw = false points)",
        ));
    }
    let outcome = runner::run(&study, &opts)?;
    let outcome = if off && opts.crypto_pass == Some(true) && outcome.stopped.is_none() {
        // The masked pass: this command again on the same folder.
        let exe = std::env::current_exe()
            .map_err(|e| Error::Failed(format!("cannot find linerate: {e}")))?;
        let mut args: Vec<std::ffi::OsString> = vec![
            "study".into(),
            "run".into(),
            a.study.clone().into(),
            "--resume".into(),
            outcome.dir.clone().into(),
            "--crypto-pass".into(),
            "off".into(),
            "--no-report".into(),
        ];
        if a.quiet {
            args.push("-q".into());
        }
        args.extend(a.connect.to_args());
        if !a.quiet {
            eprintln!("crypto hardware off: the study's masked points (OPENSSL_ia32cap)");
        }
        let status = std::process::Command::new(exe)
            .args(&args)
            .env("OPENSSL_ia32cap", crate::measure::crypto::HW_OFF_MASK)
            .status()
            .map_err(|e| Error::Failed(format!("cannot run the masked pass: {e}")))?;
        let mut o = outcome;
        if !status.success() {
            o.stopped = Some(format!(
                "the pass with crypto hardware off ended with {status}"
            ));
        }
        o
    } else {
        outcome
    };
    if a.crypto_pass.is_none() {
        super::record_study(a.history.as_deref(), &outcome.dir);
    }
    if !a.no_report {
        let html = pipeline::write_all(&outcome.dir)?;
        if !a.quiet {
            eprintln!("report: {} (and report.md, landscape.csv)", html.display());
        }
    }
    match outcome.stopped {
        Some(why) => Err(runner::stopped_failure(&outcome.dir, &why)),
        None => Ok(outcome.dir),
    }
}

/// `report --series KEY`: a history series over time.
fn report_series(a: &ReportArgs, key: &str) -> Result<()> {
    let store = super::history::open(a.history.as_deref())?;
    let runs = store.runs(&crate::history::store::Filter {
        series: Some(key.into()),
        ..Default::default()
    })?;
    let mut keys: Vec<&str> = runs.iter().map(|r| r.series.as_str()).collect();
    keys.sort();
    keys.dedup();
    let series = match keys.as_slice() {
        [one] => one.to_string(),
        [] => {
            return Err(usage(format!(
                "no series {key}* in {} (see `linerate history series`)",
                store.path().display()
            )))
        }
        many => {
            return Err(usage(format!(
                "{key} names {} series ({}): give more of the key",
                many.len(),
                many.join(", ")
            )))
        }
    };
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("results").join(format!("history-{series}")));
    let html = crate::history::report::write(&store, &series, &a.track, &out)?;
    println!("{}", html.display());
    Ok(())
}

pub fn report(a: ReportArgs) -> Result<()> {
    if let Some(key) = &a.series {
        return report_series(&a, key);
    }
    if a.dirs.len() == 1 {
        if a.label.is_some() || a.out.is_some() {
            return Err(usage(
                "--label and --out apply to several folders (one report of several environments)",
            ));
        }
        let html = pipeline::write_all(&a.dirs[0])?;
        println!("{}", html.display());
        return Ok(());
    }
    let labels = crate::report::analysis::environments::labels(&a.dirs, a.label.as_deref())?;
    for d in &a.dirs {
        if !d.join("manifest.json").exists() {
            return Err(usage(format!(
                "{} is not a study results folder (no manifest.json)",
                d.display()
            )));
        }
    }
    let out = match &a.out {
        Some(o) => o.clone(),
        None => {
            let first = folder::load(&a.dirs[0])?;
            let parent = a.dirs[0].parent().unwrap_or(std::path::Path::new("."));
            folder::new_dir(parent, &format!("{}-environments", first.study.name))?
        }
    };
    if a.dirs.iter().any(|d| same_dir(d, &out)) {
        return Err(usage(format!(
            "--out {} is one of the folders reported: pick a new folder",
            out.display()
        )));
    }
    let html = pipeline::write_environments(&a.dirs, &labels, &out)?;
    println!("{}", html.display());
    Ok(())
}

fn same_dir(a: &std::path::Path, b: &std::path::Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

pub fn compare(a: CompareArgs) -> Result<()> {
    if let Some(p) = &a.json {
        super::check_file(p, "--json")?;
    }
    if !(50.0..100.0).contains(&a.level) {
        return Err(usage("--level must be between 50 and 100 (percent)"));
    }
    if let Some(m) = a.metrics.iter().find(|m| metrics::find(m).is_none()) {
        return Err(usage(format!(
            "--metric `{m}` is not a metric; metrics: {}",
            metrics::names()
        )));
    }
    let la = folder::load(&a.a)?;
    let lb = folder::load(&a.b)?;
    let (changes, unmatched) = compare::compare(
        &landscape::build(&la),
        &landscape::build(&lb),
        &a.metrics,
        a.level,
    );
    println!("A = {}\nB = {}\n", a.a.display(), a.b.display());
    println!(
        "{:<28} {:<20} {:>14} {:>14} {:>9} {:>8} {:>7}  verdict ({:.0}%)",
        "point", "metric", "A", "B", "change", "± CI", "p", a.level
    );
    for c in &changes {
        let m = metrics::find(&c.metric).expect("known");
        println!(
            "{:<28} {:<20} {:>14} {:>14} {:>+8.1}% {:>8} {:>7}  {}",
            c.point,
            c.metric,
            m.fmt(c.a),
            m.fmt(c.b),
            c.change_pct,
            c.ci_pct
                .map(|v| format!("{v:.1}%"))
                .unwrap_or_else(|| "-".into()),
            c.p_value
                .map(|v| format!("{v:.3}"))
                .unwrap_or_else(|| "-".into()),
            c.verdict.word()
        );
    }
    for u in &unmatched {
        println!("not compared: {u}");
    }
    let crossed: Vec<String> = a
        .fail_if
        .iter()
        .flat_map(|t| {
            changes.iter().filter(|c| t.crossed(c)).map(move |c| {
                format!(
                    "{} {} changed {:+.1}% (limit {}{}%)",
                    c.point,
                    c.metric,
                    c.change_pct,
                    if t.below { "<" } else { ">" },
                    t.pct
                )
            })
        })
        .collect();
    if let Some(path) = &a.json {
        write_json(
            path,
            &serde_json::json!({"a": a.a, "b": a.b, "level_pct": a.level, "changes": changes, "unmatched": unmatched, "crossed": crossed}),
        )?;
    }
    if changes.is_empty() {
        return Err(Error::Failed(
            "the two folders share no point with a common metric".to_string(),
        ));
    }
    if !crossed.is_empty() {
        return Err(Error::Threshold(format!(
            "threshold crossed: {}",
            crossed.join("; ")
        )));
    }
    Ok(())
}
