//! What a flow kind adds to the common figures and knows of its server:
//! its own figures, folded over flows and iterations by the kind (the
//! controller keeps the folder for one test and hands it each iteration),
//! and the server program it loads in the agent's place, for the sentences
//! and shares that name it. The common fold (`measure::fold`) knows
//! neither.

use crate::model::result::{Iteration, Summary};
use crate::model::sample::{KvPrefill, ServiceWindow};

/// What an iteration brought beside its samples and flows that a kind's
/// fold may read.
#[derive(Clone, Copy, Debug, Default)]
pub struct Beside<'a> {
    /// The key space the clients set before the window, as the agents
    /// reported it.
    pub prefill: Option<&'a KvPrefill>,
    /// The server program's own counts over the window (the agent's, or
    /// the client's probe of a target).
    pub service: Option<&'a ServiceWindow>,
}

/// One test's own figures, folded as its iterations arrive.
pub trait OwnFold: Send {
    /// Adds the kind's figures to `it` (its own section), from its flow
    /// reports and what came `beside` them; what it merged it keeps for
    /// the summary, and may drop from the flow reports.
    fn iteration(&mut self, it: &mut Iteration, beside: Beside);
    /// Adds the kind's figures over every iteration to `s`.
    fn summary(&self, its: &[Iteration], s: &mut Summary);
}

/// The server program a kind loads in the agent's place.
#[derive(Clone, Debug, PartialEq)]
pub struct Served {
    /// Its name in a sentence ("memcached").
    pub name: &'static str,
    /// The command line the agent started it with; None: one the user
    /// runs (a target).
    pub command: Option<String>,
    /// The worker threads it runs with (its command's, or its default).
    pub threads: usize,
    /// Cores it kept busy over the window, where measured.
    pub busy_cores: Option<f64>,
}
