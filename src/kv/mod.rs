//! Key-value load against a real memcached: the wire protocol (text and
//! meta commands, parsed incrementally), the key space and value sizes (a
//! seed's object classes, uniform or zipf popularity, values that verify
//! themselves), and the memcached process an agent starts and measures.
pub mod error;
pub mod keyspace;
pub mod protocol;
pub mod service;

pub use error::KvError;

/// `--target HOST:PORT`, resolved (one line naming the input when not).
pub fn resolve_target(t: &str) -> Result<std::net::SocketAddr, KvError> {
    use std::net::ToSocketAddrs;
    t.to_socket_addrs()
        .map_err(|source| KvError::Target {
            target: t.into(),
            source,
        })?
        .next()
        .ok_or_else(|| KvError::TargetNowhere(t.into()))
}
