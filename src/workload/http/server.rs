//! The server an http test starts when it names no `--http-url`: every
//! GET gets the same object of `--response` bytes, every POST or PUT is
//! read to its end and answered the same way, over HTTP/1.1 or HTTP/2
//! (hyper's auto connection: ALPN under TLS, the preface in clear), with
//! the agent's certificate and TLS library (rustls). It runs on a tokio
//! runtime of its own thread, on loopback or in a lab's server namespace,
//! and stops when the test drops it.

use std::convert::Infallible;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;

use crate::workload::kind::Place;
use crate::workload::local_server::{self, LocalServer};

/// The threads of a server in this process, by name (its CPU is theirs).
pub const THREAD: &str = "http-server";

/// The HTTP/2 windows the server grants (for uploads): the client's.
const H2_WINDOW: u32 = (1 << 30) - 1;

/// How often the accept loop looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(100);

/// Starts a server answering `object` bytes where `place` says (the lab's
/// server namespace, or loopback); with `tls`, HTTPS. Its URL, and the
/// guard that stops it.
pub fn start(
    place: &Place,
    ipv6: bool,
    object: u64,
    tls: Option<Arc<rustls::ServerConfig>>,
    threads: usize,
) -> Result<(LocalServer, String), String> {
    let scheme = if tls.is_some() { "https" } else { "http" };
    let tls = tls.map(|cfg| {
        let mut cfg = (*cfg).clone();
        cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        tokio_rustls::TlsAcceptor::from(Arc::new(cfg))
    });
    let object = Bytes::from(vec![b'x'; object as usize]);
    let server = local_server::start(place, ipv6, THREAD, move |listener, stop| {
        serve(listener, tls, object, stop, threads)
    })
    .map_err(|e| format!("http: the local server: {e}"))?;
    let url = format!("{scheme}://{}/", server.addr);
    Ok((server, url))
}

/// Serves until `stop` is set.
fn serve(
    listener: std::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    object: Bytes,
    stop: &AtomicBool,
    threads: usize,
) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .thread_name(THREAD)
        .on_thread_start(crate::engine::signals::block_in_this_thread)
        .enable_all()
        .build()?;
    let result = rt.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        while !stop.load(Ordering::Relaxed) {
            let Ok(accepted) = tokio::time::timeout(STOP_POLL, listener.accept()).await else {
                continue;
            };
            let Ok((tcp, _)) = accepted else {
                // Out of descriptors, or reset before it was taken.
                tokio::time::sleep(STOP_POLL).await;
                continue;
            };
            let _ = tcp.set_nodelay(true);
            tokio::spawn(connection(tcp, tls.clone(), object.clone()));
        }
        Ok::<(), io::Error>(())
    });
    rt.shutdown_timeout(Duration::from_millis(500));
    result
}

/// One connection: TLS when asked, then whichever HTTP it speaks.
async fn connection(
    tcp: tokio::net::TcpStream,
    tls: Option<tokio_rustls::TlsAcceptor>,
    object: Bytes,
) {
    let service = hyper::service::service_fn(move |req| {
        let object = object.clone();
        async move { Ok::<_, Infallible>(answer(req, object).await) }
    });
    let mut http = auto::Builder::new(TokioExecutor::new());
    // What a POST may send before the server reads it: as the client's.
    http.http2()
        .initial_stream_window_size(H2_WINDOW)
        .initial_connection_window_size(H2_WINDOW);
    // A client that goes away ends its connection: nothing to report.
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

/// One request: a body read to its end, then the object.
async fn answer(req: Request<Incoming>, object: Bytes) -> Response<Full<Bytes>> {
    let status = match *req.method() {
        Method::GET | Method::HEAD => StatusCode::OK,
        Method::POST | Method::PUT => {
            let mut body = req.into_body();
            while let Some(Ok(_)) = body.frame().await {}
            StatusCode::OK
        }
        _ => StatusCode::METHOD_NOT_ALLOWED,
    };
    Response::builder()
        .status(status)
        .header("content-type", "application/octet-stream")
        .header("server", concat!("linerate/", env!("CARGO_PKG_VERSION")))
        .body(Full::new(if status == StatusCode::OK {
            object
        } else {
            Bytes::new()
        }))
        .expect("a static response")
}
