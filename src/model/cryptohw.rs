//! Where `--crypto-hw off` means something. linerate masks the CPU's
//! crypto extensions with OPENSSL_ia32cap, a variable aws-lc and OpenSSL
//! read on x86 only: on another CPU (aarch64, s390x, ...) it is ignored,
//! the libraries keep using the hardware, and a result labelled "crypto
//! hardware off" would be a lie. There it is refused.

/// Why `--crypto-hw off` cannot be honoured on a CPU of architecture
/// `arch` (`std::env::consts::ARCH`), or None on x86 and x86_64.
pub fn mask_refused(arch: &str) -> Option<String> {
    match arch {
        "x86" | "x86_64" => None,
        _ => Some(format!(
            "--crypto-hw off masks AES-NI and friends with OPENSSL_ia32cap, which only x86 CPUs read; this is {arch}, where the crypto libraries would still use the hardware (measure with the hardware on, or on an x86 host)"
        )),
    }
}

/// `mask_refused` for the CPU this binary was built for.
pub fn mask_refused_here() -> Option<String> {
    mask_refused(std::env::consts::ARCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mask_is_refused_off_x86_in_one_line() {
        assert_eq!(mask_refused("x86_64"), None);
        assert_eq!(mask_refused("x86"), None);
        for arch in ["aarch64", "s390x", "powerpc64", "riscv64"] {
            let e = mask_refused(arch).unwrap();
            assert!(e.contains(arch) && e.contains("OPENSSL_ia32cap"), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
        // This build agrees with its own target.
        assert_eq!(
            mask_refused_here().is_none(),
            cfg!(any(target_arch = "x86", target_arch = "x86_64"))
        );
    }
}
