//! A test kind: what every kind of test says about itself, whether it is
//! flows the engine runs (a `Plugin`), a program timed in a lab (exec,
//! scp), a measurement in this process (cipher) or a composite of groups
//! on one window (mix, rrul). The controller, the study runner and the
//! report ask the kind; none of them names one.
//!
//! Every flow plug-in is a kind through the blanket impl below; the other
//! kinds implement this trait in their own file here.

use super::group::{Group, GroupError, Mixed};
use super::{Plugin, RateColumn};
use crate::model::error::Invalid;
use crate::model::options::TestOptions;
use crate::model::points::{KeyPoint, PointView};
use crate::model::result::{Iteration, TestResult};
use crate::model::sample::Confidence;
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
    /// A program: a lab, no agent.
    pub const LAB: Needs = Needs {
        agent: false,
        lab: true,
    };
    /// A measurement of this host: nothing.
    pub const NOTHING: Needs = Needs {
        agent: false,
        lab: false,
    };
}

pub use crate::model::kind::{KindFacts, Section};

/// The first option `o` sets that `kind` does not take, if any (its flag).
/// Not checked for a study's `[test]`, whose keys are shared by cases of
/// several kinds.
pub fn not_taken(o: &TestOptions, kind: &dyn Kind) -> Option<&'static str> {
    let t = kind.facts();
    if t.program {
        return None;
    }
    [
        (o.stream.direction.is_some() && !t.bulk, "--direction"),
        (o.stream.message.is_some() && !t.bulk, "--message"),
        (o.exchange.request.is_some() && !t.exchange, "--request"),
        (o.exchange.response.is_some() && !t.exchange, "--response"),
        (o.stream.bytes.is_some() && !t.transfer, "--bytes"),
        (o.stream.per.is_some() && !t.transfer, "--per"),
        (o.stream.reply.is_some() && !t.transfer, "--reply"),
        (o.exchange.timeout.is_some() && !t.timeout, "--timeout"),
    ]
    .into_iter()
    .find_map(|(set, name)| set.then_some(name))
}

pub trait Kind: Sync {
    /// The spec's name for it.
    fn workload(&self) -> spec::Workload;
    /// What it is, in one line: `linerate run --help` lists it by its name.
    fn help(&self) -> &'static str;
    /// Which kind-specific options it takes (`not_taken` refuses the rest).
    fn facts(&self) -> KindFacts {
        KindFacts::default()
    }
    /// Its own rules on a spec, beyond what it takes (`workload::rules`)
    /// and the spec's own (`TestSpec::validate`).
    fn rules(&self, _spec: &TestSpec) -> Result<(), Invalid> {
        Ok(())
    }
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
    /// Its own metrics (`model::metric`), beside the common ones the
    /// report keeps: what its own figures (`Iteration::own`) hold.
    fn metrics(&self) -> &'static [crate::model::metric::Metric] {
        &[]
    }

    /// Seconds it runs before its window (rrul: its idle phase and its
    /// streams' ramp), for the progress bar's length.
    fn lead_s(&self, _spec: &TestSpec) -> f64 {
        0.0
    }

    /// Its own charts of a study's points (points of other kinds are
    /// among them, with none of its figures), drawn in the report after
    /// the study's plots, in files named after the kind.
    fn charts(&self, _points: &[PointView]) -> Vec<crate::model::chart::Chart> {
        Vec::new()
    }

    /// Its own key points over a study's points (its rules on its figures;
    /// points of other kinds are among them), listed in the report's Key
    /// Points after the common rules on latency.
    fn key_points(&self, _points: &[PointView]) -> Vec<KeyPoint> {
        Vec::new()
    }

    /// Its own figures (`own`: an iteration's, or the summary's over every
    /// iteration) as text, in place of the common interval table and lines
    /// of a result shown as text; None: the common ones. `intervals`: the
    /// user asked for the per-interval lines.
    fn text(&self, _own: &crate::model::own::Own, _intervals: bool) -> Option<String> {
        None
    }

    /// Its own figures of a summary in a few words, for a group's line
    /// beside the common ones (None: it has none).
    fn words(&self, _s: &crate::model::result::Summary) -> Option<String> {
        None
    }

    /// A point's figures in one sentence for a study's progress, when the
    /// kind's are not the main metric's (None: the main metric's).
    fn sentence(&self, _r: &crate::model::result::TestResult) -> Option<String> {
        None
    }

    fn report_lines(&self, _spec: &TestSpec, _it: &Iteration) -> Vec<(&'static str, String)> {
        Vec::new()
    }
    /// Its clear-text twin, the baseline of its TLS cost.
    fn clear_twin(&self) -> spec::Workload {
        self.workload()
    }
    /// Whether that twin keeps the test's TLS (see `Plugin::twin_keeps_tls`).
    fn twin_keeps_tls(&self) -> bool {
        false
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
    /// Its groups, when it is a composite: flow groups the controller runs
    /// on one window (`controller::mix`).
    fn composite(&self) -> Option<&dyn Composite> {
        None
    }
    /// What it runs when it is a program timed in a lab (exec, scp).
    fn program(&self) -> Option<&dyn Program> {
        None
    }
    /// Runs it here, in this process, when it is a measurement of this
    /// host or a client of its own (cipher, rpm) and not flows, a program
    /// or a composite; None: it runs elsewhere. `place`: where a server it
    /// starts for itself goes.
    fn run_here(
        &self,
        _spec: &TestSpec,
        _confidence: Confidence,
        _command: &[String],
        _place: &Place,
    ) -> Option<crate::error::Result<TestResult>> {
        None
    }
    /// When it runs here: how several client agents run it at once toward
    /// one server, on one window (`--lab` of a rack, `--hosts`); None: it
    /// runs in this process only.
    fn clients(&self) -> Option<&dyn Clients> {
        None
    }
}

/// A kind that runs in its client's process, run by several client agents
/// at once (each runs `Kind::run_here` on the spec `server` gives) toward
/// one server: the server they share, and one result from theirs.
pub trait Clients: Sync {
    /// The server the clients share, started here where `place` says (a
    /// lab's server namespace) or the one the spec names, and the spec
    /// every client runs: its target filled in, whatever a client host
    /// needs to trust it carried in the spec (no file of this host).
    fn server(&self, spec: &TestSpec, place: &Place) -> crate::error::Result<SharedServer>;
    /// One result from every client's own (`runs`, in the fleet's order),
    /// for the test `spec` asked; `server` is what `server` returned, still
    /// up (the clients are done).
    fn merge(
        &self,
        spec: &TestSpec,
        runs: &[ClientRun],
        server: &SharedServer,
    ) -> Result<TestResult, String>;
}

/// The server of a test several clients run at once.
pub struct SharedServer {
    /// What every client runs.
    pub spec: TestSpec,
    /// Where the clients reach it (for the result's agent address).
    pub address: String,
    /// Keeps a server this process started up until dropped (after
    /// `merge`, which may read it: the server's CPU).
    pub guard: Option<Box<dyn std::any::Any + Send>>,
}

/// One client's run of a test several clients ran at once.
pub struct ClientRun {
    /// Its host's name (the hosts file's, or the rack's c1..cN).
    pub name: String,
    pub result: TestResult,
}

/// Where a kind that runs here puts a server it starts for itself: on
/// loopback, or in a lab's server namespace at its address (this process
/// is then in the client namespace already).
#[derive(Clone, Debug, Default)]
pub struct Place {
    /// The lab's server: its address and its network namespace.
    pub server: Option<(std::net::IpAddr, String)>,
    /// Moves the calling thread into a namespace by name (the lab floor's,
    /// which this floor cannot name).
    pub enter: Option<EnterNamespace>,
}

/// Moves the calling thread into the network namespace of that name.
pub type EnterNamespace = fn(&str) -> Result<(), String>;

/// A program timed in a lab (`crate::program` runs it): what it asks of
/// the lab beyond the spec's command.
pub trait Program: Sync {
    /// The receive window the server is to offer, set through the server
    /// namespace's tcp_rmem before its sshd starts (scp's `--rcvbuf`: an
    /// unmodified server's window); None: tcp_rmem stays as it is.
    fn server_window(&self, _spec: &TestSpec) -> Option<u64> {
        None
    }
    /// Its own command line, given the lab sshd's config and the payload
    /// file; None: the spec's command (`--exec`, its placeholders filled).
    fn command(
        &self,
        _spec: &TestSpec,
        _sshd_config: Option<&std::path::Path>,
        _file: Option<&std::path::Path>,
    ) -> Option<Vec<String>> {
        None
    }
}

/// A test made of groups of flows on one window (mix, rrul): where its
/// groups come from and what it adds to their result.
pub trait Composite: Sync {
    /// Whether a user writes its groups (`linerate run mix 'G1' 'G2'`, a
    /// study's `groups = [...]`); else it builds its own from its options.
    fn takes_groups(&self) -> bool;
    /// Its groups from `opts`, each checked as a group (`group::check`).
    /// A user's group is built by `build` (its options over the common
    /// ones, with the caller's own checks); `local`: the agent is this
    /// host's.
    fn groups(
        &self,
        opts: &TestOptions,
        local: bool,
        build: &mut dyn FnMut(TestOptions) -> Result<TestSpec, String>,
    ) -> Result<Vec<Group>, GroupError>;
    /// The spec its result stores as its own.
    fn spec(
        &self,
        opts: &TestOptions,
        local: bool,
        groups: &[Group],
    ) -> Result<TestSpec, GroupError>;
    /// Its result from its groups' on one window (`mixed`): the groups'
    /// as they are, or with what it adds (rrul: latency per phase).
    fn finish(
        &self,
        _spec: &TestSpec,
        _groups: &[Group],
        mixed: Mixed,
    ) -> Result<TestResult, GroupError> {
        Ok(mixed.result)
    }
}

impl<T: Plugin> Kind for T {
    fn workload(&self) -> spec::Workload {
        Plugin::kind(self)
    }
    fn help(&self) -> &'static str {
        Plugin::help(self)
    }
    fn facts(&self) -> KindFacts {
        Plugin::facts(self)
    }
    fn rules(&self, spec: &TestSpec) -> Result<(), Invalid> {
        Plugin::rules(self, spec)
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
    fn twin_keeps_tls(&self) -> bool {
        Plugin::twin_keeps_tls(self)
    }
    fn flows(&self) -> Option<&dyn Plugin> {
        Some(self)
    }
    fn metrics(&self) -> &'static [crate::model::metric::Metric] {
        Plugin::metrics(self)
    }
    fn words(&self, s: &crate::model::result::Summary) -> Option<String> {
        Plugin::words(self, s)
    }
    fn key_points(&self, points: &[PointView]) -> Vec<KeyPoint> {
        Plugin::key_points(self, points)
    }
}
