//! `linerate crypto`: how fast one core encrypts with the ciphers TLS uses,
//! through the same library the TLS backend uses (aws-lc-rs under rustls;
//! OpenSSL's EVP with the `openssl` feature), for record sizes from 64 B to
//! 16 KiB, plus the CPU's crypto features and whether the backend uses
//! them. The seeds' warning "assure you really use your cryptographic
//! hardware" becomes a measured line in every report.

use aws_lc_rs::aead::{
    Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM, AES_256_GCM, CHACHA20_POLY1305,
};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

use crate::model::host::HostInfo;

pub const RECORD_SIZES: &[usize] = &[64, 256, 1024, 4096, 16384];

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Speed {
    pub library: String,
    pub cipher: String,
    pub record_bytes: usize,
    /// Plaintext bytes sealed per second on one core.
    pub bytes_per_s: f64,
}

/// Signatures per second on one core: the handshake's server cost.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SignSpeed {
    pub library: String,
    /// "rsa-2048", "rsa-4096" (PKCS#1 v1.5, SHA-256), "ecdsa-p256" (SHA-256).
    pub algorithm: String,
    pub signs_per_s: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CryptoReport {
    pub cpu_model: String,
    /// The CPU's crypto-relevant features (aes, vaes, pclmulqdq, vpclmulqdq, sha_ni, avx2, avx512f).
    pub cpu_flags: Vec<String>,
    /// The crypto libraries ran with the CPU's AES, carry-less multiply and
    /// SHA extensions masked (`OPENSSL_ia32cap`).
    #[serde(default)]
    pub hw_masked: bool,
    pub speeds: Vec<Speed>,
    #[serde(default)]
    pub signs: Vec<SignSpeed>,
    /// A plain sentence on whether the TLS backend uses the hardware,
    /// from what it measurably does.
    pub verdict: String,
}

/// What hides the CPU's crypto extensions from aws-lc and OpenSSL (both
/// read it once, when they first look at the CPU): AES-NI and PCLMULQDQ
/// (CPUID.1:ECX bits 25 and 1), and SHA, VAES and VPCLMULQDQ (CPUID.7:EBX
/// bit 29, ECX bits 9 and 10).
pub const HW_OFF_MASK: &str = "~0x0200000200000000:~0x0000060020000000";

/// Whether this process's crypto libraries run with the hardware masked.
pub fn hw_masked() -> bool {
    std::env::var("OPENSSL_ia32cap").is_ok_and(|v| v == HW_OFF_MASK)
}

/// Seals records of `size` bytes for about `budget`, returns bytes/s.
fn seal_rate(alg: &'static aws_lc_rs::aead::Algorithm, size: usize, budget: Duration) -> f64 {
    let key_bytes = vec![0x42u8; alg.key_len()];
    let key = LessSafeKey::new(UnboundKey::new(alg, &key_bytes).expect("key length matches"));
    let mut buf = vec![0x5au8; size];
    let start = Instant::now();
    let mut n: u64 = 0;
    loop {
        // A fresh nonce per record, as TLS does.
        let mut nonce = [0u8; 12];
        nonce[4..].copy_from_slice(&n.to_be_bytes());
        let tag = key
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from([23u8, 3, 3, 0, 0]),
                &mut buf,
            )
            .expect("sealing cannot fail with a valid key");
        let _ = std::hint::black_box(tag);
        n += 1;
        if n.is_multiple_of(64) && start.elapsed() >= budget {
            break;
        }
    }
    n as f64 * size as f64 / start.elapsed().as_secs_f64()
}

pub fn aws_lc_library() -> String {
    format!(
        "aws-lc-rs {}",
        option_env!("LINERATE_AWS_LC_VERSION").unwrap_or("?")
    )
}

/// TLS 1.2's AES256-SHA256 suite per record: AES-256-CBC encryption of the
/// record, then HMAC-SHA256 over it (MAC-then-encrypt computes the MAC
/// first; the work is the same), bytes/s.
fn cbc_hmac_rate(size: usize, budget: Duration) -> f64 {
    use aws_lc_rs::cipher::{PaddedBlockEncryptingKey, UnboundCipherKey, AES_256};
    use aws_lc_rs::hmac;
    let Ok(key) = UnboundCipherKey::new(&AES_256, &[0x42u8; 32]) else {
        return 0.0;
    };
    let Ok(enc) = PaddedBlockEncryptingKey::cbc_pkcs7(key) else {
        return 0.0;
    };
    let mac = hmac::Key::new(hmac::HMAC_SHA256, &[0x24u8; 32]);
    let mut buf: Vec<u8> = Vec::with_capacity(size + 32);
    let start = Instant::now();
    let mut n: u64 = 0;
    loop {
        buf.clear();
        buf.resize(size, 0x5a);
        let tag = hmac::sign(&mac, &buf);
        if enc.encrypt(&mut buf).is_err() {
            return 0.0;
        }
        let _ = std::hint::black_box((tag, buf.len()));
        n += 1;
        if n.is_multiple_of(16) && start.elapsed() >= budget {
            break;
        }
    }
    n as f64 * size as f64 / start.elapsed().as_secs_f64()
}

/// Signatures/s of RSA-2048, RSA-4096 (PKCS#1 v1.5 SHA-256) and ECDSA P-256
/// (SHA-256) with aws-lc: what a TLS server spends per full handshake.
/// Key generation (RSA-4096: about a second) is not timed.
pub fn sign_rates(budget: Duration) -> Vec<SignSpeed> {
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::rsa::{KeyPair, KeySize};
    use aws_lc_rs::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_ASN1_SIGNING, RSA_PKCS1_SHA256};
    let rng = SystemRandom::new();
    let msg = [0x5au8; 128];
    let lib = aws_lc_library();
    let time = |f: &mut dyn FnMut() -> bool| {
        let start = Instant::now();
        let mut n: u64 = 0;
        while f() {
            n += 1;
            if start.elapsed() >= budget {
                break;
            }
        }
        n as f64 / start.elapsed().as_secs_f64()
    };
    let mut out = Vec::new();
    for (name, size) in [
        ("rsa-2048", KeySize::Rsa2048),
        ("rsa-4096", KeySize::Rsa4096),
    ] {
        let Ok(key) = KeyPair::generate(size) else {
            continue;
        };
        let mut sig = vec![0u8; key.public_modulus_len()];
        let rate = time(&mut || key.sign(&RSA_PKCS1_SHA256, &rng, &msg, &mut sig).is_ok());
        out.push(SignSpeed {
            library: lib.clone(),
            algorithm: name.into(),
            signs_per_s: rate,
        });
    }
    if let Ok(key) = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING) {
        let rate = time(&mut || key.sign(&rng, &msg).is_ok());
        out.push(SignSpeed {
            library: lib,
            algorithm: "ecdsa-p256".into(),
            signs_per_s: rate,
        });
    }
    out
}

/// Measures every cipher and record size, `budget` each, on this thread.
pub fn measure(budget: Duration) -> Vec<Speed> {
    let lib = aws_lc_library();
    let mut out = Vec::new();
    for (name, alg) in [
        ("aes128-gcm", &AES_128_GCM),
        ("aes256-gcm", &AES_256_GCM),
        ("chacha20-poly1305", &CHACHA20_POLY1305),
    ] {
        for &size in RECORD_SIZES {
            out.push(Speed {
                library: lib.clone(),
                cipher: name.into(),
                record_bytes: size,
                bytes_per_s: seal_rate(alg, size, budget),
            });
        }
    }
    for &size in RECORD_SIZES {
        out.push(Speed {
            library: lib.clone(),
            cipher: "aes256-cbc-hmac-sha256".into(),
            record_bytes: size,
            bytes_per_s: cbc_hmac_rate(size, budget),
        });
    }
    #[cfg(feature = "openssl")]
    out.extend(openssl_speeds(budget));
    out
}

/// aws-lc's AES-256-GCM and ChaCha20-Poly1305 at 16 KiB records, measured
/// once per process (20 ms): what the host-info sentence is drawn from.
pub fn quick_speeds() -> Vec<Speed> {
    static ONCE: std::sync::OnceLock<Vec<Speed>> = std::sync::OnceLock::new();
    ONCE.get_or_init(|| {
        let b = Duration::from_millis(10);
        [
            ("aes256-gcm", &AES_256_GCM),
            ("chacha20-poly1305", &CHACHA20_POLY1305),
        ]
        .into_iter()
        .map(|(name, alg)| Speed {
            library: aws_lc_library(),
            cipher: name.into(),
            record_bytes: 16384,
            bytes_per_s: seal_rate(alg, 16384, b),
        })
        .collect()
    })
    .clone()
}

/// Whether aws-lc seals AES-GCM in hardware, judged from its speed: with
/// AES-NI and PCLMULQDQ it is faster than ChaCha20-Poly1305 (here 6x); in
/// software it is a small fraction of ChaCha's (here a tenth). A ratio,
/// so a loaded machine does not change the answer.
fn hardware_aes(aes: f64, chacha: f64) -> bool {
    aes > chacha
}

/// What the library measurably does with the CPU (aws-lc's AES-256-GCM and
/// ChaCha20-Poly1305 at 16 KiB in `speeds`), beside what the CPU offers;
/// with `figures`, the speeds too (`linerate crypto`; a result's host info
/// keeps the sentence free of run-to-run noise).
pub fn verdict(flags: &[String], speeds: &[Speed]) -> String {
    verdict_with(flags, speeds, true)
}

pub fn verdict_with(flags: &[String], speeds: &[Speed], figures: bool) -> String {
    let has = |f: &str| flags.iter().any(|x| x == f);
    let at16k = |c: &str| {
        speeds
            .iter()
            .find(|s| s.cipher == c && s.record_bytes == 16384 && s.library.starts_with("aws-lc"))
            .map(|s| s.bytes_per_s)
    };
    let (Some(aes), Some(chacha)) = (at16k("aes256-gcm"), at16k("chacha20-poly1305")) else {
        return "aws-lc's AES-GCM speed was not measured".into();
    };
    let numbers = if figures {
        format!(
            ": AES-256-GCM {:.2} GB/s per core at 16 KiB, ChaCha20-Poly1305 {:.2} GB/s",
            aes / 1e9,
            chacha / 1e9
        )
    } else if hardware_aes(aes, chacha) {
        " (measured: AES-GCM seals faster than ChaCha20-Poly1305)".into()
    } else {
        " (measured: AES-GCM seals slower than ChaCha20-Poly1305)".into()
    };
    if hw_masked() {
        return format!(
            "The CPU's crypto extensions are masked for this run (OPENSSL_ia32cap={HW_OFF_MASK}): aws-lc runs AES-GCM in software{numbers}."
        );
    }
    match (hardware_aes(aes, chacha), has("aes")) {
        (true, _) if has("vaes") && has("vpclmulqdq") => format!(
            "aws-lc (rustls' provider) runs AES-GCM on the CPU's AES instructions, VAES and VPCLMULQDQ{} available{numbers}; AES-GCM is the fastest choice here.",
            if has("avx512f") { " on AVX-512" } else { "" }
        ),
        (true, _) => format!("aws-lc runs AES-GCM on the CPU's AES-NI and PCLMULQDQ{numbers}."),
        (false, true) => format!(
            "The CPU has AES-NI, but aws-lc does not use it here{numbers} (is OPENSSL_ia32cap set, or the hypervisor hiding it?)."
        ),
        (false, false) => format!(
            "The CPU has no AES instructions: AES-GCM runs in software{numbers}; chacha20-poly1305 is faster here (--cipher chacha20-poly1305)."
        ),
    }
}

/// `linerate crypto`'s report for `host` (the caller collects it, with
/// `measure::host::collect`, which itself asks this file for the crypto
/// verdict).
pub fn report(budget: Duration, host: HostInfo) -> CryptoReport {
    let speeds = measure(budget);
    CryptoReport {
        verdict: verdict(&host.cpu_flags, &speeds),
        cpu_model: host.cpu_model,
        cpu_flags: host.cpu_flags,
        hw_masked: hw_masked(),
        signs: sign_rates(budget),
        speeds,
    }
}

/// OpenSSL EVP speed for `linerate crypto`, beside aws-lc: one context per
/// cipher, re-keyed with a fresh IV per record, as `openssl speed -evp` does.
#[cfg(feature = "openssl")]
pub fn openssl_speeds(budget: std::time::Duration) -> Vec<Speed> {
    use openssl::cipher::Cipher;
    use openssl::cipher_ctx::CipherCtx;
    let version = openssl::version::version()
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    let lib = format!("{version} EVP");
    let mut out = Vec::new();
    for (name, cipher, aead) in [
        ("aes128-gcm", Cipher::aes_128_gcm(), true),
        ("aes256-gcm", Cipher::aes_256_gcm(), true),
        ("chacha20-poly1305", Cipher::chacha20_poly1305(), true),
        // Encryption only: the TLS 1.2 suite adds an HMAC-SHA256 per record.
        ("aes256-cbc", Cipher::aes_256_cbc(), false),
    ] {
        for &size in RECORD_SIZES {
            let Ok(mut ctx) = CipherCtx::new() else {
                continue;
            };
            let key = vec![0x42u8; cipher.key_length()];
            let iv = vec![0u8; cipher.iv_length().max(12)];
            if ctx.encrypt_init(Some(cipher), Some(&key), None).is_err() {
                continue;
            }
            ctx.set_padding(false);
            let input = vec![0x5au8; size];
            let mut output = vec![0u8; size + 32];
            let start = std::time::Instant::now();
            let mut n: u64 = 0;
            loop {
                let ok = ctx
                    .encrypt_init(None, None, Some(&iv[..cipher.iv_length()]))
                    .is_ok()
                    && ctx.cipher_update(&input, Some(&mut output)).is_ok()
                    && ctx.cipher_final(&mut output[size..]).is_ok();
                if aead {
                    let mut tag = [0u8; 16];
                    let _ = ctx.tag(&mut tag);
                }
                if !ok {
                    break;
                }
                n += 1;
                if n.is_multiple_of(64) && start.elapsed() >= budget {
                    break;
                }
            }
            if n > 0 {
                out.push(Speed {
                    library: lib.clone(),
                    cipher: name.into(),
                    record_bytes: size,
                    bytes_per_s: n as f64 * size as f64 / start.elapsed().as_secs_f64(),
                });
            }
        }
    }
    out
}

#[cfg(feature = "openssl")]
pub fn openssl_library() -> String {
    format!(
        "{} (openssl crate {})",
        openssl::version::version(),
        option_env!("LINERATE_OPENSSL_CRATE_VERSION").unwrap_or("?")
    )
}

/// Every TLS backend this build has, with versions: rustls always, and
/// OpenSSL (built from source in the default build) where it is in.
pub fn tls_libraries() -> String {
    #[cfg(feature = "openssl")]
    return format!("{}; {}", rustls_library(), openssl_library());
    #[cfg(not(feature = "openssl"))]
    rustls_library()
}

/// The rustls backend with its crypto provider, with versions.
pub fn rustls_library() -> String {
    format!(
        "rustls {} with aws-lc-rs {}",
        option_env!("LINERATE_RUSTLS_VERSION").unwrap_or("0.23"),
        option_env!("LINERATE_AWS_LC_VERSION").unwrap_or("?")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealing_is_measured_and_larger_records_are_not_slower() {
        let small = seal_rate(&AES_256_GCM, 64, Duration::from_millis(30));
        let big = seal_rate(&AES_256_GCM, 16384, Duration::from_millis(30));
        assert!(small > 1e6 && big > 1e6, "{small} {big}");
        // Per-record overhead dominates 64-byte records.
        assert!(big > small, "16 KiB {big} vs 64 B {small}");
    }

    fn speeds(aes: f64, chacha: f64) -> Vec<Speed> {
        [("aes256-gcm", aes), ("chacha20-poly1305", chacha)]
            .into_iter()
            .map(|(c, v)| Speed {
                library: "aws-lc-rs 1".into(),
                cipher: c.into(),
                record_bytes: 16384,
                bytes_per_s: v,
            })
            .collect()
    }

    #[test]
    fn the_verdict_follows_what_the_library_does() {
        let all: Vec<String> = ["aes", "pclmulqdq", "vaes", "vpclmulqdq", "avx512f"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        // Fast AES-GCM on a VAES CPU: the hardware, VAES named.
        assert!(verdict(&all, &speeds(18e9, 2e9)).contains("VAES and VPCLMULQDQ"));
        // Host info: the conclusion without the run's figures.
        let quiet = verdict_with(&all, &speeds(18e9, 2e9), false);
        assert!(
            quiet.contains("faster than ChaCha20") && !quiet.contains("GB/s"),
            "{quiet}"
        );
        // The same CPU, AES-GCM slower than ChaCha: the hardware is not used,
        // whatever the flags say.
        let v = verdict(&all, &speeds(0.13e9, 1.2e9));
        assert!(v.contains("does not use it"), "{v}");
        assert!(verdict(&all[..2], &speeds(4e9, 2e9)).contains("AES-NI and PCLMULQDQ"));
        assert!(verdict(&[], &speeds(0.2e9, 1e9)).contains("no AES instructions"));
        assert!(verdict(&all, &[]).contains("not measured"));
    }

    #[test]
    fn cbc_hmac_and_signatures_are_measured() {
        let b = Duration::from_millis(20);
        assert!(cbc_hmac_rate(16384, b) > 1e6);
        let s = sign_rates(b);
        let names: Vec<&str> = s.iter().map(|x| x.algorithm.as_str()).collect();
        assert_eq!(names, ["rsa-2048", "rsa-4096", "ecdsa-p256"]);
        // RSA-4096 signs several times slower than RSA-2048; ECDSA faster.
        assert!(s[0].signs_per_s > 2.0 * s[1].signs_per_s, "{s:?}");
        assert!(s[2].signs_per_s > s[0].signs_per_s, "{s:?}");
    }
}
