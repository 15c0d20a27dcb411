//! Reading `TestOptions` from a study file or JSON: one flat table of keys,
//! each routed to the section that owns it.
//!
//! Why not `#[serde(flatten)]` on the way in: serde's flatten cannot deny
//! unknown keys (a typo in a study would run silently with a default), and
//! it buffers every value before the section reads it, so a bad value
//! loses its place in the file (`bad.toml:7: duration ...` would become an
//! error without a line). Here each key is checked as it is read (its
//! error points at the key) and its value is read by its section straight
//! from the file's own deserializer (its error points at the value).

use serde::de::{self, DeserializeOwned, DeserializeSeed, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use std::sync::OnceLock;

use super::TestOptions;

/// Which section owns a key: its index in `TestOptions::SECTIONS` order.
type Owner = usize;

/// Every key and the section that owns it, read from the sections' own
/// derived `Deserialize` (the field names serde was generated with), so
/// a key added to a section is known here without a list to keep.
fn owners() -> &'static [(&'static str, Owner)] {
    static KEYS: OnceLock<Vec<(&'static str, Owner)>> = OnceLock::new();
    KEYS.get_or_init(|| {
        let mut v = Vec::new();
        for (i, fields) in TestOptions::section_fields().into_iter().enumerate() {
            v.extend(fields.iter().map(|f| (*f, i)));
        }
        v
    })
}

/// Every key, for the unknown-key error's list.
fn all_keys() -> &'static [&'static str] {
    static ALL: OnceLock<Vec<&'static str>> = OnceLock::new();
    ALL.get_or_init(|| owners().iter().map(|(k, _)| *k).collect())
}

/// The fields a derived `Deserialize` struct reads (serde hands them to
/// `deserialize_struct`), aliases included.
pub fn fields_of<T: DeserializeOwned>() -> &'static [&'static str] {
    match T::deserialize(FieldProbe) {
        Err(Probed(f)) => f,
        Ok(_) => &[],
    }
}

struct FieldProbe;

#[derive(Debug)]
struct Probed(&'static [&'static str]);

impl std::fmt::Display for Probed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("field probe")
    }
}

impl std::error::Error for Probed {}

impl de::Error for Probed {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Probed(&[])
    }
}

impl<'de> Deserializer<'de> for FieldProbe {
    type Error = Probed;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Probed> {
        Err(Probed(&[]))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Probed> {
        Err(Probed(fields))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

impl<'de> Deserialize<'de> for TestOptions {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<TestOptions, D::Error> {
        d.deserialize_map(OptionsVisitor)
    }
}

struct OptionsVisitor;

impl<'de> Visitor<'de> for OptionsVisitor {
    type Value = TestOptions;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a table of test options")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TestOptions, A::Error> {
        let mut o = TestOptions::default();
        while let Some((key, owner)) = map.next_key_seed(KeySeed)? {
            map.next_value_seed(ValueSeed {
                options: &mut o,
                key,
                owner,
            })?;
        }
        Ok(o)
    }
}

/// A key, refused while it is read when no section owns it (so the
/// error carries the key's place).
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = (&'static str, Owner);

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        let k = std::borrow::Cow::<'de, str>::deserialize(d)?;
        owners()
            .iter()
            .find(|(name, _)| *name == k)
            .copied()
            .ok_or_else(|| de::Error::unknown_field(&k, all_keys()))
    }
}

/// A key's value, read by its section from the file's deserializer.
struct ValueSeed<'a> {
    options: &'a mut TestOptions,
    key: &'static str,
    owner: Owner,
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.options.set_key(self.owner, self.key, d)
    }
}

/// Reads one key of section `S` from `value` and sets it in `into`: the
/// section's derived `Deserialize` sees a table of that one key.
pub fn set_one<'de, S, D>(into: &mut S, key: &'static str, value: D) -> Result<(), D::Error>
where
    S: Serialize + DeserializeOwned,
    D: Deserializer<'de>,
{
    let one = S::deserialize(OneKey {
        key: Some(key),
        value: Some(value),
    })?;
    // Merge: the one key set in `one` replaces `into`'s (a key appears
    // once in a table, so nothing set earlier is lost).
    let mut a = serde_json::to_value(&*into).map_err(de::Error::custom)?;
    let b = serde_json::to_value(one).map_err(de::Error::custom)?;
    if let (Some(a), Some(b)) = (a.as_object_mut(), b.as_object()) {
        for (k, v) in b {
            if !v.is_null() {
                a.insert(k.clone(), v.clone());
            }
        }
    }
    *into = serde_json::from_value(a).map_err(de::Error::custom)?;
    Ok(())
}

/// A table of one key whose value is another deserializer's.
struct OneKey<D> {
    key: Option<&'static str>,
    value: Option<D>,
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for OneKey<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        v.visit_map(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

impl<'de, D: Deserializer<'de>> MapAccess<'de> for OneKey<D> {
    type Error = D::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, D::Error> {
        match self.key.take() {
            Some(k) => seed
                .deserialize(de::value::BorrowedStrDeserializer::new(k))
                .map(Some),
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, D::Error> {
        match self.value.take() {
            Some(d) => seed.deserialize(d),
            None => Err(de::Error::custom("a value read twice")),
        }
    }
}

/// Options read from a study file's text; an error as "LINE: message"
/// (for tests that check where an error points).
#[cfg(test)]
pub fn read_toml(text: &str) -> Result<TestOptions, String> {
    toml::from_str(text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start].matches('\n').count() + 1)
            .unwrap_or(0);
        format!("{line}: {}", e.message())
    })
}

#[cfg(test)]
mod tests {
    use super::super::{Size, TestOptions};

    use super::read_toml as read;

    #[test]
    fn every_key_reaches_its_section_and_reads_back() {
        let o = read(
            "flows = 4\nmessage = \"1M\"\nrequest = 200\nrate = \"10k\"\ngso = true\n\
             keys = \"1k\"\nprobe_rate = 5\ntls = true\ncipher = \"aes128-gcm\"\n\
             server_command = \"sleep 1\"\nsndbuf = \"4M\"\nrtt = \"10ms\"\n",
        )
        .unwrap();
        assert_eq!(o.run.flows, Some(4));
        assert_eq!(o.stream.message, Some(Size(1 << 20)));
        assert_eq!(o.exchange.request, Some(Size(200)));
        assert!(o.load.rate.is_some());
        assert_eq!(o.udp.gso, Some(true));
        assert!(!serde_json::to_value(&o).unwrap()["keys"].is_null());
        assert!(!serde_json::to_value(&o).unwrap()["probe_rate"].is_null());
        assert_eq!(o.tls.on, Some(true));
        assert_eq!(o.tls.cipher.as_deref(), Some("aes128-gcm"));
        assert!(o.exec.server_command.is_some());
        assert_eq!(o.socket.sndbuf, Some(Size(4 << 20)));
        assert!(o.place.rtt.is_some());
        // The flat JSON a manifest keeps reads back to the same options.
        let json = serde_json::to_string(&o).unwrap();
        assert!(
            json.contains("\"tls\":true") && json.contains("\"flows\":4"),
            "{json}"
        );
        let back: TestOptions = serde_json::from_str(&json).unwrap();
        assert_eq!(back, o);
    }

    #[test]
    fn no_two_sections_own_one_key() {
        // A kind's own section (registered from its folder) must not take
        // a common key: the first owner would win silently.
        let mut keys: Vec<&str> = TestOptions::section_fields().concat();
        let n = keys.len();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), n);
        assert!(keys.contains(&"mad") && keys.contains(&"streams"));
    }

    #[test]
    fn aliases_are_keys_too() {
        let o = read("threads = 3\nagent_threads = 2\n").unwrap();
        assert_eq!((o.run.workers, o.run.agent_workers), (Some(3), Some(2)));
    }

    #[test]
    fn an_unknown_key_and_a_bad_value_name_their_own_line() {
        let e = read("flows = 2\n\nflowz = 3\n").unwrap_err();
        assert!(e.starts_with("3: unknown field `flowz`"), "{e}");
        let e = read("flows = 2\nmessage = \"1 fortnight\"\n").unwrap_err();
        assert!(e.starts_with("2: "), "{e}");
        // A value of the wrong type, in a kind's own section.
        let e = read("probe_rate = 5\nstreams = \"four\"\n").unwrap_err();
        assert!(e.starts_with("2: "), "{e}");
    }
}
