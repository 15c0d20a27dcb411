//! Lab tunnels (root): a WireGuard lab carries a stream whose bytes its
//! interfaces also count, slower than the clear lab on this CPU-bound host;
//! IPsec is refused where the kernel has no ESP; VXLAN carries a stream;
//! `lab down` leaves no wireguard-go and no link.

mod common;
use common::*;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: labs need root");
        return false;
    }
    true
}

/// A lab named tun-{pid}-{tag}, taken down when dropped.
struct TunLab(String);

impl TunLab {
    fn up(tag: &str, args: &[&str]) -> TunLab {
        let name = format!("tun-{}-{tag}", std::process::id());
        let mut a = vec!["lab", "up", name.as_str(), "--no-calibrate"];
        a.extend_from_slice(args);
        let o = run(&a, LIMIT);
        assert_no_panic(&o);
        assert!(o.status.success(), "lab up {args:?}: {}", stderr(&o));
        TunLab(name)
    }
    fn stream(&self) -> serde_json::Value {
        run_json_args(
            "run",
            &["stream", "--lab", &self.0, "-d", "1", "--warmup", "0.3"],
            LIMIT,
        )
    }
}

impl Drop for TunLab {
    fn drop(&mut self) {
        let _ = run(&["lab", "down", &self.0], Duration::from_secs(30));
    }
}

/// Live (not zombie) wireguard-go processes.
fn live_wireguard_go() -> Vec<u32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let zombie = stat
            .rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'));
        if comm.trim() == "wireguard-go" && !zombie {
            v.push(pid);
        }
    }
    v
}

#[test]
fn wireguard_carries_a_stream_its_counters_count_slower_than_clear() {
    if !root() {
        return;
    }
    let clear = TunLab::up("c", &[]);
    let wg = TunLab::up("w", &["--tunnel", "wireguard"]);
    let procs: Vec<u32> = wg_pids(&wg);
    assert_eq!(procs.len(), 2, "two wireguard-go processes");
    let c = clear.stream();
    let w = wg.stream();
    let (tc, tw) = (
        f(&c["summary"]["throughput_bps"]),
        f(&w["summary"]["throughput_bps"]),
    );
    assert!(tw > 0.0 && tw < tc, "wireguard {tw} vs clear {tc}");
    let lab = &w["lab"];
    assert_eq!(lab["tunnel"]["kind"], "wireguard");
    assert_eq!(lab["tunnel"]["cipher"], "ChaCha20-Poly1305");
    assert_eq!(lab["tunnel"]["mtu"], 1440);
    let b = &lab["tunnel_bytes"];
    assert_eq!(b["agrees"], true, "{b}");
    assert!(f(&b["excess_pct"]).abs() < 3.0, "{b}");
    assert!(
        u(&b["client"]["tx_bytes"]) > u(&w["summary"]["bytes"]),
        "{b}"
    );
    assert!(c["lab"]["tunnel"].is_null());
    drop(wg);
    for p in procs {
        assert!(
            !live_wireguard_go().contains(&p),
            "wireguard-go {p} left running"
        );
    }
}

fn wg_pids(l: &TunLab) -> Vec<u32> {
    let o = run(&["lab", "status", &l.0, "--json"], LIMIT);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    v[0]["tunnel"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| u(&p["pid"]) as u32)
        .collect()
}

#[test]
fn ipsec_is_refused_without_esp_and_leaves_nothing() {
    if !root() {
        return;
    }
    let config = std::process::Command::new("gzip")
        .args(["-dc", "/proc/config.gz"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    if config.contains("CONFIG_INET_ESP=") {
        eprintln!("skipped: this kernel has ESP");
        return;
    }
    let name = format!("tun-{}-i", std::process::id());
    let o = run(&["lab", "up", &name, "--tunnel", "ipsec"], LIMIT);
    assert_no_panic(&o);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("CONFIG_INET_ESP"), "{e}");
    assert!(e.contains("--tunnel wireguard or vxlan"), "{e}");
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    let left: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(&name))
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn vxlan_carries_a_stream_and_down_leaves_no_link() {
    if !root() {
        return;
    }
    let v = TunLab::up("v", &["--tunnel", "vxlan"]);
    let r = v.stream();
    assert!(f(&r["summary"]["throughput_bps"]) > 0.0);
    assert_eq!(r["lab"]["tunnel"]["kind"], "vxlan");
    assert_eq!(r["lab"]["tunnel"]["mtu"], 1450);
    assert_eq!(r["lab"]["tunnel_bytes"]["agrees"], true, "{}", r["lab"]);
    let name = v.0.clone();
    drop(v);
    let o = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&o.stdout).contains(&name));
}

#[test]
fn the_ipsec_streams_study_runs_shortened() {
    if !root() {
        return;
    }
    let out = tmp("tun-study");
    let o = run(
        &[
            "study",
            "run",
            "seed000-ipsec-streams",
            "-d",
            "0.5",
            "--warmup",
            "0.2",
            "-q",
            "--out",
            out.to_str().unwrap(),
        ],
        Duration::from_secs(240),
    );
    assert_no_panic(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    let dir = first_dir(&out);
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("Through the wireguard"), "{md}");
    assert!(md.contains("lab tunnel"), "{md}");
}
