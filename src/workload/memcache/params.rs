//! memcache as data: the spec's section `kv` (where memcached is, and
//! the mix the clients send), the figures an iteration and the summary
//! carry under `kv` (and the summary's `hit_ratio`), and each client
//! flow's counts under `kv` in its report (docs/result-schema.md). The
//! schema carries all of them as the kind's own (`model::own`).

use serde::{Deserialize, Serialize};

use crate::model::error::Invalid;
use crate::model::own::Own;
use crate::model::sample::{KvPrefill, LatencySummary, ServiceWindow};
use crate::model::spec::TestSpec;

/// The spec's, the results' and the flow reports' section.
pub const SECTION: &str = "kv";
/// The summary's hit ratio over every iteration (beside its `kv`).
pub const HIT_RATIO: &str = "hit_ratio";

/// Which memcached commands carry the load.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum KvDialect {
    /// get / set (the classic text protocol).
    #[default]
    Text,
    /// mg / ms (meta commands, memcached >= 1.6).
    Meta,
}

/// A memcache test: where memcached is, and what the clients ask of it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct KvSpec {
    /// The memcached command line the agent starts on its host, e.g.
    /// "memcached -t 4 -m 1024" (linerate adds the address and port).
    /// None: `target`.
    pub service: Option<String>,
    /// An existing memcached, host:port (no server process to measure).
    pub target: Option<String>,
    /// Keys in the key space, each set before the window.
    pub keys: u64,
    /// Bytes per key.
    pub key_size: usize,
    /// Key popularity: zipf with this exponent (None: uniform).
    pub zipf: Option<f64>,
    /// Value sizes: "1K", "1K-2K", or a weighted mix "4-100,1K-2K,5K-20K".
    pub values: String,
    /// Gets and sets in this ratio (9:1 = 90% gets).
    pub gets: u32,
    pub sets: u32,
    /// Keys per get command (multi-get).
    pub multiget: u32,
    pub dialect: KvDialect,
}

impl Default for KvSpec {
    fn default() -> Self {
        KvSpec {
            service: Some("memcached".into()),
            target: None,
            keys: 10_000,
            key_size: 16,
            zipf: None,
            values: "1K".into(),
            gets: 9,
            sets: 1,
            multiget: 1,
            dialect: KvDialect::Text,
        }
    }
}

impl KvSpec {
    /// Checks what a flag alone cannot; the value sizes, key space and
    /// service command are the workload's to parse (`workload::memcache`).
    pub fn validate(&self) -> Result<(), Invalid> {
        if self.gets == 0 && self.sets == 0 {
            return Err("--get-set 0:0 asks for no operation: use e.g. 9:1".into());
        }
        if !(1..=100).contains(&self.multiget) {
            return Err("--multiget is 1 to 100 keys per get".into());
        }
        match (&self.service, &self.target) {
            (Some(_), Some(_)) => Err("--service and --target exclude each other".into()),
            (None, None) => Err("memcache needs --service memcached or --target HOST:PORT".into()),
            _ => Ok(()),
        }
    }
}

impl KvSpec {
    /// A spec's memcache section.
    pub fn of(spec: &TestSpec) -> Result<KvSpec, String> {
        spec.own.need(SECTION, "memcache needs its key-value mix")
    }
}

/// What a memcache test measured over its window (client side, with the
/// server's own counts beside it).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct KvFigures {
    /// Keys asked for by gets plus sets done, per second (memcached's
    /// cmd_get + cmd_set); `summary.transactions_per_s` is the same figure.
    pub ops_per_s: f64,
    pub gets_per_s: f64,
    pub sets_per_s: f64,
    pub gets: u64,
    pub sets: u64,
    pub hits: u64,
    pub misses: u64,
    /// hits / (hits + misses); None without gets.
    pub hit_ratio: Option<f64>,
    /// Values whose length or content was not what their key and version
    /// say was set (corruption, truncation, another writer).
    pub bad_values: u64,
    /// ERROR / CLIENT_ERROR / SERVER_ERROR replies.
    pub errors: u64,
    /// The first bad value or error reply, as seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_problem: Option<String>,
    /// Per request (a multi-get is one), µs.
    pub get_latency_us: Option<LatencySummary>,
    pub set_latency_us: Option<LatencySummary>,
    /// Open loop: from each request's intended send time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub get_corrected_us: Option<LatencySummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_corrected_us: Option<LatencySummary>,
    /// Bytes/s the clients sent (requests, values set) and received.
    pub sent_bps: f64,
    pub received_bps: f64,
    /// CPU µs per operation: the clients' process, and memcached's.
    pub client_us_per_op: Option<f64>,
    pub server_us_per_op: Option<f64>,
    /// The prefill before the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill: Option<KvPrefill>,
    /// memcached's own `stats` over the window (when an agent started it,
    /// or read from the client for --target).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServiceWindow>,
}

impl KvFigures {
    /// An iteration's or a summary's memcache figures, if it has them.
    pub fn of(own: &Own) -> Option<KvFigures> {
        own.get(SECTION)
    }
}

/// One memcache connection over the window: its operations, and the
/// latency of its gets and of its sets kept apart (HDR, hex V2), so that
/// the controller merges them over flows and hosts exactly. The result
/// keeps the merged summaries; per-flow histograms are dropped after.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct KvFlowStats {
    pub gets: u64,
    pub sets: u64,
    pub hits: u64,
    pub misses: u64,
    pub bad_values: u64,
    pub errors: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub get_latency: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_latency: Option<String>,
    /// Open loop: from each request's intended send time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub get_corrected: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_corrected: Option<String>,
    /// The first value that failed verification or error reply, as seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_problem: Option<String>,
}
