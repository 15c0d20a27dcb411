//! The OpenSSL backend (cargo feature `openssl`): the system library through
//! the openssl crate, for what rustls cannot do, such as the seeds' TLS 1.2
//! AES-256-CBC suites (AES256-SHA256) with encrypt-then-MAC on or off. It
//! runs in the same epoll engine as rustls: OpenSSL reads and writes the
//! flow's socket through a small non-owning fd wrapper, and WANT_READ /
//! WANT_WRITE become `Io::Blocked`.

use mio::net::TcpStream;
use openssl::pkey::PKey;
use openssl::ssl::{
    ErrorCode, ShutdownResult, Ssl, SslContext, SslContextBuilder, SslMethod, SslMode, SslOptions,
    SslSession, SslSessionCacheMode, SslStream, SslVerifyMode, SslVersion,
};
use openssl::x509::store::X509StoreBuilder;
use openssl::x509::verify::X509VerifyFlags;
use openssl::x509::X509;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex};

use super::io::Io;
use super::tls_common::{identity, is_aead_name};
use super::EngineError;
use crate::model::flow::TlsInfo;
use crate::model::spec::{CertKind, TlsSpec};

/// OpenSSL's option bit that turns encrypt-then-MAC off (SSL_OP_NO_ENCRYPT_THEN_MAC).
const NO_ENCRYPT_THEN_MAC: u64 = 0x0008_0000;

/// The TLS 1.3 suites OpenSSL names, by linerate's short names.
const TLS13: &[(&str, &str)] = &[
    ("aes128-gcm", "TLS_AES_128_GCM_SHA256"),
    ("aes256-gcm", "TLS_AES_256_GCM_SHA384"),
    ("chacha20-poly1305", "TLS_CHACHA20_POLY1305_SHA256"),
];

/// TLS 1.2 suites worth naming; `offered12` keeps those this OpenSSL has.
const TLS12_CANDIDATES: &[&str] = &[
    "AES128-SHA",
    "AES256-SHA",
    "AES128-SHA256",
    "AES256-SHA256",
    "AES128-GCM-SHA256",
    "AES256-GCM-SHA384",
    "ECDHE-RSA-AES128-SHA256",
    "ECDHE-RSA-AES256-SHA384",
    "ECDHE-RSA-AES128-GCM-SHA256",
    "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-RSA-CHACHA20-POLY1305",
    "ECDHE-ECDSA-AES128-SHA256",
    "ECDHE-ECDSA-AES256-SHA384",
    "ECDHE-ECDSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305",
    "DHE-RSA-AES128-GCM-SHA256",
    "DHE-RSA-AES256-GCM-SHA384",
];

/// The TLS 1.2 suites of `TLS12_CANDIDATES` this OpenSSL accepts.
pub fn offered12() -> Vec<&'static str> {
    TLS12_CANDIDATES
        .iter()
        .copied()
        .filter(|c| {
            SslContext::builder(SslMethod::tls())
                .map(|mut b| b.set_cipher_list(c).is_ok())
                .unwrap_or(false)
        })
        .collect()
}

/// What a spec asks of OpenSSL: TLS 1.3 suites, or a TLS 1.2 cipher list.
struct Plan {
    v13: Option<String>,
    v12: Option<String>,
    version: SslVersion,
    groups: String,
    /// A CBC (non-AEAD) TLS 1.2 suite, where encrypt-then-MAC applies.
    cbc: bool,
}

fn plan(t: &TlsSpec) -> Result<Plan, EngineError> {
    let want12 = t.version.as_deref() == Some("1.2");
    let ecdsa = t.cert == CertKind::EcdsaP256;
    let groups = match t.kx.to_ascii_lowercase().as_str() {
        "x25519" => "X25519",
        "p256" | "secp256r1" => "P-256",
        "p384" | "secp384r1" => "P-384",
        "x25519mlkem768" => {
            return Err(EngineError::KxNotInOpenssl {
                openssl: openssl::version::version(),
            })
        }
        other => {
            return Err(EngineError::UnknownKx {
                kx: other.to_string(),
                known: "x25519, p256 or p384",
            })
        }
    }
    .to_string();
    let (v13, v12) = match t.cipher.as_deref() {
        None if want12 => (
            None,
            Some(
                if ecdsa {
                    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-AES128-GCM-SHA256"
                } else {
                    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-GCM-SHA256"
                }
                .to_string(),
            ),
        ),
        None => (
            Some(TLS13.iter().map(|x| x.1).collect::<Vec<_>>().join(":")),
            None,
        ),
        Some(c) => {
            let lower = c.to_ascii_lowercase();
            let short = TLS13.iter().find(|(s, full)| {
                *s == lower
                    || full.eq_ignore_ascii_case(c)
                    || format!("tls13_{}", &full[4..]).eq_ignore_ascii_case(c)
            });
            match short {
                Some((_, full)) if !want12 => (Some(full.to_string()), None),
                Some((s, _)) => {
                    // The TLS 1.2 ECDHE suite with the same cipher.
                    let cipher = match *s {
                        "aes128-gcm" => "AES128-GCM-SHA256",
                        "aes256-gcm" => "AES256-GCM-SHA384",
                        _ => "CHACHA20-POLY1305",
                    };
                    (
                        None,
                        Some(format!(
                            "ECDHE-{}-{cipher}",
                            if ecdsa { "ECDSA" } else { "RSA" }
                        )),
                    )
                }
                None => {
                    // An OpenSSL TLS 1.2 cipher string, e.g. AES256-SHA256.
                    if t.version.as_deref() == Some("1.3") {
                        return Err(EngineError::Tls12Suite(c.to_string()));
                    }
                    if ecdsa && !c.to_ascii_uppercase().contains("ECDSA") {
                        return Err(EngineError::NeedsRsa(c.to_string()));
                    }
                    (None, Some(c.to_string()))
                }
            }
        }
    };
    let cbc = v12.as_deref().map(|c| !is_aead_name(c)).unwrap_or(false);
    if t.etm.is_some() && !cbc {
        return Err(EngineError::EtmNeedsCbc);
    }
    Ok(Plan {
        version: if v12.is_some() {
            SslVersion::TLS1_2
        } else {
            SslVersion::TLS1_3
        },
        v13,
        v12,
        groups,
        cbc,
    })
}

fn ctx(t: &TlsSpec, server: bool) -> Result<SslContextBuilder, EngineError> {
    let p = plan(t)?;
    fn e(what: &'static str) -> impl Fn(openssl::error::ErrorStack) -> EngineError {
        move |source| EngineError::Openssl { what, source }
    }
    let mut b = SslContext::builder(if server {
        SslMethod::tls_server()
    } else {
        SslMethod::tls_client()
    })
    .map_err(e("context"))?;
    b.set_min_proto_version(Some(p.version))
        .map_err(e("version"))?;
    b.set_max_proto_version(Some(p.version))
        .map_err(e("version"))?;
    if let Some(s) = &p.v13 {
        b.set_ciphersuites(s)
            .map_err(|_| EngineError::OpensslNo13(s.clone()))?;
    }
    if let Some(c) = &p.v12 {
        b.set_cipher_list(c)
            .map_err(|_| EngineError::OpensslCipherNotOffered {
                cipher: c.clone(),
                openssl: openssl::version::version(),
                tls13: TLS13.iter().map(|x| x.0).collect::<Vec<_>>().join(", "),
                tls12: offered12().join(", "),
            })?;
    }
    b.set_groups_list(&p.groups).map_err(e("groups"))?;
    b.set_mode(SslMode::ENABLE_PARTIAL_WRITE | SslMode::ACCEPT_MOVING_WRITE_BUFFER);
    if t.etm == Some(false) {
        b.set_options(SslOptions::from_bits_retain(NO_ENCRYPT_THEN_MAC as _));
    }
    if t.resume {
        b.set_session_cache_mode(if server {
            SslSessionCacheMode::SERVER
        } else {
            SslSessionCacheMode::CLIENT
        });
    } else {
        b.set_session_cache_mode(SslSessionCacheMode::OFF);
        b.set_options(SslOptions::NO_TICKET);
        if server {
            b.set_num_tickets(0).map_err(e("tickets"))?;
        }
    }
    Ok(b)
}

/// Checks a spec against OpenSSL before a test starts.
pub fn check(t: &TlsSpec) -> Result<(), EngineError> {
    ctx(t, true).map(|_| ())
}

/// One side's OpenSSL settings.
pub struct OsslRole {
    ctx: SslContext,
    client: bool,
    server_name: String,
    /// Client: the last session, offered for resumption.
    last: Arc<Mutex<Option<SslSession>>>,
    cbc: bool,
    etm: Option<bool>,
    /// The one key-exchange group offered, as OpenSSL names it.
    groups: String,
    /// The agent certificate's label for results.
    label: Arc<str>,
    /// Offer the last session for resumption (client).
    resume: bool,
}

impl OsslRole {
    /// The agent's settings, its certificate and the certificate's label.
    pub fn server(t: &TlsSpec) -> Result<(OsslRole, Vec<u8>, String), EngineError> {
        use rustls::pki_types::PrivateKeyDer;
        let id = identity(t.cert)?;
        let mut b = ctx(t, true)?;
        let agent = |what: &'static str| move |source| EngineError::AgentIdentity { what, source };
        let cert = X509::from_der(&id.cert).map_err(agent("agent certificate"))?;
        let key = match id.key() {
            PrivateKeyDer::Pkcs8(k) => PKey::private_key_from_pkcs8(k.secret_pkcs8_der()),
            PrivateKeyDer::Sec1(k) => openssl::ec::EcKey::private_key_from_der(k.secret_sec1_der())
                .and_then(PKey::from_ec_key),
            PrivateKeyDer::Pkcs1(k) => {
                openssl::rsa::Rsa::private_key_from_der(k.secret_pkcs1_der())
                    .and_then(PKey::from_rsa)
            }
            _ => return Err(EngineError::UnsupportedKey),
        }
        .map_err(agent("agent key"))?;
        b.set_certificate(&cert)
            .map_err(agent("agent certificate"))?;
        for extra in id.chain.iter().skip(1) {
            let c = X509::from_der(extra).map_err(agent("agent certificate chain"))?;
            b.add_extra_chain_cert(c)
                .map_err(agent("agent certificate chain"))?;
        }
        b.set_private_key(&key).map_err(agent("agent key"))?;
        let p = plan(t)?;
        Ok((
            OsslRole {
                ctx: b.build(),
                client: false,
                server_name: t.server_name.clone(),
                last: Arc::new(Mutex::new(None)),
                cbc: p.cbc,
                etm: t.etm,
                groups: p.groups,
                label: Arc::from(id.label.as_str()),
                resume: t.resume,
            },
            id.cert.as_ref().to_vec(),
            id.label.clone(),
        ))
    }

    pub fn client(t: &TlsSpec, agent_cert: &[u8], label: &str) -> Result<OsslRole, EngineError> {
        let mut b = ctx(t, false)?;
        let mut store = X509StoreBuilder::new().map_err(EngineError::CertStore)?;
        match &t.ca_file {
            Some(path) => {
                let path = std::path::PathBuf::from(path);
                let pem = std::fs::read(&path).map_err(|source| EngineError::Unreadable {
                    flag: "--tls-ca",
                    path: path.clone(),
                    source,
                })?;
                let certs =
                    X509::stack_from_pem(&pem).map_err(|source| EngineError::OpensslCa {
                        path: path.clone(),
                        source,
                    })?;
                if certs.is_empty() {
                    return Err(EngineError::NoPemCert {
                        flag: "--tls-ca",
                        path,
                    });
                }
                for c in certs {
                    store.add_cert(c).map_err(EngineError::CertStore)?;
                }
            }
            None => store
                .add_cert(
                    X509::from_der(agent_cert).map_err(EngineError::OpensslAgentCertUnusable)?,
                )
                .map_err(EngineError::CertStore)?,
        }
        // The agent's certificate is its own anchor (self-signed, not a CA).
        store
            .set_flags(X509VerifyFlags::PARTIAL_CHAIN)
            .map_err(EngineError::CertStore)?;
        b.set_verify_cert_store(store.build())
            .map_err(EngineError::CertStore)?;
        b.set_verify(SslVerifyMode::PEER);
        let p = plan(t)?;
        Ok(OsslRole {
            ctx: b.build(),
            client: true,
            server_name: t.server_name.clone(),
            last: Arc::new(Mutex::new(None)),
            cbc: p.cbc,
            etm: t.etm,
            groups: p.groups,
            label: Arc::from(label),
            resume: t.resume,
        })
    }

    pub fn session(&self) -> io::Result<OsslConn> {
        let err = |e: openssl::error::ErrorStack| io::Error::other(format!("TLS (OpenSSL): {e}"));
        let mut ssl = Ssl::new(&self.ctx).map_err(err)?;
        if self.client {
            ssl.set_connect_state();
            ssl.param_mut().set_host(&self.server_name).map_err(err)?;
            if self.resume {
                if let Some(s) = self.last.lock().expect("session lock").as_ref() {
                    // SAFETY: the session comes from this same context.
                    unsafe { ssl.set_session(s) }.map_err(err)?;
                }
            }
        } else {
            ssl.set_accept_state();
        }
        let io = FdIo {
            fd: -1,
            out: Vec::new(),
            defer: false,
        };
        let stream = SslStream::new(ssl, io).map_err(err)?;
        Ok(OsslConn {
            stream,
            cert: self.label.clone(),
            last: self.client.then(|| self.last.clone()),
            cbc: self.cbc,
            etm: self.etm,
            kx: self.groups.clone(),
        })
    }
}

/// The flow's socket as OpenSSL's transport, without owning it. OpenSSL
/// writes each record (and each handshake message) separately; they are
/// collected here and sent with one send after each OpenSSL call, because
/// a second sub-MSS segment would wait on Nagle for a delayed ACK (40 ms).
/// The first send carries the clear prefix (the data header) too, and
/// `defer` holds everything until `close`, so an answer leaves with its
/// close_notify.
struct FdIo {
    fd: RawFd,
    out: Vec<u8>,
    defer: bool,
}

/// Collected bytes beyond which OpenSSL is told to wait (WANT_WRITE).
const OUT_LIMIT: usize = 512 * 1024;

fn last_err() -> io::Error {
    io::Error::last_os_error()
}

impl FdIo {
    /// Sends collected bytes; Ok(true) when none are left.
    fn flush_out(&mut self) -> io::Result<bool> {
        while !self.out.is_empty() {
            // SAFETY: a valid fd and buffer; MSG_NOSIGNAL keeps SIGPIPE away.
            let n = unsafe {
                libc::send(
                    self.fd,
                    self.out.as_ptr().cast(),
                    self.out.len(),
                    libc::MSG_NOSIGNAL,
                )
            };
            if n < 0 {
                let e = last_err();
                return match e.kind() {
                    io::ErrorKind::WouldBlock => Ok(false),
                    io::ErrorKind::Interrupted => continue,
                    _ => Err(e),
                };
            }
            self.out.drain(..n as usize);
        }
        Ok(true)
    }
}

impl Read for FdIo {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: a valid fd and buffer.
        let n = unsafe { libc::recv(self.fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            Err(last_err())
        } else {
            Ok(n as usize)
        }
    }
}

impl Write for FdIo {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.out.len() >= OUT_LIMIT && !self.flush_out()? {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

pub struct OsslConn {
    stream: SslStream<FdIo>,
    cert: Arc<str>,
    last: Option<Arc<Mutex<Option<SslSession>>>>,
    cbc: bool,
    etm: Option<bool>,
    kx: String,
}

/// WANT_READ / WANT_WRITE (and a blocked socket under them) are `Blocked`.
fn classify(e: openssl::ssl::Error) -> io::Result<Io> {
    match e.code() {
        ErrorCode::WANT_READ | ErrorCode::WANT_WRITE => Ok(Io::Blocked),
        ErrorCode::ZERO_RETURN => Ok(Io::Eof),
        ErrorCode::SYSCALL if e.io_error().is_none() => Ok(Io::Eof),
        _ => match e.into_io_error() {
            Ok(io) if io.kind() == io::ErrorKind::WouldBlock => Ok(Io::Blocked),
            Ok(io) => Err(io),
            Err(e) => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("TLS (OpenSSL): {e}"),
            )),
        },
    }
}

impl OsslConn {
    fn bind(&mut self, sock: &TcpStream) {
        self.stream.get_mut().fd = sock.as_raw_fd();
    }

    pub fn set_prefix(&mut self, bytes: &[u8]) {
        self.stream
            .get_mut()
            .out
            .splice(0..0, bytes.iter().copied());
    }

    /// Sends what OpenSSL wrote during the last call, unless deferred.
    fn push(&mut self) -> io::Result<bool> {
        let io = self.stream.get_mut();
        if io.defer {
            return Ok(true);
        }
        io.flush_out()
    }

    pub fn set_defer_flush(&mut self, on: bool) {
        self.stream.get_mut().defer = on;
    }

    pub fn handshake(&mut self, sock: &mut TcpStream) -> io::Result<bool> {
        self.bind(sock);
        let r = self.stream.do_handshake();
        let flushed = self.stream.get_mut().flush_out()?;
        match r {
            Ok(()) => Ok(flushed),
            Err(e) => match classify(e)? {
                Io::Blocked => Ok(false),
                Io::Eof => Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "TLS (OpenSSL): the peer closed during the handshake",
                )),
                Io::Moved(_) => Ok(false),
            },
        }
    }

    pub fn read(&mut self, sock: &mut TcpStream, buf: &mut [u8]) -> io::Result<Io> {
        self.bind(sock);
        // Reading may produce handshake records: they go out now, whatever
        // is deferred (a deferred answer cannot exist before they are sent).
        self.stream.get_mut().flush_out()?;
        let r = self.stream.ssl_read(buf);
        self.stream.get_mut().flush_out()?;
        match r {
            Ok(0) => Ok(Io::Eof),
            Ok(n) => Ok(Io::Moved(n)),
            Err(e) => classify(e),
        }
    }

    pub fn write(&mut self, sock: &mut TcpStream, buf: &[u8]) -> io::Result<Io> {
        self.bind(sock);
        if !self.stream.get_mut().defer && !self.stream.get_mut().flush_out()? {
            return Ok(Io::Blocked);
        }
        // OpenSSL returns after each record (partial writes are on): take
        // the whole chunk first, so its records leave in one send and the
        // second does not wait on Nagle.
        let buf = &buf[..buf.len().min(256 * 1024)];
        let mut done = 0;
        let mut failed = None;
        while done < buf.len() && self.stream.get_ref().out.len() < OUT_LIMIT {
            match self.stream.ssl_write(&buf[done..]) {
                Ok(n) => done += n,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        self.push()?;
        match (done, failed) {
            (0, Some(e)) => classify(e),
            (0, None) => Ok(Io::Blocked),
            (n, _) => Ok(Io::Moved(n)),
        }
    }

    /// Sends collected records (unless kept for the next write): Ok(true)
    /// once none are left.
    pub fn flush_pending(&mut self, sock: &mut TcpStream) -> io::Result<bool> {
        self.bind(sock);
        let io = self.stream.get_mut();
        if io.defer {
            return Ok(true);
        }
        io.flush_out()
    }

    pub fn close(&mut self, sock: &mut TcpStream) -> io::Result<bool> {
        self.bind(sock);
        match self.stream.shutdown() {
            Ok(ShutdownResult::Sent) | Ok(ShutdownResult::Received) => {}
            Err(e) => {
                if let Io::Blocked = classify(e)? {
                    return Ok(false);
                }
            }
        }
        let io = self.stream.get_mut();
        io.defer = false;
        io.flush_out()
    }

    pub fn resumed(&self) -> bool {
        self.stream.ssl().session_reused()
    }

    pub fn done(&mut self) {
        if let (Some(last), Some(s)) = (&self.last, self.stream.ssl().session()) {
            *last.lock().expect("session lock") = Some(s.to_owned());
            // A client freed without a shutdown marks its session not
            // resumable; the agent closed first, so mark ours as sent.
            self.stream.set_shutdown(openssl::ssl::ShutdownState::SENT);
        }
    }

    pub fn info(&self) -> TlsInfo {
        let ssl = self.stream.ssl();
        TlsInfo {
            backend: "openssl".into(),
            library: crate::measure::crypto::openssl_library(),
            protocol: ssl.version_str().to_string(),
            suite: ssl
                .current_cipher()
                .map(|c| c.name().to_string())
                .unwrap_or_default(),
            // OpenSSL 3.0 has no getter for the negotiated group; only one is offered.
            kx_group: self.kx.clone(),
            etm: self.cbc.then(|| self.etm.unwrap_or(true)),
            cert: self.cert.to_string(),
            resumed: self.resumed(),
        }
    }
}
