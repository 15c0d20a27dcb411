//! One point of work, the single pipeline behind `linerate run` and every
//! point of a study: the live progress line, the lab record around the
//! test (calibration, emulator counters), flows on the agent or a program
//! in the lab, and the clear-text twin of a TLS test.

use super::error::ControllerError;
use super::mix::{run_groups, Group};
use super::progress::Progress;
use super::run::{clear_baseline, run_test};
use super::target::Target;
use crate::error::{usage, Error, Result};
use crate::lab::record;
use crate::lab::state::LabState;
use crate::model::result::TestResult;
use crate::model::sample::Confidence;
use crate::model::spec::TestSpec;

/// What to run and how to show it.
pub struct Point<'a> {
    pub spec: &'a TestSpec,
    pub confidence: Confidence,
    /// The command line stored in the result.
    pub command: Vec<String>,
    /// The progress line's label.
    pub label: String,
    /// No progress line.
    pub quiet: bool,
    /// One JSON object per interval on stdout (and no progress line).
    pub json_stream: bool,
    /// After a TLS test, run the same test in clear text and keep its
    /// summary as the result's `baseline` (the cost of encryption).
    pub tls_baseline: bool,
    /// A composite's groups on one window (`spec` is then the
    /// composite's own); empty for any other kind.
    pub groups: &'a [Group],
}

impl Point<'_> {
    /// The same point over another spec and groups (the ones a lab set the
    /// point's NIC settings for).
    pub fn with<'b>(&self, spec: &'b TestSpec, groups: &'b [Group]) -> Point<'b> {
        Point {
            spec,
            confidence: self.confidence,
            command: self.command.clone(),
            label: self.label.clone(),
            quiet: self.quiet,
            json_stream: self.json_stream,
            tls_baseline: self.tls_baseline,
            groups,
        }
    }
}

/// The progress line shows transactions/s for everything but a continuous stream.
fn shows_transactions(spec: &TestSpec) -> bool {
    crate::workload::rate_column(spec) != crate::workload::RateColumn::None
}

/// Runs `p` on `target`, inside `lab` when given. Err only when nothing was
/// measured; a test that ended early is a result with status partial. (A
/// capacity search runs its steps through this: `search::run_or_search`.)
pub fn run_point(target: &mut Target, lab: Option<&LabState>, p: &Point) -> Result<TestResult> {
    let kind = crate::workload::kind_of(p.spec.workload);
    // A lab's emulator shares this host's CPUs: a receiver that polls
    // (`--rx-poll auto`) would take its time.
    let in_lab;
    let spec = match lab {
        Some(_) => {
            let mut s = p.spec.clone();
            crate::workload::receivers_sleep(&mut s);
            in_lab = s;
            &in_lab
        }
        None => p.spec,
    };
    // A kind that runs here (cipher, rpm) puts a server of its own in the
    // lab's server namespace; the lab's record goes around it.
    let place = match lab {
        Some(st) => crate::workload::kind::Place {
            server: st
                .server_addr
                .parse()
                .ok()
                .map(|ip| (ip, st.server_ns.clone())),
            enter: Some(|ns| crate::lab::netns::enter(ns).map_err(|e| e.to_string())),
        },
        None => crate::workload::kind::Place::default(),
    };
    // Several client agents (a rack lab's, a hosts file's): each runs it
    // toward one server on one window.
    if let Some(r) = super::clients::on_clients(target, lab, kind, spec, &place, &p.command) {
        return r;
    }
    let here = || kind.run_here(spec, p.confidence, &p.command, &place);
    match lab {
        Some(st) if kind.needs() == crate::workload::kind::Needs::NOTHING => {
            let mut out = None;
            let rec = record::around(st, || {
                out = here();
                Ok::<(), ControllerError>(())
            });
            if let Some(r) = out {
                let mut r = r?;
                if let Ok((_, rec)) = rec {
                    r.lab = Some(rec);
                }
                return Ok(r);
            }
        }
        _ => {
            if let Some(r) = here() {
                return r;
            }
        }
    }
    let program = kind.needs().lab;
    let lab_for_program = match (program, lab) {
        (true, None) => {
            return Err(usage(format!(
                "{} runs in a lab: linerate lab up NAME --rtt 50ms --rate 1gbit, then --lab NAME",
                spec.workload.name()
            )))
        }
        (true, Some(st)) => Some(st),
        (false, _) => None,
    };
    let info = target.info.clone();
    let conn = target.conn.as_mut();
    if !program && conn.is_none() {
        return Err(Error::Failed("no agent to run flows on".into()));
    }
    // A kind's lead before its window (rrul's idle phase and ramp).
    let expected_s = spec.duration_s + crate::workload::kind_of(spec.workload).lead_s(spec);
    let mut progress = Progress::new(
        &p.label,
        expected_s,
        p.quiet || p.json_stream,
        p.json_stream,
        shows_transactions(spec),
    );
    let bar = &mut progress;
    // A program in its lab, or flows on the agent: both checked above.
    let test = move || match (lab_for_program, conn) {
        (Some(st), _) => crate::program::run(spec, st, p.command.clone()).map_err(Into::into),
        // A composite: its groups on one window, then what it adds.
        (None, Some(conn)) if !p.groups.is_empty() => {
            let mixed = run_groups(conn, p.groups, p.confidence, info, p.command.clone(), bar)?;
            match kind.composite() {
                Some(c) => Ok(c.finish(spec, p.groups, mixed)?),
                None => Ok(mixed.result),
            }
        }
        (None, Some(conn)) => run_test(
            conn,
            spec,
            p.confidence,
            info,
            p.command.clone(),
            bar,
            &mut |_| {},
        ),
        (None, None) => Err(ControllerError::NoAgent),
    };
    let outcome = match lab {
        Some(st) => record::around(st, test)
            .map_err(ControllerError::Lab)
            .and_then(|(r, rec)| r.map(|r| (r, Some(rec)))),
        None => test().map(|r| (r, None)),
    };
    progress.finish();
    let (mut result, rec) = outcome?;
    result.lab = rec;
    crate::lab::tunnel::judge_bytes(&mut result);
    if spec.tls.is_some()
        && p.groups.is_empty()
        && p.tls_baseline
        // Another tool's perf server speaks no TLS over TCP: no twin.
        && !target.conn.as_ref().is_some_and(|d| d.drives_foreign())
        && result.summary.status.is_ok()
        && !crate::engine::signals::test_interrupted()
    {
        let mut bar = Progress::new(
            "clear baseline",
            spec.duration_s,
            p.quiet || p.json_stream,
            false,
            shows_transactions(spec),
        );
        let info = target.info.clone();
        if let Some(conn) = target.conn.as_mut() {
            match clear_baseline(conn, spec, info, &mut bar) {
                Ok(b) => result.baseline = Some(b),
                Err(e) => eprintln!("linerate: note: the clear baseline did not run: {e}"),
            }
        }
        bar.finish();
    }
    Ok(result)
}
