//! `linerate run WORKLOAD [options]`: one test through the same pipeline as
//! a study's point (`controller::search::run_or_search`), printed for people.

use clap::Args;
use std::io::Write;
use std::path::PathBuf;

use super::write_json;
use crate::controller::point::Point;
use crate::controller::target::{self, ConnectArgs};
use crate::error::{usage, Error, Result};
use crate::model::options::TestOptions;
use crate::model::spec::{TestSpec, Workload};
use crate::report::render::human;
use crate::units;
use crate::workload::group::Group;

#[derive(Args, Debug)]
pub struct RunArgs {
    /// What to run: a test kind, by its name (the list below).
    #[arg(value_parser = crate::workload::parser())]
    pub workload: Workload,
    /// mix: the groups, each quoted as `linerate run` takes it ('stream --flows 4' 'rr --rate 100 --request 64 --response 64'); the options after them apply to every group.
    #[arg(value_name = "GROUP")]
    pub groups: Vec<String>,
    #[command(flatten)]
    pub test: TestOptions,
    /// With --tls, skip the clear-text run of the same test that measures what TLS costs.
    #[arg(help_heading = "Output", long)]
    pub no_baseline: bool,
    /// Write the full result (docs/result-schema.md) to this file ("-": standard output, the table then goes to standard error).
    #[arg(help_heading = "Output", long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Print one JSON object per interval on stdout as the test runs.
    #[arg(help_heading = "Output", long)]
    pub json_stream: bool,
    /// Write the result as OpenMetrics text to this file ("-": standard output, the table then goes to standard error): every study metric it has as a gauge in base units, the latency as a histogram; labels workload and lab (docs/output.md).
    #[arg(help_heading = "Output", long, value_name = "FILE")]
    pub metrics: Option<PathBuf>,
    /// No progress line.
    #[arg(help_heading = "Output", short = 'q', long)]
    pub quiet: bool,
    /// Record the run in this history store ("off": not at all; default: $LINERATE_HISTORY, else ~/.local/share/linerate/history.db).
    #[arg(help_heading = "Output", long, value_name = "FILE|off")]
    pub history: Option<PathBuf>,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

impl RunArgs {
    /// The spec these flags run, checked as the agent will check it, and
    /// a composite's groups (each checked as the agent will check it, then
    /// together: `group::check`); none for another kind.
    pub fn spec_and_groups(&self) -> Result<(TestSpec, Vec<Group>)> {
        let composite = crate::workload::kind_of(self.workload).composite();
        let takes = composite.is_some_and(|c| c.takes_groups());
        if let (Some(g), false) = (self.groups.first(), takes) {
            return Err(usage(format!(
                "unexpected argument '{g}': only `linerate run mix` takes groups"
            )));
        }
        let Some(c) = composite else {
            return Ok((self.spec_of(self.test.clone(), self.workload)?, Vec::new()));
        };
        let mut o = self.test.clone();
        o.run.ipv6 = Some(self.connect.ipv6);
        if takes {
            o.run.groups = Some(self.groups.clone());
        } else if let Some(flag) = o
            .tls
            .set_without_tls(&crate::workload::facts(self.workload))
        {
            // A composite that builds its groups takes the options as its own.
            return Err(usage(format!("{flag} needs --tls")));
        }
        let local = self.connect.agent.is_none() && self.connect.hosts.is_none();
        let groups = c.groups(&o, local, &mut |g: TestOptions| {
            let w = g.run.workload.unwrap_or(self.workload);
            self.spec_of(g, w).map_err(|e| e.to_string())
        })?;
        Ok((c.spec(&o, local, &groups)?, groups))
    }

    fn spec_of(&self, mut o: TestOptions, workload: Workload) -> Result<TestSpec> {
        // `--transport quic`: the workload's QUIC twin is what runs.
        let workload = crate::workload::resolve(workload, o.socket.transport.take())?;
        o.run.workload = Some(workload);
        o.run.ipv6 = Some(self.connect.ipv6);
        if let Some(flag) = o.tls.set_without_tls(&crate::workload::facts(workload)) {
            return Err(usage(format!("{flag} needs --tls")));
        }
        if let Some(flag) = crate::workload::kind::not_taken(&o, crate::workload::kind_of(workload))
        {
            return Err(usage(format!(
                "{flag} does not apply to {}: it would be ignored",
                workload.name()
            )));
        }
        let local = self.connect.agent.is_none() && self.connect.hosts.is_none();
        let spec = crate::workload::build(&o, local)?;
        crate::control::check(&spec)?;
        let allowed = crate::measure::placement::allowed_cpus();
        if let Some(c) = spec.cpus.iter().flatten().find(|c| !allowed.contains(c)) {
            return Err(usage(format!(
                "--cpus names CPU {c}, but this process may use CPUs {}",
                units::fmt_cpu_list(&allowed)
            )));
        }
        Ok(spec)
    }
}

pub fn run(args: RunArgs) -> Result<()> {
    let (spec, groups) = args.spec_and_groups()?;
    if args.connect.perf_server.is_some() {
        // Another tool's perf server runs only what speaks its protocol.
        match groups.is_empty() {
            true => crate::workload::perf_client(spec.workload)?,
            false => {
                for g in &groups {
                    crate::workload::perf_client(g.spec.workload)?;
                }
            }
        }
    }
    let json_out = args.json.as_deref().is_some_and(super::is_stdout);
    if json_out && args.json_stream {
        return Err(usage(
            "--json - and --json-stream both write to standard output: pick one (or give --json a file)",
        ));
    }
    let metrics_out = args.metrics.as_deref().is_some_and(super::is_stdout);
    if metrics_out && (json_out || args.json_stream) {
        return Err(usage(
            "--metrics - and --json - (or --json-stream) both write to standard output: give one of them a file",
        ));
    }
    if let Some(path) = &args.json {
        super::check_file(path, "--json")?;
    }
    if let Some(path) = &args.metrics {
        super::check_file(path, "--metrics")?;
    }
    let masked = crate::measure::crypto::hw_masked();
    if !spec.crypto_hw && !masked {
        return super::rerun_masked();
    }
    if spec.crypto_hw && masked {
        return Err(usage(
            "OPENSSL_ia32cap masks the crypto extensions in this environment, but the test asks for them (--crypto-hw on): unset it",
        ));
    }
    // The first Ctrl-C ends the test now and keeps what it measured (the
    // summary, the JSON, exit 3); a second one ends the process.
    crate::engine::signals::on_signals(&[libc::SIGINT], true);
    crate::engine::signals::on_terminate();
    crate::engine::signals::interrupt_ends_test();
    let kind = crate::workload::kind_of(spec.workload);
    let needs = kind.needs();
    let c = &args.connect;
    let fleet = kind.clients().is_some();
    if !needs.agent
        && !needs.lab
        && (c.agent.is_some() || (c.hosts.is_some() && !fleet) || c.perf_server.is_some())
    {
        return Err(usage(format!(
            "{} runs in this process (it measures this host, or is a client with a server of its own or the one --url names): drop {}--perf-server",
            spec.workload.name(),
            if fleet { "--agent and " } else { "--agent, --hosts and " }
        )));
    }
    let mut target = target::open_for(&args.connect, kind)?;
    let lab = target.lab.clone();
    let point = Point {
        spec: &spec,
        confidence: args.test.confidence(),
        command: std::env::args().collect(),
        label: spec.workload.name().into(),
        quiet: args.quiet,
        json_stream: args.json_stream,
        tls_baseline: !args.no_baseline,
        groups: &groups,
    };
    // A search's steps, each as it finishes (the table at the end has them all).
    let quiet = args.quiet;
    let mut on_step = |s: &crate::model::search::SearchPoint| {
        if !quiet {
            eprintln!("{}", s.line());
        }
    };
    let result =
        crate::controller::search::run_or_search(&mut target, lab.as_ref(), &point, &mut on_step);
    target.close();
    let result = result?;
    if result.nothing_measured().is_none() {
        let json = args.json.as_ref().filter(|p| !super::is_stdout(p));
        let file = json.map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()));
        super::record_history(args.history.as_deref(), || {
            crate::history::entry::of_result(&result, file.map(|p| p.display().to_string()))
        });
    }
    if let Some(path) = &args.json {
        write_json(path, &result)?;
    }
    if let Some(path) = &args.metrics {
        super::write_text(
            path,
            &crate::report::render::openmetrics::render(&result),
            "--metrics",
        )?;
    }
    let text = human::render(&result, true);
    if args.json_stream {
        let line = serde_json::json!({"type": "summary", "summary": result.summary});
        println!("{line}");
        eprint!("{text}");
    } else if json_out || metrics_out {
        // Standard output carries the JSON (or the metrics) alone.
        eprint!("{text}");
    } else {
        print!("{text}");
    }
    let _ = std::io::stdout().flush();
    if let Some(why) = result.nothing_measured() {
        if crate::engine::signals::test_interrupted() {
            return Err(Error::Partial(format!(
                "{} before anything was measured: {why}",
                crate::engine::signals::stopped_by()
            )));
        }
        return Err(Error::Failed(why));
    }
    // A program's (a kind that runs in a lab) exit status decides: its
    // error is a failure, not partial.
    if let Some(e) = result.iterations.first().and_then(|i| i.error.clone()) {
        if needs.lab {
            return Err(Error::Failed(e));
        }
    }
    if !result.summary.status.is_ok() {
        let why = result
            .iterations
            .iter()
            .find_map(|i| i.error.clone())
            .unwrap_or_else(|| "test ended early".into());
        return Err(Error::Partial(why));
    }
    Ok(())
}
