//! The responsiveness test's spec and figures (`rpm`:
//! draft-ietf-ippm-responsiveness, "Responsiveness under Working
//! Conditions"): the draft's parameters, with its defaults (the spec's
//! section `rpm`), and what a run reports (`summary.responsiveness` in the
//! JSON, docs/result-schema.md). The schema carries both as the kind's own
//! sections (`model::own`), under `SECTION` and `FIGURES`.

use serde::{Deserialize, Serialize};

use crate::model::error::Invalid;

/// The draft revision the method follows.
pub const DRAFT: &str = "draft-ietf-ippm-responsiveness-08";

/// The spec's section (`spec.own`) that holds `RpmSpec`.
pub const SECTION: &str = "rpm";
/// The iteration's and summary's section that holds `Responsiveness`.
pub const FIGURES: &str = "responsiveness";

/// How the two directions are loaded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum RpmOrder {
    /// Upload and download at once (the draft's default, networkQuality's).
    #[default]
    Parallel,
    /// Download first, then upload, each measured on its own.
    Sequential,
}

/// The draft's parameters (section "Parameters"), names as it writes them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RpmSpec {
    /// The server's configuration URL (`https://HOST:PORT/.well-known/nq`);
    /// None: a server this run starts on loopback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    pub order: RpmOrder,
    /// MAD: intervals in the moving averages.
    pub mad: u32,
    /// ID: one interval, seconds.
    pub interval_s: f64,
    /// TMP: the trimmed mean keeps the lowest this many percent.
    pub tmp_pct: f64,
    /// SDT: a moving average is stable when the standard deviation of the
    /// last MAD of them is within this percent of their mean.
    pub sdt_pct: f64,
    /// MNP: most load-generating connections each way.
    pub mnp: u32,
    /// MPS: most probes per second (foreign and self together).
    pub mps: u32,
    /// PTC: percent of the load's goodput the probes may use.
    pub ptc_pct: f64,
    /// Clear HTTP/2 (h2c, prior knowledge) to the local server, not TLS.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub clear: bool,
    /// Certificates (DER) the client trusts for `url`, carried in the spec
    /// to the client agents of a fleet: the certificate of the server this
    /// test started, or `--tls-ca`'s read on the controller's host (the
    /// clients' hosts hold no file of it). Empty: `--tls-ca` or the
    /// system's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trust_der: Vec<Vec<u8>>,
    /// The load's goodput each way at most, bits/s (`--rate 50mbit`, or a
    /// search's step): the spec's bit rate, read here (`RpmSpec::of`), so
    /// not stored twice. None: the draft's saturating load.
    #[serde(skip)]
    pub load_bps: Option<f64>,
}

impl Default for RpmSpec {
    fn default() -> Self {
        RpmSpec {
            url: None,
            order: RpmOrder::Parallel,
            mad: 4,
            interval_s: 1.0,
            tmp_pct: 95.0,
            sdt_pct: 5.0,
            mnp: 16,
            mps: 100,
            ptc_pct: 5.0,
            clear: false,
            trust_der: Vec::new(),
            load_bps: None,
        }
    }
}

impl RpmSpec {
    /// A spec's rpm section.
    pub fn of(spec: &crate::model::spec::TestSpec) -> Result<RpmSpec, String> {
        let mut r: RpmSpec = spec.own.need(SECTION, "rpm needs its parameters")?;
        r.load_bps = spec.rate_bps;
        Ok(r)
    }

    pub fn validate(&self) -> Result<(), Invalid> {
        let pct = |v: f64| v > 0.0 && v <= 100.0;
        if self.mad < 2 || self.mad > 100 {
            return Err(format!("--mad {}: from 2 to 100 intervals", self.mad).into());
        }
        if !(self.interval_s >= 0.05 && self.interval_s <= 10.0) {
            return Err("--rpm-interval: from 50ms to 10s".into());
        }
        if !pct(self.tmp_pct) || !pct(self.sdt_pct) || !pct(self.ptc_pct) {
            return Err("--tmp, --sdt and --ptc are percentages above 0, at most 100".into());
        }
        if self.mnp == 0 || self.mnp > 256 {
            return Err(format!("--mnp {}: from 1 to 256 connections", self.mnp).into());
        }
        if self.mps == 0 || self.mps > 10_000 {
            return Err(format!("--mps {}: from 1 to 10000 probes/s", self.mps).into());
        }
        if let Some(b) = self.load_bps {
            if !(b >= crate::model::search::RPM_SLOWEST_BPS && b.is_finite()) {
                return Err(format!(
                    "--rate {}: rpm's load is at least {} each way",
                    crate::units::fmt_bps(b),
                    crate::units::fmt_bps(crate::model::search::RPM_SLOWEST_BPS)
                )
                .into());
            }
        }
        if let Some(u) = &self.url {
            if !(u.starts_with("https://") || u.starts_with("http://")) {
                return Err(format!("--url {u}: an http:// or https:// URL").into());
            }
        }
        Ok(())
    }
}

/// The draft's words for an RPM (its section "Interpreting the
/// results"): under 300 Poor, under 1000 Fair, under 6000 Good, else
/// Excellent.
pub fn rating(rpm: f64) -> &'static str {
    if rpm < 300.0 {
        "Poor"
    } else if rpm < 1000.0 {
        "Fair"
    } else if rpm < 6000.0 {
        "Good"
    } else {
        "Excellent"
    }
}

/// How far the draft's stability tests got: both moving averages stable
/// (high), one of them (medium), neither within the test's time (low).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    Low,
    Medium,
    High,
}

impl Confidence {
    /// The lower of two.
    pub fn min(self, other: Confidence) -> Confidence {
        let rank = |c: Confidence| match c {
            Confidence::Low => 0,
            Confidence::Medium => 1,
            Confidence::High => 2,
        };
        if rank(self) <= rank(other) {
            self
        } else {
            other
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Confidence::Low => "low",
            Confidence::Medium => "medium",
            Confidence::High => "high",
        }
    }
}

impl Responsiveness {
    /// An iteration's or a summary's figures (None: not an rpm result).
    pub fn of(own: &crate::model::own::Own) -> Option<Responsiveness> {
        own.get(FIGURES)
    }
}

/// One interval of the test: what the load carried and the probes saw.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RpmInterval {
    /// Seconds from the start of the loaded phase to this interval's end.
    pub t_s: f64,
    pub down_bps: f64,
    pub up_bps: f64,
    /// Load-generating connections open, each way.
    pub down_connections: u32,
    pub up_connections: u32,
    /// The responsiveness of the probes that ended in this interval (None:
    /// none did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm: Option<f64>,
}

/// `summary.responsiveness`: the draft's figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Responsiveness {
    /// 60,000 / the weighted trimmed means of the probes' round trips (ms).
    pub rpm: f64,
    /// From the foreign probes alone (new connections: TCP, TLS, HTTP).
    pub foreign_rpm: f64,
    /// From the self probes alone (on the load-generating connections).
    pub self_rpm: f64,
    pub confidence: Option<Confidence>,
    /// The round trip of an idle connection's request (median of the probes
    /// before the load, µs).
    pub idle_rtt_us: f64,
    /// Goodput each way at the end (the moving average), bits/s.
    pub capacity_up_bps: f64,
    pub capacity_down_bps: f64,
    /// The trimmed means the RPM came from, µs.
    pub tcp_handshake_us: f64,
    pub tls_handshake_us: f64,
    pub http_foreign_us: f64,
    pub http_self_us: f64,
    /// The self probes on download connections and on upload connections
    /// apart (trimmed means, µs; None: none of that way): the loaded
    /// queue a request waits in is its connection's, so the slower names
    /// the direction whose queue grew.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_self_down_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_self_up_us: Option<f64>,
    /// Probes measured under load: foreign (each a new connection) and self.
    pub foreign_probes: u64,
    pub self_probes: u64,
    /// Most load-generating connections open, each way.
    pub down_connections: u32,
    pub up_connections: u32,
    /// Whether each moving average met the stability test.
    pub goodput_stable: bool,
    pub responsiveness_stable: bool,
    /// The draft revision followed.
    pub draft: String,
    /// The server's configuration URL.
    pub url: String,
    /// Interval by interval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<RpmInterval>,
    /// Several clients at once (`workload::rpm::fleet`): each one's own
    /// figures; the ones above pool them. Empty: one client.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clients: Vec<ClientRpm>,
}

/// One client's figures of a test several clients ran at once.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientRpm {
    /// Its host (the hosts file's name, or the rack's c1..cN).
    pub name: String,
    pub rpm: f64,
    pub foreign_rpm: f64,
    pub self_rpm: f64,
    pub confidence: Option<Confidence>,
    pub idle_rtt_us: f64,
    pub capacity_down_bps: f64,
    pub capacity_up_bps: f64,
}
