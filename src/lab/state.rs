//! What a running lab is, written to /run/linerate/labs/NAME.json so that
//! `run --lab NAME`, `lab status` and `lab down` in other processes find its
//! namespaces and its emulator; /run is emptied at boot, as namespaces are.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

use super::emulator;
use super::LabError;
use crate::model::lab::LabSpec;

pub const STATE_DIR: &str = "/run/linerate/labs";

/// Addresses inside the lab (RFC 2544 benchmarking range): client 0 and
/// server 0, as [`client_addr`]`(0)` and [`server_addr`]`(0)` give them.
pub const CLIENT_ADDR: &str = "198.18.0.1";
pub const ROUTER_CLIENT_ADDR: &str = "198.18.0.254";
pub const SERVER_ADDR: &str = "198.18.1.1";
pub const ROUTER_SERVER_ADDR: &str = "198.18.1.254";

/// Client `k` of a rack lives in 198.18.{2k}.0/24 (client .1, router .254),
/// server `j` in 198.18.{2j+1}.0/24: client 0 and server 0 are the
/// addresses of a one-client lab.
pub fn client_addr(k: usize) -> String {
    format!("198.18.{}.1", 2 * k)
}

/// The router's end of client `k`'s link (device `c{k}`).
pub fn router_client_addr(k: usize) -> String {
    format!("198.18.{}.254", 2 * k)
}

pub fn server_addr(j: usize) -> String {
    format!("198.18.{}.1", 2 * j + 1)
}

/// The router's end of server `j`'s link (device `s{j}`).
pub fn router_server_addr(j: usize) -> String {
    format!("198.18.{}.254", 2 * j + 1)
}

/// Namespace of client `k` of lab `lab`: `lr-LAB-c`, then `lr-LAB-c2`, `-c3`...
pub fn client_ns(lab: &str, k: usize) -> String {
    host_ns(lab, 'c', k)
}

/// Namespace of server `j`: `lr-LAB-s`, then `lr-LAB-s2`, `-s3`...
pub fn server_ns(lab: &str, j: usize) -> String {
    host_ns(lab, 's', j)
}

pub fn router_ns(lab: &str) -> String {
    format!("lr-{lab}-r")
}

fn host_ns(lab: &str, role: char, i: usize) -> String {
    if i == 0 {
        format!("lr-{lab}-{role}")
    } else {
        format!("lr-{lab}-{role}{}", i + 1)
    }
}

/// Whether namespace `ns` is one lab `lab` makes (router, any client or
/// server). Lab names may hold '-', but the role suffix never does, so
/// `lr-wan-c2` belongs to lab `wan` and `lr-wan-c2-c` to lab `wan-c2`.
pub fn is_lab_namespace(lab: &str, ns: &str) -> bool {
    let Some(role) = ns
        .strip_prefix("lr-")
        .and_then(|r| r.strip_prefix(lab))
        .and_then(|r| r.strip_prefix('-'))
    else {
        return false;
    };
    match role.as_bytes() {
        [b'r'] => true,
        [b'c' | b's', digits @ ..] => digits.iter().all(u8::is_ascii_digit),
        _ => false,
    }
}

/// Where emulator `link` (client link `c{link}`) writes its counters:
/// `NAME.emulator.json` for link 0 (as a one-client lab always had), then
/// `NAME.emulator1.json`, ...
pub fn emulator_stats_path(lab: &str, link: usize) -> PathBuf {
    PathBuf::from(STATE_DIR).join(format!("{lab}.{}.json", emulator_file(link)))
}

/// The emulator's log: `NAME.emulator.log`, `NAME.emulator1.log`, ...
pub fn emulator_log_path(lab: &str, link: usize) -> PathBuf {
    PathBuf::from(STATE_DIR).join(format!("{lab}.{}.log", emulator_file(link)))
}

fn emulator_file(link: usize) -> String {
    if link == 0 {
        "emulator".into()
    } else {
        format!("emulator{link}")
    }
}

/// One client or server of a lab: its namespace and its address there.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct LabHost {
    pub ns: String,
    pub addr: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct EmulatorState {
    pub pid: u32,
    /// The process's start time (field 22 of /proc/PID/stat), so a reused
    /// PID is never mistaken for the emulator.
    pub start_ticks: u64,
    pub stats: PathBuf,
    pub config: emulator::Config,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LabState {
    pub name: String,
    pub spec: LabSpec,
    /// Which emulator applies the link: "nfqueue" (user space) or "netem".
    pub backend: String,
    /// Why that backend: what the start-up probe found.
    pub backend_note: String,
    pub client_ns: String,
    pub router_ns: String,
    pub server_ns: String,
    pub client_addr: String,
    pub server_addr: String,
    /// None with netem (the kernel does the work).
    pub emulator: Option<EmulatorState>,
    /// Every client, client 0 (`client_ns`, `client_addr`) first. Empty in
    /// state files written before racks: use [`LabState::client_hosts`].
    #[serde(default)]
    pub clients: Vec<LabHost>,
    /// Every server, server 0 first (as `clients`).
    #[serde(default)]
    pub servers: Vec<LabHost>,
    /// The emulators of client links 1.. (link 0's is `emulator`): one per
    /// client link, each on its own NFQUEUE pair (2k, 2k+1).
    #[serde(default)]
    pub link_emulators: Vec<EmulatorState>,
    /// A lab made for one study or test: removed when that process is gone.
    pub owner_pid: Option<u32>,
    pub owner_start_ticks: Option<u64>,
    /// Settings outside the lab that bringing it up changed (said aloud).
    #[serde(default)]
    pub host_changes: Vec<String>,
    /// The last full calibration (RTT and one flow's goodput), at `lab up`
    /// or when a study changed the link; every result carries its rate check.
    #[serde(default)]
    pub calibration: Option<crate::model::lab::Calibration>,
    pub created_at: String,
    /// The tunnel between client and server (`--tunnel`), while one is up:
    /// `client_addr`/`server_addr` (and client 0's and server 0's
    /// addresses) are then its inner ones, the links' outer ones are here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel: Option<TunnelState>,
    /// Host-wide sysctls a study set for this lab's points (namespaces do
    /// not have net.core.netdev_max_backlog), with their values before:
    /// taking the lab down puts them back, also after the study was killed.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub host_sysctls: std::collections::BTreeMap<String, String>,
}

/// A lab's tunnel as set up (see `lab::tunnel`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TunnelState {
    pub info: crate::model::tunnel::TunnelInfo,
    /// A userspace tunnel's processes (wireguard-go), client's first;
    /// empty for a kernel tunnel.
    #[serde(default)]
    pub procs: Vec<TunnelProc>,
}

/// One userspace tunnel process: started by the lab in namespace `ns`,
/// stopped by PID (checked with its start time and name) at `lab down`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TunnelProc {
    pub ns: String,
    pub pid: u32,
    pub start_ticks: u64,
    pub interface: String,
}

/// The process `pid` started at `ticks` is alive and is a userspace
/// tunnel (`wireguard-go`): any other process is never signalled.
pub fn is_tunnel_process(pid: u32, ticks: u64) -> bool {
    alive(pid, ticks)
        && std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .is_ok_and(|c| c.trim() == TUNNEL_PROGRAM)
}

/// The userspace WireGuard the lab runs where the kernel has no module.
pub const TUNNEL_PROGRAM: &str = "wireguard-go";

pub fn state_path(name: &str) -> PathBuf {
    PathBuf::from(STATE_DIR).join(format!("{name}.json"))
}

/// Creates `dir` (and its parents) for root's eyes only, and makes an
/// existing one so: lab state names processes that `lab down` signals and
/// namespaces it deletes, so no other user may write there.
pub fn private_dir(dir: &str) -> Result<(), LabError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| LabError::Io {
            path: dir.into(),
            source,
        })?;
    let mut p = std::path::PathBuf::from(dir);
    // /run/linerate and below: every level linerate made.
    while p.starts_with("/run/linerate") {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700)).map_err(|source| {
            LabError::Io {
                path: p.clone(),
                source,
            }
        })?;
        if !p.pop() {
            break;
        }
    }
    Ok(())
}

/// Where `lab up` and `lab down` take a lab's lock (apart from the state
/// files, which `down` removes by prefix).
pub const LOCK_DIR: &str = "/run/linerate/locks";

/// An exclusive hold on one lab's name while it is brought up or down;
/// released when dropped (or when the process dies: an flock).
pub struct LabLock(#[allow(dead_code)] std::fs::File);

/// Takes lab `name`'s lock, or says who holds it: two `lab up` of one
/// name at once would tear down each other's half-built namespaces.
pub fn lock(name: &str) -> Result<LabLock, LabError> {
    use std::io::{Read, Seek, Write};
    use std::os::fd::AsRawFd;
    private_dir(LOCK_DIR)?;
    let path = format!("{LOCK_DIR}/{name}.lock");
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|source| LabError::Io {
            path: path.clone().into(),
            source,
        })?;
    // SAFETY: flock on a descriptor this File owns.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let mut holder = String::new();
        let _ = f.read_to_string(&mut holder);
        return Err(LabError::Locked {
            name: name.into(),
            holder: holder.trim().into(),
        });
    }
    let _ = f.set_len(0);
    let _ = f.rewind();
    let _ = write!(f, "{}", std::process::id());
    Ok(LabLock(f))
}

/// A state file is trusted only if nobody but its owner, who is this
/// user, could have written it.
fn trusted(p: &std::path::Path) -> Result<(), LabError> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(p).map_err(|source| LabError::Io {
        path: p.into(),
        source,
    })?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if m.uid() != me || m.mode() & 0o022 != 0 {
        return Err(LabError::Untrusted {
            path: p.into(),
            uid: m.uid(),
            mode: m.mode() & 0o7777,
        });
    }
    Ok(())
}

pub fn load(name: &str) -> Result<Option<LabState>, LabError> {
    let p = state_path(name);
    if p.exists() {
        trusted(&p)?;
    }
    match std::fs::read_to_string(&p) {
        Ok(t) => serde_json::from_str(&t)
            .map(Some)
            .map_err(|source| LabError::BadState {
                path: p.clone(),
                name: name.into(),
                source,
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(LabError::Io { path: p, source }),
    }
}

pub fn save(s: &LabState) -> Result<(), LabError> {
    private_dir(STATE_DIR)?;
    let p = state_path(&s.name);
    let tmp = p.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(s).map_err(LabError::Json)?;
    std::fs::write(&tmp, text + "\n").map_err(|source| LabError::Io {
        path: tmp.clone(),
        source,
    })?;
    std::fs::rename(&tmp, &p).map_err(|source| LabError::Io { path: p, source })
}

/// Names of every lab with a state file.
pub fn list() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(STATE_DIR)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().to_string();
            // NAME.json; NAME.emulator.json holds the emulator's counters.
            n.strip_suffix(".json")
                .filter(|n| !n.contains('.'))
                .map(str::to_string)
        })
        .collect();
    names.sort();
    names
}

/// The fields of /proc/PID/stat after the command name, from field 3
/// (state) on: index `n - 3` holds stat(5)'s field `n`. The name may hold
/// spaces and parentheses, so the fields start after the last ')'.
pub fn proc_stat(pid: &str) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// Start time of a process in clock ticks since boot (field 22; None: no such process).
pub fn start_ticks(pid: u32) -> Option<u64> {
    proc_stat(&pid.to_string())?.get(19)?.parse().ok()
}

/// The process `pid` started at `ticks` is alive and is a linerate
/// emulator (`linerate lab emulate`): a state file that names any other
/// process, even a live one, is not believed, and that process is never
/// signalled.
pub fn is_emulator(pid: u32, ticks: u64) -> bool {
    if !alive(pid, ticks) {
        return false;
    }
    let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
    args.windows(2)
        .any(|w| w[0] == b"lab" && w[1] == b"emulate")
}

/// The process `pid` started at `ticks` is still alive (and not a zombie).
pub fn alive(pid: u32, ticks: u64) -> bool {
    match proc_stat(&pid.to_string()) {
        Some(f) => {
            f.first().is_some_and(|s| s != "Z")
                && f.get(19).and_then(|t| t.parse().ok()) == Some(ticks)
        }
        None => false,
    }
}

impl LabState {
    /// Every client (namespace and address), client 0 first; a lab from
    /// before racks has the one pair.
    pub fn client_hosts(&self) -> Vec<LabHost> {
        if self.clients.is_empty() {
            vec![LabHost {
                ns: self.client_ns.clone(),
                addr: self.client_addr.clone(),
            }]
        } else {
            self.clients.clone()
        }
    }

    /// Every server, server 0 first (as [`LabState::client_hosts`]).
    pub fn server_hosts(&self) -> Vec<LabHost> {
        if self.servers.is_empty() {
            vec![LabHost {
                ns: self.server_ns.clone(),
                addr: self.server_addr.clone(),
            }]
        } else {
            self.servers.clone()
        }
    }

    /// The namespaces of the lab's hosts: the clients, then the servers
    /// (where congestion control and a study's sysctls are set).
    pub fn host_namespaces(&self) -> Vec<String> {
        self.client_hosts()
            .into_iter()
            .chain(self.server_hosts())
            .map(|h| h.ns)
            .collect()
    }

    /// Every namespace of the lab: the clients, the router, the servers.
    pub fn namespaces_all(&self) -> Vec<String> {
        let mut v: Vec<String> = self.client_hosts().into_iter().map(|h| h.ns).collect();
        v.push(self.router_ns.clone());
        v.extend(self.server_hosts().into_iter().map(|h| h.ns));
        v
    }

    /// Every emulator, link 0's first (empty with netem or none).
    pub fn emulators(&self) -> Vec<&EmulatorState> {
        self.emulator
            .iter()
            .chain(self.link_emulators.iter())
            .collect()
    }

    /// Every emulator of the lab is running.
    pub fn emulator_alive(&self) -> bool {
        self.emulators()
            .iter()
            .all(|e| is_emulator(e.pid, e.start_ticks))
    }

    pub fn owner_alive(&self) -> bool {
        match (self.owner_pid, self.owner_start_ticks) {
            (Some(p), Some(t)) => alive(p, t),
            _ => true,
        }
    }

    /// Left behind by a crash: its emulator, its owner or its userspace
    /// tunnel is gone.
    pub fn is_stale(&self) -> bool {
        !self.emulator_alive() || !self.owner_alive() || !self.tunnel_alive()
    }

    /// Every process of its userspace tunnel is running (true without one).
    pub fn tunnel_alive(&self) -> bool {
        self.tunnel.as_ref().is_none_or(|t| {
            t.procs
                .iter()
                .all(|p| is_tunnel_process(p.pid, p.start_ticks))
        })
    }

    /// Client 0, the router and server 0 (see [`LabState::namespaces_all`]).
    pub fn namespaces(&self) -> [&str; 3] {
        [&self.client_ns, &self.router_ns, &self.server_ns]
    }

    /// Link 0's emulator's latest counters (None: netem, or not written yet).
    pub fn emulator_stats(&self) -> Option<emulator::Stats> {
        self.emulator.as_ref().and_then(EmulatorState::read_stats)
    }

    /// The latest counters of every emulator, link 0's first.
    pub fn all_emulator_stats(&self) -> Vec<Option<emulator::Stats>> {
        self.emulators()
            .into_iter()
            .map(EmulatorState::read_stats)
            .collect()
    }
}

impl EmulatorState {
    /// Its latest counters (None: not written yet, or unreadable).
    pub fn read_stats(&self) -> Option<emulator::Stats> {
        let t = std::fs::read_to_string(&self.stats).ok()?;
        serde_json::from_str(&t).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rack_names_and_addresses() {
        assert_eq!(client_ns("wan", 0), "lr-wan-c");
        assert_eq!(client_ns("wan", 1), "lr-wan-c2");
        assert_eq!(client_ns("wan", 15), "lr-wan-c16");
        assert_eq!(server_ns("wan", 0), "lr-wan-s");
        assert_eq!(server_ns("wan", 7), "lr-wan-s8");
        assert_eq!(router_ns("wan"), "lr-wan-r");
        // Client 0 and server 0 keep the one-client lab's addresses.
        assert_eq!(client_addr(0), CLIENT_ADDR);
        assert_eq!(router_client_addr(0), ROUTER_CLIENT_ADDR);
        assert_eq!(server_addr(0), SERVER_ADDR);
        assert_eq!(router_server_addr(0), ROUTER_SERVER_ADDR);
        assert_eq!(client_addr(3), "198.18.6.1");
        assert_eq!(router_client_addr(15), "198.18.30.254");
        assert_eq!(server_addr(7), "198.18.15.1");
        assert_eq!(router_server_addr(2), "198.18.5.254");
        // The longest name (24 characters) at the most clients stays a
        // short file name under /run/netns.
        let long = "a".repeat(24);
        assert_eq!(client_ns(&long, 15).len(), 31);
        assert_eq!(
            emulator_stats_path("wan", 0),
            PathBuf::from("/run/linerate/labs/wan.emulator.json")
        );
        assert_eq!(
            emulator_log_path("wan", 3),
            PathBuf::from("/run/linerate/labs/wan.emulator3.log")
        );
    }

    #[test]
    fn a_lab_owns_only_its_own_namespaces() {
        for ns in [
            "lr-wan-c",
            "lr-wan-c2",
            "lr-wan-c16",
            "lr-wan-r",
            "lr-wan-s",
            "lr-wan-s8",
        ] {
            assert!(is_lab_namespace("wan", ns), "{ns}");
        }
        for ns in [
            "lr-wan-c2-c",
            "lr-wan-x-r",
            "lr-wan-rr",
            "lr-wan-cx",
            "lr-wan",
            "lr-wa-c",
            "lr-wanx-c",
            "lr-wan-",
            "wan-c",
        ] {
            assert!(!is_lab_namespace("wan", ns), "{ns}");
        }
        assert!(is_lab_namespace("wan-c2", "lr-wan-c2-c"));
    }

    fn old_state() -> LabState {
        // A state file written before racks: no clients, servers or link emulators.
        let text = r#"{"name":"old","spec":{"links":[{"delay_s":0.0,"jitter_s":0.0,"rate_bps":null,"queue_bytes":null,"loss":0.0},{"delay_s":0.0,"jitter_s":0.0,"rate_bps":null,"queue_bytes":null,"loss":0.0}],"mtu":1500,"offloads":true,"cc":"cubic"},
            "backend":"none","backend_note":"","client_ns":"lr-old-c","router_ns":"lr-old-r","server_ns":"lr-old-s",
            "client_addr":"198.18.0.1","server_addr":"198.18.1.1","emulator":null,"owner_pid":null,"owner_start_ticks":null,
            "created_at":"2026-01-01T00:00:00Z"}"#;
        serde_json::from_str(text).expect("an old state file loads")
    }

    #[test]
    fn an_old_state_file_is_a_one_client_lab() {
        let s = old_state();
        let h = |ns: &str, addr: &str| LabHost {
            ns: ns.into(),
            addr: addr.into(),
        };
        assert_eq!(s.client_hosts(), vec![h("lr-old-c", "198.18.0.1")]);
        assert_eq!(s.server_hosts(), vec![h("lr-old-s", "198.18.1.1")]);
        assert_eq!(s.namespaces_all(), ["lr-old-c", "lr-old-r", "lr-old-s"]);
        assert!(s.emulators().is_empty());
        assert!(s.emulator_alive());
    }

    #[test]
    fn a_rack_lists_every_host_and_every_emulator_must_live() {
        let mut s = old_state();
        s.clients = (0..3)
            .map(|k| LabHost {
                ns: client_ns("old", k),
                addr: client_addr(k),
            })
            .collect();
        s.servers = (0..2)
            .map(|j| LabHost {
                ns: server_ns("old", j),
                addr: server_addr(j),
            })
            .collect();
        assert_eq!(
            s.namespaces_all(),
            [
                "lr-old-c",
                "lr-old-c2",
                "lr-old-c3",
                "lr-old-r",
                "lr-old-s",
                "lr-old-s2"
            ]
        );
        assert_eq!(s.client_hosts()[2].addr, "198.18.4.1");
        assert_eq!(s.server_hosts()[1].addr, "198.18.3.1");
        // A stand-in emulator: a process whose arguments say `lab emulate`.
        let mut fake = std::process::Command::new("sh")
            .args(["-c", "sleep 10; true", "lab", "emulate"])
            .spawn()
            .unwrap();
        let me = fake.id();
        let mut ticks = None;
        for _ in 0..100 {
            ticks = start_ticks(me).filter(|_| is_emulator(me, start_ticks(me).unwrap_or(0)));
            if ticks.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let ticks = ticks.expect("the stand-in runs");
        // A live process that is not an emulator is not one.
        let own = std::process::id();
        assert!(!is_emulator(own, start_ticks(own).unwrap()));
        let emu = |pid, start_ticks| EmulatorState {
            pid,
            start_ticks,
            stats: PathBuf::from("/nonexistent"),
            config: emulator::Config::default(),
        };
        s.emulator = Some(emu(me, ticks));
        s.link_emulators = vec![emu(me, ticks), emu(me, ticks)];
        assert_eq!(s.emulators().len(), 3);
        assert!(s.emulator_alive() && !s.is_stale());
        // One dead emulator (a reused PID counts as dead) makes the lab stale.
        s.link_emulators[1].start_ticks += 1;
        assert!(!s.emulator_alive() && s.is_stale());
        let _ = fake.kill();
        let _ = fake.wait();
    }

    #[test]
    fn own_process_is_alive_and_a_wrong_start_time_is_not() {
        let me = std::process::id();
        let t = start_ticks(me).expect("own start time");
        assert!(alive(me, t));
        assert!(!alive(me, t + 1));
        assert!(!alive(u32::MAX - 1, t));
    }
}
