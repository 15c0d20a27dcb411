//! A stretch of a composite test's common timeline (rrul's idle, ramp and
//! loaded phases; a mix's groups' windows): what the controller cuts the
//! probes' histograms by and the report draws.

use serde::{Deserialize, Serialize};

/// A stretch of the common timeline.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Phase {
    /// `idle`, `ramp` or `loaded`.
    pub name: String,
    /// Seconds since the common start.
    pub start_s: f64,
    pub end_s: f64,
}
