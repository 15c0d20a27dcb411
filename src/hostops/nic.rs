//! A test's NIC settings (`nic.*`, model::nic) on data interfaces, put
//! back exactly when the test ends. Two callers: an agent started with
//! `serve --allow-nic` (root), on the interface that holds the address its
//! test uses, with a journal as `--allow-sysctl` keeps one (the values
//! before the change written first, one file per network namespace under
//! /run/linerate, replayed on SIGINT/SIGTERM and at the next start after a
//! crash); and a study's lab, on its hosts' namespaces' links (no journal:
//! the namespaces are the study's own and go with it).
//!
//! A setting the driver refuses (veth has no rings; an offload marked
//! [fixed]) is not an error: the test runs, and the record says which
//! setting, which interface, and the driver's words. Only what would make
//! the change unsafe to undo (no journal can be written, no interface
//! holds the address) stops the test.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::ethtool;
use super::OpsError;
use crate::model::nic::{self, NicInterface, NicKind, NicRefusal};

/// Where the journals live (root-only), beside the sysctl journals.
const DIR: &str = "/run/linerate";

/// One test's changes at a time per agent (their put-backs would cross).
static ACTIVE: Mutex<()> = Mutex::new(());

/// A value an interface had before a test changed it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Before {
    pub interface: String,
    pub setting: String,
    pub value: String,
}

/// The settings put back with `key` so that undoing it is exact: the
/// kernel turns TSO off with the transmit checksum, and channels,
/// rings and coalescing values move together on many drivers.
fn related(key: &str) -> &'static [&'static str] {
    match key {
        "tso" | "gso" | "gro" | "lro" | "tx-checksum" | "rx-checksum" => {
            &["rx-checksum", "tx-checksum", "tso", "gso", "gro", "lro"]
        }
        "combined" | "rx" | "tx" => &["combined", "rx", "tx"],
        "rx-ring" | "tx-ring" => &["rx-ring", "tx-ring"],
        "rx-usecs" | "tx-usecs" | "adaptive-rx" => &["adaptive-rx", "rx-usecs", "tx-usecs"],
        "rps" => &["rps"],
        "xps" => &["xps"],
        _ => &[],
    }
}

/// The order settings are applied and put back in (model::nic's).
fn rank(key: &str) -> usize {
    nic::NIC_SETTINGS
        .iter()
        .position(|(k, _, _)| *k == key)
        .unwrap_or(usize::MAX)
}

fn kind(key: &str) -> NicKind {
    nic::setting(key).map_or(NicKind::Count, |(_, k)| k)
}

/// An interface name as the kernel allows it, and nothing that could
/// name a path elsewhere (a journal is read back as root).
fn sane_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 15
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.@:".contains(c))
}

/// This thread's network namespace, for the journal's name.
fn journal() -> PathBuf {
    let ns = std::fs::read_link("/proc/thread-self/ns/net")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let id: String = ns.chars().filter(|c| c.is_ascii_digit()).collect();
    PathBuf::from(DIR).join(format!("nic-journal-{id}.json"))
}

/// The journal of the calling thread's namespace (for tests and messages).
pub fn journal_path() -> PathBuf {
    journal()
}

fn save(before: &[Before]) -> Result<(), OpsError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let _ = std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(DIR);
    let path = journal();
    let tmp = path.with_extension("tmp");
    let text = serde_json::to_string_pretty(before).map_err(OpsError::Json)?;
    std::fs::write(&tmp, text).map_err(|source| OpsError::Io {
        path: tmp.clone(),
        source,
    })?;
    let _ = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600));
    std::fs::rename(&tmp, &path).map_err(|source| OpsError::Io { path, source })
}

/// Puts every value of `before` back where it moved (in the calling
/// thread's namespace); returns what was put back and what could not be.
fn restore(before: &[Before]) -> (Vec<String>, Vec<String>) {
    let mut items: Vec<&Before> = before.iter().collect();
    items.sort_by_key(|b| rank(&b.setting));
    let (mut done, mut failed) = (Vec::new(), Vec::new());
    for b in items {
        if nic::setting(&b.setting).is_none() || !sane_name(&b.interface) {
            continue;
        }
        let now = ethtool::read(&b.interface, &b.setting);
        if now
            .as_ref()
            .is_ok_and(|v| ethtool::same(kind(&b.setting), v, &b.value))
        {
            continue;
        }
        match ethtool::set(&b.interface, &b.setting, &b.value) {
            Ok(()) => done.push(format!("{} {} {}", b.interface, b.setting, b.value)),
            Err(e) => failed.push(format!("{} {} {}: {e}", b.interface, b.setting, b.value)),
        }
    }
    (done, failed)
}

/// Puts back what a journal of this namespace holds and removes it;
/// returns the settings restored ("eth0 gro on"). Called at the agent's
/// start and on its stop.
pub fn replay() -> Result<Vec<String>, OpsError> {
    let path = journal();
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(Vec::new());
    };
    let before: Vec<Before> =
        serde_json::from_str(&text).map_err(|source| OpsError::BadNicJournal {
            path: path.clone(),
            source,
        })?;
    let (done, failed) = restore(&before);
    if let Some(first) = failed.first() {
        // Kept, so that the next start tries again.
        return Err(OpsError::NicRestore {
            path,
            what: first.clone(),
        });
    }
    std::fs::remove_file(&path).map_err(|source| OpsError::Io { path, source })?;
    Ok(done)
}

/// Where `apply` works: an agent's own namespace (journaled, one test at a
/// time), or a lab namespace by name (entered on a thread of its own).
#[derive(Clone, Debug)]
pub enum Place {
    Agent,
    Lab(String),
}

/// A test's NIC settings, in force until dropped.
pub struct Applied {
    _turn: Option<std::sync::MutexGuard<'static, ()>>,
    place: Place,
    before: Vec<Before>,
}

impl Applied {
    /// Puts the values back now; the words of what failed.
    pub fn undo(mut self) -> Vec<String> {
        self.put_back()
    }

    fn put_back(&mut self) -> Vec<String> {
        let before = std::mem::take(&mut self.before);
        if before.is_empty() {
            return Vec::new();
        }
        match &self.place {
            Place::Agent => {
                let (_, failed) = restore(&before);
                if failed.is_empty() {
                    let _ = std::fs::remove_file(journal());
                }
                failed
            }
            Place::Lab(ns) => {
                let ns = ns.clone();
                in_namespace(&ns, move || Ok(restore(&before).1))
                    .unwrap_or_else(|e| vec![e.to_string()])
            }
        }
    }
}

impl Drop for Applied {
    fn drop(&mut self) {
        for e in self.put_back() {
            eprintln!("linerate: could not put a NIC setting back: {e}");
        }
    }
}

/// Runs `f` on a thread inside lab namespace `ns`.
fn in_namespace<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> Result<T, OpsError> + Send + 'static,
) -> Result<T, OpsError> {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        crate::lab::netns::enter(&ns).map_err(|e| OpsError::NicNamespace(Box::new(e)))?;
        f()
    })
    .join()
    .map_err(|_| OpsError::NicThread)?
}

/// Reads (and journals) what `want` will change on each of `ifaces`, sets
/// it, and reads it back: the record of each interface, and the guard
/// that puts everything back. `want` is in model::nic's spelling.
pub fn apply(
    want: &BTreeMap<String, String>,
    ifaces: &[String],
    place: Place,
) -> Result<(Applied, Vec<NicInterface>), OpsError> {
    if !ethtool::available() {
        return Err(OpsError::NoEthtool);
    }
    for i in ifaces {
        if !sane_name(i) {
            return Err(OpsError::NicInterface(format!(
                "'{i}' is not an interface name"
            )));
        }
    }
    let turn = match place {
        Place::Agent => Some(ACTIVE.try_lock().map_err(|_| OpsError::NicBusy)?),
        Place::Lab(_) => None,
    };
    let mut keys: Vec<(String, String)> =
        want.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    keys.sort_by_key(|(k, _)| rank(k));
    let ns = match &place {
        Place::Lab(ns) => Some(ns.clone()),
        Place::Agent => None,
    };
    let ifaces = ifaces.to_vec();
    let agent = matches!(place, Place::Agent);
    let work = move || -> Result<(Vec<Before>, Vec<NicInterface>), OpsError> {
        let mut before: Vec<Before> = Vec::new();
        let mut records = Vec::new();
        let mut unread: Vec<(String, String, String)> = Vec::new();
        for i in &ifaces {
            for (k, _) in &keys {
                for r in related(k) {
                    if before.iter().any(|b| b.interface == *i && b.setting == *r) {
                        continue;
                    }
                    match ethtool::read(i, r) {
                        Ok(v) => before.push(Before {
                            interface: i.clone(),
                            setting: r.to_string(),
                            value: v,
                        }),
                        Err(e) if r == k => unread.push((i.clone(), k.clone(), e.to_string())),
                        Err(_) => {}
                    }
                }
            }
        }
        if agent {
            // First the journal: a crash from here on is undone at the
            // next start.
            save(&before).map_err(|e| OpsError::NicJournal(Box::new(e)))?;
        }
        for i in &ifaces {
            let mut rec = NicInterface {
                name: i.clone(),
                namespace: ns.clone(),
                ..Default::default()
            };
            for (k, v) in &keys {
                if let Some((_, _, e)) = unread.iter().find(|(ii, kk, _)| ii == i && kk == k) {
                    rec.refused.push(NicRefusal {
                        setting: k.clone(),
                        wanted: v.clone(),
                        reason: e.clone(),
                    });
                    continue;
                }
                if let Err(e) = ethtool::set(i, k, v) {
                    rec.refused.push(NicRefusal {
                        setting: k.clone(),
                        wanted: v.clone(),
                        reason: e.to_string(),
                    });
                }
            }
            // Read back once everything is set (a later setting may move
            // an earlier one: the transmit checksum takes TSO with it).
            for (k, v) in &keys {
                let Ok(now) = ethtool::read(i, k) else {
                    continue;
                };
                let refused = rec.refused.iter().any(|r| r.setting == *k);
                if !refused && !ethtool::same(kind(k), &now, v) {
                    rec.refused.push(NicRefusal {
                        setting: k.clone(),
                        wanted: v.clone(),
                        reason: format!("the interface kept {now}"),
                    });
                }
                rec.had.insert(k.clone(), now);
            }
            records.push(rec);
        }
        Ok((before, records))
    };
    let out = match &place {
        Place::Agent => work(),
        Place::Lab(ns) => in_namespace(ns, work),
    };
    let (before, records) = out?;
    Ok((
        Applied {
            _turn: turn,
            place,
            before,
        },
        records,
    ))
}

/// The interface that holds `addr` in lab namespace `ns`.
pub fn interface_in(ns: &str, addr: IpAddr) -> Result<String, OpsError> {
    let name = ns.to_string();
    in_namespace(ns, move || Ok(interface_of(addr)))?.ok_or_else(|| {
        OpsError::NicInterface(format!("no interface holds {addr} in namespace {name}"))
    })
}

/// The interface that holds `addr` in the calling thread's namespace.
pub fn interface_of(addr: IpAddr) -> Option<String> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list`, freed below; every pointer read is
    // checked for null and the sockaddr read by its family.
    unsafe {
        if libc::getifaddrs(&mut list) != 0 {
            return None;
        }
        let mut found = None;
        let mut p = list;
        while !p.is_null() {
            let a = &*p;
            p = a.ifa_next;
            if a.ifa_addr.is_null() || a.ifa_name.is_null() {
                continue;
            }
            let ip = match i32::from((*a.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let s = &*(a.ifa_addr as *const libc::sockaddr_in);
                    IpAddr::from(u32::from_be(s.sin_addr.s_addr).to_be_bytes())
                }
                libc::AF_INET6 => {
                    let s = &*(a.ifa_addr as *const libc::sockaddr_in6);
                    IpAddr::from(s.sin6_addr.s6_addr)
                }
                _ => continue,
            };
            if ip == addr {
                found = Some(
                    std::ffi::CStr::from_ptr(a.ifa_name)
                        .to_string_lossy()
                        .into_owned(),
                );
                break;
            }
        }
        libc::freeifaddrs(list);
        found
    }
}

/// The interface this host sends to `peer` from (the route's source
/// address, found by connecting a UDP socket: nothing is sent).
pub fn interface_to(peer: IpAddr) -> Option<String> {
    let any: IpAddr = if peer.is_ipv4() {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    };
    let s = std::net::UdpSocket::bind((any, 0)).ok()?;
    s.connect((peer, 9)).ok()?;
    interface_of(s.local_addr().ok()?.ip())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offloads_are_put_back_together_and_channels_before_masks() {
        assert!(related("tx-checksum").contains(&"tso"));
        assert!(related("gro").contains(&"gso"));
        assert_eq!(related("rps"), &["rps"]);
        assert!(rank("combined") < rank("rps"));
        assert!(rank("tx-checksum") < rank("tso"));
        for (k, _, _) in nic::NIC_SETTINGS {
            assert!(related(k).contains(k), "{k}");
        }
    }

    #[test]
    fn journal_names_are_interfaces_and_nothing_else() {
        assert!(sane_name("eth0"));
        assert!(sane_name("lr0"));
        assert!(sane_name("vlan.10"));
        assert!(!sane_name("../x"));
        assert!(!sane_name(".."));
        assert!(!sane_name("a/b"));
        assert!(!sane_name("averyveryverylongname"));
    }

    #[test]
    fn loopback_holds_its_address() {
        assert_eq!(
            interface_of("127.0.0.1".parse().unwrap()).as_deref(),
            Some("lo")
        );
        assert_eq!(
            interface_to("127.0.0.1".parse().unwrap()).as_deref(),
            Some("lo")
        );
        assert_eq!(interface_of("192.0.2.77".parse().unwrap()), None);
    }
}
