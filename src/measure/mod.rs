//! Measurement: CPU on both ends, latency histograms, TCP_INFO, statistics.
pub mod cipherbench;
pub mod cpu;
pub mod crypto;
pub mod error;
pub mod firewall;
pub mod fold;
pub mod histogram;
pub mod host;
pub mod interval;
pub mod netdev;
pub mod placement;
pub mod probe;
pub mod rxstamp;
pub mod search;
pub mod security;
pub mod sockdiag;
pub mod stationary;
pub mod stats;
pub mod tcpinfo;
pub mod udpseq;

pub use error::MeasureError;
