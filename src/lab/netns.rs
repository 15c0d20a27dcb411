//! Entering named network namespaces (`ip netns add` puts them under
//! /run/netns). A network namespace is a per-thread attribute: a thread
//! that enters one takes every socket it opens there, and threads it spawns
//! afterwards start there too. That lets one process hold the client end of
//! a lab in one thread and a server end in another.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;

use super::LabError;

pub const NETNS_DIR: &str = "/run/netns";

pub fn path(name: &str) -> String {
    format!("{NETNS_DIR}/{name}")
}

pub fn exists(name: &str) -> bool {
    std::path::Path::new(&path(name)).exists()
}

/// The names of every named namespace (`ip netns list`), sorted.
pub fn list() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(NETNS_DIR)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn open(name: &str) -> Result<File, LabError> {
    File::open(path(name)).map_err(|source| LabError::Namespace {
        name: name.into(),
        source,
    })
}

/// The namespace this process started in, opened before any thread of it
/// left it (every move goes through `enter`, and the first one is made by
/// a thread still at home). Init's (/proc/1/ns/net) may be out of reach in
/// a container.
static HOME: std::sync::OnceLock<Option<File>> = std::sync::OnceLock::new();

fn home() -> Option<&'static File> {
    HOME.get_or_init(|| File::open("/proc/thread-self/ns/net").ok())
        .as_ref()
}

/// Moves the calling thread into namespace `name`.
pub fn enter(name: &str) -> Result<(), LabError> {
    home();
    let f = open(name)?;
    // SAFETY: setns on a valid namespace descriptor; affects only this thread.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(LabError::Enter {
            name: name.into(),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Runs `f` on a new thread inside namespace `name` and returns its value.
pub fn run_in<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> Result<T, LabError> + Send + 'static,
) -> Result<T, LabError> {
    let name = name.to_string();
    std::thread::spawn(move || {
        enter(&name)?;
        f()
    })
    .join()
    .map_err(|_| LabError::ThreadPanicked)?
}

/// Runs `f` on a new thread in the namespace the process started in (the
/// host's): the controller's own threads may sit in a lab's client
/// namespace, where /proc/sys/net shows that namespace's sysctls.
pub fn run_in_host<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, LabError> + Send + 'static,
) -> Result<T, LabError> {
    const HOST: &str = "the process's first network namespace";
    let ns = home();
    std::thread::spawn(move || {
        let ns = ns.ok_or_else(|| LabError::Namespace {
            name: HOST.into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        })?;
        // SAFETY: setns on a valid namespace descriptor; affects only this thread.
        if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(LabError::Enter {
                name: HOST.into(),
                source: std::io::Error::last_os_error(),
            });
        }
        f()
    })
    .join()
    .map_err(|_| LabError::ThreadPanicked)?
}

/// Reads a host-wide sysctl (one network namespaces do not have, such as
/// net.core.netdev_max_backlog), after writing `set` to it when given.
pub fn host_sysctl(key: &str, set: Option<String>) -> Result<String, LabError> {
    let path = crate::measure::host::sysctl_path(key);
    run_in_host(move || {
        let err = |source| LabError::ReadSysctl {
            path: path.clone(),
            source,
        };
        if let Some(v) = set {
            std::fs::write(&path, v).map_err(err)?;
        }
        std::fs::read_to_string(&path)
            .map(|s| s.trim().to_string())
            .map_err(err)
    })
}

/// Makes `cmd` start inside namespace `name` (setns between fork and exec).
pub fn command_in(cmd: &mut Command, name: &str) -> Result<(), LabError> {
    let f = open(name)?;
    // SAFETY: only async-signal-safe calls (setns) run in the forked child;
    // `f` is moved into the closure and stays open until exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(())
}

/// Sets sysctls (`net.ipv4.tcp_rmem` ...) inside namespace `name`: /proc/sys/net
/// shows the namespace of the thread that opens it.
pub fn sysctls(name: &str, values: &[(&str, String)]) -> Result<(), LabError> {
    let values: Vec<(String, String)> = values
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    run_in(name, move || {
        for (k, v) in &values {
            let p = crate::measure::host::sysctl_path(k);
            std::fs::write(&p, v).map_err(|source| LabError::SetSysctl {
                key: k.clone(),
                value: v.clone(),
                source,
            })?;
        }
        Ok(())
    })
}

/// Reads one sysctl inside namespace `name`.
pub fn sysctl(name: &str, key: &str) -> Result<String, LabError> {
    let p = crate::measure::host::sysctl_path(key);
    run_in(name, move || {
        std::fs::read_to_string(&p)
            .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
            .map_err(|source| LabError::ReadSysctl { path: p, source })
    })
}
