//! TLS's options: the library, the suite, the handshake and the trust.

use super::super::error::Invalid;
use super::super::kind::KindFacts;
use super::super::spec::TlsSpec;
use clap::Args;
use serde::{Deserialize, Serialize};

use super::super::spec::{CertKind, TlsBackend};
use super::values::Switch;

/// Flattened into `TestOptions` (keys and flags as written here).
#[derive(Args, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[command(next_help_heading = "TLS")]
pub struct TlsOptions {
    /// TLS on every data connection (the agent is the server; its generated certificate is verified).
    #[arg(id = "tls", long = "tls", action = clap::ArgAction::SetTrue)]
    #[serde(rename = "tls")]
    pub on: Option<bool>,
    /// TLS library: rustls (aws-lc-rs) or openssl (cargo feature `openssl`) [default: rustls].
    #[arg(long, value_enum)]
    pub backend: Option<TlsBackend>,
    /// TLS suite: aes128-gcm, aes256-gcm, chacha20-poly1305, a full name, or OpenSSL's (AES256-SHA256).
    #[arg(long, value_name = "SUITE")]
    pub cipher: Option<String>,
    /// TLS protocol version: 1.2 or 1.3 (default 1.3 unless the suite is 1.2).
    #[arg(long, value_name = "1.2|1.3")]
    pub tls_version: Option<String>,
    /// Key exchange group: x25519, x25519mlkem768, p256, p384 [default: x25519].
    #[arg(long, value_name = "GROUP")]
    pub kx: Option<String>,
    /// The agent's generated certificate [default: ecdsa-p256].
    #[arg(long, value_enum)]
    pub cert: Option<CertKind>,
    /// TLS session resumption: on or off (tls-handshake: measure resumed handshakes) [default: off].
    #[arg(long, value_parser = Switch::parse, value_name = "on|off")]
    pub resume: Option<Switch>,
    /// TLS: use the CPU's crypto extensions (on), or mask AES-NI, PCLMULQDQ, SHA, VAES and VPCLMULQDQ from both ends' crypto libraries (off) [default: on].
    #[arg(long, value_parser = Switch::parse, value_name = "on|off")]
    pub crypto_hw: Option<Switch>,
    /// openssl TLS 1.2 CBC suites: encrypt-then-MAC on or off.
    #[arg(long, value_parser = Switch::parse, value_name = "on|off")]
    pub etm: Option<Switch>,
    /// The name the client verifies in the agent's certificate.
    #[arg(long, value_name = "NAME")]
    pub tls_name: Option<String>,
    /// Trust this PEM certificate instead of the agent's generated one.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<String>,
}

impl TlsOptions {
    pub fn spec(&self, facts: &KindFacts) -> Result<Option<TlsSpec>, Invalid> {
        let on = self.on.unwrap_or(false) || facts.tls_always;
        if !on {
            // TLS keys apply to the points where tls = true, so one base test
            // can serve a clear/TLS sweep; only the command line, where they
            // are typed together, calls them a mistake (`tls_keys_without_tls`).
            return Ok(None);
        }
        let d = TlsSpec::default();
        Ok(Some(TlsSpec {
            backend: self.backend.unwrap_or_default(),
            cipher: self.cipher.clone(),
            version: self.tls_version.clone(),
            kx: self.kx.clone().unwrap_or(d.kx),
            cert: self.cert.unwrap_or_default(),
            resume: self.resume.is_some_and(|s| s.0),
            etm: self.etm.map(|s| s.0),
            server_name: self.tls_name.clone().unwrap_or(d.server_name),
            ca_file: self.tls_ca.clone(),
        }))
    }
    /// The first TLS option set without TLS being on, if any: on a command
    /// line that is a mistake worth naming.
    pub fn set_without_tls(&self, facts: &KindFacts) -> Option<&'static str> {
        // tls-handshake is TLS; cipher's --cipher is its algorithm.
        if self.on == Some(true) || facts.tls_always || facts.crypto_alone {
            return None;
        }
        [
            (self.cipher.is_some(), "--cipher"),
            (self.tls_version.is_some(), "--tls-version"),
            (self.kx.is_some(), "--kx"),
            (self.etm.is_some(), "--etm"),
            (self.tls_name.is_some(), "--tls-name"),
            (self.tls_ca.is_some(), "--tls-ca"),
            (self.resume == Some(Switch(true)), "--resume"),
            (self.backend == Some(TlsBackend::Openssl), "--backend"),
        ]
        .into_iter()
        .find_map(|(set, name)| set.then_some(name))
    }
}
