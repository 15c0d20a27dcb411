//! cipher: one algorithm's cost on one core of this host, in this process
//! (no agent, no network): TLS records sealed, or signatures made or
//! checked (`crate::measure::cipherbench` measures, the controller folds).

use super::kind::{Kind, Needs};
use crate::model::result::Iteration;
use crate::model::spec::{self, TestSpec};
use crate::units::{fmt_bytes, fmt_rate, fmt_us};

pub struct Cipher;

impl Kind for Cipher {
    fn workload(&self) -> spec::Workload {
        spec::Workload::Cipher
    }
    fn needs(&self) -> Needs {
        Needs {
            agent: false,
            lab: false,
        }
    }
    fn describe(&self, spec: &TestSpec) -> String {
        let alg = spec
            .cipher
            .as_ref()
            .map_or("(no --cipher)", |c| c.algorithm.as_str());
        format!(
            "cipher {alg}, {} per operation, on one core of this host (in linerate's process, no network): {} s after {} s warm-up",
            fmt_bytes(spec.message as u64),
            spec.duration_s,
            spec.warmup_s
        )
    }
    fn describes_all(&self) -> bool {
        true
    }
    fn report_lines(&self, _spec: &TestSpec, it: &Iteration) -> Vec<(&'static str, String)> {
        let Some(c) = &it.cipher else {
            return Vec::new();
        };
        let mut speed = format!("operations at {}", fmt_rate(c.ops_per_s));
        if let Some(b) = c.bytes_per_s {
            speed += &format!(", {:.1} MB/s", b / 1e6);
        }
        let mut cpu = format!("{} per operation", fmt_us(c.cpu_us_per_op));
        if let Some(kb) = c.cpu_us_per_kb {
            cpu += &format!(", {kb:.3} µs per KB");
        }
        vec![
            (
                "cipher",
                format!(
                    "{} with {}{}: {speed}",
                    c.algorithm,
                    c.library,
                    if c.hw_masked {
                        " (crypto extensions masked)"
                    } else {
                        ""
                    }
                ),
            ),
            ("cpu cipher", cpu),
        ]
    }
}
