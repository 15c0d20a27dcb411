//! Key-value load against a real memcached: the wire protocol (text and
//! meta commands, parsed incrementally), the key space and value sizes (a
//! seed's object classes, uniform or zipf popularity, values that verify
//! themselves), and the memcached process an agent starts and measures.
pub mod keyspace;
pub mod protocol;
