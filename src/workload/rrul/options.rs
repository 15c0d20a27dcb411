//! rrul's options: its idle phase, its probes and its streams.

use super::params::{RrulSpec, SECTION};
use crate::model::error::Invalid;
use crate::model::kind::{KindFacts, Section};
use crate::model::options::{Count, KindOptions, OwnSection, Secs, TestOptions};
use clap::Args;
use serde::{Deserialize, Serialize};

// Its flags and study keys join `TestOptions` (`model::options::own`).
inventory::submit!(OwnSection::of::<RrulOptions>());

/// Flattened into `TestOptions` (keys and flags as written here).
#[derive(Args, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[command(next_help_heading = "Latency under load (rrul)")]
pub struct RrulOptions {
    /// rrul: seconds the probes run alone before the streams start [default: 3s].
    #[arg(long, value_parser = Secs::parse, value_name = "DURATION")]
    pub idle: Option<Secs>,
    /// rrul: each probe's rate (rr and udp-rr, open loop), requests/s [default: 20].
    #[arg(long, value_parser = Count::parse, value_name = "RATE")]
    pub probe_rate: Option<Count>,
    /// rrul: TCP streams each way [default: 4].
    #[arg(long, value_name = "N")]
    pub streams: Option<u32>,
}

impl KindOptions for RrulOptions {
    const KEY: &'static str = SECTION;
    type Spec = RrulSpec;

    /// rrul's own options (and the options its groups set themselves,
    /// refused with what to write instead); for another workload, none.
    fn spec(&self, o: &TestOptions, facts: &KindFacts) -> Result<Option<RrulSpec>, Invalid> {
        if facts.section != Section::Own(SECTION) {
            if self.idle.is_some() || self.probe_rate.is_some() || self.streams.is_some() {
                return Err("--idle, --probe-rate and --streams apply to rrul".into());
            }
            return Ok(None);
        }
        let refused = [
            (
                o.run.flows.is_some(),
                "--flows (its flows are its streams and probes: use --streams N, each way)",
            ),
            (
                o.load.rate.is_some(),
                "--rate (its probes run at --probe-rate)",
            ),
            (
                o.stream.direction.is_some(),
                "--direction (its streams run both ways)",
            ),
            (
                o.stream.bytes.is_some() || o.stream.per.is_some() || o.stream.reply.is_some(),
                "--bytes, --per or --reply (its streams run for the window)",
            ),
            (o.tls.on == Some(true), "--tls (its UDP probe has no TLS)"),
            (
                o.run.groups.is_some(),
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

    /// Its flows are its probes' and its streams'.
    fn flows(r: &RrulSpec) -> Option<u32> {
        Some(2 * r.streams + 2)
    }

    /// Its flags off their defaults.
    fn flags(r: &RrulSpec) -> Vec<String> {
        let d = RrulSpec::default();
        [
            (r.idle_s != d.idle_s, format!("--idle {}", r.idle_s)),
            (
                r.probe_rate != d.probe_rate,
                format!("--probe-rate {}", r.probe_rate),
            ),
            (r.streams != d.streams, format!("--streams {}", r.streams)),
        ]
        .into_iter()
        .filter_map(|(set, f)| set.then_some(f))
        .collect()
    }
}
