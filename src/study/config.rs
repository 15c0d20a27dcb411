//! A test written as data: the keys of a study file's `[test]` table, its
//! `[[case]]` entries and its sweep axes. The names are `linerate run`'s
//! flags with `_` for `-` (`agent_threads`, `rcvbuf` ...), and values take
//! the same units (`"128K"`, `"500ms"`), so a study reads like a command line.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::measure::stats::{self, Confidence};
use crate::spec::{
    CertKind, CloseMode, Direction, Per, TestSpec, TlsBackend, TlsSpec, WindowMode, Workload,
};
use crate::units;

/// A byte size written as a number or a string with a unit (`"128K"`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Size(pub u64);

/// A duration written as seconds or a string with a unit (`"500ms"`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Secs(pub f64);

#[derive(Deserialize)]
#[serde(untagged)]
enum NumOrText {
    Int(i64),
    Float(f64),
    Text(String),
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match NumOrText::deserialize(d)? {
            NumOrText::Int(i) if i >= 0 => Ok(Size(i as u64)),
            NumOrText::Text(s) => units::parse_size(&s)
                .map(Size)
                .map_err(serde::de::Error::custom),
            _ => Err(serde::de::Error::custom(
                "a size must be a whole number of bytes or a string such as \"128K\"",
            )),
        }
    }
}

impl<'de> Deserialize<'de> for Secs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let secs = match NumOrText::deserialize(d)? {
            NumOrText::Int(i) => i as f64,
            NumOrText::Float(f) => f,
            NumOrText::Text(s) => units::parse_duration(&s)
                .map_err(serde::de::Error::custom)?
                .as_secs_f64(),
        };
        if secs.is_finite() && secs >= 0.0 {
            Ok(Secs(secs))
        } else {
            Err(serde::de::Error::custom("a duration must be 0 or more"))
        }
    }
}

/// A CPU list written as `"0-1"` or `[0, 1]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cpus(pub Vec<usize>);

impl<'de> Deserialize<'de> for Cpus {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            List(Vec<usize>),
            Text(String),
        }
        match Form::deserialize(d)? {
            Form::List(v) if !v.is_empty() => Ok(Cpus(v)),
            Form::List(_) => Err(serde::de::Error::custom("an empty CPU list")),
            Form::Text(s) => units::parse_cpu_list(&s)
                .map(Cpus)
                .map_err(serde::de::Error::custom),
        }
    }
}

/// Every knob of one test; all optional, `linerate run`'s defaults apply.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TestConfig {
    /// Only in `[[case]]` entries: the case's name in tables and plots.
    pub label: Option<String>,
    pub workload: Option<Workload>,
    pub direction: Option<Direction>,
    pub message: Option<Size>,
    pub request: Option<Size>,
    pub response: Option<Size>,
    pub bytes: Option<Size>,
    pub per: Option<Per>,
    pub reply: Option<Size>,
    pub outstanding: Option<u32>,
    pub rate: Option<f64>,
    pub flows: Option<u32>,
    pub threads: Option<u32>,
    pub agent_threads: Option<u32>,
    pub duration: Option<Secs>,
    pub warmup: Option<Secs>,
    pub interval: Option<Secs>,
    pub sndbuf: Option<Size>,
    pub rcvbuf: Option<Size>,
    /// `"buffer"` or `"exact"`: how rcvbuf sets the receive window.
    pub window: Option<WindowMode>,
    /// The lab's round trip for this test (a study with a `[lab]` sweeps it).
    pub rtt: Option<Secs>,
    /// exec: the command and arguments (`{server}`, `{ssh_config}`, `{file}` replaced).
    pub command: Option<Vec<String>>,
    /// exec: a shell command run in the server namespace meanwhile.
    pub server_command: Option<String>,
    /// exec: start linerate's own sshd in the server namespace.
    pub sshd: Option<bool>,
    pub nodelay: Option<bool>,
    pub cc: Option<String>,
    pub mss: Option<u32>,
    pub cpus: Option<Cpus>,
    pub agent_cpus: Option<Cpus>,
    pub zerocopy: Option<bool>,
    pub ipv6: Option<bool>,
    pub close: Option<CloseMode>,
    /// TLS on the data connections, and its settings (see `linerate run --help`).
    pub tls: Option<bool>,
    pub backend: Option<TlsBackend>,
    pub cipher: Option<String>,
    pub tls_version: Option<String>,
    pub kx: Option<String>,
    pub cert: Option<CertKind>,
    pub resume: Option<bool>,
    pub etm: Option<bool>,
    /// `N` or `"MIN..MAX"` iterations per test (netperf -i).
    pub iterations: Option<String>,
    /// `"LEVEL,WIDTH"` (netperf -I), e.g. `"99,5"`.
    pub confidence: Option<String>,
}

/// The keys a sweep axis may name (every test key but `label`).
pub const AXIS_KEYS: &[&str] = &[
    "workload",
    "direction",
    "message",
    "request",
    "response",
    "bytes",
    "per",
    "reply",
    "outstanding",
    "rate",
    "flows",
    "threads",
    "agent_threads",
    "duration",
    "warmup",
    "interval",
    "sndbuf",
    "rcvbuf",
    "window",
    "rtt",
    "nodelay",
    "cc",
    "mss",
    "cpus",
    "agent_cpus",
    "zerocopy",
    "ipv6",
    "close",
    "tls",
    "backend",
    "cipher",
    "tls_version",
    "kx",
    "cert",
    "resume",
    "etm",
];

impl TestConfig {
    /// Later layers win: `base.overlay(case).overlay(point)`.
    pub fn overlay(&self, top: &TestConfig) -> TestConfig {
        // Through JSON objects: a key set in `top` replaces the base's.
        let mut a = serde_json::to_value(self).expect("config serializes");
        let b = serde_json::to_value(top).expect("config serializes");
        if let (Some(a), Some(b)) = (a.as_object_mut(), b.as_object()) {
            for (k, v) in b {
                if !v.is_null() {
                    a.insert(k.clone(), v.clone());
                }
            }
        }
        serde_json::from_value(a).expect("overlay of valid configs is valid")
    }

    /// One key set from a TOML value, as a sweep point does.
    pub fn from_pairs(pairs: &BTreeMap<String, toml::Value>) -> Result<TestConfig, String> {
        let table: toml::Table = pairs.clone().into_iter().collect();
        table
            .try_into()
            .map_err(|e: toml::de::Error| e.message().trim().to_string())
    }

    /// The spec `linerate run` would build from the same flags.
    pub fn to_spec(&self) -> Result<TestSpec, String> {
        let d = TestSpec::default();
        let flows = self.flows.unwrap_or(d.flows);
        let threads = self
            .threads
            .unwrap_or_else(|| TestSpec::default_threads(flows));
        let finite = (self.bytes.is_some() && self.per.unwrap_or(d.per) == Per::Flow)
            || matches!(self.workload, Some(Workload::Exec) | Some(Workload::Scp));
        let to_usize = |v: Option<Size>, name: &str| -> Result<Option<usize>, String> {
            match v {
                Some(Size(b)) if b > (1 << 30) => Err(format!("{name} {b} is larger than 1 GiB")),
                Some(Size(b)) => Ok(Some(b as usize)),
                None => Ok(None),
            }
        };
        let spec = TestSpec {
            workload: self.workload.unwrap_or(d.workload),
            direction: self.direction.unwrap_or(d.direction),
            message: self
                .message
                .map(|s| s.0.min(u32::MAX as u64) as usize)
                .unwrap_or(d.message),
            request: self.request.map(|s| s.0).unwrap_or(d.request),
            response: self.response.map(|s| s.0).unwrap_or(d.response),
            bytes: self.bytes.map(|s| s.0),
            per: self.per.unwrap_or(d.per),
            reply: self.reply.map(|s| s.0).unwrap_or(d.reply),
            outstanding: self.outstanding.unwrap_or(d.outstanding),
            rate: self.rate,
            flows,
            threads,
            agent_threads: self.agent_threads.unwrap_or(threads),
            duration_s: self
                .duration
                .map(|s| s.0)
                .unwrap_or_else(|| TestSpec::default_duration_s(finite)),
            warmup_s: self.warmup.map(|s| s.0).unwrap_or(d.warmup_s),
            interval_s: self.interval.map(|s| s.0).unwrap_or(d.interval_s),
            sndbuf: to_usize(self.sndbuf, "sndbuf")?,
            rcvbuf: to_usize(self.rcvbuf, "rcvbuf")?,
            nodelay: self.nodelay.unwrap_or(d.nodelay),
            cc: self.cc.clone(),
            mss: self.mss,
            cpus: self.cpus.clone().map(|c| c.0),
            agent_cpus: self.agent_cpus.clone().map(|c| c.0),
            zerocopy: self.zerocopy.unwrap_or(d.zerocopy),
            ipv6: self.ipv6.unwrap_or(d.ipv6),
            close: self.close.unwrap_or(d.close),
            tls: self.tls_spec()?,
            window: self.window.unwrap_or_default(),
            rtt_s: self.rtt.map(|s| s.0),
            exec: match self.workload {
                Some(Workload::Exec) | Some(Workload::Scp) => {
                    Some(crate::workload::exec::ExecSpec {
                        command: self.command.clone().unwrap_or_default(),
                        server_command: self
                            .server_command
                            .as_ref()
                            .map(|c| vec!["sh".into(), "-c".into(), c.clone()]),
                        sshd: self.sshd.unwrap_or(false) || self.workload == Some(Workload::Scp),
                    })
                }
                _ => None,
            },
        };
        spec.validate()?;
        Ok(spec)
    }

    fn tls_spec(&self) -> Result<Option<TlsSpec>, String> {
        let on = self.tls.unwrap_or(false) || self.workload == Some(Workload::TlsHandshake);
        if !on {
            // TLS keys apply to the points where tls = true, so one base test
            // can serve a clear/TLS sweep.
            return Ok(None);
        }
        TlsSpec::from_options(
            self.backend.unwrap_or_default(),
            self.cipher.clone(),
            self.tls_version.clone(),
            self.kx.clone(),
            self.cert.unwrap_or_default(),
            self.resume.unwrap_or(false),
            self.etm,
            None,
            None,
        )
        .map(Some)
    }

    /// The iteration policy (`iterations`, `confidence`), default one run.
    pub fn confidence(&self) -> Result<Confidence, String> {
        let mut c = Confidence::default();
        if let Some(i) = &self.iterations {
            let (min, max) = stats::parse_iterations(i)?;
            c.min = min;
            c.max = max;
        }
        if let Some(s) = &self.confidence {
            let (level, width) = stats::parse_confidence(s)?;
            c.level_pct = level;
            c.width_pct = width;
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_defaults_match_the_command_line() {
        let c: TestConfig = toml::from_str(
            "workload = \"rr\"\nrequest = 200\nresponse = \"32K\"\nflows = 10\nduration = \"500ms\"",
        )
        .unwrap();
        let s = c.to_spec().unwrap();
        assert_eq!(s.workload, Workload::Rr);
        assert_eq!(s.response, 32 * 1024);
        assert_eq!(s.duration_s, 0.5);
        assert_eq!(s.threads, TestSpec::default_threads(10));
        assert_eq!(s.agent_threads, s.threads);
        let finite: TestConfig = toml::from_str("bytes = \"20M\"").unwrap();
        assert_eq!(finite.to_spec().unwrap().duration_s, 300.0);
    }

    #[test]
    fn overlay_replaces_only_what_is_set() {
        let base: TestConfig = toml::from_str("flows = 4\nmessage = \"64K\"").unwrap();
        let top: TestConfig = toml::from_str("flows = 8").unwrap();
        let o = base.overlay(&top);
        assert_eq!(o.flows, Some(8));
        assert_eq!(o.message, Some(Size(65536)));
    }

    #[test]
    fn bad_values_say_what_is_wrong() {
        let e = toml::from_str::<TestConfig>("message = \"12Q\"").unwrap_err();
        assert!(e.to_string().contains("unknown size unit"), "{e}");
        let e = toml::from_str::<TestConfig>("flowz = 3").unwrap_err();
        assert!(e.to_string().contains("flowz"), "{e}");
        let c: TestConfig = toml::from_str("flows = 0").unwrap();
        assert!(c.to_spec().unwrap_err().contains("--flows"));
    }
}
