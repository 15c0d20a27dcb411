//! The lab with real namespaces, veth links, iptables NFQUEUE rules and the
//! emulator (root only; CI runs as root). Every test brings up its own lab
//! under a unique name and takes it down in a guard's Drop, so a failing
//! assertion leaves nothing behind. Tests that measure run alone (the
//! write side of a lock): two emulated WANs on two cores would measure
//! each other, and a slow host starves the emulator. The rest (errors,
//! a full disk) run beside each other, never beside a measuring one.

mod common;

use common::*;
use std::process::Command;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

static SERIAL: RwLock<()> = RwLock::new(());

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let ok = unsafe { libc::geteuid() } == 0;
    if !ok {
        eprintln!("skipped: the lab needs root (CI runs as root)");
    }
    ok
}

/// For a test that measures: None (skip) without root, else the lock that
/// keeps it from sharing the machine with any other lab test.
fn measuring() -> Option<RwLockWriteGuard<'static, ()>> {
    root().then(|| SERIAL.write().unwrap_or_else(|e| e.into_inner()))
}

/// For a test that does not measure: it may run beside others like it,
/// never beside one that measures.
fn beside() -> RwLockReadGuard<'static, ()> {
    SERIAL.read().unwrap_or_else(|e| e.into_inner())
}

fn namespaces() -> String {
    let o = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn alive(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

/// "measured RTT 50.45 ms" -> 50.45
fn number_after(text: &str, key: &str) -> f64 {
    let i = text
        .find(key)
        .unwrap_or_else(|| panic!("no '{key}' in {text}"));
    text[i + key.len()..]
        .split_whitespace()
        .next()
        .and_then(|w| w.trim_end_matches(['%', '(', ')', ';']).parse().ok())
        .unwrap_or_else(|| panic!("no number after '{key}' in {text}"))
}

#[test]
fn lab_up_calibrates_rtt_and_rate_and_down_leaves_nothing() {
    let Some(_s) = measuring() else { return };
    let links_before = Command::new("ip")
        .args(["-o", "link"])
        .output()
        .unwrap()
        .stdout;
    let (lab, out) = Lab::up("cal", "--rtt 50ms --rate 1gbit");
    // RTT within 2 ms of the configured 50 ms.
    let rtt = number_after(&out, "measured RTT");
    assert!((rtt - 50.0).abs() < 2.0, "rtt {rtt}: {out}");
    // Rate within 5%: one flow's goodput against what 1 Gbit/s allows.
    let pct = number_after(&out, "expected (");
    assert!((pct - 100.0).abs() < 5.0, "rate {pct}% of expected: {out}");
    let st = lab.status();
    let pid = u(&st[0]["lab"]["emulator"]["pid"]);
    assert!(alive(pid));
    assert_eq!(st[0]["lab"]["backend"], "nfqueue", "{st}");
    // An emulator shaping 1 Gbit/s is placed on its own CPU where there
    // are two (its CPU per packet fell a third, bench/RESULTS.md).
    if std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 {
        let note = st[0]["lab"]["backend_note"].as_str().unwrap_or_default();
        assert!(note.contains("emulator on CPU"), "{note}");
    }
    assert!(namespaces().contains(&lab.ns("r")));
    // The router's rules exist while it is up.
    assert!(lab
        .exec("r", &["iptables-legacy", "-S", "FORWARD"])
        .contains("NFQUEUE"));

    let o = run(&["lab", "down", &lab.name], Duration::from_secs(30));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("is down"));
    for role in ["c", "r", "s"] {
        assert!(
            !namespaces().contains(&lab.ns(role)),
            "{} left",
            lab.ns(role)
        );
    }
    assert!(!alive(pid), "emulator {pid} still running");
    assert!(!std::path::Path::new(&format!("/run/linerate/labs/{}.json", lab.name)).exists());
    let links_after = Command::new("ip")
        .args(["-o", "link"])
        .output()
        .unwrap()
        .stdout;
    assert_eq!(
        links_before, links_after,
        "links in the root namespace changed"
    );
    // Down again is harmless.
    let o = run(&["lab", "down", &lab.name], Duration::from_secs(30));
    assert!(o.status.success());
    assert!(stdout(&o).contains("was not up"));
}

/// Processes a test started itself (iperf3): killed by PID and reaped when
/// the test ends, pass or fail.
struct Procs(Vec<std::process::Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts `cmd` inside namespace `ns` (`ip netns exec` execs it, so the
/// child's PID is the command's), its output to `out`.
fn spawn_in(ns: &str, cmd: &[&str], out: &std::path::Path) -> std::process::Child {
    let f = std::fs::File::create(out).unwrap();
    Command::new("ip")
        .args(["netns", "exec", ns])
        .args(cmd)
        .stdin(std::process::Stdio::null())
        .stdout(f.try_clone().unwrap())
        .stderr(f)
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?} in {ns}: {e}"))
}

/// Waits for every process of `p` to exit, at most until `limit`.
fn wait_all(p: &mut Procs, limit: Duration) {
    let deadline = Instant::now() + limit;
    for c in &mut p.0 {
        while c.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "a process outlived {limit:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn a_rack_lab_has_a_shaped_port_per_client() {
    let Some(_s) = measuring() else { return };
    let (lab, out) = Lab::up(
        "rack",
        "--clients 4 --servers 1 --rate 1gbit --rtt 1ms --no-calibrate",
    );
    assert!(out.contains("a rack of 4 clients"), "{out}");
    let st = lab.status();
    let clients = st[0]["clients"].as_array().unwrap().clone();
    let servers = st[0]["servers"].as_array().unwrap().clone();
    assert_eq!(clients.len(), 4, "{st}");
    assert_eq!(servers.len(), 1, "{st}");
    let listed = namespaces();
    for (k, c) in clients.iter().enumerate() {
        let ns = c["ns"].as_str().unwrap();
        let addr = c["addr"].as_str().unwrap();
        let role = if k == 0 {
            "c".into()
        } else {
            format!("c{}", k + 1)
        };
        assert_eq!(ns, lab.ns(&role));
        assert_eq!(addr, format!("198.18.{}.1", 2 * k));
        assert!(listed.contains(ns), "{ns} missing: {listed}");
        let shown = Command::new("ip")
            .args(["-n", ns, "-4", "-o", "addr", "show", "dev", "lr0"])
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&shown.stdout).contains(&format!("{addr}/24")),
            "{ns}: {}",
            String::from_utf8_lossy(&shown.stdout)
        );
    }
    assert_eq!(servers[0]["ns"], lab.ns("s").as_str());
    assert_eq!(servers[0]["addr"], "198.18.1.1");
    assert!(listed.contains(&lab.ns("r")));
    // One emulator per client link, each on its own pair of queues.
    let emulators = st[0]["emulators"].as_array().unwrap().clone();
    assert_eq!(emulators.len(), 4, "{st}");
    let pids: Vec<u64> = emulators.iter().map(|e| u(&e["pid"])).collect();
    assert!(pids.iter().all(|&p| alive(p)), "{pids:?}");
    let rules = lab.exec("r", &["iptables-legacy", "-S", "FORWARD"]);
    for k in 0..4 {
        for (dir, q) in [("-i", 2 * k), ("-o", 2 * k + 1)] {
            let rule = format!("{dir} c{k} -j NFQUEUE --queue-num {q}");
            assert!(rules.contains(&rule), "no '{rule}' in {rules}");
        }
    }

    // Four iperf3 flows at once, one from each client to one server: each
    // client's link allows ~941 Mbit/s of goodput, the server's link is not
    // shaped, so together they reach 4 x 941.
    // Measured once more when the sum is off: other lab tests share the
    // two cores, and a busy core slows the four emulators together.
    let measure = |round: u32| -> Vec<f64> {
        let mut procs = Procs(Vec::new());
        for k in 0..4 {
            let port = format!("520{k}");
            procs.0.push(spawn_in(
                &lab.ns("s"),
                &["iperf3", "-s", "-1", "-p", &port],
                &tmp(&format!("{}-server{k}-{round}.txt", lab.name)),
            ));
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while (0..4).any(|k| {
            !lab.exec("s", &["ss", "-Hltn"])
                .contains(&format!(":520{k} "))
        }) {
            assert!(
                Instant::now() < deadline,
                "the iperf3 servers did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut flows = Procs(Vec::new());
        let outs: Vec<_> = (0..4)
            .map(|k| tmp(&format!("{}-client{k}-{round}.json", lab.name)))
            .collect();
        for (k, c) in clients.iter().enumerate() {
            let port = format!("520{k}");
            flows.0.push(spawn_in(
                c["ns"].as_str().unwrap(),
                &["iperf3", "-c", "198.18.1.1", "-p", &port, "-t", "4", "-J"],
                &outs[k],
            ));
        }
        wait_all(&mut flows, Duration::from_secs(30));
        wait_all(&mut procs, Duration::from_secs(10));
        outs.iter()
            .map(|o| f(&json(o)["end"]["sum_received"]["bits_per_second"]))
            .collect()
    };
    let goodput = 1e9 * 1448.0 / 1538.0;
    let mut rates = measure(0);
    let off = |r: &[f64]| (r.iter().sum::<f64>() / (4.0 * goodput) - 1.0).abs() >= 0.03;
    if off(&rates) {
        eprintln!("rack: sum off by 3% or more ({rates:?}), measured again");
        rates = measure(1);
    }
    let sum: f64 = rates.iter().sum();
    eprintln!(
        "rack: per client {:?} Mbit/s, sum {:.1} Mbit/s ({:+.2}% of 4 x {:.1})",
        rates
            .iter()
            .map(|r| (r / 1e5).round() / 10.0)
            .collect::<Vec<_>>(),
        sum / 1e6,
        (sum / (4.0 * goodput) - 1.0) * 100.0,
        goodput / 1e6
    );
    for (k, r) in rates.iter().enumerate() {
        assert!(
            (0.85e9..=1.0e9).contains(r),
            "client {k}: {r} bit/s, rates {rates:?}"
        );
    }
    assert!(
        (sum / (4.0 * goodput) - 1.0).abs() < 0.03,
        "sum {sum} bit/s vs 4 x {goodput}: {rates:?}"
    );
    // Each client's traffic went through its own link's emulator.
    std::thread::sleep(Duration::from_millis(200));
    let st = lab.status();
    for (k, e) in st[0]["emulators"].as_array().unwrap().iter().enumerate() {
        let bytes = u(&e["stats"]["dirs"][0]["bytes"]);
        assert!(bytes > 300 << 20, "link c{k} carried {bytes} B: {e}");
    }

    // linerate across the rack: an agent in every namespace, the four
    // clients driving the server on one common window.
    let r = run_json_args(
        &format!("{}-linerate.json", lab.name),
        &[
            "stream", "--lab", &lab.name, "--flows", "8", "--warmup", "3", "-d", "3",
        ],
        Duration::from_secs(90),
    );
    let it = &r["iterations"][0];
    let total = f(&it["throughput_bps"]);
    eprintln!(
        "rack: linerate aggregate {:.1} Mbit/s ({:+.2}% of 4 x {:.1}), iperf3 sum {:.1}",
        total / 1e6,
        (total / (4.0 * goodput) - 1.0) * 100.0,
        goodput / 1e6,
        sum / 1e6
    );
    assert!(
        (total / (4.0 * goodput) - 1.0).abs() < 0.03,
        "linerate aggregate {total} bit/s vs 4 x {goodput}"
    );
    let hosts = r["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 5, "{hosts:?}");
    // The aggregate is what reached the server (the clients' senders saw
    // it acknowledged); the server read that much give or take what its
    // receive buffers held at the window's edges.
    let server = hosts.iter().find(|h| h["role"] == "server").unwrap();
    let delivered: u64 = hosts
        .iter()
        .filter(|h| h["role"] == "client")
        .map(|h| u(&h["counters"]["bytes_delivered"]))
        .sum();
    assert_eq!(delivered, u(&it["bytes"]));
    let read = u(&server["counters"]["bytes_rx"]) as f64;
    assert!(
        (read / u(&it["bytes"]) as f64 - 1.0).abs() < 0.03,
        "the server read {read}, {} reached it",
        u(&it["bytes"])
    );
    let sent: Vec<f64> = hosts
        .iter()
        .filter(|h| h["role"] == "client")
        .map(|h| u(&h["counters"]["bytes_tx"]) as f64)
        .collect();
    assert_eq!(sent.len(), 4);
    let all: f64 = sent.iter().sum();
    for (k, b) in sent.iter().enumerate() {
        let share = b / all;
        assert!(
            (share - 0.25).abs() < 0.025,
            "client {k} share {share}: {sent:?}"
        );
    }
    let clients: std::collections::BTreeSet<&str> = r["flow_map"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["client"].as_str().unwrap())
        .collect();
    assert_eq!(clients.len(), 4, "{clients:?}");
    // Each client's agent ran in its own namespace: its flows left from its address.
    for h in hosts.iter().filter(|h| h["role"] == "client") {
        assert_eq!(u(&h["counters"]["bytes_rx"]), 0);
    }
    let locals: std::collections::BTreeSet<String> = it["flows"]["client"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            f["local"]
                .as_str()
                .unwrap()
                .rsplit_once(':')
                .unwrap()
                .0
                .to_string()
        })
        .collect();
    assert_eq!(locals.len(), 4, "client flows left from {locals:?}");

    let o = run(&["lab", "down", &lab.name], Duration::from_secs(30));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("is down"));
    let prefix = format!("lr-{}-", lab.name);
    assert!(!namespaces().contains(&prefix), "{}", namespaces());
    for p in &pids {
        assert!(!alive(*p), "emulator {p} still running");
    }
    let files: Vec<String> = std::fs::read_dir("/run/linerate/labs")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("{}.", lab.name)))
        .collect();
    assert!(files.is_empty(), "left behind: {files:?}");
    // What a rack that failed halfway up leaves (namespaces, no state) goes too.
    for role in ["c3", "s2"] {
        let ns = lab.ns(role);
        assert!(Command::new("ip")
            .args(["netns", "add", &ns])
            .status()
            .unwrap()
            .success());
    }
    let o = run(&["lab", "down", &lab.name], Duration::from_secs(30));
    assert!(stdout(&o).contains("is down"), "{}", stdout(&o));
    assert!(!namespaces().contains(&prefix), "{}", namespaces());
}

#[test]
fn exact_window_transfer_runs_at_window_over_rtt() {
    let Some(_s) = measuring() else { return };
    let (lab, _) = Lab::up("win", "--rtt 20ms --rate 1gbit --no-calibrate");
    let r = run_json(
        &format!("{}-exact.json", lab.name),
        &format!(
            "stream --lab {} --bytes 8M --rcvbuf 128K --window exact",
            lab.name
        ),
        Duration::from_secs(120),
    );
    let rtt_ms = f(&r["lab"]["calibration"]["rtt_rr_ms"]);
    let bound = 131072.0 * 8.0 / (rtt_ms / 1e3);
    let got = f(&r["summary"]["throughput_bps"]);
    assert!(
        (got / bound - 1.0).abs() < 0.15,
        "{got} vs W/RTT {bound} (rtt {rtt_ms} ms)"
    );
    let seen = f(&r["summary"]["observed_window_bytes"]);
    assert!((seen / 131072.0 - 1.0).abs() < 0.1, "window seen {seen}");
    assert_eq!(r["lab"]["name"], lab.name.as_str());
    let d0 = &r["lab"]["emulator"]["dirs"][0];
    assert!(u(&d0["bytes"]) > 8 << 20);
    // Arrivals are timed by the kernel (NFQA_TIMESTAMP), so the emulator
    // need not wake for each one: nearly every packet carries its stamp.
    assert!(
        u(&d0["stamped"]) * 10 >= u(&d0["packets"]) * 9,
        "stamped {} of {} packets",
        d0["stamped"],
        d0["packets"]
    );
    // What an application setting SO_RCVBUF gets: a larger window (~1.5x).
    let b = run_json(
        &format!("{}-buffer.json", lab.name),
        &format!(
            "stream --lab {} --bytes 8M --rcvbuf 128K --window buffer",
            lab.name
        ),
        Duration::from_secs(120),
    );
    let seen_b = f(&b["summary"]["observed_window_bytes"]);
    assert!(
        seen_b > 1.2 * seen,
        "buffer window {seen_b} vs exact {seen}"
    );
}

#[test]
fn loss_rate_is_within_statistical_bounds() {
    let Some(_s) = measuring() else { return };
    let (lab, _) = Lab::up(
        "loss",
        "--rtt 2ms --rate 200mbit --loss 2%/0 --no-calibrate",
    );
    let r = run_json(
        &format!("{}.json", lab.name),
        &format!("stream --lab {} -d 2 --warmup 0", lab.name),
        Duration::from_secs(60),
    );
    // Loss means a per-packet emulator: with two CPUs or more it runs on
    // the last one and the lab's packet processing is steered to the others.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus >= 2 {
        let note = r["lab"]["backend_note"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(note.contains("emulator on CPU"), "{note}");
        let st = lab.status();
        let pid = u(&st[0]["lab"]["emulator"]["pid"]);
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let allowed = status
            .lines()
            .find(|l| l.starts_with("Cpus_allowed_list:"))
            .unwrap()
            .split_whitespace()
            .last()
            .unwrap()
            .to_string();
        assert!(
            !allowed.contains(['-', ',']),
            "emulator not pinned: {allowed}"
        );
        let mask = lab
            .exec("r", &["cat", "/sys/class/net/c0/queues/rx-0/rps_cpus"])
            .replace(',', "");
        assert!(
            u64::from_str_radix(mask.trim(), 16).unwrap_or(0) != 0,
            "no RPS on the router's c0: {mask}"
        );
    }
    let d = &r["lab"]["emulator"]["dirs"][0];
    let lost = u(&d["dropped_loss"]) as f64;
    let n = lost + u(&d["packets"]) as f64;
    assert!(n > 2000.0, "too few packets to judge: {d}");
    let p = 0.02;
    let sigma = (n * p * (1.0 - p)).sqrt();
    assert!(
        (lost - n * p).abs() < 4.0 * sigma,
        "{lost} lost of {n}, expected {} ± {}",
        n * p,
        4.0 * sigma
    );
    // The reverse direction has no loss configured.
    assert_eq!(u(&r["lab"]["emulator"]["dirs"][1]["dropped_loss"]), 0);
    assert!(u(&r["iterations"][0]["flows"]["client"][0]["tcp_info"]["total_retrans"]) > 0);
}

#[test]
fn an_emulator_stopped_with_sigterm_stops_traffic_and_the_lab_is_stale() {
    let Some(_s) = measuring() else { return };
    let (lab, _) = Lab::up("kill", "--rtt 4ms --no-calibrate");
    let token = token_file(&format!("{}.token", lab.name), "killtest");
    let mut agent = Command::new("ip")
        .args([
            "netns",
            "exec",
            &lab.ns("s"),
            bin(),
            "serve",
            "--listen",
            "198.18.1.1:7470",
            "-q",
        ])
        .arg("--token-file")
        .arg(&token)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let client = |secs: &str| {
        let mut a: Vec<String> = ["netns", "exec", &lab.ns("c"), bin()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.extend(remote(
            "198.18.1.1:7470",
            &token,
            &["rr", "-d", secs, "--warmup", "0", "-q"],
        ));
        Command::new("ip").args(&a).output().unwrap()
    };
    let before = client("0.5");
    assert!(
        before.status.success(),
        "{}",
        String::from_utf8_lossy(&before.stderr)
    );
    let pid = u(&lab.status()[0]["lab"]["emulator"]["pid"]);
    // SIGTERM, as a service manager or a careless `kill` would send it.
    // SAFETY: signals the emulator this test's lab started.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let t = Instant::now();
    while alive(pid) {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "emulator ignored SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let t0 = Instant::now();
    let after = client("0.5");
    assert!(
        !after.status.success(),
        "traffic passed without the emulator"
    );
    assert!(t0.elapsed() < Duration::from_secs(60));
    // The lab now says it is stale and refuses tests.
    let st = lab.status();
    assert_eq!(st[0]["stale"], true);
    let o = run_str(
        &format!("run rr --lab {} -d 1", lab.name),
        Duration::from_secs(30),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("stale"), "{}", stderr(&o));
    let _ = agent.kill();
    let _ = agent.wait();
    // And `lab down` cleans it all.
    let o = run(&["lab", "down", &lab.name], Duration::from_secs(30));
    assert!(o.status.success(), "{}", stderr(&o));
    for role in ["c", "r", "s"] {
        assert!(
            !namespaces().contains(&lab.ns(role)),
            "{} left",
            lab.ns(role)
        );
    }
}

#[test]
fn bad_specs_and_missing_labs_get_clear_errors() {
    let _beside = beside();
    if !root() {
        return;
    }
    let cases = [
        ("lab up x1 --rtt -5ms", "negative"),
        ("lab up x1 --rtt 50parsecs", "--rtt 50parsecs"),
        ("lab up x1 --rate 1gbot", "not a bit rate"),
        ("lab up x1 --loss 150%", "below 100%"),
        ("lab up Bad_Name", "must be 1-24 characters"),
        ("lab up x1 --mtu 100", "--mtu 100"),
        ("lab up x1 --clients 17", "a lab has 1 to 16 clients"),
        ("lab up x1 --clients 0", "a lab has 1 to 16 clients"),
        ("lab up x1 --servers 9", "a lab has 1 to 8 servers"),
        (
            "lab up x1 --clients 2 --emulator netem",
            "use --emulator nfqueue",
        ),
        (
            "lab up x1 --clients 2 --emulator-cpu 1",
            "--emulator-cpu 1 places one",
        ),
        ("run stream --lab nosuchlab -d 1", "no lab named nosuchlab"),
        ("run exec -- true", "runs in a lab"),
        ("run stream --window exact -d 1", "needs --rcvbuf"),
    ];
    for (args, want) in cases {
        let o = run_str(args, Duration::from_secs(20));
        assert_no_panic(&o);
        assert!(!o.status.success(), "{args} succeeded");
        let e = stderr(&o);
        assert!(e.contains(want), "{args}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{args}: one line, got {e}");
    }
    assert!(!namespaces().contains("lr-x1-"));
}

#[test]
fn scp_and_exec_run_real_programs_in_the_lab() {
    let Some(_s) = measuring() else { return };
    let (lab, _) = Lab::up("ssh", "--rtt 10ms --rate 1gbit --no-calibrate");
    let r = run_json(
        &format!("{}-scp.json", lab.name),
        &format!("scp --lab {} --bytes 4M --rcvbuf 128K", lab.name),
        Duration::from_secs(120),
    );
    let e = &r["exec"];
    assert_eq!(u(&e["exit_code"]), 0);
    let login = f(&e["login_s"]);
    assert!(login > 0.04, "login of {login} s is under 4 RTTs");
    assert!(f(&e["elapsed_s"]) > login);
    assert!(e["ssh_version"].as_str().unwrap().contains("OpenSSH"));
    assert!(e["server_tcp_rmem"].as_str().unwrap().starts_with("4096 "));
    assert!(f(&r["summary"]["observed_window_bytes"]) > 30_000.0);
    assert_eq!(u(&r["summary"]["bytes"]), 4 << 20);
    assert!(f(&e["server_cpu_s"]) > 0.0);
    // The server namespace's tcp_rmem is put back after the test.
    let rmem = lab.exec("s", &["sysctl", "-n", "net.ipv4.tcp_rmem"]);
    assert_eq!(
        rmem.split_whitespace().collect::<Vec<_>>(),
        ["4096", "131072", "33554432"]
    );
    // Any command, with linerate's sshd; its exit status decides.
    let ok = run(
        &[
            "run",
            "exec",
            "--lab",
            &lab.name,
            "--sshd",
            "-q",
            "--",
            "ssh",
            "-F",
            "{ssh_config}",
            "server",
            "true",
        ],
        Duration::from_secs(60),
    );
    assert!(ok.status.success(), "{}", stderr(&ok));
    assert!(stdout(&ok).contains("exit 0 after"));
    let bad = run(
        &["run", "exec", "--lab", &lab.name, "-q", "--", "false"],
        Duration::from_secs(60),
    );
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        stderr(&bad).contains("false exited with 1"),
        "{}",
        stderr(&bad)
    );
}

const MINI: &str = r#"
title = "mini wan window"
description = "two RTTs, one window, linerate and scp"
[lab]
rate = "1gbit"
[test]
workload = "stream"
bytes = "2M"
window = "exact"
duration = "60s"
[[case]]
label = "linerate"
[[case]]
label = "scp"
workload = "scp"
window = "buffer"
[sweep]
rtt = ["5ms", "15ms"]
rcvbuf = ["128K"]
[[plot]]
x = "rtt"
y = "throughput_bps"
series = "rcvbuf"
"#;

#[test]
fn a_study_brings_its_own_lab_follows_rtt_and_removes_it() {
    let Some(_s) = measuring() else { return };
    let file = tmp("mini-wan.toml");
    std::fs::write(&file, MINI).unwrap();
    let out = tmp("mini-wan-out");
    let dir = study_ok(&file, &out, Duration::from_secs(300));
    for (case, rtt) in [
        ("linerate", 5.0),
        ("linerate", 15.0),
        ("scp", 5.0),
        ("scp", 15.0),
    ] {
        let p = dir.join(format!("points/{case}_rtt-{rtt}ms_rcvbuf-128K.r1.json"));
        let r = json(&p);
        let measured = f(&r["lab"]["calibration"]["rtt_rr_ms"]);
        assert!(
            (measured - rtt).abs() < 2.0,
            "{case} at {rtt} ms measured {measured}"
        );
        assert_eq!(r["summary"]["status"], "ok");
    }
    // The study's own lab is gone.
    assert!(!namespaces().contains("lr-st-"), "{}", namespaces());
}

/// A study without a lab of its own, run in a lab the user brought up
/// (`study run FILE --lab NAME`): its points run inside it and their
/// results record it (the emulator's counters), the manifest names it as
/// the network, and the report does not call it loopback.
#[test]
fn a_study_in_a_users_lab_records_the_lab_in_every_point() {
    let Some(_s) = measuring() else { return };
    let (lab, _) = Lab::up("stlab", "--rtt 10ms --rate 100mbit --no-calibrate");
    let file = tmp("in-lab.toml");
    std::fs::write(
        &file,
        "title = \"in a lab\"\ndescription = \"d\"\n[test]\nworkload = \"rr\"\nduration = \"1s\"\nwarmup = \"0.3s\"\n[sweep]\nflows = [1, 2]\n",
    )
    .unwrap();
    let out = tmp("in-lab-out");
    let dir = study_ok_with(&file, &out, &["--lab", &lab.name], Duration::from_secs(120));
    let m = json(&dir.join("manifest.json"));
    let network = m["network"].as_str().unwrap();
    assert!(
        network.starts_with(&format!("lab {} (", lab.name)) && network.contains("10"),
        "{network}"
    );
    for flows in [1, 2] {
        let r = json(&dir.join(format!("points/flows-{flows}.r1.json")));
        assert_eq!(r["lab"]["name"], lab.name.as_str(), "{}", r["lab"]);
        let d0 = &r["lab"]["emulator"]["dirs"][0];
        assert!(u(&d0["packets"]) > 0, "{d0}");
        let p50 = f(&r["summary"]["latency_us"]["p50"]);
        assert!(p50 >= 10_000.0, "rr p50 {p50} µs through 10 ms");
    }
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        report.contains(&format!("in lab {}'s namespaces", lab.name))
            && !report.contains("over loopback, not a network"),
        "{report}"
    );
}

/// Waits until `path` (a directory) holds a file, or fails after 60 s.
fn wait_for_points(out: &std::path::Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let any = std::fs::read_dir(out)
            .into_iter()
            .flatten()
            .flatten()
            .any(|d| {
                std::fs::read_dir(d.path().join("points"))
                    .map(|mut p| p.next().is_some())
                    .unwrap_or(false)
            });
        if any {
            return;
        }
        assert!(Instant::now() < deadline, "no point was stored");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn ctrl_c_ends_a_study_and_takes_its_lab_down() {
    let Some(_s) = measuring() else { return };
    let file = tmp("many-wan.toml");
    std::fs::write(
        &file,
        MINI.replace("[\"5ms\", \"15ms\"]", "[\"2ms\"]").replace(
            "[\"128K\"]",
            "[\"64K\", \"96K\", \"128K\", \"192K\", \"256K\", \"384K\", \"512K\", \"1M\"]",
        ),
    )
    .unwrap();
    let out = tmp("many-wan-out");
    let study = spawn(&[
        "study",
        "run",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "-q",
    ]);
    let name = format!("lr-st-{}-c", study.id());
    wait_for_points(&out);
    // SAFETY: interrupts the study this test started.
    unsafe { libc::kill(study.id() as i32, libc::SIGINT) };
    let o = wait(study, Duration::from_secs(120));
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("--resume"), "{}", stderr(&o));
    assert!(!namespaces().contains(&name), "{}", namespaces());
}

/// net.core.netdev_max_backlog (seed 003's device queue) has no copy in a
/// network namespace: a study's lab sets the host's for the points that
/// set it, and puts the old value back.
#[test]
fn a_host_wide_sysctl_axis_is_set_on_the_host_and_put_back() {
    let Some(_s) = measuring() else { return };
    const KEY: &str = "/proc/sys/net/core/netdev_max_backlog";
    let before = std::fs::read_to_string(KEY).unwrap().trim().to_string();
    let want = if before == "1234" { "1235" } else { "1234" };
    let file = tmp("backlog.toml");
    std::fs::write(
        &file,
        format!(
            r#"
title = "backlog"
description = "the host's receive backlog as an axis"
[lab]
rate = "1gbit"
rtt = "1ms"
[test]
workload = "stream"
duration = "2s"
[sweep]
sysctl."net.core.netdev_max_backlog" = ["{want}"]
flows = [1, 2]
[[plot]]
x = "flows"
y = "throughput_bps"
"#
        ),
    )
    .unwrap();
    let out = tmp("backlog-out");
    let _ = std::fs::remove_dir_all(&out);
    let study = spawn(&[
        "study",
        "run",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let mut seen = false;
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if std::fs::read_to_string(KEY).unwrap().trim() == want {
            seen = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = wait(study, Duration::from_secs(120));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(seen, "the host's backlog was never {want}");
    assert!(
        stderr(&o).contains("is the host's, not a namespace's"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        std::fs::read_to_string(KEY).unwrap().trim(),
        before,
        "put back"
    );
    let dir = first_dir(&out);
    let r = json(&dir.join(format!(
        "points/sysctl.net.core.netdev-max-backlog-{want}_flows-2.r1.json"
    )));
    assert_eq!(r["spec"]["sysctl"]["net.core.netdev_max_backlog"], want);
    assert!(f(&r["summary"]["throughput_bps"]) > 1e8);

    // Killed with SIGKILL (nothing of it runs after), the study leaves the
    // host's value changed; its lab's state file keeps the value before,
    // and the next lab start, sweeping the stale lab, puts it back.
    let _ = std::fs::remove_dir_all(&out);
    let mut study = spawn(&[
        "study",
        "run",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "-q",
    ]);
    let deadline = Instant::now() + Duration::from_secs(120);
    while std::fs::read_to_string(KEY).unwrap().trim() != want {
        assert!(
            Instant::now() < deadline,
            "the host's backlog was never {want}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    study.kill().unwrap();
    study.wait().unwrap();
    assert_eq!(std::fs::read_to_string(KEY).unwrap().trim(), want);
    let (_lab, up) = Lab::up("backlog-sweep", "--rtt 1ms --no-calibrate");
    assert_eq!(
        std::fs::read_to_string(KEY).unwrap().trim(),
        before,
        "the sweep did not put the host's backlog back: {up}"
    );
}

/// A congestion control the kernel lacks (seed 002 lists BIC, HS-TCP and
/// Scalable TCP; this kind of VM kernel has only reno, cubic and bbr) is
/// not run: the study goes on with the rest and its report says which and
/// why, instead of stopping at the first.
#[test]
fn a_congestion_control_the_kernel_lacks_is_skipped_and_named() {
    let Some(_s) = measuring() else { return };
    let file = tmp("cc-missing.toml");
    std::fs::write(
        &file,
        r#"
title = "cc"
description = "a missing congestion control"
[lab]
rate = "1gbit"
rtt = "2ms"
[test]
workload = "stream"
duration = "1s"
[sweep]
"lab.cc" = ["nosuchcc", "reno"]
[[plot]]
x = "lab.cc"
y = "throughput_bps"
"#,
    )
    .unwrap();
    let out = tmp("cc-missing-out");
    let _ = std::fs::remove_dir_all(&out);
    let o = run(
        &[
            "study",
            "run",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        Duration::from_secs(180),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("not available here: this kernel has no nosuchcc"),
        "{}",
        stderr(&o)
    );
    let dir = first_dir(&out);
    let m = json(&dir.join("manifest.json"));
    assert_eq!(m["status"], "complete");
    let status = |id: &str| {
        m["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["point"] == id)
            .map(|r| r["status"].as_str().unwrap().to_string())
            .unwrap()
    };
    assert_eq!(status("lab.cc-nosuchcc"), "unavailable", "{m}");
    assert_eq!(status("lab.cc-reno"), "ok", "{m}");
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        md.contains("1 point could not run here: this kernel has no nosuchcc"),
        "{md}"
    );
    // Not a gap of a stopped study.
    assert!(!md.contains("have no result yet"), "{md}");
}

/// SIGTERM, as `timeout` or a service manager sends it, ends the running
/// point at once (its measured part kept), the study with it, and takes the
/// study's lab down: before, the namespaces were left behind.
#[test]
fn sigterm_ends_a_study_now_and_takes_its_lab_down() {
    let Some(_s) = measuring() else { return };
    let file = tmp("term-wan.toml");
    std::fs::write(
        &file,
        r#"
title = "term"
description = "long points through a lab"
[lab]
rate = "1gbit"
rtt = "2ms"
[test]
workload = "stream"
duration = "60s"
interval = "0.5s"
[sweep]
flows = [1, 2]
[[plot]]
x = "flows"
y = "throughput_bps"
"#,
    )
    .unwrap();
    let out = tmp("term-wan-out");
    let _ = std::fs::remove_dir_all(&out);
    let study = spawn(&[
        "study",
        "run",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "-q",
    ]);
    let name = format!("lr-st-{}-c", study.id());
    let deadline = Instant::now() + Duration::from_secs(60);
    while !namespaces().contains(&name) {
        assert!(Instant::now() < deadline, "the study's lab never came up");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Past the lab's calibration, into the first 60 s point.
    std::thread::sleep(Duration::from_secs(8));
    let sent = Instant::now();
    // SAFETY: terminates the study this test started.
    unsafe { libc::kill(study.id() as i32, libc::SIGTERM) };
    let o = wait(study, Duration::from_secs(60));
    let took = sent.elapsed();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("terminated (SIGTERM)"),
        "{}",
        stderr(&o)
    );
    assert!(took < Duration::from_secs(20), "SIGTERM took {took:?}");
    assert!(!namespaces().contains(&name), "{}", namespaces());
    let dir = first_dir(&out);
    let m = json(&dir.join("manifest.json"));
    assert_eq!(m["status"], "partial");
    // The running point's measured seconds are kept, marked partial.
    let r = json(&dir.join("points/flows-1.r1.json"));
    assert_eq!(r["summary"]["status"], "partial", "{}", r["summary"]);
    assert!(f(&r["summary"]["throughput_bps"]) > 1e8, "{}", r["summary"]);
    assert!(!dir.join("points/flows-2.r1.json").exists());
}

#[test]
fn a_killed_study_leaves_a_stale_lab_that_the_next_start_removes() {
    let Some(_s) = measuring() else { return };
    let file = tmp("slow-wan.toml");
    std::fs::write(
        &file,
        MINI.replace("bytes = \"2M\"", "bytes = \"200M\"")
            .replace("[\"5ms\", \"15ms\"]", "[\"50ms\"]"),
    )
    .unwrap();
    let out = tmp("slow-wan-out");
    let mut study = spawn(&[
        "study",
        "run",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "-q",
    ]);
    let name = format!("st-{}", study.id());
    let deadline = Instant::now() + Duration::from_secs(60);
    while !namespaces().contains(&format!("lr-{name}-c")) {
        assert!(Instant::now() < deadline, "the study's lab never came up");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    study.kill().unwrap();
    study.wait().unwrap();
    assert!(
        namespaces().contains(&format!("lr-{name}-c")),
        "left behind, as expected"
    );
    // Any next lab start sweeps it (its owner is gone).
    let (_lab, _) = Lab::up("sweep", "--rtt 1ms --no-calibrate");
    assert!(
        !namespaces().contains(&format!("lr-{name}-")),
        "{}",
        namespaces()
    );
}

#[test]
fn udp_loss_through_the_emulator_is_counted_as_network_loss() {
    let Some(_s) = measuring() else { return };
    let (lab, _) = Lab::up(
        "udploss",
        "--rtt 2ms --rate 200mbit --loss 1% --no-calibrate",
    );
    // 20,000 datagrams/s for 2 s: at least 20,000 in the window. The
    // receiver's buffer holds a quarter second of them: a slow host that
    // descheduled it for 15 ms dropped 11% at the default buffer.
    let r = run_json(
        &format!("{}-stream.json", lab.name),
        &format!(
            "udp-stream --lab {} --message 200 --rate 20k -d 2 --warmup 0.5 --rcvbuf 4M",
            lab.name
        ),
        Duration::from_secs(60),
    );
    let x = &r["iterations"][0]["udp"];
    // The emulator's loss is network loss; a busy receiver may also drop
    // a few at its socket, counted apart (and by the kernel).
    let lost = u(&x["network_lost"]) as f64;
    let n = u(&x["lost"]) as f64 + u(&x["packets"]) as f64;
    assert!(n >= 20_000.0, "too few datagrams to judge: {x}");
    let p = 0.01;
    let sigma = (n * p * (1.0 - p)).sqrt();
    assert!(
        (lost - n * p).abs() < 4.0 * sigma,
        "{lost} lost of {n}, expected {} ± {}: {x}",
        n * p,
        4.0 * sigma
    );
    assert!(u(&x["receiver_drops"]) as f64 <= 0.005 * n, "{x}");
    assert_eq!(
        u(&x["network_lost"]) + u(&x["receiver_drops"]),
        u(&x["lost"])
    );
    // udp-rr with 5% loss each way: lost requests and responses time out,
    // are counted, and the test ends on time. Each loss stalls its flow for
    // the 50 ms timeout (a cycle of ~7 ms on average), so 16 flows give
    // about 4,500 transactions in 2 s.
    let (lab5, _) = Lab::up("udprr", "--rtt 2ms --loss 5% --no-calibrate");
    let started = Instant::now();
    let r = run_json(
        &format!("{}-rr.json", lab5.name),
        &format!(
            "udp-rr --lab {} --flows 16 --timeout 50ms -d 2 --warmup 0.5",
            lab5.name
        ),
        Duration::from_secs(60),
    );
    assert_eq!(r["summary"]["status"], "ok");
    let it = &r["iterations"][0];
    // The window ends on time: lost requests are timed out, not waited
    // for. The whole command is bounded loosely: its control channel
    // crosses the same 5% loss, and a lost SYN or a run of lost segments
    // costs TCP's backed-off retransmission timeouts (1 s, 3 s, 7 s...),
    // which CI has seen add 20 s to a 3 s run.
    let window = it["duration_s"].as_f64().unwrap();
    assert!((1.9..2.5).contains(&window), "window {window} s");
    assert!(
        started.elapsed() < Duration::from_secs(50),
        "took {:?}",
        started.elapsed()
    );
    let tx = u(&it["transactions"]) as f64;
    let timeouts = u(&it["udp"]["timeouts"]) as f64;
    assert!(tx > 1000.0, "{tx} transactions");
    // A transaction survives both ways with probability 0.95^2.
    let share = timeouts / (tx + timeouts);
    assert!(
        (0.06..0.14).contains(&share),
        "{timeouts} timed out of {} ({share:.3}); expected ~0.0975",
        tx + timeouts
    );
}

#[test]
fn memcache_crosses_the_lab_to_a_memcached_in_the_server_namespace() {
    let Some(_s) = measuring() else { return };
    // The server namespace's agent starts memcached on its data address;
    // the client's requests cross the emulator: each takes a round trip.
    let (lab, _) = Lab::up("kv", "--rtt 10ms --rate 100mbit --no-calibrate");
    let r = run_json(
        &format!("{}-kv.json", lab.name),
        &format!(
            "memcache --lab {} --flows 2 --keys 500 --values 100-200 -d 2 --warmup 0.5",
            lab.name
        ),
        Duration::from_secs(60),
    );
    assert_eq!(r["summary"]["status"], "ok");
    let k = &r["iterations"][0]["kv"];
    assert_eq!(f(&k["hit_ratio"]), 1.0, "{k}");
    let p50 = k["get_latency_us"]["p50"].as_f64().unwrap();
    assert!(
        (9_500.0..15_000.0).contains(&p50),
        "get p50 {p50} µs over a 10 ms RTT"
    );
    // Two connections, one request each in flight: at most 2 per RTT.
    let ops = f(&k["ops_per_s"]);
    assert!((120.0..=205.0).contains(&ops), "{ops} ops/s");
    assert!(k["server"]["delta"]["cmd_get"].as_i64().unwrap() > 0, "{k}");
}

const SETTINGS: &str = r#"
title = "lab settings as axes"
description = "rr through a lab: two MTUs x two tcp_rmem."
overview = "lab.mtu"
[lab]
rtt = "1ms"
[test]
workload = "rr"
duration = "0.5s"
warmup = "0.2s"
[sweep]
lab.mtu = [1500, 9000]
sysctl."net.ipv4.tcp_rmem" = ["4096 131072 6291456", "4096 65536 1048576"]
[[table]]
columns = ["transactions_per_s", "client_us_per_tx"]
"#;

#[test]
fn a_study_sweeps_the_labs_mtu_and_sysctls_per_point() {
    let Some(_s) = measuring() else { return };
    let file = tmp("settings.toml");
    std::fs::write(&file, SETTINGS).unwrap();
    let out = tmp("settings-out");
    let _ = std::fs::remove_dir_all(&out);
    let o = run(
        &[
            "study",
            "run",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        Duration::from_secs(300),
    );
    assert_no_panic(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    // Grouped by lab settings: one reshape from 1500 to 9000, not three.
    assert_eq!(stderr(&o).matches("lab now").count(), 1, "{}", stderr(&o));
    let dir = first_dir(&out);
    for mtu in [1500u64, 9000] {
        for rmem in ["4096 131072 6291456", "4096 65536 1048576"] {
            let p = dir.join(format!(
                "points/lab.mtu-{mtu}_sysctl.net.ipv4.tcp-rmem-{}.r1.json",
                rmem.replace(' ', "-")
            ));
            let r = json(&p);
            assert_eq!(r["summary"]["status"], "ok");
            // The link's MTU is what TCP saw; the sysctl is the server's.
            let mss = u(&r["iterations"][0]["flows"]["client"][0]["tcp_info"]["snd_mss"]);
            assert_eq!(mss, mtu - 52, "{}", p.display());
            assert_eq!(
                r["environment"]["agent"]["sysctls"]["net.ipv4.tcp_rmem"],
                rmem
            );
            assert_eq!(u(&r["lab"]["spec"]["mtu"]), mtu);
        }
    }
    // The host's own value is untouched; the overview compares the MTUs.
    let host = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_rmem").unwrap();
    assert!(!host
        .split_whitespace()
        .eq("4096 65536 1048576".split_whitespace()));
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        md.contains("Overview: each lab.mtu against lab.mtu=1500"),
        "{md}"
    );
    // A sysctl the kernel does not have is named, and nothing runs (one
    // the host has but a namespace lacks is the host's: see
    // a_host_wide_sysctl_axis_is_set_on_the_host_and_put_back).
    let bad = tmp("settings-bad.toml");
    std::fs::write(
        &bad,
        SETTINGS.replace("net.ipv4.tcp_rmem", "net.ipv4.tcp_no_such_knob"),
    )
    .unwrap();
    let o = run(
        &[
            "study",
            "run",
            bad.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "-q",
        ],
        Duration::from_secs(120),
    );
    assert_no_panic(&o);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        stderr(&o).contains("net.ipv4.tcp_no_such_knob"),
        "{}",
        stderr(&o)
    );
    assert!(!namespaces().contains("lr-st-"), "{}", namespaces());
}

/// A network namespace of the test's own with loopback up, deleted when
/// dropped (pass or fail).
struct Netns(String);

impl Netns {
    fn new(tag: &str) -> Netns {
        let name = format!("lrt-{}-{tag}", std::process::id());
        let ok = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .unwrap();
        assert!(ok.success());
        let n = Netns(name);
        n.exec(&["ip", "link", "set", "lo", "up"]);
        n
    }

    fn exec(&self, cmd: &[&str]) -> String {
        let o = Command::new("ip")
            .args(["netns", "exec", &self.0])
            .args(cmd)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    fn rmem(&self) -> String {
        self.exec(&["cat", "/proc/sys/net/ipv4/tcp_rmem"])
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn an_agent_allowed_to_set_sysctls_puts_them_back_even_after_a_crash() {
    let Some(_s) = measuring() else { return };
    // A "real host" of the test's own: a namespace, its agent and its
    // controller inside it, so the host's own sysctls are never touched.
    let ns = Netns::new("sysctl");
    let before = ns.rmem();
    let token = "sysctl-token";
    let tf = token_file("sysctl-tok", token);
    let prefix = ["ip", "netns", "exec", ns.0.as_str()];
    let mut agent = Agent::start_with(&prefix, "127.0.0.1:0", token, &["--allow-sysctl"]);
    let first_addr = agent.addr.clone();
    let study = |dur: &str| {
        format!(
            "title = \"sysctl\"\ndescription = \"rr with two tcp_rmem\"\n[network]\nagent = \"{}\"\ntoken_file = \"{}\"\n[test]\nworkload = \"rr\"\nduration = \"{dur}\"\nwarmup = \"0.1s\"\n[sweep]\nsysctl.\"net.ipv4.tcp_rmem\" = [\"4096 65536 1048576\", \"4096 87380 2097152\"]\n",
            first_addr,
            tf.display()
        )
    };
    let file = tmp("sysctl-study.toml");
    std::fs::write(&file, study("0.3s")).unwrap();
    let out = tmp("sysctl-out");
    let _ = std::fs::remove_dir_all(&out);
    let run_in_ns = |extra: &[&str]| {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &ns.0, bin(), "study", "run"])
            .arg(&file)
            .args(["--out", out.to_str().unwrap(), "-q"])
            .args(extra);
        c
    };
    let o = run_in_ns(&[]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dir = first_dir(&out);
    for v in ["4096 65536 1048576", "4096 87380 2097152"] {
        let r = json(&dir.join(format!(
            "points/sysctl.net.ipv4.tcp-rmem-{}.r1.json",
            v.replace(' ', "-")
        )));
        assert_eq!(r["environment"]["agent"]["sysctls"]["net.ipv4.tcp_rmem"], v);
        assert_eq!(r["spec"]["sysctl"]["net.ipv4.tcp_rmem"], v);
    }
    assert_eq!(ns.rmem(), before, "put back after each test");

    // The agent dies mid-test: the value stays changed until its next start.
    std::fs::write(&file, study("20s")).unwrap();
    let _ = std::fs::remove_dir_all(&out);
    let mut running = run_in_ns(&[]).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while ns.rmem() == before {
        assert!(Instant::now() < deadline, "the sysctl was never set");
        std::thread::sleep(Duration::from_millis(20));
    }
    agent.kill();
    let _ = running.wait();
    assert_ne!(ns.rmem(), before, "a killed agent cannot put it back");
    let mut again = Agent::start_with(&prefix, "127.0.0.1:0", token, &["--allow-sysctl"]);
    assert_eq!(ns.rmem(), before, "the next agent replays the journal");
    // Stopped with SIGTERM mid-test: it puts the value back as it goes.
    std::fs::write(&file, study("20s").replace(&first_addr, &again.addr)).unwrap();
    let _ = std::fs::remove_dir_all(&out);
    let mut running = run_in_ns(&[]).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while ns.rmem() == before {
        assert!(Instant::now() < deadline, "the sysctl was never set");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: a signal to the agent this test started, by its PID.
    unsafe { libc::kill(again.child.id() as i32, libc::SIGTERM) };
    let _ = running.wait();
    let deadline = Instant::now() + Duration::from_secs(5);
    while ns.rmem() != before {
        assert!(Instant::now() < deadline, "SIGTERM left the sysctl changed");
        std::thread::sleep(Duration::from_millis(20));
    }
    // And it ends on its own, cleanly: the signal ends the serving loop,
    // not the process from a watcher thread.
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(s) = again.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the agent kept running after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    drop(again);

    // Without --allow-sysctl, an agent refuses, and says how.
    let plain = Agent::start_with(&prefix, "127.0.0.1:0", token, &[]);
    std::fs::write(&file, study("0.3s").replace(&first_addr, &plain.addr)).unwrap();
    let o = run_in_ns(&[]).output().unwrap();
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(e.contains("--allow-sysctl"), "{e}");
    assert_eq!(ns.rmem(), before);
}

#[test]
fn a_hosts_firewall_rules_reach_the_configuration_summary_and_a_key_point() {
    let Some(_s) = measuring() else { return };
    // A host of the test's own: a namespace with one legacy iptables rule
    // and one nftables rule, and linerate with its local agent inside.
    let ns = Netns::new("fw");
    ns.exec(&[
        "iptables-legacy",
        "-A",
        "INPUT",
        "-p",
        "tcp",
        "-j",
        "ACCEPT",
    ]);
    let have_nft = std::path::Path::new("/usr/sbin/nft").exists();
    if have_nft {
        ns.exec(&["nft", "add", "table", "inet", "lrt"]);
        ns.exec(&[
            "nft",
            "add",
            "chain",
            "inet",
            "lrt",
            "in",
            "{ type filter hook input priority 0 ; }",
        ]);
        ns.exec(&[
            "nft", "add", "rule", "inet", "lrt", "in", "tcp", "dport", "1-65535", "accept",
        ]);
    }
    let file = tmp("fw-study.toml");
    std::fs::write(
        &file,
        "title = \"fw\"\ndescription = \"rr behind rules\"\n[test]\nworkload = \"rr\"\nduration = \"0.3s\"\nwarmup = \"0.1s\"\n",
    )
    .unwrap();
    let out = tmp("fw-out");
    let _ = std::fs::remove_dir_all(&out);
    let o = Command::new("ip")
        .args(["netns", "exec", &ns.0, bin(), "study", "run"])
        .arg(&file)
        .args(["--out", out.to_str().unwrap(), "-q"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dir = first_dir(&out);
    let point = std::fs::read_dir(dir.join("points"))
        .unwrap()
        .flatten()
        .find(|e| e.path().extension().is_some_and(|x| x == "json"))
        .unwrap()
        .path();
    let r = json(&point);
    let fw = &r["environment"]["client"]["firewall"];
    assert_eq!(fw["iptables"]["iptables filter"], 1, "{fw}");
    if have_nft {
        assert_eq!(fw["nft_rules"], 1, "{fw}");
    }
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("firewall rules loaded"), "{md}");
    assert!(md.contains("iptables filter 1"), "{md}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn lab_state_is_private_and_names_no_process_but_the_emulator() {
    let Some(_s) = measuring() else { return };
    use std::os::unix::fs::PermissionsExt;
    let (lab, _) = Lab::up("forge", "--rtt 2ms --no-calibrate");
    for dir in ["/run/linerate", "/run/linerate/labs"] {
        let mode = std::fs::metadata(dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{dir} is {mode:o}");
    }
    // A state file that names another live process (with its real start
    // time) as the emulator: the lab is stale, and down leaves it alone.
    let mut victim = Command::new("sleep").arg("30").spawn().unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", victim.id())).unwrap();
    let ticks: u64 = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap();
    let path = format!("/run/linerate/labs/{}.json", lab.name);
    let mut st = json(&std::path::PathBuf::from(&path));
    let real = u(&st["emulator"]["pid"]);
    st["emulator"]["pid"] = victim.id().into();
    st["emulator"]["start_ticks"] = ticks.into();
    std::fs::write(&path, serde_json::to_string(&st).unwrap()).unwrap();
    assert_eq!(lab.status()[0]["stale"], true);
    // A state file others could have written is not read at all.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    let o = run(&["lab", "status", &lab.name], Duration::from_secs(30));
    assert!(!o.status.success());
    assert!(stderr(&o).contains("not trusted"), "{}", stderr(&o));
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let o = run(&["lab", "down", &lab.name], Duration::from_secs(30));
    assert!(o.status.success(), "{}", stderr(&o));
    let spared = victim.try_wait().unwrap().is_none();
    let _ = victim.kill();
    let _ = victim.wait();
    // The real emulator this test's lab started, which the forged state
    // hid from `lab down`.
    // SAFETY: a signal to the emulator of this test's own lab, by PID.
    unsafe { libc::kill(real as i32, libc::SIGKILL) };
    assert!(spared, "lab down signalled a process it did not start");
}

#[test]
fn two_lab_ups_of_one_name_at_once_leave_one_whole_lab() {
    let Some(_s) = measuring() else { return };
    let lab = Lab {
        name: format!("t{}-race", std::process::id()),
    };
    let up = || {
        Command::new(bin())
            .args(["lab", "up", &lab.name, "--rtt", "2ms", "--no-calibrate"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (up(), up());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert_no_panic(&a);
    assert_no_panic(&b);
    let wins = [&a, &b].iter().filter(|o| o.status.success()).count();
    assert_eq!(wins, 1, "a: {}\nb: {}", stderr(&a), stderr(&b));
    let loser = if a.status.success() { &b } else { &a };
    let why = stderr(loser);
    assert!(
        why.contains("another linerate") || why.contains("already up"),
        "{why}"
    );
    assert_eq!(why.trim().lines().count(), 1, "{why}");
    // The winner's lab is whole: its three namespaces, its emulator, not stale.
    let st = lab.status();
    assert_eq!(st[0]["stale"], false, "{st}");
    for role in ["c", "r", "s"] {
        assert!(
            namespaces().contains(&lab.ns(role)),
            "{} missing",
            lab.ns(role)
        );
    }
    assert!(alive(u(&st[0]["lab"]["emulator"]["pid"])));
}

#[test]
fn a_full_disk_stops_a_study_with_a_clear_error_and_it_resumes_later() {
    let _beside = beside();
    if !root() {
        return;
    }
    // A tiny tmpfs in a mount namespace of the test's own (gone with it):
    // the study fills it, stops, and after the disk grows resumes.
    let study = tmp("full-study.toml");
    std::fs::write(
        &study,
        "title = \"full\"\ndescription = \"points until the disk is full\"\n[test]\nworkload = \"rr\"\nduration = \"0.2s\"\nwarmup = \"0s\"\n[sweep]\nrequest = [1, 2, 3, 4, 5, 6, 7, 8]\n",
    )
    .unwrap();
    let script = format!(
        r#"set -u
d=$(mktemp -d)
mount -t tmpfs -o size=60k tmpfs "$d"
{bin} study run {study} --out "$d" -q; echo "first=$?"
mount -o remount,size=20m "$d"
f=$(ls -d "$d"/*/ | head -1)
{bin} study run {study} --resume "$f" -q; echo "second=$?"
ls "$f/points" | grep -c '\.json$' | sed 's/^/points=/'
umount "$d"; rmdir "$d"
"#,
        bin = bin(),
        study = study.display()
    );
    let o = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .output()
        .unwrap();
    let (out, err) = (stdout(&o), stderr(&o));
    assert_no_panic(&o);
    // Exit 3: partial, what was measured is kept.
    assert!(
        out.contains("first=3"),
        "the full disk must stop the study: {out}\n{err}"
    );
    assert!(err.contains("No space left on device"), "{err}");
    assert!(
        err.contains("--resume"),
        "the error says how to go on: {err}"
    );
    assert!(out.contains("second=0"), "{out}\n{err}");
    assert!(out.contains("points=8"), "{out}\n{err}");
}

#[test]
fn bare_numbers_are_refused_before_a_lab_is_made() {
    let _beside = beside();
    if !root() {
        return;
    }
    for (args, says) in [
        (["--rtt", "10"], "--rtt 10: give a unit: 10ms or 10s"),
        (["--rate", "100"], "a bare number would be 100 bit/s"),
        (
            ["--aqm", "red"],
            "--aqm red: 'red' is not fifo, codel or fq_codel",
        ),
        (
            ["--aqm", "codel"],
            "--aqm manages the queue before the bottleneck: it needs --rate",
        ),
        (["--aqm-target", "5"], "--aqm-target 5: give a unit"),
    ] {
        let t0 = Instant::now();
        let o = run(
            &["lab", "up", "bare", args[0], args[1]],
            Duration::from_secs(30),
        );
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(says), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("(see linerate lab up --help)"),
            "{}",
            stderr(&o)
        );
        assert!(!namespaces().contains("bare"));
    }
}

/// CoDel marks ECN-capable packets instead of dropping them: with
/// `tcp_ecn = 1` at the sender the marks reach the receiver as CE (the
/// sender's TCP counts CE-marked segments delivered), and without ECN the
/// same load is dropped by the control law, never by the 4 MB limit.
#[test]
fn a_codel_lab_marks_ecn_capable_flows_and_drops_the_others() {
    let Some(_turn) = measuring() else { return };
    let (lab, up) = Lab::up(
        "codel",
        "--rate 20mbit --rtt 20ms --queue 4M --aqm codel --no-calibrate",
    );
    assert!(
        up.contains("queue 4 MiB codel (target 5 ms, interval 100 ms, ecn)"),
        "{up}"
    );
    let delivered_ce = || {
        let out = lab.exec("c", &["nstat", "-az", "TcpExtTCPDeliveredCE"]);
        number_after(&out, "TcpExtTCPDeliveredCE")
    };
    let stream = |tag: &str| {
        let r = run_json(
            &format!("{}-{tag}.json", lab.name),
            &format!("stream --flows 2 -d 3 --lab {}", lab.name),
            Duration::from_secs(60),
        );
        r["lab"]["emulator"]["dirs"][0].clone()
    };
    // The sender asks for ECN (the kernel's default 2 only answers it).
    let ecn = |v: &str| {
        lab.exec(
            "c",
            &[
                "sh",
                "-c",
                &format!("echo {v} > /proc/sys/net/ipv4/tcp_ecn"),
            ],
        );
        assert_eq!(
            lab.exec("c", &["cat", "/proc/sys/net/ipv4/tcp_ecn"]).trim(),
            v
        );
    };
    ecn("1");
    let before = delivered_ce();
    let d = stream("ecn");
    assert!(u(&d["marked_ecn"]) > 0, "{d}");
    // CoDel marks the ECN-capable data; a packet that is not ECN-capable
    // (a SYN, a pure ACK) it still drops (RFC 8289): a few at most, seen
    // once in 24 marks on a busy host.
    assert!(
        u(&d["dropped_aqm"]) * 10 < u(&d["marked_ecn"]).max(10),
        "{d}"
    );
    assert_eq!(u(&d["dropped_queue"]), 0, "{d}");
    assert!(
        delivered_ce() > before,
        "CE marks never reached the receiver"
    );
    // CoDel keeps the standing queue near its target: far below the 1.7 s
    // a full 4 MB queue holds at 20 Mbit/s.
    let mean_ms = f(&d["queue_delay_sum_us"]) / f(&d["queue_delay_count"]) / 1e3;
    assert!(mean_ms < 30.0, "mean queue delay {mean_ms} ms: {d}");
    ecn("0");
    let d = stream("drop");
    assert!(u(&d["dropped_aqm"]) > 0, "{d}");
    assert_eq!(u(&d["marked_ecn"]), 0, "{d}");
    let st = lab.status();
    assert_eq!(st[0]["lab"]["spec"]["aqm"]["kind"], "codel", "{st}");
}

/// `run mix PROBE 'stream --flows 2'` through `lab` for 3 s: the result.
fn beside_two_streams(lab: &Lab, probe: &str) -> serde_json::Value {
    run_json_args(
        &format!("{}-mix.json", lab.name),
        &[
            "mix",
            probe,
            "stream --flows 2",
            "--lab",
            &lab.name,
            "-d",
            "3",
            "--warmup",
            "1",
        ],
        Duration::from_secs(90),
    )
}

#[test]
fn an_rr_group_waits_behind_a_stream_group_on_a_slow_link() {
    let Some(_s) = measuring() else { return };
    // 20 Mbit/s with the default deep FIFO: two streams fill its queue,
    // and every rr round trip beside them waits behind it.
    let (lab, _) = Lab::up("mix", "--rtt 10ms --rate 20mbit --no-calibrate");
    let rr = "rr --rate 20 --request 64 --response 64";
    let alone = run_json(
        &format!("{}-rr-alone.json", lab.name),
        &format!("{rr} --lab {} -d 2 --warmup 0.5", lab.name),
        Duration::from_secs(60),
    );
    let r = beside_two_streams(&lab, rr);
    let g1 = &r["groups"][0];
    let g2 = &r["groups"][1];
    assert_eq!(g1["workload"], "rr");
    let idle = f(&alone["summary"]["latency_us"]["p50"]);
    let loaded = f(&g1["summary"]["latency_us"]["p50"]);
    assert!(
        (9_000.0..20_000.0).contains(&idle),
        "rr alone p50 {idle} µs over 10 ms"
    );
    assert!(
        loaded > idle + 10_000.0,
        "rr beside streams p50 {loaded} µs vs {idle} alone"
    );
    // The streams take the link (the rr, one request in flight, loses
    // rate as its round trips grow: that is the point).
    let bps = f(&g2["summary"]["throughput_bps"]);
    assert!(
        (14e6..20.5e6).contains(&bps),
        "streams {bps} b/s on 20 Mbit/s"
    );
    assert!(
        f(&g1["summary"]["transactions_per_s"]) > 2.0,
        "{}",
        g1["summary"]
    );
    assert!((f(&g1["summary"]["load_beside_bps"]) - bps).abs() < 1.0);
}

/// udp-rr's one-way delays in `r`'s summary, ms: (up p50, down p50,
/// the offset's uncertainty).
fn one_way_ms(r: &serde_json::Value) -> (f64, f64, f64) {
    let x = &r["summary"]["udp"];
    assert!(x["owd_up_us"].is_object(), "no one-way delays: {x}");
    (
        f(&x["owd_up_us"]["p50"]) / 1e3,
        f(&x["owd_down_us"]["p50"]) / 1e3,
        f(&x["owd_offset_uncertainty_us"]) / 1e3,
    )
}

/// Within 1.5 ms of the link's delay each way.
fn assert_one_way(r: &serde_json::Value, up: f64, down: f64) {
    let (u, d, _) = one_way_ms(r);
    assert!(
        (u - up).abs() < 1.5 && (d - down).abs() < 1.5,
        "one-way up {u:.3} ms down {d:.3} ms, the link has {up}/{down}: {}",
        r["summary"]["udp"]
    );
    assert_eq!(u64_of(&r["summary"]["udp"]["owd_clamped"]), 0);
}

fn u64_of(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// A modest udp-rr: 4 flows of 4 requests in flight, 2 s.
const OWD_RR: &str = "udp-rr --flows 4 --outstanding 4 -d 2 --warmup 0.5";

#[test]
fn one_way_delays_read_each_direction_of_a_lab_link() {
    let Some(_s) = measuring() else { return };
    // 40 ms round trip split evenly, then split 10/30: the second is the
    // proof that each direction is measured, not half the round trip.
    for (delay, up, down) in [("20ms/20ms", 20.0, 20.0), ("10ms/30ms", 10.0, 30.0)] {
        let (lab, _) = Lab::up("owd", &format!("--delay {delay} --no-calibrate"));
        let r = run_json(
            &format!("{}-{up}.json", lab.name),
            &format!("{OWD_RR} --lab {}", lab.name),
            Duration::from_secs(60),
        );
        assert_one_way(&r, up, down);
        // The lab's agent runs on this kernel: its clock offset is exact,
        // though its probes cross the 40 ms link.
        assert_eq!(one_way_ms(&r).2, 0.0);
        let lat = f(&r["summary"]["latency_us"]["p50"]) / 1e3;
        assert!((lat - 40.0).abs() < 1.5, "round trip {lat} ms");
    }
}

/// Runs `linerate run ARGS -q --json FILE` through `prefix` (a namespace,
/// a time namespace) and returns the result it wrote.
fn run_json_via(prefix: &[&str], name: &str, args: &str) -> serde_json::Value {
    let out = tmp(name);
    let child = Command::new(prefix[0])
        .args(&prefix[1..])
        .arg(bin())
        .arg("run")
        .args(args.split_whitespace())
        .args(["-q", "--json", out.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let o = wait(child, Duration::from_secs(60));
    assert_no_panic(&o);
    assert!(o.status.success(), "{args}: {}", stderr(&o));
    json(&out)
}

#[test]
fn one_way_delays_hold_with_clocks_shifted_by_time_namespaces() {
    let Some(_s) = measuring() else { return };
    let (lab, _) = Lab::up("owdtime", "--rtt 40ms --no-calibrate");
    let st = lab.status();
    let server = st[0]["lab"]["server_addr"].as_str().unwrap().to_string();
    const TOKEN: &str = "one-way-token";
    let tok = token_file("owd-time-token", TOKEN);
    let (c_ns, s_ns) = (lab.ns("c"), lab.ns("s"));
    let shifted = |ns: &str, secs: &'static str| -> Vec<String> {
        [
            "ip",
            "netns",
            "exec",
            ns,
            "unshare",
            "--time",
            "--monotonic",
            secs,
        ]
        .into_iter()
        .chain(["--boottime", secs, "--kill-child"])
        .map(String::from)
        .collect()
    };
    // The controller's clock 1,000 s ahead of the kernel's, the agents'
    // 5,000 s. The second agent also hides its kernel (another boot id in
    // a mount namespace of its own), as an agent on another host would:
    // its offset must come from probes across the 40 ms link.
    let boot_id = tmp("owd-other-boot-id");
    std::fs::write(&boot_id, "00000000-0000-4000-8000-000000000001\n").unwrap();
    let mut masked = shifted(&s_ns, "5000");
    masked.splice(
        5..5,
        ["--mount", "--propagation", "private"].map(String::from),
    );
    masked.extend([
        "sh".into(),
        "-c".into(),
        format!(
            "mount --bind {} /proc/sys/kernel/random/boot_id && exec \"$0\" \"$@\"",
            boot_id.display()
        ),
    ]);
    let controller = shifted(&c_ns, "1000");
    let controller: Vec<&str> = controller.iter().map(String::as_str).collect();
    for (prefix, exact) in [(shifted(&s_ns, "5000"), true), (masked, false)] {
        let prefix: Vec<&str> = prefix.iter().map(String::as_str).collect();
        let agent = Agent::start_with(&prefix, &format!("{server}:0"), TOKEN, &["--quiet"]);
        let r = run_json_via(
            &controller,
            &format!("{}-{exact}.json", lab.name),
            &format!(
                "{OWD_RR} --agent {} --token-file {}",
                agent.addr,
                tok.display()
            ),
        );
        drop(agent);
        assert_one_way(&r, 20.0, 20.0);
        let (_, _, uncertainty) = one_way_ms(&r);
        if exact {
            assert_eq!(uncertainty, 0.0, "one kernel: the offset is exact");
        } else {
            // Half the fastest probe's round trip over the 40 ms link.
            assert!(
                (19.5..25.0).contains(&uncertainty),
                "probed offset ± {uncertainty} ms"
            );
        }
    }
}

#[test]
fn one_way_delays_show_which_direction_queues_beside_a_load() {
    let Some(_s) = measuring() else { return };
    // 20 Mbit/s with a deep FIFO: two uploading streams fill the queue
    // towards the server; the way back carries only their ACKs.
    let (lab, _) = Lab::up("owdq", "--rtt 10ms --rate 20mbit --no-calibrate");
    let r = beside_two_streams(&lab, "udp-rr");
    let g = &r["groups"][0];
    assert_eq!(g["workload"], "udp-rr");
    let (up, down, _) = one_way_ms(g);
    assert!(
        up > down + 10.0,
        "the upload's queue is on the way up: up {up:.2} ms, down {down:.2} ms"
    );
    assert!(
        (down - 5.0).abs() < 1.5,
        "down {down:.2} ms over a 5 ms link"
    );
}

/// Issue 25: 1, 2, 4 and 8 TCP flows through a 1 Gbit/s link carry 0.97
/// to 1.003 of the framing limit, and the link never passes more than its
/// rate over any second, as the server's kernel timed the packets. With a 100 ms queue (the former default, where
/// the first overflow comes just before a 2 s warm-up ends) 4 flows used
/// to count 955-962 Mbit/s: the receivers' reads included the data they
/// had held out of order behind lost segments since before the window.
#[test]
fn a_hosts_nic_rate_bounds_what_it_sends_before_the_router_queues_it() {
    let Some(_s) = measuring() else { return };
    // A 1 Gbit/s link; the client's NIC at 200 Mbit/s, the server's at
    // the link's own rate.
    let (lab, up) = Lab::up(
        "nic",
        "--rtt 2ms --rate 1gbit --nic-rate 200mbit/link --no-calibrate",
    );
    assert!(up.contains("hosts' NICs 200.00 Mbit/s/1.00 Gbit/s"), "{up}");
    assert_eq!(
        lab.status()[0]["lab"]["spec"]["nic_bps"],
        serde_json::json!([2e8, 1e9])
    );
    // The NIC is a token bucket on the host's end, at the wire rate less
    // the framing it does not count (1514 of 1538 bytes per frame).
    let tc = lab.exec("c", &["tc", "qdisc", "show", "dev", "lr0"]);
    assert!(tc.contains("tbf") && tc.contains("rate 196"), "{tc}");
    let tc = lab.exec("s", &["tc", "qdisc", "show", "dev", "lr0"]);
    assert!(tc.contains("tbf") && tc.contains("rate 984"), "{tc}");
    // TCP payload per wire byte at MTU 1500: 1448 of 1538.
    let goodput = |wire: f64| wire * 1448.0 / 1538.0;
    let stream = |dir: &str| {
        run_json(
            &format!("{}-{dir}.json", lab.name),
            &format!(
                "stream --lab {} --direction {dir} -d 2 --warmup 1",
                lab.name
            ),
            Duration::from_secs(90),
        )
    };
    // The client sends at its NIC's rate, so the router's queue for the
    // 1 Gbit/s link never overflows: about the bucket's burst waits there
    // (83-87 KiB in four runs here; more on a host that runs the emulator
    // late, whose lost time the queue counts). Without the NIC the flow
    // fills the 1 MiB queue and drops.
    let r = stream("tx");
    let got = f(&r["iterations"][0]["throughput_bps"]) / goodput(2e8);
    assert!((0.9..1.01).contains(&got), "{got:.4} of the NIC's goodput");
    let dir = &r["lab"]["emulator"]["dirs"][0];
    eprintln!("nic: tx {got:.4} of the NIC's goodput, client->server {dir}");
    assert_eq!(u(&dir["dropped_queue"]), 0, "{dir}");
    // The server's NIC runs at the link's rate: the link still bounds it.
    let r = stream("rx");
    let got = f(&r["iterations"][0]["throughput_bps"]) / goodput(1e9);
    assert!(
        (0.85..1.004).contains(&got),
        "{got:.4} of the link's goodput"
    );
}

#[test]
fn stream_goodput_holds_the_framing_limit_and_the_link_its_rate() {
    let Some(_s) = measuring() else { return };
    let (lab, _) = Lab::up(
        "rate",
        "--rtt 1ms --rate 1gbit --queue 100ms --no-calibrate",
    );
    // TCP payload per frame at MTU 1500 (IPv4 20 + TCP 20 + timestamps 12
    // = 52 B of headers) over the frame on the wire (+38 B of Ethernet
    // framing: preamble 8, header 14, FCS 4, gap 12): 941.48 Mbit/s.
    let (mtu, hdr, framing) = (1500.0, 52.0, 38.0);
    let rate = 1e9;
    let limit = rate * (mtu - hdr) / (mtu + framing);
    let tap = linerate::lab::tap::Tap::start(&lab.ns("s"), "lr0", 1500).expect("tap");
    let mut seen = Vec::new();
    for flows in [1, 2, 4, 8] {
        let r = run_json(
            &format!("{}-{flows}.json", lab.name),
            &format!("stream --lab {} --flows {flows} -d 3 --warmup 2", lab.name),
            Duration::from_secs(120),
        );
        let it = &r["iterations"][0];
        // The emulator shares the host's CPUs: no receiver polls in a lab.
        assert_eq!(
            u(&r["spec"]["rx_poll_us"]),
            0,
            "--rx-poll auto is off in a lab"
        );
        assert!(it["counters"]["agent"].get("rx_polls").is_none());
        let ratio = f(&it["throughput_bps"]) / limit;
        let read = u(&it["counters"]["agent"]["bytes_rx"]) as f64 * 8.0 / f(&it["duration_s"]);
        seen.push(format!(
            "{flows} flows: {:.4} of the limit (the receivers read {:.4})",
            ratio,
            read / limit
        ));
        eprintln!("rate: {}", seen.last().unwrap());
        // Never above the limit. At least 0.97 of it unless the result
        // says the host ran the emulator late (a slow host: the link then
        // loses the time, as one behind a slow router would).
        let late = r["lab"]["warnings"]
            .to_string()
            .contains("the emulator ran late");
        assert!(
            ratio <= 1.003 && (late || ratio >= 0.97),
            "{flows} flows: {ratio:.4} of {limit} bit/s; so far {seen:?}"
        );
        // Every second of it too (an interval's edges move by an ACK's
        // arrival: a little more room).
        for iv in it["intervals"].as_array().unwrap() {
            let x = f(&iv["throughput_bps"]) / limit;
            assert!(
                x <= 1.005,
                "{flows} flows, interval {iv}: {x:.4} of the limit"
            );
        }
    }
    // What the link delivered, timed by the server's kernel as each packet
    // arrived: no second carries more than the rate (the emulator's late
    // wake-ups are caught up at the rate, not released at once).
    let seen = tap.stop().expect("tap");
    let worst = seen.peak_bps(1_000_000_000).expect("seconds of packets") / rate;
    let d = &lab.status()[0]["emulator_stats"]["dirs"][0];
    eprintln!(
        "rate: the link's busiest second {worst:.4} of the rate ({} packets, {} missed); \
         emulator: {} releases over 1 ms late, {} µs lost",
        seen.arrivals.len(),
        seen.missed,
        d["late"],
        d["lost_us"]
    );
    assert_eq!(seen.missed, 0, "the tap missed packets");
    assert!(
        worst <= RATE_BOUND,
        "a second passed {worst:.4} of the rate"
    );
    assert!(worst > 0.98, "the link was never busy: {worst:.4}");
}

/// The most a lab link may carry over any second, of its rate: its
/// schedule is exact, and a release may come up to 250 µs early (the
/// release window) and a stall's first 1 ms be caught up at once, with one
/// GSO packet (64 KiB) beside them. The tap stamps each packet in the
/// server's receive softirq, which on a busy host runs late too (in
/// ksoftirqd) and bunches up to another millisecond of packets at a
/// window's edge: 0.1% more. (CI saw 1.0030 against the 1.003 this was,
/// with 380 releases over 1 ms late; the overshoot it guards against was
/// 111%.)
const RATE_BOUND: f64 = 1.004;

/// Issue 37: on a host that loses its CPUs now and then the emulator runs
/// late; it must then carry less, never more than the link's rate (it once
/// released a stall's backlog at once: 1.0046 of the rate over a second,
/// and calibration on a slow host read 1.05 Gbit/s through 1 Gbit/s), say
/// how late it ran in calibration and in the result, and warn.
#[test]
fn a_starved_emulator_never_passes_more_than_its_rate() {
    let Some(_s) = measuring() else { return };
    // The host loses both CPUs 5 ms in every 20, together: the emulator,
    // the flows' ends and the tap all stop.
    let stalls = Stalls::start(
        Duration::from_millis(5),
        Duration::from_millis(20),
        Duration::from_secs(90),
    );
    let (lab, out) = Lab::up("starve", "--rtt 10ms --rate 1gbit");
    let rate = 1e9;
    let cal = &lab.status()[0]["lab"]["calibration"];
    let peak = f(&cal["link_peak_bps"]) / f(&cal["link_rate_bps"]);
    assert!(
        peak <= RATE_BOUND,
        "calibration: the link carried {peak:.4} of its rate: {out}"
    );
    assert!(u(&cal["lateness"]["late"]) > 0, "{cal}");
    assert!(out.contains("releases over 1 ms late"), "{out}");
    let tap = linerate::lab::tap::Tap::start(&lab.ns("s"), "lr0", 1500).expect("tap");
    let r = run_json(
        &format!("{}.json", lab.name),
        &format!("stream --lab {} --flows 2 -d 6 --warmup 1", lab.name),
        Duration::from_secs(120),
    );
    let seen = tap.stop().expect("tap");
    let stalled = stalls.stop();
    let peak = seen
        .peak_bps(1_000_000_000)
        .expect("over a second of packets")
        / rate;
    let emu = &r["lab"]["emulator"]["dirs"][0];
    eprintln!(
        "starve: {stalled} stalls; the link's busiest second {peak:.4} of its rate ({} packets, {} missed); emulator {emu}",
        seen.arrivals.len(),
        seen.missed
    );
    assert_eq!(seen.missed, 0, "the tap missed packets");
    assert!(peak <= RATE_BOUND, "a second carried {peak:.4} of the rate");
    assert!(peak > 0.5, "the link was hardly used: {peak:.4}");
    // The result says how late the emulator ran and that it shaped it.
    assert!(
        u(&emu["lost_us"]) > 100_000 && u(&emu["paced"]) > 0,
        "{emu}"
    );
    let warned = r["lab"]["warnings"].to_string();
    assert!(warned.contains("the emulator ran late"), "{warned}");
}
