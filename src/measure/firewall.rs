//! Whether packets on this host walk firewall rules, for the Configuration
//! Summary: seed 003 found that loaded iptables rules serialized its
//! traffic, and connection tracking adds a hash lookup and an entry per
//! flow. Read without changing anything: legacy iptables tables through
//! their `getsockopt` (rule counts), nftables (which also holds
//! iptables-nft's rules) through `nft -j list ruleset`, and conntrack from
//! /proc. Counting rules needs root; without it the summary says so.

use std::time::Duration;

use super::MeasureError;
use crate::model::host::Firewall;

/// `IPT_SO_GET_INFO` / `IP6T_SO_GET_INFO`: both are 64 on their level.
const SO_GET_INFO: libc::c_int = 64;

/// `struct ipt_getinfo` (same layout as ip6t_getinfo).
#[repr(C)]
struct GetInfo {
    name: [u8; 32],
    valid_hooks: u32,
    hook_entry: [u32; 5],
    underflow: [u32; 5],
    num_entries: u32,
    size: u32,
}

/// Rules in one legacy table: its entries minus one policy per built-in
/// chain and the closing error entry. None when the kernel refuses (not
/// root) or the table is gone.
fn legacy_rules(family: libc::c_int, level: libc::c_int, table: &str) -> Option<u32> {
    if table.len() >= 32 {
        return None;
    }
    // SAFETY: a raw socket used only for one getsockopt, closed below.
    let fd = unsafe {
        libc::socket(
            family,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::IPPROTO_RAW,
        )
    };
    if fd < 0 {
        return None;
    }
    let mut info = GetInfo {
        name: [0; 32],
        valid_hooks: 0,
        hook_entry: [0; 5],
        underflow: [0; 5],
        num_entries: 0,
        size: 0,
    };
    info.name[..table.len()].copy_from_slice(table.as_bytes());
    let mut len = std::mem::size_of::<GetInfo>() as libc::socklen_t;
    // SAFETY: the kernel reads the table name from `info` and writes at
    // most `len` bytes back into it.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            level,
            SO_GET_INFO,
            (&mut info as *mut GetInfo).cast(),
            &mut len,
        )
    };
    // SAFETY: closing the socket opened above.
    unsafe { libc::close(fd) };
    (rc == 0).then(|| {
        info.num_entries
            .saturating_sub(info.valid_hooks.count_ones() + 1)
    })
}

/// Counts rule objects in `nft -j list ruleset` output.
pub fn nft_rules_in(json: &str) -> Option<u32> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let list = v.get("nftables")?.as_array()?;
    Some(list.iter().filter(|o| o.get("rule").is_some()).count() as u32)
}

/// Runs `nft -j list ruleset` for at most two seconds.
fn nft_rules() -> Result<u32, MeasureError> {
    use super::probe::{ask, Unanswered};
    match ask("nft", &["-j", "list", "ruleset"], Duration::from_secs(2)) {
        Err(Unanswered::Missing) => Err(MeasureError::NftMissing),
        Err(Unanswered::Silent) => Err(MeasureError::NftSilent),
        Ok((true, out)) => nft_rules_in(&out).ok_or(MeasureError::NftUnreadable),
        Ok((false, _)) => Err(MeasureError::NftNeedsRoot),
    }
}

fn table_names(path: &str) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// This host's (network namespace's) firewall as far as it can be read.
pub fn collect() -> Firewall {
    let mut fw = Firewall::default();
    for (family, level, names, tag) in [
        (
            libc::AF_INET,
            libc::SOL_IP,
            "/proc/net/ip_tables_names",
            "iptables",
        ),
        (
            libc::AF_INET6,
            libc::SOL_IPV6,
            "/proc/net/ip6_tables_names",
            "ip6tables",
        ),
    ] {
        for t in table_names(names) {
            match legacy_rules(family, level, &t) {
                Some(n) => {
                    fw.iptables.insert(format!("{tag} {t}"), n);
                }
                None => fw.unknown.push(format!(
                    "{tag} table {t} loaded; its rules need root to count"
                )),
            }
        }
    }
    match nft_rules() {
        Ok(n) => fw.nft_rules = Some(n),
        Err(e) => fw.unknown.push(e.to_string()),
    }
    fw.conntrack = std::fs::read_to_string("/proc/sys/net/netfilter/nf_conntrack_count")
        .ok()
        .and_then(|s| s.trim().parse().ok());
    fw
}

#[cfg(test)]
mod tests {
    #[test]
    fn nft_json_rules_are_counted() {
        let json = r#"{"nftables": [{"metainfo": {"version": "1.0.6"}},
            {"table": {"family": "inet", "name": "filter", "handle": 1}},
            {"chain": {"family": "inet", "table": "filter", "name": "input", "handle": 1}},
            {"rule": {"family": "inet", "table": "filter", "chain": "input", "handle": 3, "expr": []}},
            {"rule": {"family": "inet", "table": "filter", "chain": "input", "handle": 4, "expr": []}}]}"#;
        assert_eq!(super::nft_rules_in(json), Some(2));
        assert_eq!(super::nft_rules_in(r#"{"nftables": []}"#), Some(0));
        assert_eq!(super::nft_rules_in("not json"), None);
    }

    #[test]
    fn this_host_is_read_without_error() {
        let fw = super::collect();
        // As root, nothing is unknown; otherwise the reason is said.
        if unsafe { libc::geteuid() } == 0 && std::path::Path::new("/usr/sbin/nft").exists() {
            assert!(fw.nft_rules.is_some(), "{fw:?}");
        }
        assert!(!fw.describe().is_empty());
    }
}
