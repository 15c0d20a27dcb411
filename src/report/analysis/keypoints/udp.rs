//! UDP: where receivers start dropping, and what batching system calls buys.

use super::shared::{curves, plural, suffix, KeyPoint};
use crate::report::analysis::landscape::Landscape;

/// Where UDP receivers start dropping: the first flow count (per group)
/// at which more than 1% of the datagrams were dropped by the receiving
/// sockets, with what the network lost beside it.
pub fn udp_receiver_drops(l: &Landscape) -> Vec<KeyPoint> {
    let mut out = Vec::new();
    let dim = if l.rows.iter().any(|r| r.point.param("flows").is_some()) {
        "flows"
    } else {
        return out;
    };
    for (group, v) in curves(l, dim, "receiver_drop_pct") {
        let Some(&(n, pct)) = v.iter().find(|(_, p)| *p > 1.0) else {
            continue;
        };
        let before = v.iter().take_while(|(x, _)| *x < n).last();
        out.push(KeyPoint {
            rule: "udp_receiver_drops",
            text: format!(
                "Receiver drops start at {}{}: {pct:.1}% of the datagrams were dropped by the receiving sockets (their buffers were full){}.",
                plural(n, "flow", "flows"),
                suffix(&group),
                match before {
                    Some((b, bp)) => format!(", against {bp:.1}% with {}", plural(*b, "flow", "flows")),
                    None => String::new(),
                }
            ),
            advice: "The senders outrun the receivers: that is the receiving host's limit, not the network's. Raise --rcvbuf (net.core.rmem_max caps it), give the receiver more workers (--agent-workers) or pace the senders (--rate) to find the rate it sustains without drops.".into(),
        });
    }
    out
}

/// What batching bought: packets/s and CPU per packet with the largest
/// batch against the smallest, per group.
pub fn udp_batching(l: &Landscape) -> Vec<KeyPoint> {
    let mut out = Vec::new();
    let pps = curves(l, "batch", "packets_per_s");
    let cost = curves(l, "batch", "client_us_per_packet");
    for (group, v) in pps {
        let (Some(first), Some(last)) = (v.first(), v.last()) else {
            continue;
        };
        if v.len() < 2 || first.1 <= 0.0 {
            continue;
        }
        let c = cost
            .iter()
            .find(|(g, _)| *g == group)
            .and_then(|(_, c)| Some((c.first()?.1, c.last()?.1)));
        out.push(KeyPoint {
            rule: "udp_batching",
            text: format!(
                "Batches of {} datagrams per system call give {:.2}x the packets/s of batches of {}{} ({} vs {}){}.",
                last.0,
                last.1 / first.1,
                first.0,
                suffix(&group),
                crate::units::fmt_rate(last.1),
                crate::units::fmt_rate(first.1),
                match c {
                    Some((a, b)) if a > 0.0 => format!(
                        ", at {:.2} instead of {:.2} µs of sender CPU per datagram",
                        b, a
                    ),
                    _ => String::new(),
                }
            ),
            advice: "sendmmsg/recvmmsg amortize a system call over the batch (--batch); the kernel's per-datagram work stays, so the gain is largest where the calls dominated.".into(),
        });
    }
    out
}
