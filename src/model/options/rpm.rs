//! rpm's options: where its server is, how the directions are loaded, and
//! the draft's parameters (draft-ietf-ippm-responsiveness, "Parameters"),
//! each under the draft's own abbreviation.

use super::super::error::Invalid;
use super::super::kind::{KindFacts, Section};
use super::super::rpm::{RpmOrder, RpmSpec};
use super::values::{parse_pct, Secs};
use clap::Args;
use serde::{Deserialize, Serialize};

/// Flattened into `TestOptions` (keys and flags as written here).
#[derive(Args, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[command(next_help_heading = "Responsiveness (rpm)")]
pub struct RpmOptions {
    /// rpm: the server's configuration URL (https://HOST:PORT/.well-known/nq, as `serve --rpm` prints it, or any RPM server's) [default: a server this run starts on loopback].
    #[arg(long, value_name = "URL")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// rpm: load upload and download at once (parallel) or one after the other (sequential) [default: parallel].
    #[arg(long, value_enum, value_name = "HOW")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm_order: Option<RpmOrder>,
    /// rpm: MAD, the intervals each moving average spans [default: 4].
    #[arg(long, value_name = "N")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mad: Option<u32>,
    /// rpm: ID, one interval of the method [default: 1s].
    #[arg(long, value_parser = Secs::parse, value_name = "DURATION")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm_interval: Option<Secs>,
    /// rpm: TMP, the trimmed means keep the lowest this percent of the probes [default: 95%].
    #[arg(long, value_parser = parse_pct, value_name = "PCT")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tmp: Option<f64>,
    /// rpm: SDT, a moving average is stable when the standard deviation of the last MAD is within this percent of their mean [default: 5%].
    #[arg(long, value_parser = parse_pct, value_name = "PCT")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sdt: Option<f64>,
    /// rpm: MNP, the most load-generating connections each way [default: 16].
    #[arg(long, value_name = "N")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mnp: Option<u32>,
    /// rpm: MPS, the most probes per second [default: 100].
    #[arg(long, value_name = "N")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mps: Option<u32>,
    /// rpm: PTC, the share of the load's goodput the probes may take [default: 5%].
    #[arg(long, value_parser = parse_pct, value_name = "PCT")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ptc: Option<f64>,
    /// rpm: clear HTTP/2 to the server this run starts (no TLS) [default: TLS].
    #[arg(long, action = clap::ArgAction::SetTrue)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm_clear: Option<bool>,
}

impl RpmOptions {
    /// rpm's spec, the draft's defaults where nothing is given; for another
    /// kind none, and any of these refused.
    pub fn spec(&self, facts: &KindFacts) -> Result<Option<RpmSpec>, Invalid> {
        if facts.section != Section::Rpm {
            // A switch reads as Some(false) from a command line that
            // lacks it: only Some(true) is set.
            let set = RpmOptions {
                rpm_clear: self.rpm_clear.filter(|c| *c),
                ..self.clone()
            };
            if set != RpmOptions::default() {
                return Err(
                    "--url, --rpm-order, --mad, --rpm-interval, --tmp, --sdt, --mnp, --mps, --ptc and --rpm-clear apply to rpm"
                        .into(),
                );
            }
            return Ok(None);
        }
        let d = RpmSpec::default();
        let s = RpmSpec {
            url: self.url.clone(),
            order: self.rpm_order.unwrap_or(d.order),
            mad: self.mad.unwrap_or(d.mad),
            interval_s: self.rpm_interval.map_or(d.interval_s, |s| s.0),
            tmp_pct: self.tmp.unwrap_or(d.tmp_pct),
            sdt_pct: self.sdt.unwrap_or(d.sdt_pct),
            mnp: self.mnp.unwrap_or(d.mnp),
            mps: self.mps.unwrap_or(d.mps),
            ptc_pct: self.ptc.unwrap_or(d.ptc_pct),
            clear: self.rpm_clear.unwrap_or(false),
        };
        if s.clear && s.url.is_some() {
            return Err("--rpm-clear is for the server this run starts; give an http:// --url for a clear one".into());
        }
        s.validate()?;
        Ok(Some(s))
    }
}
