//! The queue discipline before a lab link's bottleneck, as a lab spec
//! records it (`lab up --aqm`, a study's `lab.aqm`).

use serde::{Deserialize, Serialize};

use super::error::ModelError;

/// Which queue discipline holds the packets waiting for a lab link's
/// bottleneck (`lab up --aqm`). The kernel here has neither netem nor
/// fq_codel, so the user-space emulator is where they live.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum AqmKind {
    /// Drop-tail: a packet that would take the queue over its limit is dropped.
    #[default]
    Fifo,
    /// CoDel (RFC 8289): drops (or ECN-marks) at dequeue once the sojourn
    /// time stayed above `target` for an `interval`, ever more often while it stays.
    Codel,
    /// FQ-CoDel (RFC 8290): flows hashed into 1024 queues, served by deficit
    /// round robin (quantum one MTU) with new flows first, CoDel on each.
    FqCodel,
}

impl AqmKind {
    pub fn name(self) -> &'static str {
        match self {
            AqmKind::Fifo => "fifo",
            AqmKind::Codel => "codel",
            AqmKind::FqCodel => "fq_codel",
        }
    }
}

impl std::str::FromStr for AqmKind {
    type Err = ModelError;
    fn from_str(s: &str) -> Result<Self, ModelError> {
        match s {
            "fifo" | "droptail" | "drop-tail" => Ok(AqmKind::Fifo),
            "codel" => Ok(AqmKind::Codel),
            "fq_codel" | "fq-codel" | "fqcodel" => Ok(AqmKind::FqCodel),
            _ => Err(ModelError::Form {
                input: s.into(),
                form: "fifo, codel or fq_codel",
            }),
        }
    }
}

/// A queue discipline and its parameters (the same for both directions).
/// CoDel's defaults are the RFC's (target 5 ms, interval 100 ms); ECN is on
/// as in Linux's fq_codel: an ECN-capable (ECT) IPv4 packet is marked CE
/// where it would have been dropped (IPv6 ones are dropped: the mark is set
/// by an iptables TOS rule, which is IPv4 only).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Aqm {
    pub kind: AqmKind,
    pub target_us: u64,
    pub interval_us: u64,
    pub ecn: bool,
}

impl Default for Aqm {
    fn default() -> Self {
        Aqm {
            kind: AqmKind::Fifo,
            target_us: 5_000,
            interval_us: 100_000,
            ecn: true,
        }
    }
}

impl Aqm {
    /// "fifo", or "fq_codel (target 5 ms, interval 100 ms, ecn)".
    pub fn describe(&self) -> String {
        if self.kind == AqmKind::Fifo {
            return "fifo".into();
        }
        format!(
            "{} (target {} ms, interval {} ms{})",
            self.kind.name(),
            trim(self.target_us as f64 / 1e3),
            trim(self.interval_us as f64 / 1e3),
            if self.ecn { ", ecn" } else { ", no ecn" }
        )
    }
}

pub(super) fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}
