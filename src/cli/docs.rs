//! Shell completions and man pages, generated from the command-line
//! definitions themselves (clap_complete, clap_mangen), so they cannot
//! fall behind a flag: `linerate completions SHELL` prints a script,
//! `linerate man --out DIR` writes a page per command and subcommand.

use clap::{Args, CommandFactory};
use std::path::PathBuf;

use crate::error::{Error, Result};

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Args, Debug)]
pub struct ManArgs {
    /// Where to write the pages (linerate.1, linerate-run.1, linerate-lab-up.1, ...); made if missing.
    #[arg(long, value_name = "DIR", default_value = "man")]
    pub out: PathBuf,
}

/// Prints the completion script of `a.shell` on standard output.
pub fn completions(a: CompletionsArgs) -> Result<()> {
    let mut cmd = super::Cli::command();
    clap_complete::generate(a.shell, &mut cmd, "linerate", &mut std::io::stdout());
    Ok(())
}

/// Writes a man page per command into `a.out` and says how many.
pub fn man(a: ManArgs) -> Result<()> {
    super::check_dir(&a.out, "--out")?;
    let cmd = super::Cli::command();
    clap_mangen::generate_to(cmd, &a.out)
        .map_err(|e| Error::Failed(format!("cannot write the man pages: {e}")))?;
    let n = std::fs::read_dir(&a.out)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.path().extension().is_some_and(|x| x == "1"))
                .count()
        })
        .unwrap_or(0);
    println!(
        "{n} man pages in {} (read one: man -l {}/linerate-run.1)",
        a.out.display(),
        a.out.display()
    );
    Ok(())
}
