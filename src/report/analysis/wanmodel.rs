//! The window/RTT model of a finite transfer over an emulated WAN, drawn
//! beside the measurements of a study with `[model] window_rtt = true`.
//!
//! A TCP sender moves at most one receive window W per round trip R, and
//! the path at most its goodput C, so a long transfer approaches
//! min(C, W/R). A finite one also pays for slow start (the congestion window
//! starts at 10 segments and doubles each round trip until it reaches W or
//! C x R) and for the round trips around the data. The model simulates that
//! round by round; it is what the scp write-up explains its table with, and
//! what tells a window-bound point from a rate-bound or a slow-start-bound
//! one in the key points.

use crate::model::result::TestResult;
use crate::model::spec::{Direction, WindowMode};

/// TCP payload per segment at MTU 1500 with timestamps (1500 - 20 - 32).
pub const DEFAULT_MSS: u64 = 1448;

/// Linux's initial congestion window, segments (RFC 6928).
pub const INITIAL_WINDOW_SEGMENTS: u64 = 10;

/// OpenSSH's session channel window (64 packets of 32 KiB): scp and sftp
/// cannot have more unacknowledged data in flight than this, whatever the
/// TCP window (sftp's 64 outstanding 32 KiB requests are the same 2 MiB).
pub const SSH_CHANNEL_WINDOW: u64 = 2 * 1024 * 1024;

/// IP and TCP headers per segment (20 + 20 + 12 bytes of timestamps): the
/// MSS is the lab's MTU minus this.
const HEADER_BYTES: u32 = 52;

/// What one transfer is made of.
#[derive(Clone, Debug, PartialEq)]
pub struct Transfer {
    /// Payload bytes.
    pub bytes: u64,
    /// Round trip, seconds.
    pub rtt_s: f64,
    /// Receive window, bytes.
    pub window: u64,
    /// Goodput the bottleneck allows, bits/s (None: unlimited).
    pub goodput_bps: Option<f64>,
    /// Bytes per segment (sets the initial window).
    pub mss: u64,
    /// Time outside the data rounds beyond the final round trip: scp's SSH
    /// login, 0 for linerate's own transfer (whose time starts with the
    /// first byte).
    pub extra_s: f64,
}

/// What bounds a transfer once slow start is over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// W < C x R: one window per round trip.
    Window,
    /// W >= C x R (or no round trip): the path's rate.
    Rate,
}

/// The model's answer for one transfer.
#[derive(Clone, Debug, PartialEq)]
pub struct Prediction {
    /// Whole transfer time, seconds: extra + 1 RTT + data rounds x RTT.
    pub time_s: f64,
    /// bytes x 8 / time_s.
    pub throughput_bps: f64,
    /// Round trips carrying data, the last one counted pro rata.
    pub rounds: f64,
    /// Of those, the rounds before the congestion window reached the
    /// per-round cap (slow start).
    pub slow_start_rounds: f64,
    /// Bytes each round carries after slow start: min(W, C x R).
    pub per_round_bytes: f64,
    pub limit: Limit,
    /// The asymptote min(C, W/R), bits/s.
    pub bound_bps: f64,
    /// What setup and slow start add to bytes / bound, seconds.
    pub overhead_s: f64,
}

impl Prediction {
    /// Share of the time not spent at the steady-state rate: near 1 when
    /// the transfer is over in a few round trips.
    pub fn overhead_share(&self) -> f64 {
        if self.time_s > 0.0 {
            (self.overhead_s / self.time_s).clamp(0.0, 1.0)
        } else {
            0.0
        }
    }
}

/// The bandwidth-delay product C x R in bytes: the window that fills the path.
pub fn bdp_bytes(goodput_bps: f64, rtt_s: f64) -> f64 {
    goodput_bps * rtt_s / 8.0
}

/// The asymptotic rate min(C, W/R), bits/s; None when neither bounds it.
pub fn bound_bps(window: u64, rtt_s: f64, goodput_bps: Option<f64>) -> Option<f64> {
    let by_window = (rtt_s > 0.0).then(|| window as f64 * 8.0 / rtt_s);
    match (by_window, goodput_bps) {
        (Some(w), Some(c)) => Some(w.min(c)),
        (w, c) => w.or(c),
    }
    .filter(|v| v.is_finite() && *v > 0.0)
}

/// Simulates the transfer round by round: each round trip the sender sends
/// min(cwnd, W, C x R) bytes; cwnd starts at 10 segments and doubles until
/// it reaches the cap, then stays; the last, partial round counts pro rata.
/// The time adds one round trip (the last data on its way and the reply
/// coming back, as linerate measures a finite transfer) and `extra_s`.
/// With no round trip the time is bytes / C. None for input the model
/// cannot describe (zero bytes or window, a negative round trip, no bound).
pub fn predict(t: &Transfer) -> Option<Prediction> {
    let valid = t.bytes > 0
        && t.window > 0
        && t.mss > 0
        && t.rtt_s.is_finite()
        && t.rtt_s >= 0.0
        && t.extra_s.is_finite()
        && t.extra_s >= 0.0
        && t.goodput_bps.is_none_or(|c| c.is_finite() && c > 0.0);
    if !valid {
        return None;
    }
    let bytes = t.bytes as f64;
    let bound = bound_bps(t.window, t.rtt_s, t.goodput_bps)?;
    if t.rtt_s == 0.0 {
        let c = t.goodput_bps?;
        let time_s = t.extra_s + bytes * 8.0 / c;
        return Some(Prediction {
            time_s,
            throughput_bps: bytes * 8.0 / time_s,
            rounds: 0.0,
            slow_start_rounds: 0.0,
            per_round_bytes: f64::INFINITY,
            limit: Limit::Rate,
            bound_bps: c,
            overhead_s: t.extra_s,
        });
    }
    let window = t.window as f64;
    let bdp = t.goodput_bps.map(|c| bdp_bytes(c, t.rtt_s));
    let (cap, limit) = match bdp {
        Some(b) if b <= window => (b, Limit::Rate),
        _ => (window, Limit::Window),
    };
    if cap.is_nan() || cap <= 0.0 {
        return None;
    }
    let mut cwnd = (INITIAL_WINDOW_SEGMENTS * t.mss) as f64;
    let mut remaining = bytes;
    let (mut rounds, mut slow) = (0.0f64, 0.0f64);
    // cwnd doubles every pass, so this ends within ~60 passes.
    loop {
        if cwnd >= cap {
            rounds += remaining / cap;
            break;
        }
        if remaining <= cwnd {
            rounds += remaining / cwnd;
            slow += remaining / cwnd;
            break;
        }
        remaining -= cwnd;
        rounds += 1.0;
        slow += 1.0;
        cwnd *= 2.0;
    }
    let time_s = t.extra_s + t.rtt_s * (1.0 + rounds);
    if !(time_s.is_finite() && time_s > 0.0) {
        return None;
    }
    Some(Prediction {
        time_s,
        throughput_bps: bytes * 8.0 / time_s,
        rounds,
        slow_start_rounds: slow,
        per_round_bytes: cap,
        limit,
        bound_bps: bound,
        overhead_s: (time_s - bytes * 8.0 / bound).max(0.0),
    })
}

/// Where a point's window W comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowSource {
    /// `window = "exact"`: the receiver clamps its window to rcvbuf.
    Rcvbuf,
    /// The window the sender saw mid-transfer (`window = "buffer"`, scp):
    /// what the kernel made of a buffer size, measured rather than guessed.
    Observed,
}

/// The model as applied to one point.
#[derive(Clone, Debug, PartialEq)]
pub struct PointModel {
    pub transfer: Transfer,
    pub source: WindowSource,
    /// Real OpenSSH scp (the extra time is its login).
    pub scp: bool,
    pub prediction: Prediction,
}

impl PointModel {
    /// The same point with another window (what a different window would
    /// have given; SSH's channel window for scp).
    pub fn with_window(&self, window: u64) -> Option<Prediction> {
        predict(&Transfer {
            window,
            ..self.transfer.clone()
        })
    }
}

/// The model's inputs read from a stored result: a finite one-flow
/// transfer of linerate's own (`stream` with `bytes`) or scp, in a lab (or
/// with an `rtt` asked for), with a known window. None otherwise: no model
/// rather than a wrong one.
pub fn for_result(r: &TestResult) -> Option<PointModel> {
    let spec = &r.spec;
    // scp: a program's transfer over linerate's own sshd.
    let scp = r.exec.as_ref().is_some_and(|e| e.ssh_version.is_some());
    if !(scp || spec.is_finite()) || spec.flows != 1 {
        return None;
    }
    let lab = r.lab.as_ref().and_then(|l| l.spec.as_ref());
    let rtt_s = lab.map(|l| l.rtt_s()).or(spec.rtt_s)?;
    // The data's direction: a stream's rx has the server send.
    let dir = usize::from(!scp && spec.direction == Direction::Rx);
    let goodput_bps = lab.and_then(|l| l.goodput_bps(dir));
    let mss = lab
        .map(|l| u64::from(l.mtu.saturating_sub(HEADER_BYTES)))
        .filter(|m| *m > 0)
        .unwrap_or(DEFAULT_MSS);
    let observed = r.summary.observed_window_bytes.or_else(|| {
        r.exec
            .as_ref()
            .and_then(|e| e.observed_window.as_ref())
            .map(|o| u64::from(o.median_bytes))
    });
    let (window, source) = if !scp && spec.window == WindowMode::Exact {
        (spec.rcvbuf? as u64, WindowSource::Rcvbuf)
    } else {
        (observed?, WindowSource::Observed)
    };
    let extra_s = if scp { r.exec.as_ref()?.login_s? } else { 0.0 };
    let transfer = Transfer {
        bytes: spec.bytes?,
        rtt_s,
        window,
        goodput_bps,
        mss,
        extra_s,
    };
    let prediction = predict(&transfer)?;
    Some(PointModel {
        transfer,
        source,
        scp,
        prediction,
    })
}

/// One model for a point's repetitions: their windows (observed ones may
/// differ run to run) and scp logins averaged, the rest from the first.
pub fn for_results(results: &[TestResult]) -> Option<PointModel> {
    let each: Vec<PointModel> = results.iter().filter_map(for_result).collect();
    let first = each.first()?;
    let n = each.len() as f64;
    let window = each.iter().map(|m| m.transfer.window as f64).sum::<f64>() / n;
    let extra_s = each.iter().map(|m| m.transfer.extra_s).sum::<f64>() / n;
    let transfer = Transfer {
        window: window.round() as u64,
        extra_s,
        ..first.transfer.clone()
    };
    Some(PointModel {
        prediction: predict(&transfer)?,
        transfer,
        source: first.source,
        scp: first.scp,
    })
}

/// The model in one paragraph for the report: its formula, where W and C
/// came from at these points, and how many points it could not describe.
pub fn describe(models: &[PointModel], without: usize) -> String {
    let mut s = String::from(
        "T = 1 RTT (the last data out and the reply back) + slow start (cwnd from 10 segments, doubling each RTT up to min(W, C x RTT)) + the remaining bytes at min(W, C x RTT) per RTT, the last round pro rata",
    );
    if models.iter().any(|m| m.scp) {
        s.push_str("; scp adds its SSH login, measured before each copy");
    }
    let exact = models
        .iter()
        .filter(|m| m.source == WindowSource::Rcvbuf)
        .count();
    let observed = models.len() - exact;
    let mut w = Vec::new();
    if exact > 0 {
        w.push(format!("rcvbuf with window = exact at {exact} points"));
    }
    if observed > 0 {
        w.push(format!(
            "the window the sender observed mid-transfer at {observed} points (window = buffer, scp)"
        ));
    }
    if !w.is_empty() {
        s.push_str(&format!(". W = {}", w.join("; ")));
    }
    let rates: Vec<f64> = models
        .iter()
        .filter_map(|m| m.transfer.goodput_bps)
        .collect();
    let lo = rates.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = rates.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if rates.is_empty() {
        s.push_str(". No rate was set: W/RTT alone bounds the model");
    } else if hi - lo <= 1e-6 * hi {
        s.push_str(&format!(
            ". C = {}, the TCP goodput of the lab's rate (MSS {})",
            crate::units::fmt_bps(lo),
            models[0].transfer.mss
        ));
    } else {
        s.push_str(&format!(
            ". C = {} to {}, the TCP goodput of the lab's rates",
            crate::units::fmt_bps(lo),
            crate::units::fmt_bps(hi)
        ));
    }
    if without > 0 {
        s.push_str(&format!(
            ". {without} {} no model (not a finite one-flow transfer in a lab, or no known window or login time)",
            if without == 1 { "point has" } else { "points have" }
        ));
    }
    s.push('.');
    s
}

/// Stored results as the wan-window study writes them, for the report's
/// tests.
#[cfg(test)]
pub mod testing {
    use crate::model::result::TestResult;

    pub const MIB: u64 = 1 << 20;

    /// 48 MiB through an exact `rcvbuf` window at `rtt_ms` on a 1 Gbit/s
    /// lab, measured at `tput` bits/s.
    pub fn wan_result(rtt_ms: u32, rcvbuf: &str, tput: f64) -> TestResult {
        let mut res = TestResult::default();
        res.summary.status = crate::model::result::Status::Ok;
        res.spec.bytes = Some(48 * MIB);
        res.spec.window = crate::model::spec::WindowMode::Exact;
        res.spec.rcvbuf = Some(crate::units::parse_size(rcvbuf).unwrap() as usize);
        res.spec.rtt_s = Some(f64::from(rtt_ms) / 1e3);
        let lab = crate::lab::spec::LabOptions {
            rtt: Some(format!("{rtt_ms}ms")),
            rate: Some("1gbit".into()),
            ..Default::default()
        }
        .build()
        .unwrap();
        res.lab = Some(crate::model::lab::LabRecord {
            spec: Some(lab),
            ..Default::default()
        });
        res.iterations = vec![crate::model::result::Iteration {
            throughput_bps: tput,
            duration_s: (48 * MIB * 8) as f64 / tput,
            ..Default::default()
        }];
        res
    }

    /// The model's throughput for such a point.
    pub fn model_bps(rtt_ms: u32, rcvbuf: &str) -> f64 {
        super::for_result(&wan_result(rtt_ms, rcvbuf, 1.0))
            .unwrap()
            .prediction
            .throughput_bps
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::spec::LabOptions;
    use crate::model::spec::Workload;

    /// 1 Gbit/s at MTU 1500: 1448 of every 1538 wire bytes are payload.
    const C: f64 = 1e9 * 1448.0 / 1538.0;
    const MIB: u64 = 1 << 20;

    fn t(bytes: u64, rtt_s: f64, window: u64) -> Transfer {
        Transfer {
            bytes,
            rtt_s,
            window,
            goodput_bps: Some(C),
            mss: DEFAULT_MSS,
            extra_s: 0.0,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn a_small_window_is_one_window_per_round_trip_after_slow_start() {
        // 48 MB through 64 KiB at 100 ms: slow start sends 14,480, 28,960
        // and 57,920 bytes in three rounds, then 65,536 per round.
        let p = predict(&t(48_000_000, 0.1, 65_536)).unwrap();
        let rest = 48_000_000.0 - 14_480.0 - 28_960.0 - 57_920.0;
        assert!(close(p.rounds, 3.0 + rest / 65_536.0), "{p:?}");
        assert!(
            close(p.time_s, 0.1 * (1.0 + 3.0 + rest / 65_536.0)),
            "{p:?}"
        );
        assert_eq!(p.limit, Limit::Window);
        assert_eq!(p.slow_start_rounds, 3.0);
        // Within 1% of bytes / (W/R) = 73.24 s: the window decides.
        let steady = 48e6 / (65_536.0 / 0.1);
        assert!(p.time_s > steady && p.time_s < steady * 1.01, "{p:?}");
        assert!(close(p.bound_bps, 65_536.0 * 8.0 / 0.1));
    }

    #[test]
    fn a_large_window_at_a_short_rtt_is_slow_start_dominated() {
        // 48 MiB, 2 MiB at 50 ms: eight doubling rounds (14,480 x 255 bytes)
        // before cwnd passes 2 MiB, then 22.24 rounds of 2 MiB.
        let p = predict(&t(48 * MIB, 0.05, 2 * MIB)).unwrap();
        let rest = (48 * MIB) as f64 - 14_480.0 * 255.0;
        assert_eq!(p.slow_start_rounds, 8.0);
        assert!(close(p.rounds, 8.0 + rest / (2 * MIB) as f64), "{p:?}");
        assert!((p.time_s - 1.562).abs() < 0.001, "{p:?}");
        assert_eq!(p.limit, Limit::Window);
        // 77% of W/R: a quarter of the time is slow start and the reply.
        let of_bound = p.throughput_bps / p.bound_bps;
        assert!((0.76..0.78).contains(&of_bound), "{of_bound}");
        assert!((0.22..0.24).contains(&p.overhead_share()), "{p:?}");
    }

    #[test]
    fn a_window_above_the_bdp_is_rate_bound() {
        // 16 MiB at 50 ms: the cap is C x R = 5,884,265 bytes (9 rounds of
        // slow start first).
        let p = predict(&t(48 * MIB, 0.05, 16 * MIB)).unwrap();
        let bdp = C * 0.05 / 8.0;
        assert!((bdp - 5_884_265.0).abs() < 1.0, "{bdp}");
        let rest = (48 * MIB) as f64 - 14_480.0 * 511.0;
        assert_eq!(p.limit, Limit::Rate);
        assert_eq!(p.slow_start_rounds, 9.0);
        assert!(close(p.rounds, 9.0 + rest / bdp), "{p:?}");
        assert!(close(p.bound_bps, C));
        // Twice the window changes nothing once past the BDP.
        let q = predict(&t(48 * MIB, 0.05, 32 * MIB)).unwrap();
        assert!(close(p.time_s, q.time_s));
    }

    #[test]
    fn no_round_trip_is_bytes_over_rate() {
        let p = predict(&t(48 * MIB, 0.0, 64 * 1024)).unwrap();
        assert!(close(p.time_s, (48 * MIB * 8) as f64 / C));
        assert_eq!(p.limit, Limit::Rate);
        let mut u = t(48 * MIB, 0.0, 65_536);
        u.goodput_bps = None;
        assert!(predict(&u).is_none(), "no rate and no RTT: no bound");
        // Without a rate the window alone bounds it.
        u.rtt_s = 0.1;
        let p = predict(&u).unwrap();
        assert_eq!(p.limit, Limit::Window);
        assert!(close(p.bound_bps, 65_536.0 * 8.0 / 0.1));
    }

    #[test]
    fn a_transfer_within_the_initial_window_takes_under_two_round_trips() {
        let p = predict(&t(7_240, 0.1, MIB)).unwrap();
        assert!(close(p.rounds, 0.5));
        assert!(close(p.time_s, 0.15));
        let mut x = t(7_240, 0.1, MIB);
        x.extra_s = 0.9;
        assert!(close(predict(&x).unwrap().time_s, 1.05));
    }

    #[test]
    fn odd_input_gives_no_model() {
        for bad in [
            t(0, 0.1, 65_536),
            t(1000, 0.1, 0),
            t(1000, -0.1, 65_536),
            t(1000, f64::NAN, 65_536),
            Transfer {
                goodput_bps: Some(0.0),
                ..t(1000, 0.1, 65_536)
            },
            Transfer {
                mss: 0,
                ..t(1000, 0.1, 65_536)
            },
            Transfer {
                extra_s: f64::INFINITY,
                ..t(1000, 0.1, 65_536)
            },
        ] {
            assert!(predict(&bad).is_none(), "{bad:?}");
        }
        // A huge transfer through a 1-byte window still ends (and is finite).
        let p = predict(&t(u64::MAX / 2, 1e-6, 1)).unwrap();
        assert!(p.time_s.is_finite());
    }

    fn lab_result(workload: Workload) -> TestResult {
        let mut r = TestResult::default();
        r.spec.workload = workload;
        r.spec.bytes = Some(48 * MIB);
        r.spec.rcvbuf = Some(65_536);
        r.spec.rtt_s = Some(0.1);
        let spec = LabOptions {
            rtt: Some("100ms".into()),
            rate: Some("1gbit".into()),
            ..Default::default()
        }
        .build()
        .unwrap();
        r.lab = Some(crate::model::lab::LabRecord {
            spec: Some(spec),
            ..Default::default()
        });
        r
    }

    #[test]
    fn inputs_come_from_the_result() {
        let mut r = lab_result(Workload::named("stream"));
        // "buffer" without an observed window: nothing to model with.
        assert!(for_result(&r).is_none());
        r.summary.observed_window_bytes = Some(98_304);
        let m = for_result(&r).unwrap();
        assert_eq!(m.source, WindowSource::Observed);
        assert_eq!(m.transfer.window, 98_304);
        r.spec.window = WindowMode::Exact;
        let m = for_result(&r).unwrap();
        assert_eq!(m.source, WindowSource::Rcvbuf);
        assert_eq!(m.transfer.window, 65_536);
        assert_eq!(m.transfer.mss, 1448);
        assert!((m.transfer.goodput_bps.unwrap() - C).abs() < 1.0);
        assert_eq!(m.transfer.rtt_s, 0.1);
        // Two repetitions average into one model.
        let mut b = r.clone();
        b.spec.rcvbuf = Some(131_072);
        let both = for_results(&[r.clone(), b]).unwrap();
        assert_eq!(both.transfer.window, 98_304);
        // Not a finite one-flow transfer: no model.
        r.spec.flows = 2;
        assert!(for_result(&r).is_none());
        r.spec.flows = 1;
        r.spec.bytes = None;
        assert!(for_result(&r).is_none());
    }

    #[test]
    fn scp_adds_its_login_and_uses_the_observed_window() {
        let mut r = lab_result(Workload::named("scp"));
        r.exec = Some(crate::model::exec::ExecRecord {
            ssh_version: Some("OpenSSH_9.2p1".into()),
            elapsed_s: 3.0,
            login_s: Some(0.9),
            observed_window: Some(crate::model::flow::ObservedWindow {
                median_bytes: 6 * MIB as u32,
                max_bytes: 6 * MIB as u32,
                samples: 10,
            }),
            ..Default::default()
        });
        let m = for_result(&r).unwrap();
        assert!(m.scp);
        assert_eq!(m.transfer.window, 6 * MIB);
        assert_eq!(m.transfer.extra_s, 0.9);
        let ssh = m.with_window(SSH_CHANNEL_WINDOW).unwrap();
        assert!(ssh.time_s > m.prediction.time_s);
        r.exec.as_mut().unwrap().login_s = None;
        assert!(for_result(&r).is_none(), "scp without its login time");
    }
}
