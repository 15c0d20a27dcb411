//! TLS clients of web servers that are not linerate's (`run http
//! --http-url`, `run rpm --url`): the spec's suites and versions with the
//! trust and the key exchange groups a public server expects.

use std::sync::Arc;

use rustls::crypto::aws_lc_rs;
use rustls::ClientConfig;

use super::tls::{build_client, provider, roots};
use super::EngineError;
use crate::model::spec::TlsSpec;

/// Debian's bundle of trusted certificates, for a web server named
/// without `--tls-ca`.
const SYSTEM_CAS: &str = "/etc/ssl/certs/ca-certificates.crt";

/// A client of a web server that is not linerate's (`run http --http-url`,
/// `run rpm --url`): the spec's suites and versions, `--tls-ca` or the
/// system's trusted certificates, and every key exchange group this build
/// has offered after the spec's own. A foreign server picks the group it
/// has, and under TLS 1.2 an ECDSA certificate is usable only when its
/// curve is among the client's groups (RFC 8422): nginx 1.22 with a P-256
/// certificate refuses a client that offers x25519 alone ("no shared
/// cipher").
pub fn web_client_config(t: &TlsSpec) -> Result<Arc<ClientConfig>, EngineError> {
    web_client_config_trusting(t, &[])
}

/// `web_client_config` that trusts `certs` (DER) alone when there are any:
/// a certificate carried to this host in a spec (a fleet's clients of one
/// server, which hold no file of the controller's host).
pub fn web_client_config_trusting(
    t: &TlsSpec,
    certs: &[Vec<u8>],
) -> Result<Arc<ClientConfig>, EngineError> {
    let (mut provider, versions) = provider(t)?;
    for g in aws_lc_rs::default_provider().kx_groups {
        if !provider.kx_groups.iter().any(|k| k.name() == g.name()) {
            provider.kx_groups.push(g);
        }
    }
    if !certs.is_empty() {
        let mut roots = rustls::RootCertStore::empty();
        for c in certs {
            roots
                .add(rustls::pki_types::CertificateDer::from(c.clone()))
                .map_err(EngineError::AgentCertUnusable)?;
        }
        return build_client(provider, &versions, roots, t.resume);
    }
    let mut t = t.clone();
    if t.ca_file.is_none() && std::path::Path::new(SYSTEM_CAS).exists() {
        t.ca_file = Some(SYSTEM_CAS.into());
    }
    let roots = if t.ca_file.is_some() {
        roots(&t, &[])?
    } else {
        rustls::RootCertStore::empty()
    };
    build_client(provider, &versions, roots, t.resume)
}

/// The certificates (DER) of a PEM file's text, to carry where the file is
/// not (`web_client_config_trusting`); Err when it holds none.
pub fn pem_certs(pem: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let certs = super::tls_common::rustls_pemfile_certs(pem).map_err(|e| e.to_string())?;
    if certs.is_empty() {
        return Err("no PEM certificate in it".into());
    }
    Ok(certs.into_iter().map(|c| c.to_vec()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::tls::{client_config, server_config};

    /// A web server's client offers the spec's group first, then the rest
    /// (P-256 among them: TLS 1.2's ECDSA certificates need their curve
    /// offered), and an agent's client the spec's alone.
    #[test]
    fn a_web_client_offers_every_group_after_the_specs() {
        let t = TlsSpec::default();
        let web = web_client_config(&t).unwrap();
        let names: Vec<_> = web
            .crypto_provider()
            .kx_groups
            .iter()
            .map(|g| g.name())
            .collect();
        assert_eq!(names[0], rustls::NamedGroup::X25519, "{names:?}");
        assert!(names.contains(&rustls::NamedGroup::secp256r1), "{names:?}");
        assert_eq!(
            names
                .iter()
                .filter(|n| **n == rustls::NamedGroup::X25519)
                .count(),
            1
        );
        let (_, id) = server_config(&t).unwrap();
        let agent = client_config(&t, &id.cert).unwrap();
        assert_eq!(agent.crypto_provider().kx_groups.len(), 1);
    }
}
