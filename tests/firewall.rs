//! The firewall axis (rules loaded in a lab's server namespace, read back
//! and removed; conntrack on and off), the security state in a result's
//! host record, and the cipher study's table.

mod common;

use common::*;
use std::time::Duration;

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let ok = unsafe { libc::geteuid() } == 0;
    if !ok {
        eprintln!("skipped: needs root (lab namespaces)");
    }
    ok
}

/// Each point's result file, in study order.
fn results(dir: &std::path::Path) -> Vec<serde_json::Value> {
    let m = json(&dir.join("manifest.json"));
    m["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| json(&dir.join(r["file"].as_str().unwrap())))
        .collect()
}

#[test]
fn fw_rules_are_loaded_read_back_and_removed_and_conntrack_follows_the_switch() {
    if !root() {
        return;
    }
    let file = tmp("fw-study.toml");
    std::fs::write(
        &file,
        "title = \"fw\"\ndescription = \"d\"\n[lab]\n[test]\nworkload = \"rr\"\nflows = 2\nduration = \"1s\"\nwarmup = \"200ms\"\n[sweep]\nmode = \"zip\"\nfirewall.rules = [500, 500]\nfirewall.conntrack = [\"off\", \"on\"]\n[[table]]\ntitle = \"t\"\ncolumns = [\"transactions_per_s\"]\n[[plot]]\ntitle = \"p\"\nx = \"firewall.conntrack\"\ny = \"transactions_per_s\"\n",
    )
    .unwrap();
    let out = tmp("fw-out");
    let dir = study_ok(&file, &out, Duration::from_secs(120));
    let rs = results(&dir);
    assert_eq!(rs.len(), 2);
    for r in &rs {
        let fw = &r["firewall"];
        let on = fw["asked"]["conntrack"].as_bool().unwrap();
        assert_eq!(u(&fw["asked"]["rules"]), 500);
        // 500 rules (and the stateful rule with conntrack on) read back;
        // -S adds 3 policies, the chain and the jump.
        assert_eq!(u(&fw["rules_loaded"]), if on { 501 } else { 500 }, "{fw}");
        assert_eq!(
            u(&fw["iptables_s_lines"]),
            u(&fw["rules_loaded"]) + 5,
            "{fw}"
        );
        assert_eq!(u(&fw["notrack_rules"]), if on { 0 } else { 1 }, "{fw}");
        // Nothing left after the point: the three policies alone.
        assert_eq!(u(&fw["iptables_s_lines_after"]), 3, "{fw}");
        let entries = u(&fw["conntrack_entries"]);
        if on {
            assert!(entries > 0, "conntrack on tracks the test's flows: {fw}");
        } else {
            assert_eq!(entries, 0, "conntrack off tracks nothing: {fw}");
        }
        assert!(f(&r["iterations"][0]["transactions_per_s"]) > 0.0);
        // The security state is in both ends' host records.
        for end in ["client", "agent"] {
            let s = &r["environment"][end]["security"];
            assert!(s.is_object(), "{end}: {s}");
            assert!(s["auditd_running"].is_boolean(), "{end}: {s}");
        }
    }
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("SELinux, AppArmor, audit"), "{report}");
}

#[test]
fn fw_rules_without_a_lab_are_refused_in_one_line() {
    let file = tmp("fw-nolab.toml");
    std::fs::write(
        &file,
        "title = \"fw\"\ndescription = \"d\"\n[test]\nworkload = \"rr\"\nduration = \"1s\"\n[sweep]\nfirewall.rules = [10]\n[[plot]]\ntitle = \"p\"\nx = \"firewall.rules\"\ny = \"transactions_per_s\"\n",
    )
    .unwrap();
    let out = tmp("fw-nolab-out");
    let o = run(
        &[
            "study",
            "run",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "-q",
        ],
        Duration::from_secs(30),
    );
    assert_no_panic(&o);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("firewall.*") && e.contains("[lab]"), "{e}");
}

#[test]
fn the_cipher_study_runs_and_its_report_has_the_table() {
    let out = tmp("ciphers-out");
    let o = run(
        &[
            "study",
            "run",
            "seed003-ciphers",
            "--duration",
            "100ms",
            "--warmup",
            "0s",
            "--out",
            out.to_str().unwrap(),
            "-q",
        ],
        Duration::from_secs(60),
    );
    assert_no_panic(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    let dir = first_dir(&out);
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("Cipher costs on one core"), "{report}");
    for row in [
        "| aes256-gcm | 16K |",
        "| rsa2048-sign |",
        "| ecdsa-p256-verify |",
    ] {
        assert!(report.contains(row), "{row} in {report}");
    }
    for r in results(&dir) {
        let c = &r["iterations"][0]["cipher"];
        assert!(
            f(&c["ops_per_s"]) > 0.0 && f(&c["cpu_us_per_op"]) > 0.0,
            "{c}"
        );
    }
}
