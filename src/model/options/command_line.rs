//! A spec back to the `linerate run` command line that runs it.

use super::super::kind::KindFacts;
use super::super::spec::{TestSpec, TlsSpec, WindowMode};
use crate::units;

/// The `linerate run` command line that runs `spec`: the flags that differ
/// from their defaults, so a report tells exactly what ran. The inverse of
/// `TestOptions::build` (a test parses it back into the same spec).
/// `facts`: its kind's (`workload::facts`).
pub fn to_command_line(spec: &TestSpec, facts: &KindFacts) -> String {
    let d = TestSpec::default();
    let size = |b: u64| units::fmt_size_arg(b);
    let mut a = vec!["linerate run".to_string(), spec.workload.name().to_string()];
    let program = facts.program;
    if spec.rtt_s.is_some()
        || spec.lab.is_some()
        || !spec.sysctl.is_empty()
        || spec.firewall.is_some()
        || program
    {
        a.push("--lab LAB".into());
    }
    flag(
        &mut a,
        spec.direction != d.direction,
        format!("--direction {}", spec.direction.name()),
    );
    let streams = facts.bulk;
    // rrul's flows follow from --streams; its streams take --message.
    let rrul = facts.derived_flows;
    let message = facts.default_message.unwrap_or(d.message);
    let rr = facts.default_exchange.unwrap_or(d.request);
    flag(
        &mut a,
        (streams || rrul) && spec.bytes.is_none() && spec.message != message,
        format!("--message {}", size(spec.message as u64)),
    );
    flag(
        &mut a,
        !streams && spec.request != rr,
        format!("--request {}", size(spec.request)),
    );
    flag(
        &mut a,
        !streams && spec.response != rr,
        format!("--response {}", size(spec.response)),
    );
    // Each kind's own section writes its own flags.
    a.extend(super::own::own_flags(&spec.own));
    if let Some(b) = spec.bytes {
        flag(&mut a, true, format!("--bytes {}", size(b)));
        flag(&mut a, spec.per != d.per, "--per transaction".into());
        flag(
            &mut a,
            spec.reply != d.reply,
            format!("--reply {}", size(spec.reply)),
        );
    }
    open_loop_flags(spec, facts, &mut a);
    receive_flags(spec, facts, &mut a);
    flag(&mut a, spec.batch != 0, format!("--batch {}", spec.batch));
    flag(&mut a, spec.gso, "--gso".into());
    flag(&mut a, spec.gro, "--gro".into());
    flag(
        &mut a,
        facts.timeout && spec.timeout_s != d.timeout_s,
        format!("--timeout {}", spec.timeout_s),
    );
    flag(
        &mut a,
        spec.flows != d.flows && !rrul,
        format!("--flows {}", spec.flows),
    );
    flag(
        &mut a,
        spec.workers != TestSpec::default_workers_for(facts.worker_per_flow, spec.flows),
        format!("--workers {}", spec.workers),
    );
    flag(
        &mut a,
        spec.agent_workers != spec.workers,
        format!("--agent-workers {}", spec.agent_workers),
    );
    match &spec.auto {
        Some(auto) => {
            flag(&mut a, true, "--duration auto".into());
            flag(
                &mut a,
                auto.bound_s != crate::model::auto::DEFAULT_BOUND_S,
                format!("--max-duration {}", auto.bound_s),
            );
        }
        None => flag(
            &mut a,
            spec.duration_s
                != facts
                    .default_duration_s
                    .unwrap_or_else(|| TestSpec::default_duration_s(spec.is_finite() || program)),
            format!("--duration {}", spec.duration_s),
        ),
    }
    flag(
        &mut a,
        spec.warmup_s != facts.default_warmup_s.unwrap_or(d.warmup_s),
        format!("--warmup {}", spec.warmup_s),
    );
    flag(
        &mut a,
        spec.interval_s != d.interval_s,
        format!("--interval {}", spec.interval_s),
    );
    socket_flags(spec, &mut a);
    if let Some(t) = &spec.tls {
        tls_flags(t, facts.tls_always, &mut a);
    }
    flag(&mut a, !spec.crypto_hw, "--crypto-hw off".into());
    if let (Some(e), true) = (&spec.exec, facts.user_command) {
        flag(&mut a, e.sshd, "--sshd".into());
        if let Some(c) = &e.server_command {
            flag(
                &mut a,
                true,
                format!("--server-cmd '{}'", c.last().cloned().unwrap_or_default()),
            );
        }
        a.push("--".into());
        a.extend(e.command.iter().cloned());
    }
    let mut line = a.join(" ");
    line.push_str(&notes(spec));
    line
}

/// The TLS flags of a spec with TLS (tls-handshake implies `--tls`).
fn tls_flags(t: &TlsSpec, tls_always: bool, a: &mut Vec<String>) {
    let dt = TlsSpec::default();
    flag(a, !tls_always, "--tls".into());
    flag(
        a,
        t.backend != dt.backend,
        format!("--backend {}", t.backend.name()),
    );
    if let Some(c) = &t.cipher {
        flag(a, true, format!("--cipher {c}"));
    }
    if let Some(v) = &t.version {
        flag(a, true, format!("--tls-version {v}"));
    }
    flag(a, t.kx != dt.kx, format!("--kx {}", t.kx));
    flag(a, t.cert != dt.cert, format!("--cert {}", t.cert.name()));
    flag(a, t.resume, "--resume on".into());
    if let Some(e) = t.etm {
        flag(a, true, format!("--etm {}", if e { "on" } else { "off" }));
    }
    flag(
        a,
        t.server_name != dt.server_name,
        format!("--tls-name {}", t.server_name),
    );
    if let Some(c) = &t.ca_file {
        flag(a, true, format!("--tls-ca {c}"));
    }
}

/// What the line needs around it: the lab to bring up, its sysctls, NIC
/// settings and firewall.
fn notes(spec: &TestSpec) -> String {
    let mut line = String::new();
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

/// Adds `s` to the line when `cond` holds.
fn flag(a: &mut Vec<String>, cond: bool, s: String) {
    if cond {
        a.push(s);
    }
}

/// How the receivers read and the workers wait: the read size, the
/// receive poll, the I/O mode.
fn receive_flags(spec: &TestSpec, facts: &KindFacts, a: &mut Vec<String>) {
    flag(
        a,
        spec.read_size != 0 && spec.read_size != spec.default_read_size(),
        format!("--read-size {}", units::fmt_size_arg(spec.read_size as u64)),
    );
    flag(
        a,
        spec.rx_poll_us.is_some(),
        format!("--rx-poll {}", super::RxPoll::from_us(spec.rx_poll_us)),
    );
    flag(
        a,
        spec.io != spec.default_io(facts.threads_when_closed),
        format!("--io {}", spec.io.name()),
    );
}

/// An open loop's flags: outstanding requests, the rate and how it rises,
/// arrivals, pacing, a capacity search.
fn open_loop_flags(spec: &TestSpec, facts: &KindFacts, a: &mut Vec<String>) {
    flag(
        a,
        spec.outstanding
            != facts
                .default_outstanding
                .unwrap_or(TestSpec::default().outstanding),
        format!("--outstanding {}", spec.outstanding),
    );
    if let Some(r) = spec.rate {
        flag(a, true, format!("--rate {r}"));
    }
    if let Some(b) = spec.rate_bps {
        flag(a, true, format!("--rate {b}bit"));
    }
    if let Some(r) = spec.rate_ramp_s {
        flag(a, true, format!("--rate-ramp {r}"));
    }
    flag(
        a,
        spec.arrivals == crate::model::spec::Arrivals::Poisson,
        "--arrivals poisson".into(),
    );
    if spec.rate.is_some() || spec.search.is_some() {
        let how = match spec.pacing {
            crate::model::spec::Pacing::Hybrid => "hybrid",
            _ => "sleep",
        };
        flag(a, true, format!("--pacing {how}"));
    }
    if let Some(s) = &spec.search {
        flag(a, true, format!("--search '{}'", s.target));
        flag(
            a,
            s.resolution_pct != crate::model::search::DEFAULT_RESOLUTION_PCT,
            format!("--search-resolution {}", s.resolution_pct),
        );
    }
}

/// The sockets' and the CPUs' flags: buffers, window, congestion
/// control, MSS, ports, pinning, zero-copy, spinning, IPv6, close.
fn socket_flags(spec: &TestSpec, a: &mut Vec<String>) {
    let size = |b: u64| units::fmt_size_arg(b);
    if let Some(b) = spec.sndbuf {
        flag(a, true, format!("--sndbuf {}", size(b as u64)));
    }
    if let Some(b) = spec.rcvbuf {
        flag(a, true, format!("--rcvbuf {}", size(b as u64)));
    }
    flag(a, spec.window == WindowMode::Exact, "--window exact".into());
    flag(a, spec.nodelay, "--nodelay".into());
    if let Some(cc) = &spec.cc {
        flag(a, true, format!("--cc {cc}"));
    }
    if let Some(m) = spec.mss {
        flag(a, true, format!("--mss {m}"));
    }
    if let Some(n) = spec.ports {
        flag(a, true, format!("--ports {n}"));
    }
    if let Some(c) = &spec.cpus {
        flag(a, true, format!("--cpus {}", units::fmt_cpu_list(c)));
    }
    if let Some(c) = &spec.agent_cpus {
        flag(a, true, format!("--agent-cpus {}", units::fmt_cpu_list(c)));
    }
    flag(a, spec.zerocopy, "--zerocopy".into());
    flag(a, spec.spin, "--spin".into());
    flag(a, spec.ipv6, "-6".into());
    flag(
        a,
        spec.close != TestSpec::default().close,
        "--close reset".into(),
    );
}
