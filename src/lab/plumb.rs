//! The plumbing commands every part of the lab runs (`ip`, `iptables`,
//! `wg`, ...): one place that turns a failed command into a `LabError`
//! naming the command and carrying its stderr. The topology, link kinds
//! and tunnels all build through it.

use std::process::{Command, Stdio};

use super::LabError;

/// Runs `prog args`; its stdout, or its stderr as the error.
pub fn sh(prog: &str, args: &[&str]) -> Result<String, LabError> {
    let mut cmd = Command::new(prog);
    cmd.args(args);
    run(cmd, &format!("{prog} {}", args.join(" ")), None)
}

/// Runs `cmd` (shown as `shown` in an error), `input` on its stdin; its
/// stdout, or its stderr as the error. Every plumbing command ends here.
pub fn run(mut cmd: Command, shown: &str, input: Option<&str>) -> Result<String, LabError> {
    let name = cmd.get_program().to_string_lossy().into_owned();
    let program = || name.clone();
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|source| LabError::NoPlumbing {
        program: program(),
        source,
    })?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        use std::io::Write;
        stdin
            .write_all(text.as_bytes())
            .map_err(|source| LabError::NoPlumbing {
                program: program(),
                source,
            })?;
    }
    let out = child
        .wait_with_output()
        .map_err(|source| LabError::NoPlumbing {
            program: program(),
            source,
        })?;
    if !out.status.success() {
        return Err(LabError::Plumbing {
            command: shown.into(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().into(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `ip -n NS args`.
pub fn ip(ns: &str, args: &[&str]) -> Result<String, LabError> {
    let mut a = vec!["-n", ns];
    a.extend_from_slice(args);
    sh("ip", &a)
}

/// Runs `prog` inside namespace `ns` (`ip netns exec` also gives it the
/// namespace's /sys/class/net).
pub fn in_ns(ns: &str, prog: &str, args: &[&str]) -> Result<String, LabError> {
    let mut a = vec!["netns", "exec", ns, prog];
    a.extend_from_slice(args);
    sh("ip", &a)
}

/// A process the lab started and owns (the emulator, wireguard-go).
pub struct Daemon {
    pub pid: u32,
    /// Its start time in clock ticks: the PID with it names the process
    /// even after the PID is reused.
    pub start_ticks: u64,
}

/// Starts `cmd` inside namespace `ns` in a session of its own (it outlives
/// `lab up`, and a terminal's Ctrl-C aimed at `lab up` does not reach it),
/// stdout and stderr to `log`, and waits up to 5 s for `ready` to appear.
/// Exiting first is an error carrying the log's last line; not getting
/// ready is `silent()`. The process belongs to the lab, not to this one:
/// reaped by init once we exit, stopped by PID at `lab down`.
pub fn start_daemon(
    mut cmd: Command,
    ns: &str,
    what: &'static str,
    log: &std::path::Path,
    ready: &std::path::Path,
    silent: impl FnOnce() -> LabError,
) -> Result<Daemon, LabError> {
    use std::time::{Duration, Instant};
    let logf = std::fs::File::create(log).map_err(|source| LabError::Io {
        path: log.to_path_buf(),
        source,
    })?;
    cmd.stdin(Stdio::null())
        .stdout(logf.try_clone().map_err(LabError::Os)?)
        .stderr(logf);
    super::netns::command_in(&mut cmd, ns)?;
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|source| LabError::Start { what, source })?;
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            return Err(LabError::ExitedAtStart {
                what,
                status,
                log: text.trim().lines().last().unwrap_or("no message").into(),
            });
        }
        if ready.exists() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(silent());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let start_ticks = super::state::start_ticks(pid).unwrap_or(0);
    std::mem::forget(child);
    Ok(Daemon { pid, start_ticks })
}
