//! The default main job: a quick loopback study of about a minute (stream 1
//! and 4 flows, rr 1/1 and 200/1000, crr 64/8192) with CPU and service
//! demand on both ends, against one embedded local agent.

use std::fmt::Write;

use crate::cli::{open_target, write_json, ConnectArgs, Failure, QuickArgs, EXIT_PARTIAL};
use crate::measure::stats::Confidence;
use crate::report::progress::Progress;
use crate::result::TestResult;
use crate::spec::{TestSpec, Workload};
use crate::units::{fmt_bps, fmt_rate, fmt_us};

/// The tests of the quick study, in order: (label, spec).
pub fn tests(duration_s: f64) -> Vec<(&'static str, TestSpec)> {
    let base = TestSpec {
        duration_s,
        warmup_s: 1.0,
        interval_s: 1.0,
        ..Default::default()
    };
    vec![
        ("stream 1 flow", TestSpec { ..base.clone() }),
        (
            "stream 4 flows",
            TestSpec {
                flows: 4,
                threads: 2,
                agent_threads: 2,
                ..base.clone()
            },
        ),
        (
            "rr 1/1",
            TestSpec {
                workload: Workload::Rr,
                nodelay: true,
                ..base.clone()
            },
        ),
        (
            "rr 200/1000",
            TestSpec {
                workload: Workload::Rr,
                request: 200,
                response: 1000,
                nodelay: true,
                ..base.clone()
            },
        ),
        (
            "crr 64/8192",
            TestSpec {
                workload: Workload::Crr,
                request: 64,
                response: 8192,
                nodelay: true,
                ..base
            },
        ),
    ]
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map(f).unwrap_or_else(|| "-".into())
}

pub fn table(results: &[(&str, TestResult)]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<16} {:>14} {:>10} {:>10} {:>10} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10}",
        "test",
        "throughput",
        "trans/s",
        "p50",
        "p99",
        "cli cpu",
        "agt cpu",
        "cli µs/KB",
        "agt µs/KB",
        "cli µs/tx",
        "agt µs/tx"
    );
    for (label, r) in results {
        let s = &r.summary;
        let is_tx = r.spec.workload != Workload::Stream;
        let _ = writeln!(
            o,
            "{:<16} {:>14} {:>10} {:>10} {:>10} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10}",
            label,
            fmt_bps(s.throughput_bps),
            if is_tx {
                fmt_rate(s.transactions_per_s)
            } else {
                "-".into()
            },
            opt(s.latency_us.as_ref().map(|l| l.p50), fmt_us),
            opt(s.latency_us.as_ref().map(|l| l.p99), fmt_us),
            opt(s.cpu.client.process_util_pct, |v| format!("{v:.0}%")),
            opt(s.cpu.agent.process_util_pct, |v| format!("{v:.0}%")),
            opt(s.cpu.client.us_per_kb, |v| format!("{v:.3}")),
            opt(s.cpu.agent.us_per_kb, |v| format!("{v:.3}")),
            opt(s.cpu.client.us_per_tx.filter(|_| is_tx), |v| format!(
                "{v:.2}"
            )),
            opt(s.cpu.agent.us_per_tx.filter(|_| is_tx), |v| format!(
                "{v:.2}"
            )),
        );
    }
    o
}

pub fn run(args: QuickArgs) -> Result<(), Failure> {
    let tests = tests(args.duration.as_secs_f64());
    let mut target = open_target(&ConnectArgs {
        agent: None,
        token_file: None,
        ipv6: false,
    })?;
    let host = crate::env::collect();
    println!(
        "linerate quick study on loopback: {} tests of {:.0} s; {} ({} CPUs), kernel {}",
        tests.len(),
        args.duration.as_secs_f64(),
        host.cpu_model,
        host.cpus,
        host.kernel
    );
    println!("cpu = process CPU of each end as % of all cores; µs/KB and µs/tx = that CPU per KiB moved and per transaction\n");
    let mut results: Vec<(&str, TestResult)> = Vec::new();
    let mut partial = None;
    for (label, spec) in &tests {
        let mut progress = Progress::new(
            label,
            spec.duration_s,
            args.quiet,
            false,
            spec.workload != Workload::Stream,
        );
        let r = crate::run::run_test(
            &mut target.conn,
            spec,
            Confidence::default(),
            target.info.clone(),
            vec!["linerate".into(), "quick".into()],
            &mut progress,
            &mut |_| {},
        );
        progress.finish();
        match r {
            Ok(r) => {
                if r.summary.status != "ok" {
                    partial = r.iterations.iter().find_map(|i| i.error.clone());
                }
                results.push((label, r));
            }
            Err(e) => {
                partial = Some(format!("{label}: {e}"));
                break;
            }
        }
        if partial.is_some() {
            break;
        }
    }
    target.conn.bye();
    print!("{}", table(&results));
    if let Some(path) = &args.json {
        let doc = serde_json::json!({
            "study": "quick",
            "results": results.iter().map(|(l, r)| serde_json::json!({"label": l, "result": r})).collect::<Vec<_>>(),
        });
        write_json(path, &doc)?;
    }
    match partial {
        Some(e) => Err(Failure {
            code: EXIT_PARTIAL,
            message: e,
        }),
        None => Ok(()),
    }
}
