//! memcache's options: the service it loads and the mix it sends.

use super::params::{KvDialect, KvSpec, SECTION};
use crate::model::error::Invalid;
use crate::model::kind::{KindFacts, Section};
use crate::model::options::{Count, GetSet, KindOptions, OwnSection, TestOptions};
use clap::Args;
use serde::{Deserialize, Serialize};

// Its flags and study keys join `TestOptions` (`model::options::own`).
inventory::submit!(OwnSection::of::<KvOptions>());

/// Flattened into `TestOptions` (keys and flags as written here).
#[derive(Args, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[command(next_help_heading = "Key-value load (memcache)")]
pub struct KvOptions {
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
}

impl KindOptions for KvOptions {
    const KEY: &'static str = SECTION;
    type Spec = KvSpec;

    /// memcache's spec, its defaults where nothing is given; for another
    /// kind none, and any of these refused.
    fn spec(&self, _: &TestOptions, facts: &KindFacts) -> Result<Option<KvSpec>, Invalid> {
        if facts.section != Section::Own(SECTION) {
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

    /// memcache's flags that differ from their defaults.
    fn flags(kv: &KvSpec) -> Vec<String> {
        let dk = KvSpec::default();
        let mut a = Vec::new();
        let mut flag = |cond: bool, s: String| {
            if cond {
                a.push(s);
            }
        };
        if let Some(sv) = kv
            .service
            .as_ref()
            .filter(|s| Some(*s) != dk.service.as_ref())
        {
            let q = if sv.contains(' ') { "'" } else { "" };
            flag(true, format!("--service {q}{sv}{q}"));
        }
        if let Some(t) = &kv.target {
            flag(true, format!("--target {t}"));
        }
        flag(kv.keys != dk.keys, format!("--keys {}", kv.keys));
        flag(
            kv.key_size != dk.key_size,
            format!("--key-size {}", kv.key_size),
        );
        if let Some(z) = kv.zipf {
            flag(true, format!("--zipf {z}"));
        }
        flag(kv.values != dk.values, format!("--values {}", kv.values));
        flag(
            (kv.gets, kv.sets) != (dk.gets, dk.sets),
            format!("--get-set {}:{}", kv.gets, kv.sets),
        );
        flag(
            kv.multiget != dk.multiget,
            format!("--multiget {}", kv.multiget),
        );
        flag(kv.dialect == KvDialect::Meta, "--protocol meta".into());
        a
    }
}
