//! A kind's own sections of a spec and of a result, carried by the schema
//! without their shape. The kind (its folder under `src/workload/`) owns
//! the type and reads it back by its key: `spec.own.get::<RpmSpec>("rpm")`.
//! So a new kind adds its parameters and figures without a field here,
//! and the JSON is what a typed field would write (`"rpm": {...}` among
//! the spec's keys, flattened).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Sections by key, each the JSON its kind's type writes. Flattened into
/// `TestSpec`, `Iteration` and `Summary`: a key the struct does not know
/// lands here, so a result's keys read back and write out unchanged.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Own(BTreeMap<String, serde_json::Value>);

impl Own {
    /// The section `key` as its kind's type; None when absent. A section
    /// that does not read as `T` is an error naming the key.
    pub fn try_get<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, String> {
        match self.0.get(key) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(v) => T::deserialize(v)
                .map(Some)
                .map_err(|e| format!("the section `{key}`: {e}")),
        }
    }

    /// The section `key` as `T`; `missing` (the kind's words) when absent.
    pub fn need<T: DeserializeOwned>(&self, key: &str, missing: &str) -> Result<T, String> {
        self.try_get(key)?.ok_or_else(|| missing.to_string())
    }

    /// The section `key` as `T`, None when absent or unreadable (the
    /// report's reading of results from other versions).
    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Option<T> {
        self.try_get(key).ok().flatten()
    }

    /// Sets the section `key` to `value`.
    pub fn set<T: Serialize>(&mut self, key: &str, value: &T) {
        // A kind's types are plain data: they always serialize.
        if let Ok(v) = serde_json::to_value(value) {
            self.0.insert(key.into(), v);
        }
    }

    /// Only the section `key`, set to `value` (a result's figures).
    pub fn with<T: Serialize>(key: &str, value: &T) -> Own {
        let mut own = Own::default();
        own.set(key, value);
        own
    }

    /// Sets the section `key` to a value its kind already wrote as JSON.
    pub fn set_raw(&mut self, key: &str, value: serde_json::Value) {
        self.0.insert(key.into(), value);
    }

    /// The section `key` as JSON.
    pub fn raw(&self, key: &str) -> Option<&serde_json::Value> {
        self.0.get(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Part {
        a: u32,
    }

    #[test]
    fn a_section_reads_back_as_its_type_and_a_wrong_one_names_its_key() {
        let mut o = Own::default();
        assert_eq!(o.raw("part"), None);
        o.set("part", &Part { a: 3 });
        assert_eq!(o.get::<Part>("part"), Some(Part { a: 3 }));
        assert_eq!(o.try_get::<Part>("other"), Ok(None));
        assert_eq!(o.need::<Part>("other", "no part"), Err("no part".into()));
        o.set_raw("bad", serde_json::json!({"a": "three"}));
        assert!(o.try_get::<Part>("bad").unwrap_err().contains("`bad`"));
        assert_eq!(o.get::<Part>("bad"), None);
        assert_eq!(
            Own::with("part", &Part { a: 3 }).get::<Part>("part"),
            Some(Part { a: 3 })
        );
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Holder {
        x: u32,
        #[serde(flatten)]
        own: Own,
        #[serde(default)]
        z: Option<u32>,
    }

    #[test]
    fn flattened_it_writes_the_keys_a_typed_field_would() {
        let text = r#"{"x":1,"part":{"a":2},"z":3}"#;
        let h: Holder = serde_json::from_str(text).unwrap();
        assert_eq!((h.x, h.z), (1, Some(3)));
        assert_eq!(h.own.get::<Part>("part"), Some(Part { a: 2 }));
        let back = serde_json::to_string(&h).unwrap();
        assert_eq!(back, r#"{"x":1,"part":{"a":2},"z":3}"#);
    }
}
