//! The plumbing commands every part of the lab runs (`ip`, `iptables`,
//! `wg`, ...): one place that turns a failed command into a `LabError`
//! naming the command and carrying its stderr. The topology, link kinds
//! and tunnels all build through it.

use std::process::{Command, Stdio};

use super::LabError;

/// Runs `prog args`; its stdout, or its stderr as the error.
pub fn sh(prog: &str, args: &[&str]) -> Result<String, LabError> {
    let out = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| LabError::NoPlumbing {
            program: prog.into(),
            source,
        })?;
    if !out.status.success() {
        return Err(LabError::Plumbing {
            command: format!("{prog} {}", args.join(" ")),
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
