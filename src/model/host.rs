//! The Configuration Summary of one end: machine, kernel, network stack
//! settings, links and crypto, as collected on that host (measure::host).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct HostInfo {
    pub hostname: String,
    pub os: String,
    pub kernel: String,
    pub arch: String,
    pub cpu_model: String,
    pub cpus: usize,
    pub mem_total_mib: u64,
    /// CPU features that matter to network and crypto speed.
    pub cpu_flags: Vec<String>,
    /// Network stack settings, by sysctl name.
    pub sysctls: BTreeMap<String, String>,
    pub linerate_version: String,
    pub git_commit: String,
    /// Network interfaces with MTU, speed and offloads (absent in older results).
    #[serde(default)]
    pub links: Vec<crate::model::host::LinkInfo>,
    /// The TLS libraries this linerate uses, with versions.
    #[serde(default)]
    pub tls_library: String,
    /// Whether the TLS backend can use the CPU's crypto instructions.
    #[serde(default)]
    pub crypto: String,
    /// Firewall rules and connection tracking packets pass through (None
    /// in older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firewall: Option<Firewall>,
    /// The test's NIC settings (`nic.*`) on this end's data interfaces:
    /// what each had during the test and what its driver refused (empty
    /// when the test asked for none, or this end was not changed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nic: Vec<crate::model::nic::NicInterface>,
    /// SELinux, AppArmor and audit (None in older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security: Option<super::security::SecurityState>,
}

/// What a packet walks on its way through this host's netfilter hooks.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Firewall {
    /// Rules in each legacy iptables table ("iptables filter" -> 12).
    pub iptables: BTreeMap<String, u32>,
    /// nftables rules, iptables-nft's included (None: could not list).
    pub nft_rules: Option<u32>,
    /// Connections conntrack holds now (None: conntrack not loaded).
    pub conntrack: Option<u64>,
    /// What could not be read and why ("... need root").
    pub unknown: Vec<String>,
}

impl Firewall {
    /// Rules known to be loaded, over all tables.
    pub fn rules(&self) -> u32 {
        self.iptables.values().sum::<u32>() + self.nft_rules.unwrap_or(0)
    }

    /// "no rules loaded; conntrack tracking 3 connections"
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        let tables: Vec<String> = self
            .iptables
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(t, n)| format!("{t} {n}"))
            .collect();
        if self.rules() == 0 {
            parts.push("no rules loaded".to_string());
        } else {
            let mut what = tables;
            if let Some(n) = self.nft_rules.filter(|n| *n > 0) {
                what.push(format!("nftables {n}"));
            }
            parts.push(format!(
                "{} rules loaded ({})",
                self.rules(),
                what.join(", ")
            ));
        }
        match self.conntrack {
            Some(n) => parts.push(format!("conntrack on, tracking {n} connections")),
            None => parts.push("conntrack not loaded".into()),
        }
        let mut s = parts.join("; ");
        if !self.unknown.is_empty() {
            s.push_str(&format!(" (unknown: {})", self.unknown.join("; ")));
        }
        s
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LinkInfo {
    pub name: String,
    pub mtu: Option<u32>,
    /// Mbit/s as the driver reports it (None for virtual links).
    pub speed_mbps: Option<u64>,
    pub state: String,
    /// Offload name -> on/off, where the kernel answers.
    pub offloads: BTreeMap<String, bool>,
    /// Driver, its version, firmware and bus address (`ethtool -i`); None
    /// for devices without a driver (lo) or in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<DriverInfo>,
    /// Interrupt coalescing (`ethtool -c`), where the driver has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coalesce: Option<Coalesce>,
    /// Receive and transmit queues the kernel uses (sysfs `queues/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_queues: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_queues: Option<u32>,
    /// The device's queue interrupts and the CPUs they may and do run on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub irqs: Vec<IrqInfo>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct DriverInfo {
    pub driver: String,
    pub version: String,
    pub firmware: String,
    pub bus: String,
}

/// The coalescing settings that decide how long a packet may wait for its
/// interrupt: microseconds and frames before one fires, and whether the
/// driver adapts them to the load.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Coalesce {
    pub rx_usecs: u32,
    pub rx_frames: u32,
    pub tx_usecs: u32,
    pub tx_frames: u32,
    pub adaptive_rx: bool,
    pub adaptive_tx: bool,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct IrqInfo {
    pub irq: u32,
    /// Its name in /proc/interrupts ("virtio2-input.0", "eth0-TxRx-3").
    pub name: String,
    /// CPUs it may run on (`smp_affinity_list`).
    pub affinity: String,
    /// The CPU that has served most of its interrupts so far.
    pub busiest_cpu: Option<usize>,
}

impl DriverInfo {
    /// "virtio_net 1.0.0, firmware -, bus 0000:00:03.0"
    pub fn describe(&self) -> String {
        let or_dash = |s: &str| {
            if s.is_empty() {
                "-".to_string()
            } else {
                s.to_string()
            }
        };
        format!(
            "{} {}, firmware {}, bus {}",
            self.driver,
            or_dash(&self.version),
            or_dash(&self.firmware),
            or_dash(&self.bus)
        )
    }
}

impl Coalesce {
    /// "rx 0 µs / 1 frame, tx 0 µs / 1 frame, adaptive rx off tx off"
    pub fn describe(&self) -> String {
        let onoff = |b: bool| if b { "on" } else { "off" };
        format!(
            "rx {} µs / {} frames, tx {} µs / {} frames, adaptive rx {} tx {}",
            self.rx_usecs,
            self.rx_frames,
            self.tx_usecs,
            self.tx_frames,
            onoff(self.adaptive_rx),
            onoff(self.adaptive_tx)
        )
    }
}

impl LinkInfo {
    /// "1 rx / 1 tx queues; irq 38 virtio2-input.0 on 0-1 (served by CPU 1), ..."
    pub fn describe_queues(&self) -> Option<String> {
        if self.rx_queues.is_none() && self.irqs.is_empty() {
            return None;
        }
        let mut parts = Vec::new();
        if let (Some(r), Some(t)) = (self.rx_queues, self.tx_queues) {
            parts.push(format!("{r} rx / {t} tx queues"));
        }
        for q in &self.irqs {
            parts.push(format!(
                "irq {} {} on CPUs {}{}",
                q.irq,
                q.name,
                q.affinity,
                q.busiest_cpu
                    .map(|c| format!(" (served by CPU {c})"))
                    .unwrap_or_default()
            ));
        }
        Some(parts.join("; "))
    }
}

impl LinkInfo {
    /// "mtu 65536, unknown, 10000 Mbit/s, tso on gso on gro on ..."
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(m) = self.mtu {
            parts.push(format!("mtu {m}"));
        }
        if !self.state.is_empty() {
            parts.push(self.state.clone());
        }
        if let Some(s) = self.speed_mbps {
            parts.push(format!("{s} Mbit/s"));
        }
        if !self.offloads.is_empty() {
            parts.push(
                self.offloads
                    .iter()
                    .map(|(k, v)| format!("{k} {}", if *v { "on" } else { "off" }))
                    .collect::<Vec<_>>()
                    .join(" "),
            );
        }
        parts.join(", ")
    }
}
