//! scp beside the window/RTT model: its SSH login, and OpenSSH's channel
//! window capping it.

use super::shared::{fmt_window, pct_range, KeyPoint, MODEL_TOLERANCE};
use crate::report::analysis::landscape::{Landscape, Row};
use crate::report::analysis::wanmodel::{self, PointModel, SSH_CHANNEL_WINDOW};
use crate::units::fmt_bps;

/// scp's SSH login as a share of its time (10% or more at some point):
/// each copy pays key exchange, authentication and channel setup, about
/// 18 round trips, before any data moves.
pub fn scp_login(l: &Landscape) -> Vec<KeyPoint> {
    let v: Vec<(&Row, f64, f64)> = l
        .rows
        .iter()
        .filter_map(|r| {
            let (login, total) = (r.mean("login_s")?, r.mean("transfer_s")?);
            (total > 0.0 && login >= 0.0).then_some((r, login, total))
        })
        .collect();
    let Some(worst) = v.iter().max_by(|a, b| (a.1 / a.2).total_cmp(&(b.1 / b.2))) else {
        return vec![];
    };
    let (r, login, total) = *worst;
    let share = login / total;
    if share < 0.1 {
        return vec![];
    }
    let rtt = r
        .model()
        .map(|m| m.transfer.rtt_s)
        .or(r.point.spec.rtt_s)
        .filter(|x| *x > 0.0);
    let shares: Vec<f64> = v.iter().map(|x| x.1 / x.2).collect();
    vec![KeyPoint {
        rule: "scp_login",
        text: format!(
            "scp's SSH login takes {login:.2} s of its {total:.2} s at {} ({:.0}%{}){}.",
            r.point.label(),
            100.0 * share,
            rtt.map(|x| format!(", about {:.0} round trips", login / x))
                .unwrap_or_default(),
            if v.len() > 1 {
                format!(
                    "; over the {} scp points the login is {}% of the time",
                    v.len(),
                    pct_range(&shares)
                )
            } else {
                String::new()
            }
        ),
        advice: "Every scp pays a new SSH login (key exchange, authentication, channel setup) in round trips: reuse one connection for many copies (ssh -o ControlMaster=auto -o ControlPersist=60), or copy many files in one scp; compare copies net of the login (login_s).".into(),
    }]
}

/// scp held near 2 MiB per round trip by OpenSSH's channel window while
/// the TCP window would allow more: within 15% of (or below) the model
/// with a 2 MiB window and 15% or more below the model with the TCP one.
pub fn scp_channel_window(l: &Landscape) -> Vec<KeyPoint> {
    let hits: Vec<(String, PointModel, f64, wanmodel::Prediction)> = l
        .rows
        .iter()
        .filter_map(|r| {
            let measured = r.mean("throughput_bps").filter(|v| *v > 0.0)?;
            let m = r.model().filter(|m| {
                m.scp && m.transfer.rtt_s > 0.0 && m.transfer.window > SSH_CHANNEL_WINDOW
            })?;
            let ssh = m.with_window(SSH_CHANNEL_WINDOW)?;
            let capped = measured <= (1.0 + MODEL_TOLERANCE) * ssh.throughput_bps
                && measured < (1.0 - MODEL_TOLERANCE) * m.prediction.throughput_bps;
            capped.then(|| (r.point.label(), m, measured, ssh))
        })
        .collect();
    let Some((label, m, measured, ssh)) = hits.iter().max_by(|a, b| {
        (a.1.prediction.throughput_bps / a.2).total_cmp(&(b.1.prediction.throughput_bps / b.2))
    }) else {
        return vec![];
    };
    vec![KeyPoint {
        rule: "scp_channel_window",
        text: format!(
            "scp is capped near {} per round trip by OpenSSH's channel window (sftp's 64 outstanding 32 KiB requests are the same {}), even with a larger TCP window: at {label} the {} TCP window would allow {}, scp got {}, and the model with a {} window gives {} ({} at most).{}",
            fmt_window(SSH_CHANNEL_WINDOW as f64),
            fmt_window(SSH_CHANNEL_WINDOW as f64),
            fmt_window(m.transfer.window as f64),
            fmt_bps(m.prediction.throughput_bps),
            fmt_bps(*measured),
            fmt_window(SSH_CHANNEL_WINDOW as f64),
            fmt_bps(ssh.throughput_bps),
            fmt_bps(ssh.bound_bps),
            if hits.len() > 1 {
                format!(" The same holds at {} other scp points.", hits.len() - 1)
            } else {
                String::new()
            }
        ),
        advice: "A TCP window past 2 MiB does not speed up stock OpenSSH on a long path; HPN-SSH (larger, dynamic channel windows) or several copies in parallel do.".into(),
    }]
}
