//! QUIC's settings for one test, from what the test already has: the TLS
//! configs control made for it (so TLS over TCP and QUIC share one rustls
//! and one crypto provider, aws-lc-rs, and their CPU per byte compares),
//! the congestion control (`--cc`), and windows large enough that flow
//! control is not what a bulk test measures.

use std::sync::Arc;

use quinn_proto::congestion::{BbrConfig, ControllerFactory, CubicConfig, NewRenoConfig};
use quinn_proto::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn_proto::{ClientConfig, ServerConfig, TransportConfig, VarInt};
use rustls::client::{ClientSessionStore, Tls12ClientSessionValue, Tls13ClientSessionValue};
use rustls::crypto::aws_lc_rs::cipher_suite::TLS13_AES_128_GCM_SHA256;
use rustls::pki_types::ServerName;

use crate::engine::tls::Role;
use crate::model::flow::TlsInfo;
use crate::model::spec::TestSpec;

/// The ALPN of the common QUIC performance protocol
/// (draft-banks-quic-performance): what quinn's `perf` speaks.
pub const ALPN: &[u8] = b"perf";

/// The congestion controls quinn-proto offers, by the name `--cc` takes;
/// the first is its default.
pub const CONTROLLERS: &[&str] = &["cubic", "bbr", "newreno"];

/// The name of the controller `cc` chooses (None: quinn's default),
/// or None when quinn has none by that name.
pub fn controller(cc: Option<&str>) -> Option<&'static str> {
    match cc.map(str::to_ascii_lowercase).as_deref() {
        None | Some("cubic") => Some("cubic"),
        Some("bbr") => Some("bbr"),
        Some("newreno") | Some("reno") => Some("newreno"),
        Some(_) => None,
    }
}

/// Per-connection and per-stream receive windows: 64 MiB, enough for
/// 40 Gbit/s at 10 ms, so a bulk test is bound by the path and the CPUs
/// (as a TCP stream with autotuned buffers is), not by flow control.
const WINDOW: u32 = 64 << 20;

/// Streams a peer may have open at once, each way, unless a test asks
/// for more: quinn's default. quinn-proto builds the state of every
/// stream the peer may open as a connection starts (and frees it as it
/// ends), so this limit is paid on every handshake: at 1,024 each way it
/// was about a tenth of a server's CPU per handshake (hash-table inserts
/// and frees, perf).
const STREAMS: u32 = 100;

/// Streams the peer may have open at once: `--outstanding` where it asks
/// for more than `STREAMS` (quic-rr keeps that many under way), since a
/// stream's credit comes back only as one ends.
fn streams(spec: &TestSpec) -> u32 {
    spec.outstanding.max(STREAMS)
}

fn transport(spec: &TestSpec) -> Arc<TransportConfig> {
    let mut t = TransportConfig::default();
    t.stream_receive_window(VarInt::from_u32(WINDOW))
        .receive_window(VarInt::from_u32(WINDOW))
        .send_window(u64::from(WINDOW))
        .max_concurrent_uni_streams(VarInt::from_u32(STREAMS))
        .max_concurrent_bidi_streams(VarInt::from_u32(streams(spec)))
        .enable_segmentation_offload(true);
    let factory: Arc<dyn ControllerFactory + Send + Sync> =
        match controller(spec.cc.as_deref()).unwrap_or("cubic") {
            "bbr" => Arc::new(BbrConfig::default()),
            "newreno" => Arc::new(NewRenoConfig::default()),
            _ => Arc::new(CubicConfig::default()),
        };
    t.congestion_controller_factory(factory);
    Arc::new(t)
}

/// The initial packets' suite: QUIC's Initial keys are always
/// AES-128-GCM, whatever suite the test chose for its data.
fn initial() -> Option<rustls::quic::Suite> {
    TLS13_AES_128_GCM_SHA256.tls13()?.quic_suite()
}

/// Why a TLS setting cannot carry QUIC.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("QUIC runs on rustls: the OpenSSL backend has no QUIC here")]
    NotRustls,
    #[error("QUIC needs TLS 1.3, which this test's TLS settings leave out ({0})")]
    NoTls13(String),
}

/// What a QUIC flow's TLS is, as far as quinn lets it be seen: the suite
/// is the first TLS 1.3 suite of `provider` (the client's offer, or the
/// server's suites, of which a linerate client offers the same first):
/// quinn does not expose the negotiated one.
fn tls_info(spec: &TestSpec, provider: &rustls::crypto::CryptoProvider, cert: &str) -> TlsInfo {
    let suite = provider
        .cipher_suites
        .iter()
        .find(|s| matches!(s, rustls::SupportedCipherSuite::Tls13(_)))
        .map(|s| crate::engine::tls::suite_name(*s))
        .unwrap_or_default();
    TlsInfo {
        backend: "rustls".into(),
        library: crate::measure::crypto::rustls_library(),
        protocol: "TLSv1.3 (QUIC)".into(),
        suite,
        kx_group: spec.tls.as_ref().map(|t| t.kx.clone()).unwrap_or_default(),
        etm: None,
        cert: cert.to_string(),
        resumed: false,
    }
}

/// The client's QUIC config, from the test's TLS role (the rustls config
/// control built, trusting the agent's certificate), the name it verifies
/// and what its TLS is.
pub fn client(spec: &TestSpec, role: &Role) -> Result<Client, ConfigError> {
    let Role::Client(cfg, name, label) = role else {
        return Err(ConfigError::NotRustls);
    };
    let info = tls_info(spec, cfg.crypto_provider(), label);
    let mut tls = (**cfg).clone();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    tls.enable_early_data = true;
    let resume = spec.tls.as_ref().is_some_and(|t| t.resume);
    let tickets = resume.then(|| Arc::new(Tickets::new()));
    if let Some(t) = &tickets {
        tls.resumption = rustls::client::Resumption::store(t.clone());
    }
    let initial = initial().ok_or(ConfigError::NoTls13("no AES-128-GCM".into()))?;
    let quic = QuicClientConfig::with_initial(Arc::new(tls), initial)
        .map_err(|e| ConfigError::NoTls13(e.to_string()))?;
    let mut c = ClientConfig::new(Arc::new(quic));
    c.transport_config(transport(spec));
    let server_name = match name {
        rustls::pki_types::ServerName::DnsName(d) => d.as_ref().to_string(),
        other => other.to_str().into_owned(),
    };
    Ok(Client {
        config: c,
        server_name,
        info,
        tickets,
    })
}

/// A client's QUIC settings for one test.
pub struct Client {
    pub config: ClientConfig,
    /// The name it verifies the agent's certificate against.
    pub server_name: String,
    pub info: TlsInfo,
    /// With resumption: its session store, which counts the tickets.
    pub tickets: Option<Arc<Tickets>>,
}

/// A client's TLS session store that counts the session tickets it was
/// given: a client that resumes with 0-RTT waits for its next ticket
/// before it closes (the server sends it after the handshake, a round
/// trip after the 0-RTT answer), else every other connection would find
/// none and run a full handshake.
#[derive(Debug)]
pub struct Tickets {
    store: rustls::client::ClientSessionMemoryCache,
    received: std::sync::atomic::AtomicU64,
}

impl Tickets {
    fn new() -> Self {
        Tickets {
            store: rustls::client::ClientSessionMemoryCache::new(4096),
            received: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Tickets received so far (by every connection of this config).
    pub fn received(&self) -> u64 {
        self.received.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl ClientSessionStore for Tickets {
    fn set_kx_hint(&self, name: ServerName<'static>, group: rustls::NamedGroup) {
        self.store.set_kx_hint(name, group)
    }

    fn kx_hint(&self, name: &ServerName<'_>) -> Option<rustls::NamedGroup> {
        self.store.kx_hint(name)
    }

    fn set_tls12_session(&self, name: ServerName<'static>, v: Tls12ClientSessionValue) {
        self.store.set_tls12_session(name, v)
    }

    fn tls12_session(&self, name: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        self.store.tls12_session(name)
    }

    fn remove_tls12_session(&self, name: &ServerName<'static>) {
        self.store.remove_tls12_session(name)
    }

    fn insert_tls13_ticket(&self, name: ServerName<'static>, v: Tls13ClientSessionValue) {
        self.received
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.store.insert_tls13_ticket(name, v)
    }

    fn take_tls13_ticket(&self, name: &ServerName<'static>) -> Option<Tls13ClientSessionValue> {
        self.store.take_tls13_ticket(name)
    }
}

/// A QUIC server config over the rustls config `tls` (ALPN "perf", 0-RTT
/// allowed) with the transport settings of `spec`.
fn quic_server(
    spec: &TestSpec,
    tls: &rustls::ServerConfig,
) -> Result<Arc<ServerConfig>, ConfigError> {
    let mut tls = tls.clone();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    tls.max_early_data_size = u32::MAX;
    let initial = initial().ok_or(ConfigError::NoTls13("no AES-128-GCM".into()))?;
    let quic = QuicServerConfig::with_initial(Arc::new(tls), initial)
        .map_err(|e| ConfigError::NoTls13(e.to_string()))?;
    let mut s = ServerConfig::with_crypto(Arc::new(quic));
    s.transport_config(transport(spec));
    Ok(Arc::new(s))
}

/// The perf server's config (`serve --quic-perf`): the agent's certificate
/// (generated, or `serve --tls-cert`), TLS 1.3's default suites, session
/// tickets for clients that resume (and their 0-RTT requests).
pub fn perf_server() -> std::io::Result<Arc<ServerConfig>> {
    let t = crate::model::spec::TlsSpec {
        resume: true,
        ..Default::default()
    };
    let (tls, _) =
        crate::engine::tls::server_config(&t).map_err(|e| std::io::Error::other(e.to_string()))?;
    quic_server(&TestSpec::default(), &tls).map_err(|e| std::io::Error::other(e.to_string()))
}

/// The server's QUIC config, from the test's TLS role, and what its TLS
/// is (the suite: the first of the server's TLS 1.3 suites the client
/// offers, which with a linerate client is the one in use).
pub fn server(spec: &TestSpec, role: &Role) -> Result<(Arc<ServerConfig>, TlsInfo), ConfigError> {
    let Role::Server(cfg, label) = role else {
        return Err(ConfigError::NotRustls);
    };
    let info = tls_info(spec, cfg.crypto_provider(), label);
    Ok((quic_server(spec, cfg)?, info))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection lets its peer open quinn's default number of streams
    /// (each one's state is built at the handshake), more only where the
    /// test keeps more under way.
    #[test]
    fn stream_limits_follow_what_the_test_keeps_under_way() {
        let mut spec = TestSpec {
            outstanding: 1,
            ..Default::default()
        };
        assert_eq!(streams(&spec), STREAMS);
        spec.outstanding = 300;
        assert_eq!(streams(&spec), 300);
    }

    #[test]
    fn congestion_controls_are_named_as_cc_takes_them() {
        assert_eq!(controller(None), Some("cubic"));
        assert_eq!(controller(Some("BBR")), Some("bbr"));
        assert_eq!(controller(Some("reno")), Some("newreno"));
        assert_eq!(controller(Some("vegas")), None);
        for c in CONTROLLERS {
            assert_eq!(controller(Some(c)), Some(*c));
        }
    }
}
