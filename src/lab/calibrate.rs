//! Measuring the lab before trusting it: the round trip (TCP connect and a
//! 1-byte request/response) and the bulk rate one TCP flow gets, against
//! what was configured, with the emulator's own counters. A lab whose RTT is
//! off by more than 2% (or 0.5 ms), whose rate is off by more than 2%, or
//! whose emulator is busy enough to be the bottleneck, says so in every
//! result it produces.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::emulator::Stats;
use super::netns;
use super::state::LabState;
use super::tap::{Seen, Tap};
use super::LabError;
use crate::model::lab::{Calibration, Lateness};

/// The server's end of its link to the router, in its namespace.
const SERVER_DEV: &str = "lr0";

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return 0.0;
    }
    v[v.len() / 2]
}

/// What the server end of a calibration connection does, by its first byte.
const ECHO: u8 = b'e';
const SINK: u8 = b's';

/// A listener in the server namespace that echoes single bytes or sinks a
/// bulk flow, for at most `conns` connections; reports sink goodput over
/// the second half of the transfer on `results`.
fn serve(st: &LabState, conns: usize) -> Result<(u16, mpsc::Receiver<f64>), LabError> {
    let (port_tx, port_rx) = mpsc::channel();
    let (res_tx, res_rx) = mpsc::channel();
    let ns = st.server_ns.clone();
    let addr: SocketAddr = format!("{}:0", st.server_addr).parse().unwrap();
    std::thread::spawn(move || {
        let l = match netns::enter(&ns).and_then(|_| TcpListener::bind(addr).map_err(LabError::Os))
        {
            Ok(l) => l,
            Err(e) => {
                let _ = port_tx.send(Err(e));
                return;
            }
        };
        let _ = port_tx.send(Ok(l.local_addr().map(|a| a.port()).unwrap_or(0)));
        let _ = l.set_nonblocking(false);
        for _ in 0..conns {
            let Ok((mut s, _)) = l.accept() else { return };
            let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
            let mut first = [0u8; 1];
            if s.read_exact(&mut first).is_err() {
                continue;
            }
            match first[0] {
                ECHO => {
                    let mut b = [0u8; 1];
                    while s.read_exact(&mut b).is_ok() {
                        if s.write_all(&b).is_err() {
                            break;
                        }
                    }
                }
                SINK => {
                    let mut buf = vec![0u8; 256 * 1024];
                    let mut marks: Vec<(Instant, u64)> = Vec::new();
                    let mut total = 0u64;
                    while let Ok(n) = s.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        total += n as u64;
                        marks.push((Instant::now(), total));
                    }
                    let _ = res_tx.send(second_half_rate(&marks));
                }
                _ => {}
            }
        }
    });
    let port = port_rx
        .recv_timeout(Duration::from_secs(5))
        .map_err(|_| LabError::ListenerSilent)??;
    Ok((port, res_rx))
}

/// Bits/s between the middle and the end of a transfer (past slow start).
fn second_half_rate(marks: &[(Instant, u64)]) -> f64 {
    let (Some(first), Some(last)) = (marks.first(), marks.last()) else {
        return 0.0;
    };
    let mid = first.0 + (last.0 - first.0) / 2;
    let m = marks.iter().find(|(t, _)| *t >= mid).unwrap_or(first);
    let dt = (last.0 - m.0).as_secs_f64();
    if dt <= 0.0 {
        return 0.0;
    }
    (last.1 - m.1) as f64 * 8.0 / dt
}

/// Calibrates lab `st`: RTT always, the bulk rate when `rate` is set (it
/// takes max(1 s, 32 RTT): slow start needs about 11 round trips to fill a
/// 1 Gbit/s x 200 ms path, and the rate is read over the second half; with
/// 20 RTT it read 851 instead of 941 Mbit/s at 200 ms).
/// The bulk flow's length: 32 round trips, at least 1 s and at most 20 s
/// (the longest RTT a lab takes, 20 s, would otherwise calibrate for 11
/// minutes).
fn bulk_seconds(rtt_s: f64) -> f64 {
    (32.0 * rtt_s).clamp(1.0, 20.0)
}

/// About how long `calibrate` takes: 3 connects, 6 echoes, the bulk flow.
pub fn expected_s(st: &LabState, rate: bool) -> f64 {
    let rtt_s = st.spec.rtt_s();
    9.0 * rtt_s
        + if rate {
            bulk_seconds(rtt_s) + 2.0 * rtt_s
        } else {
            0.0
        }
}

/// Calibrates lab `st`; with `rate`, one bulk flow's goodput and the most
/// the link carried over any window of it, both from the server host's
/// kernel stamps (`tap`): a server that read late, or TCP handing over
/// what waited behind a loss, would otherwise count bytes the link carried
/// earlier (on a slow host a 1 Gbit/s link seemed to pass 1.05 Gbit/s).
pub fn calibrate(st: &LabState, rate: bool) -> Result<Calibration, LabError> {
    let conns = 3 + 1 + usize::from(rate);
    let (port, results) = serve(st, conns)?;
    let tap = if rate {
        Some(Tap::start(&st.server_ns, SERVER_DEV, st.spec.mtu)?)
    } else {
        None
    };
    let server: SocketAddr = format!("{}:{port}", st.server_addr).parse().unwrap();
    let rtt_s = st.spec.rtt_s();
    let timeout = Duration::from_secs_f64(5.0 + 4.0 * rtt_s);
    let before = st.emulator_stats();
    let started = Instant::now();
    let ns = st.client_ns.clone();
    let bulk_s = bulk_seconds(rtt_s);
    let (connects, rrs) = netns::run_in(&ns, move || {
        let mut connects = Vec::new();
        for _ in 0..3 {
            let t = Instant::now();
            let s = TcpStream::connect_timeout(&server, timeout)
                .map_err(|source| LabError::CalibrationConnect { server, source })?;
            connects.push(t.elapsed().as_secs_f64() * 1e3);
            drop(s);
        }
        let mut s = TcpStream::connect_timeout(&server, timeout).map_err(LabError::Os)?;
        s.set_nodelay(true).map_err(LabError::Os)?;
        s.set_read_timeout(Some(timeout)).map_err(LabError::Os)?;
        s.write_all(&[ECHO]).map_err(LabError::Os)?;
        let mut rrs = Vec::new();
        let mut b = [0u8; 1];
        for i in 0..6 {
            let t = Instant::now();
            s.write_all(b"x").map_err(LabError::Os)?;
            s.read_exact(&mut b)
                .map_err(|source| LabError::NoEcho { server, source })?;
            // The first exchange may still pay for the connection's setup.
            if i > 0 {
                rrs.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        drop(s);
        if rate {
            let mut s = TcpStream::connect_timeout(&server, timeout).map_err(LabError::Os)?;
            s.set_write_timeout(Some(timeout)).map_err(LabError::Os)?;
            s.write_all(&[SINK]).map_err(LabError::Os)?;
            let buf = vec![0x5au8; 128 * 1024];
            let end = Instant::now() + Duration::from_secs_f64(bulk_s);
            while Instant::now() < end {
                s.write_all(&buf).map_err(LabError::BulkFlow)?;
            }
        }
        Ok((connects, rrs))
    })?;
    let mut connects = connects;
    let mut rrs = rrs;
    let read = if rate {
        results.recv_timeout(timeout).ok()
    } else {
        None
    };
    let seen = tap.map(Tap::stop).transpose()?;
    let elapsed = started.elapsed().as_secs_f64();
    let after = st.emulator_stats();
    // The tap's figures when it saw the whole flow; the reads' otherwise.
    let seen = seen.filter(|s| s.missed == 0);
    let measured = seen
        .as_ref()
        .and_then(Seen::second_half_goodput_bps)
        .or(read);
    let peak_window_s = (bulk_s / 2.0).min(1.0);
    let peak = seen
        .as_ref()
        .and_then(|s| s.peak_bps((peak_window_s * 1e9) as u64));
    let mut c = Calibration {
        rtt_configured_ms: rtt_s * 1e3,
        rtt_connect_ms: median(&mut connects),
        rtt_rr_ms: median(&mut rrs),
        rtt_rr_min_ms: rrs.iter().cloned().fold(f64::INFINITY, f64::min),
        rtt_rr_max_ms: rrs.iter().cloned().fold(0.0, f64::max),
        goodput_expected_bps: st.spec.goodput_bps(0),
        goodput_measured_bps: measured,
        emulator_cpu_pct: cpu_pct(before.as_ref(), after.as_ref(), elapsed),
        warnings: Vec::new(),
        link_rate_bps: st.spec.links[0].rate_bps.filter(|_| rate),
        link_peak_bps: peak,
        link_peak_window_s: peak.map(|_| peak_window_s),
        lateness: match (&before, &after) {
            (Some(b), Some(a)) if a.pid == b.pid => Some(Lateness::of(
                &[a.dirs[0].since(&b.dirs[0]), a.dirs[1].since(&b.dirs[1])],
                elapsed,
            )),
            _ => None,
        },
    };
    c.warnings = c.judge();
    Ok(c)
}

/// The window an application that leaves SO_RCVBUF alone gets from the
/// server namespace (autotuning under tcp_rmem), as the sender sees it in
/// the second half of a bulk probe of max(1 s, 15 RTT).
pub fn probe_window(st: &LabState) -> Result<u32, LabError> {
    let (port, _results) = serve(st, 1)?;
    let server: SocketAddr = format!("{}:{port}", st.server_addr).parse().unwrap();
    let rtt = st.spec.rtt_s();
    let secs = (15.0 * rtt).max(1.0);
    let timeout = Duration::from_secs_f64(5.0 + 4.0 * rtt);
    netns::run_in(&st.client_ns, move || {
        use std::os::fd::AsRawFd;
        let mut s = TcpStream::connect_timeout(&server, timeout)
            .map_err(|source| LabError::ProbeConnect { server, source })?;
        s.set_write_timeout(Some(timeout)).map_err(LabError::Os)?;
        s.write_all(&[SINK]).map_err(LabError::Os)?;
        let buf = vec![0x5au8; 64 * 1024];
        let t0 = Instant::now();
        let end = t0 + Duration::from_secs_f64(secs);
        let half = t0 + Duration::from_secs_f64(secs / 2.0);
        let mut samples = Vec::new();
        let mut last = t0;
        while Instant::now() < end {
            s.write_all(&buf).map_err(LabError::Probe)?;
            let now = Instant::now();
            if now >= half && now - last >= Duration::from_millis(5) {
                last = now;
                if let Some(w) =
                    crate::measure::tcpinfo::read(s.as_raw_fd()).and_then(|i| i.snd_wnd)
                {
                    samples.push(w as f64);
                }
            }
        }
        if samples.is_empty() {
            return Err(LabError::NoWindowSample);
        }
        Ok(median(&mut samples) as u32)
    })
}

/// Finds the server namespace's tcp_rmem maximum that gives an unmodified
/// application (sshd) a window of `window` bytes: starts from the ratio
/// measured on Linux 6.x (window ~0.7 x max), then corrects by what a probe
/// sees, up to 4 probes, until within 5%. Leaves it set; returns (max, seen).
pub fn rmem_for_window(st: &LabState, window: u64) -> Result<(u64, u32), LabError> {
    let mut max = ((window as f64 / 0.7) as u64).max(8192);
    let mut best = (max, 0u32, f64::INFINITY);
    for _ in 0..4 {
        let v = format!("4096 {} {max}", max.min(131_072));
        netns::sysctls(&st.server_ns, &[("net.ipv4.tcp_rmem", v)])?;
        let seen = probe_window(st)?;
        let ratio = seen as f64 / window as f64;
        if (ratio - 1.0).abs() < best.2 {
            best = (max, seen, (ratio - 1.0).abs());
        }
        if (ratio - 1.0).abs() <= 0.05 {
            break;
        }
        max = ((max as f64 / ratio) as u64).max(8192);
    }
    let (max, seen, _) = best;
    let v = format!("4096 {} {max}", max.min(131_072));
    netns::sysctls(&st.server_ns, &[("net.ipv4.tcp_rmem", v)])?;
    Ok((max, seen))
}

/// Emulator CPU between two counter snapshots as % of one core.
pub fn cpu_pct(before: Option<&Stats>, after: Option<&Stats>, elapsed_s: f64) -> Option<f64> {
    let (b, a) = (before?, after?);
    if elapsed_s <= 0.0 || a.pid != b.pid {
        return None;
    }
    Some(((a.cpu_s - b.cpu_s) / elapsed_s * 100.0).max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judge_flags_rtt_rate_and_cpu() {
        let ok = Calibration {
            rtt_configured_ms: 50.0,
            rtt_rr_ms: 50.4,
            goodput_expected_bps: Some(941e6),
            goodput_measured_bps: Some(935e6),
            emulator_cpu_pct: Some(7.0),
            ..Default::default()
        };
        assert!(ok.judge().is_empty(), "{:?}", ok.judge());
        let bad = Calibration {
            rtt_rr_ms: 52.0,
            goodput_measured_bps: Some(800e6),
            emulator_cpu_pct: Some(95.0),
            ..ok
        };
        let w = bad.judge();
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(w[0].contains("RTT"));
        assert!(w[1].contains("-15.0%"), "{}", w[1]);
        assert!(w[2].contains("bottleneck"));
    }

    #[test]
    fn zero_rtt_has_an_absolute_tolerance() {
        let c = Calibration {
            rtt_configured_ms: 0.0,
            rtt_rr_ms: 0.08,
            ..Default::default()
        };
        assert!(c.judge().is_empty());
    }

    #[test]
    fn the_bulk_flow_is_bounded_whatever_the_rtt() {
        // 32 round trips, at least 1 s, at most 20 s: a 10 s RTT (the
        // longest a lab takes is 20 s) no longer means minutes of bulk.
        assert_eq!(bulk_seconds(0.0), 1.0);
        assert!((bulk_seconds(0.2) - 6.4).abs() < 1e-9);
        assert_eq!(bulk_seconds(10.0), 20.0);
        assert_eq!(bulk_seconds(20.0), 20.0);
    }

    #[test]
    fn second_half_rate_skips_the_start() {
        let t0 = Instant::now();
        let ms = |m: u64| t0 + Duration::from_millis(m);
        // Slow first half, then 1 MB per 100 ms = 80 Mbit/s.
        let marks = vec![
            (ms(0), 1000),
            (ms(500), 2000),
            (ms(600), 1_002_000),
            (ms(1000), 5_002_000),
        ];
        let r = second_half_rate(&marks);
        assert!((r - 80e6).abs() < 1e3, "{r}");
    }
}
