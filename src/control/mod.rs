//! Control: the protocol between controller and agent, the agent (`linerate
//! serve`), the controller's end, where a test runs (`target`), and the one
//! pipeline that runs a point (`point::run_point`) for `linerate run` and
//! for every point of a study.
pub mod admission;
pub mod agent;
pub mod clock;
pub mod cluster;
pub mod controller;
pub mod fleet;
pub mod lobby;
pub mod local;
pub mod point;
pub mod progress;
pub mod protocol;
pub mod run;
pub mod sysctl;
pub mod target;

use crate::model::spec::TestSpec;

/// Every check a spec must pass before it runs, where it is built (the
/// command line, a study's points) and where it is received (the agent):
/// the spec's own, its workload's, and whether the TLS library offers what
/// it asks for.
pub fn check(spec: &TestSpec) -> Result<(), String> {
    spec.validate()?;
    crate::workload::validate(spec)?;
    if let Some(t) = &spec.tls {
        crate::engine::tls::check(t)?;
    }
    Ok(())
}
