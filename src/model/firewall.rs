//! The firewall as a study axis (seed 003: "iptables loaded vs not"; the
//! Linux firewall "serializes the network traffic"). A point's
//! `firewall.rules = N` has N rules that never match loaded in the server's
//! namespace of a lab, so every packet walks all N; `firewall.conntrack`
//! says whether packets are tracked. What was loaded is read back and kept
//! in the result (`FirewallRecord`), so a table says what it measured.

use serde::{Deserialize, Serialize};

use super::error::Invalid;

/// The keys a study may sweep under `firewall.`.
pub const FIREWALL_AXES: &[&str] = &["rules", "conntrack"];

/// More rules than this take seconds to load and say nothing new.
pub const MAX_RULES: u32 = 20_000;

/// A point's firewall as written (`firewall.rules`, `firewall.conntrack`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FirewallPoint {
    /// Rules that never match, in the server namespace's INPUT path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<u32>,
    /// on: connection tracking with a stateful rule first (established
    /// packets are accepted before the N rules, as stateful firewalls do);
    /// off: no packet is tracked (raw table NOTRACK), every packet walks
    /// the N rules.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "on_off"
    )]
    pub conntrack: Option<bool>,
}

/// `true`/`false` or `"on"`/`"off"`, as the other switches of a study.
fn on_off<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Form {
        Bool(bool),
        Text(String),
    }
    match Form::deserialize(d)? {
        Form::Bool(b) => Ok(Some(b)),
        Form::Text(s) => match s.trim().to_ascii_lowercase().as_str() {
            "on" | "true" | "yes" => Ok(Some(true)),
            "off" | "false" | "no" => Ok(Some(false)),
            _ => Err(serde::de::Error::custom(format!(
                "firewall.conntrack '{s}' is not on or off"
            ))),
        },
    }
}

impl FirewallPoint {
    pub fn is_empty(&self) -> bool {
        self.rules.is_none() && self.conntrack.is_none()
    }

    /// The firewall this point asks for: rules default 0, conntrack off.
    pub fn resolve(&self) -> Result<FirewallSpec, Invalid> {
        let rules = self.rules.unwrap_or(0);
        if rules > MAX_RULES {
            return Err(format!("firewall.rules {rules}: at most {MAX_RULES}").into());
        }
        Ok(FirewallSpec {
            rules,
            conntrack: self.conntrack.unwrap_or(false),
        })
    }
}

/// What the runner loads for a point.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct FirewallSpec {
    pub rules: u32,
    pub conntrack: bool,
}

impl FirewallSpec {
    /// "1000 rules, conntrack on"
    pub fn describe(&self) -> String {
        format!(
            "{} rule{}, conntrack {}",
            self.rules,
            if self.rules == 1 { "" } else { "s" },
            if self.conntrack { "on" } else { "off" }
        )
    }
}

/// What was loaded for a point, read back from the namespace.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct FirewallRecord {
    /// The namespace the rules were loaded in (the lab's server).
    pub namespace: String,
    /// What the point asked for.
    pub asked: FirewallSpec,
    /// Lines of `iptables-legacy -S` (filter table) with the rules loaded:
    /// the policies, linerate's chain, its jump and its rules.
    pub iptables_s_lines: u32,
    /// Rules in linerate's chain, read back (the stateful rule included
    /// with conntrack on).
    pub rules_loaded: u32,
    /// Rules in the raw table that untrack packets (conntrack off).
    pub notrack_rules: u32,
    /// Connections conntrack held in the namespace at the point's end
    /// (None: the namespace has no conntrack table).
    pub conntrack_entries: Option<u64>,
    /// Lines of `iptables-legacy -S` after removal (the three policies
    /// alone when nothing is left).
    pub iptables_s_lines_after: u32,
}
