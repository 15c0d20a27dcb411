//! Points a study may list that this host cannot run, found before they
//! run: a congestion control the kernel was built without (seed 002 names
//! BIC, HighSpeed and Scalable TCP; most distribution kernels have them as
//! modules, a minimal VM kernel has only reno, cubic and bbr). Such a
//! point is recorded as not available here, with the reason, and the study
//! goes on: the report says which were missing instead of stopping at the
//! first. Likewise a TLS point on the OpenSSL backend (the seeds'
//! AES-256-CBC) in a build without it.

use crate::model::spec::TestSpec;
use crate::model::tunnel::TunnelKind;

const AVAILABLE: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";

/// Why `spec` cannot run on this host, or None. `local`: its sockets are
/// this kernel's (a study's lab, or loopback with the local agent); on
/// other hosts their agents judge.
pub fn missing_here(spec: &TestSpec, local: bool) -> Option<String> {
    let openssl = spec
        .tls
        .as_ref()
        .is_some_and(|t| t.backend == crate::model::spec::TlsBackend::Openssl);
    if openssl && !cfg!(feature = "openssl") {
        return Some(
            "this linerate was built without the OpenSSL TLS backend (rustls has no CBC suites): build it with the default features (`cargo build --release`, which builds OpenSSL from source)".into(),
        );
    }
    if !local {
        return None;
    }
    // The seeds' IPsec: ESP where this kernel has it; a study lists its
    // stand-in (wireguard) beside it.
    let tunnel = spec.lab.as_ref().and_then(|l| l.tunnel.as_deref());
    let esp = tunnel
        .and_then(|t| t.parse::<TunnelKind>().ok())
        .filter(|k| k.is_esp());
    if let Some(kind) = esp {
        if let Some(why) = crate::lab::tunnel::esp_unavailable(kind) {
            return Some(format!(
                "this kernel has no IPsec ESP ({why}); the study's other tunnels stand in"
            ));
        }
    }
    let lab_cc = spec.lab.as_ref().and_then(|l| l.cc.as_deref());
    [lab_cc, spec.cc.as_deref()]
        .into_iter()
        .flatten()
        .find_map(|cc| cc_missing(cc, &read_available()))
}

fn read_available() -> String {
    std::fs::read_to_string(AVAILABLE).unwrap_or_default()
}

/// None when the kernel offers `cc` (after loading its module where it is
/// one); else the reason, naming the kernel option that builds it.
fn cc_missing(cc: &str, available: &str) -> Option<String> {
    if offers(available, cc) {
        return None;
    }
    // A module not loaded yet: the kernel would load it on first use by a
    // privileged process; load it now so the check is exact.
    let loaded = std::process::Command::new("modprobe")
        .args(["-q", &format!("tcp_{cc}")])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if loaded && offers(&read_available(), cc) {
        return None;
    }
    Some(format!(
        "this kernel has no {cc} congestion control (it offers {}; {cc} needs {} or the tcp_{cc} module)",
        available.trim(),
        config_option(cc)
    ))
}

fn offers(available: &str, cc: &str) -> bool {
    available.split_whitespace().any(|c| c == cc)
}

/// The kernel build option of a congestion control module.
fn config_option(cc: &str) -> String {
    let name = match cc {
        "highspeed" => "HSTCP".to_string(),
        other => other.to_ascii_uppercase(),
    };
    format!("CONFIG_TCP_CONG_{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_congestion_control_names_what_the_kernel_offers_and_needs() {
        let why = cc_missing("no-such-cc", "reno cubic bbr").unwrap();
        assert!(why.contains("offers reno cubic bbr"), "{why}");
        assert!(why.contains("CONFIG_TCP_CONG_NO-SUCH-CC"), "{why}");
        assert_eq!(config_option("highspeed"), "CONFIG_TCP_CONG_HSTCP");
        assert!(cc_missing("cubic", "reno cubic bbr").is_none());
        // The host's own: every Linux kernel has reno.
        assert!(cc_missing("reno", &read_available()).is_none());
    }

    #[test]
    fn an_openssl_point_runs_only_in_a_build_with_openssl() {
        let spec = TestSpec {
            tls: Some(crate::model::spec::TlsSpec {
                backend: crate::model::spec::TlsBackend::Openssl,
                ..Default::default()
            }),
            ..Default::default()
        };
        let why = missing_here(&spec, false);
        assert_eq!(why.is_some(), !cfg!(feature = "openssl"), "{why:?}");
        if let Some(w) = why {
            assert!(w.contains("default features"), "{w}");
        }
    }

    #[test]
    fn only_this_hosts_points_are_judged() {
        let mut spec = TestSpec {
            cc: Some("no-such-cc".into()),
            ..Default::default()
        };
        assert!(missing_here(&spec, true).is_some());
        assert!(missing_here(&spec, false).is_none());
        spec.cc = None;
        assert!(missing_here(&spec, true).is_none());
    }
}
