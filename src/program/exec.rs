//! The `exec` and `scp` workloads: a real program timed in the lab.
//! `exec` runs any command in the client namespace (and optionally one in
//! the server namespace); `scp` is exec with linerate's own sshd in the
//! server namespace and real OpenSSH `scp` copying `--bytes` to it.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::flow::WindowSampler;
use crate::lab::state::LabState;
use crate::lab::{calibrate, netns, sshd::Sshd, topology};
use crate::measure::{cpu, sockdiag};
use crate::model::exec::ExecRecord;
use crate::model::result::{AgentInfo, CpuFields, Iteration, Pair, Status, Summary, TestResult};
use crate::model::spec::TestSpec;

use super::ProgramError;

/// A private folder for keys, configs and the file copied; removed after.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Scratch, ProgramError> {
        let p = std::env::temp_dir().join(format!(
            "linerate-exec-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0)
        ));
        std::fs::create_dir_all(&p).map_err(|source| ProgramError::Io {
            path: p.clone(),
            source,
        })?;
        Ok(Scratch(p))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Puts the server namespace's tcp_rmem back when the test ends.
struct RmemGuard<'a>(&'a LabState);

impl Drop for RmemGuard<'_> {
    fn drop(&mut self) {
        let _ = netns::sysctls(
            &self.0.server_ns,
            &[("net.ipv4.tcp_rmem", topology::TCP_RMEM.into())],
        );
    }
}

/// A file of `n` bytes that does not compress (scp's cipher sees real work).
fn write_file(path: &Path, n: u64) -> Result<(), ProgramError> {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).map_err(|source| {
        ProgramError::Io {
            path: path.into(),
            source,
        }
    })?);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ n;
    let mut left = n;
    let mut chunk = vec![0u8; 1 << 16];
    while left > 0 {
        for w in chunk.chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            w.copy_from_slice(&x.to_le_bytes());
        }
        let k = (left as usize).min(chunk.len());
        f.write_all(&chunk[..k]).map_err(ProgramError::Os)?;
        left -= k as u64;
    }
    f.flush().map_err(ProgramError::Os)
}

/// CPU ticks (user + system, own and reaped children) of every process in
/// namespace `ns`: the server side of an unmodified program (sshd forks a
/// child per connection, which its listener reaps).
fn ns_cpu_s(ns: &str) -> Option<f64> {
    use std::os::unix::fs::MetadataExt;
    let ino = std::fs::metadata(netns::path(ns)).ok()?.ino();
    let want = format!("net:[{ino}]");
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let mut ticks = 0u64;
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(link) = std::fs::read_link(format!("/proc/{pid}/ns/net")) else {
            continue;
        };
        if link.to_string_lossy() != want {
            continue;
        }
        let Some(f) = crate::lab::state::proc_stat(pid) else {
            continue;
        };
        // Fields 14-17 of stat (utime, stime, cutime, cstime) are 11-14 here.
        ticks += f
            .iter()
            .skip(11)
            .take(4)
            .filter_map(|v| v.parse::<u64>().ok())
            .sum::<u64>();
    }
    Some(ticks as f64 / hz)
}

/// Samples the window the client's connections to `server` see, every 10 ms
/// while their data is being acknowledged, from inside the client namespace.
fn sample_windows(
    ns: String,
    server: std::net::Ipv4Addr,
    port: Option<u16>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<WindowSampler> {
    std::thread::spawn(move || {
        let mut s = WindowSampler::default();
        if netns::enter(&ns).is_err() {
            return s;
        }
        let mut acked: std::collections::HashMap<u16, u64> = Default::default();
        while !stop.load(Ordering::Relaxed) {
            for c in sockdiag::tcp_connections().unwrap_or_default() {
                if c.dst != server || port.is_some_and(|p| p != c.dport) {
                    continue;
                }
                let a = c.info.bytes_acked.unwrap_or(0);
                let prev = acked.insert(c.sport, a).unwrap_or(a);
                // Only while data flows: an idle connection's window is
                // whatever the receiver last had room for.
                if a > prev + 1448 {
                    if let Some(w) = c.info.snd_wnd {
                        s.push(w);
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        s
    })
}

fn substitute(
    args: &[String],
    server: &str,
    cfg: Option<&Path>,
    file: Option<&Path>,
) -> Vec<String> {
    args.iter()
        .map(|a| {
            let mut a = a.replace("{server}", server);
            if let Some(c) = cfg {
                a = a.replace("{ssh_config}", &c.display().to_string());
            }
            if let Some(f) = file {
                a = a.replace("{file}", &f.display().to_string());
            }
            a
        })
        .collect()
}

/// Runs `cmd` in the client namespace with a time limit; returns its exit
/// code, wall time, CPU (user + system incl. children) and output tail.
fn run_timed(
    cmd: &[String],
    ns: &str,
    limit: Duration,
    log: &Path,
) -> Result<(Option<i32>, f64, f64, String), ProgramError> {
    let out = std::fs::File::create(log).map_err(|source| ProgramError::Io {
        path: log.into(),
        source,
    })?;
    let mut c = Command::new(&cmd[0]);
    c.args(&cmd[1..])
        .stdin(Stdio::null())
        .stdout(out.try_clone().map_err(ProgramError::Os)?)
        .stderr(out);
    netns::command_in(&mut c, ns)?;
    let t0 = Instant::now();
    let child = c.spawn().map_err(|source| ProgramError::Run {
        program: cmd[0].clone(),
        source,
    })?;
    let pid = child.id() as i32;
    // SAFETY: pidfd_open on our own child; the descriptor names exactly it,
    // so the time limit can never signal a reused PID.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let killer = std::thread::spawn(move || {
        if done_rx.recv_timeout(limit).is_err() && pidfd >= 0 {
            // SAFETY: signals through the pidfd of our child.
            unsafe {
                libc::syscall(libc::SYS_pidfd_send_signal, pidfd, libc::SIGKILL, 0, 0);
            }
            return true;
        }
        false
    });
    let mut status = 0;
    // SAFETY: rusage is written by the kernel for the reaped child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    let elapsed = t0.elapsed().as_secs_f64();
    let _ = done_tx.send(());
    let killed = killer.join().unwrap_or(false);
    if pidfd >= 0 {
        // SAFETY: closes the descriptor opened above.
        unsafe { libc::close(pidfd) };
    }
    std::mem::forget(child);
    if rc < 0 {
        return Err(ProgramError::Wait {
            program: cmd[0].clone(),
            source: std::io::Error::last_os_error(),
        });
    }
    let us = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let cpu = us(ru.ru_utime) + us(ru.ru_stime);
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(5).collect();
    let mut tail = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
    if killed {
        tail = format!(
            "killed after the time limit of {:.0} s\n{tail}",
            limit.as_secs_f64()
        );
    }
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    Ok((code, elapsed, cpu, tail))
}

/// Runs an exec or scp test on `lab` and returns its result.
pub fn run(
    spec: &TestSpec,
    lab: &LabState,
    command_line: Vec<String>,
) -> Result<TestResult, ProgramError> {
    let es = spec.exec.clone().ok_or(ProgramError::NoCommand)?;
    let scratch = Scratch::new()?;
    let dir = scratch.0.clone();
    // The receive window of an unmodified server: the namespace's tcp_rmem,
    // calibrated until a probe transfer sees the window asked for. Before
    // sshd starts: accepted sockets inherit the listener's buffer, sized
    // from tcp_rmem when it was created (as the seed says, "sshd must be
    // restarted"); started first, sshd gave 82 KB windows for 48K and 64K.
    let mut _rmem_guard = None;
    let mut server_tcp_rmem = None;
    let program = crate::workload::kind_of(spec.workload).program();
    let window_target = program.and_then(|p| p.server_window(spec));
    if let Some(w) = window_target {
        _rmem_guard = Some(RmemGuard(lab));
        let (max, seen) = calibrate::rmem_for_window(lab, w)?;
        server_tcp_rmem = Some(format!(
            "4096 {} {max} (probe saw a {seen} B window)",
            max.min(131_072)
        ));
    }
    let sshd = if es.sshd {
        Some(Sshd::start(&dir, lab)?)
    } else {
        None
    };
    let file = match spec.bytes {
        Some(n) => {
            let f = dir.join("payload.bin");
            write_file(&f, n)?;
            Some(f)
        }
        None => None,
    };
    let cfg = sshd.as_ref().map(|s| s.config.clone());
    let command = program
        .and_then(|p| p.command(spec, cfg.as_deref(), file.as_deref()))
        .unwrap_or_else(|| {
            substitute(
                &es.command,
                &lab.server_addr,
                cfg.as_deref(),
                file.as_deref(),
            )
        });
    let login_s = match &cfg {
        Some(c) => {
            let probe = vec![
                "ssh".to_string(),
                "-F".into(),
                c.display().to_string(),
                "server".into(),
                "true".into(),
            ];
            let (code, t, _, tail) = run_timed(
                &probe,
                &lab.client_ns,
                Duration::from_secs(60),
                &dir.join("login.log"),
            )?;
            if code != Some(0) {
                return Err(ProgramError::Login(tail));
            }
            Some(t)
        }
        None => None,
    };
    let mut server_child = None;
    if let Some(sc) = &es.server_command {
        let mut c = Command::new(&sc[0]);
        c.args(&sc[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        netns::command_in(&mut c, &lab.server_ns)?;
        // SAFETY: setsid is async-signal-safe: the server command leads its
        // own process group, so the whole group is stopped at the end.
        unsafe {
            c.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        server_child = Some(c.spawn().map_err(ProgramError::ServerCommand)?);
        // Give a listener a moment to bind.
        std::thread::sleep(Duration::from_millis(200));
    }
    let server_ip: std::net::Ipv4Addr = lab.server_addr.parse().map_err(ProgramError::Address)?;
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample_windows(
        lab.client_ns.clone(),
        server_ip,
        sshd.as_ref().map(|s| s.port),
        stop.clone(),
    );
    let srv0 = ns_cpu_s(&lab.server_ns);
    let host0 = cpu::snapshot();
    let limit = Duration::from_secs_f64(spec.duration_s.max(1.0));
    let outcome = run_timed(&command, &lab.client_ns, limit, &dir.join("command.log"));
    let host1 = cpu::snapshot();
    let srv1 = ns_cpu_s(&lab.server_ns);
    stop.store(true, Ordering::Relaxed);
    let window = sampler.join().ok().and_then(|s| s.observed());
    if let Some(mut c) = server_child {
        // SAFETY: signals the process group of the command we started.
        unsafe { libc::kill(-(c.id() as i32), libc::SIGTERM) };
        let _ = c.wait();
    }
    let (exit_code, elapsed, client_cpu, tail) = outcome?;
    let server_cpu = match (srv0, srv1) {
        (Some(a), Some(b)) => Some((b - a).max(0.0)),
        _ => None,
    };
    let rec = ExecRecord {
        command,
        exit_code,
        elapsed_s: elapsed,
        login_s,
        client_cpu_s: client_cpu,
        server_cpu_s: server_cpu,
        observed_window: window,
        window_target,
        server_tcp_rmem,
        stderr_tail: tail,
        ssh_version: sshd.as_ref().map(|s| s.version.clone()),
    };
    let host = cpu::window(&host0, &host1);
    Ok(test_result(
        spec,
        lab,
        command_line,
        sshd.as_ref(),
        rec,
        host,
    ))
}

/// The result of an exec or scp test from its record and the host's CPU
/// over the run: one iteration, its summary, and where it ran.
fn test_result(
    spec: &TestSpec,
    lab: &LabState,
    command_line: Vec<String>,
    sshd: Option<&Sshd>,
    rec: ExecRecord,
    host: crate::model::sample::CpuWindow,
) -> TestResult {
    let (exit_code, elapsed) = (rec.exit_code, rec.elapsed_s);
    let (client_cpu, server_cpu) = (rec.client_cpu_s, rec.server_cpu_s);
    let ok = exit_code == Some(0);
    let bytes = if ok { spec.bytes.unwrap_or(0) } else { 0 };
    let side = |cpu_s: f64| {
        let mut w = host.clone();
        w.process_cpu_s = cpu_s;
        w.process_cores = if w.wall_s > 0.0 {
            cpu_s / w.wall_s
        } else {
            0.0
        };
        w.process_util_pct = 100.0 * w.process_cores / w.ncores.max(1) as f64;
        w
    };
    let cw = side(client_cpu);
    let aw = side(server_cpu.unwrap_or(0.0));
    let error = (!ok).then(|| {
        format!(
            "{} exited with {}: {}",
            rec.command[0],
            exit_code.map_or("a signal".to_string(), |c| c.to_string()),
            rec.stderr_tail.lines().last().unwrap_or("")
        )
    });
    let it = Iteration {
        index: 0,
        status: if ok { Status::Ok } else { Status::Failed },
        error: error.clone(),
        duration_s: elapsed,
        bytes,
        throughput_bps: bytes as f64 * 8.0 / elapsed.max(1e-9),
        transactions: u64::from(ok),
        transactions_per_s: if ok { 1.0 / elapsed.max(1e-9) } else { 0.0 },
        cost: Pair {
            client: cpu::cost(&cw, bytes, u64::from(ok), 0.0),
            agent: cpu::cost(&aw, bytes, u64::from(ok), 0.0),
        },
        cpu: Pair {
            client: Some(cw),
            agent: server_cpu.map(|_| aw),
        },
        ..Default::default()
    };
    let fields = |c: &crate::model::sample::CpuCost| CpuFields {
        host_util_pct: Some(c.host_util_pct),
        process_util_pct: Some(c.process_util_pct),
        us_per_kb: c.us_per_kb,
        us_per_tx: c.us_per_tx,
    };
    let summary = Summary {
        workload: spec.workload.name().into(),
        duration_s: elapsed,
        bytes,
        throughput_bps: it.throughput_bps,
        transactions: it.transactions,
        transactions_per_s: it.transactions_per_s,
        cpu: Pair {
            client: fields(&it.cost.client),
            agent: fields(&it.cost.agent),
        },
        direction: "tx".into(),
        flows: 1,
        iterations: 1,
        status: if ok { Status::Ok } else { Status::Failed },
        observed_window_bytes: rec.observed_window.as_ref().map(|w| w.median_bytes as u64),
        ..Default::default()
    };
    let host_info = crate::measure::host::collect();
    TestResult {
        schema: crate::model::result::SCHEMA.into(),
        schema_version: crate::model::result::SCHEMA_VERSION,
        started_at: crate::units::rfc3339_now(),
        command: command_line,
        spec: spec.clone(),
        confidence_target: Default::default(),
        agent: AgentInfo {
            address: format!(
                "{}{}",
                lab.server_addr,
                sshd.map(|s| format!(":{}", s.port)).unwrap_or_default()
            ),
            local: true,
            pid: sshd.map(|s| s.pid()),
            ..Default::default()
        },
        environment: Pair {
            client: host_info.clone(),
            agent: host_info,
        },
        summary,
        iterations: vec![it],
        baseline: None,
        lab: None,
        exec: Some(rec),
        hosts: Vec::new(),
        flow_map: Vec::new(),
        groups: Vec::new(),
        firewall: None,
        search: None,
    }
}
