//! What a workload can refuse or fail at: options it does not take (the
//! user's input, exit 2 at the roof), its connections (the engine's own
//! error, or a listener of its pattern), its flows, and memcache's service
//! and prefill (the machine or the server failing, exit 1).

use std::net::SocketAddr;

use crate::engine::EngineError;
use crate::kv::protocol::ProtocolError;

/// Why a workload refused a spec or could not set up its flows.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// Opening connections, TLS and the like: the engine says what.
    #[error(transparent)]
    Engine(#[from] EngineError),

    // --- the spec (validate, of): input ---
    /// A name no kind of this build has (a study file's, a peer's).
    #[error("unknown workload '{name}' (this build has: {known})")]
    Unknown { name: &'static str, known: String },
    /// `--perf-server` with a kind that does not speak the perf protocol.
    #[error("--perf-server: {name} does not speak the QUIC perf protocol; {kinds} do")]
    NoPerfProtocol { name: &'static str, kinds: String },
    #[error("{workload} is a program run in a lab, not flows on an agent")]
    NotFlows { workload: &'static str },
    /// An option only some workloads take: `takers` names them.
    #[error("{flag} applies to {takers}")]
    NotTaken { flag: &'static str, takers: String },
    #[error("--bytes applies to {takers}; for rr use --request/--response")]
    BytesNotTaken { takers: String },
    #[error("--window exact applies to {takers} (persistent flows)")]
    ExactWindowNotTaken { takers: String },
    #[error("tls-handshake needs TLS settings (--tls is implied on the command line)")]
    TlsHandshakeNeedsTls,
    #[error("memcache without its key-value mix")]
    NoKvMix,
    /// `--values` does not parse (kv's text).
    #[error("--values {0}")]
    Values(String),
    /// `--keys`, `--key-size` or `--zipf` make no key space (kv's text).
    #[error("--keys/--key-size/--zipf: {0}")]
    KeySpace(String),
    /// What kv says about what the user wrote (the `--service` command,
    /// the key space or value sizes, `--target`). kv's functions return
    /// text today; when they return kv's own error this holds that.
    #[error("{0}")]
    KvInput(String),

    // --- setting up: the machine or a server failed ---
    /// memcached did not start (kv's text; see `KvInput`).
    #[error("{0}")]
    Service(String),
    /// A per-connection client got no address to connect to (`who`:
    /// "conn", "a per-transaction workload").
    #[error("{0} needs the agent's data address")]
    NoDataAddress(&'static str),
    #[error("zero-copy payload (memfd): {0}")]
    ZeroCopy(std::io::Error),
    #[error("data listener on {bind}: {source} (is {} an address of this host?)", .bind.ip())]
    DataListener {
        bind: SocketAddr,
        source: std::io::Error,
    },
    /// A further SO_REUSEPORT listener, one per agent worker.
    #[error("data listener: {0}")]
    MoreListeners(std::io::Error),
    /// A listener's own address could not be read (the OS's text only).
    #[error("{0}")]
    LocalAddr(std::io::Error),
    #[error("not an IP socket")]
    NotIp,
    #[error("no data address to start the service on")]
    NoServiceAddress,
    #[error("TLS asked, but the server sent no certificate")]
    NoServerCert,
    /// A QUIC flow could not be set up (its socket, its TLS config).
    #[error("QUIC flow: {0}")]
    Quic(std::io::Error),
    #[error("prefilling memcached at {addr}: {source}")]
    Prefill {
        addr: SocketAddr,
        source: PrefillError,
    },
}

/// Why setting memcached's keys before the window failed (one client's
/// share of them; `WorkloadError::Prefill` names the server).
#[derive(Debug, thiserror::Error)]
pub enum PrefillError {
    /// Connecting, or setting a socket timeout (the OS's text only).
    #[error("{0}")]
    Io(std::io::Error),
    /// A write or read that failed or timed out.
    #[error("{0} (timeout or memcached gone)")]
    Gone(std::io::Error),
    #[error("{0}")]
    Protocol(#[from] ProtocolError),
    /// A reply that is no answer to a set, in its Debug form (it borrows
    /// the connection's buffer).
    #[error("unexpected reply to a set: {0}")]
    UnexpectedReply(String),
    #[error("memcached closed the connection")]
    Closed,
    #[error("not done within the time limit ({keys} keys set)")]
    Late { keys: u64 },
    #[error("a prefill thread panicked")]
    Panicked,
}

impl WorkloadError {
    /// What the user wrote is wrong (an option the workload does not
    /// take, its key-value mix); the engine's errors keep their own class.
    pub fn is_usage(&self) -> bool {
        use WorkloadError::*;
        match self {
            Engine(e) => e.is_usage(),
            Unknown { .. }
            | NoPerfProtocol { .. }
            | NotFlows { .. }
            | NotTaken { .. }
            | BytesNotTaken { .. }
            | ExactWindowNotTaken { .. }
            | TlsHandshakeNeedsTls
            | NoKvMix
            | Values(_)
            | KeySpace(_)
            | KvInput(_) => true,
            _ => false,
        }
    }
}

crate::error::classed_by_is_usage!(WorkloadError);

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    /// The messages are the ones the workloads wrote as text before.
    #[test]
    fn messages_are_unchanged() {
        let addr: SocketAddr = "127.0.0.1:11211".parse().unwrap();
        let refused = io::Error::from_raw_os_error(libc::ECONNREFUSED);
        let cases: Vec<(WorkloadError, String)> = vec![
            (
                WorkloadError::NotFlows { workload: "scp" },
                "scp is a program run in a lab, not flows on an agent".into(),
            ),
            (
                WorkloadError::BytesNotTaken {
                    takers: "stream".into(),
                },
                "--bytes applies to stream; for rr use --request/--response".into(),
            ),
            (
                WorkloadError::Values("'x': not a size".into()),
                "--values 'x': not a size".into(),
            ),
            (
                WorkloadError::NoDataAddress("a per-transaction workload"),
                "a per-transaction workload needs the agent's data address".into(),
            ),
            (
                WorkloadError::DataListener {
                    bind: "127.0.0.2:0".parse().unwrap(),
                    source: io::Error::from_raw_os_error(libc::EADDRNOTAVAIL),
                },
                format!(
                    "data listener on 127.0.0.2:0: {} (is 127.0.0.2 an address of this host?)",
                    io::Error::from_raw_os_error(libc::EADDRNOTAVAIL)
                ),
            ),
            (
                WorkloadError::Prefill {
                    addr,
                    source: PrefillError::Gone(io::Error::from_raw_os_error(libc::ECONNREFUSED)),
                },
                format!(
                    "prefilling memcached at 127.0.0.1:11211: {refused} (timeout or memcached gone)"
                ),
            ),
            (
                WorkloadError::Prefill {
                    addr,
                    source: PrefillError::Late { keys: 12 },
                },
                "prefilling memcached at 127.0.0.1:11211: not done within the time limit (12 keys set)"
                    .into(),
            ),
            (
                WorkloadError::Engine(EngineError::Cancelled),
                "controller went away while flows were being opened".into(),
            ),
        ];
        for (e, want) in cases {
            assert_eq!(e.to_string(), want);
        }
    }

    #[test]
    fn what_the_user_wrote_is_usage_and_the_engine_keeps_its_class() {
        use crate::error::Error;
        assert!(matches!(
            Error::from(WorkloadError::NoKvMix),
            Error::Usage(_)
        ));
        assert!(matches!(
            Error::from(WorkloadError::NoServerCert),
            Error::Failed(_)
        ));
        assert!(matches!(
            Error::from(WorkloadError::Engine(EngineError::NoSuite)),
            Error::Usage(_)
        ));
        assert!(matches!(
            Error::from(WorkloadError::Engine(EngineError::Cancelled)),
            Error::Failed(_)
        ));
    }
}

/// Why a spec cannot run: the checks every test passes (the agent runs
/// the same ones: `control::check`).
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The spec's own rules (`TestSpec::validate`, whose text it is).
    #[error("{0}")]
    Spec(String),
    /// Its workload refuses an option, or lacks its own settings.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// The TLS library does not offer what the spec asks.
    #[error(transparent)]
    Tls(#[from] EngineError),
}

impl SpecError {
    /// A spec that fails the checks is input, whatever refused it.
    pub fn is_usage(&self) -> bool {
        true
    }
}

crate::error::classed_by_is_usage!(SpecError);
