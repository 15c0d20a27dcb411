//! Workloads: what flows do, one file each, as plug-ins of the engine.
//!
//! A workload turns the connections that control made for one side into
//! that side's flows (state machines the engine's workers drive), says what
//! its headline metric is, and which options apply to it. The engine never
//! names a workload: it is handed `Vec<Box<dyn Flow>>` (neper's `neper_fn`
//! table is the model: a workload is a handful of functions over shared
//! flow, worker and histogram code).
//!
//! Every kind of test is a `Kind` (kind.rs): flow workloads through their
//! `Plugin`, and the programs (exec, scp), the local measurement (cipher)
//! and the composites (mix, rrul) in files of their own here. Adding a
//! flow workload: a file here implementing `Plugin`, one line in
//! `KINDS`, and a variant of `model::spec::Workload` (the name a spec
//! carries; the plug-in is what runs it).

use mio::net::{TcpListener, TcpStream};
use std::net::SocketAddr;
use std::sync::Arc;

use crate::engine::flow::{Flow, FlowBase};
use crate::engine::side::ServiceProbe;
use crate::engine::tls::{Role, TlsConn};
use crate::kv::service::Service;
use crate::model::result::{Iteration, Summary};
use crate::model::sample::PeerClock;
use crate::model::spec::{self, Direction, Figures, MainMetric, TestSpec};

pub use conns::Pattern;
pub use error::{PrefillError, SpecError, WorkloadError};
pub use kind::{Composite, Kind, Needs, Program};
pub use own::{Beside, OwnFold, Served};

pub mod cipher;
pub mod conn;
pub mod conns;
pub mod crr;
pub mod error;
pub mod exec;
pub mod group;
pub mod http;
pub mod kind;
pub mod local_server;
pub mod memcache;
pub mod mix;
pub mod own;
pub mod per_conn;
pub mod quic;
pub mod rpm;
pub mod rr;
pub mod rrul;
pub mod rules;
pub mod scp;
pub mod stream;
pub mod tls_handshake;
pub mod udp_rr;
pub mod udp_stream;
pub mod unknown;

/// The connections control made for one side before the window opens.
pub struct Conns {
    /// The test's cookie: per-transaction connections announce themselves with it.
    pub cookie: u64,
    /// This side's TLS settings (shared by connections made during the test).
    pub tls: Option<Arc<Role>>,
    /// Persistent flows, established: (flow id, socket, TLS session).
    pub established: Vec<(u32, TcpStream, Option<TlsConn>)>,
    /// Per-transaction client: each flow's id and where it connects.
    pub connect_to: Vec<(u32, SocketAddr)>,
    /// Per-transaction agent: one listener per worker (SO_REUSEPORT).
    pub listeners: Vec<TcpListener>,
    /// UDP flows: (flow id, a socket connected to the other end).
    pub udp: Vec<(u32, std::net::UdpSocket)>,
    /// A client's: the server's clock against this side's, where the
    /// controller knows it (one-way delays); None: unknown, never guessed.
    pub peer_clock: Option<PeerClock>,
}

impl Conns {
    /// No connections yet: control adds what the workload's kind needs.
    pub fn new(cookie: u64, tls: Option<Arc<Role>>) -> Conns {
        Conns {
            cookie,
            tls,
            established: Vec::new(),
            connect_to: Vec::new(),
            listeners: Vec::new(),
            udp: Vec::new(),
            peer_clock: None,
        }
    }
}

/// A flow workload: the plug-in that runs a `spec::Workload`.
pub trait Plugin: Sync {
    /// The spec's name for it.
    fn kind(&self) -> spec::Workload;
    /// What it is, in one line (`linerate run --help`).
    fn help(&self) -> &'static str;
    /// How its connections are made (see `conns`).
    fn pattern(&self) -> Pattern;
    /// Which kind-specific options it takes (`kind::not_taken` on a
    /// command line, `validate` in any spec).
    fn facts(&self) -> kind::KindFacts {
        kind::KindFacts::default()
    }
    /// Its own rules on a spec (see `Kind::rules`).
    fn rules(&self, _spec: &TestSpec) -> Result<(), crate::model::error::Invalid> {
        Ok(())
    }
    /// The headline figure: what confidence intervals and progress follow.
    fn main_metric(&self, spec: &TestSpec) -> MainMetric;
    /// Checks of its own, beyond `TestSpec::validate` and `facts`.
    fn validate(&self, _spec: &TestSpec) -> Result<(), WorkloadError> {
        Ok(())
    }
    /// What the client's flow errors mean for the test: None, they are
    /// the flows' own (counted); Some, the test failed with this reason
    /// (its result is partial).
    fn mid_test_failure(&self, _spec: &TestSpec, _errors: &[String]) -> Option<String> {
        None
    }
    /// What it runs, in words: the head of a result's first line
    /// ("rr 1 B/1 B, 4 outstanding"); the TLS, flows and window that
    /// follow are the report's.
    fn describe(&self, spec: &TestSpec) -> String;
    /// Its clear-text twin, the baseline of its TLS cost.
    fn clear_twin(&self) -> spec::Workload {
        self.kind()
    }
    /// Whether that twin keeps the test's TLS: a QUIC test's baseline is
    /// TLS over TCP, not clear text.
    fn twin_keeps_tls(&self) -> bool {
        false
    }
    /// The kind it runs over another transport, when it is one:
    /// (`quic`, `rr`) for rr over QUIC, which `--transport quic` on `rr`
    /// picks (`resolve`). None: it runs over TCP (or UDP) as it is.
    fn over(&self) -> Option<(spec::Transport, spec::Workload)> {
        None
    }
    /// Whether its clients speak the common QUIC performance protocol
    /// (draft-banks-quic-performance, ALPN "perf"), so that they can load
    /// another tool's perf server in place of an agent (`--perf-server`).
    fn speaks_perf(&self) -> bool {
        false
    }
    /// What its results carry (from its connection pattern unless it says
    /// otherwise).
    fn figures(&self, _spec: &TestSpec) -> Figures {
        let p = self.pattern();
        Figures {
            latency: true,
            connections: p == Pattern::PerTransaction,
            udp: p == Pattern::Datagram,
            kv: p == Pattern::Service,
            one_way: false,
            delivered: false,
            client_only: false,
        }
    }
    /// What a result's rate column (and its trans/s line) shows.
    fn rate_column(&self, _spec: &TestSpec) -> RateColumn {
        RateColumn::Transactions
    }
    /// Lines of its own in a result, after the rate: (label, text).
    fn report_lines(&self, _spec: &TestSpec, _it: &Iteration) -> Vec<(&'static str, String)> {
        Vec::new()
    }
    /// The controller's flows.
    fn client_flows(
        &self,
        spec: &TestSpec,
        conns: Conns,
    ) -> Result<Vec<Box<dyn Flow>>, WorkloadError>;
    /// The agent's flows.
    fn agent_flows(
        &self,
        spec: &TestSpec,
        conns: Conns,
    ) -> Result<Vec<Box<dyn Flow>>, WorkloadError>;
    /// How a side watches a service its server half started (its CPU and
    /// counts over the window); None: nothing to watch.
    fn watch_service(&self, _service: &Service) -> Option<ServiceProbe> {
        None
    }
    /// Whether the server's CPU is the agent's: false where the server is
    /// a service the agent did not start (its idle threads are not the
    /// server's CPU).
    fn server_cpu(&self, _service_started: bool) -> bool {
        true
    }
    /// Its own figures in a few words (`Kind::words`).
    fn words(&self, _s: &Summary) -> Option<String> {
        None
    }
    /// Its own key points (`Kind::key_points`).
    fn key_points(
        &self,
        _points: &[crate::model::points::PointView],
    ) -> Vec<crate::model::points::KeyPoint> {
        Vec::new()
    }
    /// Its own metrics (`Kind::metrics`).
    fn metrics(&self) -> &'static [crate::model::metric::Metric] {
        &[]
    }
    /// Its own figures' fold over one test's iterations (`own::OwnFold`);
    /// None: the common figures are all it reports.
    fn own_fold(&self, _spec: &TestSpec) -> Option<Box<dyn OwnFold>> {
        None
    }
    /// The server program it loads in the agent's place (`own::Served`),
    /// with what `summary` measured of it; None: the agent serves.
    fn served(&self, _spec: &TestSpec, _summary: Option<&Summary>) -> Option<Served> {
        None
    }
}

/// What a result's rate column shows for a workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateColumn {
    Transactions,
    /// Datagrams received per second (udp-stream).
    Packets,
    /// Nothing: a bulk transfer's figure is its throughput.
    None,
}

/// A direction as a description says it.
fn direction_words(d: Direction) -> &'static str {
    match d {
        Direction::Tx => "tx (client sends)",
        Direction::Rx => "rx (agent sends)",
        Direction::Bidir => "bidir",
    }
}

/// Every kind of test: the flow workloads (the engine runs them: their
/// `Kind::flows`), then the others.
pub static KINDS: &[&dyn Kind] = &[
    &stream::Stream,
    &rr::Rr,
    &crr::Crr,
    &tls_handshake::TlsHandshake,
    &udp_stream::UdpStream,
    &udp_rr::UdpRr,
    &memcache::Memcache,
    &conn::Conn,
    &quic::QuicStream,
    &quic::rr::QuicRr,
    &quic::crr::QuicCrr,
    &quic::crr::QuicHandshake,
    &quic::crr::QuicConn,
    &exec::Exec,
    &scp::Scp,
    &cipher::Cipher,
    &rpm::kind::Rpm,
    &http::Http,
    &mix::Mix,
    &rrul::Rrul,
];

/// The kind that `workload` names, if this build has it.
pub fn find(workload: spec::Workload) -> Option<&'static dyn Kind> {
    KINDS.iter().copied().find(|k| k.workload() == workload)
}

/// The kind that `workload` names, or why there is none: every place that
/// refuses a name this build lacks says it in these words.
pub fn known(workload: spec::Workload) -> Result<&'static dyn Kind, WorkloadError> {
    find(workload).ok_or_else(|| WorkloadError::Unknown {
        name: workload.name(),
        known: kind_names(),
    })
}

/// The kind that `workload` names. A name this build does not know (a
/// newer linerate's result, read back) is `unknown::Unknown`: it says what
/// it is where it is described and runs nothing; `check` refuses it before
/// a test starts.
pub fn kind_of(workload: spec::Workload) -> &'static dyn Kind {
    find(workload).unwrap_or(&unknown::Unknown)
}

/// Every kind's name, in `KINDS`' order, for messages.
pub fn kind_names() -> String {
    let v: Vec<&str> = KINDS.iter().map(|k| k.workload().name()).collect();
    v.join(", ")
}

/// The command line's parser of a kind's name: the registry's names, each
/// with its kind's `help` (`linerate run --help` lists them).
pub fn parser() -> impl clap::builder::TypedValueParser<Value = spec::Workload> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(
        KINDS
            .iter()
            .map(|k| PossibleValue::new(k.workload().name()).help(k.help())),
    )
    .map(|name: String| {
        // The parser above admits only the registry's names.
        KINDS
            .iter()
            .map(|k| k.workload())
            .find(|w| w.name() == name)
            .unwrap_or(spec::Workload::DEFAULT)
    })
}

/// The spec a result of groups on one window stores as its own: mix's.
pub fn mixed_spec(groups: &[group::Group]) -> TestSpec {
    group::spec_of(groups, mix::NAME)
}

/// Every flow workload, in `KINDS`' order.
pub fn registry() -> impl Iterator<Item = &'static dyn Plugin> {
    KINDS.iter().filter_map(|k| k.flows())
}

/// Whether a test of `workload` can run against another tool's QUIC perf
/// server (`--perf-server`), or why not, in one line.
pub fn perf_client(workload: spec::Workload) -> Result<(), WorkloadError> {
    if get(workload).is_some_and(|p| p.speaks_perf()) {
        return Ok(());
    }
    let kinds: Vec<&str> = registry()
        .filter(|p| p.speaks_perf())
        .map(|p| p.kind().name())
        .collect();
    Err(WorkloadError::NoPerfProtocol {
        name: workload.name(),
        kinds: kinds.join(", "),
    })
}

/// The workload that runs `kind` (None: not flows).
pub fn get(workload: spec::Workload) -> Option<&'static dyn Plugin> {
    kind_of(workload).flows()
}

/// What the code that names no kind needs to know of `workload`.
pub fn facts(workload: spec::Workload) -> kind::KindFacts {
    kind_of(workload).facts()
}

/// The spec `o` builds for its kind (stream without one); `local`: the
/// agent shares this host (see `TestOptions::build_for`).
pub fn build(
    o: &crate::model::options::TestOptions,
    local: bool,
) -> Result<TestSpec, crate::model::error::Invalid> {
    let w = o.run.workload.unwrap_or(TestSpec::default().workload);
    if o.socket.transport.is_some() {
        let mut o = o.clone();
        let w = resolve(w, o.socket.transport.take())?;
        o.run.workload = Some(w);
        return o.build_for(&facts(w), local);
    }
    o.build_for(&facts(w), local)
}

/// The workload that runs `workload` over `transport`: itself over TCP,
/// else the kind that says it runs `workload` over that transport
/// (`Plugin::over`), or why there is none.
pub fn resolve(
    workload: spec::Workload,
    transport: Option<spec::Transport>,
) -> Result<spec::Workload, crate::model::error::Invalid> {
    let Some(t) = transport.filter(|t| *t != spec::Transport::Tcp) else {
        return Ok(workload);
    };
    let over = |k: &&dyn Plugin| k.over().filter(|(by, _)| *by == t);
    if registry().any(|k| k.kind() == workload && over(&k).is_some()) {
        return Ok(workload);
    }
    if let Some(k) = registry().find(|k| over(k).is_some_and(|(_, of)| of == workload)) {
        return Ok(k.kind());
    }
    let bases: Vec<&str> = registry()
        .filter_map(|k| over(&k).map(|(_, of)| of.name()))
        .collect();
    let name = clap::ValueEnum::to_possible_value(&t).map(|v| v.get_name().to_string());
    let name = name.unwrap_or_default();
    Err(format!(
        "--transport {name} runs {} over {}; {} has no {} twin yet",
        bases.join(", "),
        name.to_uppercase(),
        workload.name(),
        name.to_uppercase()
    )
    .into())
}

/// Whether this end (`agent`: the server's) of a test of `spec` takes
/// payload: in a stream only the direction's receiver does.
pub fn receives(spec: &TestSpec, agent: bool) -> bool {
    spec.receives(agent, facts(spec.workload).one_way_payload)
}

/// The workload of `spec`, or why it has none.
pub fn of(spec: &TestSpec) -> Result<&'static dyn Plugin, WorkloadError> {
    known(spec.workload)?
        .flows()
        .ok_or(WorkloadError::NotFlows {
            workload: spec.workload.name(),
        })
}

/// What the rate column shows for `spec`.
pub fn rate_column(spec: &TestSpec) -> RateColumn {
    kind_of(spec.workload).rate_column(spec)
}

/// The open loop in words, for a workload's line: ", open loop at 20.0k/s
/// total" (transactions or operations), with `--rate-ramp` ", rising from
/// 2000/s over 2.00 s", with `--arrivals poisson` ", Poisson arrivals".
pub fn open_loop_text(spec: &TestSpec) -> String {
    use crate::units::{fmt_rate, fmt_secs};
    let Some(r) = spec.rate else {
        return String::new();
    };
    let mut s = format!(", open loop at {} total", fmt_rate(r));
    if let Some(ramp) = spec.rate_ramp_s {
        s += &format!(
            ", rising from {} over {}",
            fmt_rate(r / 10.0),
            fmt_secs(ramp)
        );
    }
    if spec.arrivals == spec::Arrivals::Poisson {
        s += ", Poisson arrivals";
    }
    s
}

/// What `spec` runs, in words: its kind's own description.
pub fn describe(spec: &TestSpec) -> String {
    kind_of(spec.workload).describe(spec)
}

/// Turns `--rx-poll auto` off for a test that shares its CPUs with what a
/// polling receiver would slow (a lab's emulator, the other groups of a
/// mix) or that must wait as another did (a TLS test's clear twin): its
/// receivers sleep, and its spec says so. An asked-for poll stays.
pub fn receivers_sleep(spec: &mut TestSpec) {
    if spec.rx_poll_us.is_none() && facts(spec.workload).rx_poll {
        spec.rx_poll_us = Some(0);
    }
}

/// The twin of a TLS test of `spec`, run right after it as its baseline:
/// the same workload in clear text, or the one that measures the same
/// without TLS (tls-handshake's is crr), or for QUIC the same test as TLS
/// over TCP.
pub fn twin(spec: &TestSpec) -> TestSpec {
    let kind = kind_of(spec.workload);
    let mut t = spec.clone();
    if !kind.twin_keeps_tls() {
        t.tls = None;
        // Clear text uses no crypto: the mask is not its setting.
        t.crypto_hw = true;
    }
    t.workload = kind.clear_twin();
    t
}

/// The fold of `spec`'s own figures, when its kind has any.
pub fn own_fold(spec: &TestSpec) -> Option<Box<dyn OwnFold>> {
    of(spec).ok()?.own_fold(spec)
}

/// The server program `spec` loads in the agent's place, if any, with
/// what `summary` measured of it.
pub fn served(spec: &TestSpec, summary: Option<&Summary>) -> Option<Served> {
    of(spec).ok()?.served(spec, summary)
}

/// What the results of `spec` carry (programs and mixes: bytes and CPU).
pub fn figures(spec: &TestSpec) -> Figures {
    kind_of(spec.workload).figures(spec)
}

/// The headline metric of `spec` (programs report transfer throughput).
pub fn main_metric(spec: &TestSpec) -> MainMetric {
    kind_of(spec.workload).main_metric(spec)
}

/// A persistent flow's shared state over an established connection: its
/// TLS session, and the window clamp it holds with `--window exact`.
pub fn base(spec: &TestSpec, agent: bool, conn: (u32, TcpStream, Option<TlsConn>)) -> FlowBase {
    let (id, stream, tls) = conn;
    FlowBase::new(id, stream)
        .with_tls(tls)
        .with_clamp(crate::engine::sockopt::exact_window(
            spec,
            receives(spec, agent),
        ))
        // An open loop's ends take the kernel's receive stamps.
        .with_stamps(spec.rate.is_some())
}

/// The names of the workloads for which `pick` holds, for messages.
fn names(pick: impl Fn(kind::KindFacts) -> bool) -> String {
    let v: Vec<&str> = registry()
        .filter(|w| pick(w.facts()))
        .map(|w| w.kind().name())
        .collect();
    v.join(", ")
}

/// The checks a workload adds to `TestSpec::validate`: options it does not
/// take, and its own. Programs are checked by the spec alone.
pub fn validate(spec: &TestSpec) -> Result<(), WorkloadError> {
    let Some(w) = get(spec.workload) else {
        return Ok(());
    };
    let s = w.facts();
    let refuse = |flag: &'static str, pick: fn(kind::KindFacts) -> bool| {
        Err(WorkloadError::NotTaken {
            flag,
            takers: names(pick),
        })
    };
    if spec.rate.is_some() && !s.rate {
        return refuse("--rate (open loop)", |s| s.rate);
    }
    if spec.zerocopy && !s.zerocopy {
        return refuse("--zerocopy", |s| s.zerocopy);
    }
    if spec.bytes.is_some() && !s.transfer {
        return Err(WorkloadError::BytesNotTaken {
            takers: names(|s| s.transfer),
        });
    }
    if spec.window == spec::WindowMode::Exact && !s.exact_window {
        return Err(WorkloadError::ExactWindowNotTaken {
            takers: names(|s| s.exact_window),
        });
    }
    w.validate(spec)
}

/// The checks every test passes: the spec's rules, its kind's, and what
/// the TLS library offers.
pub fn check(spec: &TestSpec) -> Result<(), SpecError> {
    known(spec.workload)?;
    spec.validate()
        .map_err(|e| SpecError::Spec(e.to_string()))?;
    rules::of_kind(spec, kind_of(spec.workload)).map_err(|e| SpecError::Spec(e.to_string()))?;
    validate(spec)?;
    if let Some(t) = &spec.tls {
        crate::engine::tls::check(t)?;
    }
    Ok(())
}

/// `TestOptions` built for each kind and written back as a command line.
#[cfg(test)]
mod options_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::spec::Workload as Kind;

    fn k(name: &'static str) -> Kind {
        Kind::named(name)
    }

    #[test]
    fn every_flow_workload_is_registered_once() {
        for k in [
            k("stream"),
            k("rr"),
            k("crr"),
            k("tls-handshake"),
            k("udp-stream"),
            k("udp-rr"),
            k("memcache"),
            k("conn"),
        ] {
            assert_eq!(registry().filter(|w| w.kind() == k).count(), 1);
        }
        assert!(get(k("exec")).is_none() && get(k("scp")).is_none());
    }

    #[test]
    fn every_kind_is_registered_once_and_flows_are_the_plug_ins() {
        for kind in KINDS {
            let w = kind.workload();
            let n = KINDS.iter().filter(|o| o.workload() == w).count();
            assert_eq!(n, 1, "{w}");
            assert_eq!(kind_of(w).workload(), w);
            assert_eq!(Kind::parse(w.name()), Ok(w), "a name a spec can carry");
            assert!(!kind.help().is_empty(), "{w}: --help lists it");
            assert_eq!(
                kind_of(w).flows().map(|p| p.kind()),
                get(w).map(|p| p.kind()),
                "{w}"
            );
        }
        assert_eq!(
            KINDS[0].workload(),
            Kind::DEFAULT,
            "the default kind is the first"
        );
    }

    /// A name no kind has reads (a newer result) but does not run.
    #[test]
    fn an_unknown_kind_is_described_and_refused() {
        let s = TestSpec {
            workload: Kind::parse("quick").unwrap(),
            ..Default::default()
        };
        assert!(describe(&s).contains("quick"), "{}", describe(&s));
        let e = check(&s).unwrap_err().to_string();
        assert!(
            e.contains("unknown workload 'quick'") && e.contains("stream, rr"),
            "{e}"
        );
        assert!(of(&s).is_err() && get(s.workload).is_none());
    }

    #[test]
    fn the_command_line_takes_each_kind_by_name() {
        use clap::builder::TypedValueParser;
        let cmd = clap::Command::new("t");
        let p = parser();
        for kind in KINDS {
            let w = kind.workload();
            let got = p.parse_ref(&cmd, None, std::ffi::OsStr::new(w.name()));
            assert_eq!(got.unwrap(), w);
        }
        assert!(p
            .parse_ref(&cmd, None, std::ffi::OsStr::new("quick"))
            .is_err());
    }

    /// A kind's facts agree with how it runs: datagrams are the datagram
    /// pattern's, programs have no flows, a section is one kind's.
    #[test]
    fn facts_agree_with_the_plug_in() {
        for w in registry() {
            let f = Plugin::facts(w);
            let k = Plugin::kind(w);
            assert_eq!(
                w.pattern() == Pattern::Datagram,
                f.datagrams,
                "{}",
                k.name()
            );
            assert!(!f.program, "{}", k.name());
        }
        for k in KINDS {
            let f = k.facts();
            assert_eq!(f.program, k.flows().is_none() && k.program().is_some());
            let owners = KINDS
                .iter()
                .filter(|o| f.section != kind::Section::None && o.facts().section == f.section)
                .count();
            assert!(owners <= 1);
        }
    }

    /// Each kind refuses the kind-specific options it does not take and
    /// only those; a program takes every one.
    #[test]
    fn a_kind_names_the_options_it_does_not_take() {
        use crate::model::options::TestOptions;
        let o = |f: fn(&mut TestOptions)| {
            let mut o = TestOptions::default();
            f(&mut o);
            o
        };
        let direction = o(|o| o.stream.direction = Some(spec::Direction::Rx));
        let request = o(|o| o.exchange.request = Some(crate::model::options::Size(200)));
        let timeout = o(|o| o.exchange.timeout = Some(crate::model::options::Secs(1.0)));
        let taken = |o: &TestOptions, k: Kind| kind::not_taken(o, kind_of(k)).is_none();
        assert!(taken(&direction, k("stream")) && taken(&direction, k("udp-stream")));
        assert!(!taken(&direction, k("rr")) && !taken(&direction, k("memcache")));
        for k in [k("rr"), k("crr"), k("tls-handshake"), k("udp-rr")] {
            assert!(taken(&request, k), "{k:?}");
        }
        assert!(!taken(&request, k("stream")) && !taken(&request, k("conn")));
        assert!(taken(&timeout, k("udp-rr")) && !taken(&timeout, k("rr")));
        for k in [k("exec"), k("scp")] {
            assert!(taken(&direction, k) && taken(&request, k) && taken(&timeout, k));
        }
        assert_eq!(
            kind::not_taken(&request, kind_of(k("stream"))),
            Some("--request")
        );
    }

    #[test]
    fn options_name_the_workloads_that_take_them() {
        let s = TestSpec {
            workload: k("crr"),
            rate: Some(10.0),
            ..Default::default()
        };
        assert_eq!(
            validate(&s).unwrap_err().to_string(),
            "--rate (open loop) applies to rr, udp-stream, udp-rr, memcache, quic-rr"
        );
        let z = TestSpec {
            workload: k("rr"),
            zerocopy: true,
            ..Default::default()
        };
        assert_eq!(
            validate(&z).unwrap_err().to_string(),
            "--zerocopy applies to stream"
        );
        let w = TestSpec {
            workload: k("crr"),
            window: spec::WindowMode::Exact,
            rcvbuf: Some(65536),
            ..Default::default()
        };
        assert!(validate(&w).unwrap_err().to_string().contains("stream, rr"));
        let h = TestSpec {
            workload: k("tls-handshake"),
            ..Default::default()
        };
        assert!(validate(&h).unwrap_err().to_string().contains("TLS"));
    }
}
