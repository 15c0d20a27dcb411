//! TLS on data connections, inside the same epoll engine as clear text:
//! non-blocking sessions driven by the flows' read and write steps, no
//! thread per connection. The agent is the TLS server; it generates its
//! certificate (ECDSA P-256, RSA-2048 or RSA-4096, once per kind and process)
//! and hands the certificate (never the key) to the controller over the
//! authenticated control connection; the client verifies the agent against
//! exactly that certificate and name, so there is no "accept anything" mode.
//!
//! The backend is rustls with the aws-lc-rs provider (the fastest AES-GCM
//! here); suites and the key-exchange group are pinned per test and every
//! flow records what was negotiated.

use mio::net::TcpStream;
use rustls::crypto::{aws_lc_rs, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, Connection, HandshakeKind, ServerConfig, SupportedCipherSuite};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::sync::Arc;

use super::io::Io;
use super::EngineError;
// The agent and the controller read identity files through `tls`.
use super::tls_common::{identity, rustls_pemfile_certs, Identity};
pub use super::tls_common::{load_identity_files, read_identity_files};
use crate::model::flow::TlsInfo;
use crate::model::spec::{CertKind, TlsBackend, TlsSpec};

fn norm(s: &str) -> String {
    let s: String = s
        .to_ascii_lowercase()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    s.replace("tls13", "")
        .replace("tls", "")
        .replace("with", "")
}

pub fn suite_name(s: SupportedCipherSuite) -> String {
    format!("{:?}", s.suite())
}

/// A short name for a suite as users type it: `aes256-gcm`,
/// `ecdhe-rsa-aes128-gcm` (TLS 1.2).
fn short_name(s: SupportedCipherSuite) -> String {
    let n = suite_name(s);
    let (kx, rest) = match n.strip_prefix("TLS_ECDHE_") {
        Some(r) => {
            let (auth, cipher) = r.split_once("_WITH_").unwrap_or(("", r));
            (
                format!("ecdhe-{}-", auth.to_ascii_lowercase()),
                cipher.to_string(),
            )
        }
        None => (String::new(), n.trim_start_matches("TLS13_").to_string()),
    };
    let cipher = rest
        .replace("_SHA256", "")
        .replace("_SHA384", "")
        .replace("AES_128_GCM", "aes128-gcm")
        .replace("AES_256_GCM", "aes256-gcm")
        .replace("CHACHA20_POLY1305", "chacha20-poly1305");
    format!("{kx}{cipher}").to_ascii_lowercase()
}

/// What rustls offers, by short name and version, for error messages.
pub fn offered() -> Vec<String> {
    aws_lc_rs::ALL_CIPHER_SUITES
        .iter()
        .map(|s| {
            format!(
                "{} (TLS {})",
                short_name(*s),
                if matches!(s, SupportedCipherSuite::Tls13(_)) {
                    "1.3"
                } else {
                    "1.2"
                }
            )
        })
        .collect()
}

/// The provider for a spec: one suite (or the defaults) and one kx group.
pub(super) fn provider(
    t: &TlsSpec,
) -> Result<
    (
        CryptoProvider,
        Vec<&'static rustls::SupportedProtocolVersion>,
    ),
    EngineError,
> {
    if t.etm.is_some() {
        return Err(EngineError::EtmNeedsOpenssl);
    }
    let want13 = t.version.as_deref() != Some("1.2");
    let want12 = t.version.as_deref() != Some("1.3");
    let rsa = t.cert != CertKind::EcdsaP256;
    let usable = |s: &SupportedCipherSuite| match s {
        SupportedCipherSuite::Tls13(_) => want13,
        SupportedCipherSuite::Tls12(_) => {
            let n = suite_name(*s);
            want12 && (n.contains("_RSA_") == rsa)
        }
    };
    let suites: Vec<SupportedCipherSuite> = match &t.cipher {
        None => aws_lc_rs::DEFAULT_CIPHER_SUITES
            .iter()
            .copied()
            .filter(|s| usable(s))
            .collect(),
        Some(c) => {
            let want = norm(c);
            let found = aws_lc_rs::ALL_CIPHER_SUITES
                .iter()
                .copied()
                .filter(|s| usable(s))
                .find(|s| norm(&suite_name(*s)).contains(&want) || norm(&short_name(*s)) == want);
            match found {
                Some(s) => vec![s],
                None => {
                    return Err(EngineError::CipherNotOffered {
                        cipher: c.clone(),
                        version: t.version.as_deref().unwrap_or("1.3").to_string(),
                        cert: t.cert.name(),
                        offered: offered().join(", "),
                    })
                }
            }
        }
    };
    if suites.is_empty() {
        return Err(EngineError::NoSuite);
    }
    let kx: &'static dyn rustls::crypto::SupportedKxGroup = match t.kx.to_ascii_lowercase().as_str()
    {
        "x25519" => aws_lc_rs::kx_group::X25519,
        "x25519mlkem768" => aws_lc_rs::kx_group::X25519MLKEM768,
        "p256" | "secp256r1" => aws_lc_rs::kx_group::SECP256R1,
        "p384" | "secp384r1" => aws_lc_rs::kx_group::SECP384R1,
        other => {
            return Err(EngineError::UnknownKx {
                kx: other.to_string(),
                known: "x25519, x25519mlkem768, p256 or p384",
            })
        }
    };
    let has13 = suites
        .iter()
        .any(|s| matches!(s, SupportedCipherSuite::Tls13(_)));
    let has12 = suites
        .iter()
        .any(|s| matches!(s, SupportedCipherSuite::Tls12(_)));
    if has12 && !has13 && t.kx.eq_ignore_ascii_case("x25519mlkem768") {
        return Err(EngineError::KxNeedsTls13);
    }
    let mut versions = Vec::new();
    if has13 {
        versions.push(&rustls::version::TLS13);
    }
    if has12 {
        versions.push(&rustls::version::TLS12);
    }
    let provider = CryptoProvider {
        cipher_suites: suites,
        kx_groups: vec![kx],
        ..aws_lc_rs::default_provider()
    };
    Ok((provider, versions))
}

/// Checks a spec's TLS settings before a test starts (both ends call it).
pub fn check(t: &TlsSpec) -> Result<(), EngineError> {
    match t.backend {
        TlsBackend::Rustls => provider(t).map(|_| ()),
        #[cfg(feature = "openssl")]
        TlsBackend::Openssl => super::tls_openssl::check(t),
        #[cfg(not(feature = "openssl"))]
        TlsBackend::Openssl => Err(EngineError::NoOpenssl),
    }
}

pub fn server_config(t: &TlsSpec) -> Result<(Arc<ServerConfig>, Arc<Identity>), EngineError> {
    let (provider, versions) = provider(t)?;
    let id = identity(t.cert)?;
    let key = id.key().clone_key();
    let mut cfg = ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&versions)
        .map_err(|source| EngineError::Rustls {
            what: "TLS server settings",
            source,
        })?
        .with_no_client_auth()
        .with_single_cert(id.chain.clone(), key)
        .map_err(|source| EngineError::Rustls {
            what: "TLS server certificate",
            source,
        })?;
    if t.resume {
        cfg.session_storage = rustls::server::ServerSessionMemoryCache::new(65_536);
        cfg.send_tls13_tickets = 1;
    } else {
        cfg.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        cfg.send_tls13_tickets = 0;
    }
    Ok((Arc::new(cfg), id))
}

/// The certificates a client trusts: `--tls-ca`'s, else the agent's own.
pub(super) fn roots(t: &TlsSpec, agent_cert: &[u8]) -> Result<rustls::RootCertStore, EngineError> {
    let mut roots = rustls::RootCertStore::empty();
    match &t.ca_file {
        Some(path) => {
            let path = std::path::PathBuf::from(path);
            let pem = std::fs::read(&path).map_err(|source| EngineError::Unreadable {
                flag: "--tls-ca",
                path: path.clone(),
                source,
            })?;
            let certs = rustls_pemfile_certs(&pem).map_err(|source| EngineError::NotPem {
                flag: "--tls-ca",
                path: path.clone(),
                source,
            })?;
            let mut n = 0;
            for c in certs {
                roots.add(c).map_err(|source| EngineError::BadCa {
                    path: path.clone(),
                    source,
                })?;
                n += 1;
            }
            if n == 0 {
                return Err(EngineError::NoPemCert {
                    flag: "--tls-ca",
                    path,
                });
            }
        }
        None => roots
            .add(CertificateDer::from(agent_cert.to_vec()))
            .map_err(EngineError::AgentCertUnusable)?,
    }
    Ok(roots)
}

pub fn client_config(t: &TlsSpec, agent_cert: &[u8]) -> Result<Arc<ClientConfig>, EngineError> {
    let (provider, versions) = provider(t)?;
    let roots = roots(t, agent_cert)?;
    build_client(provider, &versions, roots, t.resume)
}

/// A client config from its parts; with `resume`, sessions are kept for
/// resumption (shared by every connection made with it).
pub(super) fn build_client(
    provider: CryptoProvider,
    versions: &[&'static rustls::SupportedProtocolVersion],
    roots: rustls::RootCertStore,
    resume: bool,
) -> Result<Arc<ClientConfig>, EngineError> {
    let mut cfg = ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(versions)
        .map_err(|source| EngineError::Rustls {
            what: "TLS client settings",
            source,
        })?
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.resumption = if resume {
        rustls::client::Resumption::in_memory_sessions(4096)
    } else {
        rustls::client::Resumption::disabled()
    };
    Ok(Arc::new(cfg))
}

/// A client of another tool's server (`--perf-server`), whose certificate
/// nobody gave to this side: with `--tls-ca`, that CA is trusted and the
/// name checked as for an agent; without, the certificate is taken as the
/// server shows it (a perf server makes one at each start: quinn's perf
/// client does the same), while its handshake signatures are still checked.
fn foreign_client_config(t: &TlsSpec) -> Result<Arc<ClientConfig>, EngineError> {
    let (provider, versions) = provider(t)?;
    let provider = Arc::new(provider);
    let mut cfg = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|source| EngineError::Rustls {
            what: "TLS client settings",
            source,
        })?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    cfg.resumption = if t.resume {
        rustls::client::Resumption::in_memory_sessions(4096)
    } else {
        rustls::client::Resumption::disabled()
    };
    Ok(Arc::new(cfg))
}

/// Accepts any certificate, checks the handshake's signatures with it.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Serves reads to rustls from one large recv: rustls asks for 4 KiB at a
/// time, which at tens of Gbit/s would mean a syscall per 4 KiB. The buffer
/// starts at one record and doubles (up to the test's read size, at most
/// 256 KiB: it is per flow, where clear text reads into one buffer per
/// worker) only when a read fills it, so a short connection (crr,
/// tls-handshake) never allocates more than a record.
struct ReadAhead {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// The most one socket read asks for: the test's read size (the
    /// length of the buffer the flow reads plaintext into), so TLS reads
    /// the socket in the same steps as clear text does.
    limit: usize,
}

const AHEAD_FIRST: usize = 17 * 1024;
const AHEAD_CAP: usize = 256 * 1024;

impl ReadAhead {
    fn new() -> Self {
        ReadAhead {
            buf: Vec::new(),
            start: 0,
            end: 0,
            limit: AHEAD_FIRST,
        }
    }
}

struct Sock<'a> {
    ahead: &'a mut ReadAhead,
    sock: &'a mut TcpStream,
}

impl Read for Sock<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let a = &mut *self.ahead;
        if a.start == a.end {
            a.start = 0;
            a.end = 0;
            if a.buf.is_empty() {
                a.buf.resize(AHEAD_FIRST, 0);
            }
            a.end = self.sock.read(&mut a.buf)?;
            if a.end == a.buf.len() && a.buf.len() < a.limit {
                // A full read: a bulk flow; read more per syscall from now on.
                a.buf.resize((a.buf.len() * 2).min(a.limit), 0);
            }
        }
        let n = (a.end - a.start).min(out.len());
        out[..n].copy_from_slice(&a.buf[a.start..a.start + n]);
        a.start += n;
        Ok(n)
    }
}

/// Writes the data header in the same writev as the first TLS records
/// (the ClientHello): two small writes would wait on Nagle and a delayed
/// ACK, 40 ms per connection.
struct Prefixed<'a> {
    sock: &'a mut TcpStream,
    prefix: &'a mut Option<Vec<u8>>,
}

impl Write for Prefixed<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[io::IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let Some(p) = self.prefix.take() else {
            return self.sock.write_vectored(bufs);
        };
        let mut v = Vec::with_capacity(bufs.len() + 1);
        v.push(io::IoSlice::new(&p));
        v.extend_from_slice(bufs);
        match self.sock.write_vectored(&v) {
            Ok(n) if n >= p.len() => Ok(n - p.len()),
            Ok(_) => Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "short write of the data header",
            )),
            Err(e) => {
                *self.prefix = Some(p);
                Err(e)
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// One rustls session on a flow's socket.
pub struct RustlsConn {
    conn: Connection,
    ahead: ReadAhead,
    /// The agent certificate's label for results (shared, not copied).
    cert: Arc<str>,
    /// The peer sent close_notify or closed the socket.
    eof: bool,
    /// close_notify is queued.
    closing: bool,
    /// Bytes to send in clear before the first record (the data header).
    prefix: Option<Vec<u8>>,
    /// Keep written records until the next write or `close`, so a one-shot
    /// answer and its close_notify leave in one segment (no Nagle wait).
    defer_flush: bool,
}

/// Largest plaintext accepted per write call (rustls cuts 16 KiB records).
const WRITE_CHUNK: usize = 64 * 1024;

fn tls_err(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}"))
}

impl RustlsConn {
    pub fn client(
        cfg: &Arc<ClientConfig>,
        name: &ServerName<'static>,
        label: &Arc<str>,
    ) -> io::Result<RustlsConn> {
        let c = rustls::ClientConnection::new(cfg.clone(), name.clone()).map_err(tls_err)?;
        Ok(RustlsConn::wrap(Connection::Client(c), label))
    }

    pub fn server(cfg: &Arc<ServerConfig>, label: &Arc<str>) -> io::Result<RustlsConn> {
        let c = rustls::ServerConnection::new(cfg.clone()).map_err(tls_err)?;
        Ok(RustlsConn::wrap(Connection::Server(c), label))
    }

    fn wrap(mut conn: Connection, cert: &Arc<str>) -> RustlsConn {
        conn.set_buffer_limit(Some(4 * WRITE_CHUNK));
        RustlsConn {
            conn,
            ahead: ReadAhead::new(),
            cert: cert.clone(),
            eof: false,
            closing: false,
            prefix: None,
            defer_flush: false,
        }
    }

    /// Sends `bytes` in clear ahead of the first TLS record.
    pub fn set_prefix(&mut self, bytes: &[u8]) {
        self.prefix = Some(bytes.to_vec());
    }

    pub fn set_defer_flush(&mut self, on: bool) {
        self.defer_flush = on;
    }

    /// rustls keeps resumption state in the shared config: nothing to do.
    pub fn done(&self) {}

    pub fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// Writes pending TLS records; Ok(true) when none are left.
    fn flush(&mut self, sock: &mut TcpStream) -> io::Result<bool> {
        while self.conn.wants_write() {
            let mut w = Prefixed {
                sock,
                prefix: &mut self.prefix,
            };
            match self.conn.write_tls(&mut w) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Reads TLS records from the socket into the session. Ok(false) when
    /// the socket would block.
    fn fill(&mut self, sock: &mut TcpStream) -> io::Result<bool> {
        loop {
            let mut s = Sock {
                ahead: &mut self.ahead,
                sock,
            };
            match self.conn.read_tls(&mut s) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(true);
                }
                Ok(_) => {
                    let st = self.conn.process_new_packets().map_err(|e| {
                        // Send the alert before failing, so the peer learns why.
                        let _ = self.conn.write_tls(sock);
                        tls_err(e)
                    })?;
                    if st.peer_has_closed() {
                        self.eof = true;
                    }
                    self.flush(sock)?;
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Advances the handshake without blocking. Ok(true) once it is done and
    /// every handshake record is written.
    pub fn handshake(&mut self, sock: &mut TcpStream) -> io::Result<bool> {
        loop {
            let flushed = self.flush(sock)?;
            if !self.conn.is_handshaking() {
                return Ok(flushed);
            }
            if !flushed && !self.conn.wants_read() {
                return Ok(false);
            }
            if !self.fill(sock)? {
                return Ok(false);
            }
            if self.eof && self.conn.is_handshaking() {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "TLS: the peer closed during the handshake",
                ));
            }
        }
    }

    /// Reads plaintext: Moved, Blocked (the socket would block) or Eof.
    pub fn read(&mut self, sock: &mut TcpStream, buf: &mut [u8]) -> io::Result<Io> {
        // Records left over from an earlier call (a handshake message, a
        // request written before the handshake ended) must not wait for a
        // writable edge that may never come while this side only reads.
        self.flush(sock)?;
        self.ahead.limit = buf.len().clamp(AHEAD_FIRST, AHEAD_CAP);
        loop {
            match self.conn.reader().read(buf) {
                Ok(0) => return Ok(Io::Eof),
                Ok(n) => return Ok(Io::Moved(n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(Io::Eof),
                Err(e) => return Err(e),
            }
            if self.eof {
                return Ok(Io::Eof);
            }
            if !self.fill(sock)? {
                return Ok(Io::Blocked);
            }
        }
    }

    /// Writes plaintext: Moved(n) once rustls holds it (encrypted and, as far
    /// as the socket takes it, sent); Blocked when records are still pending
    /// and the socket would block.
    pub fn write(&mut self, sock: &mut TcpStream, buf: &[u8]) -> io::Result<Io> {
        if !self.flush(sock)? {
            return Ok(Io::Blocked);
        }
        // Plaintext written during the handshake is buffered by rustls and
        // sent with the client's Finished; buffer it before driving the
        // handshake, or Finished and request leave as two small segments
        // and the second waits on Nagle for a delayed ACK (40 ms).
        let n = self
            .conn
            .writer()
            .write(&buf[..buf.len().min(WRITE_CHUNK)])?;
        if self.conn.is_handshaking() {
            self.handshake(sock)?;
        } else if n > 0 && !self.defer_flush {
            self.flush(sock)?;
        }
        if n == 0 {
            return Ok(Io::Blocked);
        }
        Ok(Io::Moved(n))
    }

    /// Sends what records are still pending (unless they are kept for
    /// the next write, `set_defer_flush`): Ok(true) once none are.
    pub fn flush_pending(&mut self, sock: &mut TcpStream) -> io::Result<bool> {
        if self.defer_flush {
            return Ok(true);
        }
        self.flush(sock)
    }

    /// Sends close_notify after everything written so far. Ok(false) while
    /// records are still pending (call again when writable), so closing the
    /// socket loses nothing.
    pub fn close(&mut self, sock: &mut TcpStream) -> io::Result<bool> {
        if !self.closing {
            self.closing = true;
            self.conn.send_close_notify();
        }
        self.flush(sock)
    }

    pub fn resumed(&self) -> bool {
        self.conn.handshake_kind() == Some(HandshakeKind::Resumed)
    }

    pub fn info(&self) -> TlsInfo {
        TlsInfo {
            backend: "rustls".into(),
            library: crate::measure::crypto::rustls_library(),
            protocol: self
                .conn
                .protocol_version()
                .map(|v| format!("{v:?}").replace("TLSv1_", "TLSv1."))
                .unwrap_or_default(),
            suite: self
                .conn
                .negotiated_cipher_suite()
                .map(suite_name)
                .unwrap_or_default(),
            kx_group: self
                .conn
                .negotiated_key_exchange_group()
                .map(|g| format!("{:?}", g.name()))
                .unwrap_or_default(),
            etm: None,
            cert: self.cert.to_string(),
            resumed: self.resumed(),
        }
    }
}

/// One TLS session on a flow's socket, by backend. The flows see one API:
/// non-blocking handshake, read and write returning `Io`, close.
pub enum TlsConn {
    Rustls(Box<RustlsConn>),
    #[cfg(feature = "openssl")]
    Openssl(super::tls_openssl::OsslConn),
}

macro_rules! each {
    ($self:ident, $c:ident => $e:expr) => {
        match $self {
            TlsConn::Rustls($c) => $e,
            #[cfg(feature = "openssl")]
            TlsConn::Openssl($c) => $e,
        }
    };
}

impl TlsConn {
    pub fn set_prefix(&mut self, bytes: &[u8]) {
        each!(self, c => c.set_prefix(bytes))
    }
    /// Keep written records until the next write or `close` (one-shot answers).
    pub fn set_defer_flush(&mut self, on: bool) {
        each!(self, c => c.set_defer_flush(on))
    }
    pub fn handshake(&mut self, sock: &mut TcpStream) -> io::Result<bool> {
        each!(self, c => c.handshake(sock))
    }
    pub fn read(&mut self, sock: &mut TcpStream, buf: &mut [u8]) -> io::Result<Io> {
        each!(self, c => c.read(sock, buf))
    }
    pub fn write(&mut self, sock: &mut TcpStream, buf: &[u8]) -> io::Result<Io> {
        each!(self, c => c.write(sock, buf))
    }
    pub fn close(&mut self, sock: &mut TcpStream) -> io::Result<bool> {
        each!(self, c => c.close(sock))
    }
    /// Sends the records a write left pending when the socket was full:
    /// Ok(true) once none are. A write that took the last plaintext
    /// returns Moved with its records still waiting; without this they
    /// wait for a next write that never comes (a 4 MiB finite transfer
    /// hung, and rr with such requests crawled).
    pub fn flush_pending(&mut self, sock: &mut TcpStream) -> io::Result<bool> {
        each!(self, c => c.flush_pending(sock))
    }
    pub fn resumed(&self) -> bool {
        each!(self, c => c.resumed())
    }
    /// A client's connection is over: keep its session for resumption.
    pub fn done(&mut self) {
        each!(self, c => c.done())
    }
    pub fn info(&self) -> TlsInfo {
        each!(self, c => c.info())
    }
}

/// One side's TLS settings for a test, by backend.
pub enum Role {
    /// A client config, the name it verifies, and the agent certificate's
    /// label (from the agent). Everything a connection needs is here, so
    /// making one allocates nothing beyond the session itself.
    Client(Arc<ClientConfig>, ServerName<'static>, Arc<str>),
    Server(Arc<ServerConfig>, Arc<str>),
    #[cfg(feature = "openssl")]
    Openssl(super::tls_openssl::OsslRole),
}

impl Role {
    pub fn session(&self) -> io::Result<TlsConn> {
        Ok(match self {
            Role::Client(c, name, label) => {
                TlsConn::Rustls(Box::new(RustlsConn::client(c, name, label)?))
            }
            Role::Server(s, label) => TlsConn::Rustls(Box::new(RustlsConn::server(s, label)?)),
            #[cfg(feature = "openssl")]
            Role::Openssl(o) => TlsConn::Openssl(o.session()?),
        })
    }

    /// The agent's role, the certificate the controller will trust, and
    /// its label.
    pub fn server(t: &TlsSpec) -> Result<(Role, Vec<u8>, String), EngineError> {
        match t.backend {
            TlsBackend::Rustls => {
                let (cfg, id) = server_config(t)?;
                Ok((
                    Role::Server(cfg, Arc::from(id.label.as_str())),
                    id.cert.as_ref().to_vec(),
                    id.label.clone(),
                ))
            }
            #[cfg(feature = "openssl")]
            TlsBackend::Openssl => {
                let (role, cert, label) = super::tls_openssl::OsslRole::server(t)?;
                Ok((Role::Openssl(role), cert, label))
            }
            #[cfg(not(feature = "openssl"))]
            TlsBackend::Openssl => Err(EngineError::NoOpenssl),
        }
    }

    /// A client's role toward another tool's server (`foreign_client_config`),
    /// with what results call that server's certificate.
    pub fn foreign_client(t: &TlsSpec) -> Result<Role, EngineError> {
        if t.backend != TlsBackend::Rustls {
            return Err(EngineError::ForeignNeedsRustls);
        }
        let (cfg, label) = match &t.ca_file {
            Some(ca) => (
                client_config(t, &[])?,
                format!("the server's, verified against --tls-ca {ca}"),
            ),
            None => (
                foreign_client_config(t)?,
                "the server's, not verified (no --tls-ca)".to_string(),
            ),
        };
        let name = ServerName::try_from(t.server_name.clone()).map_err(|source| {
            EngineError::ServerName {
                name: t.server_name.clone(),
                source,
            }
        })?;
        Ok(Role::Client(cfg, name, Arc::from(label.as_str())))
    }

    /// The controller's role, trusting `agent_cert` (or the spec's CA file).
    pub fn client(t: &TlsSpec, agent_cert: &[u8], label: &str) -> Result<Role, EngineError> {
        match t.backend {
            TlsBackend::Rustls => Ok(Role::Client(
                client_config(t, agent_cert)?,
                ServerName::try_from(t.server_name.clone()).map_err(|source| {
                    EngineError::ServerName {
                        name: t.server_name.clone(),
                        source,
                    }
                })?,
                Arc::from(label),
            )),
            #[cfg(feature = "openssl")]
            TlsBackend::Openssl => {
                super::tls_openssl::OsslRole::client(t, agent_cert, label).map(Role::Openssl)
            }
            #[cfg(not(feature = "openssl"))]
            TlsBackend::Openssl => Err(EngineError::NoOpenssl),
        }
    }
}

/// Runs the handshakes of established flows in parallel (one epoll loop),
/// before the timeline starts, so the window holds no handshake.
///
/// Without a role (clear text) the flows pass through unchanged.
pub fn handshake_all(
    flows: Vec<(u32, TcpStream)>,
    role: Option<&Role>,
    timeout: std::time::Duration,
) -> Result<Vec<(u32, TcpStream, Option<TlsConn>)>, EngineError> {
    use mio::{Events, Interest, Poll, Token};
    let Some(role) = role else {
        return Ok(flows.into_iter().map(|(i, s)| (i, s, None)).collect());
    };
    let mut poll = Poll::new().map_err(EngineError::Epoll)?;
    let mut events = Events::with_capacity(1024);
    let deadline = std::time::Instant::now() + timeout;
    let n = flows.len();
    let mut pending: HashMap<u32, (TcpStream, TlsConn)> = HashMap::new();
    let mut done = Vec::with_capacity(n);
    let fail = |id: u32, source: io::Error| EngineError::Handshake { id, source };
    for (id, mut s) in flows {
        let mut c = role.session().map_err(|e| fail(id, e))?;
        if c.handshake(&mut s).map_err(|e| fail(id, e))? {
            done.push((id, s, Some(c)));
            continue;
        }
        poll.registry()
            .register(
                &mut s,
                Token(id as usize),
                Interest::READABLE | Interest::WRITABLE,
            )
            .map_err(|e| fail(id, e))?;
        pending.insert(id, (s, c));
    }
    while !pending.is_empty() {
        let now = std::time::Instant::now();
        if now >= deadline {
            return Err(EngineError::HandshakeTimeout {
                pending: pending.len(),
                n,
                timeout,
            });
        }
        super::wait::events(
            &mut poll,
            &mut events,
            (deadline - now).min(std::time::Duration::from_millis(100)),
        )
        .map_err(EngineError::Epoll)?;
        for ev in events.iter() {
            let id = ev.token().0 as u32;
            let Some((s, c)) = pending.get_mut(&id) else {
                continue;
            };
            if c.handshake(s).map_err(|e| fail(id, e))? {
                let (mut s, c) = pending.remove(&id).expect("pending");
                let _ = poll.registry().deregister(&mut s);
                done.push((id, s, Some(c)));
            }
        }
    }
    done.sort_by_key(|(id, _, _)| *id);
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_select_one_suite_and_unknown_ones_list_the_offer() {
        let t = TlsSpec {
            cipher: Some("aes256-gcm".into()),
            ..Default::default()
        };
        let (p, v) = provider(&t).unwrap();
        assert_eq!(p.cipher_suites.len(), 1);
        assert_eq!(suite_name(p.cipher_suites[0]), "TLS13_AES_256_GCM_SHA384");
        assert_eq!(v.len(), 1);
        let t12 = TlsSpec {
            cipher: Some("aes128-gcm".into()),
            version: Some("1.2".into()),
            cert: CertKind::Rsa2048,
            ..Default::default()
        };
        let (p, _) = provider(&t12).unwrap();
        assert_eq!(
            suite_name(p.cipher_suites[0]),
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
        );
        let full = TlsSpec {
            cipher: Some("ECDHE-ECDSA-AES256-GCM-SHA384".into()),
            version: Some("1.2".into()),
            ..Default::default()
        };
        let (p, _) = provider(&full).unwrap();
        assert_eq!(
            suite_name(p.cipher_suites[0]),
            "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"
        );
        let cbc = TlsSpec {
            cipher: Some("AES256-SHA256".into()),
            ..Default::default()
        };
        let e = provider(&cbc).unwrap_err().to_string();
        assert!(e.contains("rustls offers: aes256-gcm (TLS 1.3)"), "{e}");
        assert!(e.contains("--backend openssl"), "{e}");
        let kx = TlsSpec {
            kx: "ffdhe2048".into(),
            ..Default::default()
        };
        assert!(provider(&kx).unwrap_err().to_string().contains("x25519"));
    }
}
