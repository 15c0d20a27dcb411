//! A test kind: what every kind of test says about itself, whether it is
//! flows the engine runs (a `Plugin`), a program timed in a lab (exec,
//! scp), a measurement in this process (cipher) or a composite of groups
//! on one window (mix, rrul). The controller, the study runner and the
//! report ask the kind; none of them names one.
//!
//! Every flow plug-in is a kind through the blanket impl below; the other
//! kinds implement this trait in their own file here.

use super::{Plugin, RateColumn};
use crate::model::result::Iteration;
use crate::model::spec::{self, Figures, MainMetric, TestSpec};

/// What a kind needs before it can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Needs {
    /// An agent at the other end (flows; a composite's groups).
    pub agent: bool,
    /// A lab: a program runs in its client namespace.
    pub lab: bool,
}

impl Needs {
    /// Flows: an agent, anywhere.
    pub const AGENT: Needs = Needs {
        agent: true,
        lab: false,
    };
}

pub trait Kind: Sync {
    /// The spec's name for it.
    fn workload(&self) -> spec::Workload;
    /// What it needs to run.
    fn needs(&self) -> Needs {
        Needs::AGENT
    }
    /// What it runs, in words: the head of a result's first line.
    fn describe(&self, spec: &TestSpec) -> String;
    /// Whether `describe` is the whole line: a program's and a local
    /// measurement's have no flows or window, rrul says its phases.
    fn describes_all(&self) -> bool {
        false
    }
    /// What its results carry.
    fn figures(&self, _spec: &TestSpec) -> Figures {
        Figures::default()
    }
    /// Its headline figure.
    fn main_metric(&self, _spec: &TestSpec) -> MainMetric {
        MainMetric::Throughput
    }
    /// What a result's rate column shows.
    fn rate_column(&self, _spec: &TestSpec) -> RateColumn {
        RateColumn::None
    }
    /// Lines of its own in a result, after the rate: (label, text).
    fn report_lines(&self, _spec: &TestSpec, _it: &Iteration) -> Vec<(&'static str, String)> {
        Vec::new()
    }
    /// Its clear-text twin, the baseline of its TLS cost.
    fn clear_twin(&self) -> spec::Workload {
        self.workload()
    }
    /// Its flows, when the engine runs it.
    fn flows(&self) -> Option<&dyn Plugin> {
        None
    }
    /// A composite that is one landscape row (its figures are the whole
    /// timeline's), not a row per group.
    fn one_row(&self) -> bool {
        false
    }
    /// Whether `--search` steps through it (a composite with its own
    /// timeline does not).
    fn searches(&self) -> bool {
        true
    }
}

impl<T: Plugin> Kind for T {
    fn workload(&self) -> spec::Workload {
        Plugin::kind(self)
    }
    fn describe(&self, spec: &TestSpec) -> String {
        Plugin::describe(self, spec)
    }
    fn figures(&self, spec: &TestSpec) -> Figures {
        Plugin::figures(self, spec)
    }
    fn main_metric(&self, spec: &TestSpec) -> MainMetric {
        Plugin::main_metric(self, spec)
    }
    fn rate_column(&self, spec: &TestSpec) -> RateColumn {
        Plugin::rate_column(self, spec)
    }
    fn report_lines(&self, spec: &TestSpec, it: &Iteration) -> Vec<(&'static str, String)> {
        Plugin::report_lines(self, spec, it)
    }
    fn clear_twin(&self) -> spec::Workload {
        Plugin::clear_twin(self)
    }
    fn flows(&self) -> Option<&dyn Plugin> {
        Some(self)
    }
}
