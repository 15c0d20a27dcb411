//! Key-value load against a real memcached: the wire protocol (text and
//! meta commands, parsed incrementally), the key space and value sizes (a
//! seed's object classes, uniform or zipf popularity, values that verify
//! themselves), and the memcached process an agent starts and measures.
pub mod keyspace;
pub mod protocol;
pub mod service;

/// `--target HOST:PORT`, resolved (one line naming the input when not).
pub fn resolve_target(t: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    t.to_socket_addrs()
        .map_err(|e| format!("--target '{t}': {e} (use HOST:PORT, e.g. 127.0.0.1:11211)"))?
        .next()
        .ok_or_else(|| format!("--target '{t}' resolves to nothing"))
}
