//! The draft's arithmetic, apart from any network (draft-ietf-ippm-
//! responsiveness-08, "Final Algorithm" and "Aggregating the
//! Measurements"): moving averages over MAD intervals, the stability test
//! (the standard deviation of the last MAD moving averages under SDT of
//! the current one), the single-sided trimmed mean (the lowest TMP percent
//! kept), and RPM from the probes' trimmed means.

use crate::workload::rpm::params::Confidence;

/// The moving average at the last interval: the mean of the last `mad`
/// values (None until there are that many).
pub fn moving_average(values: &[f64], mad: usize) -> Option<f64> {
    if mad == 0 || values.len() < mad {
        return None;
    }
    let last = &values[values.len() - mad..];
    Some(last.iter().sum::<f64>() / mad as f64)
}

/// Whether a series of moving averages is stable: the last `mad` of them
/// exist and their standard deviation (of the population: the draft does
/// not say which; goresponsiveness takes this one) is below `sdt_pct`
/// percent of the current (last) one.
pub fn stable(averages: &[f64], mad: usize, sdt_pct: f64) -> bool {
    if mad == 0 || averages.len() < mad {
        return false;
    }
    let last = &averages[averages.len() - mad..];
    let mean = last.iter().sum::<f64>() / mad as f64;
    let var = last.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / mad as f64;
    let current = *last.last().unwrap_or(&0.0);
    current > 0.0 && var.sqrt() < sdt_pct / 100.0 * current
}

/// The single-sided trimmed mean: the mean of the lowest `tmp_pct` percent
/// of `values` (at least one). None for no values.
pub fn trimmed_mean(values: &[f64], tmp_pct: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let keep = ((v.len() as f64 * tmp_pct / 100.0).floor() as usize).clamp(1, v.len());
    Some(v[..keep].iter().sum::<f64>() / keep as f64)
}

/// What the probes of a span measured, each a list of milliseconds.
#[derive(Clone, Debug, Default)]
pub struct ProbeTimes {
    pub tcp: Vec<f64>,
    /// Per round trip of the TLS handshake; empty without TLS.
    pub tls: Vec<f64>,
    pub http_foreign: Vec<f64>,
    pub http_self: Vec<f64>,
    /// The self probes again, by the direction of the connection they
    /// were asked on: which way's queue a loaded request waited in.
    pub http_self_down: Vec<f64>,
    pub http_self_up: Vec<f64>,
}

impl ProbeTimes {
    /// Adds `other`'s probes (a sequential test's next phase).
    pub fn append(&mut self, other: ProbeTimes) {
        self.tcp.extend(other.tcp);
        self.tls.extend(other.tls);
        self.http_foreign.extend(other.http_foreign);
        self.http_self.extend(other.http_self);
        self.http_self_down.extend(other.http_self_down);
        self.http_self_up.extend(other.http_self_up);
    }
}

/// RPM and its two halves, and the trimmed means (ms) they came from.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Rpm {
    pub rpm: f64,
    pub foreign: f64,
    pub selfp: f64,
    pub tcp_ms: f64,
    pub tls_ms: Option<f64>,
    pub http_foreign_ms: f64,
    pub http_self_ms: f64,
}

/// The draft's RPM: foreign = 60000 / the mean of the TCP, TLS (per round
/// trip) and HTTP trimmed means (TCP and HTTP alone without TLS: no zero
/// stands in for it), self = 60000 / the loaded HTTP trimmed mean, and RPM
/// their mean. None until both kinds of probe have a sample.
pub fn rpm(p: &ProbeTimes, tmp_pct: f64) -> Option<Rpm> {
    let tcp = trimmed_mean(&p.tcp, tmp_pct)?;
    let http_f = trimmed_mean(&p.http_foreign, tmp_pct)?;
    let http_l = trimmed_mean(&p.http_self, tmp_pct)?;
    let tls = trimmed_mean(&p.tls, tmp_pct);
    let foreign_ms = match tls {
        Some(t) => (tcp + t + http_f) / 3.0,
        None => (tcp + http_f) / 2.0,
    };
    let foreign = 60_000.0 / foreign_ms.max(1e-3);
    let selfp = 60_000.0 / http_l.max(1e-3);
    Some(Rpm {
        rpm: (foreign + selfp) / 2.0,
        foreign,
        selfp,
        tcp_ms: tcp,
        tls_ms: tls,
        http_foreign_ms: http_f,
        http_self_ms: http_l,
    })
}

/// The draft's confidence in one figure: fewer than MAD intervals ran
/// (low), MAD or more without stability (medium), stable (high).
pub fn confidence(intervals: usize, mad: usize, stable: bool) -> Confidence {
    if stable {
        Confidence::High
    } else if intervals >= mad {
        Confidence::Medium
    } else {
        Confidence::Low
    }
}

pub use crate::workload::rpm::params::rating;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_moving_average_spans_the_last_mad_intervals() {
        assert_eq!(moving_average(&[1.0, 2.0, 3.0], 4), None);
        assert_eq!(moving_average(&[1.0, 2.0, 3.0, 6.0, 9.0], 4), Some(5.0));
    }

    #[test]
    fn stability_needs_mad_averages_within_sdt_of_the_current() {
        // Rising by 20% a step: not stable.
        assert!(!stable(&[50.0, 60.0, 72.0, 86.4], 4, 5.0));
        // Flat within 1%: stable.
        assert!(stable(&[99.0, 100.0, 101.0, 100.0], 4, 5.0));
        // Too few.
        assert!(!stable(&[100.0, 100.0, 100.0], 4, 5.0));
        // A sd of 5.6 against a current of 100: over 5%, under 6%.
        let v = [92.0, 100.0, 108.0, 100.0];
        assert!(!stable(&v, 4, 5.0) && stable(&v, 4, 6.0));
    }

    #[test]
    fn the_trimmed_mean_drops_the_slowest() {
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        // 95% of 20 = 19 kept: 1..=19, mean 10.
        assert_eq!(trimmed_mean(&v, 95.0), Some(10.0));
        // One sample is kept whatever the percentage.
        assert_eq!(trimmed_mean(&[7.0], 5.0), Some(7.0));
        assert_eq!(trimmed_mean(&[], 95.0), None);
    }

    #[test]
    fn rpm_averages_foreign_and_self_rpm_not_their_round_trips() {
        let p = ProbeTimes {
            tcp: vec![10.0],
            tls: vec![10.0],
            http_foreign: vec![10.0],
            http_self: vec![100.0],
            ..Default::default()
        };
        let r = rpm(&p, 95.0).unwrap();
        assert_eq!(r.foreign, 6000.0);
        assert_eq!(r.selfp, 600.0);
        assert_eq!(r.rpm, 3300.0);
        // Without TLS the foreign mean is of TCP and HTTP alone.
        let clear = ProbeTimes {
            tls: vec![],
            tcp: vec![10.0],
            http_foreign: vec![30.0],
            ..p
        };
        assert_eq!(rpm(&clear, 95.0).unwrap().foreign, 3000.0);
    }

    #[test]
    fn confidence_and_rating_follow_the_draft() {
        assert_eq!(confidence(3, 4, false), Confidence::Low);
        assert_eq!(confidence(5, 4, false), Confidence::Medium);
        assert_eq!(confidence(2, 4, true), Confidence::High);
        assert_eq!(rating(299.0), "Poor");
        assert_eq!(rating(6000.0), "Excellent");
    }
}
