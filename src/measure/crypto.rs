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

pub const RECORD_SIZES: &[usize] = &[64, 256, 1024, 4096, 16384];

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Speed {
    pub library: String,
    pub cipher: String,
    pub record_bytes: usize,
    /// Plaintext bytes sealed per second on one core.
    pub bytes_per_s: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CryptoReport {
    pub cpu_model: String,
    /// The CPU's crypto-relevant features (aes, vaes, pclmulqdq, vpclmulqdq, sha_ni, avx2, avx512f).
    pub cpu_flags: Vec<String>,
    pub speeds: Vec<Speed>,
    /// A plain sentence on whether the TLS backend uses the hardware.
    pub verdict: String,
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
    #[cfg(feature = "openssl")]
    out.extend(openssl_speeds(budget));
    out
}

/// What the CPU offers and what that means for the TLS backend.
pub fn verdict(flags: &[String], speeds: &[Speed]) -> String {
    let has = |f: &str| flags.iter().any(|x| x == f);
    let aes16k = speeds
        .iter()
        .filter(|s| {
            s.cipher == "aes256-gcm" && s.record_bytes == 16384 && s.library.starts_with("aws-lc")
        })
        .map(|s| s.bytes_per_s)
        .next();
    let measured = aes16k
        .map(|v| {
            format!(
                " (measured: AES-256-GCM {:.1} GB/s per core at 16 KiB)",
                v / 1e9
            )
        })
        .unwrap_or_default();
    if has("vaes") && has("vpclmulqdq") {
        format!(
            "The CPU has AES-NI with VAES and VPCLMULQDQ{}: aws-lc (rustls' provider) uses its vector AES-GCM path{measured}; AES-GCM is the fastest choice here.",
            if has("avx512f") { " on AVX-512" } else { "" }
        )
    } else if has("aes") && has("pclmulqdq") {
        format!("The CPU has AES-NI and PCLMULQDQ: aws-lc uses hardware AES-GCM{measured}.")
    } else {
        format!(
            "The CPU has no AES instructions: AES-GCM runs in software{measured}; chacha20-poly1305 is usually faster here (--cipher chacha20-poly1305)."
        )
    }
}

pub fn report(budget: Duration) -> CryptoReport {
    let host = super::host::collect();
    let speeds = measure(budget);
    CryptoReport {
        verdict: verdict(&host.cpu_flags, &speeds),
        cpu_model: host.cpu_model,
        cpu_flags: host.cpu_flags,
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

    #[test]
    fn the_verdict_follows_the_flags() {
        let v = |f: &[&str]| verdict(&f.iter().map(|s| s.to_string()).collect::<Vec<_>>(), &[]);
        assert!(v(&["aes", "pclmulqdq", "vaes", "vpclmulqdq", "avx512f"]).contains("VAES"));
        assert!(v(&["aes", "pclmulqdq"]).contains("hardware AES-GCM"));
        assert!(v(&[]).contains("chacha20-poly1305 is usually faster"));
    }
}
