//! Programs that are not flows (exec, scp): what one runs and what running
//! it measured.

use crate::model::flow::ObservedWindow;
use serde::{Deserialize, Serialize};

/// What an exec/scp test runs (part of the spec, so it is stored and shown).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ExecSpec {
    /// The client's command and arguments; `{server}`, `{ssh_config}`,
    /// `{file}` are replaced (scp: built by linerate).
    pub command: Vec<String>,
    /// A command started in the server namespace for the test's duration.
    #[serde(default)]
    pub server_command: Option<Vec<String>>,
    /// Start linerate's own sshd in the server namespace (scp always does).
    #[serde(default)]
    pub sshd: bool,
}

/// What running the command measured.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ExecRecord {
    /// The command as run, after substitution.
    pub command: Vec<String>,
    /// Exit status (None: killed by a signal).
    pub exit_code: Option<i32>,
    /// Wall time of the command, seconds.
    pub elapsed_s: f64,
    /// With sshd: time of `ssh server true` just before (login alone), seconds.
    pub login_s: Option<f64>,
    /// CPU time of the command and its children (user + system), seconds.
    pub client_cpu_s: f64,
    /// CPU time of the processes in the server namespace over the command.
    pub server_cpu_s: Option<f64>,
    /// The server's receive window as the client's kernel saw it (`ss`,
    /// tcpi_snd_wnd while data was in flight).
    pub observed_window: Option<ObservedWindow>,
    /// scp with rcvbuf: the window asked for, and the server namespace's
    /// tcp_rmem that was calibrated to give it.
    pub window_target: Option<u64>,
    pub server_tcp_rmem: Option<String>,
    /// The last lines the command wrote to stderr.
    pub stderr_tail: String,
    /// `ssh -V` of the OpenSSH used (scp/sshd).
    pub ssh_version: Option<String>,
}
