//! cipher: one algorithm's cost on one core of this host, in this process
//! (no agent, no network): TLS records sealed, or signatures made or
//! checked (`crate::measure::cipherbench` measures; `run` folds it into a
//! result like any other, so a study's landscape and tables read it; the
//! result's two ends are this host).

pub mod metrics;
pub mod options;

use super::kind::{Kind, Needs};
use crate::model::spec::{self, TestSpec};
use crate::units::{fmt_bytes, fmt_rate, fmt_us};
use options::{CipherSpec, SECTION};
use std::time::Duration;

use crate::error::{usage, Error, Result};
use crate::measure::cipherbench;
use crate::model::result::{AgentInfo, Iteration, Pair, Status, Summary, TestResult};
use crate::model::sample::Confidence;

pub struct Cipher;

/// This kind's name in a spec, on the command line and in the registry.
pub const NAME: spec::Workload = spec::Workload::named("cipher");

impl Kind for Cipher {
    fn workload(&self) -> spec::Workload {
        NAME
    }

    fn help(&self) -> &'static str {
        "One core's cost of a cipher or a signature, in linerate's own process: no network, no agent"
    }
    fn facts(&self) -> super::kind::KindFacts {
        super::kind::KindFacts {
            section: super::kind::Section::Own(SECTION),
            crypto_alone: true,
            no_auto: Some("it runs in linerate's own process"),
            default_message: Some(options::DEFAULT_RECORD),
            ..super::kind::KindFacts::NONE
        }
    }
    fn rules(&self, spec: &TestSpec) -> std::result::Result<(), crate::model::error::Invalid> {
        CipherSpec::of(spec)?.validate()
    }
    fn needs(&self) -> Needs {
        Needs::NOTHING
    }
    fn describe(&self, spec: &TestSpec) -> String {
        let c = CipherSpec::of(spec).ok();
        let alg = c.as_ref().map_or("(no --cipher)", |c| c.algorithm.as_str());
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
    fn run_here(
        &self,
        spec: &TestSpec,
        confidence: Confidence,
        command: &[String],
        _place: &super::kind::Place,
    ) -> Option<Result<TestResult>> {
        Some(run(spec, confidence, command.to_vec()))
    }
    fn metrics(&self) -> &'static [crate::model::metric::Metric] {
        metrics::METRICS
    }

    fn sentence(&self, r: &TestResult) -> Option<String> {
        // One core's figures, not a network's.
        let c = r.iterations.iter().find_map(metrics::figures)?;
        Some(format!(
            "{:.0} ops/s{}, {:.2} µs CPU per op",
            c.ops_per_s,
            c.bytes_per_s
                .map(|b| format!(", {:.1} MB/s", b / 1e6))
                .unwrap_or_default(),
            c.cpu_us_per_op
        ))
    }

    fn report_lines(&self, _spec: &TestSpec, it: &Iteration) -> Vec<(&'static str, String)> {
        let Some(c) = metrics::figures(it) else {
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

/// Runs `spec`'s algorithm for its warm-up and window, `confidence.min`
/// times (at least once).
pub fn run(spec: &TestSpec, confidence: Confidence, command: Vec<String>) -> Result<TestResult> {
    let c = CipherSpec::of(spec).map_err(usage)?;
    if spec.crypto_hw == crate::measure::crypto::hw_masked() {
        return Err(Error::Failed(format!(
            "cipher {}: this process runs with the crypto extensions {}, but the point asks for them {}",
            c.algorithm,
            if spec.crypto_hw { "masked" } else { "on" },
            if spec.crypto_hw { "on" } else { "masked (crypto_hw = false)" }
        )));
    }
    let host = crate::measure::host::collect();
    let n = confidence.min.max(1);
    let mut iterations = Vec::new();
    for index in 0..n {
        if crate::engine::signals::test_interrupted() {
            break;
        }
        let f = cipherbench::measure(
            &c.algorithm,
            spec.message,
            Duration::from_secs_f64(spec.warmup_s),
            Duration::from_secs_f64(spec.duration_s),
        )?;
        let bytes = f.ops * f.record_bytes as u64;
        let secs = f.seconds.max(1e-9);
        iterations.push(Iteration {
            index,
            status: Status::Ok,
            duration_s: f.seconds,
            bytes,
            // Plaintext through the algorithm, and its operations, per
            // second: what the generic lines and the landscape read.
            throughput_bps: bytes as f64 * 8.0 / secs,
            transactions: f.ops,
            transactions_per_s: f.ops as f64 / secs,
            own: crate::model::own::Own::with(SECTION, &f),
            ..Default::default()
        });
    }
    if iterations.is_empty() {
        return Err(Error::Partial(
            "interrupted before anything was measured".into(),
        ));
    }
    let summary = Summary {
        workload: spec.workload.name().into(),
        duration_s: iterations.iter().map(|i| i.duration_s).sum(),
        bytes: iterations.iter().map(|i| i.bytes).sum(),
        transactions: iterations.iter().map(|i| i.transactions).sum(),
        throughput_bps: mean(iterations.iter().map(|i| i.throughput_bps)),
        transactions_per_s: mean(iterations.iter().map(|i| i.transactions_per_s)),
        iterations: iterations.len(),
        status: Status::Ok,
        ..Default::default()
    };
    Ok(TestResult {
        schema: crate::model::result::SCHEMA.into(),
        schema_version: crate::model::result::SCHEMA_VERSION,
        started_at: crate::units::rfc3339_now(),
        command,
        spec: spec.clone(),
        confidence_target: confidence,
        agent: AgentInfo {
            address: "none (measured in the controller's process)".into(),
            local: true,
            pid: None,
            ..Default::default()
        },
        environment: Pair {
            client: host.clone(),
            agent: host,
        },
        summary,
        iterations,
        ..Default::default()
    })
}

/// The mean of the iterations' figures (there is at least one).
fn mean(v: impl ExactSizeIterator<Item = f64>) -> f64 {
    let n = v.len().max(1) as f64;
    v.sum::<f64>() / n
}
