//! The built-in studies: the files under `studies/`, compiled in so the
//! binary needs nothing beside it. Each mirrors a seed write-up, sized for
//! an ordinary machine.

use std::path::Path;

use crate::study::file::Study;
use crate::study::sweep;
use crate::study::StudyError;

/// (name, file text) of every built-in study, in `study list` order.
pub const BUILTIN: &[(&str, &str)] = &[
    ("quick", include_str!("../../studies/quick.toml")),
    (
        "streams-to-line-rate",
        include_str!("../../studies/streams-to-line-rate.toml"),
    ),
    ("awm", include_str!("../../studies/awm.toml")),
    ("awm-mtu", include_str!("../../studies/awm-mtu.toml")),
    (
        "connections",
        include_str!("../../studies/connections.toml"),
    ),
    ("wan-window", include_str!("../../studies/wan-window.toml")),
    (
        "udp-small-packets",
        include_str!("../../studies/udp-small-packets.toml"),
    ),
    ("memcached", include_str!("../../studies/memcached.toml")),
    (
        "tls-crypto-hw",
        include_str!("../../studies/tls-crypto-hw.toml"),
    ),
    (
        "latency-under-load",
        include_str!("../../studies/latency-under-load.toml"),
    ),
    (
        "seed003-firewall",
        include_str!("../../studies/seed003-firewall.toml"),
    ),
    (
        "seed003-ciphers",
        include_str!("../../studies/seed003-ciphers.toml"),
    ),
    (
        "seed003-handshakes",
        include_str!("../../studies/seed003-handshakes.toml"),
    ),
    (
        "seed003-page-sizes",
        include_str!("../../studies/seed003-page-sizes.toml"),
    ),
];

pub fn names() -> Vec<&'static str> {
    BUILTIN.iter().map(|(n, _)| *n).collect()
}

/// A built-in study by name.
pub fn get(name: &str) -> Option<Result<Study, StudyError>> {
    BUILTIN.iter().find(|(n, _)| *n == name).map(|(n, text)| {
        Study::parse(text, &format!("studies/{n}.toml (built in)"), n).and_then(sweep::checked)
    })
}

/// A study file path, or a built-in name.
pub fn resolve(what: &str) -> Result<Study, StudyError> {
    let path = Path::new(what);
    if path.exists() || what.ends_with(".toml") || what.contains('/') {
        return Study::load(path).and_then(sweep::checked);
    }
    get(what).unwrap_or_else(|| {
        Err(StudyError::Unknown {
            name: what.into(),
            builtins: names().join(", "),
        })
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_builtin_study_parses() {
        for name in super::names() {
            let s = super::get(name).unwrap().unwrap();
            assert_eq!(s.name, name);
            assert!(!s.plots.is_empty(), "{name} draws something");
        }
    }
}
