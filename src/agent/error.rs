//! What the agent can fail at: its listener and the process setup before
//! it serves, a controller's handshake (logged, never fatal), and a test
//! that ends early (told to its controller as text: the control protocol's
//! error message is a string). None of it is the user's input: at the roof
//! (`linerate serve`) every variant exits as a failure (1).

use std::net::SocketAddr;
use std::time::Duration;

use crate::control::protocol;
use crate::engine::EngineError;
use crate::hostops::OpsError;
use crate::workload::WorkloadError;

/// Why the agent could not serve, a controller was refused, or a test
/// ended early.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    // --- serving (serve, bind, serve_on, the lobby) ---
    #[error("cannot listen on {addr}: {source} ({})", listen_hint(.source))]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// Entering `--data-netns` failed (the lab's text; lab returns its own
    /// error on the typed-errors branch, which this holds once both meet).
    #[error("{0}")]
    Netns(String),
    /// Putting back a previous agent's sysctls failed (hostops' text, as
    /// for `Netns`).
    #[error("{0}")]
    Sysctl(String),
    #[error("cannot start the sysctl watcher: {0}")]
    SysctlWatcher(std::io::Error),
    /// Putting back a previous agent's NIC settings, or applying a test's,
    /// failed (hostops' error; boxed, it is large).
    #[error(transparent)]
    Nic(Box<OpsError>),
    /// A socket's own address could not be read (the OS's text only).
    #[error("{0}")]
    LocalAddr(std::io::Error),
    #[error("listener: {0}")]
    Listener(std::io::Error),
    #[error("epoll: {0}")]
    Epoll(std::io::Error),

    // --- a controller's handshake ---
    /// A socket call or write on the control connection (the OS's text).
    #[error("{0}")]
    Io(std::io::Error),
    #[error("it closed the connection without authenticating")]
    ClosedUnauthenticated,
    #[error("no authentication: {0}")]
    NoAuth(std::io::Error),
    /// The controller speaks another control protocol version (the
    /// controller is told this text too).
    #[error("version mismatch: this agent speaks control protocol v{}, the controller v{controller}; run the same linerate version on both ends", protocol::VERSION)]
    VersionMismatch { controller: u32 },
    #[error("authentication failed (wrong token)")]
    WrongToken,
    #[error("evicted as it authenticated")]
    Evicted,
    /// The controller sent an error instead of authenticating: its message.
    #[error("{0}")]
    Refused(String),
    /// Another message where auth was due: its name.
    #[error("expected auth, got '{0}'")]
    NotAuth(String),

    // --- a test that ended early (its reason goes to the controller) ---
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A message to the controller could not be sent (the OS's text).
    #[error("{0}")]
    Send(std::io::Error),
    #[error("controller went away before start")]
    GoneBeforeStart,
    #[error("no start within 60 s")]
    NoStart,
    #[error("a start {:.0} s away is refused", .0.as_secs_f64())]
    StartTooFar(Duration),
    #[error("controller went away mid-test; flows closed")]
    GoneMidTest,
    /// The controller ended the test with this message (a broken seal).
    #[error("{0}; flows closed")]
    EndedMidTest(String),
}

/// What to check when the control port cannot be bound.
fn listen_hint(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::AddrNotAvailable => "is that an address of this host?",
        _ => "is another agent running there? pick another port with --listen",
    }
}

/// Nothing the agent fails at is the user's input (its flags are checked
/// by the command line before it serves): exit 1.
impl From<AgentError> for crate::error::Error {
    fn from(e: AgentError) -> Self {
        crate::error::Error::Failed(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    #[test]
    fn messages_are_unchanged() {
        let addr: SocketAddr = "127.0.0.1:7000".parse().unwrap();
        let in_use = io::Error::from(io::ErrorKind::AddrInUse);
        let busy = AgentError::Listen {
            addr,
            source: io::Error::from(io::ErrorKind::AddrInUse),
        };
        assert_eq!(
            busy.to_string(),
            format!("cannot listen on 127.0.0.1:7000: {in_use} (is another agent running there? pick another port with --listen)")
        );
        let elsewhere = AgentError::Listen {
            addr,
            source: io::Error::from(io::ErrorKind::AddrNotAvailable),
        };
        assert!(elsewhere
            .to_string()
            .ends_with(" (is that an address of this host?)"));
        assert_eq!(
            AgentError::VersionMismatch { controller: 1 }.to_string(),
            format!(
                "version mismatch: this agent speaks control protocol v{}, the controller v1; run the same linerate version on both ends",
                protocol::VERSION
            )
        );
        assert_eq!(
            AgentError::NotAuth("probe".into()).to_string(),
            "expected auth, got 'probe'"
        );
        assert_eq!(
            AgentError::Nic(Box::new(OpsError::NicInterface(
                "no interface here holds 10.0.0.1".into()
            )))
            .to_string(),
            "NIC settings: no interface here holds 10.0.0.1"
        );
        assert_eq!(
            AgentError::StartTooFar(Duration::from_millis(45_600)).to_string(),
            "a start 46 s away is refused"
        );
        assert_eq!(
            AgentError::EndedMidTest("the seal broke".into()).to_string(),
            "the seal broke; flows closed"
        );
        assert_eq!(
            crate::error::Error::from(AgentError::NoStart),
            crate::error::Error::Failed("no start within 60 s".into())
        );
    }
}
