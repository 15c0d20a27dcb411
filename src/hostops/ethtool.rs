//! Reading and setting one interface's NIC settings (model::nic) in the
//! calling thread's network namespace: offloads (`ethtool -k/-K`), rings
//! (`-g/-G`), channels (`-l/-L`) and coalescing (`-c/-C`) through the
//! ethtool binary, RPS/XPS masks through sysfs.
//!
//! Why the binary and not the kernel's ethtool netlink through a crate:
//! the lab already depends on ethtool (`lab.offloads`, scripts/test.sh
//! installs it), its error lines are the driver's own words that a refused
//! setting must report, and the netlink crates (rust-netlink's `ethtool`)
//! need an async runtime and still leave RPS/XPS to sysfs. The parsers are
//! pure functions over ethtool's text, tested on its real output.
//!
//! sysfs shows the network namespace of whoever mounted it, not the
//! thread's: a lab agent that entered its namespace with setns still sees
//! the host's `/sys/class/net`. So every sysfs read and write runs in a
//! child that, like `ip netns exec`, takes a mount namespace of its own
//! and mounts a fresh sysfs there (the child inherits the thread's
//! network namespace).

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::process::Command;

use super::error::EthtoolError;
use crate::model::nic::{normalize_mask, NicKind};

/// A command's outcome: whether it succeeded, and its words (stderr, and
/// the lines of stdout that say what the driver did not take).
pub struct Ran {
    pub ok: bool,
    pub stdout: String,
    pub words: String,
}

fn run(prog: &str, args: &[&str], sysfs: bool) -> Ran {
    let mut c = Command::new(prog);
    c.args(args);
    c.env("LC_ALL", "C");
    if sysfs {
        // SAFETY: only syscalls run between fork and exec (the child is
        // single-threaded); the strings are made before the fork.
        let root = c"/";
        let sys = c"/sys";
        let fstype = c"sysfs";
        unsafe {
            c.pre_exec(move || {
                if libc::unshare(libc::CLONE_NEWNS) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Nothing mounted here propagates back to the host.
                if libc::mount(
                    std::ptr::null(),
                    root.as_ptr(),
                    std::ptr::null(),
                    libc::MS_SLAVE | libc::MS_REC,
                    std::ptr::null(),
                ) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                libc::umount2(sys.as_ptr(), libc::MNT_DETACH);
                if libc::mount(
                    fstype.as_ptr(),
                    sys.as_ptr(),
                    fstype.as_ptr(),
                    0,
                    std::ptr::null(),
                ) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    match c.output() {
        Ok(o) => {
            let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
            let stderr = String::from_utf8_lossy(&o.stderr);
            let mut words: Vec<String> = stderr
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(String::from)
                .collect();
            // `ethtool -K` names what it could not change on stdout
            // ("rx-lro: off [requested on]").
            words.extend(
                stdout
                    .lines()
                    .filter(|l| l.contains("[requested"))
                    .map(|l| l.trim().to_string()),
            );
            Ran {
                ok: o.status.success(),
                stdout,
                words: words.join("; "),
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ran {
            ok: false,
            stdout: String::new(),
            words: format!("{prog} is not installed (Debian: apt-get install {prog})"),
        },
        Err(e) => Ran {
            ok: false,
            stdout: String::new(),
            words: format!("cannot run {prog}: {e}"),
        },
    }
}

/// Whether the ethtool binary can be run here.
pub fn available() -> bool {
    !run("ethtool", &["--version"], false)
        .words
        .contains("not installed")
}

/// The ethtool feature line of an offload (`ethtool -k`) and its name for
/// `ethtool -K`.
fn offload(key: &str) -> Option<(&'static str, &'static str)> {
    Some(match key {
        "tso" => ("tcp-segmentation-offload", "tso"),
        "gso" => ("generic-segmentation-offload", "gso"),
        "gro" => ("generic-receive-offload", "gro"),
        "lro" => ("large-receive-offload", "lro"),
        "tx-checksum" => ("tx-checksumming", "tx"),
        "rx-checksum" => ("rx-checksumming", "rx"),
        _ => return None,
    })
}

/// `ethtool -k`: each top-level feature and whether it is on ("off
/// [fixed]" is off; the mark is kept apart).
pub fn parse_features(text: &str) -> BTreeMap<String, (bool, bool)> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        // Sub-features are indented; the header ends with ':' alone.
        if line.starts_with(char::is_whitespace) {
            continue;
        }
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let rest = rest.trim();
        let on = match rest.split_whitespace().next() {
            Some("on") => true,
            Some("off") => false,
            _ => continue,
        };
        out.insert(name.trim().to_string(), (on, rest.contains("[fixed]")));
    }
    out
}

/// `ethtool -g` and `-l`: the "Current hardware settings" section, label
/// -> value ("RX" -> "512"; "n/a" is kept, the caller says unsupported).
pub fn parse_current(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut current = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("Pre-set maximums") {
            current = false;
            continue;
        }
        if t.starts_with("Current hardware settings") {
            current = true;
            continue;
        }
        if !current {
            continue;
        }
        if let Some((k, v)) = t.split_once(':') {
            out.insert(k.trim().to_string(), v.trim().to_string());
        }
    }
    out
}

/// `ethtool -c`: "rx-usecs" -> "50", and "Adaptive RX: on  TX: off" as
/// "adaptive-rx" -> "on", "adaptive-tx" -> "off".
pub fn parse_coalesce(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("Adaptive RX:") {
            let mut it = rest.split_whitespace();
            if let Some(rx) = it.next() {
                out.insert("adaptive-rx".into(), rx.to_string());
            }
            if let (Some("TX:"), Some(tx)) = (it.next(), it.next()) {
                out.insert("adaptive-tx".into(), tx.to_string());
            }
            continue;
        }
        if let Some((k, v)) = t.split_once(':') {
            out.insert(k.trim().to_string(), v.trim().to_string());
        }
    }
    out
}

/// What `ethtool -g`/`-l`/`-c` calls a count setting, and the option
/// that reads and sets it.
fn count(key: &str) -> Option<(&'static str, &'static str, &'static str, &'static str)> {
    // (read option, set option, label read, name set)
    Some(match key {
        "rx-ring" => ("-g", "-G", "RX", "rx"),
        "tx-ring" => ("-g", "-G", "TX", "tx"),
        "combined" => ("-l", "-L", "Combined", "combined"),
        "rx" => ("-l", "-L", "RX", "rx"),
        "tx" => ("-l", "-L", "TX", "tx"),
        "rx-usecs" => ("-c", "-C", "rx-usecs", "rx-usecs"),
        "tx-usecs" => ("-c", "-C", "tx-usecs", "tx-usecs"),
        "adaptive-rx" => ("-c", "-C", "adaptive-rx", "adaptive-rx"),
        _ => return None,
    })
}

/// The value of setting `key` on `iface` now, in model::nic's spelling;
/// Err with the driver's words when it cannot be read (then it cannot be
/// journaled either, so it is never changed).
pub fn read(iface: &str, key: &str) -> Result<String, EthtoolError> {
    if let Some((feature, _)) = offload(key) {
        let r = run("ethtool", &["-k", iface], false);
        if !r.ok {
            return Err(EthtoolError::Tool(r.words));
        }
        return match parse_features(&r.stdout).get(feature) {
            Some((on, _)) => Ok(if *on { "on" } else { "off" }.into()),
            None => Err(EthtoolError::NotListed {
                iface: iface.to_string(),
                feature: feature.to_string(),
            }),
        };
    }
    if let Some((opt, _, label, _)) = count(key) {
        let r = run("ethtool", &[opt, iface], false);
        if !r.ok {
            return Err(EthtoolError::Tool(r.words));
        }
        let m = if opt == "-c" {
            parse_coalesce(&r.stdout)
        } else {
            parse_current(&r.stdout)
        };
        return match m.get(label).map(String::as_str) {
            Some("n/a") | None => Err(EthtoolError::NoSetting {
                label: label.to_string(),
                opt: opt.to_string(),
                iface: iface.to_string(),
            }),
            Some(v) => Ok(v.to_string()),
        };
    }
    match key {
        "rps" => read_masks(iface, "rx", "rps_cpus"),
        "xps" => read_masks(iface, "tx", "xps_cpus"),
        _ => Err(EthtoolError::NotNic(key.to_string())),
    }
}

/// The queues of `iface` of one direction ("rx-0", "rx-1" ...), sorted.
fn queues(iface: &str, dir: &str) -> Result<Vec<String>, EthtoolError> {
    let r = run("ls", &[&format!("/sys/class/net/{iface}/queues")], true);
    if !r.ok {
        return Err(EthtoolError::Tool(r.words));
    }
    let mut q: Vec<String> = r
        .stdout
        .split_whitespace()
        .filter(|n| n.strip_prefix(dir).is_some_and(|x| x.starts_with('-')))
        .map(String::from)
        .collect();
    q.sort_by_key(|n| n.rsplit('-').next().and_then(|x| x.parse::<u32>().ok()));
    if q.is_empty() {
        return Err(EthtoolError::NoQueues {
            iface: iface.to_string(),
            dir: dir.to_string(),
        });
    }
    Ok(q)
}

/// Every queue's mask: one value when all agree, else "rx-0=3,rx-1=0".
fn read_masks(iface: &str, dir: &str, file: &str) -> Result<String, EthtoolError> {
    let mut vals = Vec::new();
    for q in queues(iface, dir)? {
        let r = run(
            "cat",
            &[&format!("/sys/class/net/{iface}/queues/{q}/{file}")],
            true,
        );
        if !r.ok {
            return Err(EthtoolError::Tool(r.words));
        }
        let v = normalize_mask(r.stdout.trim()).ok_or_else(|| EthtoolError::BadRead {
            queue: q.clone(),
            file: file.to_string(),
            value: r.stdout.trim().to_string(),
        })?;
        vals.push((q, v));
    }
    if vals.windows(2).all(|w| w[0].1 == w[1].1) {
        return Ok(vals[0].1.clone());
    }
    Ok(vals
        .iter()
        .map(|(q, v)| format!("{q}={v}"))
        .collect::<Vec<_>>()
        .join(","))
}

/// A mask value as queue -> mask: one value for every queue, or each
/// queue's own ("rx-0=3,rx-1=0", as `read` gives and journals keep).
pub fn split_masks(value: &str, queues: &[String]) -> Vec<(String, String)> {
    if value.contains('=') {
        value
            .split(',')
            .filter_map(|p| p.split_once('='))
            .map(|(q, v)| (q.trim().to_string(), v.trim().to_string()))
            .collect()
    } else {
        queues
            .iter()
            .map(|q| (q.clone(), value.to_string()))
            .collect()
    }
}

fn write_masks(iface: &str, dir: &str, file: &str, value: &str) -> Result<(), EthtoolError> {
    let qs = queues(iface, dir)?;
    for (q, v) in split_masks(value, &qs) {
        // Only this interface's queue files: never a path from elsewhere.
        let ok_name = q.strip_prefix(dir).is_some_and(|x| {
            x.len() > 1 && x.starts_with('-') && x[1..].chars().all(|c| c.is_ascii_digit())
        });
        if !ok_name || normalize_mask(&v).is_none() {
            return Err(EthtoolError::BadMask { queue: q, value: v });
        }
        let path = format!("/sys/class/net/{iface}/queues/{q}/{file}");
        let r = run(
            "sh",
            &["-c", "printf '%s\\n' \"$1\" > \"$2\"", "sh", &v, &path],
            true,
        );
        if !r.ok {
            return Err(EthtoolError::Tool(r.words));
        }
    }
    Ok(())
}

/// Sets `key` to `value` (model::nic's spelling) on `iface`; Err with the
/// driver's words. Whether the interface kept it is for a read back.
pub fn set(iface: &str, key: &str, value: &str) -> Result<(), EthtoolError> {
    let r = if let Some((_, name)) = offload(key) {
        run("ethtool", &["-K", iface, name, value], false)
    } else if let Some((_, opt, _, name)) = count(key) {
        run("ethtool", &[opt, iface, name, value], false)
    } else {
        return match key {
            "rps" => write_masks(iface, "rx", "rps_cpus", value),
            "xps" => write_masks(iface, "tx", "xps_cpus", value),
            _ => Err(EthtoolError::NotNic(key.to_string())),
        };
    };
    if r.ok {
        Ok(())
    } else if r.words.is_empty() {
        Err(EthtoolError::Silent)
    } else {
        Err(EthtoolError::Tool(r.words))
    }
}

/// Whether a value read back is the one asked for (masks compare as
/// numbers, per queue).
pub fn same(kind: NicKind, read: &str, wanted: &str) -> bool {
    match kind {
        NicKind::Mask => {
            let norm = |s: &str| -> Vec<String> {
                let mut v: Vec<String> = s
                    .split(',')
                    .map(|p| {
                        let m = p.rsplit('=').next().unwrap_or(p);
                        normalize_mask(m).unwrap_or_else(|| m.to_string())
                    })
                    .collect();
                v.dedup();
                v
            };
            norm(read) == norm(wanted)
        }
        _ => read == wanted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ethtool -k` on a veth end (ethtool 6.1, kernel 6.18), cut.
    const FEATURES: &str = "Features for v0:
rx-checksumming: on
tx-checksumming: on
\ttx-checksum-ipv4: off [fixed]
\ttx-checksum-ip-generic: on
scatter-gather: on
tcp-segmentation-offload: on
\ttx-tcp-segmentation: on
generic-segmentation-offload: on
generic-receive-offload: off
large-receive-offload: off [fixed]
rx-vlan-offload: on
";

    #[test]
    fn features_read_on_off_and_fixed_at_the_top_level_only() {
        let f = parse_features(FEATURES);
        assert_eq!(f["tcp-segmentation-offload"], (true, false));
        assert_eq!(f["generic-receive-offload"], (false, false));
        assert_eq!(f["large-receive-offload"], (false, true));
        assert!(!f.contains_key("tx-checksum-ipv4"));
        assert!(!f.contains_key("Features for v0"));
    }

    /// `ethtool -l` on a veth end, after `-L rx 2`.
    const CHANNELS: &str = "Channel parameters for v0:
Pre-set maximums:
RX:\t\t2
TX:\t\t2
Other:\t\tn/a
Combined:\tn/a
Current hardware settings:
RX:\t\t2
TX:\t\t1
Other:\t\tn/a
Combined:\tn/a
";

    /// `ethtool -g` of a NIC with rings (ixgbe, ethtool 6.1).
    const RINGS: &str = "Ring parameters for eth0:
Pre-set maximums:
RX:\t\t4096
RX Mini:\tn/a
RX Jumbo:\tn/a
TX:\t\t4096
Current hardware settings:
RX:\t\t512
RX Mini:\tn/a
RX Jumbo:\tn/a
TX:\t\t512
RX Buf Len:\t\tn/a
TX Push:\toff
";

    #[test]
    fn rings_and_channels_read_the_current_settings_not_the_maximums() {
        let c = parse_current(CHANNELS);
        assert_eq!(c["RX"], "2");
        assert_eq!(c["TX"], "1");
        assert_eq!(c["Combined"], "n/a");
        let g = parse_current(RINGS);
        assert_eq!(g["RX"], "512");
        assert_eq!(g["TX"], "512");
        assert_eq!(g["TX Push"], "off");
    }

    /// `ethtool -c` of a NIC with coalescing (virtio_net, ethtool 6.1), cut.
    const COALESCE: &str = "Coalesce parameters for eth0:
Adaptive RX: off  TX: on
stats-block-usecs:\tn/a
sample-interval:\tn/a
rx-usecs:\t8
rx-frames:\t0
tx-usecs:\t50
tx-frames:\tn/a
";

    #[test]
    fn coalescing_reads_usecs_and_the_adaptive_switches() {
        let c = parse_coalesce(COALESCE);
        assert_eq!(c["rx-usecs"], "8");
        assert_eq!(c["tx-usecs"], "50");
        assert_eq!(c["adaptive-rx"], "off");
        assert_eq!(c["adaptive-tx"], "on");
        assert_eq!(c["tx-frames"], "n/a");
    }

    #[test]
    fn every_setting_has_a_way_to_be_read_and_set() {
        for (k, kind, _) in crate::model::nic::NIC_SETTINGS {
            let known = offload(k).is_some() || count(k).is_some() || *kind == NicKind::Mask;
            assert!(known, "{k}");
        }
    }

    #[test]
    fn masks_are_one_value_or_per_queue_and_compare_as_numbers() {
        let qs = vec!["rx-0".to_string(), "rx-1".to_string()];
        assert_eq!(
            split_masks("3", &qs),
            vec![("rx-0".into(), "3".into()), ("rx-1".into(), "3".into())]
        );
        assert_eq!(
            split_masks("rx-0=3,rx-1=0", &qs),
            vec![("rx-0".into(), "3".into()), ("rx-1".into(), "0".into())]
        );
        assert!(same(NicKind::Mask, "00000003", "3"));
        assert!(same(NicKind::Mask, "rx-0=3,rx-1=3", "3"));
        assert!(!same(NicKind::Mask, "rx-0=3,rx-1=0", "3"));
        assert!(same(NicKind::Switch, "off", "off"));
    }
}
