//! What a lab can fail at, by kind: the link as the user wrote it and the
//! rules of a lab (usage errors, exit 2); the plumbing (ip, ethtool, tc,
//! iptables), the namespaces, the state files, calibration, linerate's own
//! sshd (failures, exit 1). The emulator is a process of its own (`lab
//! emulate`) with its own errors, `EmulatorError`. This file imports no
//! other file of the lab: every file may name its errors.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitStatus;

use crate::measure::MeasureError;
use crate::model::{Invalid, ModelError};
use crate::units::UnitsError;

/// An OS error as the emulator prints it, for one-line causes: without
/// Rust's " (os error N)".
#[derive(Debug)]
pub struct OsText(pub io::Error);

impl fmt::Display for OsText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.0.to_string();
        match text.rfind(" (os error ") {
            Some(at) => f.write_str(&text[..at]),
            None => f.write_str(&text),
        }
    }
}

impl std::error::Error for OsText {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// One value of a link option (`--rtt 10ms`, one side of `--loss 1%/0`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ValueError {
    #[error("a delay cannot be negative")]
    Negative,
    /// A delay without its unit (0 excepted).
    #[error("give a unit: {0}ms or {0}s (a bare number is ambiguous here)")]
    BareDelay(String),
    /// A link rate without its unit.
    #[error("give a unit: {0}mbit, {0}gbit or {0}kbit (a bare number would be {0} bit/s)")]
    BareRate(String),
    #[error(transparent)]
    Units(#[from] UnitsError),
    #[error("'{0}' is not a loss rate (examples: 0.5%, 0.001)")]
    NotALoss(String),
    #[error("loss '{0}' must be at least 0 and below 100%")]
    LossRange(String),
    /// A word that is not one of those allowed (the model's message).
    #[error("{0}")]
    Form(String),
}

/// A lab that could not be made, changed, read, calibrated or taken down.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    // The user's input.
    /// A value of option `--{name}` as written (`value`) that is not one.
    #[error("--{name} {value}: {source}")]
    Value {
        name: &'static str,
        value: String,
        source: ValueError,
    },
    #[error("--emulator-cpu: {0}")]
    EmulatorCpu(ModelError),
    /// A combination the lab's rules refuse (`--rtt` and `--delay`, a rack
    /// with netem, `--mtu` out of range ...).
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error("lab name '{0}' must be 1-24 characters of a-z, 0-9 and '-'")]
    Name(String),
    /// A rack's client count out of 1..=max.
    #[error("--clients {clients}: a lab has 1 to {max} clients")]
    Clients { clients: usize, max: usize },
    #[error("--servers {servers}: a lab has 1 to {max} servers")]
    Servers { servers: usize, max: usize },
    /// `--emulator-cpu N` where this process may not run.
    #[error("--emulator-cpu {cpu}: this process may use CPUs {allowed} (or use auto or off)")]
    CpuNotAllowed { cpu: usize, allowed: String },
    /// A congestion control this kernel does not have.
    #[error("congestion control '{cc}' is not in this kernel; it offers: {offers}")]
    NoCc { cc: String, offers: String },
    #[error("a lab without an emulator cannot change its link")]
    FixedLink,

    // The machine.
    /// A file or directory (`path`) that could not be made, read or written.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    /// A socket or file call whose message never named what it was on.
    #[error("{0}")]
    Os(io::Error),
    #[error("{0}")]
    Json(serde_json::Error),
    /// ip, ethtool, tc, iptables or sh could not be run.
    #[error("cannot run {program}: {source} (install iproute2, iptables and ethtool; the lab needs root)")]
    NoPlumbing { program: String, source: io::Error },
    /// A plumbing command (with its arguments) that failed: its stderr.
    #[error("{command}: {stderr}")]
    Plumbing { command: String, stderr: String },
    /// ssh-keygen or sshd could not be run.
    #[error("cannot run {what}: {source} (install openssh-server and openssh-client)")]
    NoOpenssh { what: String, source: io::Error },
    /// ssh-keygen or `sshd -t` failed: its stderr.
    #[error("{what} failed: {stderr}")]
    Openssh { what: String, stderr: String },
    /// The sshd binary (its path) is not there.
    #[error("{0} not found: install openssh-server")]
    NoSshd(&'static str),
    /// sshd or the emulator could not be started.
    #[error("cannot start {what}: {source}")]
    Start {
        what: &'static str,
        source: io::Error,
    },
    /// sshd or the emulator exited at once: its status and last words.
    #[error("{what} exited at start ({status}): {log}")]
    ExitedAtStart {
        what: &'static str,
        status: ExitStatus,
        log: String,
    },
    #[error("sshd did not accept connections within 10 s")]
    SshdSilent,
    #[error("the emulator did not start within 5 s")]
    EmulatorSilent,
    #[error("cannot find linerate: {0}")]
    NoExe(io::Error),
    #[error("{0}")]
    Address(std::net::AddrParseError),
    #[error("network namespace {name}: {source} (is the lab up? see `linerate lab status`)")]
    Namespace { name: String, source: io::Error },
    #[error("cannot enter network namespace {name}: {source} (the lab needs root)")]
    Enter { name: String, source: io::Error },
    #[error("a lab thread panicked")]
    ThreadPanicked,
    #[error("cannot set {key} = {value}: {source}")]
    SetSysctl {
        key: String,
        value: String,
        source: io::Error,
    },
    #[error("cannot read {path}: {source}")]
    ReadSysctl { path: String, source: io::Error },
    /// Setting the hosts' congestion control failed: what this kernel offers.
    #[error("{source}; this kernel offers: {offers}")]
    CcRefused {
        source: Box<LabError>,
        offers: String,
    },
    #[error("cannot add {cc} to net.ipv4.tcp_allowed_congestion_control: {source}")]
    AllowCc { cc: String, source: io::Error },
    /// Another linerate holds the lab's lock (its pid, as it wrote it).
    #[error("lab {name} is being brought up or down by another linerate (pid {holder}); wait for it, then check `linerate lab status {name}`")]
    Locked { name: String, holder: String },
    #[error(
        "lab {name} is already up (since {since}); take it down first: linerate lab down {name}"
    )]
    AlreadyUp { name: String, since: String },
    /// A state file someone else could have written.
    #[error("{} is not trusted (owner uid {uid}, mode {mode:o}): lab state must be written by this user and nobody else; remove it by hand", path.display())]
    Untrusted { path: PathBuf, uid: u32, mode: u32 },
    /// A state file that is not a lab's state.
    #[error("{}: {source} (remove it, or run `linerate lab down {name}`)", path.display())]
    BadState {
        path: PathBuf,
        name: String,
        source: serde_json::Error,
    },
    /// One client link's emulator of a rack did not start.
    #[error("{source} (client link c{link})")]
    OnLink { source: Box<LabError>, link: usize },
    #[error("the calibration listener did not start")]
    ListenerSilent,
    #[error("lab calibration: cannot connect to {server}: {source} (is the emulator running?)")]
    CalibrationConnect {
        server: SocketAddr,
        source: io::Error,
    },
    #[error("lab calibration: no echo from {server}: {source}")]
    NoEcho {
        server: SocketAddr,
        source: io::Error,
    },
    #[error("lab calibration: bulk flow: {0}")]
    BulkFlow(io::Error),
    #[error("window probe: cannot connect to {server}: {source}")]
    ProbeConnect {
        server: SocketAddr,
        source: io::Error,
    },
    #[error("window probe: {0}")]
    Probe(io::Error),
    #[error("window probe: no window sample")]
    NoWindowSample,
}

impl LabError {
    /// Whether the user's input is what is wrong (else the machine is).
    pub fn is_usage(&self) -> bool {
        use LabError::*;
        match self {
            Value { .. }
            | EmulatorCpu(_)
            | Self::Invalid(_)
            | Name(_)
            | Clients { .. }
            | Servers { .. }
            | CpuNotAllowed { .. }
            | NoCc { .. }
            | FixedLink => true,
            CcRefused { source, .. } | OnLink { source, .. } => source.is_usage(),
            Io { .. }
            | Os(_)
            | Json(_)
            | NoPlumbing { .. }
            | Plumbing { .. }
            | NoOpenssh { .. }
            | Openssh { .. }
            | NoSshd(_)
            | Start { .. }
            | ExitedAtStart { .. }
            | SshdSilent
            | EmulatorSilent
            | NoExe(_)
            | Address(_)
            | Namespace { .. }
            | Enter { .. }
            | ThreadPanicked
            | SetSysctl { .. }
            | ReadSysctl { .. }
            | AllowCc { .. }
            | Locked { .. }
            | AlreadyUp { .. }
            | Untrusted { .. }
            | BadState { .. }
            | ListenerSilent
            | CalibrationConnect { .. }
            | NoEcho { .. }
            | BulkFlow(_)
            | ProbeConnect { .. }
            | Probe(_)
            | NoWindowSample => false,
        }
    }
}

crate::error::classed_by_is_usage!(LabError);

/// The emulator (`lab emulate`): its configuration, its queues, its
/// counters file.
#[derive(Debug, thiserror::Error)]
pub enum EmulatorError {
    #[error("loss {0} is not a probability in 0..1")]
    Loss(f64),
    #[error("rate_bps 0: use null for an unlimited rate")]
    ZeroRate,
    #[error("mtu {0} is outside 68..65535")]
    Mtu(u32),
    #[error("{what} {us} µs is too large")]
    TooLarge { what: &'static str, us: u64 },
    /// What is wrong with one direction's link.
    #[error("direction {direction}: {source}")]
    Direction {
        direction: usize,
        source: Box<EmulatorError>,
    },
    #[error("the two directions need two queues, got {0} twice")]
    SameQueue(u16),
    #[error("no random seed: {0}")]
    Seed(getrandom::Error),
    #[error(transparent)]
    Pin(#[from] MeasureError),
    /// A system call (epoll, the netlink socket) refused: which, and why.
    #[error("{call}: {source}")]
    Call { call: &'static str, source: OsText },
    #[error("stats path {} has no file name", .0.display())]
    StatsName(PathBuf),
    #[error("stats directory {} does not exist", .0.display())]
    StatsDir(PathBuf),
    #[error("stats: {0}")]
    StatsJson(serde_json::Error),
    /// The counters file (or its temporary twin) could not be written.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: OsText },
    #[error("cannot start the counters writer: {0}")]
    Writer(io::Error),
    #[error("the counters writer panicked")]
    WriterPanicked,
    /// Binding or configuring NFQUEUE queue `num` failed to send.
    #[error("NFQUEUE bind of queue {num} failed: {source}")]
    Bind { num: u16, source: OsText },
    /// The kernel refused to bind or configure queue `num`; `hint` says
    /// what to check (or is empty).
    #[error("NFQUEUE bind of queue {num} failed: {source}{hint}")]
    BindRefused {
        num: u16,
        source: OsText,
        hint: String,
    },
    /// Reading the socket of queues `queues` ("0 and 1") failed.
    #[error("NFQUEUE queues {queues}: recv failed: {source}")]
    Recv { queues: String, source: OsText },
    #[error("NFQUEUE queues {queues}: verdict send failed: {source}")]
    Verdict { queues: String, source: OsText },
}

/// The emulator's configuration is written by `lab up`, not typed by a
/// user (`lab emulate` is linerate's own), so every emulator error is a
/// failure, as the command line had it.
impl From<EmulatorError> for crate::error::Error {
    fn from(e: EmulatorError) -> Self {
        crate::error::Error::Failed(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words users and tests read, as they were before the types.
    #[test]
    fn messages_are_the_ones_users_know() {
        let enoent = || io::Error::from_raw_os_error(libc::ENOENT);
        let said = |e: LabError| e.to_string();
        assert_eq!(
            said(LabError::Value {
                name: "rtt",
                value: "10".into(),
                source: ValueError::BareDelay("10".into()),
            }),
            "--rtt 10: give a unit: 10ms or 10s (a bare number is ambiguous here)"
        );
        assert_eq!(
            said(LabError::Plumbing {
                command: "ip netns add lr-x-r".into(),
                stderr: "File exists".into(),
            }),
            "ip netns add lr-x-r: File exists"
        );
        assert_eq!(
            said(LabError::Io {
                path: "/run/linerate/locks/x.lock".into(),
                source: enoent(),
            }),
            "/run/linerate/locks/x.lock: No such file or directory (os error 2)"
        );
        assert_eq!(
            said(LabError::Untrusted {
                path: "/run/linerate/labs/x.json".into(),
                uid: 1000,
                mode: 0o666,
            }),
            "/run/linerate/labs/x.json is not trusted (owner uid 1000, mode 666): lab state must be written by this user and nobody else; remove it by hand"
        );
        let cc = LabError::CcRefused {
            source: Box::new(LabError::SetSysctl {
                key: "net.ipv4.tcp_congestion_control".into(),
                value: "vegas".into(),
                source: enoent(),
            }),
            offers: "reno cubic".into(),
        };
        assert!(!cc.is_usage());
        assert_eq!(
            said(cc),
            "cannot set net.ipv4.tcp_congestion_control = vegas: No such file or directory (os error 2); this kernel offers: reno cubic"
        );
        let link = LabError::OnLink {
            source: Box::new(LabError::EmulatorSilent),
            link: 2,
        };
        assert_eq!(
            said(link),
            "the emulator did not start within 5 s (client link c2)"
        );
        assert_eq!(
            said(LabError::Clients {
                clients: 17,
                max: 16
            }),
            "--clients 17: a lab has 1 to 16 clients"
        );
        assert_eq!(
            said(LabError::NoSshd("/usr/sbin/sshd")),
            "/usr/sbin/sshd not found: install openssh-server"
        );
        let bind = EmulatorError::BindRefused {
            num: 3,
            source: OsText(io::Error::from_raw_os_error(libc::EBUSY)),
            hint: " (queue 3 is already bound)".into(),
        };
        assert_eq!(
            bind.to_string(),
            "NFQUEUE bind of queue 3 failed: Device or resource busy (queue 3 is already bound)"
        );
    }

    #[test]
    fn the_exit_class_follows_the_kind() {
        use crate::error::Error;
        assert!(matches!(
            Error::from(LabError::Name("X".into())),
            Error::Usage(_)
        ));
        assert!(matches!(
            Error::from(LabError::OnLink {
                source: Box::new(LabError::Invalid("no".into())),
                link: 1,
            }),
            Error::Usage(_)
        ));
        assert!(matches!(
            Error::from(LabError::ThreadPanicked),
            Error::Failed(_)
        ));
    }
}
