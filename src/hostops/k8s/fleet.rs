//! A ready fleet as a hosts file (`--hosts`): each agent a host, named for
//! its node and network (`n1-a`, `n2-b`, `n2-host`), and each pod agent
//! once more behind its Service (`n2-b-svc`: the same agent, reached at
//! the cluster IP). `site` says where each is (node, zone, network, path,
//! kernel, CNI) for results and reports.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::{Access, Fleet};
use crate::model::hosts::{Defaults, HostEntry, HostsFile, KubeRef, Role};

/// The hosts file of `f`; `token_file` as it is written in it (relative:
/// to the hosts file).
pub fn hosts_file(f: &Fleet, access: &Access, token_file: PathBuf) -> HostsFile {
    let mut host = Vec::new();
    for a in &f.agents {
        let mut site = BTreeMap::new();
        site.insert("node".to_string(), a.node.name.clone());
        if let Some(z) = &a.node.zone {
            site.insert("zone".into(), z.clone());
        }
        let network = if a.plan.host_network { "host" } else { "pod" };
        site.insert("network".into(), network.into());
        site.insert(
            "path".into(),
            if a.plan.host_network {
                "node-ip"
            } else {
                "pod-ip"
            }
            .into(),
        );
        site.insert("kernel".into(), a.node.kernel.clone());
        site.insert("cni".into(), f.cni.clone());
        site.insert("runtime".into(), a.node.runtime.clone());
        site.insert("kubelet".into(), a.node.kubelet.clone());
        let entry = HostEntry {
            name: a.plan.name.clone(),
            address: a.address.to_string(),
            port: Some(a.plan.control_port),
            data: vec![a.address.to_string()],
            role: Role::Any,
            site: site.clone(),
            ..Default::default()
        };
        host.push(entry.clone());
        if let Some(svc) = a.service {
            site.insert("path".into(), "service".into());
            host.push(HostEntry {
                name: format!("{}-svc", a.plan.name),
                connect: vec![svc.to_string()],
                site,
                ..entry
            });
        }
    }
    HostsFile {
        defaults: Defaults {
            token_file: Some(token_file),
            ..Default::default()
        },
        kubernetes: Some(KubeRef {
            namespace: f.namespace.clone(),
            kubeconfig: access.kubeconfig.clone(),
            context: access.context.clone(),
        }),
        host,
    }
}

/// `file` with each host's control address replaced by where `local`
/// forwards it (`k8s run --port-forward`); data addresses, the Services
/// and the sites stay, as the flows still run between the pods.
pub fn forwarded(
    file: &HostsFile,
    local: impl Fn(&HostEntry) -> Option<std::net::SocketAddr>,
) -> HostsFile {
    let mut out = file.clone();
    for h in &mut out.host {
        if let Some(at) = local(h) {
            if h.data.is_empty() {
                h.data = vec![h.address.clone()];
            }
            h.address = at.ip().to_string();
            h.port = Some(at.port());
        }
    }
    out
}

/// The file's text: a comment that says what it is, then the TOML.
pub fn render(file: &HostsFile, f: &Fleet) -> String {
    let body = toml::to_string(file).expect("a hosts file serializes");
    format!(
        "# linerate k8s up: agents in namespace {} (Kubernetes {}, CNI {}).\n\
         # nK-a, nK-b: pods on node K; nK-b-svc: nK-b through its ClusterIP Service;\n\
         # nK-host: on node K's own network. `linerate k8s down THIS_FILE` deletes them.\n\n{body}",
        f.namespace, f.server_version, f.cni
    )
}

#[cfg(test)]
mod tests {
    use super::super::objects::plan;
    use super::super::{Agent, NodeFacts};
    use super::*;
    use std::path::Path;

    #[test]
    fn the_fleet_reads_back_as_hosts_with_the_service_behind_each_pod() {
        let plans = plan(&["w1".into()], true, 7472);
        let node = NodeFacts {
            name: "w1".into(),
            kernel: "6.18".into(),
            zone: Some("z1".into()),
            ..Default::default()
        };
        let ip = |s: &str| s.parse().unwrap();
        let agents = vec![
            Agent {
                plan: plans[0].clone(),
                address: ip("198.19.120.2"),
                service: Some(ip("198.19.100.9")),
                node: node.clone(),
            },
            Agent {
                plan: plans[2].clone(),
                address: ip("198.18.250.1"),
                service: None,
                node,
            },
        ];
        let f = Fleet {
            namespace: "linerate-abc".into(),
            agents,
            cni: "unknown".into(),
            server_version: "v1.34.4".into(),
        };
        let text = render(
            &hosts_file(&f, &Access::default(), "fleet.token".into()),
            &f,
        );
        let back = HostsFile::parse(&text).unwrap();
        assert_eq!(back.kubernetes.as_ref().unwrap().namespace, "linerate-abc");
        let hosts = back.hosts(Path::new("/x")).unwrap();
        let names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["n1-a", "n1-a-svc", "n1-host"]);
        assert_eq!(
            hosts[1].connect,
            vec![(ip("198.19.120.2"), ip("198.19.100.9"))]
        );
        assert_eq!(hosts[1].site["path"], "service");
        assert_eq!(hosts[2].port, 7472);
        assert_eq!(hosts[2].site["network"], "host");
        assert_eq!(hosts[0].site["zone"], "z1");
        assert_eq!(
            hosts[0].token_file.as_deref(),
            Some(Path::new("/x/fleet.token"))
        );
    }
}
