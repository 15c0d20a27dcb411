//! What a kind of test is, for the code that must not name kinds: the
//! options it takes, its defaults, what its command line writes. The kinds
//! themselves (`workload`) fill it in.

/// A spec section that belongs to one kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Section {
    #[default]
    None,
    /// A kind's own section, by its key (`model::own`): the kind's
    /// folder holds its type and registers its options.
    Own(&'static str),
}

/// What a kind of test is, as the code outside it needs to know: which
/// of the options only some kinds use it takes (on a command line the
/// others are refused, `workload::kind::not_taken`; in any spec
/// `workload::rules` refuses what it cannot run), and what `TestOptions`
/// builds for it by default and writes back on its command line. Each kind
/// says its own (`workload::Kind::facts`); model names no kind.
#[derive(Clone, Copy, Debug, Default)]
pub struct KindFacts {
    /// `--direction`, `--message`: bulk transfer.
    pub bulk: bool,
    /// `--request`, `--response`: an exchange.
    pub exchange: bool,
    /// `--bytes`, `--per`, `--reply`: a finite transfer and its answer.
    pub transfer: bool,
    /// `--timeout`: a datagram exchange's wait for its answer.
    pub timeout: bool,
    /// `--rate`: an open loop at a transaction rate (udp-stream: a
    /// packet rate).
    pub rate: bool,
    /// `--zerocopy`: sendfile from a memfd.
    pub zerocopy: bool,
    /// `--window exact`: a clamped window on persistent connections.
    pub exact_window: bool,
    /// A program (exec, scp): every option on a command line reaches it
    /// (it checks its own), it carries a command and ends when done.
    pub program: bool,
    /// `--io threads`: a blocking thread per flow.
    pub threads: bool,
    /// `--search` of a latency percentile (an open loop's).
    pub search_latency: bool,
    /// `--search loss_pct` (datagrams).
    pub search_loss: bool,
    /// `--rate` as a bit rate capping its load's goodput each way, and
    /// `--search 'rpm>=N'` over it (the responsiveness test).
    pub load_bits: bool,
    /// `--arrivals poisson` and `--rate-ramp`: a paced open loop.
    pub paced: bool,
    /// `--batch`, `--gso`, `--gro` and a bit rate: datagrams.
    pub udp: bool,
    /// `--crypto-hw off` without TLS: it measures crypto itself.
    pub crypto_alone: bool,
    /// The spec section it owns.
    pub section: Section,
    /// Why `--duration auto` cannot size it (None: it can).
    pub no_auto: Option<&'static str>,
    /// Datagrams: UDP's message and exchange sizes by default, no read
    /// size.
    pub datagrams: bool,
    /// The command is the user's (exec; scp builds its own).
    pub user_command: bool,
    /// Its own sshd by default (scp).
    pub sshd: bool,
    /// TLS is the point of it (tls-handshake): on without `--tls`.
    pub tls_always: bool,
    /// An unpaced sender that never waits for its receiver (udp-stream):
    /// with a local agent each end gets half the CPUs.
    pub unpaced_sender: bool,
    /// A worker per flow by default, up to `STREAM_FLOWS_PER_CPU` per CPU
    /// (a bulk stream).
    pub worker_per_flow: bool,
    /// A closed loop that runs fastest as a thread per flow (rr, crr).
    pub threads_when_closed: bool,
    /// Only the direction's receiver takes payload (a TCP stream).
    pub one_way_payload: bool,
    /// `--rx-poll`: a lone receiving thread may poll before it sleeps.
    pub rx_poll: bool,
    /// Its flows follow from its section (rrul): `--flows` is not its.
    pub derived_flows: bool,
    /// Its message, request/response, outstanding requests and warm-up
    /// when none is given, where not the common ones.
    pub default_message: Option<usize>,
    pub default_exchange: Option<u64>,
    pub default_outstanding: Option<u32>,
    pub default_warmup_s: Option<f64>,
    /// Its window (or time limit) when none is given, where not the
    /// common one.
    pub default_duration_s: Option<f64>,
}

impl KindFacts {
    /// None of them (the default).
    pub const NONE: KindFacts = KindFacts {
        bulk: false,
        exchange: false,
        transfer: false,
        timeout: false,
        rate: false,
        zerocopy: false,
        exact_window: false,
        program: false,
        threads: false,
        search_latency: false,
        search_loss: false,
        load_bits: false,
        paced: false,
        udp: false,
        crypto_alone: false,
        section: Section::None,
        no_auto: None,
        datagrams: false,
        user_command: false,
        sshd: false,
        tls_always: false,
        unpaced_sender: false,
        worker_per_flow: false,
        threads_when_closed: false,
        one_way_payload: false,
        rx_poll: false,
        derived_flows: false,
        default_message: None,
        default_exchange: None,
        default_outstanding: None,
        default_warmup_s: None,
        default_duration_s: None,
    };
    /// A program's: every option reaches it; it runs until it ends.
    pub const ALL: KindFacts = KindFacts {
        bulk: true,
        exchange: true,
        transfer: true,
        timeout: true,
        rate: true,
        zerocopy: true,
        exact_window: true,
        program: true,
        no_auto: Some("a program runs until it ends"),
        ..KindFacts::NONE
    };
    /// An exchange's (rr, crr, tls-handshake, udp-rr): its sizes.
    pub const EXCHANGE: KindFacts = KindFacts {
        exchange: true,
        ..KindFacts::NONE
    };
    /// A composite's (mix, rrul): its groups share one window.
    pub const GROUPS: KindFacts = KindFacts {
        no_auto: Some("a mixed test's groups share one window"),
        ..KindFacts::NONE
    };
}
