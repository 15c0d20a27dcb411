//! What the data path can fail at: opening a test's connections (TCP and
//! UDP), their TLS (the settings a test asks for, the certificates and keys
//! it is given, the handshakes), the descriptors and threads a side needs.
//! The TLS settings and files are the user's input (exit 2 at the roof);
//! the rest is the machine or the network failing (exit 1).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Why the data path could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    // --- connections (setup.rs, udp.rs) ---
    /// An epoll call (create, register, wait) failed.
    #[error("epoll: {0}")]
    Epoll(std::io::Error),
    /// A TCP flow could not connect or announce itself.
    #[error("flow {id}: connecting to {addr} failed: {source}")]
    Connect {
        id: u32,
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// Not every flow connected in time; `to` lists the addresses.
    #[error("only {connected} of {n} flows connected to {to} within {:.0} s", .timeout.as_secs_f64())]
    ConnectTimeout {
        connected: usize,
        n: usize,
        to: String,
        timeout: Duration,
    },
    /// The agent's controller left while its flows were being opened.
    #[error("controller went away while flows were being opened")]
    Cancelled,
    /// Not every expected flow arrived in time.
    #[error("only {arrived} of {n} flows arrived within {:.0} s", .timeout.as_secs_f64())]
    ArriveTimeout {
        arrived: usize,
        n: usize,
        timeout: Duration,
    },
    #[error("TCP_WINDOW_CLAMP: {0}")]
    WindowClamp(std::io::Error),
    #[error("accept failed: {0}")]
    Accept(std::io::Error),
    #[error("UDP socket on {at}: {source}")]
    UdpSocket {
        at: SocketAddr,
        source: std::io::Error,
    },
    #[error("UDP listener on {at}: {source} (is {} an address of this host?)", .at.ip())]
    UdpListener {
        at: SocketAddr,
        source: std::io::Error,
    },
    /// A listener's own address could not be read (the OS's text only).
    #[error("{0}")]
    LocalAddr(std::io::Error),
    #[error("UDP flow {id} from {from}: {source}")]
    UdpFlowFrom {
        id: u32,
        from: SocketAddr,
        source: std::io::Error,
    },
    #[error("UDP flow {id} to {to}: {source}")]
    UdpFlowTo {
        id: u32,
        to: SocketAddr,
        source: std::io::Error,
    },
    #[error("controller went away while UDP flows were being opened")]
    UdpCancelled,
    #[error("only {arrived} of {n} UDP flows said hello within {:.0} s (is UDP blocked on the way?)", .timeout.as_secs_f64())]
    UdpHelloTimeout {
        arrived: usize,
        n: usize,
        timeout: Duration,
    },
    #[error("only {answered} of {n} UDP flows were answered by {to} within {:.0} s (is UDP blocked on the way?)", .timeout.as_secs_f64())]
    UdpAnswerTimeout {
        answered: usize,
        n: usize,
        to: String,
        timeout: Duration,
    },

    // --- a side's resources (limits.rs, side.rs) ---
    /// The flows do not fit under the descriptor limit (`who`: "the
    /// client", "the agent").
    #[error("{flows} flows need about {need} file descriptors, but {who} may open {soft} (hard limit {hard}): raise it, e.g. `ulimit -n {}` in the shell that starts it (LimitNOFILE= for a service), or use fewer flows", .need.next_power_of_two().max(.need + 1024))]
    TooFewFds {
        flows: u32,
        need: u64,
        who: String,
        soft: u64,
        hard: u64,
    },
    #[error("cannot start worker thread: {0}")]
    WorkerThread(std::io::Error),

    // --- TLS settings a test asks for (tls.rs, tls_openssl.rs): input ---
    #[error("--etm applies to the openssl backend's TLS 1.2 CBC suites; rustls has no CBC suites")]
    EtmNeedsOpenssl,
    /// rustls has no suite by that name for this version and certificate;
    /// `offered` lists what it has.
    #[error("cipher '{cipher}' is not offered by rustls for TLS {version} with a {cert} certificate; rustls offers: {offered}{}", cbc_hint(.cipher))]
    CipherNotOffered {
        cipher: String,
        version: String,
        cert: &'static str,
        offered: String,
    },
    #[error("no cipher suite fits these TLS settings")]
    NoSuite,
    /// `known` lists the groups this backend takes.
    #[error("key exchange '{kx}' is unknown; use {known}")]
    UnknownKx { kx: String, known: &'static str },
    #[error("x25519mlkem768 is a TLS 1.3 group")]
    KxNeedsTls13,
    #[error("this linerate was built without the openssl backend: rebuild with the default features (`cargo build --release`)")]
    NoOpenssl,
    #[error("--perf-server: another tool's server is reached with rustls: drop --backend openssl")]
    ForeignNeedsRustls,
    #[error("--tls-name {name}: {source}")]
    ServerName {
        name: String,
        source: rustls::pki_types::InvalidDnsNameError,
    },
    #[error("x25519mlkem768 is not in {openssl}; use the rustls backend for it")]
    KxNotInOpenssl { openssl: &'static str },
    #[error("'{0}' is a TLS 1.2 suite; drop --tls-version 1.3")]
    Tls12Suite(String),
    #[error("'{0}' needs an RSA certificate: add --cert rsa2048 (or rsa4096)")]
    NeedsRsa(String),
    #[error("--etm applies to TLS 1.2 CBC suites (such as AES256-SHA256)")]
    EtmNeedsCbc,
    #[error("OpenSSL does not offer TLS 1.3 suite {0}")]
    OpensslNo13(String),
    /// OpenSSL refused the cipher list; what it offers, by version.
    #[error("cipher '{cipher}' is not offered by {openssl}; it offers TLS 1.3 {tls13} and TLS 1.2 {tls12}")]
    OpensslCipherNotOffered {
        cipher: String,
        openssl: &'static str,
        tls13: String,
        tls12: String,
    },

    // --- certificate and key files (--tls-ca, --tls-cert, --tls-key): input ---
    #[error("cannot read {flag} {path}: {source}")]
    Unreadable {
        flag: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{flag} {path}: not a PEM certificate file: {source}")]
    NotPem {
        flag: &'static str,
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error("{flag} {path} holds no PEM certificate")]
    NoPemCert { flag: &'static str, path: PathBuf },
    /// rustls refused a certificate of the CA file.
    #[error("--tls-ca {path}: {source}")]
    BadCa {
        path: PathBuf,
        source: rustls::Error,
    },
    /// OpenSSL could not read the CA file.
    #[cfg(feature = "openssl")]
    #[error("--tls-ca {path}: {source}")]
    OpensslCa {
        path: PathBuf,
        source: openssl::error::ErrorStack,
    },
    #[error("--tls-key {path}: not a PEM private key: {source}")]
    NotPemKey {
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error("--tls-cert {cert} and --tls-key {key} do not make a usable pair: {source}")]
    NoPair {
        cert: PathBuf,
        key: PathBuf,
        source: rustls::Error,
    },
    /// rustls's default protocol versions refused while checking a pair
    /// (its text only).
    #[error("{0}")]
    PairCheck(rustls::Error),

    // --- the agent's identity and the TLS configs built from it ---
    #[error("the agent identity is already loaded")]
    AlreadyLoaded,
    #[error("cannot generate a {kind} key: {source}")]
    KeyGen {
        kind: &'static str,
        source: rcgen::Error,
    },
    #[error("certificate parameters: {0}")]
    CertParams(rcgen::Error),
    #[error("cannot sign the agent certificate: {0}")]
    Sign(rcgen::Error),
    /// rustls refused a config: `what` is "TLS server settings", "TLS
    /// server certificate" or "TLS client settings".
    #[error("{what}: {source}")]
    Rustls {
        what: &'static str,
        source: rustls::Error,
    },
    #[error("the agent's certificate is unusable: {0}")]
    AgentCertUnusable(rustls::Error),
    #[cfg(feature = "openssl")]
    #[error("the agent's certificate is unusable: {0}")]
    OpensslAgentCertUnusable(openssl::error::ErrorStack),
    /// An OpenSSL context step: `what` is "context", "version", "groups",
    /// "tickets".
    #[cfg(feature = "openssl")]
    #[error("OpenSSL {what}: {source}")]
    Openssl {
        what: &'static str,
        source: openssl::error::ErrorStack,
    },
    /// OpenSSL refused the agent's certificate, chain or key: `what` is
    /// "agent certificate", "agent certificate chain" or "agent key".
    #[cfg(feature = "openssl")]
    #[error("{what}: {source}")]
    AgentIdentity {
        what: &'static str,
        source: openssl::error::ErrorStack,
    },
    #[error("agent key: an unsupported key format")]
    UnsupportedKey,
    /// OpenSSL's certificate store for the client (its text only).
    #[cfg(feature = "openssl")]
    #[error("{0}")]
    CertStore(openssl::error::ErrorStack),

    // --- handshakes before the window (tls.rs) ---
    #[error("flow {id}: TLS handshake failed: {source}")]
    Handshake { id: u32, source: std::io::Error },
    #[error("{pending} of {n} TLS handshakes did not finish within {:.0} s", .timeout.as_secs_f64())]
    HandshakeTimeout {
        pending: usize,
        n: usize,
        timeout: Duration,
    },
}

/// A cipher rustls lacks that is not AEAD: the openssl backend has it.
fn cbc_hint(cipher: &str) -> &'static str {
    if super::tls_common::is_aead_name(cipher) {
        ""
    } else {
        " (CBC suites such as AES256-SHA256 need --backend openssl)"
    }
}

impl EngineError {
    /// What the user gave is wrong: the TLS settings a test asks for, or
    /// the certificate, key and CA files named on the command line.
    pub fn is_usage(&self) -> bool {
        use EngineError::*;
        match self {
            EtmNeedsOpenssl
            | CipherNotOffered { .. }
            | NoSuite
            | UnknownKx { .. }
            | KxNeedsTls13
            | NoOpenssl
            | ForeignNeedsRustls
            | ServerName { .. }
            | KxNotInOpenssl { .. }
            | Tls12Suite(_)
            | NeedsRsa(_)
            | EtmNeedsCbc
            | OpensslNo13(_)
            | OpensslCipherNotOffered { .. }
            | Unreadable { .. }
            | NotPem { .. }
            | NoPemCert { .. }
            | BadCa { .. }
            | NotPemKey { .. }
            | NoPair { .. }
            | PairCheck(_) => true,
            #[cfg(feature = "openssl")]
            OpensslCa { .. } => true,
            _ => false,
        }
    }
}

crate::error::classed_by_is_usage!(EngineError);

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    fn os(code: i32) -> io::Error {
        io::Error::from_raw_os_error(code)
    }

    /// The messages are the ones the engine wrote as text before it had a
    /// type: tests and users match on them.
    #[test]
    fn messages_are_unchanged() {
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let refused = os(libc::ECONNREFUSED).to_string();
        let timeout = Duration::from_secs(30);
        let cases: Vec<(EngineError, String)> = vec![
            (
                EngineError::Connect {
                    id: 3,
                    addr,
                    source: os(libc::ECONNREFUSED),
                },
                format!("flow 3: connecting to 127.0.0.1:9 failed: {refused}"),
            ),
            (
                EngineError::Connect {
                    id: 0,
                    addr,
                    source: io::Error::new(
                        io::ErrorKind::WriteZero,
                        "short write of the data header",
                    ),
                },
                "flow 0: connecting to 127.0.0.1:9 failed: short write of the data header".into(),
            ),
            (
                EngineError::ConnectTimeout {
                    connected: 2,
                    n: 5,
                    to: "127.0.0.1:9, [::1]:9".into(),
                    timeout,
                },
                "only 2 of 5 flows connected to 127.0.0.1:9, [::1]:9 within 30 s".into(),
            ),
            (
                EngineError::ArriveTimeout {
                    arrived: 1,
                    n: 4,
                    timeout: Duration::from_millis(30_400),
                },
                "only 1 of 4 flows arrived within 30 s".into(),
            ),
            (
                EngineError::UdpListener {
                    at: addr,
                    source: os(libc::EADDRNOTAVAIL),
                },
                format!(
                    "UDP listener on 127.0.0.1:9: {} (is 127.0.0.1 an address of this host?)",
                    os(libc::EADDRNOTAVAIL)
                ),
            ),
            (
                EngineError::UdpAnswerTimeout {
                    answered: 0,
                    n: 2,
                    to: "127.0.0.1:9".into(),
                    timeout,
                },
                "only 0 of 2 UDP flows were answered by 127.0.0.1:9 within 30 s (is UDP blocked on the way?)".into(),
            ),
            (
                EngineError::TooFewFds {
                    flows: 2000,
                    need: 2068,
                    who: "the agent".into(),
                    soft: 1024,
                    hard: 4096,
                },
                "2000 flows need about 2068 file descriptors, but the agent may open 1024 (hard limit 4096): raise it, e.g. `ulimit -n 4096` in the shell that starts it (LimitNOFILE= for a service), or use fewer flows".into(),
            ),
            (
                EngineError::CipherNotOffered {
                    cipher: "AES256-SHA256".into(),
                    version: "1.3".into(),
                    cert: "ecdsa-p256",
                    offered: "aes256-gcm (TLS 1.3)".into(),
                },
                "cipher 'AES256-SHA256' is not offered by rustls for TLS 1.3 with a ecdsa-p256 certificate; rustls offers: aes256-gcm (TLS 1.3) (CBC suites such as AES256-SHA256 need --backend openssl)".into(),
            ),
            (
                EngineError::CipherNotOffered {
                    cipher: "aes512-gcm".into(),
                    version: "1.2".into(),
                    cert: "rsa2048",
                    offered: "x".into(),
                },
                "cipher 'aes512-gcm' is not offered by rustls for TLS 1.2 with a rsa2048 certificate; rustls offers: x".into(),
            ),
            (
                EngineError::UnknownKx {
                    kx: "ffdhe2048".into(),
                    known: "x25519, p256 or p384",
                },
                "key exchange 'ffdhe2048' is unknown; use x25519, p256 or p384".into(),
            ),
            (
                EngineError::Unreadable {
                    flag: "--tls-ca",
                    path: "/nonexistent/ca.pem".into(),
                    source: os(libc::ENOENT),
                },
                format!("cannot read --tls-ca /nonexistent/ca.pem: {}", os(libc::ENOENT)),
            ),
            (
                EngineError::NoPemCert {
                    flag: "--tls-cert",
                    path: "c.pem".into(),
                },
                "--tls-cert c.pem holds no PEM certificate".into(),
            ),
            (
                EngineError::Rustls {
                    what: "TLS client settings",
                    source: rustls::Error::General("x".into()),
                },
                format!(
                    "TLS client settings: {}",
                    rustls::Error::General("x".into())
                ),
            ),
            (
                EngineError::Handshake {
                    id: 7,
                    source: io::Error::new(io::ErrorKind::InvalidData, "TLS: bad"),
                },
                "flow 7: TLS handshake failed: TLS: bad".into(),
            ),
            (
                EngineError::HandshakeTimeout {
                    pending: 3,
                    n: 8,
                    timeout,
                },
                "3 of 8 TLS handshakes did not finish within 30 s".into(),
            ),
        ];
        for (e, want) in cases {
            assert_eq!(e.to_string(), want);
        }
    }

    #[test]
    fn tls_settings_and_files_are_usage_the_rest_failed() {
        use crate::error::Error;
        let usage = Error::from(EngineError::NoPemCert {
            flag: "--tls-ca",
            path: "ca.pem".into(),
        });
        assert_eq!(
            usage,
            Error::Usage("--tls-ca ca.pem holds no PEM certificate".into())
        );
        assert!(matches!(
            Error::from(EngineError::KxNeedsTls13),
            Error::Usage(_)
        ));
        assert!(matches!(
            Error::from(EngineError::Cancelled),
            Error::Failed(_)
        ));
        assert!(matches!(
            Error::from(EngineError::AlreadyLoaded),
            Error::Failed(_)
        ));
    }
}
