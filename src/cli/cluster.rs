//! `linerate cluster up|status|down HOSTS.toml`: agents on many hosts,
//! started and stopped over OpenSSH (see hostops::cluster).

use clap::{Args, Subcommand};
use std::io::Write;
use std::path::PathBuf;

use crate::controller::conn::probe_agent;
use crate::error::{Error, Result};
use crate::hostops::cluster::{self, HostStatus};

#[derive(Args, Debug)]
pub struct ClusterArgs {
    #[command(subcommand)]
    pub command: ClusterCommand,
}

#[derive(Subcommand, Debug)]
pub enum ClusterCommand {
    /// Start an agent on every host over ssh (copying this binary where it differs) and check that all answer.
    Up(UpArgs),
    /// Which agents answer: version, clock offset, load (exit 1 if any does not).
    Status(StatusArgs),
    /// Stop the agents `cluster up` started (agents started by hand are left alone).
    Down(DownArgs),
}

#[derive(Args, Debug)]
pub struct UpArgs {
    /// The hosts file (see docs/hosts.md: "Many hosts").
    pub hosts: PathBuf,
    /// Print what was done as JSON on standard output (steps go to standard error).
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The hosts file.
    pub hosts: PathBuf,
    /// Print the hosts as JSON.
    #[arg(long)]
    pub json: bool,
    /// Token for agents neither started by `cluster up` nor given a token_file (or set LINERATE_TOKEN).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct DownArgs {
    /// The hosts file.
    pub hosts: PathBuf,
    /// Print what was done as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn cluster(args: ClusterArgs) -> Result<()> {
    match args.command {
        ClusterCommand::Up(a) => up(a),
        ClusterCommand::Status(a) => status(a),
        ClusterCommand::Down(a) => down(a),
    }
}

fn json_line(value: &impl serde::Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| Error::Failed(e.to_string()))?;
    println!("{text}");
    Ok(())
}

fn up(a: UpArgs) -> Result<()> {
    let json = a.json;
    let say = move |line: &str| {
        if json {
            eprintln!("{line}");
        } else {
            // Lines from several hosts' threads: one write each.
            let _ = writeln!(std::io::stdout().lock(), "{line}");
        }
    };
    // hostops sits below the controller and takes its probe's error as
    // text (`cluster::Prober`).
    let probe = |c, t: &str| probe_agent(c, t).map_err(|e| e.to_string());
    let hosts = cluster::up(&a.hosts, &say, &probe)?;
    let state = cluster::state_path(&a.hosts)?;
    if json {
        return json_line(&hosts);
    }
    println!(
        "cluster up: {} agent{} answer; tokens and pids in {}",
        hosts.len(),
        if hosts.len() == 1 { "" } else { "s" },
        state.display()
    );
    Ok(())
}

fn status(a: StatusArgs) -> Result<()> {
    let fallback = match (&a.token_file, std::env::var("LINERATE_TOKEN")) {
        (Some(_), _) => Some(crate::controller::target::token(&a.token_file)?),
        (None, Ok(t)) if !t.trim().is_empty() => Some(t.trim().to_string()),
        _ => None,
    };
    let probe = |c, t: &str| probe_agent(c, t).map_err(|e| e.to_string());
    let hosts = cluster::status(&a.hosts, fallback.as_deref(), &probe)?;
    if a.json {
        json_line(&hosts)?;
    } else {
        print!("{}", table(&hosts));
    }
    let down: Vec<&str> = hosts
        .iter()
        .filter(|h| !h.answers)
        .map(|h| h.name.as_str())
        .collect();
    if down.is_empty() {
        Ok(())
    } else {
        Err(Error::Failed(format!(
            "{} of {} agents do not answer: {}",
            down.len(),
            hosts.len(),
            down.join(", ")
        )))
    }
}

/// The status table: one row per host, the reason last (it is long).
fn table(hosts: &[HostStatus]) -> String {
    let head = [
        "host",
        "control",
        "version",
        "clock offset",
        "rtt",
        "load 1/5/15 min",
        "tests",
        "started by",
        "answers",
    ];
    let rows: Vec<Vec<String>> = hosts
        .iter()
        .map(|h| {
            let p = h.probe.as_ref();
            let dash = || "-".to_string();
            vec![
                h.name.clone(),
                h.control.to_string(),
                p.map(|p| p.software.clone()).unwrap_or_else(dash),
                p.map(|p| cluster::offset_text(p.offset_ns, p.uncertainty_ns))
                    .unwrap_or_else(dash),
                p.map(|p| format!("{:.3} ms", p.rtt_ns as f64 / 1e6))
                    .unwrap_or_else(dash),
                p.map(|p| format!("{:.2} {:.2} {:.2}", p.load[0], p.load[1], p.load[2]))
                    .unwrap_or_else(dash),
                p.map(|p| p.tests_running.to_string()).unwrap_or_else(dash),
                match h.pid {
                    Some(pid) => format!("{} (pid {pid})", h.started_by),
                    None => h.started_by.clone(),
                },
                match &h.error {
                    None => "yes".into(),
                    Some(e) => format!("no: {e}"),
                },
            ]
        })
        .collect();
    let mut width: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| -> String {
        let last = cells.len() - 1;
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(&width).enumerate() {
            if i == last {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}  "));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(head.iter().map(|s| s.to_string()).collect());
    for r in rows {
        out.push_str(&line(r));
    }
    out
}

fn down(a: DownArgs) -> Result<()> {
    let hosts = cluster::down(&a.hosts)?;
    if a.json {
        json_line(&hosts)?;
    } else {
        for h in &hosts {
            match h.pid {
                Some(pid) if h.ok => println!("{}: {} (pid {pid})", h.name, h.outcome),
                _ if h.ok => println!("{}: {}", h.name, h.outcome),
                _ => eprintln!("{}", h.outcome),
            }
        }
    }
    let failed: Vec<&str> = hosts
        .iter()
        .filter(|h| !h.ok)
        .map(|h| h.name.as_str())
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Error::Failed(format!(
            "could not stop the agents of {} (they stay in the state file; run `linerate cluster down {}` again)",
            failed.join(", "),
            a.hosts.display()
        )))
    }
}
