//! Clocks across hosts. Every host's agent counts time on its own
//! CLOCK_MONOTONIC (what `Instant` uses; never stepped by NTP, but its zero
//! differs per boot and per time namespace). The controller learns each
//! agent's offset the way NTP does: several timestamped probes on the
//! control connection, keeping the one with the smallest round trip, whose
//! midpoint is the best guess of when the agent read its clock. The
//! uncertainty is half that round trip. With the offsets, one start instant
//! is scheduled in every agent's own clock, so all windows open together.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use crate::measure::interval::mono_ns;

/// The `Instant` at which this host's monotonic clock reads `at_ns`
/// (now, if that is past).
pub fn instant_at(at_ns: u64) -> Instant {
    let now_i = Instant::now();
    let now = mono_ns();
    now_i + Duration::from_nanos(at_ns.saturating_sub(now))
}

/// `Instant` as this host's monotonic nanoseconds.
pub fn ns_of(i: Instant) -> u64 {
    let now_i = Instant::now();
    let now = mono_ns();
    if i >= now_i {
        now + (i - now_i).as_nanos() as u64
    } else {
        now.saturating_sub((now_i - i).as_nanos() as u64)
    }
}

/// One probe: the controller's clock when it sent and when the answer came
/// back, and the agent's clock when it answered.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Probe {
    pub sent_ns: u64,
    pub agent_ns: u64,
    pub back_ns: u64,
}

/// What the controller knows of one agent's clock.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ClockSync {
    /// Agent clock minus controller clock, nanoseconds.
    pub offset_ns: i64,
    /// Half the smallest round trip: the offset is right within this.
    pub uncertainty_ns: u64,
    /// That round trip.
    pub rtt_ns: u64,
    pub probes: usize,
}

impl ClockSync {
    /// The agent's clock reading at controller time `ns`.
    pub fn to_agent(&self, ns: u64) -> u64 {
        (ns as i128 + self.offset_ns as i128).max(0) as u64
    }

    /// The controller's clock reading at agent time `ns`.
    pub fn to_controller(&self, ns: u64) -> u64 {
        (ns as i128 - self.offset_ns as i128).max(0) as u64
    }
}

/// The offset from the probe with the smallest round trip (NTP's filter):
/// queueing delays only ever add to a round trip, so the fastest one is the
/// most symmetric.
pub fn estimate(probes: &[Probe]) -> Option<ClockSync> {
    let best = probes
        .iter()
        .filter(|p| p.back_ns >= p.sent_ns)
        .min_by_key(|p| p.back_ns - p.sent_ns)?;
    let rtt = best.back_ns - best.sent_ns;
    let mid = best.sent_ns as i128 + (rtt / 2) as i128;
    Some(ClockSync {
        offset_ns: (best.agent_ns as i128 - mid) as i64,
        uncertainty_ns: rtt.div_ceil(2),
        rtt_ns: rtt,
        probes: probes.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fastest_probe_decides() {
        // The agent is 5 s ahead; probes with asymmetric queueing delay.
        let off = 5_000_000_000u64;
        let probes = [
            Probe {
                sent_ns: 1_000,
                agent_ns: 1_000 + 900 + off,
                back_ns: 2_000,
            },
            Probe {
                sent_ns: 10_000,
                agent_ns: 10_000 + 50 + off,
                back_ns: 10_100,
            },
            Probe {
                sent_ns: 20_000,
                agent_ns: 20_000 + 100 + off,
                back_ns: 20_900,
            },
        ];
        let c = estimate(&probes).unwrap();
        assert_eq!(c.rtt_ns, 100);
        assert_eq!(c.uncertainty_ns, 50);
        assert_eq!(c.offset_ns, off as i64);
        assert_eq!(c.probes, 3);
        assert_eq!(c.to_agent(7), 7 + off);
        assert_eq!(c.to_controller(7 + off), 7);
        assert!(estimate(&[]).is_none());
    }

    #[test]
    fn a_clock_behind_gives_a_negative_offset() {
        let c = estimate(&[Probe {
            sent_ns: 9_000_000_000,
            agent_ns: 2_000_000_100,
            back_ns: 9_000_000_200,
        }])
        .unwrap();
        assert_eq!(c.offset_ns, -7_000_000_000);
    }

    #[test]
    fn instants_and_clock_readings_agree() {
        let i = Instant::now() + Duration::from_millis(30);
        let ns = ns_of(i);
        let back = instant_at(ns);
        let d = if back > i { back - i } else { i - back };
        assert!(d < Duration::from_millis(1), "{d:?}");
        assert!(ns > mono_ns());
    }
}
