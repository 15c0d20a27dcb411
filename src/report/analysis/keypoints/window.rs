//! The window/RTT model: which points the window or the path's rate bounds,
//! a larger window that is not proportionally faster, and points off the
//! model with what in their results may explain it.

use super::shared::{fmt_window, pct_range, KeyPoint, MODEL_TOLERANCE};
use crate::report::analysis::landscape::{Landscape, Row};
use crate::report::analysis::wanmodel::{
    self, Limit, PointModel, WindowSource, SSH_CHANNEL_WINDOW,
};
use crate::units::fmt_bps;

/// A row with its window/RTT model and measured throughput (bits/s).
type Modelled<'a> = (&'a Row, PointModel, f64);

/// Rows with a window/RTT model and a measured throughput, when the study
/// asks for the model.
fn modelled(l: &Landscape) -> Vec<Modelled<'_>> {
    if !l.window_rtt {
        return vec![];
    }
    l.rows
        .iter()
        .filter_map(|r| {
            let measured = r.mean("throughput_bps").filter(|v| *v > 0.0)?;
            Some((r, r.model()?, measured))
        })
        .collect()
}

/// "50 ms", "0.5 ms".
fn fmt_ms(s: f64) -> String {
    let ms = s * 1e3;
    if ms >= 10.0 || ms == ms.round() {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

/// Up to four names, then "...".
fn some(names: &[String]) -> String {
    let mut s = names.iter().take(4).cloned().collect::<Vec<_>>().join("; ");
    if names.len() > 4 {
        s.push_str("; ...");
    }
    s
}

/// Which points are window-bound (throughput within 15% of W/RTT, the
/// window the binding limit), which rate-bound (within 15% of the path's
/// goodput C), and where the two meet: W = C x RTT, the bandwidth-delay
/// product, against the largest window tested.
pub fn window_or_rate_bound(l: &Landscape) -> Vec<KeyPoint> {
    // scp's time holds its login and SSH's own window: the scp rules
    // explain those points; these are linerate's own transfers.
    let rows: Vec<Modelled> = modelled(l).into_iter().filter(|x| !x.1.scp).collect();
    if rows.is_empty() {
        return vec![];
    }
    let near = |measured: f64, bound: f64| (measured / bound - 1.0).abs() <= MODEL_TOLERANCE;
    let (mut window, mut rate) = (Vec::new(), Vec::new());
    // Neither bound: as the model expects (slow start), or off the model.
    let (mut short, mut off) = (Vec::new(), Vec::new());
    for (r, m, measured) in &rows {
        let t = &m.transfer;
        let by_window = (t.rtt_s > 0.0).then(|| t.window as f64 * 8.0 / t.rtt_s);
        let window_binds = match (by_window, t.goodput_bps) {
            (Some(w), Some(c)) => w < c,
            (Some(_), None) => true,
            _ => false,
        };
        match (window_binds, by_window, t.goodput_bps) {
            (true, Some(w), _) if near(*measured, w) => {
                window.push((r.point.label(), *measured, w));
            }
            (false, _, Some(c)) if near(*measured, c) => rate.push(r.point.label()),
            _ => {
                let of_bound = measured / m.prediction.bound_bps;
                let expected = m.prediction.throughput_bps / m.prediction.bound_bps;
                if expected < 1.0 - MODEL_TOLERANCE {
                    short.push((r.point.label(), of_bound));
                } else {
                    off.push((r.point.label(), of_bound));
                }
            }
        }
    }
    let n = rows.len();
    let mut parts = Vec::new();
    if let Some((label, measured, bound)) = window.first() {
        parts.push(format!(
            "{} of {n} points are window-bound, within 15% of W/RTT (e.g. {label}: {} of {})",
            window.len(),
            fmt_bps(*measured),
            fmt_bps(*bound)
        ));
    }
    let c = rows.iter().find_map(|(_, m, _)| m.transfer.goodput_bps);
    if !rate.is_empty() {
        parts.push(format!(
            "{} {} rate-bound, within 15% of the {} the path carries ({})",
            rate.len(),
            if parts.is_empty() {
                format!("of {n} points are")
            } else {
                "are".into()
            },
            c.map(fmt_bps).unwrap_or_default(),
            some(&rate)
        ));
    }
    for (other, why) in [
        (&short, "transfers of a few round trips, where slow start and the final round trip weigh, as the model expects"),
        (&off, "below what the model expects (see the model comparison)"),
    ] {
        if other.is_empty() {
            continue;
        }
        let names: Vec<String> = other.iter().map(|o| o.0.clone()).collect();
        let shares: Vec<f64> = other.iter().map(|o| o.1).collect();
        parts.push(format!(
            "{} {} neither, at {}% of min(C, W/RTT): {why} ({})",
            other.len(),
            if parts.is_empty() {
                format!("of {n} points follow")
            } else {
                "follow".into()
            },
            pct_range(&shares),
            some(&names)
        ));
    }
    let mut text = format!("{}.", parts.join("; "));
    let mut rtts: Vec<f64> = rows
        .iter()
        .map(|(_, m, _)| m.transfer.rtt_s)
        .filter(|r| *r > 0.0)
        .collect();
    rtts.sort_by(f64::total_cmp);
    rtts.dedup();
    let w_max = rows
        .iter()
        .map(|(_, m, _)| m.transfer.window)
        .max()
        .unwrap_or(0) as f64;
    let mut advice = "A window-bound transfer moves one window per round trip whatever the link: give the receiver a window of C x RTT by raising net.ipv4.tcp_rmem's max to about 1.4 x that (Linux advertises 0.63-0.77 of it), and the sender's net.ipv4.tcp_wmem max to match; where the window cannot grow, parallel streams each bring their own.".to_string();
    if let (Some(c), Some(&first), Some(&last)) = (c, rtts.first(), rtts.last()) {
        let at = |r: f64| {
            let bdp = wanmodel::bdp_bytes(c, r);
            (bdp, 100.0 * w_max / bdp)
        };
        let (b1, p1) = at(first);
        let (b2, p2) = at(last);
        let pct = |p: f64, r: f64| {
            format!(
                "{p:.0}% of it at {}{}",
                fmt_ms(r),
                if p >= 100.0 {
                    " (enough: the rate limits there)"
                } else {
                    ""
                }
            )
        };
        if rtts.len() == 1 {
            text.push_str(&format!(
                " Window and rate meet where W = C x RTT, the bandwidth-delay product: at {} a {} path needs a {} window; the largest window tested, {}, is {}.",
                fmt_ms(first),
                fmt_bps(c),
                fmt_window(b1),
                fmt_window(w_max),
                pct(p1, first)
            ));
        } else {
            text.push_str(&format!(
                " Window and rate meet where W = C x RTT, the bandwidth-delay product: a {} path needs a {} window at {} and {} at {}; the largest window tested, {}, is {} and {}.",
                fmt_bps(c),
                fmt_window(b1),
                fmt_ms(first),
                fmt_window(b2),
                fmt_ms(last),
                fmt_window(w_max),
                pct(p1, first),
                pct(p2, last)
            ));
        }
        advice = format!(
            "A window-bound transfer moves one window per round trip whatever the link: to fill this path at {} the receiver needs a {} window; raise net.ipv4.tcp_rmem's max to about 1.4 x that (Linux advertises 0.63-0.77 of it) and the sender's net.ipv4.tcp_wmem max to match; where the window cannot grow, parallel streams each bring their own.",
            fmt_ms(last),
            fmt_window(b2)
        );
    }
    vec![KeyPoint {
        rule: "window_or_rate_bound",
        text,
        advice,
    }]
}

/// A window N times larger that gives much less than N times the
/// throughput (15% short or more), explained by the model: the larger
/// window is past C x RTT, or the transfer is over in a few round trips,
/// so slow start and the last round trip take a large share of it.
pub fn window_not_proportional(l: &Landscape) -> Vec<KeyPoint> {
    let rows = modelled(l);
    let mut groups: Vec<(String, Vec<&Modelled>)> = Vec::new();
    // scp's login and SSH window have rules of their own.
    for x in rows.iter().filter(|x| x.1.transfer.rtt_s > 0.0 && !x.1.scp) {
        let key = x.0.point.label_except("rcvbuf");
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(x),
            None => groups.push((key, vec![x])),
        }
    }
    // (group, window ratio, measured ratio, model ratio, small, large)
    type Hit<'a> = (String, f64, f64, f64, &'a Modelled<'a>, &'a Modelled<'a>);
    let mut hits: Vec<Hit> = Vec::new();
    for (key, v) in groups {
        let (Some(lo), Some(hi)) = (
            v.iter().min_by_key(|x| x.1.transfer.window),
            v.iter().max_by_key(|x| x.1.transfer.window),
        ) else {
            continue;
        };
        let wr = hi.1.transfer.window as f64 / lo.1.transfer.window as f64;
        let measured = hi.2 / lo.2;
        let model = hi.1.prediction.throughput_bps / lo.1.prediction.throughput_bps;
        if wr >= 1.5 && measured < (1.0 - MODEL_TOLERANCE) * wr {
            hits.push((key, wr, measured, model, lo, hi));
        }
    }
    let Some(worst) = hits
        .iter()
        .min_by(|a, b| (a.2 / a.1).total_cmp(&(b.2 / b.1)))
    else {
        return vec![];
    };
    let (key, wr, measured, model, lo, hi) = worst;
    let p = &hi.1.prediction;
    let t = &hi.1.transfer;
    let reason = if p.limit == Limit::Rate {
        format!(
            "{} is past C x RTT ({}), so the path's {} caps it",
            fmt_window(t.window as f64),
            fmt_window(wanmodel::bdp_bytes(t.goodput_bps.unwrap_or(0.0), t.rtt_s)),
            fmt_bps(p.bound_bps)
        )
    } else {
        format!(
            "with {} the transfer is over in {:.0} round trips, {:.0} of them in slow start (cwnd doubling from 10 segments), so {:.0}% of its time goes to slow start and the final round trip",
            fmt_window(t.window as f64),
            p.rounds + 1.0,
            p.slow_start_rounds,
            100.0 * p.overhead_share()
        )
    };
    let model_says = if *measured < (1.0 - MODEL_TOLERANCE) * model {
        format!("the model expects {model:.1}x, so more than the model holds it back (see below)")
    } else {
        format!("the model expects {model:.1}x")
    };
    vec![KeyPoint {
        rule: "window_not_proportional",
        text: format!(
            "A window {wr:.0}x larger does not give {wr:.0}x the throughput{}: {} gives {measured:.1}x the throughput of {} ({} vs {}); {model_says}: {reason}.{}",
            if key.is_empty() {
                String::new()
            } else {
                format!(" at {key}")
            },
            fmt_window(t.window as f64),
            fmt_window(lo.1.transfer.window as f64),
            fmt_bps(hi.2),
            fmt_bps(lo.2),
            if hits.len() > 1 {
                format!(" The same holds at {} other settings.", hits.len() - 1)
            } else {
                String::new()
            }
        ),
        advice: "Past C x RTT a larger window buys nothing, and a transfer that lasts a few round trips is spent in slow start: fewer round trips (a reused connection, a larger initial window with `ip route ... initcwnd`, parallel streams) help it more than window does.".into(),
    }]
}

/// What in a result could explain a point far from the model.
fn mismatch_causes(r: &Row, m: &PointModel, ratio: f64) -> Vec<String> {
    let mut out = Vec::new();
    let emu = r
        .results
        .iter()
        .filter_map(|x| x.lab.as_ref()?.emulator.as_ref());
    let queue: u64 = emu
        .clone()
        .flat_map(|e| e.dirs.iter().map(|d| d.dropped_queue))
        .sum();
    let lost: u64 = emu
        .clone()
        .flat_map(|e| e.dirs.iter().map(|d| d.dropped_loss))
        .sum();
    if queue > 0 {
        out.push(format!("the emulator's queue dropped {queue} packets"));
    }
    if lost > 0 {
        out.push(format!("{lost} packets lost to the emulated loss"));
    }
    if let Some(c) = emu
        .filter_map(|e| e.cpu_pct)
        .fold(None, |a: Option<f64>, c| Some(a.map_or(c, |a| a.max(c))))
        .filter(|c| *c > 80.0)
    {
        out.push(format!("the emulator used {c:.0}% of a core"));
    }
    let flows = || {
        r.results.iter().flat_map(|x| {
            x.iterations.iter().flat_map(|it| {
                it.flows
                    .client
                    .iter()
                    .chain(it.flows.agent.iter())
                    .map(move |f| (it.duration_s, f))
            })
        })
    };
    let retrans: u64 = flows()
        .filter_map(|(_, f)| f.tcp_info.as_ref())
        .map(|t| u64::from(t.total_retrans))
        .sum();
    if retrans > 0 {
        out.push(format!("{retrans} retransmitted segments"));
    }
    let sndbuf = flows()
        .filter_map(|(d, f)| {
            let us = f.tcp_info.as_ref()?.sndbuf_limited_us? as f64;
            (d > 0.0).then(|| us / (d * 1e6))
        })
        .fold(0.0f64, f64::max);
    if sndbuf >= 0.1 {
        out.push(format!(
            "the sender's buffer limited it {:.0}% of the time",
            100.0 * sndbuf.min(1.0)
        ));
    }
    if m.scp && m.transfer.window > SSH_CHANNEL_WINDOW && ratio < 1.0 {
        out.push(format!(
            "SSH's {} channel window, below the {} TCP window",
            fmt_window(SSH_CHANNEL_WINDOW as f64),
            fmt_window(m.transfer.window as f64)
        ));
    }
    let rtt_ms = m.transfer.rtt_s * 1e3;
    if let Some(measured) = r.mean("rtt_measured_ms") {
        if (measured - rtt_ms).abs() > (0.1 * rtt_ms).max(1.0) {
            out.push(format!(
                "the measured RTT was {measured:.1} ms for {} asked",
                fmt_ms(m.transfer.rtt_s)
            ));
        }
    }
    if out.is_empty() {
        out.push(if ratio < 1.0 {
            "no drops, loss or retransmissions recorded: check the sender's buffer (net.ipv4.tcp_wmem max at least the window) and CPU".into()
        } else if m.source == WindowSource::Observed {
            "faster than the model: the window observed mid-transfer may understate the window over the whole transfer".into()
        } else {
            "faster than the model: the receiver's window was larger than rcvbuf for part of the transfer".into()
        });
    }
    out
}

/// Points more than 15% from the window/RTT model, each with what its
/// result says could explain it (queue drops, loss, retransmissions, a
/// sender buffer, SSH's channel window, an RTT other than asked).
pub fn model_mismatch(l: &Landscape) -> Vec<KeyPoint> {
    let rows = modelled(l);
    let off: Vec<String> = rows
        .iter()
        .filter_map(|(r, m, measured)| {
            let ratio = measured / m.prediction.throughput_bps;
            ((ratio - 1.0).abs() > MODEL_TOLERANCE).then(|| {
                format!(
                    "{} at {ratio:.2}x of the model ({})",
                    r.point.label(),
                    mismatch_causes(r, m, ratio).join(", ")
                )
            })
        })
        .collect();
    if off.is_empty() {
        return vec![];
    }
    vec![KeyPoint {
        rule: "model_mismatch",
        text: format!(
            "{} of {} points differ from the window/RTT model by more than 15%: {}.",
            off.len(),
            rows.len(),
            some(&off)
        ),
        advice: "Each result holds the evidence: its lab block (emulator queue drops, loss, the calibrated RTT) and each flow's TCP_INFO (retransmits, sndbuf_limited). A sender buffer smaller than the window caps like a small window (raise net.ipv4.tcp_wmem's max); a queue that overflows makes a window test a loss test (raise the lab's queue).".into(),
    }]
}
