//! A spec back to the `linerate run` command line that runs it.

use super::super::rrul::RrulSpec;
use super::super::spec::{KvDialect, KvSpec, TestSpec, TlsSpec, WindowMode, Workload};
use super::{default_exchange, default_outstanding, default_warmup_s, UDP_MESSAGE};
use crate::units;

/// The `linerate run` command line that runs `spec`: the flags that differ
/// from their defaults, so a report tells exactly what ran. The inverse of
/// `TestOptions::build` (a test parses it back into the same spec).
pub fn to_command_line(spec: &TestSpec) -> String {
    let d = TestSpec::default();
    let size = |b: u64| units::fmt_size_arg(b);
    let mut a = vec!["linerate run".to_string(), spec.workload.name().to_string()];
    let program = spec.workload.is_program();
    if spec.rtt_s.is_some()
        || spec.lab.is_some()
        || !spec.sysctl.is_empty()
        || spec.firewall.is_some()
        || program
    {
        a.push("--lab LAB".into());
    }
    let mut flag = |cond: bool, s: String| {
        if cond {
            a.push(s);
        }
    };
    flag(
        spec.direction != d.direction,
        format!("--direction {}", spec.direction.name()),
    );
    let w = spec.workload;
    let streams = matches!(w, Workload::Stream | Workload::UdpStream);
    let rrul = w == Workload::Rrul;
    let message = if w.is_udp() { UDP_MESSAGE } else { d.message };
    let rr = default_exchange(w);
    flag(
        (streams || rrul) && spec.bytes.is_none() && spec.message != message,
        format!("--message {}", size(spec.message as u64)),
    );
    flag(
        !streams && spec.request != rr,
        format!("--request {}", size(spec.request)),
    );
    flag(
        !streams && spec.response != rr,
        format!("--response {}", size(spec.response)),
    );
    if let Some(r) = &spec.rrul {
        let dr = RrulSpec::default();
        flag(r.idle_s != dr.idle_s, format!("--idle {}", r.idle_s));
        flag(
            r.probe_rate != dr.probe_rate,
            format!("--probe-rate {}", r.probe_rate),
        );
        flag(r.streams != dr.streams, format!("--streams {}", r.streams));
    }
    if let Some(b) = spec.bytes {
        flag(true, format!("--bytes {}", size(b)));
        flag(spec.per != d.per, "--per transaction".into());
        flag(
            spec.reply != d.reply,
            format!("--reply {}", size(spec.reply)),
        );
    }
    flag(
        spec.outstanding != default_outstanding(w),
        format!("--outstanding {}", spec.outstanding),
    );
    if let Some(r) = spec.rate {
        flag(true, format!("--rate {r}"));
    }
    if let Some(b) = spec.rate_bps {
        flag(true, format!("--rate {b}bit"));
    }
    if let Some(r) = spec.rate_ramp_s {
        flag(true, format!("--rate-ramp {r}"));
    }
    flag(
        spec.arrivals == crate::model::spec::Arrivals::Poisson,
        "--arrivals poisson".into(),
    );
    if spec.rate.is_some() || spec.search.is_some() {
        let how = match spec.pacing {
            crate::model::spec::Pacing::Hybrid => "hybrid",
            _ => "sleep",
        };
        flag(true, format!("--pacing {how}"));
    }
    if let Some(s) = &spec.search {
        flag(true, format!("--search '{}'", s.target));
        flag(
            s.resolution_pct != crate::model::search::DEFAULT_RESOLUTION_PCT,
            format!("--search-resolution {}", s.resolution_pct),
        );
    }
    flag(
        spec.read_size != 0 && spec.read_size != spec.default_read_size(),
        format!("--read-size {}", size(spec.read_size as u64)),
    );
    flag(
        spec.io != spec.default_io(),
        format!("--io {}", spec.io.name()),
    );
    flag(spec.batch != 0, format!("--batch {}", spec.batch));
    flag(spec.gso, "--gso".into());
    flag(spec.gro, "--gro".into());
    flag(
        spec.workload == Workload::UdpRr && spec.timeout_s != d.timeout_s,
        format!("--timeout {}", spec.timeout_s),
    );
    flag(
        spec.flows != d.flows && !rrul,
        format!("--flows {}", spec.flows),
    );
    flag(
        spec.workers != TestSpec::default_workers_for(spec.workload, spec.flows),
        format!("--workers {}", spec.workers),
    );
    flag(
        spec.agent_workers != spec.workers,
        format!("--agent-workers {}", spec.agent_workers),
    );
    match &spec.auto {
        Some(a) => {
            flag(true, "--duration auto".into());
            flag(
                a.bound_s != crate::model::auto::DEFAULT_BOUND_S,
                format!("--max-duration {}", a.bound_s),
            );
        }
        None => flag(
            spec.duration_s != TestSpec::default_duration_s(spec.is_finite() || program),
            format!("--duration {}", spec.duration_s),
        ),
    }
    flag(
        spec.warmup_s != default_warmup_s(w),
        format!("--warmup {}", spec.warmup_s),
    );
    flag(
        spec.interval_s != d.interval_s,
        format!("--interval {}", spec.interval_s),
    );
    if let Some(b) = spec.sndbuf {
        flag(true, format!("--sndbuf {}", size(b as u64)));
    }
    if let Some(b) = spec.rcvbuf {
        flag(true, format!("--rcvbuf {}", size(b as u64)));
    }
    flag(spec.window == WindowMode::Exact, "--window exact".into());
    flag(spec.nodelay, "--nodelay".into());
    if let Some(cc) = &spec.cc {
        flag(true, format!("--cc {cc}"));
    }
    if let Some(m) = spec.mss {
        flag(true, format!("--mss {m}"));
    }
    if let Some(n) = spec.ports {
        flag(true, format!("--ports {n}"));
    }
    if let Some(c) = &spec.cpus {
        flag(true, format!("--cpus {}", units::fmt_cpu_list(c)));
    }
    if let Some(c) = &spec.agent_cpus {
        flag(true, format!("--agent-cpus {}", units::fmt_cpu_list(c)));
    }
    flag(spec.zerocopy, "--zerocopy".into());
    flag(spec.spin, "--spin".into());
    flag(spec.ipv6, "-6".into());
    flag(spec.close != d.close, "--close reset".into());
    if let Some(t) = &spec.tls {
        let dt = TlsSpec::default();
        flag(spec.workload != Workload::TlsHandshake, "--tls".into());
        flag(
            t.backend != dt.backend,
            format!("--backend {}", t.backend.name()),
        );
        if let Some(c) = &t.cipher {
            flag(true, format!("--cipher {c}"));
        }
        if let Some(v) = &t.version {
            flag(true, format!("--tls-version {v}"));
        }
        flag(t.kx != dt.kx, format!("--kx {}", t.kx));
        flag(t.cert != dt.cert, format!("--cert {}", t.cert.name()));
        flag(t.resume, "--resume on".into());
        if let Some(e) = t.etm {
            flag(true, format!("--etm {}", if e { "on" } else { "off" }));
        }
        flag(
            t.server_name != dt.server_name,
            format!("--tls-name {}", t.server_name),
        );
        if let Some(c) = &t.ca_file {
            flag(true, format!("--tls-ca {c}"));
        }
    }
    if let Some(kv) = &spec.kv {
        let dk = KvSpec::default();
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
    }
    flag(!spec.crypto_hw, "--crypto-hw off".into());
    if let (Some(e), Workload::Exec) = (&spec.exec, spec.workload) {
        flag(e.sshd, "--sshd".into());
        if let Some(c) = &e.server_command {
            flag(
                true,
                format!("--server-cmd '{}'", c.last().cloned().unwrap_or_default()),
            );
        }
        a.push("--".into());
        a.extend(e.command.iter().cloned());
    }
    let mut line = a.join(" ");
    let lab = spec.lab.as_ref().map(|l| l.describe()).unwrap_or_default();
    if spec.rtt_s.is_some() || !lab.is_empty() {
        let mut up = String::new();
        if let Some(r) = spec.rtt_s {
            up.push_str(&format!(" --rtt {}ms", r * 1e3));
        }
        if !lab.is_empty() {
            up.push(' ');
            up.push_str(&lab);
        }
        line.push_str(&format!("   (LAB: linerate lab up LAB{up} ...)"));
    }
    if !spec.sysctl.is_empty() {
        let s: Vec<String> = spec
            .sysctl
            .iter()
            .map(|(k, v)| format!("{k}=\"{v}\""))
            .collect();
        line.push_str(&format!(
            "   (in the lab's namespaces: sysctl {})",
            s.join(" ")
        ));
    }
    if !spec.nic.is_empty() {
        let s: Vec<String> = spec.nic.iter().map(|(k, v)| format!("{k} {v}")).collect();
        line.push_str(&format!(
            "   (on both ends' data interfaces: nic {})",
            s.join(", ")
        ));
    }
    if let Some(f) = &spec.firewall {
        line.push_str(&format!(
            "   (in the lab's server namespace: firewall {})",
            f.describe()
        ));
    }
    line
}
