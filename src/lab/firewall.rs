//! A study point's firewall in a lab's server namespace (`firewall.rules`,
//! `firewall.conntrack`): N rules that never match, in a chain of
//! linerate's own that INPUT jumps to, so every packet the server receives
//! walks all N (seed 003: "iptables loaded vs not"). The rules match
//! source addresses in 100.64.0.0/10 (shared address space), which nothing
//! in a lab ever sends from. Conntrack on puts a stateful rule first (an
//! established packet is accepted before the N rules, as a stateful
//! firewall does; a connection's first packet walks them all); off untracks
//! every packet in the raw table, so the N rules see every packet.
//!
//! Loaded with one `iptables-legacy-restore --noflush` (a rule per
//! `iptables` call would rewrite the table N times), read back with
//! `iptables-legacy -S`, and removed after the point, whatever its outcome.
//! The rules live in the lab's namespace only: a lab taken down takes them.

use std::process::Command;

use super::netns;
use super::LabError;
use crate::model::firewall::{FirewallRecord, FirewallSpec};

/// linerate's filter chain, jumped to from INPUT.
pub const CHAIN: &str = "LINERATE-FW";
/// linerate's raw chain (NOTRACK), jumped to from PREROUTING and OUTPUT.
pub const RAW_CHAIN: &str = "LINERATE-NOTRACK";

/// Runs `prog args` in namespace `ns`, `input` on its stdin; its stdout.
fn run(ns: &str, prog: &str, args: &[&str], input: Option<&str>) -> Result<String, LabError> {
    let mut cmd = Command::new(prog);
    cmd.args(args);
    netns::command_in(&mut cmd, ns)?;
    let shown = format!("ip netns exec {ns} {prog} {}", args.join(" "));
    super::plumb::run(cmd, &shown, input)
}

/// The non-matching source of rule `i`: 100.64.0.0/10 counted upwards.
fn source(i: u32) -> String {
    let a = 0x6440_0000u32 + i;
    format!(
        "{}.{}.{}.{}/32",
        a >> 24,
        (a >> 16) & 255,
        (a >> 8) & 255,
        a & 255
    )
}

/// The `iptables-legacy-restore --noflush` input that loads `spec`.
pub fn restore_text(spec: &FirewallSpec) -> String {
    let mut t = String::from("*filter\n");
    t.push_str(&format!(":{CHAIN} - [0:0]\n"));
    if spec.conntrack {
        t.push_str(&format!(
            "-A {CHAIN} -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT\n"
        ));
    }
    for i in 0..spec.rules {
        t.push_str(&format!("-A {CHAIN} -s {} -j DROP\n", source(i)));
    }
    t.push_str(&format!("-I INPUT 1 -j {CHAIN}\nCOMMIT\n"));
    if !spec.conntrack {
        t.push_str(&format!(
            "*raw\n:{RAW_CHAIN} - [0:0]\n-A {RAW_CHAIN} -j CT --notrack\n-I PREROUTING 1 -j {RAW_CHAIN}\n-I OUTPUT 1 -j {RAW_CHAIN}\nCOMMIT\n"
        ));
    }
    t
}

/// Lines of `iptables-legacy -S` in `ns` (table `table`).
pub fn rule_lines(ns: &str, table: &str) -> Result<Vec<String>, LabError> {
    Ok(run(ns, "iptables-legacy", &["-t", table, "-S"], None)?
        .lines()
        .map(str::to_string)
        .collect())
}

/// Loads `spec` in `ns` (anything of linerate's left there first goes),
/// and empties the namespace's conntrack table so the point's own
/// connections are what it holds at the end.
pub fn load(ns: &str, spec: &FirewallSpec) -> Result<(), LabError> {
    remove(ns)?;
    run(
        ns,
        "iptables-legacy-restore",
        &["--noflush"],
        Some(&restore_text(spec)),
    )?;
    flush_conntrack(ns)?;
    Ok(())
}

/// What is loaded in `ns` now, for the point's record.
pub fn read_back(ns: &str, spec: &FirewallSpec) -> Result<FirewallRecord, LabError> {
    let filter = rule_lines(ns, "filter")?;
    let raw = rule_lines(ns, "raw")?;
    let mine = |lines: &[String], chain: &str| {
        let head = format!("-A {chain} ");
        lines.iter().filter(|l| l.starts_with(&head)).count() as u32
    };
    Ok(FirewallRecord {
        namespace: ns.into(),
        asked: *spec,
        iptables_s_lines: filter.len() as u32,
        rules_loaded: mine(&filter, CHAIN),
        notrack_rules: mine(&raw, RAW_CHAIN),
        conntrack_entries: conntrack_entries(ns)?,
        iptables_s_lines_after: 0,
    })
}

/// Removes linerate's chains and jumps from `ns` (nothing else), and
/// empties its conntrack table. Removing what is not there is no error.
pub fn remove(ns: &str) -> Result<(), LabError> {
    for (table, chain, hooks) in [
        ("filter", CHAIN, &["INPUT"][..]),
        ("raw", RAW_CHAIN, &["PREROUTING", "OUTPUT"][..]),
    ] {
        let lines = rule_lines(ns, table)?;
        if !lines.iter().any(|l| l == &format!("-N {chain}")) {
            continue;
        }
        for hook in hooks {
            let jump = format!("-A {hook} -j {chain}");
            for _ in lines.iter().filter(|l| **l == jump) {
                run(
                    ns,
                    "iptables-legacy",
                    &["-t", table, "-D", hook, "-j", chain],
                    None,
                )?;
            }
        }
        run(ns, "iptables-legacy", &["-t", table, "-F", chain], None)?;
        run(ns, "iptables-legacy", &["-t", table, "-X", chain], None)?;
    }
    flush_conntrack(ns)
}

/// Connections the conntrack table of `ns` holds (None: the namespace
/// has no table, conntrack never ran there).
pub fn conntrack_entries(ns: &str) -> Result<Option<u64>, LabError> {
    match run(ns, "cat", &["/proc/net/nf_conntrack"], None) {
        Ok(text) => Ok(Some(text.lines().count() as u64)),
        Err(LabError::Plumbing { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Empties the conntrack table of `ns` through ctnetlink (a DELETE with
/// no tuple flushes the table), so one point's connections are not
/// counted in the next. A kernel without ctnetlink or conntrack has
/// nothing to flush.
pub fn flush_conntrack(ns: &str) -> Result<(), LabError> {
    netns::run_in(ns, || {
        flush_here().map_err(LabError::Os)?;
        Ok(())
    })
}

/// The flush, in this thread's namespace.
fn flush_here() -> std::io::Result<()> {
    const NETLINK_NETFILTER: libc::c_int = 12;
    const NFNL_SUBSYS_CTNETLINK: u16 = 1;
    const IPCTNL_MSG_CT_DELETE: u16 = 2;
    // SAFETY: a netlink socket, closed below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            NETLINK_NETFILTER,
        )
    };
    if fd < 0 {
        return Ok(());
    }
    // nlmsghdr (16 bytes) + nfgenmsg (4 bytes).
    let mut msg = [0u8; 20];
    msg[0..4].copy_from_slice(&20u32.to_ne_bytes());
    msg[4..6].copy_from_slice(&((NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE).to_ne_bytes());
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16;
    msg[6..8].copy_from_slice(&flags.to_ne_bytes());
    msg[8..12].copy_from_slice(&1u32.to_ne_bytes());
    msg[16] = libc::AF_UNSPEC as u8;
    // SAFETY: sending a buffer we own to the kernel over fd.
    let sent = unsafe { libc::send(fd, msg.as_ptr().cast(), msg.len(), 0) };
    let result = if sent < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        // The ack: an nlmsgerr whose error is 0, or ENOENT where the
        // table is empty or absent.
        let tv = libc::timeval {
            tv_sec: 2,
            tv_usec: 0,
        };
        // SAFETY: setting a receive timeout on our socket.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        let mut buf = [0u8; 256];
        // SAFETY: receiving into a buffer we own.
        let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n >= 20 && u16::from_ne_bytes([buf[4], buf[5]]) == libc::NLMSG_ERROR as u16 {
            let err = i32::from_ne_bytes([buf[16], buf[17], buf[18], buf[19]]);
            match -err {
                0 | libc::ENOENT | libc::EOPNOTSUPP => Ok(()),
                e => Err(std::io::Error::from_raw_os_error(e)),
            }
        } else {
            Ok(())
        }
    };
    // SAFETY: closing the socket opened above.
    unsafe { libc::close(fd) };
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_never_leave_the_shared_space() {
        assert_eq!(source(0), "100.64.0.0/32");
        assert_eq!(source(257), "100.64.1.1/32");
        assert_eq!(source(20_000), "100.64.78.32/32");
    }

    #[test]
    fn the_restore_text_has_the_rules_and_the_tracking_asked() {
        let off = restore_text(&FirewallSpec {
            rules: 3,
            conntrack: false,
        });
        assert_eq!(off.matches(" -j DROP").count(), 3);
        assert!(off.contains("-j CT --notrack") && !off.contains("ctstate"));
        let on = restore_text(&FirewallSpec {
            rules: 0,
            conntrack: true,
        });
        assert!(on.contains("--ctstate ESTABLISHED,RELATED") && !on.contains("notrack"));
        assert!(on.contains("-I INPUT 1 -j LINERATE-FW"));
    }
}
