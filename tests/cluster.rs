//! `linerate cluster up|status|down` against a real OpenSSH server: a lab's
//! server namespace runs linerate's own sshd (its own keys and ssh_config),
//! and the cluster commands run in the client namespace, so ssh, scp and
//! the agents cross the lab's router. Root only (CI runs as root); HOME and
//! XDG_STATE_HOME point into a temporary folder so ~/.local is untouched.
//! A guard's Drop stops what a test started (by pid), the sshd and the lab,
//! also when an assertion fails.

mod common;

use common::*;
use linerate::lab::sshd::Sshd;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let ok = unsafe { libc::geteuid() } == 0;
    if !ok {
        eprintln!("skipped: cluster tests need root for a lab (CI runs as root)");
    }
    ok
}

/// A lab with linerate's sshd in its server namespace, and a folder for
/// the hosts file, HOME, the state and the "remote" binary. Drop stops the
/// agents the test saw (by pid, if still ours), the sshd and the lab.
struct Site {
    lab: String,
    dir: tempfile::TempDir,
    sshd: Option<Sshd>,
    pids: Vec<u32>,
    hand: Option<std::process::Child>,
}

impl Site {
    fn up(tag: &str) -> Site {
        let lab = format!("t{}-{tag}", std::process::id());
        let mut site = Site {
            lab: lab.clone(),
            dir: tempfile::tempdir().unwrap(),
            sshd: None,
            pids: Vec::new(),
            hand: None,
        };
        let o = run(
            &["lab", "up", &lab, "--no-calibrate", "--emulator", "none"],
            Duration::from_secs(60),
        );
        assert!(o.status.success(), "lab up: {}", stderr(&o));
        let state = linerate::lab::state::load(&lab)
            .unwrap()
            .expect("lab state");
        let sshd_dir = site.dir.path().join("sshd");
        std::fs::create_dir(&sshd_dir).unwrap();
        site.sshd = Some(Sshd::start(&sshd_dir, &state).expect("sshd"));
        std::fs::create_dir(site.dir.path().join("home")).unwrap();
        site
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    fn ssh_config(&self) -> String {
        self.sshd.as_ref().unwrap().config.display().to_string()
    }

    fn remote_binary(&self) -> PathBuf {
        self.path("remote/bin/linerate")
    }

    /// Writes hosts.toml: `sut` reached over ssh, and `extra` entries.
    fn hosts(&self, name: &str, extra: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(
            &p,
            format!(
                "[defaults]\nssh_options = [\"-F\", \"{cfg}\"]\nremote_binary = \"{bin}\"\n\n\
                 [[host]]\nname = \"sut\"\naddress = \"198.18.1.1\"\nssh = \"server\"\n{extra}",
                cfg = self.ssh_config(),
                bin = self.remote_binary().display(),
            ),
        )
        .unwrap();
        p
    }

    /// `linerate ARGS` in the lab's client namespace, HOME in the test's folder.
    fn linerate(&self, args: &[&str]) -> Output {
        let child = Command::new("ip")
            .args(["netns", "exec", &format!("lr-{}-c", self.lab), bin()])
            .args(args)
            .env("HOME", self.path("home"))
            .env("XDG_STATE_HOME", self.path("state"))
            .env_remove("LINERATE_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let o = wait(child, Duration::from_secs(120));
        assert_no_panic(&o);
        o
    }

    /// The state files under XDG_STATE_HOME.
    fn state_files(&self) -> Vec<PathBuf> {
        match std::fs::read_dir(self.path("state/linerate/clusters")) {
            Ok(d) => d.map(|e| e.unwrap().path()).collect(),
            Err(_) => Vec::new(),
        }
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        for &pid in &self.pids {
            if cmdline(pid).contains(" serve ") {
                // SAFETY: a pid this test saw start as its agent, checked above.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        }
        if let Some(mut c) = self.hand.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.sshd.take();
        let _ = run(&["lab", "down", &self.lab], Duration::from_secs(30));
    }
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

/// Processes whose command line contains `needle`.
fn processes_with(needle: &str) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let c = cmdline(pid);
        if c.contains(needle) && alive(pid) {
            out.push((pid, c));
        }
    }
    out
}

/// Every process whose command line or environment holds `secret`.
fn processes_holding(secret: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().filter(|s| s.parse::<u32>().is_ok()) else {
            continue;
        };
        for what in ["cmdline", "environ"] {
            if let Ok(b) = std::fs::read(format!("/proc/{pid}/{what}")) {
                if String::from_utf8_lossy(&b).contains(secret) {
                    out.push(format!("{pid} {what}: {}", cmdline(pid.parse().unwrap())));
                }
            }
        }
    }
    out
}

/// Files under `dir` that contain `secret`.
fn files_holding(dir: &Path, secret: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        let m = std::fs::symlink_metadata(&p).unwrap();
        if m.is_dir() {
            out.extend(files_holding(&p, secret));
        } else if m.is_file() && m.len() < (1 << 20) {
            if let Ok(b) = std::fs::read(&p) {
                if String::from_utf8_lossy(&b).contains(secret) {
                    out.push(p);
                }
            }
        }
    }
    out
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn cluster_up_status_down_over_openssh() {
    if !root() {
        return;
    }
    let started = Instant::now();
    let mut site = Site::up("cl");
    // An agent started by hand on another port: checked, never stopped.
    let token_path = site.path("hand.token");
    std::fs::write(&token_path, "hand-secret-0123456789\n").unwrap();
    std::fs::set_permissions(&token_path, std::fs::Permissions::from_mode(0o600)).unwrap();
    site.hand = Some(
        Command::new("ip")
            .args(["netns", "exec", &format!("lr-{}-s", site.lab), bin()])
            .args([
                "serve",
                "--listen",
                "198.18.1.1:7471",
                "--quiet",
                "--token-file",
            ])
            .arg(&token_path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let hand = site.hand.as_mut().unwrap();
    let hand_pid = hand.id();
    let mut line = String::new();
    BufReader::new(hand.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("listening on 198.18.1.1:7471"), "{line}");
    let hosts = site.hosts(
        "hosts.toml",
        &format!(
            "\n[[host]]\nname = \"hand\"\naddress = \"198.18.1.1\"\nport = 7471\ntoken_file = \"{}\"\n",
            token_path.display()
        ),
    );
    let hosts_s = hosts.to_str().unwrap();
    let version = format!("linerate {}", env!("CARGO_PKG_VERSION"));

    // First up: the binary is copied, the agent starts and answers.
    let t = Instant::now();
    let o = site.linerate(&["cluster", "up", hosts_s]);
    let up1 = t.elapsed();
    assert!(o.status.success(), "up: {}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("sut: copied"), "{out}");
    assert!(
        out.contains("sut: agent started on 198.18.1.1:7470"),
        "{out}"
    );
    assert!(out.contains("hand: agent started by hand answers"), "{out}");
    let bin_meta = std::fs::metadata(site.remote_binary()).expect("the binary was copied");
    assert_eq!(bin_meta.permissions().mode() & 0o777, 0o755);
    assert_eq!(
        std::fs::read(site.remote_binary()).unwrap(),
        std::fs::read(bin()).unwrap()
    );

    // The state: one private file holding the token and the pid.
    let files = site.state_files();
    assert_eq!(files.len(), 1, "{files:?}");
    let state_file = &files[0];
    assert_eq!(mode(state_file), 0o600);
    assert_eq!(mode(state_file.parent().unwrap()), 0o700);
    let st = json(state_file);
    let agent = &st["agents"]["sut"];
    let pid = u(&agent["pid"]) as u32;
    site.pids.push(pid);
    let token = agent["token"].as_str().unwrap().to_string();
    assert_eq!(token.len(), 64, "{st}");
    assert!(st["agents"].get("hand").is_none(), "{st}");
    assert!(alive(pid));
    let cl = cmdline(pid);
    assert!(
        cl.contains(" serve --listen 198.18.1.1:7470 --token-stdin --detach"),
        "{cl}"
    );

    // The token is in no process's command line or environment, and in no
    // file but the state file.
    let holders = processes_holding(&token);
    assert!(holders.is_empty(), "token visible: {holders:?}");
    // (The test's folder holds HOME, the state, the remote binary's
    // folder with the agent's log, and the sshd's files.)
    let files_with = files_holding(site.dir.path(), &token);
    assert_eq!(files_with, vec![state_file.clone()], "token in files");

    // Status: both agents answer, with this version and a clock offset.
    let o = site.linerate(&["cluster", "status", hosts_s]);
    assert!(o.status.success(), "status: {}{}", stdout(&o), stderr(&o));
    let table = stdout(&o);
    assert!(table.contains(&version), "{table}");
    assert!(table.contains("cluster up (pid"), "{table}");
    assert!(table.contains("by hand"), "{table}");
    let o = site.linerate(&["cluster", "status", hosts_s, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    for r in rows.as_array().unwrap() {
        assert_eq!(r["answers"], true, "{r}");
        assert_eq!(r["probe"]["software"], version.as_str(), "{r}");
        // One machine, one clock: the offset is within its uncertainty
        // plus a millisecond of scheduling.
        let off = r["probe"]["offset_ns"].as_i64().unwrap().unsigned_abs();
        assert!(off < u(&r["probe"]["uncertainty_ns"]) + 1_000_000, "{r}");
    }
    assert_eq!(u(&rows[0]["pid"]) as u32, pid);

    // A test across the hosts finds sut's token in the state file.
    let o = site.linerate(&[
        "run",
        "rr",
        "--hosts",
        hosts_s,
        "--clients",
        "hand",
        "--servers",
        "sut",
        "-d",
        "0.5",
        "--warmup",
        "0.2",
        "-q",
    ]);
    assert!(
        o.status.success(),
        "run --hosts: {}{}",
        stdout(&o),
        stderr(&o)
    );

    // Second up: nothing copied, the running agent is left as it is.
    let ino = bin_meta.ino();
    let t = Instant::now();
    let o = site.linerate(&["cluster", "up", hosts_s]);
    let up2 = t.elapsed();
    assert!(o.status.success(), "up again: {}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(!out.contains("copied"), "{out}");
    assert!(out.contains(&format!("is {version}")), "{out}");
    assert!(out.contains("already running"), "{out}");
    assert_eq!(std::fs::metadata(site.remote_binary()).unwrap().ino(), ino);
    assert_eq!(u(&json(state_file)["agents"]["sut"]["pid"]) as u32, pid);
    let bin_path = site.remote_binary().display().to_string();
    // One agent, and its companion for the other crypto setting.
    let (twins, agents): (Vec<_>, Vec<_>) = processes_with(&format!("{bin_path} serve "))
        .into_iter()
        .partition(|(_, cmd)| cmd.contains("--no-crypto-twin"));
    assert_eq!(agents.len(), 1, "{agents:?}");
    assert_eq!(twins.len(), 1, "{twins:?}");

    // Another build at the remote path (one byte more, same version): up
    // copies this one back and restarts the agent on it, with a new token.
    let mut other = std::fs::read(bin()).unwrap();
    other.push(0);
    let tmp = site.path("remote/bin/other");
    std::fs::write(&tmp, other).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&tmp, site.remote_binary()).unwrap();
    let o = site.linerate(&["cluster", "up", hosts_s]);
    assert!(o.status.success(), "up 3: {}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("(another build)"), "{out}");
    assert!(
        out.contains(&format!("sut: stopped the earlier agent (pid {pid})")),
        "{out}"
    );
    assert!(
        out.contains("sut: agent restarted on 198.18.1.1:7470"),
        "{out}"
    );
    assert!(!alive(pid), "the old agent {pid} still runs");
    let st = json(state_file);
    let pid = u(&st["agents"]["sut"]["pid"]) as u32;
    site.pids.push(pid);
    assert!(alive(pid));
    assert_ne!(st["agents"]["sut"]["token"].as_str().unwrap(), token);
    assert_eq!(
        std::fs::read(site.remote_binary()).unwrap(),
        std::fs::read(bin()).unwrap()
    );

    // Down: the agent is gone, the hand-started one is left alone.
    let o = site.linerate(&["cluster", "down", hosts_s]);
    assert!(o.status.success(), "down: {}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(out.contains(&format!("sut: stopped (pid {pid})")), "{out}");
    assert!(out.contains("hand: left alone (started by hand)"), "{out}");
    assert!(!alive(pid), "agent {pid} still running");
    assert!(alive(hand_pid), "the hand-started agent was stopped");
    assert!(site.state_files().is_empty(), "state left after down");
    assert!(
        processes_with(&bin_path).is_empty(),
        "{:?}",
        processes_with(&bin_path)
    );
    // Status now names the host that does not answer, and fails.
    let o = site.linerate(&["cluster", "status", hosts_s]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("no: no token"), "{}", stdout(&o));
    assert!(stderr(&o).contains("sut"), "{}", stderr(&o));
    // Down again is harmless.
    let o = site.linerate(&["cluster", "down", hosts_s]);
    assert!(o.status.success(), "{}", stderr(&o));
    eprintln!(
        "cluster: first up {:.2} s (copy included), second up {:.2} s, whole test {:.1} s",
        up1.as_secs_f64(),
        up2.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn cluster_up_names_the_host_whose_ssh_fails_and_starts_nothing() {
    if !root() {
        return;
    }
    let mut site = Site::up("clf");
    // `bad` is the same server on a port where nothing listens.
    let hosts = site.hosts(
        "hosts.toml",
        "\n[[host]]\nname = \"bad\"\naddress = \"198.18.1.1\"\nport = 7472\nssh = \"server\"\nssh_options = [\"-o\", \"Port=2\"]\n",
    );
    let o = site.linerate(&["cluster", "up", hosts.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("host bad: ssh server failed"), "{err}");
    assert!(err.contains("port 2: Connection refused"), "{err}");
    assert!(!stdout(&o).contains("agent started"), "{}", stdout(&o));
    assert!(site.state_files().is_empty());
    let bin_path = site.remote_binary().display().to_string();
    assert!(processes_with(&bin_path).is_empty());

    // `ghost` logs in fine but its address is not the server's: its agent
    // cannot listen. sut's agent, started alongside, is stopped again.
    let hosts = site.hosts(
        "hosts2.toml",
        "\n[[host]]\nname = \"ghost\"\naddress = \"198.18.1.9\"\nssh = \"server\"\n",
    );
    let o = site.linerate(&["cluster", "up", hosts.to_str().unwrap()]);
    let out = stdout(&o);
    for p in processes_with(&bin_path) {
        site.pids.push(p.0);
    }
    assert_eq!(o.status.code(), Some(1), "{out}{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("host ghost: starting the agent on server failed"),
        "{err}"
    );
    assert!(err.contains("cannot listen on 198.18.1.9:7470"), "{err}");
    assert!(out.contains("sut: agent started"), "{out}");
    assert!(out.contains("sut: stopped its agent again"), "{out}");
    assert!(
        processes_with(&bin_path).is_empty(),
        "{:?}",
        processes_with(&bin_path)
    );
    assert!(site.state_files().is_empty());
}

/// Kills a detached agent by pid when the test ends (if it still is one).
struct Detached(u32);

impl Drop for Detached {
    fn drop(&mut self) {
        if cmdline(self.0).contains(" serve ") {
            // SAFETY: the pid this test's agent reported, checked above.
            unsafe { libc::kill(self.0 as i32, libc::SIGKILL) };
        }
    }
}

/// `serve --token-stdin --detach` on loopback (no root needed): the command
/// returns at once, the agent keeps serving with the token it read, and
/// `cluster status` reaches it as an agent started by hand.
#[test]
fn serve_detaches_with_the_token_from_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("agent.pid");
    let token = "stdin-secret-5f1c9a7e";
    let mut child = Command::new(bin())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--token-stdin",
            "--detach",
        ])
        .arg("--pid-file")
        .arg(&pid_file)
        .arg("--log")
        .arg(dir.path().join("agent.log"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(child.stdin.take().unwrap(), "{token}").unwrap();
    let o = wait(child, Duration::from_secs(10));
    assert!(o.status.success(), "{}", stderr(&o));
    let line = stdout(&o);
    let (addr, pid) = line
        .trim()
        .strip_prefix("linerate agent listening on ")
        .and_then(|r| r.split_once(" pid "))
        .unwrap_or_else(|| panic!("{line:?}"));
    let pid: u32 = pid.parse().unwrap();
    let _guard = Detached(pid);
    assert!(alive(pid), "the agent did not stay up");
    assert_eq!(
        std::fs::read_to_string(&pid_file).unwrap().trim(),
        pid.to_string()
    );
    // A session of its own, no standard stream of the caller, no token in
    // its command line or environment.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(fields[3], pid.to_string(), "session id: {stat}");
    for fd in 0..3 {
        let target = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).unwrap();
        assert!(
            target == Path::new("/dev/null") || target.ends_with("agent.log"),
            "fd {fd}: {}",
            target.display()
        );
    }
    assert!(
        processes_holding(token).is_empty(),
        "{:?}",
        processes_holding(token)
    );

    let port = addr.rsplit(':').next().unwrap();
    let write_hosts = |name: &str, token: &str| {
        let t = dir.path().join(format!("{name}.token"));
        std::fs::write(&t, format!("{token}\n")).unwrap();
        let h = dir.path().join(format!("{name}.toml"));
        std::fs::write(
            &h,
            format!("[[host]]\nname = \"lo\"\naddress = \"127.0.0.1\"\nport = {port}\ntoken_file = \"{}\"\n", t.display()),
        )
        .unwrap();
        h
    };
    let good = write_hosts("good", token);
    let o = run(
        &["cluster", "status", good.to_str().unwrap(), "--json"],
        Duration::from_secs(30),
    );
    assert_no_panic(&o);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let rows: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(rows[0]["answers"], true, "{rows}");
    assert_eq!(rows[0]["started_by"], "by hand", "{rows}");
    let bad = write_hosts("bad", "not-the-token");
    let o = run(
        &["cluster", "status", bad.to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("wrong token"), "{}", stdout(&o));
    assert!(stderr(&o).contains("do not answer: lo"), "{}", stderr(&o));

    // An empty first line is refused before anything listens.
    let mut child = Command::new(bin())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--token-stdin",
            "--detach",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(child.stdin.take().unwrap()).unwrap();
    let o = wait(child, Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("first line is empty"), "{}", stderr(&o));
    assert!(stdout(&o).is_empty());
}

/// Without an ssh client, `cluster up` names the package (no root needed:
/// nothing is reached).
#[test]
fn cluster_up_without_ssh_names_the_package() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("hosts.toml");
    std::fs::write(
        &hosts,
        "[[host]]\nname = \"far\"\naddress = \"198.18.1.1\"\n",
    )
    .unwrap();
    let child = Command::new(bin())
        .args(["cluster", "up", hosts.to_str().unwrap()])
        .env("PATH", dir.path())
        .env("HOME", dir.path())
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = wait(child, Duration::from_secs(30));
    assert_no_panic(&o);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("host far: ssh not found: install openssh-client"),
        "{err}"
    );
    assert!(!dir.path().join("state").exists());
}
