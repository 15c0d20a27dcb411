//! The human table printed after a test: intervals, then the result with
//! CPU and service demand on both ends, placement and the kernel's view.

use std::fmt::Write;

use crate::model::result::{Iteration, TestInterval, TestResult};
use crate::model::sample::WorkerPlacement;
use crate::model::spec::TestSpec;
use crate::units::{fmt_bps, fmt_bytes, fmt_cpu_list, fmt_rate, fmt_secs, fmt_us};
use crate::workload::RateColumn;

pub fn describe(spec: &TestSpec) -> String {
    let kind = crate::workload::kind_of(spec.workload);
    let what = kind.describe(spec);
    // A program's, a local measurement's and rrul's description is the
    // whole line; flows get their TLS, flows and window after it.
    if kind.describes_all() {
        return what;
    }
    let what = match &spec.tls {
        None => what,
        Some(t) => format!(
            "{what}, TLS {}{} ({:?}, {}, {}{})",
            t.version
                .as_deref()
                .map(|v| format!("{v} "))
                .unwrap_or_default(),
            t.cipher.as_deref().unwrap_or("default suite"),
            t.backend,
            t.kx,
            t.cert.name(),
            if t.resume { ", resumption on" } else { "" }
        )
        .replace("Rustls", "rustls")
        .replace("Openssl", "openssl"),
    };
    let window = if spec.is_finite() {
        format!("until done (limit {:.0} s)", spec.duration_s)
    } else {
        format!(
            "{} s window after {} s warm-up",
            spec.duration_s, spec.warmup_s
        )
    };
    if spec.io == crate::model::spec::IoMode::Threads {
        return format!(
            "{what}: {} flow{}, a blocking thread each per end (--io threads), {window}",
            spec.flows,
            if spec.flows == 1 { "" } else { "s" },
        );
    }
    format!(
        "{what}: {} flow{} on {} {}worker{} (agent {}), {window}",
        spec.flows,
        if spec.flows == 1 { "" } else { "s" },
        spec.workers,
        if spec.spin { "busy-polling " } else { "" },
        if spec.workers == 1 { "" } else { "s" },
        spec.agent_workers
    )
}

use crate::workload::rate_column;

fn pct(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.0}%")).unwrap_or_else(|| "-".into())
}

pub fn interval_line(i: &TestInterval, show_tx: bool) -> String {
    let lat = |f: fn(&crate::model::sample::LatencySummary) -> f64| {
        i.latency_us
            .as_ref()
            .map(|l| fmt_us(f(l)))
            .unwrap_or_else(|| "-".into())
    };
    // Intervals shorter than 0.1 s (a finite transfer's) get more digits:
    // "0.0-0.0 s" told nothing.
    let digits = if i.end_s - i.start_s < 0.1 { 3 } else { 1 };
    format!(
        "  {:>5.digits$}-{:<5.digits$}s {:>15} {:>10} {:>10} {:>10} {:>8} {:>8}",
        i.start_s,
        i.end_s,
        fmt_bps(i.throughput_bps),
        if show_tx {
            fmt_rate(i.transactions_per_s)
        } else if i.counters.client.packets_rx + i.counters.agent.packets_rx > 0 {
            // udp-stream: received datagrams per second in this column.
            let secs = (i.end_s - i.start_s).max(1e-9);
            fmt_rate((i.counters.client.packets_rx + i.counters.agent.packets_rx) as f64 / secs)
        } else {
            "-".into()
        },
        lat(|l| l.p50),
        lat(|l| l.p99),
        pct(i.cpu.client.as_ref().map(|c| c.host_util_pct)),
        pct(i.cpu.agent.as_ref().map(|c| c.host_util_pct)),
    )
}

/// The interval table's heading; its third column is transactions/s, or
/// for udp-stream the datagrams received per second.
pub fn interval_header(udp: bool) -> String {
    format!(
        "  {:<12} {:>15} {:>10} {:>10} {:>10} {:>8} {:>8}",
        "interval",
        "throughput",
        if udp { "pkt/s" } else { "trans/s" },
        "p50",
        "p99",
        "cpu cli",
        "cpu agt"
    )
}

/// An open loop's waits: how late the sender was (and what its spin cost),
/// how long each end's reads waited, and which part set the tail.
fn waits_lines(
    spec: &TestSpec,
    it: &Iteration,
    w: &crate::model::sample::Waits,
) -> Vec<(&'static str, String)> {
    let mut v = Vec::new();
    let pct = |l: &crate::model::sample::LatencySummary| {
        format!(
            "p50 {} p99 {} max {}",
            fmt_us(l.p50),
            fmt_us(l.p99),
            fmt_us(l.max)
        )
    };
    if let Some(l) = &w.net_us {
        v.push((
            "net",
            format!(
                "{} (from the intended send time, less the client's own lateness: what a search judges)",
                pct(l)
            ),
        ));
    }
    if let Some(l) = w.held_us.as_ref().filter(|l| l.p99 >= 1.0) {
        v.push((
            "held back",
            format!(
                "{} (due, with every --outstanding request in flight)",
                pct(l)
            ),
        ));
    }
    if let Some(l) = &w.send_late_us {
        let spin = it.counters.client.pacing_spin_ns as f64 / 1e9;
        let how = match spec.pacing {
            crate::model::spec::Pacing::Hybrid => format!(
                "; hybrid pacing, spun {:.0}% of a core to send on time",
                100.0 * spin / it.duration_s.max(1e-9)
            ),
            _ => "; slept to each due time (--pacing sleep, or auto with no CPU to spare)"
                .to_string(),
        };
        v.push(("sent late", format!("{}{how}", pct(l))));
    }
    let mut reads = Vec::new();
    if let Some(l) = &w.agent_read_delay_us {
        reads.push(format!("agent {}", pct(l)));
    }
    if let Some(l) = &w.client_read_delay_us {
        reads.push(format!("client {} (after the latency's end)", pct(l)));
    }
    if !reads.is_empty() {
        v.push(("read delay", reads.join("; ")));
    }
    let tail = it
        .latency_corrected_us
        .as_ref()
        .or(it.latency_us.as_ref())
        .and_then(|l| w.tail(l.p99));
    if let Some(t) = tail {
        v.push(("tail", format!("set by {}", t.phrase())));
    }
    v
}

fn placement_line(p: &[WorkerPlacement]) -> String {
    p.iter()
        .map(|w| {
            let seen = w
                .seen
                .iter()
                .take(2)
                .map(|(c, s)| format!("cpu{c} {s:.0}%"))
                .collect::<Vec<_>>()
                .join(" ");
            let pin = w
                .pinned
                .as_ref()
                .map(|c| format!(" pinned {}", fmt_cpu_list(c)))
                .unwrap_or_default();
            format!("w{}{pin} [{seen}]", w.worker)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn cpu_line(it: &Iteration, agent: bool) -> String {
    let (w, c) = if agent {
        (&it.cpu.agent, &it.cost.agent)
    } else {
        (&it.cpu.client, &it.cost.client)
    };
    let Some(w) = w else {
        return "not measured".into();
    };
    let mut s = format!(
        "host {:.1}% (usr {:.0} sys {:.0} si {:.0} steal {:.1}), process {:.1}% = {:.2} cores",
        w.host_util_pct,
        w.user_pct,
        w.system_pct,
        w.softirq_pct,
        w.steal_pct,
        w.process_util_pct,
        w.process_cores
    );
    if let Some(t) = w.tunnel_cpu_s {
        let _ = write!(s, " (its tunnel's {t:.2} s included)");
    }
    if let Some(v) = c.us_per_kb {
        let _ = write!(s, ", {v:.3} µs/KB");
    }
    if let Some(v) = c.us_per_tx {
        let _ = write!(s, ", {v:.2} µs/tx");
    }
    let n = if agent {
        &it.counters.agent
    } else {
        &it.counters.client
    };
    if n.rx_polls > 0 {
        let _ = write!(
            s,
            "; its receiver polled {:.2} cores (--rx-poll; {:.0}% of its polls found data)",
            n.rx_poll_ns as f64 / 1e9 / it.duration_s.max(1e-9),
            100.0 * n.rx_poll_hits as f64 / n.rx_polls as f64
        );
    }
    s
}

pub fn render(r: &TestResult, intervals: bool) -> String {
    let mut o = String::new();
    let spec = &r.spec;
    let _ = writeln!(o, "linerate {}", describe(spec));
    match &r.agent.foreign {
        Some(what) => {
            let _ = writeln!(
                o,
                "server {} ({what}: its side is not measured, bytes are the client's, received and sent) · client {}",
                r.agent.address, r.environment.client.hostname,
            );
        }
        None => {
            let _ = writeln!(
                o,
                "agent {}{} · client {} · agent {}",
                r.agent.address,
                if r.agent.local { " (local)" } else { "" },
                r.environment.client.hostname,
                r.environment.agent.hostname
            );
        }
    }
    if let Some(lab) = &r.lab {
        for line in lab.describe() {
            let _ = writeln!(o, "{line}");
        }
    }
    if let Some(e) = &r.exec {
        let _ = writeln!(o, "command: {}", e.command.join(" "));
        let mut line = format!(
            "exit {} after {:.3} s; client CPU {:.3} s",
            e.exit_code
                .map_or("by a signal".to_string(), |c| c.to_string()),
            e.elapsed_s,
            e.client_cpu_s
        );
        if let Some(s) = e.server_cpu_s {
            let _ = write!(line, ", server namespace CPU {s:.3} s");
        }
        if let Some(l) = e.login_s {
            let _ = write!(line, "; login alone (ssh server true) {l:.3} s");
        }
        let _ = writeln!(o, "{line}");
        if let Some(t) = &e.server_tcp_rmem {
            let _ = writeln!(o, "server tcp_rmem {t}");
        }
        if let Some(v) = &e.ssh_version {
            let _ = writeln!(o, "{v}");
        }
    }
    if let Some(w) = r.summary.observed_window_bytes {
        let _ = writeln!(
            o,
            "window the sender saw mid-transfer (tcpi_snd_wnd): {}",
            fmt_bytes(w)
        );
    }
    // A program's result: its record, no placement or kernel view.
    let exec = r.exec.is_some();
    let kind = crate::workload::kind_of(spec.workload);
    let rate = rate_column(spec);
    for it in &r.iterations {
        if r.iterations.len() > 1 {
            let _ = writeln!(o, "\niteration {}", it.index + 1);
        }
        iteration(&mut o, spec, it, intervals, exec, kind, rate);
    }
    overall(&mut o, r);
    super::groups::lines(&mut o, r);
    super::search::lines(&mut o, r);
    o
}

/// One iteration's lines: a kind's own text (rrul's timeline and probes), or the intervals,
/// throughput, rates, the workload's own lines, latency and CPU; then,
/// unless a program ran, placement, the kernel's view, errors and hosts.
fn iteration(
    o: &mut String,
    spec: &TestSpec,
    it: &Iteration,
    intervals: bool,
    exec: bool,
    kind: &dyn crate::workload::Kind,
    rate: RateColumn,
) {
    let show_tx = rate == RateColumn::Transactions;
    // A kind's own text in place of the intervals (rrul: its timeline
    // and its probes idle and loaded), then the CPU.
    if let Some(t) = kind.text(&it.own, intervals) {
        o.push_str(&t);
        let _ = writeln!(o, "  {:<12} {}", "cpu client", cpu_line(it, false));
        let _ = writeln!(o, "  {:<12} {}", "cpu agent", cpu_line(it, true));
        if let Some(e) = &it.error {
            let _ = writeln!(o, "  {:<12} {e}", "PARTIAL");
        }
        return;
    }
    if intervals && !it.intervals.is_empty() {
        let _ = writeln!(o, "{}", interval_header(rate == RateColumn::Packets));
        for i in &it.intervals {
            let _ = writeln!(o, "{}", interval_line(i, show_tx));
        }
    }
    let _ = writeln!(
        o,
        "  {:<12} {} ({} in {})",
        "throughput",
        fmt_bps(it.throughput_bps),
        fmt_bytes(it.bytes),
        fmt_secs(it.duration_s)
    );
    if let (Some(_), Some(l)) = (spec.bytes, &it.latency_us) {
        // A finite transfer's time is its own figure, not a percentile.
        let _ = writeln!(
            o,
            "  {:<12} {} {}, {} each (p50), {} the slowest",
            "transfer",
            it.transactions,
            if it.transactions == 1 {
                "transfer"
            } else {
                "transfers"
            },
            fmt_secs(l.p50 / 1e6),
            fmt_secs(l.max / 1e6)
        );
    }
    if show_tx {
        let _ = writeln!(
            o,
            "  {:<12} {} ({} transactions)",
            "trans/s",
            fmt_rate(it.transactions_per_s),
            it.transactions
        );
    }
    // The workload's own lines (UDP packets and loss, memcache
    // operations, connections).
    for (label, text) in kind.report_lines(spec, it) {
        let _ = writeln!(o, "  {label:<12} {text}");
    }
    if let Some(l) = &it.latency_us {
        let _ = writeln!(
            o,
            "  {:<12} p50 {} p90 {} p99 {} p99.9 {} max {}",
            "latency",
            fmt_us(l.p50),
            fmt_us(l.p90),
            fmt_us(l.p99),
            fmt_us(l.p999),
            fmt_us(l.max)
        );
    }
    if let Some(l) = &it.latency_corrected_us {
        let _ = writeln!(
            o,
            "  {:<12} p50 {} p99 {} max {} (from intended send time)",
            "corrected",
            fmt_us(l.p50),
            fmt_us(l.p99),
            fmt_us(l.max)
        );
    }
    if let Some(w) = &it.waits {
        for (label, text) in waits_lines(spec, it, w) {
            let _ = writeln!(o, "  {label:<12} {text}");
        }
    }
    let _ = writeln!(o, "  {:<12} {}", "cpu client", cpu_line(it, false));
    let agent = if exec { "cpu server" } else { "cpu agent" };
    let _ = writeln!(o, "  {:<12} {}", agent, cpu_line(it, true));
    if exec {
        return;
    }
    placement_and_kernel(o, it);
    hosts_table(o, it, spec, show_tx);
    if let Some(e) = &it.error {
        let _ = writeln!(o, "  {:<12} {e}", "PARTIAL");
    }
}

/// Where the iteration's workers ran, the kernel's view of its first
/// client flow (with the retransmissions of all), and its flow errors.
fn placement_and_kernel(o: &mut String, it: &Iteration) {
    // A kind that runs in this process places no worker.
    let placed = !(it.placement.client.is_empty() && it.placement.agent.is_empty());
    let agent = match it.placement.agent.is_empty() {
        true => "-".to_string(),
        false => placement_line(&it.placement.agent),
    };
    if placed {
        let _ = writeln!(
            o,
            "  {:<12} client {} | agent {agent}",
            "placement",
            placement_line(&it.placement.client),
        );
    }
    let flows: Vec<_> = it
        .flows
        .client
        .iter()
        .chain(it.flows.agent.iter())
        .collect();
    if let Some(f) = it.flows.client.first().filter(|f| f.tcp_info.is_some()) {
        let ti = f.tcp_info.as_ref();
        let _ = writeln!(
            o,
            "  {:<12} {}, first: rtt {} µs cwnd {} mss {} retrans {} sndbuf {} rcvbuf {} cc {}",
            "kernel",
            crate::units::plural(it.flows.client.len() as u64, "client flow", "client flows"),
            ti.map(|t| t.rtt_us).unwrap_or(0),
            ti.map(|t| t.snd_cwnd).unwrap_or(0),
            ti.map(|t| t.snd_mss).unwrap_or(0),
            flows
                .iter()
                .filter_map(|f| f.tcp_info.as_ref())
                .map(|t| t.total_retrans as u64)
                .sum::<u64>(),
            f.sndbuf.map(|b| fmt_bytes(b as u64)).unwrap_or_default(),
            f.rcvbuf.map(|b| fmt_bytes(b as u64)).unwrap_or_default(),
            f.congestion_control.clone().unwrap_or_default()
        );
    }
    let errs: Vec<&String> = it
        .errors
        .client
        .iter()
        .chain(it.errors.agent.iter())
        .collect();
    if it.counters.client.errors + it.counters.agent.errors > 0 || !errs.is_empty() {
        let _ = writeln!(
            o,
            "  {:<12} {}: {}",
            "errors",
            crate::units::plural(
                it.counters.client.errors + it.counters.agent.errors,
                "flow error",
                "flow errors"
            ),
            errs.iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
}

/// The lines over all iterations: a kind's own (rrul's merged latency), the confidence
/// interval (and whether its target was met), and TLS with its cost.
fn overall(o: &mut String, r: &TestResult) {
    let kind = crate::workload::kind_of(r.spec.workload);
    if let (Some(t), true) = (kind.text(&r.summary.own, false), r.iterations.len() > 1) {
        let _ = writeln!(o, "\nall iterations (latency merged, throughput means)");
        o.push_str(&t);
    }
    if let Some(c) = &r.summary.confidence {
        let target = r.confidence_target.width_pct / 2.0;
        let _ = writeln!(
            o,
            "\n  {} iterations: mean {} ± {:.1}% ({:.0}% CI), min {} max {}{}",
            c.n,
            fmt_main(r, c.mean),
            c.half_width_pct.unwrap_or(f64::NAN),
            c.level_pct,
            fmt_main(r, c.min),
            fmt_main(r, c.max),
            // Said, not left to the reader: the run stopped at its maximum.
            match c.half_width_pct {
                Some(h) if h > target && r.confidence_target.max > 1 => format!(
                    "; the ±{target:.1}% target was not met in {} (raise the maximum of --iterations, or lengthen the window)",
                    crate::units::plural(c.n as u64, "iteration", "iterations")
                ),
                _ => String::new(),
            }
        );
    }
    if let Some(t) = &r.summary.tls {
        let hs = r
            .iterations
            .iter()
            .map(|i| i.counters.client.tls_handshakes)
            .sum::<u64>();
        let resumed = r
            .iterations
            .iter()
            .map(|i| i.counters.client.tls_resumed)
            .sum::<u64>();
        let _ = writeln!(
            o,
            "  {:<12} {} {} {} cert {}{} ({}){}",
            "tls",
            t.protocol,
            t.suite,
            t.kx_group,
            t.cert,
            t.etm
                .map(|e| if e {
                    ", encrypt-then-MAC"
                } else {
                    ", MAC-then-encrypt"
                })
                .unwrap_or(""),
            t.library,
            if hs > 0 {
                format!(
                    "; {hs} handshakes ({resumed} resumed){}",
                    r.summary
                        .tls_handshakes_per_s
                        .map(|v| format!(", {}", fmt_rate(v)))
                        .unwrap_or_default()
                )
            } else {
                String::new()
            }
        );
    }
    if let Some(line) = tls_cost_line(r) {
        let label = if crate::workload::kind_of(r.spec.workload).twin_keeps_tls() {
            "quic cost"
        } else {
            "tls cost"
        };
        let _ = writeln!(o, "  {label:<12} {line}");
    }
}

/// Many hosts: one row per host over the common window, its clock offset,
/// and a warning when the hosts' interval edges are further apart than 1%
/// of an interval (then per-interval sums mix different moments).
fn hosts_table(o: &mut String, it: &Iteration, spec: &TestSpec, show_tx: bool) {
    if it.hosts.is_empty() {
        return;
    }
    let skew = it.start_skew_us.unwrap_or(0.0);
    let _ = writeln!(
        o,
        "  {:<12} {}, {}; interval edges aligned within {} (clock offsets corrected)",
        "hosts",
        crate::units::plural(
            it.hosts.iter().filter(|h| h.role == "client").count() as u64,
            "client",
            "clients"
        ),
        crate::units::plural(
            it.hosts.iter().filter(|h| h.role == "server").count() as u64,
            "server",
            "servers"
        ),
        fmt_us(skew)
    );
    let _ = writeln!(
        o,
        "    {:<10} {:<6} {:>5} {:>14} {:>10} {:>9} {:>6} {:>7} {:>9}  clock offset",
        "host",
        "role",
        "flows",
        "throughput",
        "trans/s",
        "p50",
        "cpu",
        "cores",
        if show_tx { "µs/tx" } else { "µs/KB" },
    );
    for h in &it.hosts {
        let cost = if show_tx {
            h.cost.us_per_tx
        } else {
            h.cost.us_per_kb
        };
        let _ = writeln!(
            o,
            "    {:<10} {:<6} {:>5} {:>14} {:>10} {:>9} {:>6} {:>7} {:>9}  {} ± {} ({})",
            h.name,
            h.role,
            h.flows.len(),
            fmt_bps(h.throughput_bps),
            if show_tx && h.role == "client" {
                fmt_rate(h.transactions_per_s)
            } else {
                "-".into()
            },
            h.latency_us
                .as_ref()
                .map(|l| fmt_us(l.p50))
                .unwrap_or_else(|| "-".into()),
            h.cpu
                .as_ref()
                .map_or("-".into(), |c| format!("{:.0}%", c.host_util_pct)),
            h.cpu
                .as_ref()
                .map_or("-".into(), |_| format!("{:.2}", h.cost.process_cores)),
            cost.map(|v| format!("{v:.3}"))
                .unwrap_or_else(|| "-".into()),
            fmt_signed_us(h.clock.offset_ns as f64 / 1e3),
            fmt_us(h.clock.uncertainty_ns as f64 / 1e3),
            h.addresses.join(" ")
        );
        // Where it runs, when the hosts file says (a Kubernetes fleet).
        if let Some(site) = h.site_line() {
            let _ = writeln!(o, "      {site}");
        }
        // Per data address (port), when the server has several.
        for a in &h.per_address {
            let _ = writeln!(
                o,
                "      port {:<15} {:>5} {:>14} {:>10}  {:.0}% of {}'s bytes",
                a.address,
                a.flows.len(),
                fmt_bps(a.throughput_bps),
                if show_tx && a.transactions_per_s > 0.0 {
                    fmt_rate(a.transactions_per_s)
                } else {
                    "-".into()
                },
                a.share * 100.0,
                h.name
            );
        }
    }
    if skew > spec.interval_s * 1e6 * 0.01 {
        let _ = writeln!(
            o,
            "  {:<12} the hosts' interval edges are {} apart, more than 1% of the {} s interval: per-interval sums mix different moments",
            "WARNING",
            fmt_us(skew),
            spec.interval_s
        );
    }
}

fn fmt_signed_us(us: f64) -> String {
    if us < 0.0 {
        format!("-{}", fmt_us(-us))
    } else {
        fmt_us(us)
    }
}

/// "TLS costs 2.1x the client CPU per KB of clear (0.95 vs 0.45 µs/KB) ..."
/// from the clear baseline run beside a TLS test.
pub fn tls_cost_line(r: &TestResult) -> Option<String> {
    let b = r.baseline.as_ref()?;
    let s = &r.summary;
    let per_tx = s.main_metric == Some(crate::model::spec::MainMetric::TransactionRate);
    let (unit, ct, ca, bt, ba) = if per_tx {
        (
            "µs/tx",
            s.cpu.client.us_per_tx?,
            s.cpu.agent.us_per_tx?,
            b.cpu.client.us_per_tx?,
            b.cpu.agent.us_per_tx?,
        )
    } else {
        (
            "µs/KB",
            s.cpu.client.us_per_kb?,
            s.cpu.agent.us_per_kb?,
            b.cpu.client.us_per_kb?,
            b.cpu.agent.us_per_kb?,
        )
    };
    let what = if per_tx { "transaction" } else { "KB" };
    let (main, base) = if per_tx {
        (s.transactions_per_s, b.transactions_per_s)
    } else {
        (s.throughput_bps, b.throughput_bps)
    };
    // QUIC's twin is TLS over TCP: the same cipher, another transport.
    if crate::workload::kind_of(r.spec.workload).twin_keeps_tls() {
        let lab = match (&r.lab, s.host_cost_ratio(b, per_tx)) {
            (Some(_), Some(h)) => format!(
                "; in a lab TCP's receive work (its segments and acknowledgements) runs in the kernel in the emulator's context, in neither end's figure, and QUIC's in its processes: the whole host spent {h:.1}x per {what}"
            ),
            _ => String::new(),
        };
        return Some(format!(
            "QUIC costs {:.1}x the client CPU per {what} of TLS over TCP ({ct:.3} vs {bt:.3} {unit}) and {:.1}x the agent's ({ca:.3} vs {ba:.3}); {} {:.2}x of TLS over TCP (measured right after it, same TLS settings){lab}",
            ct / bt,
            ca / ba,
            if per_tx { "rate" } else { "throughput" },
            main / base,
        ));
    }
    // Encryption only adds work: a TLS run measured cheaper or faster than
    // its clear twin says more about the two runs than about TLS (the
    // report's key point says the same).
    let contradiction = ct < bt || ca < ba || (!per_tx && main > base);
    Some(format!(
        "TLS costs {:.1}x the client CPU per {what} of clear ({ct:.3} vs {bt:.3} {unit}) and {:.1}x the agent's ({ca:.3} vs {ba:.3}); {} {:.2}x of clear{}",
        ct / bt,
        ca / ba,
        if per_tx { "rate" } else { "throughput" },
        main / base,
        if contradiction {
            ". TLS measured cheaper or faster than clear, which encryption cannot be: the two runs ran once each, one after the other, on a host whose figures drift; repeat them interleaved (a study with --repeat 3 --shuffle) and pinned (--cpus, --agent-cpus) before reading a cost from them"
        } else {
            ""
        }
    ))
}

fn fmt_main(r: &TestResult, v: f64) -> String {
    match r.summary.main_metric {
        Some(crate::model::spec::MainMetric::TransactionRate) => fmt_rate(v),
        _ => fmt_bps(v),
    }
}
fn opt_or_dash(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map(f).unwrap_or_else(|| "-".into())
}

/// The quick study's one table: a row per test, both ends' CPU cost.
pub fn quick_table(results: &[(String, TestResult)]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<16} {:>14} {:>10} {:>10} {:>10} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10}",
        "test",
        "throughput",
        "trans/s",
        "p50",
        "p99",
        "cli cpu",
        "agt cpu",
        "cli µs/KB",
        "agt µs/KB",
        "cli µs/tx",
        "agt µs/tx"
    );
    for (label, r) in results {
        let s = &r.summary;
        let is_tx = rate_column(&r.spec) == RateColumn::Transactions;
        let _ = writeln!(
            o,
            "{:<16} {:>14} {:>10} {:>10} {:>10} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10}",
            label,
            fmt_bps(s.throughput_bps),
            if is_tx {
                fmt_rate(s.transactions_per_s)
            } else {
                "-".into()
            },
            opt_or_dash(s.latency_us.as_ref().map(|l| l.p50), fmt_us),
            opt_or_dash(s.latency_us.as_ref().map(|l| l.p99), fmt_us),
            opt_or_dash(s.cpu.client.process_util_pct, |v| format!("{v:.0}%")),
            opt_or_dash(s.cpu.agent.process_util_pct, |v| format!("{v:.0}%")),
            opt_or_dash(s.cpu.client.us_per_kb, |v| format!("{v:.3}")),
            opt_or_dash(s.cpu.agent.us_per_kb, |v| format!("{v:.3}")),
            opt_or_dash(s.cpu.client.us_per_tx.filter(|_| is_tx), |v| format!(
                "{v:.2}"
            )),
            opt_or_dash(s.cpu.agent.us_per_tx.filter(|_| is_tx), |v| format!(
                "{v:.2}"
            )),
        );
    }
    o
}
