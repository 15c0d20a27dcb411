//! exec's options: the command, a server command, linerate's own sshd.

use super::super::exec::ExecSpec;
use super::super::kind::KindFacts;
use clap::Args;
use serde::{Deserialize, Serialize};

/// Flattened into `TestOptions` (keys and flags as written here).
#[derive(Args, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[command(next_help_heading = "Programs (exec)")]
pub struct ExecOptions {
    /// exec: also start linerate's own sshd in the server namespace ({ssh_config} names `Host server` for ssh/scp -F).
    #[arg(long, action = clap::ArgAction::SetTrue)]
    pub sshd: Option<bool>,
    /// exec: a shell command run in the server namespace for the test's duration.
    #[arg(long = "server-cmd", value_name = "COMMAND")]
    pub server_command: Option<String>,
    /// exec: the command and its arguments, after `--` ({server}, {ssh_config}, {file} are replaced).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Option<Vec<String>>,
}

impl ExecOptions {
    /// A program's spec (the command, a server command run by `sh -c`,
    /// an sshd when asked or when the kind needs one); None for flows.
    pub fn spec(&self, facts: &KindFacts) -> Option<ExecSpec> {
        facts.program.then(|| ExecSpec {
            command: self.command.clone().unwrap_or_default(),
            server_command: self
                .server_command
                .as_ref()
                .map(|c| vec!["sh".into(), "-c".into(), c.clone()]),
            sshd: self.sshd.unwrap_or(false) || facts.sshd,
        })
    }

    /// Whether any of these is set (they apply to programs only).
    pub fn is_set(&self) -> bool {
        self.sshd == Some(true)
            || self.server_command.is_some()
            || self.command.as_ref().is_some_and(|c| !c.is_empty())
    }
}
