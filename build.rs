//! Records the git commit linerate was built from, and the versions of the
//! TLS libraries, for every result's Configuration Summary.
fn main() {
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=LINERATE_GIT_COMMIT={commit}");
    // Library versions for TLS results (what the crypto ran on).
    let lock = std::fs::read_to_string("Cargo.lock").unwrap_or_default();
    for (name, var) in [
        ("rustls", "LINERATE_RUSTLS_VERSION"),
        ("aws-lc-rs", "LINERATE_AWS_LC_VERSION"),
        ("openssl", "LINERATE_OPENSSL_CRATE_VERSION"),
    ] {
        let version = lock
            .split("[[package]]")
            .find(|p| p.contains(&format!("name = \"{name}\"\n")))
            .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = ")))
            .map(|v| v.trim_matches('"').to_string())
            .unwrap_or_else(|| "?".into());
        println!("cargo:rustc-env={var}={version}");
    }
    println!("cargo:rerun-if-changed=Cargo.lock");
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
}
