//! A kind's own options section, registered from the kind's own file
//! (`inventory::submit!` beside its type under `src/workload/`), so the
//! option set takes its flags and study keys, builds its spec section and
//! writes it back on a command line without a line here naming it.

use clap::{ArgMatches, Args, Command, FromArgMatches};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::OnceLock;

use super::super::error::Invalid;
use super::super::kind::KindFacts;
use super::TestOptions;

/// What a kind's own options section is: clap flags (with their
/// `--help` heading) and serde keys, each optional, built into the
/// kind's spec section.
pub trait KindOptions:
    Args + Serialize + DeserializeOwned + Default + Clone + PartialEq + 'static
{
    /// The key of the spec section it builds (`spec.own`), and the
    /// section its kind names in `KindFacts::section`.
    const KEY: &'static str;
    /// The spec section.
    type Spec: Serialize + DeserializeOwned;

    /// Its spec section for a kind whose facts name `KEY`; for any other
    /// kind None, with any of its options refused.
    /// `all`: every option given (a kind may read a common one: cipher's
    /// algorithm is `--cipher`).
    fn spec(&self, all: &TestOptions, facts: &KindFacts) -> Result<Option<Self::Spec>, Invalid>;

    /// The flags that write `spec` back (those off their defaults).
    fn flags(spec: &Self::Spec) -> Vec<String>;

    /// The flows its spec implies, where they follow from the section
    /// (rrul: its streams and probes) rather than `--flows`.
    fn flows(_spec: &Self::Spec) -> Option<u32> {
        None
    }
}

/// One registered section, its type behind function pointers.
pub struct OwnSection {
    pub key: &'static str,
    augment: fn(Command) -> Command,
    from_matches: fn(&ArgMatches) -> Result<Value, clap::Error>,
    fields: fn() -> &'static [&'static str],
    set: fn(&mut Value, &'static str, Value) -> Result<(), String>,
    spec: fn(&Value, &TestOptions, &KindFacts) -> Result<Option<Value>, Invalid>,
    flags: fn(&Value) -> Vec<String>,
    flows: fn(&Value) -> Option<u32>,
}

inventory::collect!(OwnSection);

impl OwnSection {
    /// The registration of `T`: `inventory::submit!(OwnSection::of::<T>())`.
    pub const fn of<T: KindOptions>() -> OwnSection {
        OwnSection {
            key: T::KEY,
            augment: T::augment_args,
            from_matches: from_matches::<T>,
            fields: super::keys::fields_of::<T>,
            set: set::<T>,
            spec: spec::<T>,
            flags: flags::<T>,
            flows: flows::<T>,
        }
    }

    /// Its study keys.
    pub fn fields(&self) -> &'static [&'static str] {
        (self.fields)()
    }
}

fn typed<T: KindOptions>(v: &Value) -> Result<T, String> {
    T::deserialize(v).map_err(|e| e.to_string())
}

fn from_matches<T: KindOptions>(m: &ArgMatches) -> Result<Value, clap::Error> {
    let t = T::from_arg_matches(m)?;
    serde_json::to_value(t).map_err(|e| clap::Error::raw(clap::error::ErrorKind::InvalidValue, e))
}

fn set<T: KindOptions>(into: &mut Value, key: &'static str, value: Value) -> Result<(), String> {
    let mut t: T = typed(into)?;
    super::keys::set_one(&mut t, key, value).map_err(|e| e.to_string())?;
    *into = serde_json::to_value(t).map_err(|e| e.to_string())?;
    Ok(())
}

fn spec<T: KindOptions>(
    v: &Value,
    all: &TestOptions,
    facts: &KindFacts,
) -> Result<Option<Value>, Invalid> {
    let t: T = typed(v).map_err(Invalid::from)?;
    t.spec(all, facts)?
        .map(|s| serde_json::to_value(s).map_err(|e| Invalid::from(e.to_string())))
        .transpose()
}

fn flags<T: KindOptions>(v: &Value) -> Vec<String> {
    T::Spec::deserialize(v)
        .map(|s| T::flags(&s))
        .unwrap_or_default()
}

fn flows<T: KindOptions>(v: &Value) -> Option<u32> {
    T::Spec::deserialize(v).ok().as_ref().and_then(T::flows)
}

/// Every registered section, by key (a stable order for `--help` and the
/// keys' routing).
pub fn sections() -> &'static [&'static OwnSection] {
    static ALL: OnceLock<Vec<&'static OwnSection>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut v: Vec<&'static OwnSection> = inventory::iter::<OwnSection>().collect();
        v.sort_by_key(|s| s.key);
        v
    })
}

/// The kinds' own options in `TestOptions`: each section's set keys as
/// JSON, by section key. Written out flat (the keys are one space with the
/// common options'); read in through `keys` (each key to its section).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OwnOptions(BTreeMap<&'static str, Value>);

impl OwnOptions {
    /// The section `T`, its defaults where nothing is set.
    pub fn get<T: KindOptions>(&self) -> T {
        self.0
            .get(T::KEY)
            .and_then(|v| T::deserialize(v).ok())
            .unwrap_or_default()
    }

    /// Sets the section `T`.
    pub fn put<T: KindOptions>(&mut self, t: &T) {
        match serde_json::to_value(t) {
            Ok(v) => self.keep(T::KEY, v),
            Err(_) => {
                self.0.remove(T::KEY);
            }
        }
    }

    /// Keeps `v` as section `key`'s, unless it sets nothing.
    fn keep(&mut self, key: &'static str, v: Value) {
        if v.as_object()
            .is_some_and(|o| o.values().all(Value::is_null))
        {
            self.0.remove(key);
        } else {
            self.0.insert(key, v);
        }
    }

    /// Sets `key` of the section at `index` of `sections()` from a value.
    pub(super) fn set_key(
        &mut self,
        index: usize,
        key: &'static str,
        value: Value,
    ) -> Result<(), String> {
        let s = sections()[index];
        let mut cur = self
            .0
            .get(s.key)
            .cloned()
            .unwrap_or_else(|| Value::Object(Default::default()));
        (s.set)(&mut cur, key, value)?;
        self.keep(s.key, cur);
        Ok(())
    }

    /// Every section's spec for the kind of `facts`: (key, section).
    pub(super) fn specs(
        &self,
        all: &TestOptions,
        facts: &KindFacts,
    ) -> Result<super::super::own::Own, Invalid> {
        let mut own = super::super::own::Own::default();
        let empty = Value::Object(Default::default());
        for s in sections() {
            if let Some(v) = (s.spec)(self.0.get(s.key).unwrap_or(&empty), all, facts)? {
                own.set_raw(s.key, v);
            }
        }
        Ok(own)
    }
}

/// The flags that write back every own section of `own`.
pub(super) fn own_flags(own: &super::super::own::Own) -> Vec<String> {
    sections()
        .iter()
        .filter_map(|s| own.raw(s.key).map(|v| (s.flags)(v)))
        .flatten()
        .collect()
}

/// The flows an own section of `own` implies, if one does.
pub(super) fn own_flows(own: &super::super::own::Own) -> Option<u32> {
    sections()
        .iter()
        .find_map(|s| own.raw(s.key).and_then(|v| (s.flows)(v)))
}

impl Serialize for OwnOptions {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let flat = self
            .0
            .values()
            .filter_map(Value::as_object)
            .flatten()
            .filter(|(_, v)| !v.is_null());
        ser.collect_map(flat)
    }
}

impl FromArgMatches for OwnOptions {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut o = OwnOptions::default();
        o.update_from_arg_matches(m)?;
        Ok(o)
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        for s in sections() {
            let v = (s.from_matches)(m)?;
            self.keep(s.key, v);
        }
        Ok(())
    }
}

impl Args for OwnOptions {
    fn augment_args(cmd: Command) -> Command {
        sections().iter().fold(cmd, |c, s| (s.augment)(c))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}
