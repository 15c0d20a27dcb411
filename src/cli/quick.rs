//! `linerate quick` (and `linerate` alone), the default main job: the built-in `quick` study (studies/quick.toml:
//! stream 1 and 4 flows, rr 1/1 and 200/1000, crr 64/8192) against one
//! embedded local agent, printed as one table and written as a results
//! folder with its HTML report.

use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

use super::write_json;
use crate::controller::target::ConnectArgs;
use crate::error::Result;
use crate::model::options::{Secs, TestOptions};
use crate::model::result::TestResult;
use crate::report::pipeline;
use crate::report::render::human;
use crate::study::{builtin, folder, runner};
use crate::units;

#[derive(Args, Debug, Default)]
pub struct QuickArgs {
    /// Window of each test (the study file says 8 s).
    #[arg(short = 'd', long, value_parser = units::parse_duration)]
    pub duration: Option<Duration>,
    /// Warm-up before each test's window (the study file says 1 s).
    #[arg(long, value_parser = units::parse_duration)]
    pub warmup: Option<Duration>,
    /// Also write all results as one JSON document.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Folder under which the results folder (with report.html) is made.
    #[arg(long, value_name = "DIR", default_value = "results")]
    pub out: PathBuf,
    /// No progress lines (the table and the report path are still printed).
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Record the study in this history store ("off": not at all; default: $LINERATE_HISTORY, else ~/.local/share/linerate/history.db).
    #[arg(long, value_name = "FILE|off")]
    pub history: Option<PathBuf>,
}

pub fn run(args: QuickArgs) -> Result<()> {
    if let Some(p) = &args.json {
        super::check_file(p, "--json")?;
    }
    super::check_dir(&args.out, "--out")?;
    let study = builtin::get("quick").expect("quick is built in")?;
    let host = crate::measure::host::collect();
    let points = crate::study::sweep::expand(&study, &TestOptions::default())?;
    let window = args
        .duration
        .map(|d| d.as_secs_f64())
        .unwrap_or(points[0].spec.duration_s);
    println!(
        "linerate quick study on loopback: {} tests of {window:.0} s; {} ({} CPUs), kernel {}",
        points.len(),
        host.cpu_model,
        host.cpus,
        host.kernel
    );
    println!("cpu = process CPU of each end as % of all cores; µs/KB and µs/tx = that CPU per KiB moved and per transaction\n");
    let opts = runner::RunOptions {
        crypto_pass: None,
        repeat: None,
        shuffle: false,
        resume: None,
        out: args.out.clone(),
        overrides: TestOptions {
            run: crate::model::options::RunOptions {
                duration: args
                    .duration
                    .map(|d| crate::model::options::Length::Secs(d.as_secs_f64())),
                warmup: args.warmup.map(|d| Secs(d.as_secs_f64())),
                ..Default::default()
            },
            ..Default::default()
        },
        connect: ConnectArgs::default(),
        quiet: args.quiet,
    };
    let outcome = runner::run(&study, &opts)?;
    super::record_study(args.history.as_deref(), &outcome.dir);
    let loaded = folder::load(&outcome.dir)?;
    let results: Vec<(String, TestResult)> = loaded
        .results
        .iter()
        .map(|(run, r)| {
            let label = loaded
                .manifest
                .point(&run.point)
                .map(|p| p.label())
                .unwrap_or_else(|| run.point.clone());
            (label, r.clone())
        })
        .collect();
    print!("{}", human::quick_table(&results));
    let html = pipeline::write_all(&outcome.dir)?;
    println!("\nreport: {}", html.display());
    if let Some(path) = &args.json {
        let doc = serde_json::json!({
            "study": "quick",
            "folder": outcome.dir,
            "results": results.iter().map(|(l, r)| serde_json::json!({"label": l, "result": r})).collect::<Vec<_>>(),
        });
        write_json(path, &doc)?;
    }
    match outcome.stopped {
        Some(why) => Err(runner::stopped_failure(&outcome.dir, &why)),
        None => Ok(()),
    }
}
