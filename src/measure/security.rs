//! SELinux, AppArmor and audit on this host, for the Configuration
//! Summary (seed 003: "check whether selinux and auditing are required").
//! Read from sysfs and /proc only, where the answer is reliable: the
//! SELinux enforce file, AppArmor's module parameter and profile list,
//! a process named auditd, `auditctl -s` where installed (bounded to two
//! seconds) and the audit= boot parameter. Nothing is changed.

use std::path::Path;
use std::time::Duration;

use crate::model::security::SecurityState;

fn read(root: &Path, path: &str) -> Option<String> {
    std::fs::read_to_string(root.join(path.trim_start_matches('/')))
        .ok()
        .map(|s| s.trim().to_string())
}

/// The state as the files under `root` say it ("/" on a host; a test's
/// directory in unit tests); `audit_enabled` is the caller's.
pub fn read_at(root: &Path) -> SecurityState {
    let selinux = read(root, "/sys/fs/selinux/enforce").map(|v| {
        if v == "1" {
            "enforcing".to_string()
        } else {
            "permissive".to_string()
        }
    });
    let apparmor =
        read(root, "/sys/module/apparmor/parameters/enabled").map(|v| v.starts_with('Y'));
    let apparmor_profiles = read(root, "/sys/kernel/security/apparmor/profiles")
        .map(|t| t.lines().filter(|l| !l.trim().is_empty()).count() as u32);
    let auditd_running = std::fs::read_dir(root.join("proc"))
        .map(|dir| {
            dir.flatten().any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .bytes()
                    .all(|b| b.is_ascii_digit())
                    && std::fs::read_to_string(e.path().join("comm"))
                        .is_ok_and(|c| c.trim() == "auditd")
            })
        })
        .unwrap_or(false);
    let audit_boot = read(root, "/proc/cmdline").and_then(|c| {
        c.split_whitespace()
            .find_map(|w| w.strip_prefix("audit="))
            .map(str::to_string)
    });
    SecurityState {
        selinux,
        apparmor,
        apparmor_profiles,
        auditd_running,
        audit_enabled: None,
        audit_boot,
    }
}

/// `auditctl -s`'s "enabled N" line.
pub fn enabled_in(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.trim().strip_prefix("enabled "))
        .and_then(|v| v.trim().parse().ok())
}

/// Asks `auditctl -s` (root), at most two seconds; None when it is not
/// installed or does not answer.
fn auditctl() -> Option<u32> {
    match super::probe::ask("auditctl", &["-s"], Duration::from_secs(2)) {
        Ok((true, out)) => enabled_in(&out),
        _ => None,
    }
}

/// This host's state.
pub fn collect() -> SecurityState {
    let mut s = read_at(Path::new("/"));
    s.audit_enabled = auditctl();
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "linerate-security-{}-{}",
            std::process::id(),
            files.len()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        for (p, text) in files {
            let f = dir.join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, text).unwrap();
        }
        dir
    }

    #[test]
    fn each_part_is_read_from_its_file() {
        let d = tree(&[
            ("sys/fs/selinux/enforce", "1\n"),
            ("sys/module/apparmor/parameters/enabled", "Y\n"),
            (
                "sys/kernel/security/apparmor/profiles",
                "/usr/sbin/ntpd (enforce)\nman_filter (enforce)\n",
            ),
            ("proc/812/comm", "auditd\n"),
            ("proc/cmdline", "root=/dev/sda1 audit=1 quiet\n"),
        ]);
        let s = read_at(&d);
        assert_eq!(s.selinux.as_deref(), Some("enforcing"));
        assert_eq!((s.apparmor, s.apparmor_profiles), (Some(true), Some(2)));
        assert!(s.auditd_running);
        assert_eq!(s.audit_boot.as_deref(), Some("1"));
        assert_eq!(
            s.active(),
            [
                "SELinux enforcing",
                "AppArmor enabled, 2 profiles loaded",
                "auditd running"
            ]
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn absent_files_are_absent_parts() {
        let d = tree(&[("proc/1/comm", "init\n")]);
        let s = read_at(&d);
        assert_eq!(s.selinux, None);
        assert_eq!(s.apparmor, None);
        assert!(!s.auditd_running);
        assert!(s.active().is_empty());
        assert!(s.describe().starts_with("none active"), "{}", s.describe());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn auditctl_status_is_parsed() {
        assert_eq!(enabled_in("enabled 1\nfailure 1\npid 812\n"), Some(1));
        assert_eq!(enabled_in("enabled 0\n"), Some(0));
        assert_eq!(enabled_in("nothing"), None);
    }
}
