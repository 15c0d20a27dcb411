//! One test's options as a user writes them: `linerate run`'s flags and a
//! study's `[test]` table (and its `[[case]]`s and sweep values) are this one
//! struct, so a key means the same thing, takes the same units (`"128K"`,
//! `"500ms"`, `"10k"`) and has the same default in both places. `build`
//! turns it into the `TestSpec` that runs; `to_command_line` is its inverse.
//!
//! Every field is optional: a study layers tables (`base.overlay(case)
//! .overlay(point)`), and the defaults apply only in `build`.

use clap::Args;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::error::{Invalid, ModelError};
use super::kind::KindFacts;
use super::sample::Confidence;
use super::spec::{IoMode, Per, TestSpec, MAX_READ_SIZE};

mod command_line;
mod exec;
mod keys;
mod own;
mod sections;
mod tls;
mod values;
pub use command_line::to_command_line;
pub use exec::ExecOptions;
#[cfg(test)]
pub use keys::read_toml;
pub use own::{sections as own_sections, KindOptions, OwnOptions, OwnSection};
pub use sections::{
    ExchangeOptions, LoadOptions, PlaceOptions, RunOptions, SocketOptions, StreamOptions,
    UdpOptions,
};
pub use tls::TlsOptions;
pub use values::*;

/// Every knob of one test, in sections: the common ones, the kinds'
/// families' and each kind's own. Flattened, so the keys and flags are
/// one flat space (`--message`, `message = "1M"`), and the field names are
/// the flags with `_` for `-`. Read through `keys` (every key routed to
/// its section, unknown keys refused where they are written).
#[derive(Args, Clone, Debug, Default, Serialize, PartialEq)]
pub struct TestOptions {
    #[command(flatten)]
    #[serde(flatten)]
    pub run: RunOptions,
    #[command(flatten)]
    #[serde(flatten)]
    pub place: PlaceOptions,
    #[command(flatten)]
    #[serde(flatten)]
    pub socket: SocketOptions,
    #[command(flatten)]
    #[serde(flatten)]
    pub stream: StreamOptions,
    #[command(flatten)]
    #[serde(flatten)]
    pub exchange: ExchangeOptions,
    #[command(flatten)]
    #[serde(flatten)]
    pub load: LoadOptions,
    #[command(flatten)]
    #[serde(flatten)]
    pub udp: UdpOptions,
    #[command(flatten)]
    #[serde(flatten)]
    pub tls: TlsOptions,
    #[command(flatten)]
    #[serde(flatten)]
    pub exec: ExecOptions,
    /// The kinds' own sections, each registered from its kind's file.
    #[command(flatten)]
    #[serde(flatten)]
    pub own: OwnOptions,
}

/// The sections `TestOptions` types itself (before the kinds' own, in
/// `section_fields` and `set_key`).
const COMMON_SECTIONS: usize = 9;

impl TestOptions {
    /// Each section's keys, in the order of `set_key`'s sections: the
    /// common ones, then the kinds' own (`own_sections()`).
    fn section_fields() -> Vec<&'static [&'static str]> {
        use keys::fields_of;
        let common: [&'static [&'static str]; COMMON_SECTIONS] = [
            fields_of::<RunOptions>(),
            fields_of::<PlaceOptions>(),
            fields_of::<SocketOptions>(),
            fields_of::<StreamOptions>(),
            fields_of::<ExchangeOptions>(),
            fields_of::<LoadOptions>(),
            fields_of::<UdpOptions>(),
            fields_of::<TlsOptions>(),
            fields_of::<ExecOptions>(),
        ];
        let mut v = common.to_vec();
        v.extend(own_sections().iter().map(|s| s.fields()));
        v
    }

    /// Sets `key` of the section `owner` from a study file's (or JSON's)
    /// value.
    fn set_key<'de, D: serde::Deserializer<'de>>(
        &mut self,
        owner: usize,
        key: &'static str,
        value: D,
    ) -> Result<(), D::Error> {
        use keys::set_one;
        match owner {
            0 => set_one(&mut self.run, key, value),
            1 => set_one(&mut self.place, key, value),
            2 => set_one(&mut self.socket, key, value),
            3 => set_one(&mut self.stream, key, value),
            4 => set_one(&mut self.exchange, key, value),
            5 => set_one(&mut self.load, key, value),
            6 => set_one(&mut self.udp, key, value),
            7 => set_one(&mut self.tls, key, value),
            8 => set_one(&mut self.exec, key, value),
            n => {
                // A kind's own section reads the value as JSON; its error
                // is raised here, so the file's deserializer places it.
                let v = serde_json::Value::deserialize(value)?;
                self.own
                    .set_key(n - COMMON_SECTIONS, key, v)
                    .map_err(serde::de::Error::custom)
            }
        }
    }
}

/// The keys a study's sweep axis may name: every option but `label` (and
/// the tables `lab` and `sysctl`, whose members are axes: `lab.mtu`, and
/// `sysctl.NAME` for any net.* sysctl).
pub fn axis_keys() -> Vec<String> {
    let v = serde_json::to_value(TestOptions::default()).expect("options serialize");
    let mut keys: Vec<String> = v
        .as_object()
        .map(|o| {
            o.keys()
                .filter(|k| !matches!(k.as_str(), "label" | "lab" | "sysctl" | "nic" | "firewall"))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    // The kinds' own keys (their sections write only what is set).
    for s in own_sections() {
        keys.extend(s.fields().iter().map(|f| f.to_string()));
    }
    keys.sort();
    keys.dedup();
    keys.extend(
        crate::model::lab::LAB_AXES
            .iter()
            .map(|k| format!("lab.{k}")),
    );
    keys.extend(
        crate::model::nic::names()
            .iter()
            .map(|k| format!("nic.{k}")),
    );
    // The firewall table's members (its own block).
    keys.extend(
        crate::model::firewall::FIREWALL_AXES
            .iter()
            .map(|k| format!("firewall.{k}")),
    );
    keys
}

/// Whether `key` may be a sweep axis.
pub fn is_axis(key: &str) -> bool {
    key.strip_prefix("sysctl.").is_some_and(|k| !k.is_empty())
        || key
            .strip_prefix("nic.")
            .is_some_and(|k| crate::model::nic::setting(k).is_some())
        || axis_keys().iter().any(|k| k == key)
}

impl TestOptions {
    /// Later layers win: `base.overlay(case).overlay(point)`.
    pub fn overlay(&self, top: &TestOptions) -> TestOptions {
        // Through JSON objects: a key set in `top` replaces the base's; the
        // tables `lab` and `sysctl` merge key by key.
        let mut a = serde_json::to_value(self).expect("options serialize");
        let b = serde_json::to_value(top).expect("options serialize");
        if let (Some(a), Some(b)) = (a.as_object_mut(), b.as_object()) {
            for (k, v) in b {
                if v.is_null() {
                    continue;
                }
                match (a.get_mut(k), v) {
                    (Some(serde_json::Value::Object(x)), serde_json::Value::Object(y))
                        if k == "lab" || k == "sysctl" || k == "nic" || k == "firewall" =>
                    {
                        for (kk, vv) in y {
                            if !vv.is_null() {
                                x.insert(kk.clone(), vv.clone());
                            }
                        }
                    }
                    _ => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        serde_json::from_value(a).expect("an overlay of valid options is valid")
    }

    /// Keys set from TOML values, as a sweep point does (`lab.mtu` and
    /// `sysctl.NAME` go into their tables).
    pub fn from_pairs(pairs: &BTreeMap<String, toml::Value>) -> Result<TestOptions, ModelError> {
        let mut table = toml::Table::new();
        for (k, v) in pairs {
            // The firewall table (`firewall.rules`, `firewall.conntrack`).
            if let Some(inner) = k.strip_prefix("firewall.") {
                let entry = table
                    .entry("firewall".to_string())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                if let toml::Value::Table(t) = entry {
                    t.insert(inner.to_string(), v.clone());
                }
                continue;
            }
            let (outer, inner) = match (k.strip_prefix("lab."), k.strip_prefix("sysctl.")) {
                (Some(i), _) => ("lab", i),
                (_, Some(i)) => ("sysctl", i),
                _ if k.starts_with("nic.") => ("nic", &k["nic.".len()..]),
                _ => {
                    table.insert(k.clone(), v.clone());
                    continue;
                }
            };
            // A sysctl's value is text ("4096 131072 6291456"); numbers too.
            let v = match (outer, v) {
                ("sysctl", toml::Value::Integer(i)) => toml::Value::String(i.to_string()),
                ("lab", toml::Value::Integer(i)) if inner != "mtu" => {
                    toml::Value::String(i.to_string())
                }
                _ => v.clone(),
            };
            let entry = table
                .entry(outer.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            if let toml::Value::Table(t) = entry {
                t.insert(inner.to_string(), v);
            }
        }
        table.try_into().map_err(ModelError::Keys)
    }

    /// The spec these options run, with the defaults applied and the
    /// combinations checked (`TestSpec::validate`). The TLS library's own
    /// checks (is this suite offered?) are the caller's: they need the engine.
    pub fn build(&self, facts: &KindFacts) -> Result<TestSpec, Invalid> {
        self.build_for(facts, false)
    }

    /// `build`, knowing whether the agent is local (loopback, or a lab on
    /// this host): its workers then share this host's CPUs with the
    /// client's. An unpaced udp-stream's senders never wait for their
    /// receivers, so with more busy threads than CPUs the senders take the
    /// receivers' time and the datagrams are dropped at the receiving
    /// socket (2 flows on 2 CPUs: 2+2 workers received 190k datagrams/s
    /// with a third dropped, 1+1 received 346k; bench/RESULTS.md). There,
    /// unless asked, each end gets half the CPUs. TCP and paced or
    /// request/response UDP wait for their peer and keep a worker per flow.
    pub fn build_for(&self, facts: &KindFacts, local_agent: bool) -> Result<TestSpec, Invalid> {
        let mut o = self.clone();
        o.run.flows = o.flows_for_ports()?;
        o.run.flows_per_port = None;
        if local_agent
            && facts.unpaced_sender
            && o.load.rate.is_none()
            && o.run.workers.is_none()
            && o.run.agent_workers.is_none()
        {
            let flows = o.run.flows.unwrap_or(1);
            let half = (TestSpec::default_workers(u32::MAX) / 2).max(1);
            let w = flows.min(half).max(1);
            o.run.workers = Some(w);
            o.run.agent_workers = Some(w);
        }
        let mut spec = o.build_spec(facts)?;
        if spec.pacing == crate::model::spec::Pacing::Auto {
            let cpus = TestSpec::default_workers(u32::MAX);
            let busy = spec.workers + if local_agent { spec.agent_workers } else { 0 };
            // Only an open loop paces; the others keep the plain value.
            let open = spec.rate.is_some() || spec.search.is_some();
            spec.pacing = if open && cpus > busy {
                crate::model::spec::Pacing::Hybrid
            } else {
                crate::model::spec::Pacing::Sleep
            };
        }
        Ok(spec)
    }

    fn build_spec(&self, facts: &KindFacts) -> Result<TestSpec, Invalid> {
        let d = TestSpec::default();
        let workload = self.run.workload.unwrap_or(d.workload);
        let program = facts.program;
        self.refuse_out_of_place(facts)?;
        let own = self.own.specs(self, facts)?;
        // A kind's section may imply its flows (rrul: its streams' and
        // probes').
        let flows = own::own_flows(&own).unwrap_or(self.run.flows.unwrap_or(d.flows));
        let workers = self
            .run
            .workers
            .unwrap_or_else(|| TestSpec::default_workers_for(facts.worker_per_flow, flows));
        let per = self.stream.per.unwrap_or(d.per);
        let finite = (self.stream.bytes.is_some() && per == Per::Flow) || program;
        let to_usize = |v: Option<Size>, name: &str| -> Result<Option<usize>, Invalid> {
            match v {
                Some(Size(b)) if b > (1 << 30) => {
                    Err(format!("--{name} {b} is larger than 1 GiB").into())
                }
                Some(Size(b)) => Ok(Some(b as usize)),
                None => Ok(None),
            }
        };
        let mut spec = TestSpec {
            workload,
            direction: self.stream.direction.unwrap_or(d.direction),
            message: self
                .stream
                .message
                .map(|s| s.0.min(u32::MAX as u64) as usize)
                .unwrap_or(facts.default_message.unwrap_or(d.message)),
            request: self
                .exchange
                .request
                .map(|s| s.0)
                .unwrap_or(facts.default_exchange.unwrap_or(d.request)),
            response: self
                .exchange
                .response
                .map(|s| s.0)
                .unwrap_or(facts.default_exchange.unwrap_or(d.request)),
            bytes: self.stream.bytes.map(|s| s.0),
            per,
            reply: self.stream.reply.map(|s| s.0).unwrap_or(d.reply),
            outstanding: self
                .exchange
                .outstanding
                .unwrap_or(facts.default_outstanding.unwrap_or(d.outstanding)),
            rate: match self.load.rate {
                Some(Rate::PerSecond(r)) => Some(r),
                _ => None,
            },
            rate_bps: match self.load.rate {
                Some(Rate::Bits(b)) => Some(b),
                _ => None,
            },
            io: IoMode::Epoll,
            read_size: match self.socket.read_size {
                Some(Size(b)) if !(1..=MAX_READ_SIZE as u64).contains(&b) => {
                    return Err(format!(
                        "--read-size {b}: from 1 byte to {} MiB",
                        MAX_READ_SIZE >> 20
                    )
                    .into())
                }
                Some(Size(b)) => b as usize,
                None => 0,
            },
            rx_poll_us: self.stream.rx_poll.and_then(RxPoll::us),
            batch: match self.udp.batch {
                Some(0) => return Err("--batch must be at least 1".into()),
                Some(b) => b,
                None => 0,
            },
            gso: self.udp.gso.unwrap_or(false),
            gro: self.udp.gro.unwrap_or(false),
            timeout_s: self.exchange.timeout.map(|s| s.0).unwrap_or(d.timeout_s),
            flows,
            workers,
            agent_workers: self.run.agent_workers.unwrap_or(workers),
            duration_s: match self.run.duration {
                Some(Length::Secs(s)) => s,
                Some(Length::Auto) => self
                    .run
                    .max_duration
                    .map_or(crate::model::auto::DEFAULT_BOUND_S, |s| s.0),
                None => facts
                    .default_duration_s
                    .unwrap_or_else(|| TestSpec::default_duration_s(finite)),
            },
            warmup_s: self
                .run
                .warmup
                .map(|s| s.0)
                .unwrap_or(facts.default_warmup_s.unwrap_or(d.warmup_s)),
            interval_s: self.run.interval.map(|s| s.0).unwrap_or(d.interval_s),
            sndbuf: to_usize(self.socket.sndbuf, "sndbuf")?,
            rcvbuf: to_usize(self.socket.rcvbuf, "rcvbuf")?,
            nodelay: self.socket.nodelay.unwrap_or(d.nodelay),
            cc: self.socket.cc.clone(),
            mss: self.socket.mss,
            cpus: self.socket.cpus.clone().map(|c| c.0),
            agent_cpus: self.socket.agent_cpus.clone().map(|c| c.0),
            zerocopy: self.stream.zerocopy.unwrap_or(d.zerocopy),
            spin: self.socket.spin.unwrap_or(d.spin),
            ipv6: self.run.ipv6.unwrap_or(d.ipv6),
            close: self.exchange.close.unwrap_or(d.close),
            tls: self.tls.spec(facts)?,
            window: self.socket.window.unwrap_or_default(),
            rtt_s: self.place.rtt.map(|s| s.0),
            clients: self.place.clients,
            client_hosts: self.place.client_hosts.clone(),
            server_hosts: self.place.server_hosts.clone(),
            exec: self.exec.spec(facts),
            lab: self.place.lab.clone().filter(|l| !l.is_empty()),
            sysctl: self.place.sysctl.clone().unwrap_or_default(),
            nic: crate::model::nic::normalize_all(&self.place.nic.clone().unwrap_or_default())?,
            crypto_hw: self.tls.crypto_hw.is_none_or(|s| s.0),
            ports: self.run.ports,
            firewall: match &self.place.firewall {
                Some(f) if !f.is_empty() => Some(f.resolve()?),
                _ => None,
            },
            own,
            search: self.search_spec()?,
            auto: self.auto_spec()?,
            rate_ramp_s: self.load.rate_ramp.map(|s| s.0),
            arrivals: self.load.arrivals.unwrap_or_default(),
            pacing: self.load.pacing.unwrap_or(crate::model::spec::Pacing::Auto),
        };
        self.resolve_defaults(&mut spec, facts);
        spec.validate()?;
        Ok(spec)
    }

    /// The flows asked for: `flows`, or `flows_per_port` times `ports`
    /// (which it needs, and which `flows` may not join).
    fn flows_for_ports(&self) -> Result<Option<u32>, Invalid> {
        let Some(per) = self.run.flows_per_port else {
            return Ok(self.run.flows);
        };
        if self.run.flows.is_some() {
            return Err(
                "--flows and --flows-per-port both set the flows: give one (flows = ports x flows-per-port)"
                    .into(),
            );
        }
        let Some(ports) = self.run.ports else {
            return Err("--flows-per-port needs --ports N: the flows are N x its value".into());
        };
        if per == 0 {
            return Err("--flows-per-port must be at least 1".into());
        }
        Ok(Some(ports.saturating_mul(per)))
    }

    /// Options that a test of `workload` cannot take whatever else is set:
    /// pacing outside an open loop, a program's options on flows.
    fn refuse_out_of_place(&self, facts: &KindFacts) -> Result<(), Invalid> {
        let program = facts.program;
        if self.load.pacing.is_some()
            && ((self.load.rate.is_none() && self.load.search.is_none()) || !facts.paced)
        {
            return Err(
                "--pacing says how an open loop waits for its sends: rr, udp-rr or memcache with --rate (or --search)"
                    .into(),
            );
        }
        if self.stream.rx_poll.is_some_and(|p| p != RxPoll::Auto) && !facts.rx_poll {
            return Err(
                "--rx-poll says how a stream's lone receiver waits for data: it applies to stream"
                    .into(),
            );
        }
        if !program && self.exec.is_set() {
            return Err(
                "--sshd, --server-cmd and a command after -- apply to the exec workload".into(),
            );
        }
        Ok(())
    }

    /// What the spec's other fields decide: cipher's record size, the read
    /// size, the I/O mode and its workers.
    fn resolve_defaults(&self, spec: &mut TestSpec, facts: &KindFacts) {
        // Resolved here so the result records the size that was used.
        if spec.read_size == 0 && !facts.datagrams && !facts.program {
            spec.read_size = spec.default_read_size();
        }
        spec.io = match self.socket.io {
            Some(io) => io,
            // A search's steps are open loops: the event loop's timers.
            None if spec.search.is_some() => IoMode::Epoll,
            None => spec.default_io(facts.threads_when_closed),
        };
        if spec.io == IoMode::Threads
            && self.run.workers.is_none()
            && self.run.agent_workers.is_none()
        {
            spec.workers = spec.flows;
            spec.agent_workers = spec.flows;
        }
    }

    /// `--search`'s spec: the target, its resolution, and the samples a
    /// step needs (more when a confidence target was given).
    fn search_spec(&self) -> Result<Option<crate::model::search::SearchSpec>, Invalid> {
        let Some(target) = self.load.search else {
            if self.load.search_resolution.is_some() {
                return Err("--search-resolution needs --search".into());
            }
            return Ok(None);
        };
        if self.load.rate.is_some() {
            return Err("--search chooses the offered rate itself: drop --rate".into());
        }
        let min_window = match self.run.duration {
            Some(Length::Auto) => {
                return Err(
                    "--search sizes each step itself (enough samples for the percentile): drop --duration auto"
                        .into(),
                )
            }
            Some(Length::Secs(s)) => Some(s),
            None => None,
        };
        let spec = crate::model::search::SearchSpec::new(
            target,
            self.load
                .search_resolution
                .unwrap_or(crate::model::search::DEFAULT_RESOLUTION_PCT),
            min_window,
            self.run.confidence.map(|Target(l, w)| (l, w)),
        )?;
        Ok(Some(spec))
    }

    /// `--duration auto`'s spec: its bound and the confidence target its
    /// mean must meet.
    fn auto_spec(&self) -> Result<Option<crate::model::auto::AutoSpec>, Invalid> {
        if self.run.duration != Some(Length::Auto) {
            if self.run.max_duration.is_some() {
                return Err("--max-duration bounds --duration auto: add -d auto".into());
            }
            return Ok(None);
        }
        let c = self.confidence();
        let bound_s = self
            .run
            .max_duration
            .map_or(crate::model::auto::DEFAULT_BOUND_S, |s| s.0);
        if bound_s.is_nan() || bound_s <= 0.0 {
            return Err("--max-duration must be above 0".into());
        }
        Ok(Some(crate::model::auto::AutoSpec {
            bound_s,
            level_pct: c.level_pct,
            width_pct: c.width_pct,
        }))
    }

    /// The iteration policy (`iterations`, `confidence`), default one run.
    pub fn confidence(&self) -> Confidence {
        let mut c = Confidence::default();
        if let Some(Iterations(min, max)) = self.run.iterations {
            c.min = min;
            c.max = max;
        }
        if let Some(Target(level, width)) = self.run.confidence {
            c.level_pct = level;
            c.width_pct = width;
        }
        c
    }
}
