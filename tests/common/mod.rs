//! Helpers for integration tests: run the real binary, start real agents on
//! loopback, and stop only the processes a test started, by PID.
#![allow(dead_code)]

pub mod k8s;

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_linerate")
}

/// The history store of this test process's runs (a test of the history
/// gives its own with --history): the runs of every test are recorded as
/// a user's would be, but not in the home of whoever runs the tests.
pub fn history_store() -> PathBuf {
    tmp("history.db")
}

/// Starts linerate in the background with its output captured.
pub fn spawn<S: AsRef<OsStr>>(args: &[S]) -> Child {
    Command::new(bin())
        .args(args)
        .env("LINERATE_HISTORY", history_store())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn linerate")
}

/// Starts linerate in a process group of its own (as a shell starts a
/// job), so `interrupt_group` reaches it the way a terminal's Ctrl-C does:
/// every process of the group at once.
pub fn spawn_group<S: AsRef<OsStr>>(args: &[S]) -> Child {
    use std::os::unix::process::CommandExt;
    Command::new(bin())
        .args(args)
        .env("LINERATE_HISTORY", history_store())
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn linerate")
}

/// SIGINT to the process group `spawn_group` made (a terminal's Ctrl-C).
pub fn interrupt_group(child: &Child) {
    // SAFETY: a signal to the process group of a child this test started.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
}

/// Waits for a linerate process; kills it and fails the test if it hangs.
pub fn wait(mut child: Child, limit: Duration) -> Output {
    let deadline = Instant::now() + limit;
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "linerate hung past {limit:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs linerate with a hard time limit; kills it if it hangs.
pub fn run<S: AsRef<OsStr>>(args: &[S], limit: Duration) -> Output {
    wait(spawn(args), limit)
}

/// Runs linerate with ARGS split at spaces (no argument holds a space).
pub fn run_str(args: &str, limit: Duration) -> Output {
    run(&args.split_whitespace().collect::<Vec<_>>(), limit)
}

/// Runs `linerate run ARGS -q --json FILE` (ARGS split at spaces), asserts
/// it succeeded without a panic, and returns the result it wrote.
pub fn run_json(name: &str, args: &str, limit: Duration) -> serde_json::Value {
    let args: Vec<&str> = args.split_whitespace().collect();
    run_json_args(name, &args, limit)
}

/// `run ARGS -q --json FILE` with the arguments as given (a mix's groups
/// hold spaces), checked for success: the result.
pub fn run_json_args(name: &str, args: &[&str], limit: Duration) -> serde_json::Value {
    run_json_text(name, args, limit).1
}

/// `run_json_args`, with the human text it printed too.
pub fn run_json_text(name: &str, args: &[&str], limit: Duration) -> (String, serde_json::Value) {
    let out = tmp(name);
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-q", "--json", out.to_str().unwrap()]);
    let o = run(&all, limit);
    assert_no_panic(&o);
    assert!(
        o.status.success(),
        "linerate {all:?} failed ({}): {}",
        o.status,
        stderr(&o)
    );
    (stdout(&o), json(&out))
}

/// `run ARGS --agent ADDR --token-file FILE`: a test against a given agent.
pub fn remote(addr: &str, token_file: &Path, args: &[&str]) -> Vec<String> {
    let mut v = vec!["run".to_string()];
    v.extend(args.iter().map(|a| a.to_string()));
    v.extend([
        "--agent".into(),
        addr.into(),
        "--token-file".into(),
        token_file.display().to_string(),
    ]);
    v
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn assert_no_panic(o: &Output) {
    let e = stderr(o);
    assert!(!e.contains("panicked"), "panic: {e}");
}

/// `linerate study run FILE --out OUT -q`, checked for success: the
/// results folder it made under `out`.
pub fn study_ok(file: &Path, out: &Path, limit: Duration) -> PathBuf {
    study_ok_with(file, out, &[], limit)
}

/// `study_ok` with more options (`--lab NAME`, `--agent ADDR` ...).
pub fn study_ok_with(file: &Path, out: &Path, more: &[&str], limit: Duration) -> PathBuf {
    let mut args = vec![
        "study",
        "run",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "-q",
    ];
    args.extend_from_slice(more);
    let o = run(&args, limit);
    assert_no_panic(&o);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    first_dir(out)
}

pub fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("linerate-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

pub fn token_file(name: &str, token: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = tmp(name);
    std::fs::write(&p, format!("{token}\n")).unwrap();
    // As a user should keep it (else linerate warns on every use).
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

/// A real `linerate serve` on 127.0.0.1, killed by PID when dropped.
pub struct Agent {
    pub child: Child,
    pub addr: String,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Agent {
    pub fn start(token: &str, extra: &[&str]) -> Agent {
        Agent::start_with(&[], "127.0.0.1:0", token, extra)
    }

    /// An agent listening on `listen`, started through `prefix` (e.g.
    /// `unshare --time --monotonic 5 --kill-child`), if any.
    /// An empty `token`: the agent gets none.
    pub fn start_with(prefix: &[&str], listen: &str, token: &str, extra: &[&str]) -> Agent {
        let tf = token_file(&format!("tok-{}", rand_suffix()), token);
        let mut args = vec!["serve", "--listen", listen];
        if !token.is_empty() {
            args.extend(["--token-file", tf.to_str().unwrap()]);
        }
        args.extend_from_slice(extra);
        let mut cmd = match prefix.split_first() {
            Some((p, rest)) => {
                let mut c = Command::new(p);
                c.args(rest).arg(bin());
                c
            }
            None => Command::new(bin()),
        };
        let mut child = cmd
            .args(&args)
            .env_remove("LINERATE_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn agent");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line.trim().rsplit(' ').next().unwrap().to_string();
        let ip = listen.rsplit_once(':').unwrap().0;
        assert!(addr.starts_with(&format!("{ip}:")), "agent said {line:?}");
        let err = child.stderr.take().unwrap();
        let stderr = Some(std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut BufReader::new(err), &mut s);
            s
        }));
        Agent {
            child,
            addr,
            stderr,
        }
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Kills the agent and returns what it logged.
    pub fn log(mut self) -> String {
        self.kill();
        self.stderr
            .take()
            .map(|h| h.join().unwrap())
            .unwrap_or_default()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.kill();
    }
}

fn rand_suffix() -> String {
    format!("{:?}", Instant::now())
        .chars()
        .filter(|c| c.is_ascii_digit())
        .collect()
}

/// The first folder under `out` (a study's results folder).
pub fn first_dir(out: &Path) -> PathBuf {
    std::fs::read_dir(out)
        .unwrap_or_else(|e| panic!("{}: {e}", out.display()))
        .next()
        .expect("a results folder")
        .unwrap()
        .path()
}

pub fn json(path: &PathBuf) -> serde_json::Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

pub fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a u64: {v}"))
}

pub fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// A lab (root) that is taken down when the test ends, pass or fail: `up`
/// names it `t{pid}-{tag}`.
pub struct Lab {
    pub name: String,
}

impl Lab {
    pub fn up(tag: &str, link: &str) -> (Lab, String) {
        let name = format!("t{}-{tag}", std::process::id());
        let lab = Lab { name: name.clone() };
        let mut args = vec!["lab", "up", &name];
        args.extend(link.split_whitespace());
        let o = run(&args, Duration::from_secs(90));
        assert_no_panic(&o);
        assert!(o.status.success(), "lab up {link}: {}", stderr(&o));
        (lab, stdout(&o))
    }

    pub fn ns(&self, role: &str) -> String {
        format!("lr-{}-{role}", self.name)
    }

    /// Runs `cmd` in namespace `role` and returns its standard output.
    pub fn exec(&self, role: &str, cmd: &[&str]) -> String {
        let o = Command::new("ip")
            .args(["netns", "exec", &self.ns(role)])
            .args(cmd)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    pub fn status(&self) -> serde_json::Value {
        let o = run(
            &["lab", "status", &self.name, "--json"],
            Duration::from_secs(10),
        );
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_str(&stdout(&o)).unwrap()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = run(&["lab", "down", &self.name], Duration::from_secs(30));
    }
}

/// A host that loses its CPUs now and then, as a VM whose hypervisor
/// runs something else (steal time): on every CPU, at once, a thread at
/// real-time priority 50 (above the lab's emulator at 10 and every
/// ordinary process) spins `on` out of every `every`. Needs root
/// (SCHED_FIFO); bounded: stops when dropped and after `limit` regardless.
/// Real-time throttling (95% by default) keeps the host alive whatever the
/// duty.
pub struct Stalls {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<u64>>,
}

impl Stalls {
    pub fn start(on: Duration, every: Duration, limit: Duration) -> Stalls {
        let cpus: Vec<usize> =
            (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
        Stalls::on_cpus(&cpus, on, every, limit)
    }

    /// The same stalls on `cpus` only: that CPU's threads run late, the
    /// others' do not.
    pub fn on_cpus(cpus: &[usize], on: Duration, every: Duration, limit: Duration) -> Stalls {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        // One start for all: the CPUs stall together.
        let t0 = Instant::now() + Duration::from_millis(20);
        let deadline = Instant::now() + limit;
        let threads = cpus
            .iter()
            .map(|&cpu| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    // SAFETY: cpu_set_t is plain data; these calls only
                    // change this thread's affinity and policy.
                    unsafe {
                        let mut set: libc::cpu_set_t = std::mem::zeroed();
                        libc::CPU_SET(cpu, &mut set);
                        libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
                        let p = libc::sched_param { sched_priority: 50 };
                        assert_eq!(
                            libc::sched_setscheduler(0, libc::SCHED_FIFO, &p),
                            0,
                            "SCHED_FIFO needs root"
                        );
                    }
                    let mut stalls = 0;
                    let mut next = t0;
                    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                        std::thread::sleep(next.saturating_duration_since(Instant::now()));
                        let end = next + on;
                        while Instant::now() < end {
                            std::hint::spin_loop();
                        }
                        stalls += 1;
                        next += every;
                    }
                    stalls
                })
            })
            .collect();
        Stalls { stop, threads }
    }

    /// Stops the stalls; how many there were, every CPU's counted.
    pub fn stop(mut self) -> u64 {
        self.stop_all()
    }

    fn stop_all(&mut self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.threads.drain(..).map(|t| t.join().unwrap_or(0)).sum()
    }
}

impl Drop for Stalls {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// An agent that also serves QUIC's perf protocol (`serve --quic-perf`) on
/// a loopback port: the process, its stdout's lines (kept open to the
/// end: the agent prints after the first line, and a closed pipe would
/// end it), and the perf server's address.
pub fn quic_perf_agent() -> (
    Child,
    std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
    std::net::SocketAddr,
) {
    use std::io::BufRead;
    let mut agent = spawn(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--insecure-no-token",
        "--no-crypto-twin",
        "--quic-perf",
        "127.0.0.1:0",
        "-q",
    ]);
    let mut lines = std::io::BufReader::new(agent.stdout.take().unwrap()).lines();
    let line = lines.next().unwrap().unwrap();
    let addr = line
        .strip_prefix("linerate agent: QUIC perf server on ")
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("{line}"))
        .parse()
        .unwrap();
    (agent, lines, addr)
}

/// An agent serving RPM on a loopback port, killed when dropped.
pub struct RpmAgent {
    child: Child,
    /// Its stdout, kept open (the agent prints after the first line).
    _lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
    /// The configuration's URL, as the agent printed it.
    pub url: String,
}

/// `serve` on a loopback port with no token, serving RPM at `rpm`.
pub fn serve_rpm(rpm: &str) -> Vec<&str> {
    vec![
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--insecure-no-token",
        "--no-crypto-twin",
        "--rpm",
        rpm,
    ]
}

impl RpmAgent {
    pub fn start(clear: bool) -> RpmAgent {
        RpmAgent::start_with(if clear { &["--rpm-clear"] } else { &[] })
    }

    /// With `extra` flags of `serve` (`--tls-cert FILE --tls-key FILE`).
    pub fn start_with(extra: &[&str]) -> RpmAgent {
        let mut args = serve_rpm("127.0.0.1:0");
        args.push("-q");
        args.extend_from_slice(extra);
        let mut child = spawn(&args);
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let line = lines.next().unwrap().unwrap();
        let url = line
            .strip_prefix("linerate agent: RPM server on ")
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or_else(|| panic!("{line}"))
            .to_string();
        RpmAgent {
            child,
            _lines: lines,
            url,
        }
    }

    /// The server's base: the URL without the configuration's path.
    pub fn base(&self) -> &str {
        self.url.strip_suffix("/.well-known/nq").unwrap()
    }
}

impl Drop for RpmAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
