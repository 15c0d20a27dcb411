//! What a result says about the lab it ran on: the link as configured, the
//! emulator that applied it, the calibration taken just before the test and
//! the emulator's counters over the test, with warnings when any of them
//! says the network was not what the user asked for.

use std::time::Instant;

use super::calibrate;
use super::emulator::Stats;
use super::netns;

use super::state::LabState;
use super::tunnel;
use super::LabError;
use crate::model::lab::{EmulatorDelta, LabRecord};
use crate::model::tunnel::TunnelBytes;

/// Counters and CPU between two snapshots of the same emulator process.
pub fn emulator_delta(before: &Stats, after: &Stats, elapsed_s: f64) -> Option<EmulatorDelta> {
    if before.pid != after.pid {
        return None;
    }
    Some(EmulatorDelta {
        dirs: [
            after.dirs[0].since(&before.dirs[0]),
            after.dirs[1].since(&before.dirs[1]),
        ],
        cpu_pct: calibrate::cpu_pct(Some(before), Some(after), elapsed_s),
        emulators: 1,
        elapsed_s: Some(elapsed_s),
    })
}

/// The counters over a test of every emulator of the lab, summed (a rack
/// has one per client link; see [`EmulatorDelta::sum`]). None unless every
/// emulator has a snapshot on both sides from the same process: a partial
/// sum would pass for the whole lab's.
pub fn lab_delta(
    before: &[Option<Stats>],
    after: &[Option<Stats>],
    elapsed_s: f64,
) -> Option<EmulatorDelta> {
    if before.len() != after.len() {
        return None;
    }
    let deltas = before
        .iter()
        .zip(after)
        .map(|(b, a)| emulator_delta(b.as_ref()?, a.as_ref()?, elapsed_s))
        .collect::<Option<Vec<_>>>()?;
    EmulatorDelta::sum(&deltas)
}

/// Runs `test` on lab `st`: calibrates the round trip first, snapshots the
/// emulator's counters around the test, and returns the record to attach.
pub fn around<T>(st: &LabState, test: impl FnOnce() -> T) -> Result<(T, LabRecord), LabError> {
    let mut calibration = calibrate::calibrate(st, false)?;
    // The bulk rate takes seconds to measure: it comes from the lab's last
    // full calibration (lab up, or a study's change of link).
    if let Some(full) = &st.calibration {
        calibration.goodput_measured_bps = full.goodput_measured_bps;
        calibration.link_rate_bps = full.link_rate_bps;
        calibration.link_peak_bps = full.link_peak_bps;
        calibration.link_peak_window_s = full.link_peak_window_s;
        calibration.warnings = calibration.judge();
    }
    let tcp = tcp_settings(st);
    let before = st.all_emulator_stats();
    let tunnel_before = (tunnel::counters(st), tunnel::proc_cpu_s(st));
    let t0 = Instant::now();
    let out = test();
    let elapsed = t0.elapsed().as_secs_f64();
    // Counters are written every 100 ms: wait for a snapshot after the test.
    std::thread::sleep(std::time::Duration::from_millis(150));
    let after = st.all_emulator_stats();
    let tunnel_after = (tunnel::counters(st), tunnel::proc_cpu_s(st));
    let emulator = lab_delta(&before, &after, elapsed);
    let mut rec = LabRecord {
        name: st.name.clone(),
        backend: st.backend.clone(),
        backend_note: st.backend_note.clone(),
        spec: Some(st.spec.clone()),
        link: st.spec.describe(),
        calibration,
        emulator,
        tcp,
        warnings: Vec::new(),
        tunnel: st.tunnel.as_ref().map(|t| t.info.clone()),
        tunnel_bytes: match (tunnel_before.0, tunnel_after.0) {
            (Some([c0, s0]), Some([c1, s1])) => Some(TunnelBytes {
                client: c1.since(&c0),
                server: s1.since(&s0),
                ..Default::default()
            }),
            _ => None,
        },
        tunnel_cpu_s: match (tunnel_before.1, tunnel_after.1) {
            (Some([c0, s0]), Some([c1, s1])) => Some([c1 - c0, s1 - s0]),
            _ => None,
        },
    };
    if st.tunnel.is_some() && !st.tunnel_alive() {
        rec.warnings.push(
            "the tunnel's process died during the test: traffic stopped (lab down, then up)".into(),
        );
    }
    if st.emulator.is_some() && !st.emulator_alive() {
        let what = if st.link_emulators.is_empty() {
            "the emulator died during the test: traffic stopped"
        } else {
            "an emulator of the rack died during the test: traffic on its client link stopped"
        };
        rec.warnings.push(format!("{what} (lab down, then up)"));
    }
    let judged = rec.judge(&st.spec);
    let died = std::mem::take(&mut rec.warnings);
    rec.warnings = [rec.calibration.warnings.clone(), died, judged].concat();
    Ok((out, rec))
}

fn tcp_settings(st: &LabState) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (side, ns) in [("client", &st.client_ns), ("server", &st.server_ns)] {
        for key in [
            "net.ipv4.tcp_congestion_control",
            "net.ipv4.tcp_rmem",
            "net.ipv4.tcp_wmem",
            "net.ipv4.tcp_no_metrics_save",
        ] {
            if let Ok(v) = netns::sysctl(ns, key) {
                out.push((format!("{side} {key}"), v));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::lab::DirStats;

    fn stats(pid: u32, packets: u64, max_queue: u64, cpu_s: f64) -> Stats {
        let d = DirStats {
            packets,
            bytes: packets * 1500,
            max_queue_bytes: max_queue,
            ..Default::default()
        };
        Stats {
            pid,
            dirs: [d.clone(), d],
            cpu_s,
            uptime_s: 10.0,
            realtime: false,
        }
    }

    #[test]
    fn a_racks_emulators_are_summed() {
        let before = [Some(stats(1, 100, 0, 1.0)), Some(stats(2, 10, 0, 2.0))];
        let after = [
            Some(stats(1, 300, 5000, 1.5)),
            Some(stats(2, 60, 9000, 2.25)),
        ];
        let d = lab_delta(&before, &after, 1.0).unwrap();
        assert_eq!(d.emulators, 2);
        assert_eq!(d.dirs[0].packets, 200 + 50);
        assert_eq!(d.dirs[1].bytes, 250 * 1500);
        // High-water marks: the larger, not the sum.
        assert_eq!(d.dirs[0].max_queue_bytes, 9000);
        // CPU: 50% + 25% of a core.
        assert!((d.cpu_pct.unwrap() - 75.0).abs() < 1e-6, "{:?}", d.cpu_pct);
        // One link alone is the plain delta.
        let one = lab_delta(&before[..1], &after[..1], 1.0).unwrap();
        assert_eq!((one.emulators, one.dirs[0].packets), (1, 200));
    }

    #[test]
    fn a_partial_or_restarted_set_of_emulators_gives_no_counters() {
        let before = [Some(stats(1, 100, 0, 1.0)), None];
        let after = [Some(stats(1, 300, 0, 1.5)), Some(stats(2, 60, 0, 2.0))];
        assert_eq!(lab_delta(&before, &after, 1.0), None);
        let restarted = [Some(stats(3, 300, 0, 1.5)), Some(stats(2, 60, 0, 2.0))];
        let before = [Some(stats(1, 100, 0, 1.0)), Some(stats(2, 10, 0, 1.0))];
        assert_eq!(lab_delta(&before, &restarted, 1.0), None);
        assert_eq!(lab_delta(&[], &[], 1.0), None);
    }
}
