//! Server ports (`lab up --ports N`, `run --ports N`, the `ports` axis)
//! with per-address figures, the lab's link kinds (`--link bridge|macvlan`)
//! and the overview over two axes. Root only (CI runs as root); every lab
//! is named `prt-*` and taken down in a guard's Drop, pass or fail. Tests
//! that measure take a lock: two labs on two cores would measure each other.

mod common;

use common::*;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

fn measuring() -> Option<std::sync::MutexGuard<'static, ()>> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: the lab needs root (CI runs as root)");
        return None;
    }
    Some(SERIAL.lock().unwrap_or_else(|e| e.into_inner()))
}

/// A lab `prt-{pid}{tag}`, down when dropped.
struct PrtLab(String);

impl PrtLab {
    fn up(tag: &str, args: &str) -> (PrtLab, String) {
        let name = format!("prt-{}{tag}", std::process::id());
        let lab = PrtLab(name.clone());
        let mut a = vec!["lab", "up", &name, "--no-calibrate"];
        a.extend(args.split_whitespace());
        let o = run(&a, Duration::from_secs(60));
        assert_no_panic(&o);
        assert!(o.status.success(), "lab up {args}: {}", stderr(&o));
        (lab, stdout(&o))
    }
}

impl Drop for PrtLab {
    fn drop(&mut self) {
        let _ = run(&["lab", "down", &self.0], Duration::from_secs(30));
    }
}

fn root_links() -> String {
    let o = Command::new("ip").args(["-o", "link"]).output().unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

fn namespaces() -> String {
    let o = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn four_flows_over_two_ports_add_up_per_address() {
    let Some(_s) = measuring() else { return };
    let (lab, text) = PrtLab::up("p", "--ports 2");
    assert!(text.contains("2 server ports"), "{text}");
    let (human, r) = run_json_text(
        "ports.json",
        &[
            "stream", "--lab", &lab.0, "--flows", "4", "-d", "2", "--warmup", "0.5",
        ],
        Duration::from_secs(60),
    );
    let server = r["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["role"] == "server")
        .expect("a server host");
    let per = server["per_address"].as_array().expect("per_address");
    assert_eq!(per.len(), 2, "{server}");
    let addrs: Vec<&str> = per.iter().map(|a| a["address"].as_str().unwrap()).collect();
    assert_eq!(addrs, ["198.18.1.1", "198.19.1.1"]);
    let total = f(&server["throughput_bps"]);
    assert!(total > 0.0);
    let sum: f64 = per.iter().map(|a| f(&a["throughput_bps"])).sum();
    assert!((sum - total).abs() <= total * 1e-6, "{sum} vs {total}");
    for a in per {
        assert_eq!(a["flows"].as_array().unwrap().len(), 2, "{a}");
        assert!(f(&a["throughput_bps"]) > 0.0, "{a}");
    }
    // Each flow went to the address the flow map names, over its own link.
    let map = r["flow_map"].as_array().unwrap();
    assert_eq!(
        map.iter().filter(|p| p["address"] == "198.19.1.1").count(),
        2
    );
    let o = Command::new("ip")
        .args([
            "-n",
            &format!("lr-{}-r", lab.0),
            "-s",
            "-j",
            "link",
            "show",
            "s0p1",
        ])
        .output()
        .unwrap();
    let link: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let tx = u(&link[0]["stats64"]["tx"]["bytes"]);
    assert!(tx > 10_000_000, "port 1's link carried {tx} bytes");
    assert!(human.contains("port 198.19.1.1"), "{human}");
    // --ports 1 uses the first address only; more than the lab has is refused.
    let r1 = run_json_args(
        "ports1.json",
        &[
            "stream", "--lab", &lab.0, "--flows", "2", "--ports", "1", "-d", "1", "--warmup", "0.5",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(r1["spec"]["ports"], 1);
    assert!(r1["flow_map"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["address"] == "198.18.1.1"));
    let o = run(
        &["run", "stream", "--lab", &lab.0, "--ports", "3", "-d", "1"],
        Duration::from_secs(30),
    );
    assert_no_panic(&o);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        stderr(&o).contains("--ports 3: server s1 has 2 data addresses"),
        "{}",
        stderr(&o)
    );
}

const PORTS_STUDY: &str = r#"
title = "ports"
description = "ports 1 and 2"
overview = "ports"
[lab]
ports = 2
[test]
workload = "stream"
flows_per_port = 2
duration = "1s"
warmup = "0.5s"
[sweep]
ports = [1, 2]
[[table]]
columns = ["throughput_bps", "agent_cpu_pct"]
"#;

#[test]
fn the_ports_axis_spreads_flows_and_the_report_shows_each_address() {
    let Some(_s) = measuring() else { return };
    let file = tmp("ports.toml");
    std::fs::write(&file, PORTS_STUDY).unwrap();
    let out = tmp("ports-out");
    let _ = std::fs::remove_dir_all(&out);
    let dir = study_ok(&file, &out, Duration::from_secs(180));
    let one = json(&dir.join("points/ports-1.r1.json"));
    let two = json(&dir.join("points/ports-2.r1.json"));
    let addrs = |r: &serde_json::Value| -> Vec<String> {
        let mut v: Vec<String> = r["flow_map"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["address"].as_str().unwrap().to_string())
            .collect();
        v.sort();
        v.dedup();
        v
    };
    assert_eq!(addrs(&one), ["198.18.1.1"]);
    assert_eq!(addrs(&two), ["198.18.1.1", "198.19.1.1"]);
    // Two flows per port: the load grows with the ports.
    assert_eq!(u(&one["spec"]["flows"]), 2);
    assert_eq!(u(&two["spec"]["flows"]), 4);
    let per: Vec<usize> = two["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|h| h["per_address"].as_array())
        .flatten()
        .map(|a| a["flows"].as_array().unwrap().len())
        .collect();
    assert_eq!(per, [2, 2], "{}", two["hosts"]);
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("Ports: each server data address"), "{md}");
    assert!(md.contains("198.19.1.1"), "{md}");
    assert!(md.contains("Overview: each ports against ports=1"), "{md}");
    // The server's CPU has its column.
    assert!(md.contains("Agent process CPU"), "{md}");
    assert!(!namespaces().contains("lr-st-"), "{}", namespaces());
}

#[test]
fn bridge_and_macvlan_labs_carry_a_stream_and_an_rr_and_leave_nothing() {
    let Some(_s) = measuring() else { return };
    let before = root_links();
    for kind in ["bridge", "macvlan"] {
        let name;
        {
            let (lab, text) = PrtLab::up(&kind[..1], &format!("--link {kind} --mtu 9000"));
            name = lab.0.clone();
            assert!(text.contains(&format!("link {kind}")), "{text}");
            let r = run_json_args(
                &format!("{kind}-stream.json"),
                &["stream", "--lab", &lab.0, "-d", "1", "--warmup", "0.5"],
                Duration::from_secs(60),
            );
            assert!(
                f(&r["summary"]["throughput_bps"]) > 1e8,
                "{kind}: {}",
                r["summary"]
            );
            assert_eq!(r["lab"]["spec"]["link"], kind);
            assert!(r["lab"]["link"]
                .as_str()
                .unwrap()
                .contains(&format!("link {kind}")));
            // The emulator saw the traffic: it forwards every packet.
            let pk = u(&r["lab"]["emulator"]["dirs"][0]["packets"]);
            assert!(pk > 100, "{kind}: the emulator counted {pk} packets");
            let mss = u(&r["iterations"][0]["flows"]["client"][0]["tcp_info"]["snd_mss"]);
            assert_eq!(mss, 9000 - 52, "{kind}");
            let r = run_json_args(
                &format!("{kind}-rr.json"),
                &["rr", "--lab", &lab.0, "-d", "1", "--warmup", "0.5"],
                Duration::from_secs(60),
            );
            assert!(f(&r["summary"]["transactions_per_s"]) > 100.0, "{kind}");
            let router = format!("lr-{}-r", lab.0);
            let o = Command::new("ip")
                .args(["-n", &router, "-d", "link", "show", "c0"])
                .output()
                .unwrap();
            let shown = String::from_utf8_lossy(&o.stdout).into_owned();
            assert!(shown.contains(kind), "{kind}: {shown}");
        }
        assert!(!namespaces().contains(&name), "{}", namespaces());
    }
    assert_eq!(root_links(), before, "links in the root namespace changed");
}

const LINK_STUDY: &str = r#"
title = "link x mtu"
description = "veth and bridge at two MTUs"
overview = ["lab.link", "lab.mtu"]
[lab]
mtu = 1500
[test]
workload = "rr"
duration = "1s"
warmup = "0.5s"
[sweep]
lab.link = ["veth", "bridge"]
lab.mtu = [1500, 9000]
[[table]]
columns = ["transactions_per_s"]
"#;

#[test]
fn a_study_sweeps_the_link_kind_and_draws_the_pair_overview() {
    let Some(_s) = measuring() else { return };
    let file = tmp("link.toml");
    std::fs::write(&file, LINK_STUDY).unwrap();
    let out = tmp("link-out");
    let _ = std::fs::remove_dir_all(&out);
    let dir = study_ok(&file, &out, Duration::from_secs(240));
    for (link, mtu) in [("veth", 1500), ("bridge", 9000)] {
        let r = json(&dir.join(format!("points/lab.link-{link}_lab.mtu-{mtu}.r1.json")));
        assert_eq!(r["lab"]["spec"]["link"], link);
        assert_eq!(u(&r["lab"]["spec"]["mtu"]), mtu);
        assert!(f(&r["summary"]["transactions_per_s"]) > 100.0);
    }
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        md.contains("Overview: each lab.link against lab.link=veth"),
        "{md}"
    );
    assert!(
        md.contains("Overview: each lab.mtu against lab.mtu=1500"),
        "{md}"
    );
    assert!(
        md.contains("by lab.link and lab.mtu, against lab.link=veth lab.mtu=1500"),
        "{md}"
    );
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(
        html.contains("lab.link by lab.mtu"),
        "no pair table in the HTML"
    );
    assert!(!namespaces().contains("lr-st-"), "{}", namespaces());
}
