//! memcached: where more connections stop buying operations, its CPU per
//! operation, and the hit ratio.

use crate::model::points::{curves, plural, suffix, KeyPoint, PointView};
use crate::units::fmt_us;

/// Every point is a memcache test (its rules speak of operations).
fn all_memcache(points: &[PointView]) -> bool {
    !points.is_empty() && points.iter().all(|p| p.spec.workload == super::NAME)
}

/// memcache: where more connections stop buying operations (the server
/// saturates), per group, and what the extra connections cost in latency.
pub fn kv_saturation(points: &[PointView]) -> Vec<KeyPoint> {
    let mut out = Vec::new();
    if !all_memcache(points) {
        return out;
    }
    let p99 = curves(points, "flows", "get_p99_us");
    for (group, v) in curves(points, "flows", "ops_per_s") {
        if v.len() < 3 {
            continue;
        }
        // The first step where doubling (or more) the connections adds
        // less than 10% of operations, and no later point adds 10% either:
        // a plateau, not one noisy step on a rising curve.
        let Some(i) = (1..v.len())
            .find(|&i| v[i].0 >= 2.0 * v[i - 1].0 && v[i..].iter().all(|p| p.1 < 1.1 * v[i - 1].1))
        else {
            continue;
        };
        let (n0, r0) = v[i - 1];
        let (last_n, last) = *v.last().expect("3 or more");
        let lat = p99.iter().find(|(g, _)| *g == group).and_then(|(_, c)| {
            let a = c.iter().find(|p| p.0 == n0)?.1;
            let b = c.iter().find(|p| p.0 == last_n)?.1;
            Some((a, b))
        });
        out.push(KeyPoint {
            rule: "kv_saturation",
            text: format!(
                "memcached saturates at {}{}: {} operations; {} give {:+.0}% ({}){}.",
                plural(n0, "connection", "connections"),
                suffix(&group),
                crate::units::fmt_rate(r0),
                plural(last_n, "connection", "connections"),
                100.0 * (last / r0 - 1.0),
                crate::units::fmt_rate(last),
                match lat {
                    Some((a, b)) if b > a => format!(
                        " while the get p99 grows from {} to {}",
                        fmt_us(a),
                        fmt_us(b)
                    ),
                    _ => String::new(),
                }
            ),
            advice: "Past this point requests queue in memcached's worker threads: raise its threads (--service 'memcached -t N'), or compare its CPU per operation with the client's to see which end is the limit.".into(),
        });
    }
    out
}

/// memcache: the server's CPU per operation and the hit ratio, per group at
/// the most connections measured; a hit ratio below 99% is named (the key
/// space does not fit memcached's memory, or sets fail).
pub fn kv_cost(points: &[PointView]) -> Vec<KeyPoint> {
    let mut out = Vec::new();
    if !all_memcache(points) {
        return out;
    }
    let hits = curves(points, "flows", "hit_ratio_pct");
    let client = curves(points, "flows", "client_us_per_op");
    let mut parts = Vec::new();
    let mut at = 0.0;
    for (group, v) in curves(points, "flows", "server_us_per_op") {
        let Some(&(n, us)) = v.last() else { continue };
        at = n;
        let c = client
            .iter()
            .find(|(g, _)| *g == group)
            .and_then(|(_, c)| c.iter().find(|p| p.0 == n).map(|p| p.1));
        parts.push(format!(
            "{us:.2} µs{}{}",
            c.map(|c| format!(" (client {c:.2})")).unwrap_or_default(),
            if group.is_empty() {
                String::new()
            } else {
                format!(" with {group}")
            }
        ));
    }
    if !parts.is_empty() {
        out.push(KeyPoint {
            rule: "kv_cost",
            text: format!(
                "memcached's CPU per operation at {}: {}.",
                plural(at, "connection", "connections"),
                parts.join(", ")
            ),
            advice: "CPU per operation is the server's cost that scales out: a core's 1,000,000 µs divided by it is the operations/s one memcached thread can serve; large values cost more in copies and syscalls.".into(),
        });
    }
    for (group, v) in hits {
        if let Some(&(n, h)) = v.iter().find(|p| p.1 < 99.0) {
            out.push(KeyPoint {
                rule: "kv_hit_ratio",
                text: format!(
                    "The hit ratio is {h:.1}% at {}{}: gets miss keys the prefill had set.",
                    plural(n, "connection", "connections"),
                    suffix(&group)
                ),
                advice: "Evictions: memcached's memory (-m) is smaller than keys x value size; raise -m or lower --keys so that hits measure a cache that holds its data.".into(),
            });
        }
    }
    out
}
