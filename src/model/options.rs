//! One test's options as a user writes them: `linerate run`'s flags and a
//! study's `[test]` table (and its `[[case]]`s and sweep values) are this one
//! struct, so a key means the same thing, takes the same units (`"128K"`,
//! `"500ms"`, `"10k"`) and has the same default in both places. `build`
//! turns it into the `TestSpec` that runs; `to_command_line` is its inverse.
//!
//! Every field is optional: a study layers tables (`base.overlay(case)
//! .overlay(point)`), and the defaults apply only in `build`.

use clap::Args;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::error::{Invalid, ModelError};
use super::exec::ExecSpec;
use super::kind::{KindFacts, Section};
use super::rrul::RrulSpec;
use super::sample::Confidence;
use super::search::SearchTarget;
use super::spec::{
    CertKind, CloseMode, Direction, IoMode, KvDialect, KvSpec, Per, TestSpec, TlsBackend, TlsSpec,
    Transport, WindowMode, Workload, MAX_READ_SIZE,
};

mod command_line;
mod values;
pub use command_line::to_command_line;
use values::parse_pct;
pub use values::*;

/// Every knob of one test. The field names are the flags with `_` for `-`.
#[derive(Args, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TestOptions {
    /// Only in a study's `[[case]]` entries: the case's name in tables and plots.
    #[arg(skip)]
    pub label: Option<String>,
    /// What the flows do (on the command line: the word after `run`).
    #[arg(skip)]
    pub workload: Option<Workload>,
    /// With `workload = "mix"` in a study: the groups on one window, each
    /// written as `linerate run` takes it (`"rr --rate 100"`); the other
    /// keys apply to every group, a group's own options win.
    #[arg(skip)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<String>>,
    /// stream: tx = client sends ("put"), rx = agent sends ("get"), bidir = both [default: tx].
    #[arg(long, value_enum)]
    pub direction: Option<Direction>,
    /// stream: bytes per write [default: 128K].
    #[arg(short = 'm', long, value_parser = Size::parse, value_name = "SIZE")]
    pub message: Option<Size>,
    /// rr/crr: request size [default: 1].
    #[arg(long, value_parser = Size::parse, value_name = "SIZE")]
    pub request: Option<Size>,
    /// rr/crr: response size [default: 1].
    #[arg(long, value_parser = Size::parse, value_name = "SIZE")]
    pub response: Option<Size>,
    /// stream: a finite transfer of this size (per flow, or per transaction with --per transaction).
    #[arg(long, value_parser = Size::parse, value_name = "SIZE")]
    pub bytes: Option<Size>,
    /// stream --bytes: one transfer per flow (test ends when all are done), or repeated transactions for the duration [default: flow].
    #[arg(long, value_enum)]
    pub per: Option<Per>,
    /// stream --bytes: size of the small message the other way (stream put 20M/20: --bytes 20M --reply 20) [default: 20].
    #[arg(long, value_parser = Size::parse, value_name = "SIZE")]
    pub reply: Option<Size>,
    /// rr: requests in flight per flow (netperf -b + 1) [default: 1].
    #[arg(long)]
    pub outstanding: Option<u32>,
    /// rr, udp-rr, memcache, udp-stream (loss): find the highest offered rate (open loop) whose figure meets this target: p50, p90, p99 or p999 of the latency, or loss_pct for UDP (`p99<=300us`, `loss_pct<=0.1`). A closed-loop peak, a ramp by factors of two, then bisection; each step long enough for 100 samples beyond the percentile.
    #[arg(long, value_parser = SearchTarget::parse, value_name = "METRIC<=VALUE")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<SearchTarget>,
    /// With --search: stop when the missed rate is within this percent of the met one [default: 2%].
    #[arg(long, value_parser = parse_pct, value_name = "PCT")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_resolution: Option<f64>,
    /// rr, udp-rr, memcache with --rate: the rate rises linearly from a tenth of --rate to --rate over this long from the start, then holds (a load that drifts on purpose).
    #[arg(long, value_parser = Secs::parse, value_name = "DURATION")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_ramp: Option<Secs>,
    /// rr, udp-rr, memcache with --rate (or --search): space requests evenly (uniform, as wrk2 and sockperf) or as a Poisson process (exponential gaps, as mutilate and Lancet; bursts queue) [default: uniform].
    #[arg(long, value_enum, value_name = "KIND")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrivals: Option<crate::model::spec::Arrivals>,
    /// rr, udp-rr, memcache with --rate (or --search): how the sender waits for each request's due time: hybrid sleeps until just before it (by the lead its own recent wake-ups needed, up to 1 ms) and busy-polls the rest, so a host slow to wake does not delay the sends; sleep wakes on a timer at the due time (less CPU; the wake-up's lateness counts as latency, and is reported); auto: hybrid when the client's workers have a CPU to spare (beside a local agent's), else sleep [default: auto].
    #[arg(long, value_enum, value_name = "HOW")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing: Option<crate::model::spec::Pacing>,
    /// rr, udp-rr: open loop at this many transactions/s in total (latency also measured from the intended send time); udp-stream: paced at this many packets/s, or a payload bit rate such as 500mbit, in total.
    #[arg(long, value_parser = Rate::parse, value_name = "RATE")]
    pub rate: Option<Rate>,
    /// TCP: bytes asked of each receive call (netperf -M), on both ends; it shapes when the receiver ACKs and so what a pacing congestion control (bbr) measures [default: the largest message a flow receives, 16K to 1M].
    #[arg(long, value_parser = Size::parse, value_name = "SIZE")]
    pub read_size: Option<Size>,
    /// stream: how long a lone receiving thread polls an empty socket before it sleeps (auto, off, or a duration such as 20us): a sleeping receiver pays its host's wake-up on every arrival, which on a VM under bbr cost a third of one stream's rate; the time polled is counted and shown beside the CPU figures; auto: 20us when the test has one flow, this host has a CPU beside the receiver's and the two ends are not pinned to one CPU, not under TLS (its receiver decrypts: polling measured 0.93x), never in a lab or a mix group (they need the CPUs) [default: auto].
    #[arg(long, value_parser = RxPoll::parse, value_name = "HOW")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_poll: Option<RxPoll>,
    /// How workers wait for their sockets: epoll (event loops, many flows per thread) or threads (a blocking thread per flow, as netperf and iperf3 3.16+; stream tx/rx, closed-loop rr, crr) [default: threads for a closed-loop rr or a crr with a worker per flow, else epoll].
    #[arg(long, value_enum)]
    pub io: Option<IoMode>,
    /// UDP: datagrams per sendmmsg/recvmmsg call [default: 32; with --gso as many as one send takes, up to 128].
    #[arg(long, value_name = "N")]
    pub batch: Option<u32>,
    /// udp-stream: send each batch as one GSO datagram (UDP_SEGMENT), split by the kernel.
    #[arg(long, action = clap::ArgAction::SetTrue)]
    pub gso: Option<bool>,
    /// udp-stream: receive datagrams coalesced by the kernel (UDP_GRO), split by linerate.
    #[arg(long, action = clap::ArgAction::SetTrue)]
    pub gro: Option<bool>,
    /// udp-rr: a request unanswered this long is counted lost [default: 1s].
    #[arg(long, value_parser = Secs::parse, value_name = "DURATION")]
    pub timeout: Option<Secs>,
    /// memcache: the memcached the agent starts on its host, with its arguments ("memcached -t 4 -m 1024"); linerate adds -l and -p [default: memcached].
    #[arg(long, value_name = "COMMAND")]
    pub service: Option<String>,
    /// memcache: load an existing memcached at HOST:PORT instead (its CPU is not measured).
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "service")]
    pub target: Option<String>,
    /// memcache: keys in the key space, all set before the window [default: 10k].
    #[arg(long, value_parser = Count::parse, value_name = "N")]
    pub keys: Option<Count>,
    /// memcache: bytes per key [default: 16].
    #[arg(long, value_name = "BYTES")]
    pub key_size: Option<u32>,
    /// memcache: zipf key popularity with this exponent (e.g. 0.99) [default: uniform].
    #[arg(long, value_name = "S")]
    pub zipf: Option<f64>,
    /// memcache: value sizes: 1K, a range 1K-2K, or a weighted mix 4-100:1,1K-2K:1,5K-20K:1 [default: 1K].
    #[arg(long, value_name = "SIZES")]
    pub values: Option<String>,
    /// memcache: gets and sets in this ratio [default: 9:1].
    #[arg(long, value_parser = GetSet::parse, value_name = "GETS:SETS")]
    pub get_set: Option<GetSet>,
    /// memcache: keys per get command (multi-get) [default: 1].
    #[arg(long, value_name = "K")]
    pub multiget: Option<u32>,
    /// memcache: text (get/set) or meta (mg/ms) commands [default: text].
    #[arg(long, value_enum)]
    pub protocol: Option<KvDialect>,
    /// Number of flows (connections) [default: 1].
    #[arg(short = 'F', long)]
    pub flows: Option<u32>,
    /// rrul: seconds the probes run alone before the streams start [default: 3s].
    #[arg(long, value_parser = Secs::parse, value_name = "DURATION")]
    pub idle: Option<Secs>,
    /// rrul: each probe's rate (rr and udp-rr, open loop), requests/s [default: 20].
    #[arg(long, value_parser = Count::parse, value_name = "RATE")]
    pub probe_rate: Option<Count>,
    /// rrul: TCP streams each way [default: 4].
    #[arg(long, value_name = "N")]
    pub streams: Option<u32>,
    /// Client workers (threads, each an epoll loop); default min(flows, CPUs), a worker per flow for a stream of up to 4 flows per CPU.
    #[arg(short = 'T', long, alias = "threads")]
    #[serde(alias = "threads")]
    pub workers: Option<u32>,
    /// Agent workers; default the same as --workers.
    #[arg(long, alias = "agent-threads")]
    #[serde(alias = "agent_threads")]
    pub agent_workers: Option<u32>,
    /// Measurement window [default: 10s; with --bytes the time limit, 300s]; `auto`: until the main figure is stationary (a trend test over the intervals, the leading ones that trend are the warm-up) and within the confidence target, at most --max-duration.
    #[arg(short = 'd', long, value_parser = Length::parse, value_name = "DURATION|auto")]
    pub duration: Option<Length>,
    /// With --duration auto: the longest window [default: 60s].
    #[arg(long, value_parser = Secs::parse, value_name = "DURATION")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_duration: Option<Secs>,
    /// Warm-up excluded from the window [default: 2s].
    #[arg(long, value_parser = Secs::parse, value_name = "DURATION")]
    pub warmup: Option<Secs>,
    /// Interval of the per-interval samples [default: 1s].
    #[arg(short = 'i', long, value_parser = Secs::parse, value_name = "DURATION")]
    pub interval: Option<Secs>,
    /// SO_SNDBUF on both ends (the kernel doubles it; the granted size is reported).
    #[arg(long, value_parser = Size::parse, value_name = "SIZE")]
    pub sndbuf: Option<Size>,
    /// SO_RCVBUF on both ends (set before listen/connect).
    #[arg(long, value_parser = Size::parse, value_name = "SIZE")]
    pub rcvbuf: Option<Size>,
    /// How --rcvbuf sets the receive window: buffer (SO_RCVBUF, as applications do: ~1.5x on Linux) or exact (plus TCP_WINDOW_CLAMP) [default: buffer].
    #[arg(long, value_enum)]
    pub window: Option<WindowMode>,
    /// Studies with a [lab]: the lab's round trip for this test (swept per point).
    #[arg(skip)]
    pub rtt: Option<Secs>,
    /// Studies across many hosts: use the first N client hosts (swept per point).
    #[arg(skip)]
    pub clients: Option<u32>,
    /// Studies with a [lab]: the lab's settings for this point (swept as
    /// `lab.mtu`, `lab.offloads`, `lab.rate`, `lab.loss`, `lab.queue`, `lab.cc`).
    #[arg(skip)]
    pub lab: Option<crate::model::lab::LabPoint>,
    /// Studies with a [lab]: sysctls set in the lab's namespaces for this
    /// point (swept as `sysctl."net.ipv4.tcp_rmem"`).
    #[arg(skip)]
    pub sysctl: Option<BTreeMap<String, String>>,
    /// TCP_NODELAY on both ends.
    #[arg(long, action = clap::ArgAction::SetTrue)]
    pub nodelay: Option<bool>,
    /// Congestion control per socket: reno, cubic, bbr ... (this kernel's default is recorded otherwise); over QUIC, quinn's: cubic (default), bbr or newreno.
    #[arg(long, value_name = "NAME")]
    pub cc: Option<String>,
    /// What carries the flows: tcp, or quic (QUIC over UDP with TLS 1.3: runs the workload's QUIC twin, quic-stream for stream, and TLS over TCP right after it as its baseline) [default: tcp].
    #[arg(long, value_name = "tcp|quic")]
    pub transport: Option<Transport>,
    /// TCP_MAXSEG before connect.
    #[arg(long)]
    pub mss: Option<u32>,
    /// Pin client workers to these CPUs (round-robin), e.g. 0 or 0-1.
    #[arg(long, value_parser = Cpus::parse, value_name = "LIST")]
    pub cpus: Option<Cpus>,
    /// Pin agent workers to these CPUs.
    #[arg(long, value_parser = Cpus::parse, value_name = "LIST")]
    pub agent_cpus: Option<Cpus>,
    /// stream: send with sendfile(2) from a memfd (no user-space copy).
    #[arg(long, action = clap::ArgAction::SetTrue)]
    pub zerocopy: Option<bool>,
    /// Busy polling: workers never sleep in epoll (and set SO_BUSY_POLL where allowed); lower latency, a full core per worker on each end.
    #[arg(long, action = clap::ArgAction::SetTrue)]
    pub spin: Option<bool>,
    /// Use IPv6 (on the command line: -6, beside --agent).
    #[arg(skip)]
    pub ipv6: Option<bool>,
    /// crr: graceful (agent closes first, FIN) or reset (client SO_LINGER 0) [default: graceful].
    #[arg(long, value_enum)]
    pub close: Option<CloseMode>,
    /// TLS on every data connection (the agent is the server; its generated certificate is verified).
    #[arg(long, action = clap::ArgAction::SetTrue)]
    pub tls: Option<bool>,
    /// TLS library: rustls (aws-lc-rs) or openssl (cargo feature `openssl`) [default: rustls].
    #[arg(long, value_enum)]
    pub backend: Option<TlsBackend>,
    /// TLS suite: aes128-gcm, aes256-gcm, chacha20-poly1305, a full name, or OpenSSL's (AES256-SHA256).
    #[arg(long, value_name = "SUITE")]
    pub cipher: Option<String>,
    /// TLS protocol version: 1.2 or 1.3 (default 1.3 unless the suite is 1.2).
    #[arg(long, value_name = "1.2|1.3")]
    pub tls_version: Option<String>,
    /// Key exchange group: x25519, x25519mlkem768, p256, p384 [default: x25519].
    #[arg(long, value_name = "GROUP")]
    pub kx: Option<String>,
    /// The agent's generated certificate [default: ecdsa-p256].
    #[arg(long, value_enum)]
    pub cert: Option<CertKind>,
    /// TLS session resumption: on or off (tls-handshake: measure resumed handshakes) [default: off].
    #[arg(long, value_parser = Switch::parse, value_name = "on|off")]
    pub resume: Option<Switch>,
    /// TLS: use the CPU's crypto extensions (on), or mask AES-NI, PCLMULQDQ, SHA, VAES and VPCLMULQDQ from both ends' crypto libraries (off) [default: on].
    #[arg(long, value_parser = Switch::parse, value_name = "on|off")]
    pub crypto_hw: Option<Switch>,
    /// openssl TLS 1.2 CBC suites: encrypt-then-MAC on or off.
    #[arg(long, value_parser = Switch::parse, value_name = "on|off")]
    pub etm: Option<Switch>,
    /// The name the client verifies in the agent's certificate.
    #[arg(long, value_name = "NAME")]
    pub tls_name: Option<String>,
    /// Trust this PEM certificate instead of the agent's generated one.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<String>,
    /// Repeat: N or MIN..MAX iterations (stop early once --confidence is met).
    #[arg(long, value_parser = Iterations::parse, value_name = "MIN..MAX")]
    pub iterations: Option<Iterations>,
    /// Confidence target LEVEL,WIDTH: e.g. 99,5 = 99% CI within +/-2.5% of the mean [default: 99,5].
    #[arg(long, value_parser = Target::parse, value_name = "LEVEL,WIDTH")]
    pub confidence: Option<Target>,
    /// exec: also start linerate's own sshd in the server namespace ({ssh_config} names `Host server` for ssh/scp -F).
    #[arg(long, action = clap::ArgAction::SetTrue)]
    pub sshd: Option<bool>,
    /// exec: a shell command run in the server namespace for the test's duration.
    #[arg(long = "server-cmd", value_name = "COMMAND")]
    pub server_command: Option<String>,
    /// exec: the command and its arguments, after `--` ({server}, {ssh_config}, {file} are replaced).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Option<Vec<String>>,
    /// Studies: NIC settings on both ends' data interfaces for this point
    /// (swept as `nic.gro = [true, false]`, `nic.rx-ring`, `nic.rps` ...):
    /// in a lab its hosts' namespaces, on hosts agents run with `serve --allow-nic`.
    #[arg(skip)]
    #[serde(default, deserialize_with = "crate::model::nic::de_values")]
    pub nic: Option<BTreeMap<String, String>>,
    /// Use the first N data addresses (ports) of each server: a lab's
    /// (`lab up --ports`) or a hosts file's `data` [default: all]; flows
    /// go round robin over them.
    #[arg(long, value_name = "N")]
    pub ports: Option<u32>,
    /// With --ports N: N x this many flows, so the load grows with the
    /// ports (seed 002 ran 64 threads per port); instead of --flows.
    #[arg(long, value_name = "F")]
    pub flows_per_port: Option<u32>,
    /// Studies with a [lab]: rules that never match loaded in the server's
    /// namespace for this point, and connection tracking on or off (swept
    /// as `firewall.rules`, `firewall.conntrack`).
    #[arg(skip)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firewall: Option<crate::model::firewall::FirewallPoint>,
}

/// The keys a study's sweep axis may name: every option but `label` (and
/// the tables `lab` and `sysctl`, whose members are axes: `lab.mtu`, and
/// `sysctl.NAME` for any net.* sysctl).
pub fn axis_keys() -> Vec<String> {
    let v = serde_json::to_value(TestOptions::default()).expect("options serialize");
    let mut keys: Vec<String> = v
        .as_object()
        .map(|o| {
            o.keys()
                .filter(|k| !matches!(k.as_str(), "label" | "lab" | "sysctl" | "nic" | "firewall"))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    keys.extend(
        crate::model::lab::LAB_AXES
            .iter()
            .map(|k| format!("lab.{k}")),
    );
    keys.extend(
        crate::model::nic::names()
            .iter()
            .map(|k| format!("nic.{k}")),
    );
    // The firewall table's members (its own block).
    keys.extend(
        crate::model::firewall::FIREWALL_AXES
            .iter()
            .map(|k| format!("firewall.{k}")),
    );
    keys
}

/// Whether `key` may be a sweep axis.
pub fn is_axis(key: &str) -> bool {
    key.strip_prefix("sysctl.").is_some_and(|k| !k.is_empty())
        || key
            .strip_prefix("nic.")
            .is_some_and(|k| crate::model::nic::setting(k).is_some())
        || axis_keys().iter().any(|k| k == key)
}

impl TestOptions {
    /// Later layers win: `base.overlay(case).overlay(point)`.
    pub fn overlay(&self, top: &TestOptions) -> TestOptions {
        // Through JSON objects: a key set in `top` replaces the base's; the
        // tables `lab` and `sysctl` merge key by key.
        let mut a = serde_json::to_value(self).expect("options serialize");
        let b = serde_json::to_value(top).expect("options serialize");
        if let (Some(a), Some(b)) = (a.as_object_mut(), b.as_object()) {
            for (k, v) in b {
                if v.is_null() {
                    continue;
                }
                match (a.get_mut(k), v) {
                    (Some(serde_json::Value::Object(x)), serde_json::Value::Object(y))
                        if k == "lab" || k == "sysctl" || k == "nic" || k == "firewall" =>
                    {
                        for (kk, vv) in y {
                            if !vv.is_null() {
                                x.insert(kk.clone(), vv.clone());
                            }
                        }
                    }
                    _ => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        serde_json::from_value(a).expect("an overlay of valid options is valid")
    }

    /// Keys set from TOML values, as a sweep point does (`lab.mtu` and
    /// `sysctl.NAME` go into their tables).
    pub fn from_pairs(pairs: &BTreeMap<String, toml::Value>) -> Result<TestOptions, ModelError> {
        let mut table = toml::Table::new();
        for (k, v) in pairs {
            // The firewall table (`firewall.rules`, `firewall.conntrack`).
            if let Some(inner) = k.strip_prefix("firewall.") {
                let entry = table
                    .entry("firewall".to_string())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                if let toml::Value::Table(t) = entry {
                    t.insert(inner.to_string(), v.clone());
                }
                continue;
            }
            let (outer, inner) = match (k.strip_prefix("lab."), k.strip_prefix("sysctl.")) {
                (Some(i), _) => ("lab", i),
                (_, Some(i)) => ("sysctl", i),
                _ if k.starts_with("nic.") => ("nic", &k["nic.".len()..]),
                _ => {
                    table.insert(k.clone(), v.clone());
                    continue;
                }
            };
            // A sysctl's value is text ("4096 131072 6291456"); numbers too.
            let v = match (outer, v) {
                ("sysctl", toml::Value::Integer(i)) => toml::Value::String(i.to_string()),
                ("lab", toml::Value::Integer(i)) if inner != "mtu" => {
                    toml::Value::String(i.to_string())
                }
                _ => v.clone(),
            };
            let entry = table
                .entry(outer.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            if let toml::Value::Table(t) = entry {
                t.insert(inner.to_string(), v);
            }
        }
        table.try_into().map_err(ModelError::Keys)
    }

    /// The spec these options run, with the defaults applied and the
    /// combinations checked (`TestSpec::validate`). The TLS library's own
    /// checks (is this suite offered?) are the caller's: they need the engine.
    pub fn build(&self, facts: &KindFacts) -> Result<TestSpec, Invalid> {
        self.build_for(facts, false)
    }

    /// `build`, knowing whether the agent is local (loopback, or a lab on
    /// this host): its workers then share this host's CPUs with the
    /// client's. An unpaced udp-stream's senders never wait for their
    /// receivers, so with more busy threads than CPUs the senders take the
    /// receivers' time and the datagrams are dropped at the receiving
    /// socket (2 flows on 2 CPUs: 2+2 workers received 190k datagrams/s
    /// with a third dropped, 1+1 received 346k; bench/RESULTS.md). There,
    /// unless asked, each end gets half the CPUs. TCP and paced or
    /// request/response UDP wait for their peer and keep a worker per flow.
    pub fn build_for(&self, facts: &KindFacts, local_agent: bool) -> Result<TestSpec, Invalid> {
        let mut o = self.clone();
        o.flows = o.flows_for_ports()?;
        o.flows_per_port = None;
        if local_agent
            && facts.unpaced_sender
            && o.rate.is_none()
            && o.workers.is_none()
            && o.agent_workers.is_none()
        {
            let flows = o.flows.unwrap_or(1);
            let half = (TestSpec::default_workers(u32::MAX) / 2).max(1);
            let w = flows.min(half).max(1);
            o.workers = Some(w);
            o.agent_workers = Some(w);
        }
        let mut spec = o.build_spec(facts)?;
        if spec.pacing == crate::model::spec::Pacing::Auto {
            let cpus = TestSpec::default_workers(u32::MAX);
            let busy = spec.workers + if local_agent { spec.agent_workers } else { 0 };
            // Only an open loop paces; the others keep the plain value.
            let open = spec.rate.is_some() || spec.search.is_some();
            spec.pacing = if open && cpus > busy {
                crate::model::spec::Pacing::Hybrid
            } else {
                crate::model::spec::Pacing::Sleep
            };
        }
        Ok(spec)
    }

    fn build_spec(&self, facts: &KindFacts) -> Result<TestSpec, Invalid> {
        let d = TestSpec::default();
        let workload = self.workload.unwrap_or(d.workload);
        let program = facts.program;
        self.refuse_out_of_place(facts)?;
        let rrul = self.rrul_spec(facts)?;
        // rrul's flows are its probes' and its streams'.
        let flows = match &rrul {
            Some(r) => 2 * r.streams + 2,
            None => self.flows.unwrap_or(d.flows),
        };
        let workers = self
            .workers
            .unwrap_or_else(|| TestSpec::default_workers_for(facts.worker_per_flow, flows));
        let per = self.per.unwrap_or(d.per);
        let finite = (self.bytes.is_some() && per == Per::Flow) || program;
        let to_usize = |v: Option<Size>, name: &str| -> Result<Option<usize>, Invalid> {
            match v {
                Some(Size(b)) if b > (1 << 30) => {
                    Err(format!("--{name} {b} is larger than 1 GiB").into())
                }
                Some(Size(b)) => Ok(Some(b as usize)),
                None => Ok(None),
            }
        };
        let mut spec = TestSpec {
            workload,
            direction: self.direction.unwrap_or(d.direction),
            message: self
                .message
                .map(|s| s.0.min(u32::MAX as u64) as usize)
                .unwrap_or(facts.default_message.unwrap_or(d.message)),
            request: self
                .request
                .map(|s| s.0)
                .unwrap_or(facts.default_exchange.unwrap_or(d.request)),
            response: self
                .response
                .map(|s| s.0)
                .unwrap_or(facts.default_exchange.unwrap_or(d.request)),
            bytes: self.bytes.map(|s| s.0),
            per,
            reply: self.reply.map(|s| s.0).unwrap_or(d.reply),
            outstanding: self
                .outstanding
                .unwrap_or(facts.default_outstanding.unwrap_or(d.outstanding)),
            rate: match self.rate {
                Some(Rate::PerSecond(r)) => Some(r),
                _ => None,
            },
            rate_bps: match self.rate {
                Some(Rate::Bits(b)) => Some(b),
                _ => None,
            },
            io: IoMode::Epoll,
            read_size: match self.read_size {
                Some(Size(b)) if !(1..=MAX_READ_SIZE as u64).contains(&b) => {
                    return Err(format!(
                        "--read-size {b}: from 1 byte to {} MiB",
                        MAX_READ_SIZE >> 20
                    )
                    .into())
                }
                Some(Size(b)) => b as usize,
                None => 0,
            },
            rx_poll_us: self.rx_poll.and_then(RxPoll::us),
            batch: match self.batch {
                Some(0) => return Err("--batch must be at least 1".into()),
                Some(b) => b,
                None => 0,
            },
            gso: self.gso.unwrap_or(false),
            gro: self.gro.unwrap_or(false),
            timeout_s: self.timeout.map(|s| s.0).unwrap_or(d.timeout_s),
            flows,
            workers,
            agent_workers: self.agent_workers.unwrap_or(workers),
            duration_s: match self.duration {
                Some(Length::Secs(s)) => s,
                Some(Length::Auto) => self
                    .max_duration
                    .map_or(crate::model::auto::DEFAULT_BOUND_S, |s| s.0),
                None => TestSpec::default_duration_s(finite),
            },
            warmup_s: self
                .warmup
                .map(|s| s.0)
                .unwrap_or(facts.default_warmup_s.unwrap_or(d.warmup_s)),
            interval_s: self.interval.map(|s| s.0).unwrap_or(d.interval_s),
            sndbuf: to_usize(self.sndbuf, "sndbuf")?,
            rcvbuf: to_usize(self.rcvbuf, "rcvbuf")?,
            nodelay: self.nodelay.unwrap_or(d.nodelay),
            cc: self.cc.clone(),
            mss: self.mss,
            cpus: self.cpus.clone().map(|c| c.0),
            agent_cpus: self.agent_cpus.clone().map(|c| c.0),
            zerocopy: self.zerocopy.unwrap_or(d.zerocopy),
            spin: self.spin.unwrap_or(d.spin),
            ipv6: self.ipv6.unwrap_or(d.ipv6),
            close: self.close.unwrap_or(d.close),
            tls: self.tls_spec(facts)?,
            window: self.window.unwrap_or_default(),
            rtt_s: self.rtt.map(|s| s.0),
            clients: self.clients,
            exec: program.then(|| ExecSpec {
                command: self.command.clone().unwrap_or_default(),
                server_command: self
                    .server_command
                    .as_ref()
                    .map(|c| vec!["sh".into(), "-c".into(), c.clone()]),
                sshd: self.sshd.unwrap_or(false) || facts.sshd,
            }),
            kv: self.kv_spec(facts)?,
            lab: self.lab.clone().filter(|l| !l.is_empty()),
            sysctl: self.sysctl.clone().unwrap_or_default(),
            nic: crate::model::nic::normalize_all(&self.nic.clone().unwrap_or_default())?,
            crypto_hw: self.crypto_hw.is_none_or(|s| s.0),
            rrul,
            ports: self.ports,
            firewall: match &self.firewall {
                Some(f) if !f.is_empty() => Some(f.resolve()?),
                _ => None,
            },
            cipher: (facts.section == Section::Cipher).then(|| crate::model::cipher::CipherSpec {
                algorithm: self.cipher.clone().unwrap_or_else(|| "aes256-gcm".into()),
            }),
            search: self.search_spec()?,
            auto: self.auto_spec()?,
            rate_ramp_s: self.rate_ramp.map(|s| s.0),
            arrivals: self.arrivals.unwrap_or_default(),
            pacing: self.pacing.unwrap_or(crate::model::spec::Pacing::Auto),
        };
        self.resolve_defaults(&mut spec, facts);
        spec.validate()?;
        Ok(spec)
    }

    /// The flows asked for: `flows`, or `flows_per_port` times `ports`
    /// (which it needs, and which `flows` may not join).
    fn flows_for_ports(&self) -> Result<Option<u32>, Invalid> {
        let Some(per) = self.flows_per_port else {
            return Ok(self.flows);
        };
        if self.flows.is_some() {
            return Err(
                "--flows and --flows-per-port both set the flows: give one (flows = ports x flows-per-port)"
                    .into(),
            );
        }
        let Some(ports) = self.ports else {
            return Err("--flows-per-port needs --ports N: the flows are N x its value".into());
        };
        if per == 0 {
            return Err("--flows-per-port must be at least 1".into());
        }
        Ok(Some(ports.saturating_mul(per)))
    }

    /// Options that a test of `workload` cannot take whatever else is set:
    /// pacing outside an open loop, a program's options on flows.
    fn refuse_out_of_place(&self, facts: &KindFacts) -> Result<(), Invalid> {
        let program = facts.program;
        if self.pacing.is_some() && ((self.rate.is_none() && self.search.is_none()) || !facts.paced)
        {
            return Err(
                "--pacing says how an open loop waits for its sends: rr, udp-rr or memcache with --rate (or --search)"
                    .into(),
            );
        }
        if self.rx_poll.is_some_and(|p| p != RxPoll::Auto) && !facts.rx_poll {
            return Err(
                "--rx-poll says how a stream's lone receiver waits for data: it applies to stream"
                    .into(),
            );
        }
        if !program
            && (self.sshd == Some(true)
                || self.server_command.is_some()
                || self.command.as_ref().is_some_and(|c| !c.is_empty()))
        {
            return Err(
                "--sshd, --server-cmd and a command after -- apply to the exec workload".into(),
            );
        }
        Ok(())
    }

    /// What the spec's other fields decide: cipher's record size, the read
    /// size, the I/O mode and its workers.
    fn resolve_defaults(&self, spec: &mut TestSpec, facts: &KindFacts) {
        // Resolved here so the result records the size that was used.
        if spec.read_size == 0 && !facts.datagrams && !facts.program {
            spec.read_size = spec.default_read_size();
        }
        spec.io = match self.io {
            Some(io) => io,
            // A search's steps are open loops: the event loop's timers.
            None if spec.search.is_some() => IoMode::Epoll,
            None => spec.default_io(facts.threads_when_closed),
        };
        if spec.io == IoMode::Threads && self.workers.is_none() && self.agent_workers.is_none() {
            spec.workers = spec.flows;
            spec.agent_workers = spec.flows;
        }
    }

    /// `--search`'s spec: the target, its resolution, and the samples a
    /// step needs (more when a confidence target was given).
    fn search_spec(&self) -> Result<Option<crate::model::search::SearchSpec>, Invalid> {
        let Some(target) = self.search else {
            if self.search_resolution.is_some() {
                return Err("--search-resolution needs --search".into());
            }
            return Ok(None);
        };
        if self.rate.is_some() {
            return Err("--search chooses the offered rate itself: drop --rate".into());
        }
        let min_window = match self.duration {
            Some(Length::Auto) => {
                return Err(
                    "--search sizes each step itself (enough samples for the percentile): drop --duration auto"
                        .into(),
                )
            }
            Some(Length::Secs(s)) => Some(s),
            None => None,
        };
        let spec = crate::model::search::SearchSpec::new(
            target,
            self.search_resolution
                .unwrap_or(crate::model::search::DEFAULT_RESOLUTION_PCT),
            min_window,
            self.confidence.map(|Target(l, w)| (l, w)),
        )?;
        Ok(Some(spec))
    }

    /// `--duration auto`'s spec: its bound and the confidence target its
    /// mean must meet.
    fn auto_spec(&self) -> Result<Option<crate::model::auto::AutoSpec>, Invalid> {
        if self.duration != Some(Length::Auto) {
            if self.max_duration.is_some() {
                return Err("--max-duration bounds --duration auto: add -d auto".into());
            }
            return Ok(None);
        }
        let c = self.confidence();
        let bound_s = self
            .max_duration
            .map_or(crate::model::auto::DEFAULT_BOUND_S, |s| s.0);
        if bound_s.is_nan() || bound_s <= 0.0 {
            return Err("--max-duration must be above 0".into());
        }
        Ok(Some(crate::model::auto::AutoSpec {
            bound_s,
            level_pct: c.level_pct,
            width_pct: c.width_pct,
        }))
    }

    /// rrul's own options (and the options its groups set themselves,
    /// refused with what to write instead); for another workload, none.
    fn rrul_spec(&self, facts: &KindFacts) -> Result<Option<RrulSpec>, Invalid> {
        if facts.section != Section::Rrul {
            if self.idle.is_some() || self.probe_rate.is_some() || self.streams.is_some() {
                return Err("--idle, --probe-rate and --streams apply to rrul".into());
            }
            return Ok(None);
        }
        let refused = [
            (
                self.flows.is_some(),
                "--flows (its flows are its streams and probes: use --streams N, each way)",
            ),
            (
                self.rate.is_some(),
                "--rate (its probes run at --probe-rate)",
            ),
            (
                self.direction.is_some(),
                "--direction (its streams run both ways)",
            ),
            (
                self.bytes.is_some() || self.per.is_some() || self.reply.is_some(),
                "--bytes, --per or --reply (its streams run for the window)",
            ),
            (self.tls == Some(true), "--tls (its UDP probe has no TLS)"),
            (
                self.groups.is_some(),
                "groups (they are built in; a mix takes groups)",
            ),
        ];
        if let Some((_, why)) = refused.iter().find(|(set, _)| *set) {
            return Err(format!("rrul takes no {why}").into());
        }
        let d = RrulSpec::default();
        let r = RrulSpec {
            idle_s: self.idle.map_or(d.idle_s, |s| s.0),
            probe_rate: self.probe_rate.map_or(d.probe_rate, |c| c.0),
            streams: self.streams.unwrap_or(d.streams),
        };
        Ok(Some(r))
    }

    fn kv_spec(&self, facts: &KindFacts) -> Result<Option<KvSpec>, Invalid> {
        if facts.section != Section::Kv {
            let set = [
                (self.service.is_some(), "--service"),
                (self.target.is_some(), "--target"),
                (self.keys.is_some(), "--keys"),
                (self.key_size.is_some(), "--key-size"),
                (self.zipf.is_some(), "--zipf"),
                (self.values.is_some(), "--values"),
                (self.get_set.is_some(), "--get-set"),
                (self.multiget.is_some(), "--multiget"),
                (self.protocol.is_some(), "--protocol"),
            ];
            if let Some((_, name)) = set.iter().find(|(on, _)| *on) {
                return Err(format!("{name} applies to memcache").into());
            }
            return Ok(None);
        }
        let d = KvSpec::default();
        let keys = match self.keys {
            Some(Count(k)) if k < 1.0 || k.fract() != 0.0 || k > 1e9 => {
                return Err(format!("--keys {k}: a whole number from 1 to 1G").into())
            }
            Some(Count(k)) => k as u64,
            None => d.keys,
        };
        let GetSet(gets, sets) = self.get_set.unwrap_or(GetSet(d.gets, d.sets));
        Ok(Some(KvSpec {
            service: match (&self.service, &self.target) {
                (None, Some(_)) => None,
                (s, _) => Some(s.clone().unwrap_or_else(|| d.service.clone().unwrap())),
            },
            target: self.target.clone(),
            keys,
            key_size: self.key_size.map(|k| k as usize).unwrap_or(d.key_size),
            zipf: self.zipf,
            values: self.values.clone().unwrap_or(d.values),
            gets,
            sets,
            multiget: self.multiget.unwrap_or(d.multiget),
            dialect: self.protocol.unwrap_or_default(),
        }))
    }

    fn tls_spec(&self, facts: &KindFacts) -> Result<Option<TlsSpec>, Invalid> {
        let on = self.tls.unwrap_or(false) || facts.tls_always;
        if !on {
            // TLS keys apply to the points where tls = true, so one base test
            // can serve a clear/TLS sweep; only the command line, where they
            // are typed together, calls them a mistake (`tls_keys_without_tls`).
            return Ok(None);
        }
        let d = TlsSpec::default();
        Ok(Some(TlsSpec {
            backend: self.backend.unwrap_or_default(),
            cipher: self.cipher.clone(),
            version: self.tls_version.clone(),
            kx: self.kx.clone().unwrap_or(d.kx),
            cert: self.cert.unwrap_or_default(),
            resume: self.resume.is_some_and(|s| s.0),
            etm: self.etm.map(|s| s.0),
            server_name: self.tls_name.clone().unwrap_or(d.server_name),
            ca_file: self.tls_ca.clone(),
        }))
    }

    /// The first TLS option set without TLS being on, if any: on a command
    /// line that is a mistake worth naming.
    pub fn tls_keys_without_tls(&self, facts: &KindFacts) -> Option<&'static str> {
        // tls-handshake is TLS; cipher's --cipher is its algorithm.
        if self.tls == Some(true) || facts.tls_always || facts.section == Section::Cipher {
            return None;
        }
        [
            (self.cipher.is_some(), "--cipher"),
            (self.tls_version.is_some(), "--tls-version"),
            (self.kx.is_some(), "--kx"),
            (self.etm.is_some(), "--etm"),
            (self.tls_name.is_some(), "--tls-name"),
            (self.tls_ca.is_some(), "--tls-ca"),
            (self.resume == Some(Switch(true)), "--resume"),
            (self.backend == Some(TlsBackend::Openssl), "--backend"),
        ]
        .into_iter()
        .find_map(|(set, name)| set.then_some(name))
    }

    /// The iteration policy (`iterations`, `confidence`), default one run.
    pub fn confidence(&self) -> Confidence {
        let mut c = Confidence::default();
        if let Some(Iterations(min, max)) = self.iterations {
            c.min = min;
            c.max = max;
        }
        if let Some(Target(level, width)) = self.confidence {
            c.level_pct = level;
            c.width_pct = width;
        }
        c
    }
}
