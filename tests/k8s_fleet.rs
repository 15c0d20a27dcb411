//! `linerate k8s`: agents started as pods through the Kubernetes API (kube-rs)
//! on the test cluster of tests/k8s/cluster.sh, the matrix (same node, other
//! node, Service, host network) run as tests and as a study's axis, and the
//! cluster left as it was, also when `up` fails. The bad-input cases that
//! need no cluster (no kubeconfig, no API server) run everywhere; the rest
//! only where the cluster is up (`LINERATE_K8S=1 scripts/test.sh`).

mod common;

use common::k8s::*;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The admin kubeconfig `cluster.sh up` wrote.
fn admin() -> String {
    let state = std::env::var("K8S_STATE").unwrap_or_else(|_| "/run/linerate-k8s".into());
    format!("{state}/admin.kubeconfig")
}

/// `linerate k8s SUB` on the test cluster with `image` (never pulled),
/// its hosts file `out`, then `more`.
fn k8s(sub: &str, image: &str, out: &Path, more: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = ["k8s", sub, "--kubeconfig", &admin(), "--image", image]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(["--pull", "Never", "--out"].map(String::from));
    args.push(out.display().to_string());
    args.extend(more.iter().map(|s| s.to_string()));
    args
}

/// `linerate k8s up` with the test image, into `out`.
fn up(out: &Path, more: &[&str]) -> std::process::Output {
    run(
        &k8s("up", "linerate/agent:test", out, more),
        Duration::from_secs(180),
    )
}

/// One test on the fleet: the result, checked ok, with the placement of
/// its flows.
fn on_fleet(fleet: &Path, kind: &str, client: &str, server: &str) -> serde_json::Value {
    let r = run_json_args(
        &format!("fleet-{kind}-{server}.json"),
        &[
            kind,
            "--hosts",
            fleet.to_str().unwrap(),
            "--clients",
            client,
            "--servers",
            server,
            "-F",
            "2",
            "-d",
            "1",
            "--warmup",
            "0.5",
        ],
        Duration::from_secs(90),
    );
    assert_eq!(
        r["summary"]["status"], "ok",
        "{kind} {client}->{server}: {}",
        r["summary"]
    );
    let key = if kind == "stream" {
        "throughput_bps"
    } else {
        "transactions_per_s"
    };
    assert!(
        f(&r["summary"][key]) > 0.0,
        "{kind} {client}->{server}: {}",
        r["summary"]
    );
    r
}

/// Zone labels on the test cluster's nodes (topology.kubernetes.io/zone),
/// removed however the test ends.
struct Zones(usize);

impl Zones {
    fn set(zones: &[&str]) -> Zones {
        for (i, z) in zones.iter().enumerate() {
            let node = format!("lr-k8s-{}", i + 1);
            kubectl(&[
                "label",
                "node",
                &node,
                &format!("topology.kubernetes.io/zone={z}"),
                "--overwrite",
            ]);
        }
        Zones(zones.len())
    }
}

impl Drop for Zones {
    fn drop(&mut self) {
        for i in 1..=self.0 {
            let node = format!("lr-k8s-{i}");
            let _ = cluster(&[
                "kubectl",
                "label",
                "node",
                &node,
                "topology.kubernetes.io/zone-",
            ]);
        }
    }
}

/// A fleet deleted however the test ends (a no-op once `k8s down` ran:
/// it removes the file).
struct Down(PathBuf);

impl Drop for Down {
    fn drop(&mut self) {
        if self.0.exists() {
            let _ = run(
                &["k8s", "down", self.0.to_str().unwrap()],
                Duration::from_secs(150),
            );
        }
    }
}

fn placement(r: &serde_json::Value) -> String {
    r["flow_map"][0]["placement"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[test]
fn k8s_up_runs_the_matrix_and_down_leaves_nothing() {
    let Some(_turn) = cluster_turn() else {
        return;
    };
    let before = objects();
    // The nodes in two zones, as a cloud labels them, for this test.
    let _zones = Zones::set(&["a", "b"]);
    let fleet = tmp("fleet.toml");
    let _gone = Down(fleet.clone());
    let o = up(&fleet, &["--timeout", "90s"]);
    assert!(o.status.success(), "k8s up: {}{}", stdout(&o), stderr(&o));
    let text = std::fs::read_to_string(&fleet).unwrap();
    for name in [
        "n1-a", "n1-b", "n1-b-svc", "n1-host", "n2-a", "n2-b", "n2-b-svc", "n2-host",
    ] {
        assert!(
            text.contains(&format!("name = \"{name}\"")),
            "{name}: {text}"
        );
    }
    assert!(stdout(&o).contains("answers"), "{}", stdout(&o));
    let token = PathBuf::from(format!("{}.token", fleet.display()));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&token).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "the token file is the user's alone");
    let ns = text
        .lines()
        .find_map(|l| l.strip_prefix("namespace = \""))
        .map(|l| l.trim_end_matches('"').to_string())
        .expect("[kubernetes] namespace");
    let st = run(
        &["k8s", "status", fleet.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert!(
        st.status.success(),
        "k8s status: {}{}",
        stdout(&st),
        stderr(&st)
    );

    // The matrix from pod n1-a: a pod on its node, one on the other node,
    // that pod through its Service, the other node's own network.
    let cases = [
        ("n1-b", "same node, pod -> pod"),
        ("n2-b", "other node, other zone, pod -> pod"),
        ("n2-b-svc", "other node, other zone, pod -> service"),
        ("n2-host", "other node, other zone, pod -> host"),
    ];
    for (server, want) in cases {
        let r = on_fleet(&fleet, "stream", "n1-a", server);
        assert!(
            placement(&r).starts_with(want),
            "{server}: {}",
            placement(&r)
        );
        let site = &r["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["name"] == server)
            .unwrap()["site"];
        assert!(
            site["node"]
                .as_str()
                .is_some_and(|n| n.starts_with("lr-k8s-")),
            "{site}"
        );
    }
    // Host network to host network, and rr and crr through a Service (a
    // connection per transaction, each through kube-proxy's NAT).
    let r = on_fleet(&fleet, "stream", "n1-host", "n2-host");
    assert!(
        placement(&r).starts_with("other node, other zone, host -> host"),
        "{}",
        placement(&r)
    );
    for kind in ["rr", "crr"] {
        let r = on_fleet(&fleet, kind, "n1-a", "n2-b-svc");
        assert!(
            placement(&r).contains("-> service 198.19.100."),
            "{}",
            placement(&r)
        );
    }
    study_on_fleet(&fleet);

    let o = run(
        &["k8s", "down", fleet.to_str().unwrap()],
        Duration::from_secs(150),
    );
    assert!(o.status.success(), "k8s down: {}", stderr(&o));
    assert!(stdout(&o).contains(&ns), "{}", stdout(&o));
    assert!(
        !fleet.exists() && !token.exists(),
        "down removes the hosts file and its token"
    );
    assert_same_objects(&before);
}

/// A short study whose axis is the server host: the report's hosts table
/// names each point's node and path.
fn study_on_fleet(fleet: &Path) {
    let file = tmp("k8s-matrix.toml");
    std::fs::write(
        &file,
        format!(
            r#"title = "Pod to pod, Service and host network"
description = "One stream from a pod to a pod on the other node, to the same pod through its Service, and to the other node's own network."
[network]
hosts = "{}"
clients = "n1-a"
[test]
workload = "stream"
flows = 1
duration = "1s"
warmup = "0.5s"
[sweep]
server_hosts = ["n2-b", "n2-b-svc", "n2-host"]
"#,
            fleet.display()
        ),
    )
    .unwrap();
    let out = tmp("k8s-study");
    let dir = study_ok(&file, &out, Duration::from_secs(180));
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    for want in [
        "node lr-k8s-2",
        "path service",
        "network host",
        "Where each host ran",
        "| n2-b-svc | lr-k8s-2 | b | pod | service |",
    ] {
        assert!(md.contains(want), "report.md lacks {want}:\n{md}");
    }
}

#[test]
fn an_image_the_nodes_cannot_run_fails_up_in_bounded_time_and_leaves_nothing() {
    let Some(_turn) = cluster_turn() else {
        return;
    };
    let before = objects();
    let fleet = tmp("never.toml");
    let began = Instant::now();
    let o = run(
        &k8s(
            "up",
            "linerate/absent:0",
            &fleet,
            &["--timeout", "15s", "--node-count", "1"],
        ),
        Duration::from_secs(120),
    );
    assert_no_panic(&o);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    let last = e.lines().last().unwrap_or("");
    assert!(
        last.contains("not ready after 15 s") && last.contains("ErrImageNeverPull"),
        "{e}"
    );
    assert!(
        began.elapsed() < Duration::from_secs(90),
        "{:?}",
        began.elapsed()
    );
    assert!(!fleet.exists(), "no hosts file for a fleet that never was");
    assert_same_objects(&before);
}

#[test]
fn a_user_without_rights_is_told_so_and_nothing_is_made() {
    let Some(_turn) = cluster_turn() else {
        return;
    };
    let before = objects();
    let kc = nobody_kubeconfig();
    let o = run(
        &[
            "k8s",
            "up",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--out",
            tmp("nobody.toml").to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert_no_panic(&o);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the cluster refused to list the nodes"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("forbidden"), "{}", stderr(&o));
    assert_same_objects(&before);
}

/// A kubeconfig for a user the cluster's CA signed and no role binds.
fn nobody_kubeconfig() -> PathBuf {
    let state = std::env::var("K8S_STATE").unwrap_or_else(|_| "/run/linerate-k8s".into());
    let pki = format!("{state}/pki");
    let key = tmp("nobody.key");
    let csr = tmp("nobody.csr");
    let crt = tmp("nobody.crt");
    let sh = |args: &[&str]| {
        let o = Command::new("openssl").args(args).output().unwrap();
        assert!(o.status.success(), "openssl {args:?}: {}", stderr(&o));
    };
    sh(&["genrsa", "-out", key.to_str().unwrap(), "2048"]);
    sh(&[
        "req",
        "-new",
        "-key",
        key.to_str().unwrap(),
        "-subj",
        "/CN=nobody",
        "-out",
        csr.to_str().unwrap(),
    ]);
    // An X.509 v3 certificate (rustls takes no v1): one extension makes it so.
    let ext = tmp("nobody.ext");
    std::fs::write(&ext, "extendedKeyUsage = clientAuth\n").unwrap();
    sh(&[
        "x509",
        "-req",
        "-extfile",
        ext.to_str().unwrap(),
        "-in",
        csr.to_str().unwrap(),
        "-CA",
        &format!("{pki}/ca.crt"),
        "-CAkey",
        &format!("{pki}/ca.key"),
        "-CAcreateserial",
        "-CAserial",
        tmp("nobody.srl").to_str().unwrap(),
        "-days",
        "1",
        "-out",
        crt.to_str().unwrap(),
    ]);
    let admin = std::fs::read_to_string(admin()).unwrap();
    let server = admin
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .expect("the admin kubeconfig's server")
        .to_string();
    let kc = tmp("nobody.kubeconfig");
    std::fs::write(
        &kc,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {server}\n    certificate-authority: {pki}/ca.crt\nusers:\n- name: nobody\n  user:\n    client-certificate: {}\n    client-key: {}\ncontexts:\n- name: nobody\n  context: {{cluster: test, user: nobody}}\ncurrent-context: nobody\n",
            crt.display(),
            key.display()
        ),
    )
    .unwrap();
    kc
}

/// No cluster needed: no kubeconfig anywhere, one that is not there, and
/// an API server that does not answer each end in one line, exit 1.
#[test]
fn no_kubeconfig_or_no_api_server_is_one_line_and_exit_1() {
    let home = tmp("k8s-empty-home");
    std::fs::create_dir_all(&home).unwrap();
    let o = Command::new(bin())
        .args(["k8s", "up"])
        .env("HOME", &home)
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        stderr(&o).trim(),
        "linerate: no kubeconfig: KUBECONFIG is not set, ~/.kube/config does not exist, and this is not a pod (pass --kubeconfig FILE, set KUBECONFIG, or run in a pod with a service account)"
    );
    let o = run(
        &["k8s", "up", "--kubeconfig", "/nonexistent/kubeconfig"],
        Duration::from_secs(30),
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no kubeconfig: /nonexistent/kubeconfig"),
        "{}",
        stderr(&o)
    );
    // A listener that never answers HTTP: bounded by the client's timeouts.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let kc = tmp("dead.kubeconfig");
    std::fs::write(
        &kc,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: d\n  cluster: {{server: \"http://{}\"}}\nusers:\n- name: u\n  user: {{token: x}}\ncontexts:\n- name: d\n  context: {{cluster: d, user: u}}\ncurrent-context: d\n",
            dead.local_addr().unwrap()
        ),
    )
    .unwrap();
    let began = Instant::now();
    let o = run(
        &["k8s", "up", "--kubeconfig", kc.to_str().unwrap()],
        Duration::from_secs(90),
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cannot reach the Kubernetes API server at http://127.0.0.1:"),
        "{}",
        stderr(&o)
    );
    assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
    assert!(
        began.elapsed() < Duration::from_secs(60),
        "{:?}",
        began.elapsed()
    );
    drop(dead);
}

/// Ctrl-C while `up` waits for its agents: one line, exit 1, the
/// namespace deleted.
#[test]
fn ctrl_c_while_up_waits_deletes_what_it_made() {
    let Some(_turn) = cluster_turn() else {
        return;
    };
    let before = objects();
    let out = tmp("ctrl-c.toml");
    let child = spawn_group(&k8s(
        "up",
        "linerate/absent:0",
        &out,
        &["--timeout", "120s", "--node-count", "1"],
    ));
    std::thread::sleep(Duration::from_secs(4));
    interrupt_group(&child);
    let o = wait(child, Duration::from_secs(90));
    assert_no_panic(&o);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.trim()
            .lines()
            .last()
            .unwrap_or("")
            .contains("interrupted (Ctrl-C): stopped before the agents were ready"),
        "{e}"
    );
    assert_same_objects(&before);
}

/// `k8s run`: up, the command on the fleet, down; a Ctrl-C in the middle
/// of the command keeps what it measured (exit 3) and still deletes.
#[test]
fn k8s_run_keeps_a_stopped_commands_results_and_deletes_the_fleet() {
    let Some(_turn) = cluster_turn() else {
        return;
    };
    let before = objects();
    let out = tmp("run-fleet.toml");
    let json = tmp("run-stopped.json");
    let child = spawn_group(&k8s(
        "run",
        "linerate/agent:test",
        &out,
        &[
            "--node-count",
            "1",
            "--no-host-network",
            "--",
            "run",
            "stream",
            "--clients",
            "n1-a",
            "--servers",
            "n1-b",
            "-d",
            "30",
            "--warmup",
            "0",
            "-q",
            "--json",
            json.to_str().unwrap(),
        ],
    ));
    // Up takes a few seconds here; then the stream runs.
    let began = Instant::now();
    while !out.exists() && began.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(5));
    interrupt_group(&child);
    let o = wait(child, Duration::from_secs(150));
    assert_no_panic(&o);
    assert_eq!(o.status.code(), Some(3), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stderr(&o).contains("the fleet is deleted"),
        "{}",
        stderr(&o)
    );
    let r = json_of(&json);
    assert_eq!(r["summary"]["status"], "partial", "{}", r["summary"]);
    assert!(f(&r["summary"]["throughput_bps"]) > 0.0, "{}", r["summary"]);
    assert!(!out.exists(), "down removed the hosts file");
    assert_same_objects(&before);
}

fn json_of(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Node 2 cut off from the others mid-test (its link on the fabric's
/// bridge down): the test ends partial, naming the host, with what was
/// measured; once the node is back, `down` deletes everything.
#[test]
fn a_node_lost_mid_test_ends_it_partial_and_down_cleans_up_after() {
    let Some(_turn) = cluster_turn() else {
        return;
    };
    let before = objects();
    let fleet = tmp("lost.toml");
    let _gone = Down(fleet.clone());
    let o = up(&fleet, &["--no-host-network"]);
    assert!(o.status.success(), "k8s up: {}", stderr(&o));
    let json = tmp("lost.json");
    let child = spawn(&[
        "run",
        "stream",
        "--hosts",
        fleet.to_str().unwrap(),
        "--clients",
        "n1-a",
        "--servers",
        "n2-b",
        "-d",
        "6",
        "--warmup",
        "0",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]);
    std::thread::sleep(Duration::from_secs(3));
    let link = Cut("n2");
    assert!(link.set("down"), "cannot cut node 2's link");
    let o = wait(child, Duration::from_secs(120));
    assert_no_panic(&o);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("host n2-b"), "{}", stderr(&o));
    let r = json_of(&json);
    assert_eq!(r["summary"]["status"], "partial", "{}", r["summary"]);
    assert!(f(&r["summary"]["throughput_bps"]) > 0.0, "{}", r["summary"]);
    drop(link);
    let o = run(
        &["k8s", "down", fleet.to_str().unwrap()],
        Duration::from_secs(150),
    );
    assert!(o.status.success(), "k8s down: {}", stderr(&o));
    assert_same_objects(&before);
}

/// A node's link on the test cluster's fabric, down until dropped.
struct Cut(&'static str);

impl Cut {
    fn set(&self, state: &str) -> bool {
        Command::new("ip")
            .args(["-n", "lr-k8s-net", "link", "set", self.0, state])
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for Cut {
    fn drop(&mut self) {
        self.set("up");
    }
}

/// `k8s run --port-forward` from a host that cannot reach the pod network
/// (this host's routes to the pods and Services removed while it runs):
/// the control channel goes through the API server, the stream between
/// the pods, and the fleet is deleted after.
#[test]
fn k8s_run_port_forward_reaches_agents_this_host_cannot_route_to() {
    let Some(_turn) = cluster_turn() else {
        return;
    };
    let before = objects();
    let out = tmp("pf-fleet.toml");
    let json = tmp("pf.json");
    let cut = NoPodRoutes::cut();
    assert!(!cut.0.is_empty(), "this host has no routes to the pods");
    let o = run(
        &k8s(
            "run",
            "linerate/agent:test",
            &out,
            &[
                "--no-host-network",
                "--port-forward",
                "--",
                "run",
                "stream",
                "--clients",
                "n1-a",
                "--servers",
                "n2-b",
                "-d",
                "2",
                "--warmup",
                "1",
                "-q",
                "--json",
                json.to_str().unwrap(),
            ],
        ),
        Duration::from_secs(240),
    );
    drop(cut);
    assert_no_panic(&o);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("through the API server (port-forward)"),
        "{text}"
    );
    // Every agent answered at its local forward, with its pod's address
    // as the data address.
    let answered: Vec<&str> = text.lines().filter(|l| l.contains(": answers")).collect();
    assert_eq!(answered.len(), 8, "{text}");
    assert!(answered.iter().all(|l| l.contains("127.0.0.1:")), "{text}");
    let r = json_of(&json);
    assert_eq!(r["summary"]["status"], "ok", "{}", r["summary"]);
    assert!(f(&r["summary"]["throughput_bps"]) > 1e8, "{}", r["summary"]);
    assert_eq!(placement(&r), "other node, pod -> pod", "{}", r["flow_map"]);
    assert!(!out.exists(), "down removed the hosts file");
    assert!(
        !tmp("pf-fleet.toml.forward").exists(),
        "the forward file went too"
    );
    assert_same_objects(&before);
}

/// This host's routes into the test cluster's pod and Service ranges,
/// removed until dropped (then put back as they were).
struct NoPodRoutes(Vec<String>);

impl NoPodRoutes {
    fn cut() -> NoPodRoutes {
        let o = Command::new("ip")
            .args(["route", "show", "root", "198.19.0.0/16"])
            .output()
            .expect("ip route");
        let routes: Vec<String> = String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect();
        for r in &routes {
            let mut args = vec!["route", "del"];
            args.extend(r.split_whitespace());
            let _ = Command::new("ip").args(&args).status();
        }
        NoPodRoutes(routes)
    }
}

impl Drop for NoPodRoutes {
    fn drop(&mut self) {
        for r in &self.0 {
            let mut args = vec!["route", "add"];
            args.extend(r.split_whitespace());
            let _ = Command::new("ip").args(&args).status();
        }
    }
}
