//! `linerate run http`: requests per second against the server a run
//! starts for itself (HTTP/1.1 and HTTP/2, clear and TLS, GET and POST),
//! against nginx (Debian's nginx-light: another implementation of both
//! protocols, and what users point such a tool at), through a lab's link,
//! and bad input.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

fn figures(r: &serde_json::Value) -> &serde_json::Value {
    &r["summary"]["http_figures"]
}

/// What a result says it moved adds up: every counted request carried
/// `up` bytes and brought back `down`.
fn adds_up(r: &serde_json::Value, up: u64, down: u64) {
    let s = &r["summary"];
    let n = u(&s["transactions"]);
    assert!(n > 50, "{s}");
    let x = figures(r);
    assert_eq!(u(&x["non_2xx"]), 0, "{x}");
    assert_eq!(u(&x["bytes_down"]), n * down, "{x}");
    assert_eq!(u(&x["bytes_up"]), n * up, "{x}");
    assert_eq!(u(&s["bytes"]), n * (up + down), "{s}");
    let l = &s["latency_us"];
    assert!(f(&l["p50"]) > 0.0 && f(&l["p99"]) >= f(&l["p50"]), "{l}");
    assert!(f(&s["transactions_per_s"]) > 0.0, "{s}");
}

/// Its own server: HTTP/1.1 POSTs of 2 KiB for 16 KiB answers, and
/// HTTP/2 GETs over TLS with 4 streams on each of 2 connections.
#[test]
fn http_loads_its_own_server_over_http1_and_http2_and_counts_what_moved() {
    let (text, r) = run_json_text(
        "http-h1.json",
        &[
            "http",
            "--http-version",
            "1.1",
            "--http-method",
            "post",
            "--request",
            "2K",
            "--response",
            "16K",
            "-F",
            "2",
            "-d",
            "1",
            "--warmup",
            "0.5",
        ],
        LIMIT,
    );
    adds_up(&r, 2048, 16384);
    let x = figures(&r);
    assert_eq!(x["protocol"], "HTTP/1.1", "{x}");
    assert!(
        x["server"].as_str().unwrap().starts_with("linerate/"),
        "{x}"
    );
    assert_eq!(u(&x["connections"]), 2, "{x}");
    assert!(r["summary"]["tls"].is_null(), "{r}");
    // The window's intervals and the client's CPU are there.
    assert!(!r["iterations"][0]["intervals"]
        .as_array()
        .unwrap()
        .is_empty());
    assert!(r["iterations"][0]["cpu"]["client"].is_object(), "{r}");
    assert!(r["iterations"][0]["cpu"]["agent"].is_object(), "{r}");
    let _ = text;

    let (text, r) = run_json_text(
        "http-h2.json",
        &[
            "http",
            "--tls",
            "--response",
            "1K",
            "-F",
            "2",
            "--outstanding",
            "4",
            "-d",
            "1",
            "--warmup",
            "0.5",
        ],
        LIMIT,
    );
    adds_up(&r, 0, 1024);
    let x = figures(&r);
    assert_eq!(x["protocol"], "HTTP/2", "{x}");
    assert_eq!(u(&x["streams"]), 4, "{x}");
    assert_eq!(r["summary"]["tls"]["protocol"], "TLSv1.3", "{r}");
    assert!(
        x["url"].as_str().unwrap().starts_with("https://127.0.0.1:"),
        "{x}"
    );
    assert!(text.contains("HTTP/2 to https://"), "{text}");
}

/// nginx with a 4 KiB object, on a clear HTTP/1.1 port, a TLS port with
/// HTTP/2 and one with HTTP/1.1 only; stopped (by PID) when dropped.
struct Nginx {
    child: Child,
    dir: PathBuf,
    clear: u16,
    h2: u16,
    h1_tls: u16,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Nginx {
    fn start() -> Option<Nginx> {
        let nginx = ["/usr/sbin/nginx", "/usr/bin/nginx"]
            .into_iter()
            .find(|p| Path::new(p).exists())?;
        let dir = tmp("nginx");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("www")).unwrap();
        std::fs::write(dir.join("www/obj"), vec![b'n'; 4096]).unwrap();
        let ok = Command::new("openssl")
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
            .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"])
            .args([
                "-subj",
                "/CN=localhost",
                "-addext",
                "subjectAltName=DNS:localhost",
            ])
            // A server certificate, not a CA (webpki refuses a CA as the end
            // entity).
            .args(["-addext", "basicConstraints=critical,CA:FALSE"])
            .arg("-keyout")
            .arg(dir.join("key.pem"))
            .arg("-out")
            .arg(dir.join("cert.pem"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "openssl could not make a certificate");
        let (clear, h2, h1_tls) = (free_port(), free_port(), free_port());
        let d = dir.display();
        let conf = format!(
            "daemon off; master_process off; worker_processes 1;\n\
             pid {d}/nginx.pid; error_log {d}/error.log;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n\
               access_log {d}/access.log;\n\
               client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;\n\
               fastcgi_temp_path {d}/fcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
               keepalive_requests 1000000;\n\
               ssl_certificate {d}/cert.pem; ssl_certificate_key {d}/key.pem;\n\
               server {{ listen 127.0.0.1:{clear}; root {d}/www; }}\n\
               server {{ listen 127.0.0.1:{h2} ssl http2; root {d}/www; }}\n\
               server {{ listen 127.0.0.1:{h1_tls} ssl; root {d}/www; }}\n\
             }}\n"
        );
        std::fs::write(dir.join("nginx.conf"), conf).unwrap();
        let child = Command::new(nginx)
            .arg("-p")
            .arg(&dir)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let n = Nginx {
            child,
            dir,
            clear,
            h2,
            h1_tls,
        };
        // Up when every port answers.
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while [clear, h2, h1_tls]
            .iter()
            .any(|p| std::net::TcpStream::connect(("127.0.0.1", *p)).is_err())
        {
            assert!(
                std::time::Instant::now() < until,
                "nginx did not start: {}",
                std::fs::read_to_string(n.dir.join("error.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(n)
    }

    /// Requests its access log holds with `proto` ("HTTP/1.1", "HTTP/2.0").
    fn logged(&self, proto: &str) -> usize {
        std::fs::read_to_string(self.dir.join("access.log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(&format!("\"GET /obj {proto}\" 200 4096")))
            .count()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// nginx, over HTTP/1.1 in clear and HTTP/2 over TLS (its certificate
/// trusted with --tls-ca): what linerate counts, nginx logged (every
/// counted request is a 200 of 4096 bytes in its log, in the protocol
/// asked), and its Server header names it.
#[test]
fn http_loads_nginx_over_http1_and_http2_and_nginx_logs_every_request() {
    let Some(n) = Nginx::start() else {
        eprintln!("skipped: no nginx (apt install nginx-light)");
        return;
    };
    let url = format!("http://127.0.0.1:{}/obj", n.clear);
    let r = run_json_args(
        "http-nginx-h1.json",
        &[
            "http",
            "--http-url",
            &url,
            "--http-version",
            "1.1",
            "-F",
            "2",
            "-d",
            "1",
            "--warmup",
            "0.5",
        ],
        LIMIT,
    );
    adds_up(&r, 0, 4096);
    let x = figures(&r);
    assert!(x["server"].as_str().unwrap().starts_with("nginx"), "{x}");
    assert!(n.logged("HTTP/1.1") as u64 >= u(&r["summary"]["transactions"]));

    let ca = n.dir.join("cert.pem");
    let url = format!("https://127.0.0.1:{}/obj", n.h2);
    let r = run_json_args(
        "http-nginx-h2.json",
        &[
            "http",
            "--http-url",
            &url,
            "--tls",
            "--tls-ca",
            ca.to_str().unwrap(),
            "--tls-name",
            "localhost",
            "-F",
            "2",
            "--outstanding",
            "4",
            "-d",
            "1",
            "--warmup",
            "0.5",
        ],
        LIMIT,
    );
    adds_up(&r, 0, 4096);
    assert_eq!(figures(&r)["protocol"], "HTTP/2");
    assert!(n.logged("HTTP/2.0") as u64 >= u(&r["summary"]["transactions"]));

    // A TLS port without HTTP/2: ALPN says so, in one line.
    let o = run(
        &[
            "run",
            "http",
            "--http-url",
            &format!("https://127.0.0.1:{}/obj", n.h1_tls),
            "--tls",
            "--tls-ca",
            ca.to_str().unwrap(),
            "--tls-name",
            "localhost",
            "-d",
            "1",
        ],
        LIMIT,
    );
    assert_no_panic(&o);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains("did not take HTTP/2") && e.contains("--http-version 1.1"),
        "{e}"
    );
    // A URL the server does not have: every answer a 404, said so.
    let o = run(
        &[
            "run",
            "http",
            "--http-url",
            &format!("http://127.0.0.1:{}/missing", n.clear),
            "--http-version",
            "1.1",
            "-d",
            "1",
            "--warmup",
            "0.2",
        ],
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("error status") && e.contains("/missing"), "{e}");
    // HTTP/2 in clear to a server of HTTP/1.1 only: the hint says so.
    let o = run(
        &[
            "run",
            "http",
            "--http-url",
            &format!("http://127.0.0.1:{}/obj", n.clear),
            "-d",
            "1",
        ],
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--http-version 1.1"), "{}", stderr(&o));
    // The certificate not trusted: the TLS error names the flags.
    let o = run(&["run", "http", "--http-url", &url, "-d", "1"], LIMIT);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--tls-ca"), "{}", stderr(&o));
}

/// Through a lab's 20 ms link: each request waits a round trip, so
/// 2 connections x 4 streams make about 8 / 20 ms = 400 requests/s.
#[test]
fn http_through_a_lab_waits_the_links_round_trip() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root for the lab");
        return;
    }
    let (lab, _) = Lab::up("http", "--rtt 20ms --rate 1gbit --no-calibrate");
    let r = run_json_args(
        "http-lab.json",
        &[
            "http",
            "--lab",
            &lab.name,
            "-F",
            "2",
            "--outstanding",
            "4",
            "-d",
            "2",
            "--warmup",
            "1",
        ],
        LIMIT,
    );
    let s = &r["summary"];
    let p50_ms = f(&s["latency_us"]["p50"]) / 1e3;
    assert!((19.5..30.0).contains(&p50_ms), "{s}");
    let rate = f(&s["transactions_per_s"]);
    assert!((250.0..420.0).contains(&rate), "{s}");
    // The server was in the lab's server namespace, at its address.
    let url = figures(&r)["url"].as_str().unwrap().to_string();
    assert!(url.starts_with("http://198.18."), "{url}");
}

/// Bad input: one line, exit code 2 for a usage error, 1 for a server
/// that is not there; no panic.
#[test]
fn http_bad_input_gets_one_line_and_a_hint() {
    for (args, code, says) in [
        (
            "run http --http-version 1.1 --outstanding 4",
            2,
            "no pipelining",
        ),
        ("run http --request 10", 2, "--http-method post"),
        ("run stream --http-version 2", 2, "apply to http"),
        ("run http --http-url ftp://x/", 2, "http:// or https://"),
        (
            "run http --http-url http://127.0.0.1:9/x --response 1K",
            2,
            "server's object",
        ),
        (
            "run http --http-url http://127.0.0.1:1/ -d 1",
            1,
            "cannot reach",
        ),
    ] {
        let o = run_str(args, LIMIT);
        assert_no_panic(&o);
        assert_eq!(o.status.code(), Some(code), "{args}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains(says), "{args}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{args}: {e}");
    }
}
