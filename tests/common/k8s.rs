//! The test cluster of tests/k8s/cluster.sh, for the tests that need it:
//! kubectl against it, its objects, one test at a time on it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use super::{stderr, stdout, tmp};

/// Where the scripts are, from the crate's root.
pub fn script(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

pub fn cluster(args: &[&str]) -> Output {
    Command::new(script("tests/k8s/cluster.sh"))
        .args(args)
        .output()
        .expect("tests/k8s/cluster.sh")
}

/// kubectl against the test cluster; panics with its stderr on failure.
pub fn kubectl(args: &[&str]) -> String {
    let mut all = vec!["kubectl"];
    all.extend_from_slice(args);
    let o = cluster(&all);
    assert!(o.status.success(), "kubectl {args:?}: {}", stderr(&o));
    stdout(&o)
}

/// Every object of the kinds a test creates, across namespaces, by name:
/// what must be the same before and after.
pub fn objects() -> String {
    kubectl(&[
        "get",
        "namespaces,pods,services,secrets,endpointslices",
        "-A",
        "-o",
        "custom-columns=KIND:.kind,NS:.metadata.namespace,NAME:.metadata.name",
        "--no-headers",
    ])
    .lines()
    // An EndpointSlice's name is generated anew when its controller
    // remakes it: those count by kind and namespace; the rest by name.
    .map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let keep = if f.first() == Some(&"EndpointSlice") {
            2
        } else {
            3
        };
        f[..keep.min(f.len())].join(" ")
    })
    .collect::<Vec<_>>()
    .join("\n")
}

/// The cluster's tests one at a time (each compares the cluster's objects
/// before and after), the image built and loaded once: None when there is
/// no cluster (the test is skipped).
pub fn cluster_turn() -> Option<std::sync::MutexGuard<'static, ()>> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    static IMAGE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !cluster(&["status"]).status.success() {
        eprintln!(
            "skipped: no test cluster (LINERATE_K8S=1 scripts/test.sh, or tests/k8s/cluster.sh up)"
        );
        return None;
    }
    let turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    IMAGE.get_or_init(|| {
        let image = tmp("agent-image.tar");
        let o = Command::new(script("scripts/agent-image.sh"))
            .arg(&image)
            .env("IMAGE", "linerate/agent:test")
            .output()
            .unwrap();
        assert!(o.status.success(), "agent-image.sh: {}", stderr(&o));
        let o = cluster(&["load", image.to_str().unwrap()]);
        assert!(o.status.success(), "load: {}", stderr(&o));
    });
    Some(turn)
}

/// Waits (at most 90 s: a namespace's pods take their grace period) until
/// the cluster holds what it held `before`.
pub fn assert_same_objects(before: &str) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let after = objects();
        if after == before {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "left in the cluster:\nbefore:\n{before}\nafter:\n{after}"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}
