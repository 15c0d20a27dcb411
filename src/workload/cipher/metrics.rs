//! cipher's metrics: one core's figures, in linerate's process.

use super::options::SECTION;
use crate::measure::cipherbench::CipherFigures;
use crate::model::metric::{Metric, Unit};
use crate::model::result::Iteration;

/// An iteration's cipher figures.
pub fn figures(it: &Iteration) -> Option<CipherFigures> {
    it.own.get(SECTION)
}

pub const METRICS: &[Metric] = &[
    Metric {
        key: "cipher_ops_per_s",
        title: "Cipher operations (records or signatures)",
        unit: Unit::PerSecond,
        higher_is_better: true,
        main_of: None,
        get: |_, it| figures(it).as_ref().map(|c| c.ops_per_s),
    },
    Metric {
        key: "cipher_mb_per_s",
        title: "Cipher speed on one core",
        unit: Unit::MegabytesPerSecond,
        higher_is_better: true,
        main_of: None,
        get: |_, it| figures(it).as_ref().and_then(|c| c.bytes_per_s),
    },
    Metric {
        key: "cipher_us_per_kb",
        title: "Cipher CPU per KB",
        unit: Unit::MicrosPerKb,
        higher_is_better: false,
        main_of: None,
        get: |_, it| figures(it).as_ref().and_then(|c| c.cpu_us_per_kb),
    },
    Metric {
        key: "cipher_us_per_op",
        title: "Cipher CPU per operation",
        unit: Unit::Micros,
        higher_is_better: false,
        main_of: None,
        get: |_, it| figures(it).as_ref().map(|c| c.cpu_us_per_op),
    },
];
