//! The http load: `--flows` connections, each with `--outstanding`
//! requests in flight (HTTP/2 streams; one on HTTP/1.1), each asking the
//! URL again as soon as its response has been read to the end: a closed
//! loop, as h2load and wrk run it. A request's latency is from the moment
//! it is handed to the connection to its response's last byte.
//!
//! hyper's client connections (`hyper::client::conn`) on a tokio runtime
//! of this call's own, not a pool: the connection is the unit the test
//! counts, so no pool may open more or hide which one a request took. A
//! connection that closes is opened again at once (counted in
//! `reopened`), so a server that closes old connections (nginx's
//! `keepalive_requests`, 1000 by default) does not end the test.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Uri};
use hyper_util::rt::{TokioExecutor, TokioIo};

use super::options::HttpVersion;
use crate::measure::cpu;
use crate::measure::histogram::{self, Hist};
use crate::model::flow::TlsInfo;
use crate::model::sample::CpuWindow;

type ReqBody = Full<Bytes>;

/// The client's threads (this call's and its runtime's), by name.
const THREAD: &str = "http-client";

/// How long to wait before trying again to open a connection the server
/// refused: it is not hammered.
const REOPEN_AFTER: Duration = Duration::from_millis(100);

/// HTTP/2 flow control windows the client grants, per stream and per
/// connection: h2load's (2^30 - 1), so a large object is bound by the
/// network and the ends, not by credit (HTTP/2's default is 64 KiB, one
/// round trip's worth).
const H2_WINDOW: u32 = (1 << 30) - 1;

/// Longest one request may take before it counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// What to load and how.
#[derive(Clone)]
pub struct Load {
    pub url: Uri,
    /// Where to connect: `host:port`.
    pub connect: String,
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// The name the server's certificate must show.
    pub server_name: String,
    pub version: HttpVersion,
    pub connections: u32,
    /// Requests in flight on each connection.
    pub streams: u32,
    /// Request body bytes (POST); 0: GET.
    pub upload: u64,
    /// The client runtime's threads (`--workers`).
    pub threads: usize,
}

/// When to measure: a warm-up, then `windows` back-to-back windows cut
/// into intervals.
pub struct Plan {
    pub warmup: Duration,
    pub windows: usize,
    pub window: Duration,
    pub interval: Duration,
}

/// What the loops count, per connection (its lock is taken once a request).
#[derive(Clone)]
struct Tally {
    requests: u64,
    non_2xx: u64,
    failed: u64,
    bytes_down: u64,
    bytes_up: u64,
    hist: Hist,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            requests: 0,
            non_2xx: 0,
            failed: 0,
            bytes_down: 0,
            bytes_up: 0,
            hist: histogram::new_hist(),
        }
    }

    fn add(&mut self, o: &Tally) {
        self.requests += o.requests;
        self.non_2xx += o.non_2xx;
        self.failed += o.failed;
        self.bytes_down += o.bytes_down;
        self.bytes_up += o.bytes_up;
        histogram::merge(&mut self.hist, &o.hist);
    }
}

/// One stretch of time's counts.
#[derive(Clone)]
pub struct Counts {
    pub start_s: f64,
    pub end_s: f64,
    pub requests: u64,
    pub non_2xx: u64,
    pub failed: u64,
    pub bytes_down: u64,
    pub bytes_up: u64,
    pub hist: Hist,
}

impl Counts {
    fn of(start_s: f64, end_s: f64, t: &Tally) -> Counts {
        Counts {
            start_s,
            end_s,
            requests: t.requests,
            non_2xx: t.non_2xx,
            failed: t.failed,
            bytes_down: t.bytes_down,
            bytes_up: t.bytes_up,
            hist: t.hist.clone(),
        }
    }
}

/// One measured window: its counts, its intervals and the CPU over it.
pub struct Window {
    pub counts: Counts,
    pub intervals: Vec<Counts>,
    pub cpu_client: CpuWindow,
    pub cpu_server: CpuWindow,
}

/// What a run measured.
pub struct Outcome {
    pub windows: Vec<Window>,
    /// The HTTP the connections speak.
    pub protocol: &'static str,
    /// The server's `Server` header, if it sent one.
    pub server: Option<String>,
    pub tls: Option<TlsInfo>,
    /// Connections opened again after one failed.
    pub reopened: u64,
    /// Why it ended before its windows did (Ctrl-C), if it did.
    pub cut_short: Option<String>,
}

/// Why a run ended without a figure.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("http: cannot reach {addr}: {source} (is the server up? --http-url)")]
    Connect {
        addr: String,
        #[source]
        source: io::Error,
    },
    #[error(
        "http: TLS with {host}: {source} (its certificate: --tls --tls-ca FILE --tls-name NAME)"
    )]
    Tls {
        host: String,
        #[source]
        source: io::Error,
    },
    #[error("http: {host}: {why}")]
    Http { host: String, why: String },
    #[error("http: {url}: no request was answered with a 2xx status ({why})")]
    Nothing { url: String, why: String },
    #[error("http: runtime: {0}")]
    Runtime(#[source] io::Error),
}

/// Runs the load on a thread of its own (SIGPIPE blocked there and in the
/// runtime's workers: hyper writes with writev); `stop` ends it early
/// (Ctrl-C) with what was measured kept; `server_thread` picks the threads
/// of a server in this process, for its CPU.
pub fn run(
    load: Load,
    plan: Plan,
    stop: fn() -> bool,
    server_thread: fn(&str) -> bool,
) -> Result<Outcome, HttpError> {
    let thread = std::thread::Builder::new()
        .name(THREAD.into())
        .spawn(move || {
            crate::engine::signals::block_in_this_thread();
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(load.threads.max(1))
                .thread_name(THREAD)
                .on_thread_start(crate::engine::signals::block_in_this_thread)
                .enable_all()
                .build()
                .map_err(HttpError::Runtime)?;
            let out = rt.block_on(measure(load, plan, stop, server_thread));
            rt.shutdown_timeout(Duration::from_millis(500));
            out
        })
        .map_err(HttpError::Runtime)?;
    thread.join().unwrap_or_else(|_| {
        Err(HttpError::Runtime(io::Error::other(
            "the client thread panicked",
        )))
    })
}

fn is_client_thread(name: &str) -> bool {
    name == THREAD
}

/// What every loop shares.
struct Shared {
    load: Load,
    tls: Option<tokio_rustls::TlsConnector>,
    /// Set while the windows run: the loops count only then.
    measuring: AtomicBool,
    done: AtomicBool,
    server: OnceLock<String>,
    tls_info: OnceLock<TlsInfo>,
    reopened: std::sync::atomic::AtomicU64,
    /// The first error a connection met, for a run where nothing worked.
    first_error: OnceLock<String>,
    body: Bytes,
}

async fn measure(
    load: Load,
    plan: Plan,
    stop: fn() -> bool,
    server_thread: fn(&str) -> bool,
) -> Result<Outcome, HttpError> {
    let tls = load.tls.as_ref().map(|cfg| {
        let mut cfg = (**cfg).clone();
        cfg.alpn_protocols = vec![load.version.alpn().to_vec()];
        tokio_rustls::TlsConnector::from(Arc::new(cfg))
    });
    let shared = Arc::new(Shared {
        body: Bytes::from(vec![b'x'; load.upload as usize]),
        tls,
        measuring: AtomicBool::new(false),
        done: AtomicBool::new(false),
        server: OnceLock::new(),
        tls_info: OnceLock::new(),
        reopened: Default::default(),
        first_error: OnceLock::new(),
        load,
    });
    // Every connection is opened (and its handshakes done) before the
    // warm-up: a server that cannot be reached fails here, plainly.
    let mut opened = Vec::new();
    for _ in 0..shared.load.connections {
        opened.push(open(&shared).await?);
    }
    let tallies: Vec<Arc<Mutex<Tally>>> = opened
        .into_iter()
        .map(|sender| {
            let tally = Arc::new(Mutex::new(Tally::new()));
            tokio::spawn(connection(shared.clone(), sender, tally.clone()));
            tally
        })
        .collect();
    let drain = || {
        let mut sum = Tally::new();
        for t in &tallies {
            let mut t = t.lock().unwrap_or_else(|e| e.into_inner());
            sum.add(&t);
            *t = Tally::new();
        }
        sum
    };
    let mut cut_short = None;
    // The warm-up: connections reach their pace, nothing is counted.
    let warm_end = Instant::now() + plan.warmup;
    while Instant::now() < warm_end && cut_short.is_none() {
        tokio::time::sleep((warm_end - Instant::now()).min(Duration::from_millis(50))).await;
        if stop() {
            cut_short = Some("interrupted (Ctrl-C) in the warm-up".to_string());
        }
    }
    shared.measuring.store(true, Ordering::Relaxed);
    drain();
    let t0 = Instant::now();
    let mut windows = Vec::new();
    'windows: for w in 0..plan.windows {
        if cut_short.is_some() {
            break;
        }
        let start = plan.window.mul_f64(w as f64);
        let end = start + plan.window;
        let before = (
            cpu::snapshot_threads(is_client_thread),
            cpu::snapshot_threads(server_thread),
        );
        let mut intervals: Vec<Counts> = Vec::new();
        let mut edge = start;
        while edge < end {
            let next = (edge + plan.interval).min(end);
            loop {
                let now = t0.elapsed();
                if now >= next {
                    break;
                }
                tokio::time::sleep((next - now).min(Duration::from_millis(50))).await;
                if stop() {
                    cut_short = Some(format!(
                        "interrupted (Ctrl-C) {:.1} s into window {}",
                        (t0.elapsed() - start).as_secs_f64(),
                        w + 1
                    ));
                    break;
                }
            }
            let until = t0.elapsed().min(next);
            intervals.push(Counts::of(
                edge.as_secs_f64(),
                until.as_secs_f64(),
                &drain(),
            ));
            if cut_short.is_some() {
                // A window cut short is kept when it holds a whole interval.
                if intervals.len() < 2 {
                    break 'windows;
                }
                intervals.pop();
                let end_s = intervals.last().map_or(0.0, |i| i.end_s);
                windows.push(window(
                    start.as_secs_f64(),
                    end_s,
                    intervals,
                    &before,
                    server_thread,
                ));
                break 'windows;
            }
            edge = next;
        }
        windows.push(window(
            start.as_secs_f64(),
            end.as_secs_f64(),
            intervals,
            &before,
            server_thread,
        ));
    }
    shared.done.store(true, Ordering::Relaxed);
    if windows.iter().all(|w| w.counts.requests == 0) && cut_short.is_none() {
        let statuses: u64 = windows.iter().map(|w| w.counts.non_2xx).sum();
        return Err(HttpError::Nothing {
            url: shared.load.url.to_string(),
            why: match (statuses, shared.first_error.get()) {
                (n, _) if n > 0 => format!("{n} answers had an error status: is the URL right?"),
                // A clear HTTP/1.1 server takes HTTP/2's preface for a
                // bad request: hyper says only "http2 error".
                (_, Some(e)) if shared.tls.is_none() && shared.load.version == HttpVersion::H2 => {
                    format!("{e}: if the server speaks HTTP/1.1 only in clear, --http-version 1.1")
                }
                (_, Some(e)) => e.clone(),
                _ => "the server answered nothing".into(),
            },
        });
    }
    Ok(Outcome {
        windows,
        protocol: shared.load.version.name(),
        server: shared.server.get().cloned(),
        tls: shared.tls_info.get().cloned(),
        reopened: shared.reopened.load(Ordering::Relaxed),
        cut_short,
    })
}

/// A window's sum of its intervals, and its CPU.
fn window(
    start_s: f64,
    end_s: f64,
    intervals: Vec<Counts>,
    before: &(cpu::CpuSnapshot, cpu::CpuSnapshot),
    server_thread: fn(&str) -> bool,
) -> Window {
    let mut sum = Tally::new();
    for i in &intervals {
        sum.add(&Tally {
            requests: i.requests,
            non_2xx: i.non_2xx,
            failed: i.failed,
            bytes_down: i.bytes_down,
            bytes_up: i.bytes_up,
            hist: i.hist.clone(),
        });
    }
    Window {
        counts: Counts::of(start_s, end_s, &sum),
        intervals,
        cpu_client: cpu::window(&before.0, &cpu::snapshot_threads(is_client_thread)),
        cpu_server: cpu::window(&before.1, &cpu::snapshot_threads(server_thread)),
    }
}

/// An open connection's request half.
enum Sender {
    H1(hyper::client::conn::http1::SendRequest<ReqBody>),
    H2(hyper::client::conn::http2::SendRequest<ReqBody>),
}

impl Sender {
    /// Whether the connection takes another request: false once it is
    /// closed (a server's GOAWAY, or `Connection: close` after its
    /// keep-alive limit), which is not a request's failure.
    async fn ready(&mut self) -> bool {
        match self {
            Sender::H1(s) => s.ready().await.is_ok(),
            Sender::H2(s) => s.ready().await.is_ok(),
        }
    }

    async fn send(
        &mut self,
        req: Request<ReqBody>,
    ) -> hyper::Result<hyper::Response<hyper::body::Incoming>> {
        match self {
            Sender::H1(s) => s.send_request(req).await,
            Sender::H2(s) => s.send_request(req).await,
        }
    }
}

/// Opens a connection: TCP, TLS when asked (ALPN must pick the version
/// asked), then HTTP's own handshake.
async fn open(shared: &Shared) -> Result<Sender, HttpError> {
    let load = &shared.load;
    let addr = &load.connect;
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|source| HttpError::Connect {
            addr: addr.clone(),
            source,
        })?;
    let _ = tcp.set_nodelay(true);
    let http_err = |e: hyper::Error| HttpError::Http {
        host: addr.clone(),
        why: e.to_string(),
    };
    match &shared.tls {
        Some(connector) => {
            let tls_err = |source| HttpError::Tls {
                host: load.server_name.clone(),
                source,
            };
            let name = rustls::pki_types::ServerName::try_from(load.server_name.clone())
                .map_err(|e| tls_err(io::Error::new(io::ErrorKind::InvalidInput, e)))?;
            let refused = || HttpError::Http {
                host: addr.clone(),
                why: format!(
                    "the server did not take {} (ALPN {}): try --http-version {}",
                    load.version.name(),
                    String::from_utf8_lossy(load.version.alpn()),
                    match load.version {
                        HttpVersion::H1 => "2",
                        HttpVersion::H2 => "1.1",
                    }
                ),
            };
            let stream = connector.connect(name, tcp).await.map_err(|e| {
                // A server without the protocol may say so with an alert
                // (nginx) instead of choosing none.
                let alert = e
                    .get_ref()
                    .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                    .is_some_and(|r| {
                        *r == rustls::Error::AlertReceived(
                            rustls::AlertDescription::NoApplicationProtocol,
                        )
                    });
                if alert {
                    refused()
                } else {
                    tls_err(e)
                }
            })?;
            let (_, conn) = stream.get_ref();
            if conn.alpn_protocol() != Some(load.version.alpn()) {
                return Err(refused());
            }
            let _ = shared.tls_info.set(tls_info(conn));
            handshake(load.version, TokioIo::new(stream))
                .await
                .map_err(http_err)
        }
        None => handshake(load.version, TokioIo::new(tcp))
            .await
            .map_err(http_err),
    }
}

async fn handshake<T>(version: HttpVersion, io: T) -> hyper::Result<Sender>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    Ok(match version {
        HttpVersion::H1 => {
            let (send, conn) = hyper::client::conn::http1::handshake(io).await?;
            tokio::spawn(conn);
            Sender::H1(send)
        }
        HttpVersion::H2 => {
            let (send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
                .initial_stream_window_size(H2_WINDOW)
                .initial_connection_window_size(H2_WINDOW)
                .handshake(io)
                .await?;
            tokio::spawn(conn);
            Sender::H2(send)
        }
    })
}

fn tls_info(conn: &rustls::ClientConnection) -> TlsInfo {
    TlsInfo {
        backend: "rustls".into(),
        library: crate::measure::crypto::rustls_library(),
        protocol: conn
            .protocol_version()
            .map(|v| format!("{v:?}").replace("TLSv1_", "TLSv1."))
            .unwrap_or_default(),
        suite: conn
            .negotiated_cipher_suite()
            .map(crate::engine::tls::suite_name)
            .unwrap_or_default(),
        kx_group: conn
            .negotiated_key_exchange_group()
            .map(|g| format!("{:?}", g.name()))
            .unwrap_or_default(),
        etm: None,
        cert: String::new(),
        resumed: conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
    }
}

/// One connection for the whole test: its request loops, and a new
/// connection in its place when it fails.
async fn connection(shared: Arc<Shared>, mut sender: Sender, tally: Arc<Mutex<Tally>>) {
    loop {
        match sender {
            Sender::H1(_) => requests(&shared, sender, &tally).await,
            Sender::H2(s) => {
                let loops: Vec<_> = (0..shared.load.streams)
                    .map(|_| {
                        let (shared, tally) = (shared.clone(), tally.clone());
                        let s = Sender::H2(s.clone());
                        tokio::spawn(async move { requests(&shared, s, &tally).await })
                    })
                    .collect();
                // The loops hold the connection; it closes with them.
                drop(s);
                for l in loops {
                    let _ = l.await;
                }
            }
        }
        if shared.done.load(Ordering::Relaxed) {
            return;
        }
        // At once: a server that closes after its keep-alive limit is not
        // to be left idle; a server that refuses is retried at a pace.
        sender = loop {
            if shared.done.load(Ordering::Relaxed) {
                return;
            }
            match open(&shared).await {
                Ok(s) => break s,
                Err(e) => {
                    let _ = shared.first_error.set(e.to_string());
                    tokio::time::sleep(REOPEN_AFTER).await;
                }
            }
        };
        shared.reopened.fetch_add(1, Ordering::Relaxed);
    }
}

/// One request loop: ask, read the response to its end, count, again;
/// until the test ends or the connection fails.
async fn requests(shared: &Shared, mut sender: Sender, tally: &Mutex<Tally>) {
    let load = &shared.load;
    let target = match Target::of(load, matches!(sender, Sender::H1(_))) {
        Ok(t) => t,
        Err(e) => {
            let _ = shared.first_error.set(e);
            return;
        }
    };
    while !shared.done.load(Ordering::Relaxed) {
        if !sender.ready().await {
            return;
        }
        let req = match request(&target, &shared.body) {
            Ok(r) => r,
            Err(e) => {
                let _ = shared.first_error.set(e);
                return;
            }
        };
        let t = Instant::now();
        let outcome = tokio::time::timeout(REQUEST_TIMEOUT, async {
            let resp = sender.send(req).await.map_err(|e| e.to_string())?;
            if shared.server.get().is_none() {
                if let Some(s) = resp.headers().get(hyper::header::SERVER) {
                    let _ = shared
                        .server
                        .set(String::from_utf8_lossy(s.as_bytes()).into());
                }
            }
            let ok = resp.status().is_success();
            let mut body = resp.into_body();
            let mut got = 0u64;
            while let Some(f) = body.frame().await {
                let f = f.map_err(|e| e.to_string())?;
                if let Some(d) = f.data_ref() {
                    got += d.len() as u64;
                }
            }
            Ok::<_, String>((ok, got))
        })
        .await
        .unwrap_or_else(|_| Err(format!("no response in {} s", REQUEST_TIMEOUT.as_secs())));
        let measuring = shared.measuring.load(Ordering::Relaxed);
        match outcome {
            Ok((ok, got)) => {
                if measuring && !shared.done.load(Ordering::Relaxed) {
                    let mut t_ = tally.lock().unwrap_or_else(|e| e.into_inner());
                    if ok {
                        t_.requests += 1;
                        histogram::record_ns(&mut t_.hist, t.elapsed().as_nanos() as u64);
                    } else {
                        t_.non_2xx += 1;
                    }
                    t_.bytes_down += got;
                    t_.bytes_up += load.upload;
                }
            }
            Err(e) => {
                let _ = shared.first_error.set(e);
                if measuring {
                    tally.lock().unwrap_or_else(|e| e.into_inner()).failed += 1;
                }
                // The connection is likely gone: its loop opens another.
                return;
            }
        }
    }
}

/// What every request of a loop asks, parsed once: the URI (origin form
/// for HTTP/1.1, absolute for HTTP/2, its :authority) and, for HTTP/1.1,
/// the Host header.
struct Target {
    method: hyper::Method,
    uri: Uri,
    host: Option<hyper::header::HeaderValue>,
}

impl Target {
    fn of(load: &Load, h1: bool) -> Result<Target, String> {
        let method = if load.upload > 0 {
            hyper::Method::POST
        } else {
            hyper::Method::GET
        };
        if !h1 {
            return Ok(Target {
                method,
                uri: load.url.clone(),
                host: None,
            });
        }
        let path = load.url.path_and_query().map_or("/", |p| p.as_str());
        let host = load.url.authority().map_or("", |a| a.as_str());
        Ok(Target {
            method,
            uri: path.parse().map_err(|e| format!("{path}: {e}"))?,
            host: Some(host.parse().map_err(|e| format!("{host}: {e}"))?),
        })
    }
}

/// One request: the URI and header values are shared (reference counted),
/// the body is the loop's one buffer.
fn request(t: &Target, body: &Bytes) -> Result<Request<ReqBody>, String> {
    let mut b = Request::builder()
        .method(t.method.clone())
        .uri(t.uri.clone());
    if let Some(host) = &t.host {
        b = b.header(hyper::header::HOST, host.clone());
    }
    b.header(
        hyper::header::USER_AGENT,
        hyper::header::HeaderValue::from_static(concat!("linerate/", env!("CARGO_PKG_VERSION"))),
    )
    .body(Full::new(body.clone()))
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(upload: u64) -> Load {
        Load {
            url: "http://example.test:8080/a/b?c=1".parse().unwrap(),
            connect: "example.test:8080".into(),
            tls: None,
            server_name: "example.test".into(),
            version: HttpVersion::H1,
            connections: 1,
            streams: 1,
            upload,
            threads: 1,
        }
    }

    #[test]
    fn http1_asks_in_origin_form_with_a_host_and_http2_with_the_whole_uri() {
        let body = Bytes::new();
        let r = request(&Target::of(&load(0), true).unwrap(), &body).unwrap();
        assert_eq!(r.method(), "GET");
        assert_eq!(r.uri(), "/a/b?c=1");
        assert_eq!(r.headers()["host"], "example.test:8080");
        let r = request(&Target::of(&load(0), false).unwrap(), &body).unwrap();
        assert_eq!(r.uri(), "http://example.test:8080/a/b?c=1");
        let body = Bytes::from(vec![b'x'; 100]);
        let r = request(&Target::of(&load(100), false).unwrap(), &body).unwrap();
        assert_eq!(r.method(), "POST");
        use hyper::body::Body;
        assert_eq!(r.body().size_hint().exact(), Some(100));
    }
}
