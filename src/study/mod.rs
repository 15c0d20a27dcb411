//! Studies: declarative files of sweeps over tests, run into a results
//! folder that reports are drawn from.
pub mod available;
pub mod builtin;
pub mod error;
pub mod file;
pub mod folder;
pub mod labnic;
pub mod overrides;
pub mod runner;
#[cfg(test)]
mod seedrows;
pub mod sweep;

pub use error::StudyError;
