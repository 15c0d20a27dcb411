//! A test kind's name: the key the workload registry (`crate::workload`)
//! finds the kind by. The model names no kind: each kind's file declares
//! its own name, and the registry is the one list of them.
//!
//! A spec stores it as a plain string, so results and study files read the
//! same as when this was an enum. A name read from a file or a peer is
//! checked for its shape here and for being a kind at `workload::check`;
//! a kind this build does not know (a newer linerate's result) still
//! reads, and says so where it is described.

use std::sync::Mutex;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The name of a test kind ("stream", "rr", "udp-rr", ...).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Workload(&'static str);

/// Longest name a spec may carry.
const MAX_NAME: usize = 32;
/// Distinct names read at run time that are kept: each is leaked once to
/// make it `'static` (a kind's name is `Copy`), so a peer sending made-up
/// names cannot grow this process without bound.
const MAX_INTERNED: usize = 64;

static INTERNED: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());

impl Workload {
    /// The kind a spec names when none is given: bulk transfer, as
    /// netperf's default test is TCP_STREAM. The registry holds its first
    /// kind to this name (a unit test there).
    pub const DEFAULT: Workload = Workload("stream");

    /// A kind's own name, for its file's `NAME` constant.
    pub const fn named(name: &'static str) -> Workload {
        Workload(name)
    }

    pub fn name(self) -> &'static str {
        self.0
    }

    /// A name read at run time: lowercase letters, digits and dashes, at
    /// most 32 characters. Whether a kind has it is the registry's to say.
    pub fn parse(name: &str) -> Result<Workload, String> {
        let shaped = !name.is_empty()
            && name.len() <= MAX_NAME
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !shaped {
            return Err(format!(
                "workload '{}' is not a kind's name (lowercase letters, digits and dashes, at most {MAX_NAME})",
                name.chars().take(40).collect::<String>()
            ));
        }
        let mut seen = INTERNED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = seen.iter().find(|s| **s == name) {
            return Ok(Workload(s));
        }
        if seen.len() >= MAX_INTERNED {
            return Err(format!(
                "workload '{name}': more than {MAX_INTERNED} distinct kind names read"
            ));
        }
        let s: &'static str = Box::leak(name.to_owned().into_boxed_str());
        seen.push(s);
        Ok(Workload(s))
    }
}

impl std::fmt::Display for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::fmt::Debug for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl Serialize for Workload {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0)
    }
}

impl<'de> Deserialize<'de> for Workload {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Workload::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_reads_and_writes_as_its_string() {
        let w: Workload = serde_json::from_str("\"udp-rr\"").unwrap();
        assert_eq!(w, Workload::named("udp-rr"));
        assert_eq!(serde_json::to_string(&w).unwrap(), "\"udp-rr\"");
        assert_eq!(w.to_string(), "udp-rr");
    }

    #[test]
    fn a_misshapen_name_is_refused_and_names_are_kept_once() {
        for bad in ["", "RR", "rr rr", "rr;", &"x".repeat(33)] {
            assert!(Workload::parse(bad).is_err(), "{bad:?}");
        }
        let a = Workload::parse("kept-once").unwrap();
        let b = Workload::parse("kept-once").unwrap();
        assert!(std::ptr::eq(a.name(), b.name()));
    }
}
