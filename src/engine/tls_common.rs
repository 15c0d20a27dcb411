//! What both TLS backends share: the agent's identity (its certificate and
//! key, generated once per kind or read from files) and how a suite's name
//! tells AEAD from CBC. It sits below `tls` (rustls, and the dispatch over
//! backends) and `tls_openssl`, so the backend `tls` dispatches to never
//! imports `tls` back.

use rustls::crypto::aws_lc_rs;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::ServerConfig;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use super::EngineError;
use crate::model::spec::CertKind;

/// The name in the agent's generated certificate (and what clients verify).
pub const SERVER_NAME: &str = "linerate-agent";

/// The agent's certificate and key.
pub struct Identity {
    /// The leaf, which the controller is sent and pins.
    pub cert: CertificateDer<'static>,
    /// Leaf first, then intermediates (what the server presents).
    pub chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    /// What results record: "ecdsa-p256", or "file <path>".
    pub label: String,
}

/// Certificate and key files `linerate serve --tls-cert/--tls-key` gave:
/// used for every TLS test instead of a generated identity.
static FILE_IDENTITY: OnceLock<Arc<Identity>> = OnceLock::new();

/// Loads the agent's certificate (PEM, leaf first) and key (PEM: PKCS#8,
/// SEC1 or PKCS#1) once, at start, so a bad file fails before any test.
pub fn load_identity_files(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<(), EngineError> {
    let id = read_identity_files(cert, key)?;
    FILE_IDENTITY
        .set(Arc::new(id))
        .map_err(|_| EngineError::AlreadyLoaded)
}

/// Reads and checks a certificate and key pair (see `load_identity_files`).
pub fn read_identity_files(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<Identity, EngineError> {
    use rustls::pki_types::pem::PemObject;
    let read = |flag: &'static str, path: &std::path::Path| {
        std::fs::read(path).map_err(|source| EngineError::Unreadable {
            flag,
            path: path.to_path_buf(),
            source,
        })
    };
    let cert_pem = read("--tls-cert", cert)?;
    let key_pem = read("--tls-key", key)?;
    let chain = rustls_pemfile_certs(&cert_pem).map_err(|source| EngineError::NotPem {
        flag: "--tls-cert",
        path: cert.to_path_buf(),
        source,
    })?;
    let leaf = chain
        .first()
        .cloned()
        .ok_or_else(|| EngineError::NoPemCert {
            flag: "--tls-cert",
            path: cert.to_path_buf(),
        })?;
    let k = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|source| EngineError::NotPemKey {
        path: key.to_path_buf(),
        source,
    })?;
    // The pair must match; rustls checks that when it builds a config.
    ServerConfig::builder_with_provider(Arc::new(aws_lc_rs::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(EngineError::PairCheck)?
        .with_no_client_auth()
        .with_single_cert(chain.clone(), k.clone_key())
        .map_err(|source| EngineError::NoPair {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            source,
        })?;
    Ok(Identity {
        cert: leaf,
        chain,
        key: k,
        label: format!("file {}", cert.display()),
    })
}

impl Identity {
    /// The private key (for the OpenSSL backend).
    pub fn key(&self) -> &PrivateKeyDer<'static> {
        &self.key
    }
}

/// The agent's identity for `kind`, generated once per process (RSA-4096
/// takes a second or more; tests should not pay it every time).
pub fn identity(kind: CertKind) -> Result<Arc<Identity>, EngineError> {
    if let Some(id) = FILE_IDENTITY.get() {
        return Ok(id.clone());
    }
    static CACHE: OnceLock<Mutex<HashMap<CertKind, Arc<Identity>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(i) = cache.lock().expect("cert cache").get(&kind) {
        return Ok(i.clone());
    }
    let key = match kind {
        CertKind::EcdsaP256 => rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256),
        CertKind::Rsa2048 => {
            rcgen::KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, rcgen::RsaKeySize::_2048)
        }
        CertKind::Rsa4096 => {
            rcgen::KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, rcgen::RsaKeySize::_4096)
        }
    }
    .map_err(|source| EngineError::KeyGen {
        kind: kind.name(),
        source,
    })?;
    let params = rcgen::CertificateParams::new(vec![SERVER_NAME.to_string()])
        .map_err(EngineError::CertParams)?;
    let cert = params.self_signed(&key).map_err(EngineError::Sign)?;
    let id = Arc::new(Identity {
        cert: cert.der().clone(),
        chain: vec![cert.der().clone()],
        key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        label: kind.name().to_string(),
    });
    cache.lock().expect("cert cache").insert(kind, id.clone());
    Ok(id)
}

/// PEM certificates from a file's bytes (the `CERTIFICATE` blocks). The
/// caller names the file (`EngineError::NotPem`).
pub(crate) fn rustls_pemfile_certs(
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, rustls::pki_types::pem::Error> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(pem).collect()
}

/// An AEAD suite name (GCM, CCM, ChaCha20); others (AES256-SHA256) are CBC.
pub(crate) fn is_aead_name(c: &str) -> bool {
    let up = c.to_ascii_uppercase();
    ["GCM", "CCM", "CHACHA"].iter().any(|a| up.contains(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_round_trips_through_rustls() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![SERVER_NAME.to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let back = rustls_pemfile_certs(cert.pem().as_bytes()).unwrap();
        assert_eq!(back, vec![cert.der().clone()]);
    }
}
