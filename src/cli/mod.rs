//! The roof: clap commands, dispatch, and the only place where errors turn
//! into exit codes and messages. Nothing in the library imports it.
//! Exit codes: 0 ok; 1 failure (one-line cause on stderr); 2 bad usage;
//! 3 partial results (the test ended early; what was measured is kept);
//! 4 a `compare --fail-if` threshold crossed.

use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};

use crate::error::Error;

pub mod cluster;
pub mod crypto;
pub mod docs;
pub mod history;
pub mod k8s;
pub mod lab;
pub mod quick;
pub mod run;
pub mod serve;
pub mod study;
pub mod watch;

pub const EXIT_FAIL: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_PARTIAL: i32 = 3;
pub const EXIT_THRESHOLD: i32 = 4;

#[derive(Parser, Debug)]
#[command(name = "linerate", version, about = "A network performance lab in one binary: TCP, TLS and UDP streams, request/response and connection rates, memcached load, emulated WANs and many hosts, measured on both ends. `linerate COMMAND --help` lists a command's options.", long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

// Parsed once per process: the size difference between variants is moot.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run one test against an agent (a local one is started when --agent is not given); `run mix` runs several groups on one window.
    Run(run::RunArgs),
    /// Run the agent: serve tests for controllers.
    Serve(serve::ServeArgs),
    /// The default quick study on loopback (also what `linerate` alone runs).
    Quick(quick::QuickArgs),
    /// Studies: sweeps of tests with a report (list, show, metrics, run).
    Study(study::StudyArgs),
    /// Write report.html, report.md and landscape.csv of a results folder again (runs nothing).
    Report(study::ReportArgs),
    /// Compare two results folders point by point, with significance (exit 4 on --fail-if).
    Compare(study::CompareArgs),
    /// Per-core cipher speed (64 B to 16 KiB records) with the TLS backends' libraries, and the CPU's crypto features.
    Crypto(crypto::CryptoArgs),
    /// Emulated networks: client, router and server namespaces with a WAN emulator (root).
    Lab(lab::LabArgs),
    /// Agents on many hosts (a hosts file): start them over ssh, check them, stop them.
    Cluster(cluster::ClusterArgs),
    /// Agents as pods on a Kubernetes cluster (a kubeconfig): start them, write their hosts file, run on them, delete them.
    K8s(k8s::K8sArgs),
    /// The history store: every run and study as it finished, listed and filtered; import results folders.
    History(history::HistoryArgs),
    /// Run a command on a schedule (--every 1h), record each run and report when a figure changes.
    Watch(watch::WatchArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(docs::CompletionsArgs),
    /// Write a man page per command and subcommand (linerate-run.1, ...).
    Man(docs::ManArgs),
}

/// Writes `value` as pretty JSON to `path` ("-": standard output).
pub fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<(), Error> {
    let text = serde_json::to_string_pretty(value).map_err(|e| Error::Failed(e.to_string()))?;
    if is_stdout(path) {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        return writeln!(out, "{text}")
            .and_then(|_| out.flush())
            .map_err(|e| Error::Failed(format!("cannot write the JSON to standard output: {e}")));
    }
    std::fs::write(path, text + "\n")
        .map_err(|e| Error::Failed(format!("cannot write {}: {e}", path.display())))
}

/// Writes `text` to `path` ("-": standard output), for `flag`.
pub fn write_text(path: &Path, text: &str, flag: &str) -> Result<(), Error> {
    if is_stdout(path) {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        return out
            .write_all(text.as_bytes())
            .and_then(|_| out.flush())
            .map_err(|e| Error::Failed(format!("cannot write {flag} to standard output: {e}")));
    }
    // A temporary name, then a rename: a reader that polls the file (the
    // textfile collector of node_exporter, under a watch) never sees half.
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, text)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            Error::Failed(format!("{flag}: cannot write {}: {e}", path.display()))
        })
}

/// Records a finished run or study in the history store (`--history`
/// FILE|off, else the default store). The measurement stands whatever
/// happens here: a store that cannot take it is a warning, and the run
/// is spooled beside it for the next process.
pub fn record_history(flag: Option<&Path>, entry: impl FnOnce() -> crate::history::Entry) {
    let Some(path) = crate::history::store_path(flag) else {
        return;
    };
    if let Err(warning) = crate::history::record(&path, entry()) {
        eprintln!("warning: {warning}");
    }
}

/// Records a study's results folder (see `record_history`).
pub fn record_study(flag: Option<&Path>, dir: &Path) {
    if crate::history::store_path(flag).is_none() {
        return;
    }
    match crate::study::folder::load(dir) {
        Ok(loaded) => record_history(flag, || {
            let mut e = crate::history::entry::of_study(&loaded);
            let abs = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.into());
            e.results = Some(abs.display().to_string());
            e
        }),
        Err(e) => eprintln!("warning: not recorded in the history: {e}"),
    }
}

/// `--json -`: the document goes to standard output.
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Checks, before any traffic, that the file `path` given with `flag` can
/// be written: a run must not measure for minutes and then find it cannot
/// keep its result. A file that did not exist is not left behind.
pub fn check_file(path: &Path, flag: &str) -> Result<(), Error> {
    if is_stdout(path) {
        return Ok(());
    }
    if path.is_dir() {
        return Err(Error::Usage(format!(
            "{flag} {}: that is a folder; give a file name",
            path.display()
        )));
    }
    let existed = path.exists();
    match std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
    {
        Ok(_) => {
            if !existed {
                let _ = std::fs::remove_file(path);
            }
            Ok(())
        }
        Err(e) => Err(Error::Usage(format!(
            "{flag} {}: cannot write there: {e}{}",
            path.display(),
            missing_parent(path)
        ))),
    }
}

/// Checks, before any traffic, that results can be written under the
/// folder `dir` (made if missing).
pub fn check_dir(dir: &Path, flag: &str) -> Result<(), Error> {
    let probe = dir.join(format!(".linerate-write-check-{}", std::process::id()));
    std::fs::create_dir_all(dir)
        .and_then(|_| std::fs::write(&probe, b""))
        .and_then(|_| std::fs::remove_file(&probe))
        .map_err(|e| {
            Error::Usage(format!(
                "{flag} {}: cannot write there: {e}{}",
                dir.display(),
                missing_parent(dir)
            ))
        })
}

/// " (the folder X does not exist)" when that is why a path is unwritable.
fn missing_parent(path: &Path) -> String {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() && !p.exists() => {
            format!(" (the folder {} does not exist)", p.display())
        }
        _ => String::new(),
    }
}

/// The exit code of an error.
pub fn exit_code(e: &Error) -> i32 {
    match e {
        Error::Usage(_) => EXIT_USAGE,
        Error::Failed(_) => EXIT_FAIL,
        Error::Partial(_) => EXIT_PARTIAL,
        Error::Threshold(_) => EXIT_THRESHOLD,
    }
}

/// Entry point for main: returns the process exit code.
pub fn main() -> i32 {
    // A closed stdout (`| head`) must not turn into a panic.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    crate::engine::limits::raise_nofile();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    let help = help_for(&cli.command);
    let outcome = match cli.command {
        Some(Command::Run(a)) => run::run(a),
        Some(Command::Serve(a)) => serve::serve(a),
        Some(Command::Quick(a)) => quick::run(a),
        Some(Command::Study(a)) => study::study(a),
        Some(Command::Report(a)) => study::report(a),
        Some(Command::Compare(a)) => study::compare(a),
        Some(Command::Crypto(a)) => crypto::crypto(a),
        Some(Command::Lab(a)) => lab::lab(a),
        Some(Command::Cluster(a)) => cluster::cluster(a),
        Some(Command::K8s(a)) => k8s::k8s(a),
        Some(Command::History(a)) => history::history(a),
        Some(Command::Watch(a)) => watch::watch(a),
        Some(Command::Completions(a)) => docs::completions(a),
        Some(Command::Man(a)) => docs::man(a),
        None => quick::run(quick::QuickArgs {
            out: PathBuf::from("results"),
            ..Default::default()
        }),
    };
    match outcome {
        Ok(()) => 0,
        // The masked run said why already (`rerun_masked`).
        Err(e) if e.to_string().is_empty() => exit_code(&e),
        Err(e) => {
            let hint = if matches!(e, Error::Usage(_)) {
                format!(" (see {help})")
            } else {
                String::new()
            };
            eprintln!("linerate: {e}{hint}");
            exit_code(&e)
        }
    }
}

/// The help page of the command that ran: its options are there, not on
/// `linerate --help`.
fn help_for(command: &Option<Command>) -> String {
    // The subcommand's words as typed: `lab up`, `study run`, `run`.
    let words: Vec<String> = std::env::args()
        .skip(1)
        .take_while(|a| !a.starts_with('-'))
        .take(if matches!(command, Some(Command::Run(_))) {
            1
        } else {
            2
        })
        .collect();
    match command {
        None => "linerate --help".into(),
        Some(Command::Study(_)) if words.get(1).is_some_and(|w| w == "run") => {
            "linerate study run --help; study files: docs/studies.md".into()
        }
        _ => format!("linerate {} --help", words.join(" ")),
    }
}

/// Runs this same command again with the CPU's crypto extensions masked
/// (`--hw off`, `--crypto-hw off`): aws-lc and OpenSSL read OPENSSL_ia32cap
/// once, when they first look at the CPU, so the mask must be in the
/// environment before the process starts. A local agent inherits it.
pub fn rerun_masked() -> crate::error::Result<()> {
    use crate::error::Error;
    // Off x86 the mask is ignored: refused rather than mislabelled.
    if let Some(why) = crate::model::cryptohw::mask_refused_here() {
        return Err(Error::Usage(why));
    }
    let exe =
        std::env::current_exe().map_err(|e| Error::Failed(format!("cannot find linerate: {e}")))?;
    let status = std::process::Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env("OPENSSL_ia32cap", crate::measure::crypto::HW_OFF_MASK)
        .status()
        .map_err(|e| Error::Failed(format!("cannot run linerate again with the mask: {e}")))?;
    match status.code() {
        Some(0) => Ok(()),
        // The child said why on stderr; pass its exit code on.
        Some(2) => Err(Error::Usage(String::new())),
        Some(3) => Err(Error::Partial(String::new())),
        Some(4) => Err(Error::Threshold(String::new())),
        _ => Err(Error::Failed(String::new())),
    }
}
