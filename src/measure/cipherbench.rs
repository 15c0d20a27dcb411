//! The `cipher` workload's measurement: one core sealing records with a
//! TLS cipher (AEAD, or CBC encryption with its HMAC) or making and
//! checking signatures, for a fixed time, with the thread's own CPU time
//! beside the wall time (on a shared host the thread may wait for a core:
//! CPU per KB is the cost, operations per second the speed it got). The
//! same library the TLS backend uses, aws-lc-rs; the block ciphers its
//! safe API leaves out (3DES, DES, AES-192) through aws-lc's EVP.

use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

use super::crypto::{aws_lc_library, hw_masked};
use super::error::CipherError;
use super::MeasureError;

/// The algorithms a `cipher` point may name, bulk ciphers first (a TLS
/// record sealed: AEAD, or CBC encryption plus its HMAC), then
/// signatures (a TLS server signs once per full handshake, the client
/// verifies), then plain hashes (seed 003's CPACF SHA).
pub const ALGORITHMS: &[&str] = &[
    "aes128-gcm",
    "aes256-gcm",
    "chacha20-poly1305",
    "aes128-cbc-hmac-sha1",
    "aes128-cbc-hmac-sha256",
    "aes192-cbc-hmac-sha256",
    "aes256-cbc-hmac-sha256",
    "3des-cbc-hmac-sha1",
    "des-cbc-hmac-sha1",
    "rsa2048-sign",
    "rsa2048-verify",
    "rsa4096-sign",
    "rsa4096-verify",
    "ecdsa-p256-sign",
    "ecdsa-p256-verify",
    "sha1",
    "sha256",
];

/// Whether `algorithm` is a signature (its figure is operations/s; bytes
/// per second mean nothing there).
pub fn is_signature(algorithm: &str) -> bool {
    algorithm.ends_with("-sign") || algorithm.ends_with("-verify")
}

/// What one iteration of a `cipher` point measured on one core.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct CipherFigures {
    pub algorithm: String,
    /// The library and its version ("aws-lc-rs 1.x", "OpenSSL 3.0.x EVP").
    pub library: String,
    /// Bytes per operation (the record; for a signature, the message).
    pub record_bytes: usize,
    /// Operations (records sealed, signatures made or checked).
    pub ops: u64,
    /// Wall time of the loop, seconds.
    pub seconds: f64,
    /// CPU time of the measuring thread over the loop, seconds.
    pub cpu_s: f64,
    pub ops_per_s: f64,
    /// Plaintext bytes per second (None for signatures).
    pub bytes_per_s: Option<f64>,
    /// CPU microseconds per KB of plaintext (None for signatures).
    pub cpu_us_per_kb: Option<f64>,
    /// CPU microseconds per operation.
    pub cpu_us_per_op: f64,
    /// The CPU's crypto extensions were masked (OPENSSL_ia32cap).
    #[serde(default)]
    pub hw_masked: bool,
}

/// One operation; false when it failed.
type Op = Box<dyn FnMut() -> bool>;

fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

fn refused(algorithm: &str, source: CipherError) -> MeasureError {
    MeasureError::Cipher {
        algorithm: algorithm.into(),
        source,
    }
}

fn aead(alg: &'static aws_lc_rs::aead::Algorithm, size: usize) -> Op {
    use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey};
    let key = LessSafeKey::new(UnboundKey::new(alg, &vec![0x42u8; alg.key_len()]).expect("key"));
    let mut buf = vec![0x5au8; size];
    let mut n: u64 = 0;
    Box::new(move || {
        // A fresh nonce per record, as TLS does.
        let mut nonce = [0u8; 12];
        nonce[4..].copy_from_slice(&n.to_be_bytes());
        n += 1;
        key.seal_in_place_separate_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from([23u8, 3, 3, 0, 0]),
            &mut buf,
        )
        .map(std::hint::black_box)
        .is_ok()
    })
}

/// A TLS 1.2 CBC record: HMAC over the plaintext, then CBC encryption
/// with a fresh IV (the key's `encrypt` draws one per record).
fn cbc_hmac(aes256: bool, sha256: bool, size: usize) -> Result<Op, CipherError> {
    use aws_lc_rs::cipher::{PaddedBlockEncryptingKey, UnboundCipherKey, AES_128, AES_256};
    use aws_lc_rs::hmac;
    let (alg, key_len) = if aes256 {
        (&AES_256, 32)
    } else {
        (&AES_128, 16)
    };
    let key = UnboundCipherKey::new(alg, &vec![0x42u8; key_len]).map_err(CipherError::Library)?;
    let enc = PaddedBlockEncryptingKey::cbc_pkcs7(key).map_err(CipherError::Library)?;
    let mac = hmac::Key::new(
        if sha256 {
            hmac::HMAC_SHA256
        } else {
            hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY
        },
        &[0x24u8; 32],
    );
    let mut buf: Vec<u8> = Vec::with_capacity(size + 64);
    Ok(Box::new(move || {
        buf.clear();
        buf.resize(size, 0x5a);
        let tag = hmac::sign(&mac, &buf);
        let ok = enc.encrypt(&mut buf).is_ok();
        std::hint::black_box((tag, buf.len()));
        ok
    }))
}

/// A cipher context of aws-lc's EVP interface, for the block ciphers
/// aws-lc-rs's safe API leaves out (3DES, single DES, AES-192): the same
/// library the TLS backend runs, so their costs compare with the rest.
struct Evp(*mut aws_lc_sys::EVP_CIPHER_CTX);

impl Evp {
    /// The context; a method, so a closure that uses it owns the whole
    /// `Evp` (a field alone would be copied out and the context freed).
    fn ptr(&self) -> *mut aws_lc_sys::EVP_CIPHER_CTX {
        self.0
    }
}

impl Drop for Evp {
    fn drop(&mut self) {
        // SAFETY: a context EVP_CIPHER_CTX_new made, freed once.
        unsafe { aws_lc_sys::EVP_CIPHER_CTX_free(self.0) }
    }
}

/// A TLS-style CBC record with an EVP block cipher: HMAC over the
/// plaintext, then CBC encryption of whole blocks.
fn evp_cbc_hmac(
    cipher: *const aws_lc_sys::EVP_CIPHER,
    key_len: usize,
    block: usize,
    sha256: bool,
    size: usize,
) -> Result<Op, CipherError> {
    use aws_lc_rs::hmac;
    // SAFETY: EVP_CIPHER_CTX_new has no preconditions; null is checked.
    let ctx = Evp(unsafe { aws_lc_sys::EVP_CIPHER_CTX_new() });
    if ctx.0.is_null() || cipher.is_null() {
        return Err(CipherError::Refused);
    }
    let key = vec![0x42u8; key_len];
    let iv = vec![0u8; block];
    // SAFETY: a live context, a static cipher, a key of the cipher's
    // length and an IV of its block size.
    let ok = unsafe {
        aws_lc_sys::EVP_EncryptInit_ex(
            ctx.0,
            cipher,
            std::ptr::null_mut(),
            key.as_ptr(),
            iv.as_ptr(),
        ) == 1
            && aws_lc_sys::EVP_CIPHER_CTX_set_padding(ctx.0, 0) == 1
    };
    if !ok {
        return Err(CipherError::Refused);
    }
    let mac = hmac::Key::new(
        if sha256 {
            hmac::HMAC_SHA256
        } else {
            hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY
        },
        &[0x24u8; 32],
    );
    // Whole blocks, as a padded TLS record would be.
    let len = size.div_ceil(block) * block;
    let input = vec![0x5au8; len];
    let mut output = vec![0u8; len + block];
    Ok(Box::new(move || {
        let tag = hmac::sign(&mac, &input[..size]);
        let mut out_len: std::ffi::c_int = 0;
        // The chain goes on from the last record's final block, as TLS
        // 1.0's implicit IV does (a fresh explicit IV is one block more).
        // SAFETY: the live context; `output` has room for `input` plus a
        // block.
        let ok = unsafe {
            aws_lc_sys::EVP_EncryptUpdate(
                ctx.ptr(),
                output.as_mut_ptr(),
                &mut out_len,
                input.as_ptr(),
                len as std::ffi::c_int,
            ) == 1
        };
        std::hint::black_box((tag, output[0], out_len));
        ok
    }))
}

/// A hash over the record (the seed's CPACF SHA figures).
fn digest(alg: &'static aws_lc_rs::digest::Algorithm, size: usize) -> Op {
    let buf = vec![0x5au8; size];
    Box::new(move || {
        std::hint::black_box(aws_lc_rs::digest::digest(alg, &buf));
        true
    })
}

/// Signing or verifying with a key made here (key generation, a second
/// for RSA-4096, is not timed).
fn signature(algorithm: &str, size: usize) -> Result<Op, CipherError> {
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::rsa::{KeyPair, KeySize};
    use aws_lc_rs::signature::{
        EcdsaKeyPair, KeyPair as _, UnparsedPublicKey, ECDSA_P256_SHA256_ASN1,
        ECDSA_P256_SHA256_ASN1_SIGNING, RSA_PKCS1_2048_8192_SHA256, RSA_PKCS1_SHA256,
    };
    let msg = vec![0x5au8; size.max(1)];
    let rng = SystemRandom::new();
    let verify = algorithm.ends_with("-verify");
    let rsa = |bits: KeySize| -> Result<Op, CipherError> {
        let (msg, rng) = (msg.clone(), SystemRandom::new());
        let key = KeyPair::generate(bits).map_err(CipherError::Library)?;
        let mut sig = vec![0u8; key.public_modulus_len()];
        if verify {
            key.sign(&RSA_PKCS1_SHA256, &rng, &msg, &mut sig)
                .map_err(CipherError::Library)?;
            let public = key.public_key().as_ref().to_vec();
            Ok(Box::new(move || {
                UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, &public)
                    .verify(&msg, &sig)
                    .is_ok()
            }))
        } else {
            Ok(Box::new(move || {
                key.sign(&RSA_PKCS1_SHA256, &rng, &msg, &mut sig).is_ok()
            }))
        }
    };
    match algorithm {
        "rsa2048-sign" | "rsa2048-verify" => rsa(KeySize::Rsa2048),
        "rsa4096-sign" | "rsa4096-verify" => rsa(KeySize::Rsa4096),
        _ => {
            let key = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING)
                .map_err(CipherError::Library)?;
            if verify {
                let sig = key.sign(&rng, &msg).map_err(CipherError::Library)?;
                let public = key.public_key().as_ref().to_vec();
                Ok(Box::new(move || {
                    UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &public)
                        .verify(&msg, sig.as_ref())
                        .is_ok()
                }))
            } else {
                Ok(Box::new(move || key.sign(&rng, &msg).is_ok()))
            }
        }
    }
}

/// The operation for `algorithm` on records (or messages) of `size`
/// bytes, with the library that runs it.
fn op(algorithm: &str, size: usize) -> Result<(Op, String), MeasureError> {
    use aws_lc_rs::aead::{AES_128_GCM, AES_256_GCM, CHACHA20_POLY1305};
    let lib = aws_lc_library();
    let r = match algorithm {
        "aes128-gcm" => Ok(aead(&AES_128_GCM, size)),
        "aes256-gcm" => Ok(aead(&AES_256_GCM, size)),
        "chacha20-poly1305" => Ok(aead(&CHACHA20_POLY1305, size)),
        "aes128-cbc-hmac-sha1" => cbc_hmac(false, false, size),
        "aes128-cbc-hmac-sha256" => cbc_hmac(false, true, size),
        "aes256-cbc-hmac-sha256" => cbc_hmac(true, true, size),
        // SAFETY (each): the EVP_* cipher getters return static tables.
        "aes192-cbc-hmac-sha256" => {
            evp_cbc_hmac(unsafe { aws_lc_sys::EVP_aes_192_cbc() }, 24, 16, true, size)
        }
        "3des-cbc-hmac-sha1" => evp_cbc_hmac(
            unsafe { aws_lc_sys::EVP_des_ede3_cbc() },
            24,
            8,
            false,
            size,
        ),
        "des-cbc-hmac-sha1" => {
            evp_cbc_hmac(unsafe { aws_lc_sys::EVP_des_cbc() }, 8, 8, false, size)
        }
        "sha1" => Ok(digest(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, size)),
        "sha256" => Ok(digest(&aws_lc_rs::digest::SHA256, size)),
        a if is_signature(a) => signature(a, size),
        a => Err(CipherError::Unknown(a.to_string())),
    };
    r.map(|o| (o, lib)).map_err(|w| refused(algorithm, w))
}

/// Runs `algorithm` on `size`-byte records for `warmup`, then for
/// `duration`, on this thread.
pub fn measure(
    algorithm: &str,
    size: usize,
    warmup: Duration,
    duration: Duration,
) -> Result<CipherFigures, MeasureError> {
    let (mut f, library) = op(algorithm, size)?;
    let timed = |f: &mut Op, budget: Duration| -> Result<(u64, f64, f64), MeasureError> {
        let (t0, c0) = (Instant::now(), thread_cpu_s());
        let mut n: u64 = 0;
        loop {
            if !f() {
                return Err(refused(algorithm, CipherError::Refused));
            }
            n += 1;
            if n.is_multiple_of(8) && t0.elapsed() >= budget {
                break;
            }
        }
        Ok((n, t0.elapsed().as_secs_f64(), thread_cpu_s() - c0))
    };
    if !warmup.is_zero() {
        timed(&mut f, warmup)?;
    }
    let (ops, seconds, cpu_s) = timed(&mut f, duration)?;
    let sig = is_signature(algorithm);
    let bytes = ops as f64 * size as f64;
    Ok(CipherFigures {
        algorithm: algorithm.into(),
        library,
        record_bytes: size,
        ops,
        seconds,
        cpu_s,
        ops_per_s: ops as f64 / seconds,
        bytes_per_s: (!sig).then(|| bytes / seconds),
        cpu_us_per_kb: (!sig && bytes > 0.0).then(|| cpu_s * 1e6 / (bytes / 1024.0)),
        cpu_us_per_op: cpu_s * 1e6 / ops as f64,
        hw_masked: hw_masked(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_algorithm_this_build_has_is_measured() {
        let d = Duration::from_millis(15);
        for a in ALGORITHMS {
            match measure(a, 1024, Duration::ZERO, d) {
                Ok(f) => {
                    assert!(
                        f.ops > 0 && f.ops_per_s > 0.0 && f.cpu_us_per_op > 0.0,
                        "{f:?}"
                    );
                    assert_eq!(f.bytes_per_s.is_none(), is_signature(a), "{a}");
                }
                Err(e) => panic!("{a}: {e}"),
            }
        }
    }

    /// Seed 003: "TDES most expensive cipher when calculated in software".
    /// 3DES runs three DES passes over 8-byte blocks; AES-CBC beside it,
    /// with the same HMAC, costs several times less even without AES-NI.
    #[test]
    fn tdes_costs_more_cpu_per_kb_than_des_and_aes() {
        let d = Duration::from_millis(60);
        let kb = |a: &str| {
            measure(a, 16384, Duration::ZERO, d)
                .unwrap()
                .cpu_us_per_kb
                .unwrap()
        };
        let (tdes, des, aes) = (
            kb("3des-cbc-hmac-sha1"),
            kb("des-cbc-hmac-sha1"),
            kb("aes128-cbc-hmac-sha1"),
        );
        assert!(tdes > 1.5 * des, "3DES {tdes} µs/KB, DES {des}");
        assert!(tdes > 2.0 * aes, "3DES {tdes} µs/KB, AES-128-CBC {aes}");
    }

    #[test]
    fn gcm_costs_less_cpu_per_kb_than_cbc_with_hmac() {
        let d = Duration::from_millis(40);
        let gcm = measure("aes128-gcm", 16384, Duration::ZERO, d).unwrap();
        let cbc = measure("aes128-cbc-hmac-sha256", 16384, Duration::ZERO, d).unwrap();
        // AES-GCM on AES-NI/PCLMULQDQ is several times cheaper than CBC
        // (serial) plus SHA-256; without the hardware both are slow.
        if !hw_masked() {
            assert!(
                gcm.cpu_us_per_kb.unwrap() < cbc.cpu_us_per_kb.unwrap(),
                "{gcm:?} {cbc:?}"
            );
        }
    }
}
