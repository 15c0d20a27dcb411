//! What a result says about the lab it ran on: the link as configured, the
//! emulator that applied it, the calibration taken just before the test and
//! the emulator's counters over the test, with warnings when any of them
//! says the network was not what the user asked for.

use std::time::Instant;

use super::calibrate;
use super::emulator::Stats;
use super::netns;

use super::state::LabState;
use crate::model::lab::{EmulatorDelta, LabRecord};

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
    })
}

/// Runs `test` on lab `st`: calibrates the round trip first, snapshots the
/// emulator's counters around the test, and returns the record to attach.
pub fn around<T>(st: &LabState, test: impl FnOnce() -> T) -> Result<(T, LabRecord), String> {
    let mut calibration = calibrate::calibrate(st, false)?;
    // The bulk rate takes seconds to measure: it comes from the lab's last
    // full calibration (lab up, or a study's change of link).
    if let Some(full) = &st.calibration {
        calibration.goodput_measured_bps = full.goodput_measured_bps;
        calibration.warnings = calibration.judge();
    }
    let tcp = tcp_settings(st);
    let before = st.emulator_stats();
    let t0 = Instant::now();
    let out = test();
    let elapsed = t0.elapsed().as_secs_f64();
    // Counters are written every 100 ms: wait for a snapshot after the test.
    std::thread::sleep(std::time::Duration::from_millis(150));
    let after = st.emulator_stats();
    let emulator = match (&before, &after) {
        (Some(b), Some(a)) => emulator_delta(b, a, elapsed),
        _ => None,
    };
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
    };
    if st.emulator.is_some() && !st.emulator_alive() {
        rec.warnings
            .push("the emulator died during the test: traffic stopped (lab down, then up)".into());
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
