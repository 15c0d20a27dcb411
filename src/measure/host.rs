//! The Configuration Summary of a result: what machine, kernel and network
//! stack settings each end ran with, collected automatically on each host.

use crate::model::host::HostInfo;

const SYSCTLS: &[&str] = &[
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.ipv4.tcp_congestion_control",
    "net.core.netdev_max_backlog",
    "net.core.somaxconn",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_tw_reuse",
    "net.ipv4.tcp_timestamps",
    "net.ipv4.tcp_window_scaling",
    "net.ipv4.tcp_no_metrics_save",
    "net.core.default_qdisc",
];

const FLAGS: &[&str] = &[
    "aes",
    "vaes",
    "pclmulqdq",
    "vpclmulqdq",
    "sha_ni",
    "avx2",
    "avx512f",
    "hypervisor",
];

fn read(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

pub fn collect() -> HostInfo {
    let cpuinfo = read("/proc/cpuinfo");
    let field = |name: &str| {
        cpuinfo
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default()
    };
    let flags_line = field("flags");
    let flags: Vec<String> = FLAGS
        .iter()
        .filter(|f| flags_line.split_whitespace().any(|x| x == **f))
        .map(|f| f.to_string())
        .collect();
    let os = read("/etc/os-release")
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_else(|| std::env::consts::OS.to_string());
    let mem = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| {
            v.split_whitespace()
                .next()
                .and_then(|n| n.parse::<u64>().ok())
        })
        .unwrap_or(0);
    let sysctls = SYSCTLS
        .iter()
        .map(|k| {
            let path = sysctl_path(k);
            let v = read(&path).split_whitespace().collect::<Vec<_>>().join(" ");
            (k.to_string(), if v.is_empty() { "n/a".into() } else { v })
        })
        .collect();
    let flags_for_verdict = flags.clone();
    HostInfo {
        hostname: read("/proc/sys/kernel/hostname"),
        os,
        kernel: read("/proc/sys/kernel/osrelease"),
        arch: std::env::consts::ARCH.to_string(),
        cpu_model: field("model name"),
        cpus: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        mem_total_mib: mem / 1024,
        cpu_flags: flags,
        sysctls,
        linerate_version: env!("CARGO_PKG_VERSION").to_string(),
        git_commit: option_env!("LINERATE_GIT_COMMIT")
            .unwrap_or("unknown")
            .to_string(),
        links: super::netdev::links(),
        tls_library: super::crypto::tls_libraries(),
        firewall: Some(super::firewall::collect()),
        security: Some(super::security::collect()),
        crypto: super::crypto::verdict_with(
            &flags_for_verdict,
            &super::crypto::quick_speeds(),
            false,
        ),
        // Filled by whoever applied the test's NIC settings (hostops::nic).
        nic: Vec::new(),
    }
}

/// The file of sysctl `key` ("net.core.rmem_max" ->
/// /proc/sys/net/core/rmem_max), in this thread's network namespace.
pub fn sysctl_path(key: &str) -> String {
    format!("/proc/sys/{}", key.replace('.', "/"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn collects_this_host() {
        let h = super::collect();
        assert!(!h.kernel.is_empty());
        assert!(h.cpus >= 1);
        assert!(h.sysctls["net.ipv4.tcp_rmem"].split(' ').count() == 3);
    }
}
