//! `k8s run --port-forward`: the controller's control connections to the
//! agents through the API server (kubectl port-forward's mechanism), for a
//! controller that cannot reach the pod network, such as a laptop outside
//! a cloud cluster. Only the control channel goes this way: the flows run
//! between agents, inside the cluster, so what is measured is the
//! cluster's path, not the tunnel's.
//!
//! Each agent gets a listener on 127.0.0.1; every connection to it opens
//! one port-forward stream to the agent's pod (a WebSocket to the API
//! server, which the kubelet joins to the pod's network namespace) and the
//! bytes are copied both ways until either end closes.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::thread::JoinHandle;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use tokio::net::TcpListener;

use super::{client, error, Access, K8sError};

/// One agent to reach: its pod and the control port in it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Target {
    pub pod: String,
    pub port: u16,
}

/// The forwards, running until dropped.
pub struct Forwards {
    /// Where each target answers on this host.
    pub local: BTreeMap<Target, SocketAddr>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Forwards {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Starts a local listener per target (in namespace `ns` of the cluster
/// `a` names), forwarding on a thread of its own.
pub fn start(a: &Access, ns: &str, targets: &[Target]) -> Result<Forwards, K8sError> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (a, ns, targets) = (a.clone(), ns.to_string(), targets.to_vec());
    let thread = std::thread::Builder::new()
        .name("linerate-k8s-forward".into())
        .spawn(move || {
            let rt = match super::runtime() {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            rt.block_on(async move {
                let bound = listen(&a, &ns, &targets).await;
                let (pods, listeners) = match bound {
                    Ok(b) => b,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let mut local = BTreeMap::new();
                for (t, l) in &listeners {
                    if let Ok(at) = l.local_addr() {
                        local.insert(t.clone(), at);
                    }
                }
                let _ = ready_tx.send(Ok(local));
                for (t, l) in listeners {
                    tokio::spawn(serve(pods.clone(), t, l));
                }
                let _ = stop_rx.await;
            });
        })
        .map_err(K8sError::Runtime)?;
    match ready_rx.recv() {
        Ok(Ok(local)) => Ok(Forwards {
            local,
            stop: Some(stop_tx),
            thread: Some(thread),
        }),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(e)
        }
        Err(_) => {
            let _ = thread.join();
            Err(K8sError::Api {
                what: "forward the agents' control ports".into(),
                message: "the forwarding thread ended before it listened".into(),
            })
        }
    }
}

async fn listen(
    a: &Access,
    ns: &str,
    targets: &[Target],
) -> Result<(Api<Pod>, Vec<(Target, TcpListener)>), K8sError> {
    let c = client(a).await?;
    let pods: Api<Pod> = Api::namespaced(c, ns);
    let mut out = Vec::new();
    for t in targets {
        let l = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| K8sError::Api {
                what: format!("listen on 127.0.0.1 for pod {}", t.pod),
                message: e.to_string(),
            })?;
        out.push((t.clone(), l));
    }
    Ok((pods, out))
}

/// Accepts on `l` until the runtime ends; each connection is one stream
/// to `t`.
async fn serve(pods: Api<Pod>, t: Target, l: TcpListener) {
    loop {
        let conn = match l.accept().await {
            Ok((conn, _)) => conn,
            // Out of descriptors, say: wait rather than spin.
            Err(_) => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let (pods, t) = (pods.clone(), t.clone());
        tokio::spawn(async move {
            if let Err(e) = carry(&pods, &t, conn).await {
                eprintln!(
                    "linerate: port-forward to pod {} port {}: {e}",
                    t.pod, t.port
                );
            }
        });
    }
}

/// Copies `conn` to a new port-forward stream to `t` and back, until
/// either side closes.
async fn carry(pods: &Api<Pod>, t: &Target, mut conn: tokio::net::TcpStream) -> Result<(), String> {
    let mut pf = pods
        .portforward(&t.pod, &[t.port])
        .await
        .map_err(|e| error::one_line(&e))?;
    let mut upstream = pf
        .take_stream(t.port)
        .ok_or("the API server gave no stream for the port")?;
    let _ = conn.set_nodelay(true);
    // Either end closing ends both: a control connection has no half-close.
    let _ = tokio::io::copy_bidirectional(&mut conn, &mut upstream).await;
    drop(upstream);
    pf.abort();
    Ok(())
}
