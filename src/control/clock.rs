//! Clocks across hosts. Every host's agent counts time on its own
//! CLOCK_MONOTONIC (what `Instant` uses; never stepped by NTP, but its zero
//! differs per boot and per time namespace). The controller learns each
//! agent's offset the way NTP does: several timestamped probes on the
//! control connection, keeping the one with the smallest round trip, whose
//! midpoint is the best guess of when the agent read its clock. The
//! uncertainty is half that round trip. With the offsets, one start instant
//! is scheduled in every agent's own clock, so all windows open together.
//!
//! An agent on the controller's own kernel (the local agent, a lab's, a
//! rack's, any agent on this machine) needs no estimate: one kernel keeps
//! one CLOCK_MONOTONIC, and processes see it apart only by the offset of
//! their time namespace, which each reads exactly from
//! /proc/self/timens_offsets. The agent says which kernel it runs on (its
//! boot id) and its namespace's offset; where the boot id is the
//! controller's, the offset is the difference of the two, with no
//! uncertainty. That matters where probes cannot tell: on a lab link whose
//! two directions have different delays, the probes' midpoint is off by
//! half the difference (10 ms for 10 ms/30 ms), and their uncertainty is
//! half the round trip.

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

/// What fixes this process's CLOCK_MONOTONIC against another's: the
/// kernel it runs on and its time namespace's monotonic offset.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClockBase {
    /// /proc/sys/kernel/random/boot_id: one per kernel boot.
    pub boot_id: String,
    /// This process's time namespace: its CLOCK_MONOTONIC minus the
    /// kernel's, nanoseconds (0 outside time namespaces).
    pub timens_ns: i64,
}

impl ClockBase {
    /// `other`'s clock minus this one's, exactly, when both run on one
    /// kernel; None across kernels (only probes can tell then).
    pub fn offset_to(&self, other: &ClockBase) -> Option<i64> {
        (!self.boot_id.is_empty() && self.boot_id == other.boot_id)
            .then(|| other.timens_ns - self.timens_ns)
    }
}

/// This process's clock base, read once (None: the kernel's boot id cannot
/// be read, or the time namespace's offsets exist but cannot be).
pub fn local_base() -> Option<ClockBase> {
    static BASE: std::sync::OnceLock<Option<ClockBase>> = std::sync::OnceLock::new();
    BASE.get_or_init(|| {
        let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let timens_ns = match std::fs::read_to_string("/proc/self/timens_offsets") {
            Ok(text) => timens_monotonic(&text)?,
            // A kernel without time namespaces: every process's clock is
            // the kernel's.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(_) => return None,
        };
        Some(ClockBase {
            boot_id: boot_id.trim().to_string(),
            timens_ns,
        })
    })
    .clone()
}

/// The monotonic line of /proc/self/timens_offsets ("monotonic S NS"), as
/// nanoseconds.
fn timens_monotonic(text: &str) -> Option<i64> {
    text.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        if w.next()? != "monotonic" {
            return None;
        }
        let secs: i64 = w.next()?.parse().ok()?;
        let nanos: i64 = w.next()?.parse().ok()?;
        Some(secs * 1_000_000_000 + nanos)
    })
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
    fn one_kernel_gives_the_offset_of_the_time_namespaces() {
        let text = "monotonic        5000         0\nboottime      5000      250\n";
        assert_eq!(timens_monotonic(text), Some(5_000_000_000_000));
        assert_eq!(
            timens_monotonic("monotonic -3 500000000\n"),
            Some(-2_500_000_000)
        );
        assert_eq!(timens_monotonic("boottime 1 0\n"), None);
        let here = ClockBase {
            boot_id: "b".into(),
            timens_ns: 1_000,
        };
        let there = ClockBase {
            boot_id: "b".into(),
            timens_ns: 5_000,
        };
        assert_eq!(here.offset_to(&there), Some(4_000));
        assert_eq!(there.offset_to(&here), Some(-4_000));
        let elsewhere = ClockBase {
            boot_id: "c".into(),
            ..there.clone()
        };
        assert_eq!(here.offset_to(&elsewhere), None);
        assert_eq!(ClockBase::default().offset_to(&ClockBase::default()), None);
        let me = local_base().expect("this kernel's boot id");
        assert_eq!(me.offset_to(&me), Some(0));
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
