//! `RunHere`: a kind that runs in its client's process (rpm) run on this
//! agent as one of several clients toward one server, from the instant the
//! controller scheduled in this agent's clock. The kind's own `run_here`
//! measures; this agent sends back its result whole (`RanHere`).
//!
//! The run is bounded by the spec's duration (the kind's own limit), so a
//! controller that went away costs this agent at most that; sessions start
//! in the agent's data namespace (`--data-netns`), so its sockets do too.

use std::time::Duration;

use super::{send_error, Shared, Wire};
use crate::control::clock;
use crate::control::protocol::{ErrorCode, Msg};
use crate::model::sample::Confidence;
use crate::model::spec::TestSpec;
use crate::workload::kind::Place;

/// Runs `spec` here from `at_ns` (None: now) and answers the controller;
/// Err: why it did not run or failed (the controller was told).
pub(super) fn run_here(
    spec: TestSpec,
    at_ns: Option<u64>,
    stream: &mut Wire,
    sh: &Shared,
) -> Result<(), String> {
    let refuse = |stream: &mut Wire, code, why: String| {
        let _ = send_error(stream, code, &why);
        Err(why)
    };
    let kind = crate::workload::kind_of(spec.workload);
    if let Err(e) = crate::control::check(&spec) {
        return refuse(stream, ErrorCode::BadRequest, e.to_string());
    }
    if kind.clients().is_none() {
        return refuse(
            stream,
            ErrorCode::BadRequest,
            format!(
                "{} does not run on a client agent: it runs in the controller's process",
                spec.workload.name()
            ),
        );
    }
    if let Some(why) = super::test::too_long(&spec, sh) {
        return refuse(stream, ErrorCode::BadRequest, why);
    }
    let _slot = match super::test::take_slot(sh) {
        Ok(s) => s,
        Err(why) => return refuse(stream, ErrorCode::Busy, why),
    };
    let mut late_ns = 0;
    if let Some(at) = at_ns {
        // Never longer than the controller's margin allows a schedule to
        // be ahead: a wrong clock must not park the agent.
        let wait = Duration::from_nanos(at.saturating_sub(clock::mono_ns()));
        std::thread::sleep(wait.min(Duration::from_secs(10)));
        late_ns = clock::mono_ns().saturating_sub(at);
    }
    let outcome = kind.run_here(&spec, Confidence::default(), &[], &Place::default());
    match outcome {
        Some(Ok(result)) => {
            let m = Msg::RanHere {
                result: Box::new(result),
                late_ns,
            };
            stream.send(&m).map_err(|e| e.to_string())
        }
        Some(Err(e)) => refuse(stream, ErrorCode::SetupFailed, e.to_string()),
        None => refuse(
            stream,
            ErrorCode::BadRequest,
            format!("{} does not run here", spec.workload.name()),
        ),
    }
}
