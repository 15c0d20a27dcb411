//! The agent's RPM server (`serve --rpm`, draft-ietf-ippm-responsiveness):
//! its configuration and objects over HTTP/2 with TLS and in clear, read
//! with curl, and a whole responsiveness test by goresponsiveness (the
//! draft's Go client, built from its public source by
//! bench/goresponsiveness.sh) against it.

mod common;
use common::*;
use std::process::Command;
use std::time::Duration;

/// curl with `args`: (its body, then its `-w` line).
fn curl(args: &[&str]) -> (String, String) {
    let o = Command::new("curl")
        .args(["-sS", "--max-time", "20"])
        .args(args)
        .output()
        .expect("curl");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    match out.rsplit_once('\n') {
        Some((body, w)) => (body.to_string(), w.to_string()),
        None => (String::new(), out),
    }
}

/// The configuration at `url`, read over HTTP/2 with curl's `flags`:
/// version 1.
fn config(flags: &[&str], url: &str) -> serde_json::Value {
    let mut args = flags.to_vec();
    args.extend(["-w", "\n%{http_version} %{http_code}", url]);
    let (body, w) = curl(&args);
    assert_eq!(w, "2 200", "{body}");
    let cfg: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(cfg["version"], 1, "{cfg}");
    cfg
}

/// Over TLS (ALPN h2): the configuration names the three URLs under the
/// draft's names and the vendors' at the host asked for; the small object
/// is one byte, the large one flows until the client stops, an upload is
/// read whole and counted; anything else is a 404 that names the URLs.
#[test]
fn the_agent_serves_the_rpm_configuration_and_objects_over_http2() {
    let a = RpmAgent::start(false);
    assert!(a.url.starts_with("https://127.0.0.1:"), "{}", a.url);
    let cfg = config(&["-k", "--http2"], &a.url);
    let base = a.base();
    for (draft, vendor, path) in [
        (
            "small_download_url",
            "small_https_download_url",
            "/api/v1/small",
        ),
        (
            "large_download_url",
            "large_https_download_url",
            "/api/v1/large",
        ),
        ("upload_url", "https_upload_url", "/api/v1/slurp"),
    ] {
        assert_eq!(cfg["urls"][draft], format!("{base}{path}"), "{cfg}");
        assert_eq!(cfg["urls"][vendor], cfg["urls"][draft], "{cfg}");
    }
    let small = format!("{base}/api/v1/small");
    let (body, w) = curl(&[
        "-k",
        "--http2",
        "-w",
        "\n%{http_version} %{size_download}",
        &small,
    ]);
    assert_eq!((body.as_str(), w.as_str()), ("x", "2 1"));
    // The large object: what a second carries, then the client stops.
    let large = format!("{base}/api/v1/large");
    let o = Command::new("curl")
        .args(["-sk", "--http2", "--max-time", "1", "-o", "/dev/null"])
        .args(["-w", "%{http_version} %{size_download}", &large])
        .output()
        .unwrap();
    let w = String::from_utf8_lossy(&o.stdout).into_owned();
    let (version, size) = w.split_once(' ').unwrap();
    assert_eq!(version, "2", "{w}");
    assert!(size.parse::<u64>().unwrap() > 10 << 20, "{w}");
    // An upload of 8 MiB, read whole.
    let file = tmp("rpm-upload.bin");
    std::fs::write(&file, vec![7u8; 8 << 20]).unwrap();
    let (body, w) = curl(&[
        "-k",
        "--http2",
        "--data-binary",
        &format!("@{}", file.display()),
        "-w",
        "\n%{http_version} %{http_code}",
        &format!("{base}/api/v1/slurp"),
    ]);
    assert_eq!(w, "2 200");
    assert_eq!(body.trim(), (8u64 << 20).to_string());
    let (body, w) = curl(&[
        "-k",
        "--http2",
        "-w",
        "\n%{http_code}",
        &format!("{base}/nope"),
    ]);
    assert_eq!(w, "404");
    assert!(body.contains("/.well-known/nq"), "{body}");
}

/// In clear (`--rpm-clear`): HTTP/2 with prior knowledge and HTTP/1.1,
/// and the configuration's URLs say http.
#[test]
fn in_clear_the_rpm_server_speaks_http2_and_http1() {
    let a = RpmAgent::start(true);
    assert!(a.url.starts_with("http://127.0.0.1:"), "{}", a.url);
    let cfg = config(&["--http2-prior-knowledge"], &a.url);
    assert!(
        cfg["urls"]["large_download_url"]
            .as_str()
            .unwrap()
            .starts_with("http://"),
        "{cfg}"
    );
    let (body, w) = curl(&[
        "--http1.1",
        "-w",
        "\n%{http_version} %{size_download}",
        &format!("{}/api/v1/small", a.base()),
    ]);
    assert_eq!((body.as_str(), w.as_str()), ("x", "1.1 1"));
}

/// goresponsiveness, the draft's Go client, runs a whole responsiveness
/// test against the agent: both directions saturate (well above a
/// Gbit/s on loopback) and it reports an RPM.
#[test]
fn goresponsiveness_measures_a_linerate_agent() {
    let built = Command::new("bench/goresponsiveness.sh").output().unwrap();
    if !built.status.success() {
        eprintln!(
            "skipped: goresponsiveness could not be built here (Go and its module proxy): {}",
            String::from_utf8_lossy(&built.stderr)
        );
        return;
    }
    let client = String::from_utf8_lossy(&built.stdout).trim().to_string();
    let a = RpmAgent::start(false);
    let o = Command::new(&client)
        .args(["-url", &a.url, "-rpm.timeout", "8"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // "Throughput: 12669.896 Mbps (...)" for download, then upload.
    let mbps: Vec<f64> = out
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Throughput: "))
        .filter_map(|r| r.split_whitespace().next()?.parse().ok())
        .collect();
    assert_eq!(mbps.len(), 2, "{out}");
    assert!(mbps.iter().all(|m| *m > 1000.0), "{mbps:?}: {out}");
    let rpm: f64 = out
        .lines()
        .find_map(|l| l.strip_prefix("Final RPM: "))
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no RPM: {out}"));
    assert!(rpm > 0.0, "{out}");
}

/// A port that is taken is a one-line usage error, before serving.
#[test]
fn a_taken_rpm_port_is_refused_in_one_line() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().to_string();
    let o = run(&serve_rpm(&port), Duration::from_secs(20));
    assert_no_panic(&o);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    // One line of error (after the agent's warning that it has no token).
    let errors: Vec<&str> = e.lines().filter(|l| l.starts_with("linerate: ")).collect();
    assert_eq!(errors.len(), 1, "{e}");
    assert!(errors[0].contains(&format!("--rpm {port}: ")), "{e}");
}
