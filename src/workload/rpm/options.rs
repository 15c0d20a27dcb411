//! rpm's options: where its server is, how the directions are loaded, and
//! the draft's parameters (draft-ietf-ippm-responsiveness, "Parameters"),
//! each under the draft's own abbreviation.

use super::params::{RpmOrder, RpmSpec, SECTION};
use crate::model::error::Invalid;
use crate::model::kind::{KindFacts, Section};
use crate::model::options::{parse_pct, KindOptions, OwnSection, Secs, TestOptions};
use clap::Args;
use serde::{Deserialize, Serialize};

// Its flags and study keys join `TestOptions` (`model::options::own`).
inventory::submit!(OwnSection::of::<RpmOptions>());

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

impl KindOptions for RpmOptions {
    const KEY: &'static str = SECTION;
    type Spec = RpmSpec;

    /// rpm's spec, the draft's defaults where nothing is given; for another
    /// kind none, and any of these refused.
    fn spec(&self, _: &TestOptions, facts: &KindFacts) -> Result<Option<RpmSpec>, Invalid> {
        if facts.section != Section::Own(SECTION) {
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
            trust_der: Vec::new(),
            load_bps: None,
        };
        if s.clear && s.url.is_some() {
            return Err("--rpm-clear is for the server this run starts; give an http:// --url for a clear one".into());
        }
        s.validate()?;
        Ok(Some(s))
    }

    /// rpm's flags that differ from the draft's defaults.
    fn flags(r: &RpmSpec) -> Vec<String> {
        let d = RpmSpec::default();
        let mut a = Vec::new();
        let mut flag = |cond: bool, s: String| {
            if cond {
                a.push(s);
            }
        };
        if let Some(u) = &r.url {
            flag(true, format!("--url {u}"));
        }
        flag(
            r.order == RpmOrder::Sequential,
            "--rpm-order sequential".into(),
        );
        flag(r.mad != d.mad, format!("--mad {}", r.mad));
        flag(
            r.interval_s != d.interval_s,
            format!("--rpm-interval {}", r.interval_s),
        );
        flag(r.tmp_pct != d.tmp_pct, format!("--tmp {}", r.tmp_pct));
        flag(r.sdt_pct != d.sdt_pct, format!("--sdt {}", r.sdt_pct));
        flag(r.mnp != d.mnp, format!("--mnp {}", r.mnp));
        flag(r.mps != d.mps, format!("--mps {}", r.mps));
        flag(r.ptc_pct != d.ptc_pct, format!("--ptc {}", r.ptc_pct));
        flag(r.clear, "--rpm-clear".into());
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::model::options::read_toml as read;

    #[test]
    fn its_keys_reach_it_through_the_registry_and_a_bad_value_names_its_line() {
        let o = read("flows = 2\nmad = 6\nrpm_order = \"sequential\"\ntmp = 90\n").unwrap();
        let r: RpmOptions = o.own.get();
        assert_eq!(r.mad, Some(6));
        assert_eq!(r.rpm_order, Some(RpmOrder::Sequential));
        assert_eq!(r.tmp, Some(90.0));
        // Written flat, among the common keys, and read back the same.
        let json = serde_json::to_string(&o).unwrap();
        assert!(
            json.contains("\"mad\":6") && json.contains("\"flows\":2"),
            "{json}"
        );
        let back: TestOptions = serde_json::from_str(&json).unwrap();
        assert_eq!(back, o);
        let e = read("flows = 2\n\nmad = \"four\"\n").unwrap_err();
        assert!(e.starts_with("3: "), "{e}");
        // A later layer's key wins, an unset one keeps the base's.
        let top = read("mps = 50\n").unwrap();
        let both: RpmOptions = o.overlay(&top).own.get();
        assert_eq!((both.mad, both.mps), (Some(6), Some(50)));
        // A study may sweep them.
        for k in ["mad", "rpm_order", "mnp", "url"] {
            assert!(crate::model::options::is_axis(k), "{k}");
        }
    }

    #[test]
    fn it_builds_the_spec_section_only_for_its_kind() {
        let facts = |s| KindFacts {
            section: s,
            ..KindFacts::NONE
        };
        let mut o = TestOptions::default();
        o.own.put(&RpmOptions {
            mad: Some(3),
            ..Default::default()
        });
        let spec = o.build(&facts(Section::Own(SECTION))).unwrap();
        let r = RpmSpec::of(&spec).unwrap();
        assert_eq!((r.mad, r.mnp), (3, RpmSpec::default().mnp));
        // The JSON keeps the section under its key, among the spec's.
        let v = serde_json::to_value(&spec).unwrap();
        assert_eq!(v["rpm"]["mad"], 3);
        let e = o.build(&facts(Section::None)).unwrap_err().to_string();
        assert!(e.contains("apply to rpm"), "{e}");
        // Nothing of rpm's set: another kind's spec has no rpm section.
        let plain = TestOptions::default().build(&facts(Section::None)).unwrap();
        assert!(RpmSpec::of(&plain).is_err());
    }

    #[test]
    fn its_flags_join_the_command_line_under_their_heading() {
        use clap::CommandFactory;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            o: TestOptions,
        }
        let cmd = Cli::command();
        let mad = cmd
            .get_arguments()
            .find(|a| a.get_id() == "mad")
            .expect("--mad is a flag");
        assert_eq!(mad.get_help_heading(), Some("Responsiveness (rpm)"));
        let cli =
            <Cli as clap::Parser>::try_parse_from(["x", "--mad", "7", "--rpm-clear"]).unwrap();
        let r: RpmOptions = cli.o.own.get();
        assert_eq!((r.mad, r.rpm_clear), (Some(7), Some(true)));
    }
}
