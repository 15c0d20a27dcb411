//! What `linerate k8s` can fail at, each in one line that says what to do.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum K8sError {
    /// No kubeconfig could be read (and not inside a pod).
    #[error("no kubeconfig: {0} (pass --kubeconfig FILE, set KUBECONFIG, or run in a pod with a service account)")]
    NoConfig(String),
    /// The API server did not answer.
    #[error("cannot reach the Kubernetes API server at {url}: {why}")]
    Unreachable { url: String, why: String },
    /// RBAC (or another admission step) said no.
    #[error("the cluster refused to {what}: {message} (the kubeconfig's user needs to create namespaces, and secrets, deployments and services in them)")]
    Forbidden { what: String, message: String },
    /// Any other answer of the API.
    #[error("cannot {what}: {message}")]
    Api { what: String, message: String },
    /// The nodes asked for are not there, or none takes pods.
    #[error("{0}")]
    Nodes(String),
    /// Agents that were not ready in time, each with why.
    #[error("agents not ready after {} s: {}", .after.as_secs(), .why.join("; "))]
    NotReady { after: Duration, why: Vec<String> },
    /// The namespace was still there when the wait ended.
    #[error("namespace {namespace} is still terminating after {} s: pods on a node that does not answer stay until it is back or deleted (`kubectl delete node NAME`); run `linerate k8s down` again then", .after.as_secs())]
    StillThere { namespace: String, after: Duration },
    #[error("{0}: stopped before the agents were ready")]
    Interrupted(&'static str),
    #[error("cannot start the Kubernetes client's runtime: {0}")]
    Runtime(std::io::Error),
}

impl K8sError {
    /// An API call's failure, as the user reads it: `what` was being done.
    pub fn api(what: impl Into<String>, e: kube::Error) -> K8sError {
        let what = what.into();
        match e {
            kube::Error::Api(s) if s.code == 403 || s.code == 401 => K8sError::Forbidden {
                what,
                message: s.message.clone(),
            },
            kube::Error::Api(s) => K8sError::Api {
                what,
                message: if s.message.is_empty() {
                    format!("{} ({})", s.reason, s.code)
                } else {
                    s.message.clone()
                },
            },
            other => K8sError::Api {
                what,
                message: one_line(&other),
            },
        }
    }
}

/// An error and its causes on one line (hyper and rustls nest them).
pub fn one_line(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(s) = cur {
        let t = s.to_string();
        if !parts.iter().any(|p| p.contains(&t)) {
            parts.push(t);
        }
        cur = s.source();
    }
    parts.join(": ").replace('\n', " ")
}
