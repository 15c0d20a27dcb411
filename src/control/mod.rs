//! The control channel both processes speak: the framed, authenticated
//! protocol between controller and agent, clock-offset estimation, and the
//! checks a spec must pass on either end. The agent's side lives in
//! `crate::agent`, the controller's in `crate::controller`; neither imports
//! the other, so what crosses between them is only what is here.
pub mod clock;
pub mod error;
pub mod protocol;

pub use error::ControlError;

use crate::model::spec::TestSpec;

/// Every check a spec must pass before it runs, where it is built (the
/// command line, a study's points) and where it is received (the agent):
/// the spec's own, its workload's, and whether the TLS library offers what
/// it asks for.
pub fn check(spec: &TestSpec) -> Result<(), ControlError> {
    Ok(crate::workload::check(spec)?)
}
