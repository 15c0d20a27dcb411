//! The lab tunnel row of the Configuration Summary: which tunnels the
//! study's results ran through (kind, implementation, cipher, MTU), and
//! whether their counters agreed with linerate's bytes.

use crate::model::result::TestResult;

/// "none (clear path); wireguard (userspace wireguard-go v0.0.20220316,
/// ChaCha20-Poly1305, MTU 1440), counters agree in 4 of 4 tests" (None:
/// no result ran in a lab with a tunnel).
pub fn summary<'a>(results: impl IntoIterator<Item = &'a TestResult>) -> Option<String> {
    // (description, tests, tests whose counters agree, tests judged)
    let mut seen: Vec<(String, usize, usize, usize)> = Vec::new();
    let mut any = false;
    for r in results {
        let Some(lab) = &r.lab else { continue };
        let d = match &lab.tunnel {
            Some(t) => {
                any = true;
                t.describe()
            }
            None => "none (clear path)".to_string(),
        };
        let i = match seen.iter().position(|s| s.0 == d) {
            Some(i) => i,
            None => {
                seen.push((d, 0, 0, 0));
                seen.len() - 1
            }
        };
        seen[i].1 += 1;
        if let Some(a) = lab.tunnel_bytes.as_ref().and_then(|b| b.agrees) {
            seen[i].3 += 1;
            seen[i].2 += a as usize;
        }
    }
    if !any {
        return None;
    }
    let parts: Vec<String> = seen
        .into_iter()
        .map(|(d, _, agree, judged)| {
            if judged > 0 {
                format!(
                    "{d}, its counters agree with linerate's bytes in {agree} of {judged} tests"
                )
            } else {
                d
            }
        })
        .collect();
    Some(parts.join("; "))
}
