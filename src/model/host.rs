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
