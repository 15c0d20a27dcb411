//! The agent as a pod on a real Kubernetes: the two-node cluster of
//! tests/k8s/cluster.sh (etcd, the control plane and kubelets built from
//! their Go modules, containerd and runc from Debian), the image from
//! scripts/agent-image.sh (a static binary on an empty base, loaded into
//! the node's containerd: no registry), the token as a Secret.
//!
//! Slow (the first build of the cluster's binaries and of the static agent
//! takes minutes), so it runs only where the cluster is up:
//! `LINERATE_K8S=1 scripts/test.sh` brings it up and down around the
//! suite; `tests/k8s/cluster.sh up` by hand does too. Without it the test
//! says it was skipped.

mod common;

use common::k8s::*;
use common::*;
use std::time::Duration;

/// The test's namespace, deleted (with all it holds) when dropped.
struct Namespace(String);

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = cluster(&[
            "kubectl",
            "delete",
            "namespace",
            &self.0,
            "--wait=true",
            "--timeout=60s",
        ]);
    }
}

#[test]
fn agent_pods_serve_this_host_and_each_other_across_nodes_and_leave_nothing() {
    let Some(_turn) = cluster_turn() else {
        return;
    };
    let before = objects();
    let ns = Namespace(format!("lr-test-{}", std::process::id()));
    kubectl(&["create", "namespace", &ns.0]);
    kubectl(&["label", "namespace", &ns.0, "linerate.io/test=k8s"]);
    let token = "k8s-test-token-0123456789abcdef";
    let token_path = token_file("k8s-token", token);
    kubectl(&[
        "-n",
        &ns.0,
        "create",
        "secret",
        "generic",
        "linerate-token",
        &format!("--from-literal=token={token}"),
    ]);
    // One agent on each node, placed by name.
    let pods = tmp("agent-pods.yaml");
    let manifest: String = [("a", "lr-k8s-1"), ("b", "lr-k8s-2")]
        .iter()
        .map(|(name, node)| {
            format!(
                r#"---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, labels: {{app.kubernetes.io/name: linerate-agent}}}}
spec:
  nodeName: {node}
  containers:
  - name: agent
    image: linerate/agent:test
    imagePullPolicy: Never
    args: ["serve", "--listen", "0.0.0.0:7470", "--token-file", "/token/token"]
    readinessProbe: {{tcpSocket: {{port: 7470}}, periodSeconds: 1}}
    volumeMounts: [{{name: token, mountPath: /token, readOnly: true}}]
  volumes:
  - name: token
    secret: {{secretName: linerate-token, defaultMode: 0400}}
"#
            )
        })
        .collect();
    std::fs::write(&pods, manifest).unwrap();
    kubectl(&["-n", &ns.0, "apply", "-f", pods.to_str().unwrap()]);
    kubectl(&[
        "-n",
        &ns.0,
        "wait",
        "pod/a",
        "pod/b",
        "--for=condition=Ready",
        "--timeout=90s",
    ]);
    let ip = |pod: &str| {
        kubectl(&[
            "-n",
            &ns.0,
            "get",
            "pod",
            pod,
            "-o",
            "jsonpath={.status.podIP}",
        ])
        .trim()
        .to_string()
    };
    let (ip_a, ip_b) = (ip("a"), ip("b"));
    let agent = format!("{ip_a}:7470");

    // The controller on this host, the agent in pod a, across the node's
    // bridge: a stream and a closed-loop rr measure.
    for (name, kind) in [("k8s-stream.json", "stream"), ("k8s-rr.json", "rr")] {
        let r = run_json_args(
            name,
            &[
                kind,
                "--agent",
                &agent,
                "--token-file",
                token_path.to_str().unwrap(),
                "-d",
                "1",
                "--warmup",
                "0.5",
            ],
            Duration::from_secs(60),
        );
        let s = &r["summary"];
        assert_eq!(s["status"], "ok", "{kind}: {s}");
        let measured = match kind {
            "stream" => f(&s["throughput_bps"]),
            _ => f(&s["transactions_per_s"]),
        };
        assert!(measured > 0.0, "{kind} measured nothing: {s}");
    }
    // Pod to pod across nodes: the agents as a fleet (a hosts file of pod
    // IPs), pod a's agent the client, pod b's the server.
    let hosts = tmp("k8s-hosts.toml");
    std::fs::write(
        &hosts,
        format!(
            "[defaults]\ntoken_file = \"{}\"\n\n[[host]]\nname = \"a\"\naddress = \"{ip_a}\"\nrole = \"client\"\n\n[[host]]\nname = \"b\"\naddress = \"{ip_b}\"\nrole = \"server\"\n",
            token_path.display()
        ),
    )
    .unwrap();
    let r = run_json_args(
        "k8s-fleet.json",
        &[
            "stream",
            "--hosts",
            hosts.to_str().unwrap(),
            "-F",
            "2",
            "-d",
            "1",
            "--warmup",
            "0.5",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(r["summary"]["status"], "ok", "{}", r["summary"]);
    assert!(f(&r["summary"]["throughput_bps"]) > 0.0, "{}", r["summary"]);
    for m in r["flow_map"].as_array().expect("flow_map") {
        assert_eq!(
            (m["client"].as_str(), m["server"].as_str()),
            (Some("a"), Some("b")),
            "{m}"
        );
        assert!(
            m["address"].as_str().unwrap_or_default().starts_with(&ip_b),
            "{m}"
        );
    }
    // A controller without the token is refused by the pod's agent.
    let o = run(
        &[
            "run",
            "stream",
            "--agent",
            &agent,
            "-d",
            "1",
            "--history",
            "off",
        ],
        Duration::from_secs(30),
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("token"), "{}", stderr(&o));

    drop(ns);
    assert_same_objects(&before);
}
