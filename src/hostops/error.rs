//! What operations on hosts can fail at: the hosts file (a usage error when
//! its contents or its path are wrong), one host over ssh (every such error
//! names its host), the cluster's state file, and the sysctl journal.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

use crate::control::ControlError;
use crate::lab::LabError;
use crate::model::ModelError;

#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// The hosts file could not be found or read.
    #[error("hosts file {}: {source}", path.display())]
    HostsFile { path: PathBuf, source: io::Error },
    /// The hosts file's contents do not hold (syntax, names, addresses).
    #[error("hosts file {}: {source}", path.display())]
    Hosts { path: PathBuf, source: ModelError },
    /// One host: what went wrong with it.
    #[error("host {host}: {source}")]
    Host { host: String, source: HostError },
    /// Several hosts failed: the first one's error and how many more.
    #[error("{first} (and {more} more hosts failed)")]
    Several { first: Box<OpsError>, more: usize },
    #[error("neither XDG_STATE_HOME nor HOME is set: cannot keep the cluster's tokens")]
    NoStateHome,
    /// A state or journal file, or its folder, that could not be made,
    /// read or removed.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("cannot write {}: {source}", path.display())]
    WriteState { path: PathBuf, source: io::Error },
    /// A cluster state file that is not one.
    #[error("{}: {source} (remove it; agents it listed must then be stopped by hand)", path.display())]
    BadState {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{0}")]
    Json(serde_json::Error),
    #[error("cannot find this binary: {0}")]
    NoExe(io::Error),
    /// A sysctl of a test's that this namespace does not have or hide.
    #[error("sysctl {key}: {source} (is it a sysctl of this kernel, in this namespace?)")]
    ReadSysctl { key: String, source: io::Error },
    #[error("cannot set {key} = {value}: {source}")]
    SetSysctl {
        key: String,
        value: String,
        source: io::Error,
    },
    /// A sysctl journal that is not one.
    #[error("{}: not a sysctl journal ({source}); remove it by hand", path.display())]
    BadJournal {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("another test on this agent has sysctls set: try again when it ends")]
    Busy,
    /// A NIC journal that is not one.
    #[error("{}: not a NIC journal ({source}); remove it by hand", path.display())]
    BadNicJournal {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// A journaled NIC setting that could not be put back (the journal is
    /// kept for the next start).
    #[error("cannot put back {what} (journal {} kept: the next `serve --allow-nic` tries again)", path.display())]
    NicRestore { path: PathBuf, what: String },
    #[error("another test on this agent has NIC settings applied: try again when it ends")]
    NicBusy,
    /// The interface a test's NIC settings go to cannot be named.
    #[error("NIC settings: {0}")]
    NicInterface(String),
    #[error("NIC settings need the ethtool binary: install it (Debian: apt-get install ethtool)")]
    NoEthtool,
    /// The lab namespace a test's NIC settings go to could not be entered
    /// (boxed: the lab's error is large).
    #[error("NIC settings: {0}")]
    NicNamespace(Box<LabError>),
    #[error("NIC settings: a NIC thread panicked")]
    NicThread,
    /// The values before a change could not be journaled.
    #[error("NIC settings: journal: {0}")]
    NicJournal(Box<OpsError>),
}

/// Why a NIC setting could not be read or set: the tool's own words, or
/// what linerate found wrong in what it read. Its text goes into a
/// result's refusals (`model::nic::NicRefusal`) and journal notes.
#[derive(Debug, thiserror::Error)]
pub enum EthtoolError {
    /// ethtool (or the sysfs read or write) failed: its own words, as it
    /// wrote them.
    #[error("{0}")]
    Tool(String),
    #[error("ethtool failed without a word")]
    Silent,
    #[error("ethtool -k {iface} does not list {feature}")]
    NotListed { iface: String, feature: String },
    /// `ethtool -g/-l/-c` shows the setting as n/a (`label`, read with
    /// option `opt`).
    #[error("the driver has no {label} setting (ethtool {opt} {iface}: n/a)")]
    NoSetting {
        label: String,
        opt: String,
        iface: String,
    },
    #[error("{0} is not a NIC setting")]
    NotNic(String),
    #[error("{iface} has no {dir} queues in sysfs")]
    NoQueues { iface: String, dir: String },
    /// A queue's mask file (`queue`/`file`) holds something else.
    #[error("{queue}/{file} reads '{value}'")]
    BadRead {
        queue: String,
        file: String,
        value: String,
    },
    #[error("bad mask {queue}={value}")]
    BadMask { queue: String, value: String },
}

/// What went wrong with one host (its name is `OpsError::Host`'s).
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The host's token_file cannot be read or is empty (boxed: control's
    /// error holds the workload's and the engine's, and is large).
    #[error(transparent)]
    TokenFile(Box<ControlError>),
    #[error("no token for its agent at {control}: run `linerate cluster up {}` or give token_file", hosts_file.display())]
    NoToken {
        control: SocketAddr,
        hosts_file: PathBuf,
    },
    #[error("remote_binary '{0}' must be a file path of letters, digits and . _ / + - (absolute, or relative to the login's home)")]
    RemoteBinary(String),
    #[error("'{0}' is not an ssh destination")]
    Destination(String),
    /// ssh itself failed (exit 255): its last line on standard error.
    #[error("ssh {dest} failed: {reason}")]
    Ssh { dest: String, reason: String },
    /// A step run over ssh failed: which, where, its last line.
    #[error("{what} on {dest} failed: {reason}")]
    Remote {
        what: String,
        dest: String,
        reason: String,
    },
    #[error("scp to {dest}:{remote} failed: {reason}")]
    Scp {
        dest: String,
        remote: String,
        reason: String,
    },
    /// ssh or scp is not installed here.
    #[error("{0} not found: install openssh-client")]
    NoClient(&'static str),
    #[error("cannot run {program}: {source}")]
    Spawn {
        program: &'static str,
        source: io::Error,
    },
    #[error("{program} did not finish within {secs:.0} s (stopped it)")]
    Timeout { program: &'static str, secs: f64 },
    #[error("{program}: {source}")]
    Wait {
        program: &'static str,
        source: io::Error,
    },
    #[error("the copied binary does not run there (it said '{got}'; this is {ours}): a different CPU or C library?")]
    Foreign { got: String, ours: String },
    /// `serve --detach` did not print its listening line: what it said.
    #[error("the agent did not say it was listening (it said: {0:?})")]
    NotListening(String),
    /// The caller's probe of the agent (connect, authenticate, probe).
    #[error("{0}")]
    Probe(String),
    #[error("version mismatch: its agent at {control} runs {theirs}, this is {ours}; run the same linerate on every host")]
    Version {
        control: SocketAddr,
        theirs: String,
        ours: String,
    },
}

impl OpsError {
    /// `source` about host `host`.
    pub fn host(host: &str, source: HostError) -> OpsError {
        OpsError::Host {
            host: host.into(),
            source,
        }
    }

    /// Whether the user's input is what is wrong: the hosts file (its path,
    /// its contents, a host's ssh destination or remote_binary).
    pub fn is_usage(&self) -> bool {
        match self {
            OpsError::HostsFile { .. } | OpsError::Hosts { .. } => true,
            OpsError::Host { source, .. } => matches!(
                source,
                HostError::RemoteBinary(_) | HostError::Destination(_)
            ),
            OpsError::Several { first, .. } => first.is_usage(),
            _ => false,
        }
    }
}

crate::error::classed_by_is_usage!(OpsError);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn every_host_error_names_its_host_and_the_class_follows_the_kind() {
        let ssh = OpsError::host(
            "bad",
            HostError::Ssh {
                dest: "server".into(),
                reason: "ssh: connect to host 198.18.1.1 port 2: Connection refused".into(),
            },
        );
        assert_eq!(
            ssh.to_string(),
            "host bad: ssh server failed: ssh: connect to host 198.18.1.1 port 2: Connection refused"
        );
        let several = OpsError::Several {
            first: Box::new(ssh),
            more: 2,
        };
        assert!(several.to_string().ends_with(" (and 2 more hosts failed)"));
        assert!(matches!(Error::from(several), Error::Failed(_)));
        let dest = OpsError::host("a", HostError::Destination("-oX".into()));
        assert_eq!(dest.to_string(), "host a: '-oX' is not an ssh destination");
        assert!(matches!(Error::from(dest), Error::Usage(_)));
        assert_eq!(
            OpsError::host("a", HostError::NotListening("oops".into())).to_string(),
            "host a: the agent did not say it was listening (it said: \"oops\")"
        );
        assert_eq!(
            OpsError::host(
                "a",
                HostError::Timeout {
                    program: "scp",
                    secs: 900.0
                }
            )
            .to_string(),
            "host a: scp did not finish within 900 s (stopped it)"
        );
    }

    #[test]
    fn nic_messages_are_unchanged() {
        assert_eq!(
            EthtoolError::NoSetting {
                label: "RX".into(),
                opt: "-g".into(),
                iface: "lr0".into()
            }
            .to_string(),
            "the driver has no RX setting (ethtool -g lr0: n/a)"
        );
        assert_eq!(
            EthtoolError::BadRead {
                queue: "rx-0".into(),
                file: "rps_cpus".into(),
                value: "zz".into()
            }
            .to_string(),
            "rx-0/rps_cpus reads 'zz'"
        );
        let journal = OpsError::NicJournal(Box::new(OpsError::NoStateHome));
        assert_eq!(
            Error::from(journal),
            Error::Failed(
                "NIC settings: journal: neither XDG_STATE_HOME nor HOME is set: cannot keep the cluster's tokens"
                    .into()
            )
        );
        assert_eq!(
            OpsError::NicThread.to_string(),
            "NIC settings: a NIC thread panicked"
        );
    }
}
