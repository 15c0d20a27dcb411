//! What a lab tunnel (`lab.tunnel`) costs against the clear path: points
//! that differ only in it, their aggregate throughput and CPU per KB on
//! both ends (a userspace tunnel's process included), and, where IPsec was
//! what a seed measured but this kernel has no ESP, what stood in for it.

use super::shared::KeyPoint;
use crate::model::tunnel::TunnelInfo;
use crate::report::analysis::landscape::{Landscape, Row};

const AXIS: &str = "lab.tunnel";

/// The tunnel a row's results ran through (None: the clear path).
fn tunnel_of(r: &Row) -> Option<&TunnelInfo> {
    r.results
        .iter()
        .find_map(|t| t.lab.as_ref()?.tunnel.as_ref())
}

/// "0.18x" or "0.12-0.20x" over the ratios given.
fn span(v: &[f64]) -> String {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if (hi - lo) < 0.005 * hi.abs().max(1e-9) || v.len() == 1 {
        format!("{lo:.2}x")
    } else {
        format!("{lo:.2}-{hi:.2}x")
    }
}

/// Each tunnel kind of the study against the clear points with the same
/// other parameters: throughput and CPU per KB ratios (tunnel / clear),
/// and the substitution for IPsec where the results say ESP was missing.
pub fn tunnel_cost(l: &Landscape) -> Vec<KeyPoint> {
    let mut out = Vec::new();
    let mut kinds: Vec<&str> = Vec::new();
    for r in &l.rows {
        if let Some(k) = r.point.param(AXIS) {
            if k != "none" && !kinds.contains(&k) {
                kinds.push(k);
            }
        }
    }
    for kind in kinds {
        let mut tput = Vec::new();
        let mut client = Vec::new();
        let mut agent = Vec::new();
        let mut at = Vec::new();
        let mut info: Option<&TunnelInfo> = None;
        for t in l.rows.iter().filter(|r| r.point.param(AXIS) == Some(kind)) {
            let rest = t.point.label_except(AXIS);
            let Some(c) = l.rows.iter().find(|r| {
                r.point.param(AXIS) == Some("none") && r.point.label_except(AXIS) == rest
            }) else {
                continue;
            };
            info = info.or(tunnel_of(t));
            let ratio = |k: &str| match (t.mean(k), c.mean(k)) {
                (Some(a), Some(b)) if b > 0.0 => Some(a / b),
                _ => None,
            };
            if let Some(x) = ratio("throughput_bps") {
                tput.push(x);
                at.push(rest);
            }
            client.extend(ratio("client_us_per_kb"));
            agent.extend(ratio("agent_us_per_kb"));
        }
        if tput.is_empty() {
            continue;
        }
        let what = info.map_or(kind.to_string(), |i| i.describe());
        let over = if at.len() > 1 {
            format!(
                " over {} points ({} to {})",
                at.len(),
                at[0],
                at[at.len() - 1]
            )
        } else if !at[0].is_empty() {
            format!(" at {}", at[0])
        } else {
            String::new()
        };
        let mut text = format!(
            "Through the {what} tunnel, aggregate throughput was {} the clear path's{over}",
            span(&tput)
        );
        if !client.is_empty() || !agent.is_empty() {
            let mut parts = Vec::new();
            if !client.is_empty() {
                parts.push(format!("{} on the client", span(&client)));
            }
            if !agent.is_empty() {
                parts.push(format!("{} on the server", span(&agent)));
            }
            text.push_str(&format!(", and CPU per KB {}", parts.join(" and ")));
            if info.is_some_and(|i| i.implementation == "userspace") {
                text.push_str(" (each end's tunnel process counted in its CPU)");
            }
        }
        text.push('.');
        // An overlay without a cipher stands in for nothing: it is the
        // encapsulation's own price.
        let unencrypted = info.is_some_and(|i| i.cipher == "none");
        if unencrypted {
            text.push_str(
                " It encapsulates without encryption: what an overlay costs before any cipher.",
            );
        }
        let substituted = info
            .filter(|i| !i.kind.is_esp() && !unencrypted)
            .and_then(|i| i.esp_unavailable.as_ref());
        let advice = if let Some(why) = substituted {
            text.push_str(&format!(
                " IPsec (ESP, the seed's encryption) could not run here ({why}): {kind} stood in for it{}.",
                info.map_or(String::new(), |i| format!(
                    ", encrypting with {}{}",
                    i.cipher,
                    if i.implementation == "userspace" {
                        " in a userspace process"
                    } else {
                        " in the kernel"
                    }
                ))
            ));
            "On a kernel with CONFIG_INET_ESP (and CONFIG_CRYPTO_GCM), run the seed's own IPsec with lab.tunnel = \"ipsec\" (AES-GCM-256 in the kernel); a kernel WireGuard module (CONFIG_WIREGUARD) also spares the copies to and from a userspace process. Either way, more streams spread the encryption over more cores only where the tunnel has more than one worker.".to_string()
        } else {
            "The ratio is the price of the tunnel on these CPUs: compare CPU per KB rather than throughput where the link, not the CPU, is the limit; a kernel implementation avoids the copies of a userspace one.".to_string()
        };
        out.push(KeyPoint {
            rule: "tunnel_cost",
            text,
            advice,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::stats::estimate;
    use crate::model::lab::LabRecord;
    use crate::model::result::TestResult;
    use crate::model::tunnel::TunnelKind;
    use crate::study::sweep::Point;

    fn row(tunnel: &str, flows: &str, tput: f64, client: f64, agent: f64) -> Row {
        let mut res = TestResult::default();
        if tunnel != "none" {
            res.lab = Some(LabRecord {
                tunnel: Some(TunnelInfo {
                    kind: TunnelKind::Wireguard,
                    implementation: "userspace".into(),
                    program: Some("wireguard-go v0.0.20220316".into()),
                    cipher: "ChaCha20-Poly1305".into(),
                    mtu: 8940,
                    esp_unavailable: Some(
                        "kernel 6.18: CONFIG_INET_ESP not set in /proc/config.gz".into(),
                    ),
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
        let mut values = std::collections::BTreeMap::new();
        values.insert("throughput_bps", estimate(&[tput], 99.0));
        values.insert("client_us_per_kb", estimate(&[client], 99.0));
        values.insert("agent_us_per_kb", estimate(&[agent], 99.0));
        Row {
            point: Point {
                groups: Vec::new(),
                index: 0,
                id: "p".into(),
                params: vec![("flows".into(), flows.into()), (AXIS.into(), tunnel.into())],
                spec: Default::default(),
                confidence: Default::default(),
            },
            results: vec![res],
            values,
        }
    }

    fn land(rows: Vec<Row>) -> Landscape {
        Landscape {
            rows,
            dims: vec!["flows".into(), AXIS.into()],
            line_rate_bps: None,
            line_rate_note: None,
            line_rate_measured: false,
            threshold: 0.9,
            window_rtt: false,
            model_note: None,
        }
    }

    #[test]
    fn the_tunnel_is_priced_against_the_clear_path_and_the_substitution_said() {
        let l = land(vec![
            row("none", "1", 10e9, 0.3, 0.4),
            row("wireguard", "1", 1e9, 3.0, 2.0),
            row("none", "4", 12e9, 0.3, 0.4),
            row("wireguard", "4", 2.4e9, 1.5, 1.6),
        ]);
        let k = tunnel_cost(&l);
        assert_eq!(k.len(), 1);
        let t = &k[0].text;
        assert!(t.contains("aggregate throughput was 0.10-0.20x the clear path's over 2 points (flows=1 to flows=4)"), "{t}");
        assert!(
            t.contains("CPU per KB 5.00-10.00x on the client and 4.00-5.00x on the server"),
            "{t}"
        );
        assert!(t.contains("each end's tunnel process counted"), "{t}");
        assert!(t.contains("IPsec (ESP, the seed's encryption) could not run here (kernel 6.18: CONFIG_INET_ESP not set"), "{t}");
        assert!(t.contains("wireguard stood in for it, encrypting with ChaCha20-Poly1305 in a userspace process"), "{t}");
        assert!(k[0].advice.contains("lab.tunnel = \"ipsec\""));
        // No clear twin: nothing to say.
        assert!(tunnel_cost(&land(vec![row("wireguard", "1", 1e9, 3.0, 2.0)])).is_empty());
        assert!(tunnel_cost(&land(vec![row("none", "1", 1e9, 3.0, 2.0)])).is_empty());
    }
}
