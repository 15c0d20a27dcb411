//! The hosts: firewall rules every packet walks, and both ends on one host.

use super::shared::KeyPoint;
use crate::report::analysis::landscape::Landscape;

/// Firewall rules on either end: every packet walks them (seed 003 found
/// loaded iptables rules serializing its traffic).
pub fn firewall(l: &Landscape) -> Vec<KeyPoint> {
    let Some(r) = l.rows.iter().find_map(|r| r.results.first()) else {
        return vec![];
    };
    let (c, a) = (&r.environment.client, &r.environment.agent);
    let one_host = c.hostname == a.hostname && r.agent.local;
    let mut ends: Vec<(&str, &crate::model::host::Firewall)> = Vec::new();
    for (side, h) in [("client", c), ("agent", a)] {
        if let Some(f) = h.firewall.as_ref().filter(|f| f.rules() > 0) {
            if !(one_host && side == "agent" && !ends.is_empty()) {
                ends.push((if one_host { "host" } else { side }, f));
            }
        }
    }
    ends.into_iter()
        .map(|(side, f)| KeyPoint {
            rule: "firewall",
            text: format!(
                "The {side} has firewall rules loaded: {}. Every packet of these tests walked them{}, so the figures include their cost.",
                f.describe(),
                if f.conntrack.is_some() { " and was looked up in the connection tracking table" } else { "" }
            ),
            advice: "To see what they cost, repeat a point with the rules unloaded (or in a lab, whose namespaces have none); a long chain or a rule matched late can serialize traffic on one core (seed 003), where an early ACCEPT for established flows or an nftables set avoids it.".into(),
        })
        .collect()
}

/// Both ends on one host share its cores.
pub fn shared_host(l: &Landscape) -> Vec<KeyPoint> {
    let Some(r) = l.rows.iter().find_map(|r| r.results.first()) else {
        return vec![];
    };
    let (c, a) = (&r.environment.client, &r.environment.agent);
    if !(r.agent.local || (!c.hostname.is_empty() && c.hostname == a.hostname)) {
        return vec![];
    }
    if let Some(lab) = &r.lab {
        return vec![KeyPoint {
            rule: "shared_host",
            text: format!(
                "Both ends ran on one host ({}, {} CPUs) in lab {}'s namespaces: the network is the emulated link ({}, applied by {}), and each end's CPU competes with the other's and with the emulator's.",
                if c.hostname.is_empty() { "this host" } else { &c.hostname },
                c.cpus,
                lab.name,
                lab.link,
                lab.backend
            ),
            advice: "Delay, rate and loss are emulated faithfully (see each point's calibration); CPU costs are one host's. For a real WAN, run `linerate serve` on the far host and use --agent.".into(),
        }];
    }
    vec![KeyPoint {
        rule: "shared_host",
        text: format!(
            "Client and agent ran on the same host ({}, {} CPUs): each end's CPU competes with the other's, and the figures describe the host's network stack over loopback, not a network.",
            if c.hostname.is_empty() { "this host" } else { &c.hostname },
            c.cpus
        ),
        advice: "Run `linerate serve` on a second machine and give its address with --agent (or [network] agent in the study) to measure a real link.".into(),
    }]
}
