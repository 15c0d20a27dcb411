//! What a key-value load can fail at: the key space, the value sizes, the
//! target and the `--service` command as the user wrote them (usage errors,
//! exit 2), and memcached itself (not found, not starting, not answering,
//! answering garbage: failures, exit 1).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use super::protocol::ProtocolError;

#[derive(Debug, thiserror::Error)]
pub enum KvError {
    #[error("the key space needs at least one key")]
    NoKeys,
    /// Keys longer than memcached's longest (`max`).
    #[error("keys of {size} bytes: memcached takes at most {max}")]
    KeyTooLong { size: usize, max: usize },
    #[error("zipf {exponent}: {source}")]
    Zipf {
        exponent: f64,
        source: rand_distr::ZipfError,
    },
    #[error("zipf exponent {0}: must be above 0 (e.g. 0.99)")]
    ZipfExponent(f64),
    #[error("an empty value size (examples: 1K, 1K-2K, 4-100,1K-2K)")]
    NoValueSize,
    /// A value-size mix (`all`) whose weight is not a number.
    #[error("'{all}': weight '{weight}' is not a number (example: 4-100:8,1K-2K:1)")]
    Weight { all: String, weight: String },
    #[error("'{all}': weight {weight} must be above 0")]
    WeightNotPositive { all: String, weight: f64 },
    /// A value-size mix (`all`) with a size (`size`) that is not one.
    #[error("'{all}': '{size}' is not a size (examples: 100, 1K, 1K-2K)")]
    ValueSize { all: String, size: String },
    #[error("'{0}': values of 0 bytes are not a load")]
    ZeroValue(String),
    #[error("'{all}': {size} is above 1,000,000 bytes, memcached's default largest item (-I 1m)")]
    ValueTooLarge { all: String, size: String },
    #[error("'{all}': {range} : the range is reversed")]
    Reversed { all: String, range: String },
    /// `--target` that does not resolve.
    #[error("--target '{target}': {source} (use HOST:PORT, e.g. 127.0.0.1:11211)")]
    Target {
        target: String,
        source: std::io::Error,
    },
    #[error("--target '{0}' resolves to nothing")]
    TargetNowhere(String),
    #[error("--service is empty: use --service memcached")]
    NoService,
    /// A `--service` whose program is not memcached.
    #[error("--service '{0}': the agent starts only memcached (a service is a known server, not any command)")]
    NotMemcached(String),
    /// A `--service` option that linerate sets itself.
    #[error("--service: {0} is linerate's to set (it binds memcached to the agent's data address on a free port)")]
    OursToSet(String),
    #[error("{0} is not installed on the agent's host (apt install memcached)")]
    NotInstalled(String),
    #[error("no free port on {ip}: {source}")]
    NoFreePort { ip: IpAddr, source: std::io::Error },
    /// memcached's log file could not be made.
    #[error("{}: {source}", path.display())]
    Log {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start {}: {source}", program.display())]
    Start {
        program: PathBuf,
        source: std::io::Error,
    },
    /// memcached ended: how, and its log's last line (`Service::exited`).
    #[error("{0}")]
    Exited(String),
    /// memcached did not answer `version` in time; `tail` is ": " and its
    /// log's last line, or empty.
    #[error("memcached on {addr} did not answer within {secs:.0} s{tail}")]
    NotReady {
        addr: SocketAddr,
        secs: f64,
        tail: String,
    },
    /// Connecting to memcached, or a read or write on the connection.
    #[error("{0}")]
    Connection(std::io::Error),
    #[error("memcached closed the connection")]
    Closed,
    #[error("memcached's reply is over 1 MiB")]
    ReplyTooLong,
    /// The port answered `version` with something else.
    #[error("not memcached: it said '{0}'")]
    NotMemcachedReply(String),
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
}

/// What the user wrote (the key space, value sizes, target, --service) is
/// a usage error; what memcached did is a failure.
impl From<KvError> for crate::error::Error {
    fn from(e: KvError) -> Self {
        use KvError::*;
        match e {
            NoKeys
            | KeyTooLong { .. }
            | Zipf { .. }
            | ZipfExponent(_)
            | NoValueSize
            | Weight { .. }
            | WeightNotPositive { .. }
            | ValueSize { .. }
            | ZeroValue(_)
            | ValueTooLarge { .. }
            | Reversed { .. }
            | Target { .. }
            | TargetNowhere(_)
            | NoService
            | NotMemcached(_)
            | OursToSet(_) => crate::error::Error::Usage(e.to_string()),
            NotInstalled(_)
            | NoFreePort { .. }
            | Log { .. }
            | Start { .. }
            | Exited(_)
            | NotReady { .. }
            | Connection(_)
            | Closed
            | ReplyTooLong
            | NotMemcachedReply(_)
            | Protocol(_) => crate::error::Error::Failed(e.to_string()),
        }
    }
}
