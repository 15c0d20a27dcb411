//! Statistics over iterations: mean, standard deviation and the Student-t
//! confidence interval, used to repeat a test until the interval is tight
//! enough (netperf `-i max,min -I level,width`).

use crate::model::sample::{Confidence, Estimate};
use statrs::distribution::{ContinuousCDF, StudentsT};

pub fn estimate(values: &[f64], level_pct: f64) -> Estimate {
    let n = values.len();
    if n == 0 {
        return Estimate {
            level_pct,
            ..Default::default()
        };
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let var = if n > 1 {
        values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64
    } else {
        0.0
    };
    let stddev = var.sqrt();
    let half_width = (n > 1).then(|| {
        let t = StudentsT::new(0.0, 1.0, (n - 1) as f64).expect("df >= 1");
        let q = t.inverse_cdf(1.0 - (1.0 - level_pct / 100.0) / 2.0);
        q * stddev / (n as f64).sqrt()
    });
    let half_width_pct = half_width.and_then(|h| (mean != 0.0).then(|| 100.0 * h / mean.abs()));
    Estimate {
        n,
        mean,
        stddev,
        level_pct,
        half_width,
        half_width_pct,
        min: values.iter().cloned().fold(f64::INFINITY, f64::min),
        max: values.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
    }
}

/// True when `c` needs no more iterations after `values`.
pub fn satisfied(c: &Confidence, values: &[f64]) -> bool {
    if values.len() >= c.max {
        return true;
    }
    if values.len() < c.min.max(1) {
        return false;
    }
    if values.len() < 2 {
        return c.max <= 1;
    }
    estimate(values, c.level_pct)
        .half_width_pct
        .is_some_and(|h| h <= c.width_pct / 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_interval_matches_tables() {
        // n=5: t(0.995, 4) = 4.604; stddev of 1..5 = 1.5811
        let e = estimate(&[1.0, 2.0, 3.0, 4.0, 5.0], 99.0);
        assert!((e.mean - 3.0).abs() < 1e-12);
        assert!((e.stddev - 1.581_138_8).abs() < 1e-6);
        let expected = 4.604_094 * 1.581_138_8 / 5f64.sqrt();
        assert!(
            (e.half_width.unwrap() - expected).abs() < 1e-3,
            "{:?}",
            e.half_width
        );
        // 95%, n=3: t(0.975, 2) = 4.303
        let e = estimate(&[10.0, 12.0, 14.0], 95.0);
        assert!((e.half_width.unwrap() - 4.302_653 * 2.0 / 3f64.sqrt()).abs() < 1e-3);
        assert!(estimate(&[7.0], 99.0).half_width.is_none());
    }

    #[test]
    fn confidence_policy() {
        let c = Confidence {
            min: 3,
            max: 10,
            level_pct: 99.0,
            width_pct: 5.0,
        };
        assert!(!satisfied(&c, &[100.0, 100.1]));
        assert!(satisfied(&c, &[100.0, 100.1, 99.9]));
        assert!(!satisfied(&c, &[100.0, 120.0, 80.0]));
        assert!(satisfied(
            &c,
            &[1.0, 9.0, 1.0, 9.0, 1.0, 9.0, 1.0, 9.0, 1.0, 9.0]
        ));
        let once = Confidence::default();
        assert!(satisfied(&once, &[5.0]));
    }
}
