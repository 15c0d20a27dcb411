//! cipher's spec section: the algorithm measured, named by `--cipher`
//! (the TLS options' key, which for this kind names what is measured, not
//! what a connection negotiates). No flags of its own: its section only
//! builds the spec's `cipher` and writes nothing back beyond `--cipher`.

use clap::Args;
use serde::{Deserialize, Serialize};

use crate::measure::cipherbench::ALGORITHMS;
use crate::model::error::Invalid;
use crate::model::kind::{KindFacts, Section};
use crate::model::options::{KindOptions, OwnSection, TestOptions};

inventory::submit!(OwnSection::of::<CipherOptions>());

/// The spec's section (`spec.own`) and the iterations' (their figures).
pub const SECTION: &str = "cipher";

/// The record size when none is given: TLS's largest record.
pub const DEFAULT_RECORD: usize = 16384;

/// The spec's part for a `cipher` point.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct CipherSpec {
    /// One of `ALGORITHMS`.
    pub algorithm: String,
}

impl CipherSpec {
    pub fn validate(&self) -> Result<(), Invalid> {
        if !ALGORITHMS.contains(&self.algorithm.as_str()) {
            return Err(format!(
                "cipher '{}': the cipher workload measures {}",
                self.algorithm,
                ALGORITHMS.join(", ")
            )
            .into());
        }
        Ok(())
    }
}

impl CipherSpec {
    /// A spec's cipher section.
    pub fn of(spec: &crate::model::spec::TestSpec) -> Result<CipherSpec, String> {
        spec.own
            .need(SECTION, "cipher needs its algorithm (--cipher)")
    }
}

/// Its options section: none of its own (the algorithm is `--cipher`).
#[derive(Args, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct CipherOptions {}

impl KindOptions for CipherOptions {
    const KEY: &'static str = SECTION;
    type Spec = CipherSpec;

    fn spec(&self, all: &TestOptions, facts: &KindFacts) -> Result<Option<CipherSpec>, Invalid> {
        Ok(
            (facts.section == Section::Own(SECTION)).then(|| CipherSpec {
                algorithm: all
                    .tls
                    .cipher
                    .clone()
                    .unwrap_or_else(|| "aes256-gcm".into()),
            }),
        )
    }

    /// `--cipher` is written back by the TLS options' flags.
    fn flags(_: &CipherSpec) -> Vec<String> {
        Vec::new()
    }
}
