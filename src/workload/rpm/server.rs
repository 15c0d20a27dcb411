//! The RPM server (`linerate serve --rpm ADDR`): what an RPM client needs
//! of a server, per draft-ietf-ippm-responsiveness (section "Server
//! side"), over HTTP/2 and TLS with the agent's certificate, or in clear
//! (HTTP/2 with prior knowledge, and HTTP/1.1) where a host has no TLS:
//!
//! - `GET /.well-known/nq` (also `/config`): the JSON configuration,
//!   naming the three URLs below under both the draft's names
//!   (`small_download_url` ...) and the names Apple's and goresponsiveness's
//!   clients read (`small_https_download_url` ...), at the host the client
//!   asked for (its `:authority` or `Host`);
//! - `GET /api/v1/small`: one byte (the probes' object);
//! - `GET /api/v1/large`: an endless object of zeros, sent for as long as
//!   the client reads it (at most `--max-duration`: the load-generating
//!   downloads);
//! - `POST /api/v1/slurp`: reads and discards the body, then answers 200
//!   (the uploads).
//!
//! hyper serves it on a tokio runtime of its own thread (two workers),
//! beside the agent's own loops; the certificate and TLS library are the
//! agent's (rustls with aws-lc-rs), ALPN h2 and http/1.1.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;

/// Where the configuration is (the draft's well-known URI).
pub const CONFIG_PATH: &str = "/.well-known/nq";
/// The probes' small object.
pub const SMALL_PATH: &str = "/api/v1/small";
/// The load-generating downloads' endless object.
pub const LARGE_PATH: &str = "/api/v1/large";
/// The load-generating uploads' sink.
pub const UPLOAD_PATH: &str = "/api/v1/slurp";
/// What the large object is sent in: one buffer of zeros every response
/// shares (a `Bytes` clone is a reference count, not a copy).
const CHUNK: usize = 256 * 1024;
/// How often the accept loop looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(100);

/// What the server has served, for its last line.
#[derive(Debug, Default)]
pub struct Served {
    pub connections: AtomicU64,
    pub requests: AtomicU64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
}

/// What every request's handler shares.
struct Shared {
    scheme: &'static str,
    /// The address it serves, for a request that names no host.
    local: SocketAddr,
    /// Longest a large download or an upload lasts.
    limit: Duration,
    chunk: Bytes,
    served: Arc<Served>,
}

/// The RPM server, bound and not yet serving.
pub struct RpmServer {
    listener: std::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shared: Arc<Shared>,
}

impl RpmServer {
    /// Binds `addr`; with `tls`, HTTP/2 (or HTTP/1.1) over TLS with that
    /// config (ALPN set here), else clear. `limit`: the longest transfer.
    pub fn bind(
        addr: SocketAddr,
        tls: Option<Arc<rustls::ServerConfig>>,
        limit: Duration,
    ) -> io::Result<RpmServer> {
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        RpmServer::on(listener, tls, limit)
    }

    /// The server on a bound, non-blocking listener.
    pub fn on(
        listener: std::net::TcpListener,
        tls: Option<Arc<rustls::ServerConfig>>,
        limit: Duration,
    ) -> io::Result<RpmServer> {
        let local = listener.local_addr()?;
        let tls = tls.map(|cfg| {
            let mut cfg = (*cfg).clone();
            cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
            tokio_rustls::TlsAcceptor::from(Arc::new(cfg))
        });
        let scheme = if tls.is_some() { "https" } else { "http" };
        Ok(RpmServer {
            listener,
            tls,
            shared: Arc::new(Shared {
                scheme,
                local,
                limit,
                chunk: Bytes::from(vec![0u8; CHUNK]),
                served: Arc::new(Served::default()),
            }),
        })
    }

    /// The configuration's URL, as a client reaches this server.
    pub fn config_url(&self) -> String {
        format!(
            "{}://{}{CONFIG_PATH}",
            self.shared.scheme, self.shared.local
        )
    }

    /// Its counters (live while it serves).
    pub fn served(&self) -> Arc<Served> {
        self.shared.served.clone()
    }

    /// Serves until `stop` is set; connections under way then end.
    pub fn run(self, stop: &AtomicBool) -> io::Result<()> {
        // hyper writes with writev, which has no MSG_NOSIGNAL: a client
        // gone mid-transfer would raise SIGPIPE in the writing thread.
        crate::engine::signals::block_in_this_thread();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("rpm")
            .on_thread_start(crate::engine::signals::block_in_this_thread)
            .enable_all()
            .build()?;
        let RpmServer {
            listener,
            tls,
            shared,
        } = self;
        let result = rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            while !stop.load(Ordering::Relaxed) {
                let Ok(accepted) = tokio::time::timeout(STOP_POLL, listener.accept()).await else {
                    continue;
                };
                let tcp = match accepted {
                    Ok((tcp, _)) => tcp,
                    // Out of descriptors or a connection reset before it
                    // was taken: the listener itself is fine.
                    Err(_) => {
                        tokio::time::sleep(STOP_POLL).await;
                        continue;
                    }
                };
                super::tune(&tcp);
                shared.served.connections.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(connection(tcp, tls.clone(), shared.clone()));
            }
            Ok::<(), io::Error>(())
        });
        // Transfers under way end with the runtime.
        rt.shutdown_timeout(Duration::from_secs(1));
        result
    }
}

/// One client connection: its TLS handshake when there is TLS, then
/// HTTP/2 or HTTP/1.1, whichever it speaks.
async fn connection(
    tcp: tokio::net::TcpStream,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shared: Arc<Shared>,
) {
    let service = hyper::service::service_fn(move |req| {
        let shared = shared.clone();
        async move { Ok::<_, Infallible>(handle(req, &shared).await) }
    });
    let mut http = auto::Builder::new(TokioExecutor::new());
    http.http2().max_send_buf_size(super::STREAM_SEND_BUFFER);
    // A client that goes away mid-transfer ends its connection; nothing
    // to report.
    match tls {
        Some(acceptor) => {
            if let Ok(stream) = acceptor.accept(tcp).await {
                let _ = http.serve_connection(TokioIo::new(stream), service).await;
            }
        }
        None => {
            let _ = http.serve_connection(TokioIo::new(tcp), service).await;
        }
    }
}

type Reply = Response<BoxBody<Bytes, Infallible>>;

fn text(status: StatusCode, body: String) -> Reply {
    Response::builder()
        .status(status)
        .header("content-type", "text/plain")
        .body(Full::new(Bytes::from(body)).boxed())
        .expect("a static response")
}

/// What a request asks for.
enum Route {
    Config,
    Small,
    Large,
    Upload,
    Unknown,
}

fn route(method: &Method, path: &str) -> Route {
    match (method, path) {
        (&Method::GET, CONFIG_PATH | "/config") => Route::Config,
        (&Method::GET, SMALL_PATH) => Route::Small,
        (&Method::GET, LARGE_PATH) => Route::Large,
        (&Method::POST | &Method::PUT, UPLOAD_PATH) => Route::Upload,
        _ => Route::Unknown,
    }
}

/// One request.
async fn handle(req: Request<Incoming>, shared: &Shared) -> Reply {
    shared.served.requests.fetch_add(1, Ordering::Relaxed);
    match route(req.method(), req.uri().path()) {
        Route::Config => config(&req, shared),
        Route::Small => {
            shared.served.bytes_out.fetch_add(1, Ordering::Relaxed);
            Response::builder()
                .header("content-type", "application/octet-stream")
                .header("cache-control", "no-store")
                .body(Full::new(Bytes::from_static(b"x")).boxed())
                .expect("a static response")
        }
        Route::Large => Response::builder()
            .header("content-type", "application/octet-stream")
            .header("cache-control", "no-store")
            .body(
                Endless {
                    chunk: shared.chunk.clone(),
                    until: Instant::now() + shared.limit,
                    served: shared.served.clone(),
                }
                .boxed(),
            )
            .expect("a static response"),
        Route::Upload => {
            let got = slurp(req.into_body(), shared).await;
            text(StatusCode::OK, format!("{got}\n"))
        }
        _ => text(
            StatusCode::NOT_FOUND,
            format!(
                "not an RPM URL: this server has {CONFIG_PATH}, {SMALL_PATH}, {LARGE_PATH} and {UPLOAD_PATH} (POST)\n"
            ),
        ),
    }
}

/// The configuration, at the host the client asked for.
fn config(req: &Request<Incoming>, shared: &Shared) -> Reply {
    let host = req
        .uri()
        .authority()
        .map(|a| a.as_str().to_string())
        .or_else(|| {
            req.headers()
                .get(hyper::header::HOST)
                .and_then(|h| h.to_str().ok())
                .map(str::to_string)
        })
        .unwrap_or_else(|| shared.local.to_string());
    let url = |path: &str| format!("{}://{host}{path}", shared.scheme);
    let body = serde_json::json!({
        "version": 1,
        "urls": {
            "small_download_url": url(SMALL_PATH),
            "large_download_url": url(LARGE_PATH),
            "upload_url": url(UPLOAD_PATH),
            "small_https_download_url": url(SMALL_PATH),
            "large_https_download_url": url(LARGE_PATH),
            "https_upload_url": url(UPLOAD_PATH),
        },
    });
    Response::builder()
        .header("content-type", "application/json")
        .header("cache-control", "no-store")
        .body(Full::new(Bytes::from(body.to_string())).boxed())
        .expect("a static response")
}

/// Reads an upload to its end (or `limit`), counting it: its bytes.
async fn slurp(mut body: Incoming, shared: &Shared) -> u64 {
    let until = Instant::now() + shared.limit;
    let mut got = 0u64;
    while let Some(Ok(frame)) = body.frame().await {
        if let Some(data) = frame.data_ref() {
            got += data.len() as u64;
            shared
                .served
                .bytes_in
                .fetch_add(data.len() as u64, Ordering::Relaxed);
        }
        if Instant::now() >= until {
            break;
        }
    }
    got
}

/// The large object: the same chunk of zeros for as long as the client
/// reads (HTTP/2's flow control asks for each frame), up to its time.
struct Endless {
    chunk: Bytes,
    until: Instant,
    served: Arc<Served>,
}

impl Body for Endless {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if Instant::now() >= self.until {
            return Poll::Ready(None);
        }
        self.served
            .bytes_out
            .fetch_add(self.chunk.len() as u64, Ordering::Relaxed);
        Poll::Ready(Some(Ok(Frame::data(self.chunk.clone()))))
    }

    fn is_end_stream(&self) -> bool {
        false
    }
}
