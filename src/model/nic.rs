//! NIC settings a test may ask for (`nic.gro = false`, `nic.rx-ring =
//! 512`, `nic.rps = "f"`): their names, the kind of value each takes and
//! its one spelling, and the record of what each interface had during a
//! test (read back after applying) and what its driver refused. The
//! settings are applied by the lab (its hosts' namespaces) or by an agent
//! started with `serve --allow-nic` (`hostops::nic`); this file is only
//! the data both sides agree on.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::{Invalid, ModelError};

/// What a setting's value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NicKind {
    /// on or off (an offload; adaptive coalescing).
    Switch,
    /// A count: ring entries, channels, microseconds.
    Count,
    /// A CPU mask in hexadecimal (`rps_cpus`, `xps_cpus`); "0" is off.
    Mask,
}

/// Every setting, in the order they are applied (channels first: they make
/// and remove the queues whose RPS/XPS masks come last), with its kind and
/// what it is.
pub const NIC_SETTINGS: &[(&str, NicKind, &str)] = &[
    (
        "combined",
        NicKind::Count,
        "combined channels (ethtool -L combined)",
    ),
    ("rx", NicKind::Count, "receive channels (ethtool -L rx)"),
    ("tx", NicKind::Count, "transmit channels (ethtool -L tx)"),
    (
        "rx-ring",
        NicKind::Count,
        "receive ring entries (ethtool -G rx)",
    ),
    (
        "tx-ring",
        NicKind::Count,
        "transmit ring entries (ethtool -G tx)",
    ),
    (
        "rx-usecs",
        NicKind::Count,
        "receive interrupt coalescing, µs (ethtool -C rx-usecs)",
    ),
    (
        "tx-usecs",
        NicKind::Count,
        "transmit interrupt coalescing, µs (ethtool -C tx-usecs)",
    ),
    (
        "adaptive-rx",
        NicKind::Switch,
        "adaptive receive coalescing (ethtool -C adaptive-rx)",
    ),
    (
        "rx-checksum",
        NicKind::Switch,
        "receive checksum offload (ethtool -K rx)",
    ),
    (
        "tx-checksum",
        NicKind::Switch,
        "transmit checksum offload (ethtool -K tx)",
    ),
    (
        "tso",
        NicKind::Switch,
        "TCP segmentation offload (ethtool -K tso)",
    ),
    (
        "gso",
        NicKind::Switch,
        "generic segmentation offload (ethtool -K gso)",
    ),
    (
        "gro",
        NicKind::Switch,
        "generic receive offload (ethtool -K gro)",
    ),
    (
        "lro",
        NicKind::Switch,
        "large receive offload (ethtool -K lro)",
    ),
    (
        "rps",
        NicKind::Mask,
        "receive packet steering: CPU mask of every rx queue (rps_cpus)",
    ),
    (
        "xps",
        NicKind::Mask,
        "transmit packet steering: CPU mask of every tx queue (xps_cpus)",
    ),
];

/// The one spelling of a setting's name (`rx_ring` reads as `rx-ring`),
/// with its kind; None for a name that is not a setting.
pub fn setting(name: &str) -> Option<(&'static str, NicKind)> {
    let name = name.trim().to_ascii_lowercase().replace('_', "-");
    NIC_SETTINGS
        .iter()
        .find(|(k, _, _)| *k == name)
        .map(|(k, kind, _)| (*k, *kind))
}

/// Every setting's name, for error messages and `axis_keys`.
pub fn names() -> Vec<&'static str> {
    NIC_SETTINGS.iter().map(|(k, _, _)| *k).collect()
}

/// The one spelling of a value of `kind`: "on"/"off", a decimal count, a
/// hexadecimal mask without leading zeros or commas.
pub fn normalize(kind: NicKind, value: &str) -> Result<String, ModelError> {
    let v = value.trim().to_ascii_lowercase();
    let not = |form| ModelError::Form {
        input: value.to_string(),
        form,
    };
    match kind {
        NicKind::Switch => match v.as_str() {
            "on" | "true" | "yes" | "1" => Ok("on".into()),
            "off" | "false" | "no" | "0" => Ok("off".into()),
            _ => Err(not("on or off (true/false)")),
        },
        NicKind::Count => v
            .parse::<u32>()
            .map(|n| n.to_string())
            .map_err(|_| not("a count (0 to 4294967295)")),
        NicKind::Mask => normalize_mask(&v)
            .ok_or_else(|| not("a hexadecimal CPU mask (\"f\" = CPUs 0-3, \"0\" = off)")),
    }
}

/// "0x0000000f", "00000000,0000000f" (sysfs groups of 32 bits) and "F" all
/// read "f"; None for anything but hex digits.
pub fn normalize_mask(v: &str) -> Option<String> {
    let v = v.trim().to_ascii_lowercase();
    let v = v.strip_prefix("0x").unwrap_or(&v);
    let digits: String = v.chars().filter(|c| *c != ',').collect();
    if digits.is_empty() || digits.len() > 1024 || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let t = digits.trim_start_matches('0');
    Some(if t.is_empty() { "0".into() } else { t.into() })
}

/// A study's settings checked and spelled one way: each key a setting of
/// `NIC_SETTINGS`, each value of its kind.
pub fn normalize_all(want: &BTreeMap<String, String>) -> Result<BTreeMap<String, String>, Invalid> {
    let mut out = BTreeMap::new();
    for (k, v) in want {
        let Some((name, kind)) = setting(k) else {
            return Err(Invalid(format!(
                "nic.{k} is not a NIC setting; they are nic.{}",
                names().join(", nic.")
            )));
        };
        let v = normalize(kind, v).map_err(|e| Invalid(format!("nic.{name}: {e}")))?;
        out.insert(name.to_string(), v);
    }
    Ok(out)
}

/// Reads a study's `nic` table: values may be TOML booleans, integers or
/// strings (`nic.gro = false`, `nic.rx-ring = 512`, `nic.rps = "f"`); each
/// is kept as text and checked when the spec is built.
pub fn de_values<'de, D>(d: D) -> Result<Option<BTreeMap<String, String>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Value {
        Bool(bool),
        Int(i64),
        Text(String),
    }
    let m: Option<BTreeMap<String, Value>> = Option::deserialize(d)?;
    Ok(m.map(|m| {
        m.into_iter()
            .map(|(k, v)| {
                let v = match v {
                    Value::Bool(b) => if b { "on" } else { "off" }.to_string(),
                    Value::Int(i) => i.to_string(),
                    Value::Text(t) => t,
                };
                (k, v)
            })
            .collect()
    }))
}

/// One interface's NIC settings over a test: what it had (read back after
/// applying) and what its driver refused. Kept in the end's `HostInfo`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct NicInterface {
    /// The interface (`lr0` in a lab, `eth0` on a host).
    pub name: String,
    /// The lab namespace it lives in (None: the agent's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Each setting the test asked for, as read back from the interface
    /// after applying ("on", "1024", "f"; a mask that differs between
    /// queues reads "rx-0=3,rx-1=0"); absent when it could not be read.
    pub had: BTreeMap<String, String>,
    /// The settings the driver refused (not applied, or not kept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<NicRefusal>,
}

/// A setting the interface's driver did not take.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct NicRefusal {
    pub setting: String,
    /// The value the test asked for.
    pub wanted: String,
    /// The driver's (ethtool's, the kernel's) words.
    pub reason: String,
}

impl NicInterface {
    /// "lr0 (nic-a): gro off, tso on; refused rx-ring 512 (netlink error: Operation not supported)"
    pub fn describe(&self) -> String {
        let mut s = self.name.clone();
        if let Some(ns) = &self.namespace {
            s.push_str(&format!(" ({ns})"));
        }
        let had: Vec<String> = self.had.iter().map(|(k, v)| format!("{k} {v}")).collect();
        s.push_str(": ");
        s.push_str(if had.is_empty() { "-" } else { "" });
        s.push_str(&had.join(", "));
        if !self.refused.is_empty() {
            let r: Vec<String> = self
                .refused
                .iter()
                .map(|r| format!("{} {} ({})", r.setting, r.wanted, r.reason))
                .collect();
            s.push_str(&format!("; refused {}", r.join(", ")));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_take_one_spelling() {
        assert_eq!(setting("rx_ring"), Some(("rx-ring", NicKind::Count)));
        assert_eq!(setting("GRO"), Some(("gro", NicKind::Switch)));
        assert_eq!(
            setting("tx-checksum"),
            Some(("tx-checksum", NicKind::Switch))
        );
        assert_eq!(setting("rps"), Some(("rps", NicKind::Mask)));
        assert_eq!(setting("rings"), None);
        assert_eq!(setting(""), None);
    }

    #[test]
    fn values_take_one_spelling() {
        assert_eq!(normalize(NicKind::Switch, "false").unwrap(), "off");
        assert_eq!(normalize(NicKind::Switch, "ON").unwrap(), "on");
        assert_eq!(
            normalize(NicKind::Switch, "maybe").unwrap_err().to_string(),
            "'maybe' is not on or off (true/false)"
        );
        assert_eq!(normalize(NicKind::Count, " 512 ").unwrap(), "512");
        assert!(normalize(NicKind::Count, "-1").is_err());
        assert_eq!(normalize(NicKind::Mask, "0x0000000F").unwrap(), "f");
        assert_eq!(normalize(NicKind::Mask, "00000000,00000003").unwrap(), "3");
        assert_eq!(normalize(NicKind::Mask, "000").unwrap(), "0");
        assert_eq!(
            normalize(NicKind::Mask, "g").unwrap_err().to_string(),
            "'g' is not a hexadecimal CPU mask (\"f\" = CPUs 0-3, \"0\" = off)"
        );
        assert!(normalize(NicKind::Mask, "").is_err());
    }

    #[test]
    fn a_study_s_settings_are_checked_and_spelled_one_way() {
        let want: BTreeMap<String, String> = [("rx_ring", "256"), ("gro", "false")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let got = normalize_all(&want).unwrap();
        assert_eq!(got["rx-ring"], "256");
        assert_eq!(got["gro"], "off");
        let bad: BTreeMap<String, String> = [("ring".to_string(), "1".to_string())]
            .into_iter()
            .collect();
        let e = normalize_all(&bad).unwrap_err().0;
        assert!(
            e.contains("nic.ring is not a NIC setting") && e.contains("nic.gro"),
            "{e}"
        );
    }

    #[test]
    fn an_interface_describes_what_it_had_and_what_was_refused() {
        let i = NicInterface {
            name: "lr0".into(),
            namespace: Some("nic-a".into()),
            had: [("gro".to_string(), "off".to_string())]
                .into_iter()
                .collect(),
            refused: vec![NicRefusal {
                setting: "rx-ring".into(),
                wanted: "512".into(),
                reason: "Operation not supported".into(),
            }],
        };
        assert_eq!(
            i.describe(),
            "lr0 (nic-a): gro off; refused rx-ring 512 (Operation not supported)"
        );
    }
}
