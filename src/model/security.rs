//! The security state of a host for the Configuration Summary: SELinux,
//! AppArmor and audit. Seed 003 lists them among the things that cost a
//! network server CPU ("check whether selinux and auditing are required
//! ... if not, switch them off"); a result says which were active.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SecurityState {
    /// "enforcing" or "permissive" (/sys/fs/selinux/enforce); None: no
    /// SELinux (the file is absent).
    #[serde(default)]
    pub selinux: Option<String>,
    /// AppArmor enabled (/sys/module/apparmor/parameters/enabled is "Y");
    /// None: the module is absent.
    #[serde(default)]
    pub apparmor: Option<bool>,
    /// AppArmor profiles loaded (/sys/kernel/security/apparmor/profiles,
    /// readable by root); None: not readable.
    #[serde(default)]
    pub apparmor_profiles: Option<u32>,
    /// A process named auditd runs on the host (visible in /proc).
    #[serde(default)]
    pub auditd_running: bool,
    /// The kernel's audit state as `auditctl -s` says it ("enabled 1");
    /// None when auditctl is absent or could not ask.
    #[serde(default)]
    pub audit_enabled: Option<u32>,
    /// The audit= boot parameter, when the kernel command line has one.
    #[serde(default)]
    pub audit_boot: Option<String>,
}

impl SecurityState {
    /// The parts that are active, in words ("SELinux enforcing", "auditd
    /// running"); empty when none is.
    pub fn active(&self) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(s) = &self.selinux {
            v.push(format!("SELinux {s}"));
        }
        if self.apparmor == Some(true) {
            v.push(match self.apparmor_profiles {
                Some(n) => format!("AppArmor enabled, {n} profiles loaded"),
                None => "AppArmor enabled".into(),
            });
        }
        if self.auditd_running {
            v.push("auditd running".into());
        }
        if self.audit_enabled.is_some_and(|e| e > 0) {
            v.push(format!(
                "kernel audit enabled{}",
                if self.audit_enabled == Some(2) {
                    " (locked)"
                } else {
                    ""
                }
            ));
        }
        v
    }

    /// One line for the summary: what is active, or that nothing is.
    pub fn describe(&self) -> String {
        let active = self.active();
        let mut s = if active.is_empty() {
            "none active (no SELinux, AppArmor or audit)".to_string()
        } else {
            active.join("; ")
        };
        if self.audit_enabled.is_none() {
            s.push_str(match &self.audit_boot {
                Some(b) => match b.as_str() {
                    "0" | "off" => "; kernel audit off at boot (audit=0)",
                    _ => "; kernel audit on at boot (audit=1)",
                },
                None => "; kernel audit state unknown (no auditctl)",
            });
        }
        s
    }
}
