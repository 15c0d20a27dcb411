//! rpm (the IETF responsiveness test): each point's RPM in the draft's
//! words against its idle round trip, the direction whose queue held the
//! loaded requests, and across points which kept RPM highest.

use super::params::rating;
use crate::model::points::{KeyPoint, PointView};
use crate::units::fmt_us;

/// What RPM counts and what raises it.
const ADVICE: &str = "RPM counts the round trips a minute allows under working conditions: 60,000 / ms. A new connection's (foreign) probes wait in the bottleneck's queue; a loaded connection's (self) probes also wait behind that connection's own data in the senders' buffers. An AQM with flow queuing at the bottleneck (fq_codel, cake) brings the foreign probes back to the idle round trip; a small TCP_NOTSENT_LOWAT and HTTP/2 send buffer at the sender shorten the self probes' wait. Sweep lab.aqm and lab.queue in a study and compare rpm.";

/// Each rpm point's RPM against idle, which way's queue held its loaded
/// requests, and which point kept RPM highest and lowest.
pub fn responsiveness(points: &[PointView]) -> Vec<KeyPoint> {
    let rows: Vec<(&PointView, f64)> = points
        .iter()
        .filter_map(|r| Some((r, r.mean("rpm")?)))
        .filter(|(_, v)| *v > 0.0)
        .collect();
    let mut out = Vec::new();
    for (r, rpm) in &rows {
        let halves = match (r.mean("foreign_rpm"), r.mean("self_rpm")) {
            (Some(f), Some(s)) => format!(" (new connections {f:.0}, loaded connections {s:.0})"),
            _ => String::new(),
        };
        let idle = match r.mean("rpm_idle_rtt_us") {
            Some(i) if i > 0.0 => {
                let idle_rpm = 60e6 / i;
                format!(
                    "; idle, a round trip took {} ({idle_rpm:.0} RPM): the load cut RPM {:.1}x",
                    fmt_us(i),
                    idle_rpm / rpm
                )
            }
            _ => String::new(),
        };
        let queue = match (r.mean("rpm_self_down_us"), r.mean("rpm_self_up_us")) {
            (Some(d), Some(u)) if d > 0.0 && u > 0.0 && (d / u >= 1.25 || u / d >= 1.25) => {
                let (way, slow, fast) = if d > u {
                    ("download", d, u)
                } else {
                    ("upload", u, d)
                };
                format!(
                    "; requests on loaded connections waited longest on the {way} side ({} against {}): that direction's queue grew",
                    fmt_us(slow),
                    fmt_us(fast)
                )
            }
            _ => String::new(),
        };
        out.push(KeyPoint {
            rule: "responsiveness",
            text: format!(
                "{}: {rpm:.0} RPM ({}){halves}{idle}{queue}.",
                r.label(),
                rating(*rpm)
            ),
            advice: if out.is_empty() { ADVICE } else { "" }.into(),
        });
    }
    if rows.len() >= 2 {
        let best = rows
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .expect("two rows");
        let worst = rows
            .iter()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .expect("two rows");
        out.push(KeyPoint {
            rule: "responsiveness",
            text: format!(
                "Responsiveness was highest at {} ({:.0} RPM) and lowest at {} ({:.0} RPM), {:.1}x apart.",
                best.0.label(),
                best.1,
                worst.0.label(),
                worst.1,
                best.1 / worst.1
            ),
            advice: String::new(),
        });
    }
    out
}
