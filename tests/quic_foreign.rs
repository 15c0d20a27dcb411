//! `linerate run --perf-server`: linerate's QUIC clients against another
//! implementation's perf server (draft-banks-quic-performance, ALPN
//! "perf"), the other direction of the interop that tests/quic.rs checks
//! with quinn's client against a linerate agent. The server here is
//! quinn's own endpoint (its tokio driver and quinn-udp socket layer, not
//! linerate's), answering as quinn's `perf server` does (perf/src/server.rs:
//! read the 8-byte size, read the request to its end, send that many
//! bytes, finish), and counting what it read and sent, so each test checks
//! linerate's figures against the server's own. bench/quic.sh runs the
//! same against quinn's `perf` binary built from source.

mod common;
use common::*;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(90);

/// What the server counted.
#[derive(Default)]
struct Counts {
    connections: AtomicU64,
    requests: AtomicU64,
    /// Request bytes read, the 8-byte headers left out.
    read: AtomicU64,
    sent: AtomicU64,
    /// Its endpoint stopped (quinn ends it on a socket error).
    ended: AtomicBool,
}

struct PerfServer {
    addr: SocketAddr,
    counts: Arc<Counts>,
    cert_pem: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for PerfServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// quinn's perf server on a loopback port, in a thread of its own; with
/// `tickets` false its TLS gives no session tickets; `alpn`: the protocol
/// it speaks (b"perf").
fn perf_server_with(tickets: bool, alpn: &[u8]) -> PerfServer {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let cert_pem = cert.cert.pem();
    let key = rustls::pki_types::PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der());
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut crypto = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key.into())
        .unwrap();
    crypto.alpn_protocols = vec![alpn.to_vec()];
    if !tickets {
        crypto.send_tls13_tickets = 0;
    }
    let quic = quinn::crypto::rustls::QuicServerConfig::try_from(crypto).unwrap();
    let config = quinn::ServerConfig::with_crypto(Arc::new(quic));
    let counts = Arc::new(Counts::default());
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let c = counts.clone();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let ep = quinn::Endpoint::server(config, "127.0.0.1:0".parse().unwrap()).unwrap();
            addr_tx.send(ep.local_addr().unwrap()).unwrap();
            let serve = async {
                while let Some(incoming) = ep.accept().await {
                    let c = c.clone();
                    tokio::spawn(async move {
                        if let Ok(conn) = incoming.await {
                            c.connections.fetch_add(1, Relaxed);
                            serve_connection(conn, c).await;
                        }
                    });
                }
                c.ended.store(true, Relaxed);
            };
            tokio::select! {
                _ = serve => {}
                _ = stopped => {}
            }
        });
    });
    let addr = addr_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    PerfServer {
        addr,
        counts,
        cert_pem,
        stop: Some(stop),
        thread: Some(thread),
    }
}

fn perf_server() -> PerfServer {
    perf_server_with(true, b"perf")
}

/// quinn perf's `drive_bi`/`drive_uni`: each request on a stream of its own.
async fn serve_connection(conn: quinn::Connection, c: Arc<Counts>) {
    loop {
        tokio::select! {
            bi = conn.accept_bi() => {
                let Ok((send, recv)) = bi else { return };
                let c = c.clone();
                tokio::spawn(async move {
                    if let Ok(n) = read_request(recv, &c).await {
                        let _ = respond(n, send, &c).await;
                    }
                });
            }
            uni = conn.accept_uni() => {
                let Ok(recv) = uni else { return };
                let (c, conn) = (c.clone(), conn.clone());
                tokio::spawn(async move {
                    if let Ok(n) = read_request(recv, &c).await {
                        if let Ok(send) = conn.open_uni().await {
                            let _ = respond(n, send, &c).await;
                        }
                    }
                });
            }
        }
    }
}

async fn read_request(mut recv: quinn::RecvStream, c: &Counts) -> Result<u64, String> {
    let mut head = [0u8; 8];
    recv.read_exact(&mut head)
        .await
        .map_err(|e| e.to_string())?;
    c.requests.fetch_add(1, Relaxed);
    while let Some(chunk) = recv
        .read_chunk(usize::MAX, true)
        .await
        .map_err(|e| e.to_string())?
    {
        c.read.fetch_add(chunk.bytes.len() as u64, Relaxed);
    }
    Ok(u64::from_be_bytes(head))
}

async fn respond(mut n: u64, mut send: quinn::SendStream, c: &Counts) -> Result<(), String> {
    let data = bytes::Bytes::from(vec![42u8; 1 << 20]);
    while n > 0 {
        let chunk = data.slice(..n.min(data.len() as u64) as usize);
        let len = chunk.len() as u64;
        send.write_chunk(chunk).await.map_err(|e| e.to_string())?;
        c.sent.fetch_add(len, Relaxed);
        n -= len;
    }
    send.finish().map_err(|e| e.to_string())
}

fn client_sum(r: &serde_json::Value, field: &str) -> u64 {
    r["iterations"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|it| it["flows"]["client"].as_array().unwrap().iter())
        .map(|f| u(&f[field]))
        .sum()
}

/// Request/response, a bulk download and a bulk upload, and a connection
/// per transaction, each against the same server, which outlives them all
/// (a client that closed its socket at once would stop quinn's endpoint
/// with the ICMP error its last packets raise). The server's own counts
/// bound linerate's.
#[test]
fn linerate_drives_quinns_perf_server() {
    let server = perf_server();
    let at = server.addr.to_string();
    let c = &server.counts;

    // rr: every transaction the client counted is a request the server
    // answered in full; the server may have answered a few more (the
    // warm-up's, and those in flight at the window's end).
    let (text, r) = run_json_text(
        "foreign-rr.json",
        &[
            "quic-rr",
            "--perf-server",
            &at,
            "--request",
            "64",
            "--response",
            "64",
            "--outstanding",
            "4",
            "-d",
            "1",
            "--warmup",
            "0.3",
        ],
        LIMIT,
    );
    let tx = client_sum(&r, "transactions");
    let requests = c.requests.load(Relaxed);
    assert!(tx > 100, "{tx} transactions: {text}");
    assert!(requests >= tx, "server answered {requests} of {tx}");
    assert_eq!(c.sent.load(Relaxed), requests * 64);
    assert_eq!(c.read.load(Relaxed), requests * 64);
    assert_eq!(c.connections.load(Relaxed), 1);
    assert_eq!(r["summary"]["status"], "ok", "{}", r["summary"]);
    assert!(
        r["baseline"].is_null(),
        "no TLS over TCP twin for a foreign server"
    );
    assert_eq!(r["agent"]["foreign"], "another tool's QUIC perf server");
    assert_eq!(r["iterations"][0]["flows"]["agent"], serde_json::json!([]));
    let tls = &r["iterations"][0]["flows"]["client"][0]["tls"];
    assert!(
        tls["cert"].as_str().unwrap().contains("not verified"),
        "{tls}"
    );
    assert!(text.contains("its side is not measured"), "{text}");

    // A download: the client read no more than the server sent.
    let sent0 = c.sent.load(Relaxed);
    let r = run_json_args(
        "foreign-rx.json",
        &[
            "quic-stream",
            "--perf-server",
            &at,
            "--direction",
            "rx",
            "-d",
            "1",
            "--warmup",
            "0.3",
        ],
        LIMIT,
    );
    let got = client_sum(&r, "bytes_rx");
    let sent = c.sent.load(Relaxed) - sent0;
    assert!(got > 1 << 20, "downloaded {got}");
    assert!(got <= sent, "client read {got}, server sent {sent}");
    assert!(f(&r["summary"]["throughput_bps"]) > 0.0);

    // An upload, the certificate checked against the server's own (it is
    // made for "localhost"): the server read what the client wrote, less
    // at most QUIC's send window (64 MiB) still under way at the close.
    let ca = tmp("foreign-ca.pem");
    std::fs::write(&ca, &server.cert_pem).unwrap();
    let read0 = c.read.load(Relaxed);
    let r = run_json_args(
        "foreign-tx.json",
        &[
            "quic-stream",
            "--perf-server",
            &at,
            "--direction",
            "tx",
            "--tls-ca",
            ca.to_str().unwrap(),
            "--tls-name",
            "localhost",
            "-d",
            "1",
            "--warmup",
            "0.3",
        ],
        LIMIT,
    );
    let wrote = client_sum(&r, "bytes_tx");
    let read = c.read.load(Relaxed) - read0;
    assert!(read > 1 << 20, "server read {read}");
    assert!(
        read <= wrote && wrote - read <= 64 << 20,
        "client wrote {wrote}, server read {read}"
    );
    // The upload's throughput is the client's sends (nothing else counts them).
    assert!(f(&r["summary"]["throughput_bps"]) > 0.0, "{}", r["summary"]);
    let tls = &r["iterations"][0]["flows"]["client"][0]["tls"];
    assert!(
        tls["cert"].as_str().unwrap().contains("verified against"),
        "{tls}"
    );

    // A connection per transaction: each one the client counted is one
    // the server accepted and answered.
    let conns0 = c.connections.load(Relaxed);
    let r = run_json_args(
        "foreign-crr.json",
        &[
            "quic-crr",
            "--perf-server",
            &at,
            "-d",
            "1",
            "--warmup",
            "0.3",
        ],
        LIMIT,
    );
    let tx = client_sum(&r, "transactions");
    let conns = c.connections.load(Relaxed) - conns0;
    assert!(tx > 10, "{tx}");
    assert!(conns >= tx, "server accepted {conns}, client counted {tx}");
    assert!(
        !c.ended.load(Relaxed),
        "the server's endpoint ended: a client closed its socket under it"
    );
}

/// What does not speak the perf protocol is refused in one line before
/// anything starts, and a port nobody listens on is said so.
#[test]
fn perf_server_refusals_are_one_line() {
    let o = run_str("run rr --perf-server 127.0.0.1:4433 -d 1", LIMIT);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("rr does not speak the QUIC perf protocol; quic-stream, quic-rr"),
        "{e}"
    );
    let o = run_str(
        "run quic-rr --perf-server 127.0.0.1:4433 --agent 127.0.0.1:1 -d 1",
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
    // Nothing listens on a port just bound and closed.
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let o = run_str(
        &format!("run quic-rr --perf-server 127.0.0.1:{port} -d 1 --warmup 0.2"),
        LIMIT,
    );
    assert_no_panic(&o);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains(&format!("nothing answers QUIC at 127.0.0.1:{port}")),
        "{}",
        stderr(&o)
    );
}

/// Resumed handshakes against a server that gives no session tickets run
/// as full ones, without waiting for a ticket at each connection (a wait
/// of 50 ms each would hold the rate near 20/s); against a linerate
/// agent's perf server (`serve --quic-perf`) they resume, with 0-RTT.
#[test]
fn resumed_handshakes_against_perf_servers() {
    let server = perf_server_with(false, b"perf");
    let r = run_json_args(
        "foreign-noticket.json",
        &[
            "quic-handshake",
            "--resume",
            "on",
            "--perf-server",
            &server.addr.to_string(),
            "-d",
            "1",
            "--warmup",
            "0.3",
        ],
        LIMIT,
    );
    let rate = f(&r["summary"]["transactions_per_s"]);
    assert!(
        rate > 100.0,
        "{rate}/s: waiting for tickets that never come"
    );
    assert!(server.counts.connections.load(Relaxed) as f64 >= rate);
    drop(server);

    let (mut agent, lines, addr) = quic_perf_agent();
    let addr = addr.to_string();
    let o = run(
        &[
            "run",
            "quic-handshake",
            "--resume",
            "on",
            "--perf-server",
            &addr,
            "-d",
            "1",
            "--warmup",
            "0.3",
            "-q",
            "--json",
            tmp("foreign-agent-resume.json").to_str().unwrap(),
        ],
        LIMIT,
    );
    agent.kill().unwrap();
    agent.wait().unwrap();
    drop(lines);
    assert!(o.status.success(), "{}", stderr(&o));
    let r = json(&tmp("foreign-agent-resume.json"));
    let it = &r["iterations"][0];
    let (shakes, resumed) = (
        u(&it["counters"]["client"]["tls_handshakes"]),
        u(&it["counters"]["client"]["tls_resumed"]),
    );
    assert!(shakes > 50, "{shakes} handshakes");
    assert!(
        resumed * 100 >= shakes * 95,
        "{resumed} of {shakes} resumed with 0-RTT"
    );
}

/// A server that goes away mid-test ends it as partial, with what was
/// measured kept and the cause named; one that speaks another protocol
/// (ALPN h3, not perf) is refused at its handshake, in one line.
#[test]
fn a_perf_server_that_leaves_or_speaks_no_perf() {
    let server = perf_server();
    let out = tmp("foreign-gone.json");
    let child = spawn(&[
        "run",
        "quic-rr",
        "--perf-server",
        &server.addr.to_string(),
        "-d",
        "3",
        "--warmup",
        "0.3",
        "-q",
        "--json",
        out.to_str().unwrap(),
    ]);
    std::thread::sleep(Duration::from_millis(1800));
    drop(server);
    let o = wait(child, LIMIT);
    assert_no_panic(&o);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let r = json(&out);
    assert_eq!(r["summary"]["status"], "partial", "{}", r["summary"]);
    let e = r["iterations"][0]["error"].as_str().unwrap_or_default();
    assert!(e.contains("went away"), "{e}");
    assert!(u(&r["iterations"][0]["transactions"]) > 100);

    let h3 = perf_server_with(true, b"h3");
    let o = run_str(
        &format!("run quic-rr --perf-server {} -d 1 --warmup 0.2", h3.addr),
        LIMIT,
    );
    assert_no_panic(&o);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("does not speak the QUIC perf protocol (ALPN \"perf\")"),
        "{e}"
    );
    assert_eq!(e.trim().lines().count(), 1, "{e}");
}

/// A study of QUIC kinds runs against another tool's server as a single
/// run does, and its report says so: the network is that server, and the
/// Configuration Summary has the client's column only (nothing of the
/// server's host was collected).
#[test]
fn a_study_against_a_perf_server_says_what_it_ran_against() {
    let server = perf_server();
    let dir = tmp("foreign-study");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("s.toml");
    std::fs::write(
        &file,
        r#"title = "against quinn's perf server"
description = "linerate's QUIC clients against quinn's endpoint"
[test]
workload = "quic-rr"
duration = "1s"
warmup = "0.3s"
[[case]]
label = "rr"
[[case]]
label = "crr"
workload = "quic-crr"
"#,
    )
    .unwrap();
    let out = dir.join("out");
    let at = server.addr.to_string();
    let o = run(
        &[
            "study",
            "run",
            file.to_str().unwrap(),
            "--perf-server",
            &at,
            "--out",
            out.to_str().unwrap(),
            "-q",
        ],
        LIMIT,
    );
    assert_no_panic(&o);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let md = std::fs::read_to_string(first_dir(&out).join("report.md")).unwrap();
    assert!(
        md.contains(&format!(
            "another tool's QUIC perf server at {at} (--perf-server)"
        )),
        "{md}"
    );
    assert!(
        md.contains(&format!(
            "| setting | client (the server, another tool's QUIC perf server at {at}, is not collected) |"
        )),
        "{md}"
    );
    assert!(server.counts.connections.load(Relaxed) > 10);
}
