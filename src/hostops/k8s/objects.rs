//! The objects `linerate k8s up` creates, as the API takes them: one
//! namespace holds everything (deleting it removes all), with the token as
//! a Secret, one single-replica Deployment per agent pinned to its node by
//! node affinity, a headless Service over all agents and a ClusterIP
//! Service in front of each pod-network agent (the Service path of the
//! matrix).
//!
//! Built as JSON and read into k8s-openapi's types: the manifests read as
//! a user would write them in YAML.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use serde_json::json;

/// Every object's label, and the namespace's: what `k8s down --all`
/// sweeps.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "linerate");
/// The label that names one agent (its Deployment's pods, its Service).
pub const AGENT_LABEL: &str = "linerate.io/agent";
/// The label every agent pod carries (the headless Service selects it).
pub const APP: (&str, &str) = ("app.kubernetes.io/name", "linerate-agent");
/// Where the token Secret is mounted in the agents.
const TOKEN_DIR: &str = "/var/run/linerate";

/// Ports inside a pod (its own network namespace: the same in every pod).
pub const POD_CONTROL_PORT: u16 = 7470;
pub const POD_DATA_PORT: u16 = 7471;

/// One agent to start.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentPlan {
    /// Its host name in the fleet (`n1-a`, `n2-host`).
    pub name: String,
    /// The node it runs on.
    pub node: String,
    /// On the node's network (hostNetwork) rather than the pod network.
    pub host_network: bool,
    /// Its control and data ports.
    pub control_port: u16,
    pub data_port: u16,
}

/// The agents for `nodes`: two on the pod network of each (so pod to pod
/// on one node has a client and a server there), and with `host_network`
/// one on each node's own network, on `host_port` and the port after it.
pub fn plan(nodes: &[String], host_network: bool, host_port: u16) -> Vec<AgentPlan> {
    let mut v = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        for side in ["a", "b"] {
            v.push(AgentPlan {
                name: format!("n{}-{side}", i + 1),
                node: node.clone(),
                host_network: false,
                control_port: POD_CONTROL_PORT,
                data_port: POD_DATA_PORT,
            });
        }
        if host_network {
            v.push(AgentPlan {
                name: format!("n{}-host", i + 1),
                node: node.clone(),
                host_network: true,
                control_port: host_port,
                data_port: host_port + 1,
            });
        }
    }
    v
}

fn labels(extra: &[(&str, &str)]) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    m.insert(MANAGED_BY.0.into(), MANAGED_BY.1.into());
    for (k, v) in extra {
        m.insert((*k).into(), (*v).into());
    }
    serde_json::Value::Object(m)
}

fn typed<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).expect("the manifests here match the API's types")
}

pub fn namespace(name: &str) -> Namespace {
    typed(json!({"metadata": {"name": name, "labels": labels(&[])}}))
}

/// The control channel's token, readable by the agent only (0400).
pub fn token_secret(token: &str) -> Secret {
    typed(json!({
        "metadata": {"name": "linerate-token", "labels": labels(&[])},
        "type": "Opaque",
        "stringData": {"token": token},
    }))
}

/// The Deployment of one agent: one replica, on its node only, ready when
/// its control port accepts.
pub fn deployment(a: &AgentPlan, image: &str, pull: &str) -> Deployment {
    let listen = if a.host_network {
        // The node's address, from the downward API: not every interface.
        format!("$(NODE_IP):{}", a.control_port)
    } else {
        format!("0.0.0.0:{}", a.control_port)
    };
    let pod_labels = labels(&[(AGENT_LABEL, &a.name), APP]);
    typed(json!({
        "metadata": {"name": format!("agent-{}", a.name), "labels": labels(&[(AGENT_LABEL, &a.name)])},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {AGENT_LABEL: a.name}},
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "hostNetwork": a.host_network,
                    "dnsPolicy": if a.host_network { "ClusterFirstWithHostNet" } else { "ClusterFirst" },
                    "automountServiceAccountToken": false,
                    "enableServiceLinks": false,
                    "terminationGracePeriodSeconds": 5,
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [a.node]}
                        ]}]
                    }}},
                    // Placed by name: a node that takes no other pods
                    // (a control plane's taint) still takes the one asked for.
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [{
                        "name": "agent",
                        "image": image,
                        "imagePullPolicy": pull,
                        "args": [
                            "serve", "--listen", listen,
                            "--token-file", format!("{TOKEN_DIR}/token"),
                            "--data-port", a.data_port.to_string(),
                        ],
                        "env": [{"name": "NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}],
                        "ports": [
                            {"name": "control", "containerPort": a.control_port, "protocol": "TCP"},
                            {"name": "data", "containerPort": a.data_port, "protocol": "TCP"},
                            {"name": "data-udp", "containerPort": a.data_port, "protocol": "UDP"},
                        ],
                        "readinessProbe": {"tcpSocket": {"port": a.control_port}, "periodSeconds": 1},
                        "volumeMounts": [{"name": "token", "mountPath": TOKEN_DIR, "readOnly": true}],
                    }],
                    "volumes": [{"name": "token", "secret": {"secretName": "linerate-token", "defaultMode": 0o400}}],
                }
            }
        }
    }))
}

/// The Service in front of one pod-network agent: its data port, TCP and
/// UDP, at a cluster IP (kube-proxy's or the CNI's forwarding on the way).
pub fn service(a: &AgentPlan) -> Service {
    typed(json!({
        "metadata": {"name": format!("svc-{}", a.name), "labels": labels(&[(AGENT_LABEL, &a.name)])},
        "spec": {
            "type": "ClusterIP",
            "selector": {AGENT_LABEL: a.name},
            "ports": [
                {"name": "data", "port": a.data_port, "targetPort": a.data_port, "protocol": "TCP"},
                {"name": "data-udp", "port": a.data_port, "targetPort": a.data_port, "protocol": "UDP"},
            ],
        }
    }))
}

/// The headless Service over every agent (names in the cluster's DNS for
/// tools that want them; linerate itself uses the addresses).
pub fn headless() -> Service {
    typed(json!({
        "metadata": {"name": "agents", "labels": labels(&[])},
        "spec": {
            "clusterIP": "None",
            "selector": {APP.0: APP.1},
            "ports": [{"name": "control", "port": POD_CONTROL_PORT, "protocol": "TCP"}],
            "publishNotReadyAddresses": true,
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_node_gets_two_pod_agents_and_one_on_its_network() {
        let p = plan(&["w1".into(), "w2".into()], true, 7472);
        let names: Vec<&str> = p.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(
            names,
            ["n1-a", "n1-b", "n1-host", "n2-a", "n2-b", "n2-host"]
        );
        assert_eq!((p[2].control_port, p[2].data_port), (7472, 7473));
        assert!(p[2].host_network && !p[0].host_network);
        assert_eq!(p[3].node, "w2");
        assert_eq!(plan(&["w1".into()], false, 7472).len(), 2);
    }

    #[test]
    fn an_agent_is_pinned_to_its_node_and_its_service_selects_it_alone() {
        let a = &plan(&["w2".into()], true, 7480)[2];
        let d = serde_json::to_value(deployment(a, "linerate/agent:1", "IfNotPresent")).unwrap();
        let spec = &d["spec"]["template"]["spec"];
        assert_eq!(spec["hostNetwork"], true);
        let term = &spec["affinity"]["nodeAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
            ["matchFields"][0];
        assert_eq!(term["values"][0], "w2");
        let args = &spec["containers"][0]["args"];
        assert_eq!(args[2], "$(NODE_IP):7480");
        assert_eq!(args[6], "7481");
        let b = &plan(&["w1".into()], false, 7472)[1];
        let s = serde_json::to_value(service(b)).unwrap();
        assert_eq!(s["spec"]["selector"][AGENT_LABEL], "n1-b");
        assert_eq!(s["spec"]["ports"][0]["port"], POD_DATA_PORT);
        let t = serde_json::to_value(token_secret("abc")).unwrap();
        assert_eq!(t["stringData"]["token"], "abc");
    }
}
