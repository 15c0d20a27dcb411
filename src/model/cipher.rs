//! The `cipher` workload's spec and figures: what one core spends on a
//! cipher or a signature, measured in linerate's own process (seed 003's
//! CPACF cipher costs and CEX2A handshakes, as study points with a table).
//! Not a network test: it runs on the controller's host, no agent.

use serde::{Deserialize, Serialize};

use super::error::Invalid;

/// The algorithms a `cipher` point may name, bulk ciphers first (a TLS
/// record sealed: AEAD, or CBC encryption plus its HMAC), then
/// signatures (a TLS server signs once per full handshake, the client
/// verifies), then plain hashes (seed 003's CPACF SHA).
pub const ALGORITHMS: &[&str] = &[
    "aes128-gcm",
    "aes256-gcm",
    "chacha20-poly1305",
    "aes128-cbc-hmac-sha1",
    "aes128-cbc-hmac-sha256",
    "aes192-cbc-hmac-sha256",
    "aes256-cbc-hmac-sha256",
    "3des-cbc-hmac-sha1",
    "des-cbc-hmac-sha1",
    "rsa2048-sign",
    "rsa2048-verify",
    "rsa4096-sign",
    "rsa4096-verify",
    "ecdsa-p256-sign",
    "ecdsa-p256-verify",
    "sha1",
    "sha256",
];

/// The record size when none is given: TLS's largest record.
pub const DEFAULT_RECORD: usize = 16384;

/// Whether `algorithm` is a signature (its figure is operations/s; bytes
/// per second mean nothing there).
pub fn is_signature(algorithm: &str) -> bool {
    algorithm.ends_with("-sign") || algorithm.ends_with("-verify")
}

/// The spec's part for a `cipher` point.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct CipherSpec {
    /// One of `ALGORITHMS`.
    pub algorithm: String,
}

impl CipherSpec {
    pub fn validate(&self) -> Result<(), Invalid> {
        if !ALGORITHMS.contains(&self.algorithm.as_str()) {
            return Err(format!(
                "cipher '{}': the cipher workload measures {}",
                self.algorithm,
                ALGORITHMS.join(", ")
            )
            .into());
        }
        Ok(())
    }
}

/// What one iteration of a `cipher` point measured on one core.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct CipherFigures {
    pub algorithm: String,
    /// The library and its version ("aws-lc-rs 1.x", "OpenSSL 3.0.x EVP").
    pub library: String,
    /// Bytes per operation (the record; for a signature, the message).
    pub record_bytes: usize,
    /// Operations (records sealed, signatures made or checked).
    pub ops: u64,
    /// Wall time of the loop, seconds.
    pub seconds: f64,
    /// CPU time of the measuring thread over the loop, seconds.
    pub cpu_s: f64,
    pub ops_per_s: f64,
    /// Plaintext bytes per second (None for signatures).
    pub bytes_per_s: Option<f64>,
    /// CPU microseconds per KB of plaintext (None for signatures).
    pub cpu_us_per_kb: Option<f64>,
    /// CPU microseconds per operation.
    pub cpu_us_per_op: f64,
    /// The CPU's crypto extensions were masked (OPENSSL_ia32cap).
    #[serde(default)]
    pub hw_masked: bool,
}
