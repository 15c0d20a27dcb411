//! The RPM server a test starts for itself (`run rpm` without `--url`):
//! on loopback or in a lab's server namespace, with a generated
//! certificate its client (or a fleet's client agents, `fleet`) trusts.

use std::time::Duration;

use super::params::RpmSpec;
use super::server::RpmServer;
use crate::error::{Error, Result};
use crate::model::spec::{TestSpec, TlsSpec};
use crate::workload::kind::Place;
use crate::workload::local_server::{self, LocalServer};

/// A server this run started: where, and how its clients trust it.
pub struct OwnServer {
    pub server: LocalServer,
    /// Its configuration URL.
    pub url: String,
    /// A client's TLS config (None: clear HTTP/2).
    pub client_tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    /// Its certificate (DER; None: clear).
    pub cert: Option<Vec<u8>>,
}

/// Starts an RPM server of this run's own where `place` says (the lab's
/// server namespace, or loopback): HTTP/2 over TLS with a generated
/// certificate, or clear with `--rpm-clear`.
pub fn own_server(spec: &TestSpec, r: &RpmSpec, place: &Place) -> Result<OwnServer> {
    let tls_spec = spec.tls.clone().unwrap_or_default();
    let limit = Duration::from_secs_f64(spec.duration_s * 2.0 + 30.0);
    let mut cert = None;
    let (server_tls, client_tls) = if r.clear {
        (None, None)
    } else {
        let t = TlsSpec {
            resume: false,
            ..tls_spec.clone()
        };
        let (cfg, id) =
            crate::engine::tls::server_config(&t).map_err(|e| Error::Failed(e.to_string()))?;
        let client = crate::engine::tls::client_config(&t, &id.cert)
            .map_err(|e| Error::Failed(e.to_string()))?;
        cert = Some(id.cert.to_vec());
        (Some(cfg), Some(client))
    };
    // In a lab the server is in its server namespace, at its address: the
    // load and the probes cross the lab's link.
    let local = local_server::start(place, spec.ipv6, "rpm-server", move |listener, stop| {
        RpmServer::on(listener, server_tls, limit)?.run(stop)
    })
    .map_err(|e| Error::Failed(format!("rpm: the local server: {e}")))?;
    let url = format!(
        "{}://{}{}",
        if r.clear { "http" } else { "https" },
        local.addr,
        super::server::CONFIG_PATH
    );
    Ok(OwnServer {
        server: local,
        url,
        client_tls,
        cert,
    })
}
