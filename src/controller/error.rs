//! What the controller's side can fail at: finding and reaching an agent
//! and agreeing with it (the greeting, the version, the token), the agent's
//! own refusals and failures (its text, as it sent it), the protocol's
//! surprises (a message out of turn, no answer in time), the hosts of a
//! many-host test, the groups of a mixed test and their common start, the
//! local agent it spawns, and the floors below it (the checks, the
//! workload, the engine, a program in the lab, the lab).
//!
//! Only the agent's address and a mix's groups are the user's input here
//! (usage errors, exit 2, as the command line had them); everything else
//! happens once a test is under way and is a failure (exit 1), whatever
//! floor below refused: the input was checked before the test started.

use std::io;
use std::net::{IpAddr, SocketAddr};

use crate::control::protocol::ErrorCode;
use crate::control::ControlError;
use crate::engine::EngineError;
use crate::lab::LabError;
use crate::program::ProgramError;
use crate::workload::WorkloadError;

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    // ------------------------------------------------ finding an agent
    /// `--agent` that does not resolve.
    #[error(
        "cannot resolve agent address '{agent}': {source} (use host:port, e.g. 192.0.2.7:7470)"
    )]
    Resolve { agent: String, source: io::Error },
    #[error("agent address '{0}' resolves to nothing")]
    ResolvesToNothing(String),

    // ------------------------------------- connecting and authenticating
    #[error("cannot reach agent at {addr}: {source} ({})", reach_hint(source))]
    Unreachable { addr: SocketAddr, source: io::Error },
    /// A socket option or a clone of the control socket.
    #[error("{0}")]
    Socket(io::Error),
    #[error("agent at {addr} did not greet: {source} (is it a linerate agent?)")]
    NoGreeting { addr: SocketAddr, source: io::Error },
    /// Its first message was another (`first`, the message's type).
    #[error("{addr} is not a linerate agent (its first message was '{first}', not a greeting)")]
    NotAnAgent { addr: SocketAddr, first: String },
    #[error("version mismatch: agent at {addr} speaks control protocol v{theirs}, this linerate speaks v{ours}; run the same linerate version on both ends")]
    VersionMismatch {
        addr: SocketAddr,
        theirs: u32,
        ours: u32,
    },
    #[error(
        "agent at {0} needs a token: pass --token-file FILE (the agent's) or set LINERATE_TOKEN"
    )]
    NeedsToken(SocketAddr),
    #[error("agent at {0} runs without a token (serve --insecure-no-token or on loopback), so it cannot prove it is the agent you hold a token for; drop --token-file/LINERATE_TOKEN to use it anyway")]
    HoldsNoToken(SocketAddr),
    /// Sending our half of the authentication.
    #[error("agent at {addr}: {source}")]
    Auth { addr: SocketAddr, source: io::Error },
    #[error("agent at {0} could not prove it holds the same token: wrong token on the agent?")]
    WrongToken(SocketAddr),
    #[error("agent at {addr}: unexpected '{got}' during authentication")]
    AuthUnexpected { addr: SocketAddr, got: String },
    #[error("agent at {addr} closed the connection during authentication: {source}")]
    AuthClosed { addr: SocketAddr, source: io::Error },

    // ------------------------------------------------ the agent says no
    /// The agent is past its caps (its reason, as it sent it).
    #[error("the agent at {addr} is busy: {message}; try again")]
    Busy { addr: SocketAddr, message: String },
    /// The agent refused the connection (its reason, as it sent it).
    #[error("the agent at {addr} refused: {message}")]
    Refused { addr: SocketAddr, message: String },
    /// The agent's own error during a test's setup, or the reason it gave
    /// for ending the connection: its text, as it sent it.
    #[error("agent at {addr}: {message}")]
    Agent { addr: SocketAddr, message: String },

    // ------------------------------------------- the protocol's surprises
    /// A message could not be sent: the connection is gone.
    #[error("agent at {addr} is gone: {source}")]
    Gone { addr: SocketAddr, source: io::Error },
    /// The connection closed while waiting for the agent (`what` it was
    /// doing: "setting up the test", ...).
    #[error("agent at {addr} closed the control connection while {what}")]
    Closed {
        addr: SocketAddr,
        what: &'static str,
    },
    #[error("agent at {addr} did not answer within {secs:.0} s while {what}")]
    Timeout {
        addr: SocketAddr,
        what: &'static str,
        secs: f64,
    },
    /// A message out of turn (`got`, its type) where `expected` was due.
    #[error("{from}: expected {expected}, got '{got}'")]
    Unexpected {
        from: Peer,
        expected: &'static str,
        got: String,
    },
    #[error("no clock probe came back")]
    NoProbeBack,

    // ------------------------------------- the companion for --crypto-hw
    #[error("agent at {addr} runs with the crypto extensions {} and has no companion for --crypto-hw {} (it was started with --no-crypto-twin, or is older): start one with `linerate serve --crypto-hw {}`", if *hw { "on" } else { "masked" }, on_off(*want), on_off(*want))]
    NoCompanion {
        addr: SocketAddr,
        /// The agent's own setting, and the one the test wants.
        hw: bool,
        want: bool,
    },
    #[error("the agent's companion for --crypto-hw: {0}")]
    Companion(Box<ControllerError>),
    #[error("agent at {addr}: its companion at {companion} has the same crypto setting")]
    CompanionSame {
        addr: SocketAddr,
        companion: SocketAddr,
    },

    // ------------------------------------------------------- many hosts
    #[error("a many-host test needs at least one client and one server")]
    NoHosts,
    /// Connecting to a host of the hosts file (or of a rack lab).
    #[error("host {name}: {source}")]
    Host {
        name: String,
        source: Box<ControllerError>,
    },
    /// A host of a many-host test failed during a test's setup.
    #[error("host {name} ({addr}): {source}")]
    OnHost {
        name: String,
        addr: SocketAddr,
        source: Box<ControllerError>,
    },
    #[error("the test asks for {want} client hosts; {have} are given (--clients)")]
    Clients { want: usize, have: usize },
    /// `--ports` beyond a server's data addresses.
    #[error("--ports {ports}: server {server} has {} data address{} ({}); a lab gets more with lab up NAME --ports {ports}, a hosts file with data = [...]", addrs.len(), if addrs.len() == 1 { "" } else { "es" }, addrs.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", "))]
    FewPorts {
        ports: u32,
        server: String,
        addrs: Vec<IpAddr>,
    },
    /// `--ports` above the data addresses one agent has (want, have).
    #[error("--ports {0}: this agent has {1} data address{s} (an agent given by --agent: its control address); the local agent on loopback takes up to 16, a lab gets more with lab up NAME --ports N, a hosts file with data = [...]", s = if *.1 == 1 { "" } else { "es" })]
    OnePort(u32, usize),

    // ------------------------------------------ a mix's groups (the input)
    #[error(transparent)]
    Groups(#[from] crate::workload::group::GroupError),

    // ---------------------------------------- a mix's groups (the run)
    #[error("group {group}: another control connection: {source}")]
    GroupConnection {
        group: String,
        source: Box<ControllerError>,
    },
    /// A group that failed before anything was measured.
    #[error("group {group} ({command}): {source}")]
    Group {
        group: String,
        command: String,
        source: Box<ControllerError>,
    },
    #[error("cannot start its thread: {0}")]
    GroupThread(io::Error),
    #[error("its thread panicked")]
    GroupPanicked,
    /// Another group failed before the common start: its error's text
    /// (it stays that group's; errors are not shared between threads).
    #[error("another group did not start: {0}")]
    OtherGroup(String),
    #[error("the other groups did not open their flows within {0} s")]
    GroupsLate(u64),

    // -------------------------------------------------- the local agent
    #[error("cannot find the linerate binary: {0}")]
    NoExe(io::Error),
    #[error("cannot start the local agent: {0}")]
    LocalStart(io::Error),
    #[error("cannot hand the local agent its token: {0}")]
    LocalToken(io::Error),
    #[error("the local agent did not start within 10 s")]
    LocalSilent,
    /// The local agent's first line did not end with its address (the
    /// line, trimmed).
    #[error("the local agent did not announce its address (said: {0:?})")]
    LocalAddress(String),
    #[error("no agent to run flows on")]
    NoAgent,

    // --------------------------------------------------- floors below
    /// The checks every test passes (`control::check`).
    #[error(transparent)]
    Check(#[from] ControlError),
    /// The workload's own parts: its pattern, routes and client flows.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// The client's flows could not be opened to the agent.
    #[error("agent at {addr}: {source}")]
    Flows {
        addr: SocketAddr,
        source: Box<WorkloadError>,
    },
    /// The client side: descriptors, its workers.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A program in the lab (exec, scp).
    #[error(transparent)]
    Program(#[from] ProgramError),
    /// The lab's record around a test (calibration, counters).
    #[error(transparent)]
    Lab(#[from] LabError),
}

/// Who an error is about: one agent, or a host of a many-host test.
#[derive(Debug, Clone)]
pub enum Peer {
    Agent(SocketAddr),
    Host { name: String, addr: SocketAddr },
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Peer::Agent(addr) => write!(f, "agent at {addr}"),
            Peer::Host { name, addr } => write!(f, "host {name} ({addr})"),
        }
    }
}

/// What to check when an agent cannot be reached.
fn reach_hint(e: &io::Error) -> &'static str {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => "is `linerate serve` running there, on that port?",
        io::ErrorKind::TimedOut => "is the host up and the port open?",
        _ => "check the address",
    }
}

fn on_off(on: bool) -> &'static str {
    if on {
        "on"
    } else {
        "off"
    }
}

impl ControllerError {
    /// The agent at `addr` refused (`code`, `message` as it sent them):
    /// busy, or another refusal.
    pub fn refusal(addr: SocketAddr, code: ErrorCode, message: String) -> ControllerError {
        match code {
            ErrorCode::Busy => ControllerError::Busy { addr, message },
            _ => ControllerError::Refused { addr, message },
        }
    }

    /// `self`, on host `name` at `addr` of a many-host test.
    pub fn on_host(self, name: &str, addr: SocketAddr) -> ControllerError {
        ControllerError::OnHost {
            name: name.to_string(),
            addr,
            source: Box::new(self),
        }
    }

    /// The agent's address and a mix's groups are what the user wrote
    /// (exit 2, as the command line had them); the rest happens during a
    /// test, after its input was checked, and is a failure (exit 1), the
    /// floors below included.
    pub fn is_usage(&self) -> bool {
        use ControllerError::*;
        matches!(self, Resolve { .. } | ResolvesToNothing(_) | Groups(_))
    }
}

crate::error::classed_by_is_usage!(ControllerError);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    fn addr() -> SocketAddr {
        "192.0.2.7:7470".parse().unwrap()
    }

    #[test]
    fn messages_are_unchanged() {
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        assert_eq!(
            ControllerError::Unreachable {
                addr: addr(),
                source: refused
            }
            .to_string(),
            format!(
                "cannot reach agent at 192.0.2.7:7470: {} (is `linerate serve` running there, on that port?)",
                io::Error::from(io::ErrorKind::ConnectionRefused)
            )
        );
        assert_eq!(
            ControllerError::refusal(addr(), ErrorCode::Busy, "4 tests run".into()).to_string(),
            "the agent at 192.0.2.7:7470 is busy: 4 tests run; try again"
        );
        assert_eq!(
            ControllerError::refusal(addr(), ErrorCode::AuthFailed, "bad mac".into()).to_string(),
            "the agent at 192.0.2.7:7470 refused: bad mac"
        );
        assert_eq!(
            ControllerError::Unexpected {
                from: Peer::Agent(addr()),
                expected: "ready",
                got: "stop".into()
            }
            .to_string(),
            "agent at 192.0.2.7:7470: expected ready, got 'stop'"
        );
        let late = ControllerError::Timeout {
            addr: addr(),
            what: "setting up the test",
            secs: 30.0,
        };
        assert_eq!(
            ControllerError::Unexpected {
                from: Peer::Host {
                    name: "sut".into(),
                    addr: addr()
                },
                expected: "flows_ready",
                got: "ready".into()
            }
            .to_string(),
            "host sut (192.0.2.7:7470): expected flows_ready, got 'ready'"
        );
        assert_eq!(
            late.on_host("sut", addr()).to_string(),
            "host sut (192.0.2.7:7470): agent at 192.0.2.7:7470 did not answer within 30 s while setting up the test"
        );
        assert_eq!(
            ControllerError::FewPorts {
                ports: 2,
                server: "sut".into(),
                addrs: vec!["10.0.0.1".parse().unwrap()]
            }
            .to_string(),
            "--ports 2: server sut has 1 data address (10.0.0.1); a lab gets more with lab up NAME --ports 2, a hosts file with data = [...]"
        );
        assert_eq!(
            ControllerError::NoCompanion {
                addr: addr(),
                hw: true,
                want: false
            }
            .to_string(),
            "agent at 192.0.2.7:7470 runs with the crypto extensions on and has no companion for --crypto-hw off (it was started with --no-crypto-twin, or is older): start one with `linerate serve --crypto-hw off`"
        );
        assert_eq!(
            ControllerError::LocalAddress("listening".into()).to_string(),
            "the local agent did not announce its address (said: \"listening\")"
        );
        assert_eq!(
            ControllerError::from(crate::workload::group::GroupError::GroupLane {
                group: "g2".into(),
                command: "stream".into(),
                start_s: 4.0,
                end_s: 14.5,
                first_start_s: 0.0,
                first_end_s: 13.0,
                interval_s: 1.0
            })
            .to_string(),
            "group g2 (stream) does not end with the others on whole intervals: its window is 4 s to 14.5 s of the common timeline, the first group's 0 s to 13 s, intervals 1 s"
        );
    }

    #[test]
    fn the_address_and_the_groups_are_usage_the_rest_failed() {
        assert_eq!(
            Error::from(ControllerError::ResolvesToNothing("x:1".into())),
            Error::Usage("agent address 'x:1' resolves to nothing".into())
        );
        assert_eq!(
            Error::from(ControllerError::from(
                crate::workload::group::GroupError::MixInMix("mix".into())
            )),
            Error::Usage("group 'mix': a mix cannot hold a mix".into())
        );
        assert_eq!(
            Error::from(ControllerError::NeedsToken(addr())),
            Error::Failed(
                "agent at 192.0.2.7:7470 needs a token: pass --token-file FILE (the agent's) or set LINERATE_TOKEN"
                    .into()
            )
        );
        assert_eq!(
            Error::from(ControllerError::OnePort(2, 1)),
            Error::Failed("--ports 2: this agent has 1 data address (an agent given by --agent: its control address); the local agent on loopback takes up to 16, a lab gets more with lab up NAME --ports N, a hosts file with data = [...]".into())
        );
        // A lower floor's input error, met during a test, is a failure.
        assert!(matches!(
            Error::from(ControllerError::from(WorkloadError::NoKvMix)),
            Error::Failed(_)
        ));
        assert!(matches!(
            Error::from(ControllerError::from(ProgramError::NoCommand)),
            Error::Failed(_)
        ));
    }
}
