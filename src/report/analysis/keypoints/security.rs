//! The hosts' security state: SELinux, AppArmor and audit, when active.

use super::shared::KeyPoint;
use crate::report::analysis::landscape::Landscape;

/// SELinux, AppArmor or audit active on either end (seed 003: "check
/// whether selinux and auditing are required for your business; if not,
/// switch them off"): each adds checks to the system calls these tests
/// make (connect, accept, send), so its cost is in the figures.
pub fn security_state(l: &Landscape) -> Vec<KeyPoint> {
    let Some(r) = l.rows.iter().find_map(|r| r.results.first()) else {
        return vec![];
    };
    let (c, a) = (&r.environment.client, &r.environment.agent);
    let one_host = c.hostname == a.hostname && r.agent.local;
    let mut out = Vec::new();
    for (side, h) in [("client", c), ("agent", a)] {
        if one_host && side == "agent" {
            break;
        }
        let Some(s) = &h.security else { continue };
        let active = s.active();
        if active.is_empty() {
            continue;
        }
        out.push(KeyPoint {
            rule: "security_state",
            text: format!(
                "{} on the {}: {}. Its checks run on every connect, accept and socket call of these tests, so the figures include their cost.",
                active[0].split(',').next().unwrap_or_default(),
                if one_host { "host" } else { side },
                active.join("; ")
            ),
            advice: "Where the policy allows, compare a point with them off (SELinux permissive or selinux=0, AppArmor profiles unloaded, auditd stopped and audit=0 at boot), as seed 003 advises for hosts that do not need them.".into(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::result::TestResult;
    use crate::model::security::SecurityState;
    use crate::report::analysis::landscape::Row;
    use crate::study::sweep::Point;

    fn land(r: TestResult) -> Landscape {
        Landscape {
            rows: vec![Row {
                point: Point {
                    groups: Vec::new(),
                    index: 0,
                    id: "p0".into(),
                    params: vec![],
                    spec: Default::default(),
                    confidence: Default::default(),
                },
                results: vec![r],
                values: Default::default(),
            }],
            dims: vec![],
            line_rate_bps: None,
            line_rate_note: None,
            line_rate_measured: false,
            threshold: 0.9,
            window_rtt: false,
            model_note: None,
        }
    }

    #[test]
    fn an_active_module_on_an_end_is_a_key_point() {
        let mut r = TestResult::default();
        r.environment.client.hostname = "a".into();
        r.environment.agent.hostname = "b".into();
        r.environment.client.security = Some(SecurityState::default());
        r.environment.agent.security = Some(SecurityState {
            selinux: Some("enforcing".into()),
            auditd_running: true,
            ..Default::default()
        });
        let k = security_state(&land(r.clone()));
        assert_eq!(k.len(), 1, "{k:?}");
        assert!(
            k[0].text
                .starts_with("SELinux enforcing on the agent: SELinux enforcing; auditd running."),
            "{}",
            k[0].text
        );
        // Nothing active, or nothing recorded (older results): silent.
        r.environment.agent.security = Some(SecurityState::default());
        assert!(security_state(&land(r.clone())).is_empty());
        r.environment.agent.security = None;
        assert!(security_state(&land(r)).is_empty());
    }
}
