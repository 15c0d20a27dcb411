//! The memcached an agent starts for a test (`--service`): the real binary,
//! bound to the agent's data address on a free port, waited for until it
//! answers, watched while the test runs, and stopped when it ends (also on
//! error paths: `Drop`). Only a `memcached` binary is started: an agent
//! that ran any command a controller named would be a remote shell.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::protocol::parse_stats;
use super::KvError;
use crate::model::sample::ServiceWindow;

/// Options linerate sets itself (the address, the port, the process's life).
const OURS: &[&str] = &[
    "-l",
    "--listen",
    "-p",
    "--port",
    "-s",
    "--unix-socket",
    "-d",
    "--daemon",
    "-P",
    "--pidfile",
];

/// The words of a `--service` command, checked: the program is memcached,
/// and it does not set what linerate sets.
pub fn check_command(cmd: &str) -> Result<Vec<String>, KvError> {
    let words: Vec<String> = cmd.split_whitespace().map(String::from).collect();
    let Some(prog) = words.first() else {
        return Err(KvError::NoService);
    };
    let base = prog.rsplit('/').next().unwrap_or(prog);
    if base != "memcached" {
        return Err(KvError::NotMemcached(prog.clone()));
    }
    for w in &words[1..] {
        let flag = w.split('=').next().unwrap_or(w);
        if OURS.contains(&flag)
            || (flag.starts_with("-p") && flag.len() > 2 && flag.as_bytes()[2].is_ascii_digit())
        {
            return Err(KvError::OursToSet(w.clone()));
        }
    }
    Ok(words)
}

/// Where `prog` is: a path as given, or the first match on PATH.
fn find(prog: &str) -> Option<PathBuf> {
    if prog.contains('/') {
        let p = PathBuf::from(prog);
        return p.is_file().then_some(p);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(prog))
            .find(|p| p.is_file())
    })
}

/// A running memcached this process started.
pub struct Service {
    child: Child,
    pub addr: SocketAddr,
    /// "memcached 1.6.38" as it answers `version`.
    pub name: String,
    pub command: String,
    log: PathBuf,
}

impl Service {
    /// Starts `cmd` bound to `ip` on a free port and waits (5 s at most)
    /// until it answers `version`.
    pub fn start(cmd: &str, ip: IpAddr) -> Result<Service, KvError> {
        let words = check_command(cmd)?;
        let prog = find(&words[0]).ok_or_else(|| KvError::NotInstalled(words[0].clone()))?;
        let mut last = None;
        // A free port is only free until someone takes it: try again.
        for _ in 0..3 {
            let port = TcpListener::bind(SocketAddr::new(ip, 0))
                .and_then(|l| l.local_addr())
                .map_err(|source| KvError::NoFreePort { ip, source })?
                .port();
            let addr = SocketAddr::new(ip, port);
            let log = std::env::temp_dir().join(format!(
                "linerate-memcached-{}-{port}.log",
                std::process::id()
            ));
            let mut args: Vec<String> = words[1..].to_vec();
            args.extend(["-l".into(), ip.to_string(), "-p".into(), port.to_string()]);
            if !words
                .iter()
                .any(|w| w == "-U" || w.starts_with("--udp-port"))
            {
                args.extend(["-U".into(), "0".into()]);
            }
            // memcached refuses to run as root without a user to become.
            let root = unsafe { libc::geteuid() } == 0;
            if root && !words.iter().any(|w| w == "-u" || w.starts_with("--user")) {
                args.extend(["-u".into(), "nobody".into()]);
            }
            let err = std::fs::File::create(&log).map_err(|source| KvError::Log {
                path: log.clone(),
                source,
            })?;
            let child = Command::new(&prog)
                .args(&args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(err)
                .spawn()
                .map_err(|source| KvError::Start {
                    program: prog.clone(),
                    source,
                })?;
            let mut svc = Service {
                child,
                addr,
                name: "memcached".into(),
                command: format!("{} {}", prog.display(), args.join(" ")),
                log,
            };
            match svc.wait_ready(Duration::from_secs(5)) {
                Ok(v) => {
                    svc.name = v;
                    return Ok(svc);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("three tries"))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn wait_ready(&mut self, limit: Duration) -> Result<String, KvError> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(why) = self.exited() {
                return Err(KvError::Exited(why));
            }
            if let Ok(v) = version(self.addr) {
                return Ok(v);
            }
            if Instant::now() >= deadline {
                return Err(KvError::NotReady {
                    addr: self.addr,
                    secs: limit.as_secs_f64(),
                    tail: self.log_tail(),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Why the process is gone, if it is (with its last words).
    pub fn exited(&mut self) -> Option<String> {
        let status = self.child.try_wait().ok()??;
        use std::os::unix::process::ExitStatusExt;
        let how = match (status.code(), status.signal()) {
            (Some(c), _) => format!("exit status {c}"),
            (None, Some(s)) => format!("killed by signal {s}"),
            _ => "ended".into(),
        };
        Some(format!(
            "memcached (pid {}) on {} {how}{}",
            self.child.id(),
            self.addr,
            self.log_tail()
        ))
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        match text.lines().rev().find(|l| !l.trim().is_empty()) {
            Some(l) => format!(": {}", l.trim()),
            None => String::new(),
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            // SAFETY: a signal to our own child, which has not been reaped.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(2);
            while self.child.try_wait().ok().flatten().is_none() {
                if Instant::now() >= deadline {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let _ = std::fs::remove_file(&self.log);
    }
}

/// One request on a fresh blocking connection, read until `done` says the
/// reply is whole (2 s per step at most).
fn ask<T>(
    addr: SocketAddr,
    req: &[u8],
    done: impl Fn(&[u8]) -> Result<Option<T>, KvError>,
) -> Result<T, KvError> {
    let t = Duration::from_secs(2);
    let mut s = TcpStream::connect_timeout(&addr, t).map_err(KvError::Connection)?;
    s.set_read_timeout(Some(t)).map_err(KvError::Connection)?;
    s.set_write_timeout(Some(t)).map_err(KvError::Connection)?;
    s.write_all(req).map_err(KvError::Connection)?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 << 10];
    loop {
        let n = s.read(&mut chunk).map_err(KvError::Connection)?;
        if n == 0 {
            return Err(KvError::Closed);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(v) = done(&buf)? {
            return Ok(v);
        }
        if buf.len() > 1 << 20 {
            return Err(KvError::ReplyTooLong);
        }
    }
}

/// "memcached 1.6.38", from its `version` command.
pub fn version(addr: SocketAddr) -> Result<String, KvError> {
    ask(addr, b"version\r\n", |b| {
        let Some(end) = b.windows(2).position(|w| w == b"\r\n") else {
            return Ok(None);
        };
        let line = String::from_utf8_lossy(&b[..end]).to_string();
        match line.strip_prefix("VERSION ") {
            Some(v) => Ok(Some(format!("memcached {v}"))),
            None => Err(KvError::NotMemcachedReply(line)),
        }
    })
}

/// memcached's `stats`, as name -> value.
pub fn stats(addr: SocketAddr) -> Result<BTreeMap<String, String>, KvError> {
    ask(addr, b"stats\r\n", |b| Ok(parse_stats(b)?))
}

/// Stats that are levels, not running counts: the window reports their
/// value at its end; every other number is reported as its change.
const GAUGES: &[&str] = &[
    "curr_items",
    "bytes",
    "curr_connections",
    "limit_maxbytes",
    "threads",
    "pid",
    "uptime",
    "time",
    "pointer_size",
    "conn_yields",
    "hash_power_level",
    "hash_bytes",
    "max_connections",
    "rusage_user",
    "rusage_system",
];

/// What memcached counted between two `stats` replies.
pub fn window(
    name: &str,
    pid: Option<u32>,
    a: &BTreeMap<String, String>,
    b: &BTreeMap<String, String>,
) -> ServiceWindow {
    let mut w = ServiceWindow {
        name: name.to_string(),
        pid,
        ..Default::default()
    };
    for (k, v) in b {
        let Ok(end) = v.parse::<i64>() else { continue };
        if GAUGES.contains(&k.as_str()) {
            w.end.insert(k.clone(), end);
        } else if let Some(start) = a.get(k).and_then(|s| s.parse::<i64>().ok()) {
            w.delta.insert(k.clone(), end - start);
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_memcached_and_none_of_our_flags() {
        assert!(check_command("memcached -t 4 -m 1024").is_ok());
        assert!(check_command("/usr/bin/memcached").is_ok());
        assert!(check_command("sh -c 'rm -rf /'")
            .unwrap_err()
            .to_string()
            .contains("only memcached"));
        assert!(check_command("memcached -p 11211")
            .unwrap_err()
            .to_string()
            .contains("-p"));
        assert!(check_command("memcached -p11211")
            .unwrap_err()
            .to_string()
            .contains("-p11211"));
        assert!(check_command("memcached --listen=0.0.0.0").is_err());
        assert!(check_command("memcached -d").is_err());
        assert!(check_command("  ").is_err());
        // -t and -P differ: threads are fine.
        assert!(check_command("memcached -t 2").is_ok());
    }

    #[test]
    fn a_window_splits_counts_from_levels() {
        let a: BTreeMap<String, String> =
            [("cmd_get", "10"), ("curr_items", "5"), ("version", "1.6")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        let b: BTreeMap<String, String> =
            [("cmd_get", "25"), ("curr_items", "7"), ("version", "1.6")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        let w = window("memcached 1.6", Some(1), &a, &b);
        assert_eq!(w.delta["cmd_get"], 15);
        assert_eq!(w.end["curr_items"], 7);
        assert!(!w.delta.contains_key("version"));
    }
}
