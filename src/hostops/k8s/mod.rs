//! Agents as pods (`linerate k8s up|down|status`): from a kubeconfig,
//! through kube-rs, one namespace per fleet holding the token Secret, a
//! Deployment per agent pinned to its node, and the Services; ready
//! agents become a hosts file (`fleet`), so every test and study runs on
//! them as on hosts started over SSH.
//!
//! Cleanup is by namespace: everything `up` creates lives in it, so one
//! delete removes all, and every such namespace carries the label
//! `app.kubernetes.io/managed-by=linerate` for `down --all` to sweep what
//! a killed run left. A failed or interrupted `up` deletes its namespace
//! before it returns.

pub mod error;
pub mod fleet;
pub mod forward;
pub mod objects;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Secret, Service};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub use error::K8sError;
use objects::AgentPlan;

/// Which cluster, as kubectl's flags say it.
#[derive(Clone, Debug, Default)]
pub struct Access {
    /// Default: KUBECONFIG, ~/.kube/config, else the pod's service account.
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
}

/// What `up` starts.
#[derive(Clone, Debug)]
pub struct UpOptions {
    pub access: Access,
    /// Default: `linerate-` and 6 random hex digits.
    pub namespace: Option<String>,
    pub image: String,
    /// The containers' imagePullPolicy.
    pub pull: String,
    /// Nodes by name; default: the first `count` Ready nodes that take pods.
    pub nodes: Option<Vec<String>>,
    pub count: usize,
    /// Also an agent on each node's own network.
    pub host_network: bool,
    pub host_port: u16,
    /// Longest wait for the agents to be ready.
    pub timeout: Duration,
}

/// A node as results describe it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeFacts {
    pub name: String,
    pub address: Option<IpAddr>,
    pub kernel: String,
    pub os: String,
    pub runtime: String,
    pub kubelet: String,
    pub zone: Option<String>,
}

/// One ready agent.
#[derive(Clone, Debug)]
pub struct Agent {
    pub plan: AgentPlan,
    /// Where its control port answers: the pod's IP, or the node's.
    pub address: IpAddr,
    /// Pod-network agents: their Service's cluster IP.
    pub service: Option<IpAddr>,
    pub node: NodeFacts,
}

/// What `up` made.
#[derive(Clone, Debug)]
pub struct Fleet {
    pub namespace: String,
    pub agents: Vec<Agent>,
    /// The network plugin, as its DaemonSet in kube-system names it.
    pub cni: String,
    pub server_version: String,
}

fn runtime() -> Result<tokio::runtime::Runtime, K8sError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(K8sError::Runtime)
}

/// A client for `a`, with bounded connect and read times (a dead API
/// server is an error in seconds, not a hang).
async fn client(a: &Access) -> Result<Client, K8sError> {
    let opts = KubeConfigOptions {
        context: a.context.clone(),
        ..Default::default()
    };
    let cfg = match (&a.kubeconfig, &a.context) {
        (Some(path), _) => {
            let kc = Kubeconfig::read_from(path).map_err(|e| {
                K8sError::NoConfig(format!("{}: {}", path.display(), error::one_line(&e)))
            })?;
            Config::from_custom_kubeconfig(kc, &opts)
                .await
                .map_err(|e| K8sError::NoConfig(error::one_line(&e)))?
        }
        (None, Some(_)) => Config::from_kubeconfig(&opts)
            .await
            .map_err(|e| K8sError::NoConfig(error::one_line(&e)))?,
        (None, None) if !kubeconfig_anywhere() => {
            return Err(K8sError::NoConfig(
                "KUBECONFIG is not set, ~/.kube/config does not exist, and this is not a pod"
                    .into(),
            ))
        }
        (None, None) => Config::infer()
            .await
            .map_err(|e| K8sError::NoConfig(error::one_line(&e)))?,
    };
    let mut cfg = cfg;
    cfg.connect_timeout = Some(Duration::from_secs(10));
    cfg.read_timeout = Some(Duration::from_secs(30));
    cfg.write_timeout = Some(Duration::from_secs(30));
    let url = cfg.cluster_url.to_string();
    let c = Client::try_from(cfg).map_err(|e| K8sError::Unreachable {
        url: url.clone(),
        why: error::one_line(&e),
    })?;
    match c.apiserver_version().await {
        Ok(_) => Ok(c),
        Err(e @ kube::Error::Api(_)) => Err(K8sError::api("read the server's version", e)),
        Err(e) => Err(K8sError::Unreachable {
            url,
            why: error::one_line(&e),
        }),
    }
}

/// Whether `Config::infer` has anything to read: KUBECONFIG, the home
/// folder's config, or a pod's service account.
fn kubeconfig_anywhere() -> bool {
    let set = |v: &str| std::env::var_os(v).is_some_and(|s| !s.is_empty());
    set("KUBECONFIG")
        || set("KUBERNETES_SERVICE_HOST")
        || std::env::var_os("HOME")
            .is_some_and(|h| std::path::Path::new(&h).join(".kube/config").exists())
}

fn ready(n: &Node) -> bool {
    let st = n.status.as_ref();
    st.and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn facts(n: &Node) -> NodeFacts {
    let name = n.metadata.name.clone().unwrap_or_default();
    let st = n.status.as_ref();
    let info = st.and_then(|s| s.node_info.as_ref());
    let address = st
        .and_then(|s| s.addresses.as_ref())
        .and_then(|a| a.iter().find(|a| a.type_ == "InternalIP"))
        .and_then(|a| a.address.parse().ok());
    let zone = n
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("topology.kubernetes.io/zone"))
        .cloned();
    NodeFacts {
        name,
        address,
        kernel: info.map(|i| i.kernel_version.clone()).unwrap_or_default(),
        os: info.map(|i| i.os_image.clone()).unwrap_or_default(),
        runtime: info
            .map(|i| i.container_runtime_version.clone())
            .unwrap_or_default(),
        kubelet: info.map(|i| i.kubelet_version.clone()).unwrap_or_default(),
        zone,
    }
}

/// The nodes to use: those named, or the first `count` Ready nodes that
/// take pods (by name).
async fn pick_nodes(c: &Client, o: &UpOptions) -> Result<Vec<NodeFacts>, K8sError> {
    let all = Api::<Node>::all(c.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| K8sError::api("list the nodes", e))?
        .items;
    let names: Vec<String> = all.iter().filter_map(|n| n.metadata.name.clone()).collect();
    if let Some(want) = &o.nodes {
        let mut out = Vec::new();
        for w in want {
            let n = all
                .iter()
                .find(|n| n.metadata.name.as_deref() == Some(w))
                .ok_or_else(|| {
                    K8sError::Nodes(format!(
                        "--nodes names {w}, which the cluster does not have (it has: {})",
                        names.join(", ")
                    ))
                })?;
            if !ready(n) {
                return Err(K8sError::Nodes(format!("node {w} is not Ready")));
            }
            out.push(facts(n));
        }
        return Ok(out);
    }
    let mut usable: Vec<&Node> = all
        .iter()
        .filter(|n| ready(n))
        .filter(|n| {
            let spec = n.spec.as_ref();
            !spec.and_then(|s| s.unschedulable).unwrap_or(false)
                && !spec.and_then(|s| s.taints.as_ref()).is_some_and(|t| {
                    t.iter()
                        .any(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
                })
        })
        .collect();
    usable.sort_by_key(|n| n.metadata.name.clone());
    if usable.is_empty() {
        return Err(K8sError::Nodes(format!(
            "no Ready node takes pods (nodes: {}); name some with --nodes",
            if names.is_empty() {
                "none".into()
            } else {
                names.join(", ")
            }
        )));
    }
    Ok(usable
        .iter()
        .take(o.count.max(1))
        .map(|n| facts(n))
        .collect())
}

/// The network plugin, from the DaemonSets in kube-system (none found, or
/// no right to look: "unknown").
async fn cni(c: &Client) -> String {
    const KNOWN: &[(&str, &str)] = &[
        ("cilium", "Cilium"),
        ("calico", "Calico"),
        ("canal", "Canal"),
        ("flannel", "Flannel"),
        ("weave", "Weave Net"),
        ("antrea", "Antrea"),
        ("kube-router", "kube-router"),
        ("aws-node", "Amazon VPC CNI"),
        ("azure-cni", "Azure CNI"),
        ("ovnkube", "OVN-Kubernetes"),
        ("kindnet", "kindnet"),
    ];
    let api: Api<k8s_openapi::api::apps::v1::DaemonSet> = Api::namespaced(c.clone(), "kube-system");
    let Ok(list) = api.list(&ListParams::default()).await else {
        return "unknown".into();
    };
    for ds in list.items {
        let name = ds.metadata.name.unwrap_or_default();
        if let Some((_, label)) = KNOWN.iter().find(|(k, _)| name.contains(k)) {
            return (*label).into();
        }
    }
    // No known plugin's DaemonSet in kube-system (a static bridge
    // configuration, as on the test cluster, or a plugin not listed).
    "unknown".into()
}

/// Why an agent's pod is not ready yet, from its status.
fn not_ready(p: &Pod) -> Option<String> {
    let st = p.status.as_ref()?;
    let ready = st
        .conditions
        .as_ref()
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    if ready && st.pod_ip.is_some() {
        return None;
    }
    for cs in st.container_statuses.iter().flatten() {
        let state = cs.state.as_ref();
        if let Some(w) = state.and_then(|s| s.waiting.as_ref()) {
            let reason = w.reason.clone().unwrap_or_default();
            let last = cs
                .last_state
                .as_ref()
                .and_then(|l| l.terminated.as_ref())
                .map(|t| {
                    format!(
                        " (last exit {}{})",
                        t.exit_code,
                        t.message
                            .as_deref()
                            .map(|m| format!(": {}", m.trim()))
                            .unwrap_or_default()
                    )
                })
                .unwrap_or_default();
            return Some(format!(
                "{reason}{}{last}",
                w.message
                    .as_deref()
                    .map(|m| format!(": {}", m.trim()))
                    .unwrap_or_default()
            ));
        }
        if let Some(t) = state.and_then(|s| s.terminated.as_ref()) {
            return Some(format!("exited {}", t.exit_code));
        }
    }
    let unscheduled = st
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False");
    if let Some(c) = unscheduled {
        return Some(format!(
            "not scheduled: {}",
            c.message.clone().unwrap_or_default()
        ));
    }
    Some(
        st.phase
            .clone()
            .unwrap_or_else(|| "pending".into())
            .to_lowercase(),
    )
}

/// Deployments whose pods the cluster refused to create (an admission
/// policy that forbids hostNetwork, a quota): name and why.
async fn replica_failures(c: &Client, ns: &str) -> Vec<(String, String)> {
    let Ok(list) = Api::<Deployment>::namespaced(c.clone(), ns)
        .list(&ListParams::default())
        .await
    else {
        return Vec::new();
    };
    list.items
        .into_iter()
        .filter_map(|d| {
            let name = d.metadata.name?;
            let failed = d
                .status?
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "ReplicaFailure" && c.status == "True")?;
            Some((
                name,
                format!("pods refused: {}", failed.message.unwrap_or_default()),
            ))
        })
        .collect()
}

/// Creates the fleet's objects in `ns` (which exists).
async fn create_objects(
    c: &Client,
    ns: &str,
    o: &UpOptions,
    plans: &[AgentPlan],
    token: &str,
) -> Result<(), K8sError> {
    let pp = PostParams::default();
    Api::<Secret>::namespaced(c.clone(), ns)
        .create(&pp, &objects::token_secret(token))
        .await
        .map_err(|e| K8sError::api(format!("create the token Secret in {ns}"), e))?;
    let services: Api<Service> = Api::namespaced(c.clone(), ns);
    services
        .create(&pp, &objects::headless())
        .await
        .map_err(|e| K8sError::api(format!("create the headless Service in {ns}"), e))?;
    let deployments: Api<Deployment> = Api::namespaced(c.clone(), ns);
    for a in plans {
        deployments
            .create(&pp, &objects::deployment(a, &o.image, &o.pull))
            .await
            .map_err(|e| K8sError::api(format!("create Deployment agent-{} in {ns}", a.name), e))?;
        if !a.host_network {
            services
                .create(&pp, &objects::service(a))
                .await
                .map_err(|e| K8sError::api(format!("create Service svc-{} in {ns}", a.name), e))?;
        }
    }
    Ok(())
}

/// Waits until every agent's pod is ready, then reads where each is.
async fn await_agents(
    c: &Client,
    ns: &str,
    o: &UpOptions,
    plans: &[AgentPlan],
    nodes: &[NodeFacts],
    stop: &AtomicBool,
    say: &dyn Fn(&str),
) -> Result<Vec<Agent>, K8sError> {
    let pods: Api<Pod> = Api::namespaced(c.clone(), ns);
    let lp = ListParams::default().labels(objects::AGENT_LABEL);
    let began = Instant::now();
    let mut said = 0usize;
    loop {
        if stop.load(Ordering::SeqCst) {
            return Err(K8sError::Interrupted(crate::engine::signals::stopped_by()));
        }
        let list = pods
            .list(&lp)
            .await
            .map_err(|e| K8sError::api(format!("list the pods in {ns}"), e))?
            .items;
        let mut why = Vec::new();
        let mut found = Vec::new();
        let refused = replica_failures(c, ns).await;
        for a in plans {
            let pod = list.iter().find(|p| {
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(objects::AGENT_LABEL))
                    == Some(&a.name)
                    && p.metadata.deletion_timestamp.is_none()
            });
            match pod.map(|p| (p, not_ready(p))) {
                None => why.push(format!(
                    "{} (on {}): {}",
                    a.name,
                    a.node,
                    refused
                        .iter()
                        .find(|(d, _)| *d == format!("agent-{}", a.name))
                        .map_or("no pod yet", |(_, m)| m.as_str())
                )),
                Some((_, Some(w))) => why.push(format!("{} (on {}): {w}", a.name, a.node)),
                Some((p, None)) => found.push((a, p.clone())),
            }
        }
        if why.is_empty() {
            return describe(c, ns, found, nodes).await;
        }
        if found.len() > said {
            said = found.len();
            say(&format!("{said} of {} agents ready", plans.len()));
        }
        if began.elapsed() >= o.timeout {
            return Err(K8sError::NotReady {
                after: o.timeout,
                why,
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The ready agents' addresses and their Services' cluster IPs.
async fn describe(
    c: &Client,
    ns: &str,
    found: Vec<(&AgentPlan, Pod)>,
    nodes: &[NodeFacts],
) -> Result<Vec<Agent>, K8sError> {
    let services: Api<Service> = Api::namespaced(c.clone(), ns);
    let mut out = Vec::new();
    for (a, p) in found {
        let st = p.status.unwrap_or_default();
        let ip = if a.host_network {
            st.host_ip.clone()
        } else {
            st.pod_ip.clone()
        };
        let address: IpAddr =
            ip.as_deref()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| K8sError::Api {
                    what: format!("read agent {}'s address", a.name),
                    message: format!("its pod reports {ip:?}"),
                })?;
        let service = if a.host_network {
            None
        } else {
            let s = services
                .get(&format!("svc-{}", a.name))
                .await
                .map_err(|e| K8sError::api(format!("read Service svc-{}", a.name), e))?;
            s.spec
                .and_then(|s| s.cluster_ip)
                .and_then(|ip| ip.parse().ok())
        };
        let node = nodes
            .iter()
            .find(|n| n.name == a.node)
            .cloned()
            .unwrap_or_default();
        out.push(Agent {
            plan: a.clone(),
            address,
            service,
            node,
        });
    }
    Ok(out)
}

/// Deletes `ns` and waits until it is gone (at most `timeout`).
async fn delete_ns(c: &Client, ns: &str, timeout: Duration) -> Result<(), K8sError> {
    let api: Api<Namespace> = Api::all(c.clone());
    match api.delete(ns, &DeleteParams::foreground()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
        Err(e) => return Err(K8sError::api(format!("delete namespace {ns}"), e)),
    }
    let began = Instant::now();
    loop {
        match api.get_opt(ns).await {
            Ok(None) => return Ok(()),
            Ok(Some(_)) if began.elapsed() >= timeout => {
                return Err(K8sError::StillThere {
                    namespace: ns.into(),
                    after: timeout,
                })
            }
            Ok(Some(_)) => tokio::time::sleep(Duration::from_millis(500)).await,
            Err(e) => return Err(K8sError::api(format!("read namespace {ns}"), e)),
        }
    }
}

/// Starts the agents and waits for them. Whatever fails (or a Ctrl-C that
/// sets `stop`) after the namespace exists deletes it again.
pub fn up(
    o: &UpOptions,
    token: &str,
    stop: &AtomicBool,
    say: &dyn Fn(&str),
) -> Result<Fleet, K8sError> {
    runtime()?.block_on(async {
        let c = client(&o.access).await?;
        let server_version = c
            .apiserver_version()
            .await
            .map(|v| v.git_version)
            .unwrap_or_default();
        let nodes = pick_nodes(&c, o).await?;
        let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
        let plans = objects::plan(&names, o.host_network, o.host_port);
        let ns = o
            .namespace
            .clone()
            .unwrap_or_else(|| format!("linerate-{}", &crate::control::protocol::random_hex(3)));
        Api::<Namespace>::all(c.clone())
            .create(&PostParams::default(), &objects::namespace(&ns))
            .await
            .map_err(|e| K8sError::api(format!("create namespace {ns}"), e))?;
        say(&format!(
            "namespace {ns}: {} agents on {}",
            plans.len(),
            names.join(", ")
        ));
        let made = async {
            create_objects(&c, &ns, o, &plans, token).await?;
            await_agents(&c, &ns, o, &plans, &nodes, stop, say).await
        }
        .await;
        match made {
            Ok(agents) => Ok(Fleet {
                namespace: ns,
                agents,
                cni: cni(&c).await,
                server_version,
            }),
            Err(e) => {
                say(&format!("{e}; deleting namespace {ns}"));
                if let Err(d) = delete_ns(&c, &ns, Duration::from_secs(60)).await {
                    say(&d.to_string());
                }
                Err(e)
            }
        }
    })
}

/// Deletes namespace `ns` (every object of a fleet), waiting until gone.
pub fn down(a: &Access, ns: &str, timeout: Duration) -> Result<(), K8sError> {
    runtime()?.block_on(async {
        let c = client(a).await?;
        delete_ns(&c, ns, timeout).await
    })
}

/// The namespaces linerate made on the cluster (its label).
pub fn managed_namespaces(a: &Access) -> Result<Vec<String>, K8sError> {
    runtime()?.block_on(async {
        let c = client(a).await?;
        let lp = ListParams::default().labels(&format!(
            "{}={}",
            objects::MANAGED_BY.0,
            objects::MANAGED_BY.1
        ));
        let list = Api::<Namespace>::all(c)
            .list(&lp)
            .await
            .map_err(|e| K8sError::api("list linerate's namespaces", e))?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .collect())
    })
}

/// One agent pod as `status` shows it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PodState {
    pub agent: String,
    pub pod: String,
    pub node: String,
    pub ip: String,
    /// None: ready; else why not.
    pub not_ready: Option<String>,
}

/// The agent pods of `ns`.
pub fn pods(a: &Access, ns: &str) -> Result<Vec<PodState>, K8sError> {
    runtime()?.block_on(async {
        let c = client(a).await?;
        let list = Api::<Pod>::namespaced(c, ns)
            .list(&ListParams::default().labels(objects::AGENT_LABEL))
            .await
            .map_err(|e| K8sError::api(format!("list the pods in {ns}"), e))?;
        let mut v: Vec<PodState> = list
            .items
            .iter()
            .map(|p| PodState {
                agent: p
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(objects::AGENT_LABEL).cloned())
                    .unwrap_or_default(),
                pod: p.metadata.name.clone().unwrap_or_default(),
                node: p
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .unwrap_or_default(),
                ip: p
                    .status
                    .as_ref()
                    .and_then(|s| s.pod_ip.clone())
                    .unwrap_or_default(),
                not_ready: not_ready(p),
            })
            .collect();
        v.sort_by(|a, b| a.agent.cmp(&b.agent));
        Ok(v)
    })
}
