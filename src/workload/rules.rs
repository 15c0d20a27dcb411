//! The rules of a spec that depend on its kind, checked by `check` right
//! after the spec's own (`TestSpec::validate`, which names no kind): the
//! options a kind declares it takes (`KindFacts`), then its own
//! `Kind::rules`. The messages are the ones a user has always read.

use super::kind::{Kind, Section};
use crate::model::error::Invalid;
use crate::model::spec::{Arrivals, IoMode, TestSpec};

/// Every kind-dependent rule `spec` must meet, for `kind`.
pub fn of_kind(spec: &TestSpec, kind: &dyn Kind) -> Result<(), Invalid> {
    let t = kind.facts();
    let name = spec.workload.name();
    if spec.io == IoMode::Threads && !t.threads {
        return Err(format!(
            "--io threads runs stream (tx or rx), closed-loop rr and crr, not {name}: use --io epoll"
        )
        .into());
    }
    sizing(spec, kind)?;
    if spec.rate_bps.is_some() && t.load_bits {
        // Its load's cap (rpm): the kind checks its range.
    } else if !t.udp && (spec.batch != 0 || spec.gso || spec.gro || spec.rate_bps.is_some()) {
        return Err("--batch, --gso, --gro and a bit rate apply to udp-stream and udp-rr".into());
    }
    if spec.exec.is_some() && !t.program {
        return Err("a command applies to the exec workload".into());
    }
    if !spec.crypto_hw && spec.tls.is_none() && !t.crypto_alone {
        return Err("--crypto-hw off applies to TLS tests (--tls, tls-handshake)".into());
    }
    // A kind's own section on another kind's spec (a hand-written or
    // edited spec: options refuse it before).
    for s in crate::model::options::own_sections() {
        if spec.own.raw(s.key).is_some() && t.section != Section::Own(s.key) {
            return Err(format!(
                "the spec's `{}` section belongs to another kind than {name}",
                s.key
            )
            .into());
        }
    }
    kind.rules(spec)
}

/// `--search`, `--duration auto`, `--arrivals` and `--rate-ramp`: where
/// they apply.
fn sizing(spec: &TestSpec, kind: &dyn Kind) -> Result<(), Invalid> {
    use crate::model::search::SearchMetric;
    let t = kind.facts();
    if let Some(s) = &spec.search {
        let fits = match s.target.metric {
            SearchMetric::LossPct => t.search_loss,
            SearchMetric::Rpm => t.load_bits,
            _ => t.search_latency,
        };
        if !fits && t.load_bits {
            return Err(format!(
                "--search {} does not apply to {}: it searches its load for an RPM floor, rpm>=VALUE",
                s.target,
                spec.workload.name()
            )
            .into());
        }
        if !fits {
            return Err(format!(
                "--search {} does not apply to {}: a latency percentile is searched on rr, udp-rr and memcache, loss_pct on udp-rr and udp-stream (open loops), rpm>= on rpm",
                s.target,
                spec.workload.name()
            )
            .into());
        }
    }
    if let (Some(_), Some(why)) = (&spec.auto, t.no_auto) {
        return Err(format!(
            "--duration auto does not apply to {}: {why}; give -d a time",
            spec.workload.name()
        )
        .into());
    }
    if spec.arrivals == Arrivals::Poisson && !t.paced && spec.search.is_none() {
        return Err(
            "--arrivals poisson spaces an open loop's requests: rr, udp-rr or memcache with --rate (or --search)"
                .into(),
        );
    }
    if spec.rate_ramp_s.is_some() && !t.paced {
        return Err(
            "--rate-ramp raises an open loop's rate: rr, udp-rr or memcache with --rate".into(),
        );
    }
    Ok(())
}

/// A UDP kind's datagrams: sizes, batches, GSO, rates and what UDP does
/// not carry. `stream`: udp-stream (its message), else udp-rr (its
/// request and response).
pub fn udp(spec: &TestSpec, stream: bool) -> Result<(), Invalid> {
    use crate::model::spec::{WindowMode, UDP_HEADER, UDP_MAX, UDP_MAX_SEGMENTS};
    let size = |name: &str, v: u64| {
        if (v as usize) < UDP_HEADER || v as usize > UDP_MAX {
            Err(format!(
                "{name} {v}: a UDP message is {UDP_HEADER} to {UDP_MAX} bytes (linerate's header takes {UDP_HEADER})"
            ))
        } else {
            Ok(())
        }
    };
    if stream {
        size("--message", spec.message as u64)?;
    } else {
        size("--request", spec.request)?;
        size("--response", spec.response)?;
    }
    if spec.batch > 1024 {
        return Err("--batch is 1 to 1024 datagrams".into());
    }
    if (spec.gso || spec.gro) && !stream {
        return Err("--gso and --gro apply to udp-stream".into());
    }
    if spec.gso && spec.batch > UDP_MAX_SEGMENTS {
        return Err(format!(
            "--gso carries at most {UDP_MAX_SEGMENTS} datagrams per send (the kernel's UDP_MAX_SEGMENTS): lower --batch"
        ).into());
    }
    if spec.read_size != 0 {
        return Err("--read-size applies to TCP workloads (UDP reads whole datagrams)".into());
    }
    if spec.gso && spec.message * spec.udp_batch() as usize > UDP_MAX {
        return Err(format!(
            "--gso sends --batch x --message in one datagram of at most {UDP_MAX} bytes: lower --batch"
        ).into());
    }
    if spec.rate.is_some() && spec.rate_bps.is_some() {
        return Err("--rate is packets/s or a bit rate, not both".into());
    }
    if spec.rate_bps.is_some() && !stream {
        return Err("a bit rate applies to udp-stream (udp-rr takes transactions/s)".into());
    }
    if !(0.001..=60.0).contains(&spec.timeout_s) {
        return Err("--timeout is 1ms to 60s".into());
    }
    if spec.tls.is_some() {
        return Err("--tls applies to TCP workloads".into());
    }
    if spec.bytes.is_some() || spec.zerocopy || spec.window == WindowMode::Exact {
        return Err("--bytes, --zerocopy and --window exact apply to TCP workloads".into());
    }
    Ok(())
}

/// A program's (exec, scp): one command, run as it is.
pub fn program(spec: &TestSpec) -> Result<(), Invalid> {
    use crate::model::spec::WindowMode;
    if spec.flows != 1 {
        return Err("exec and scp run one command (no --flows)".into());
    }
    if let Some(e) = &spec.exec {
        let uses = |p: &str| e.command.iter().any(|a| a.contains(p));
        if uses("{ssh_config}") && !e.sshd {
            return Err("{ssh_config} names linerate's own sshd: add --sshd".into());
        }
        if uses("{file}") && spec.bytes.is_none() {
            return Err("{file} is a file of --bytes: add --bytes SIZE".into());
        }
    }
    if spec.window == WindowMode::Exact {
        return Err(
            "--window exact needs linerate's own sockets; an unmodified program (exec, scp) gets --rcvbuf through the server's tcp_rmem"
                .into(),
        );
    }
    if spec.tls.is_some() {
        return Err("--tls applies to linerate's own flows, not to exec or scp".into());
    }
    if spec.read_size != 0 {
        return Err("--read-size applies to linerate's own flows, not to exec or scp".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::model::exec::ExecSpec;
    use crate::model::spec::{TestSpec, WindowMode, Workload};
    use crate::workload::check;

    fn refusal(s: &TestSpec) -> String {
        check(s).unwrap_err().to_string()
    }

    #[test]
    fn a_program_runs_one_command_as_it_is() {
        let exec = TestSpec {
            workload: crate::model::spec::Workload::named("exec"),
            exec: Some(ExecSpec {
                command: vec!["ssh".into(), "-F".into(), "{ssh_config}".into()],
                server_command: None,
                sshd: true,
            }),
            ..Default::default()
        };
        assert!(check(&exec).is_ok());
        let mut no_sshd = exec.clone();
        no_sshd.exec.as_mut().unwrap().sshd = false;
        assert!(refusal(&no_sshd).contains("--sshd"));
        let exact = TestSpec {
            window: WindowMode::Exact,
            rcvbuf: Some(65536),
            ..exec.clone()
        };
        assert!(refusal(&exact).contains("tcp_rmem"));
        let none = TestSpec {
            exec: None,
            ..exec.clone()
        };
        assert!(refusal(&none).contains("exec needs a command"));
        let scp = TestSpec {
            workload: crate::model::spec::Workload::named("scp"),
            ..exec
        };
        assert!(refusal(&scp).contains("scp needs --bytes"));
        // A command belongs to a program only.
        let rr = TestSpec {
            exec: scp.exec.clone(),
            ..Default::default()
        };
        assert!(refusal(&rr).contains("a command applies to the exec workload"));
    }

    #[test]
    fn datagrams_keep_to_what_the_kernel_takes() {
        let udp = |message: usize, gso: bool, batch: u32| TestSpec {
            workload: crate::model::spec::Workload::named("udp-stream"),
            message,
            gso,
            batch,
            request: 64,
            response: 64,
            ..Default::default()
        };
        assert!(check(&udp(64, true, 0)).is_ok());
        assert!(check(&udp(1400, true, 0)).is_ok());
        assert!(refusal(&udp(64, true, 200)).contains("UDP_MAX_SEGMENTS"));
        let mut read = udp(64, false, 0);
        read.read_size = 4096;
        assert!(refusal(&read).contains("--read-size"));
        // GSO is udp-stream's; batches are datagrams'.
        let rr = TestSpec {
            workload: crate::model::spec::Workload::named("udp-rr"),
            gso: true,
            ..udp(64, false, 0)
        };
        assert!(refusal(&rr).contains("--gso and --gro apply to udp-stream"));
        let tcp = TestSpec {
            batch: 8,
            ..Default::default()
        };
        assert!(refusal(&tcp).contains("apply to udp-stream and udp-rr"));
    }

    /// What a command line builds, then checks as every test is.
    fn line(l: &str) -> Result<TestSpec, String> {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Run {
            #[arg(value_parser = crate::workload::parser())]
            workload: Workload,
            #[command(flatten)]
            opts: crate::model::options::TestOptions,
        }
        let r = Run::try_parse_from(l.split_whitespace()).map_err(|e| e.to_string())?;
        let mut o = r.opts;
        o.run.workload = Some(r.workload);
        let s = crate::workload::build(&o, false).map_err(|e| e.to_string())?;
        check(&s).map_err(|e| e.to_string())?;
        Ok(s)
    }

    #[test]
    fn io_threads_and_read_sizes_where_the_kind_takes_them() {
        for (l, why) in [
            ("run tls-handshake --io threads", "not tls-handshake"),
            ("run stream --io threads --direction bidir", "bidir"),
            ("run udp-stream --io threads", "udp-stream"),
            ("run udp-stream --read-size 16K", "TCP"),
        ] {
            let e = line(l).unwrap_err();
            assert!(e.contains(why), "{l}: {e}");
        }
        assert!(line("run rr --io threads").is_ok());
    }

    #[test]
    fn a_section_belongs_to_its_kind() {
        let rr = TestSpec::default();
        let kv = TestSpec {
            own: crate::model::own::Own::with(
                "kv",
                &crate::workload::memcache::params::KvSpec::default(),
            ),
            ..rr.clone()
        };
        assert!(refusal(&kv).contains("`kv` section belongs to another kind"));
        let memcache = TestSpec {
            workload: crate::model::spec::Workload::named("memcache"),
            ..rr.clone()
        };
        assert!(refusal(&memcache).contains("memcache needs its key-value mix"));
        let rrul = TestSpec {
            workload: crate::model::spec::Workload::named("rrul"),
            ..rr.clone()
        };
        assert!(refusal(&rrul).contains("rrul needs its phases and probes"));
        let cipher = TestSpec {
            workload: crate::model::spec::Workload::named("cipher"),
            ..rr.clone()
        };
        assert!(refusal(&cipher).contains("cipher needs its algorithm"));
        let threads = TestSpec {
            workload: crate::model::spec::Workload::named("conn"),
            io: crate::model::spec::IoMode::Threads,
            ..rr
        };
        assert!(refusal(&threads)
            .contains("--io threads runs stream (tx or rx), closed-loop rr and crr, not conn"));
    }
}
