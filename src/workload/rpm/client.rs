//! The RPM client (`linerate run rpm`): draft-ietf-ippm-responsiveness-08's
//! method against any RPM server.
//!
//! - The configuration at the server's well-known URL names the small
//!   object, the large one and the upload sink (the draft's names and the
//!   older ones goresponsiveness and Apple's servers use).
//! - Before any load, requests on one idle connection give the idle round
//!   trip.
//! - Load-generating connections (HTTP/2, over TLS unless the URL is
//!   http://): downloads of the large object, uploads to the sink, one more
//!   each way every interval until the goodput's moving average is stable
//!   (or MNP connections), then no more.
//! - Probes throughout: foreign probes (a new connection: TCP handshake,
//!   TLS handshake per round trip, the small object's request) and self
//!   probes (the small object asked on a load-generating connection), as
//!   pairs spread over each interval, at most MPS probes a second and at
//!   most PTC of the goodput.
//! - Once the goodput is stable, the responsiveness of the probes of the
//!   last MAD intervals is computed every interval; the test ends when it
//!   is stable too, or at the time limit with the draft's confidence.
//!
//! hyper's client connections (hyper::client::conn::http2) on a tokio
//! runtime of this call's own: the connection is the unit the draft
//! counts, so no pool hides which one a request took.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Empty};
use hyper::body::{Body, Frame};
use hyper::client::conn::http2::SendRequest;
use hyper::{Request, Uri};
use hyper_util::rt::{TokioExecutor, TokioIo};

use super::method::{self, ProbeTimes};
use super::pace::Pace;
use crate::measure::cpu;
use crate::workload::rpm::params::{Responsiveness, RpmInterval, RpmOrder, RpmSpec, DRAFT};

type ReqBody = BoxBody<Bytes, std::convert::Infallible>;

/// The client's threads (this call's and its runtime's), by name.
const CLIENT_THREAD: &str = "rpm-client";

fn is_client_thread(name: &str) -> bool {
    name == CLIENT_THREAD
}

/// A server's threads in this process (`server.rs`: "rpm-server" and its
/// runtime's "rpm").
pub(super) fn is_server_thread(name: &str) -> bool {
    name == "rpm" || name == "rpm-server"
}

/// Whether the test should end now (Ctrl-C).
pub type Stop = fn() -> bool;

/// What an upload sends: one buffer of zeros, shared.
const UPLOAD_CHUNK: usize = 64 * 1024;
/// A paced upload's smallest chunk: at 1 Mbit/s, one every 33 ms.
const PACED_CHUNK: usize = 4 * 1024;

/// An upload's chunk: 64 KiB unpaced; paced, a millisecond of the budget
/// (a whole 64 KiB at a low rate is a burst at line rate every few
/// milliseconds; 4 KiB at gigabits is a budget lock and a poll per 16 µs).
fn upload_chunk(load_bps: Option<f64>) -> usize {
    match load_bps {
        None => UPLOAD_CHUNK,
        Some(b) => ((b / 8.0 / 1000.0) as usize).clamp(PACED_CHUNK, UPLOAD_CHUNK),
    }
}
/// Requests on the idle connection before the load: their median is the
/// idle round trip.
const IDLE_PROBES: usize = 10;
/// Bytes a foreign probe costs on the wire (a TCP and TLS handshake and a
/// request: the draft's estimate) and a self probe at most.
const FOREIGN_BYTES: f64 = 5000.0;
const SELF_BYTES: f64 = 1000.0;
/// Longest a probe may take before it counts as lost (it is left out).
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where and how to test.
pub struct Target {
    /// The configuration URL.
    pub url: String,
    /// TLS client settings (ALPN is set here); None for http:// URLs.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// The name the server's certificate must show (None: the URL's host).
    pub server_name: Option<String>,
}

/// Why a run ended without a figure.
#[derive(Debug, thiserror::Error)]
pub enum RpmError {
    #[error("rpm: {url}: {why}")]
    Config { url: String, why: String },
    #[error("rpm: cannot reach {addr}: {source}")]
    Connect {
        addr: String,
        #[source]
        source: io::Error,
    },
    #[error("rpm: TLS with {host}: {source} (its certificate: --tls-ca FILE and --tls-name NAME)")]
    Tls {
        host: String,
        #[source]
        source: io::Error,
    },
    #[error("rpm: HTTP/2 with {host}: {why}")]
    Http { host: String, why: String },
    #[error("rpm: a load-generating connection failed ({why}); the draft aborts the test")]
    LoadFailed { why: String },
    #[error("rpm: runtime: {0}")]
    Runtime(#[source] io::Error),
}

/// The three URLs the configuration names.
#[derive(Clone, Debug)]
struct Urls {
    small: Uri,
    large: Uri,
    upload: Uri,
    /// Where to connect (the URLs' host, or the configuration's
    /// `test_endpoint`), and the port.
    connect: String,
}

/// Runs the test; `stop` ends it early (Ctrl-C): what was measured is kept.
/// On a thread of its own, SIGPIPE blocked there and in the runtime's
/// workers (hyper writes with writev, which has no MSG_NOSIGNAL; the main
/// thread keeps SIGPIPE fatal for `linerate ... | head`).
pub fn run(
    spec: &RpmSpec,
    target: Target,
    limit: Duration,
    stop: Stop,
) -> Result<Outcome, RpmError> {
    let spec = spec.clone();
    let thread = std::thread::Builder::new()
        .name(CLIENT_THREAD.into())
        .spawn(move || {
            crate::engine::signals::block_in_this_thread();
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name(CLIENT_THREAD)
                .on_thread_start(crate::engine::signals::block_in_this_thread)
                .enable_all()
                .build()
                .map_err(RpmError::Runtime)?;
            let out = rt.block_on(async {
                Client::new(&spec, &target)
                    .await?
                    .measure(limit, &stop)
                    .await
            });
            rt.shutdown_timeout(Duration::from_millis(500));
            out
        })
        .map_err(RpmError::Runtime)?;
    thread.join().unwrap_or_else(|_| {
        Err(RpmError::Runtime(io::Error::other(
            "the client thread panicked",
        )))
    })
}

/// A run's figures, and whether it ended early.
pub struct Outcome {
    pub figures: Responsiveness,
    /// CPU over the loaded phases: the client's threads, and the threads
    /// of a server started in this process (theirs is zero otherwise).
    pub cpu_client: crate::model::sample::CpuWindow,
    pub cpu_server: crate::model::sample::CpuWindow,
    /// Why it ended before the method did (Ctrl-C), if it did.
    pub cut_short: Option<String>,
}

struct Client {
    spec: RpmSpec,
    urls: Urls,
    tls: Option<tokio_rustls::TlsConnector>,
    server_name: String,
    url: String,
    chunk: Bytes,
    /// The load's budget each way (`RpmSpec::load_bps`), shared by the
    /// direction's connections.
    pace_down: Option<Arc<Pace>>,
    pace_up: Option<Arc<Pace>>,
}

/// One probe's result, when it ended (seconds from the loaded phase's start).
#[derive(Clone, Copy, Debug)]
enum Probe {
    Foreign {
        tcp: f64,
        tls: Option<f64>,
        http: f64,
    },
    Selfp {
        http: f64,
        up: bool,
    },
}

/// An HTTP/2 connection just opened, and what its handshakes took (ms;
/// TLS per round trip).
struct Opened {
    send: SendRequest<ReqBody>,
    tcp_ms: f64,
    tls_ms: Option<f64>,
    /// The socket (a second descriptor of it), for TCP_INFO.
    fd: OwnedFd,
}

/// A load-generating connection: its request handle (for self probes)
/// and what it moved.
struct LoadConn {
    send: SendRequest<ReqBody>,
    /// A download's bytes read.
    bytes: Arc<AtomicU64>,
    fd: OwnedFd,
    delivered_at_start: u64,
    up: bool,
    /// When its transfer was asked for.
    started: Instant,
}

impl LoadConn {
    /// Bytes moved so far: a download's read, an upload's delivered to the
    /// server (TCP_INFO: acknowledged, not merely handed to HTTP/2, whose
    /// buffers and the socket's would count megabytes never sent).
    fn moved(&self) -> u64 {
        if self.up {
            crate::measure::tcpinfo::delivered(self.fd.as_raw_fd())
                .unwrap_or(self.delivered_at_start)
                .saturating_sub(self.delivered_at_start)
        } else {
            self.bytes.load(Ordering::Relaxed)
        }
    }
}

struct Direction {
    up: bool,
    conns: Vec<LoadConn>,
    /// Bytes per interval, and its moving averages (bits/s).
    per_interval: Vec<f64>,
    averages: Vec<f64>,
    last_total: u64,
    stable: bool,
    /// Connections being opened.
    opening: usize,
}

impl Client {
    async fn new(spec: &RpmSpec, target: &Target) -> Result<Client, RpmError> {
        let url: Uri = target.url.parse().map_err(|e| RpmError::Config {
            url: target.url.clone(),
            why: format!("not a URL: {e}"),
        })?;
        let host = url.host().unwrap_or_default().to_string();
        let tls = match (url.scheme_str(), &target.tls) {
            (Some("https"), Some(cfg)) => {
                let mut cfg = (**cfg).clone();
                cfg.alpn_protocols = vec![b"h2".to_vec()];
                Some(tokio_rustls::TlsConnector::from(Arc::new(cfg)))
            }
            (Some("https"), None) => {
                return Err(RpmError::Config {
                    url: target.url.clone(),
                    why: "https without TLS settings".into(),
                })
            }
            _ => None,
        };
        let mut client = Client {
            spec: spec.clone(),
            urls: Urls {
                small: url.clone(),
                large: url.clone(),
                upload: url.clone(),
                connect: authority(&url),
            },
            tls,
            server_name: target.server_name.clone().unwrap_or(host),
            url: target.url.clone(),
            chunk: Bytes::from(vec![0u8; upload_chunk(spec.load_bps)]),
            pace_down: spec.load_bps.map(|b| Arc::new(Pace::new(b))),
            pace_up: spec.load_bps.map(|b| Arc::new(Pace::new(b))),
        };
        client.urls = client.config(&url).await?;
        Ok(client)
    }

    /// Reads the configuration: the draft's names, or the older ones.
    async fn config(&self, url: &Uri) -> Result<Urls, RpmError> {
        let bad = |why: String| RpmError::Config {
            url: self.url.clone(),
            why,
        };
        let mut send = self.open(&authority(url)).await?.send;
        let body = get(&mut send, url, usize::MAX)
            .await
            .map_err(|why| bad(format!("the configuration: {why}")))?;
        let v: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|e| bad(format!("the configuration is not JSON: {e}")))?;
        let urls = &v["urls"];
        let pick = |names: &[&str]| -> Result<Uri, RpmError> {
            let s = names
                .iter()
                .find_map(|n| urls[*n].as_str())
                .ok_or_else(|| bad(format!("the configuration has no urls.{}", names[0])))?;
            s.parse::<Uri>()
                .map_err(|e| bad(format!("urls.{}: {s}: {e}", names[0])))
        };
        let small = pick(&["small_download_url", "small_https_download_url"])?;
        let large = pick(&["large_download_url", "large_https_download_url"])?;
        let upload = pick(&["upload_url", "https_upload_url"])?;
        for u in [&small, &large, &upload] {
            if u.host() != small.host() || u.port_u16() != small.port_u16() {
                return Err(bad(
                    "its three URLs name different hosts (the draft: invalid)".into(),
                ));
            }
        }
        // `test_endpoint`: connect there, keep the URLs' host names.
        let connect = match v["test_endpoint"].as_str() {
            Some(h) if !h.is_empty() => {
                let port = small
                    .port_u16()
                    .unwrap_or(if self.tls.is_some() { 443 } else { 80 });
                if h.contains(':') && !h.starts_with('[') {
                    format!("[{h}]:{port}")
                } else {
                    format!("{h}:{port}")
                }
            }
            _ => authority(&small),
        };
        Ok(Urls {
            small,
            large,
            upload,
            connect,
        })
    }

    /// Opens an HTTP/2 connection to `addr`: TCP, TLS when asked.
    async fn open(&self, addr: &str) -> Result<Opened, RpmError> {
        let t0 = Instant::now();
        let tcp = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|source| RpmError::Connect {
                addr: addr.to_string(),
                source,
            })?;
        let tcp_ms = t0.elapsed().as_secs_f64() * 1e3;
        // What waits unsent in the socket: the client's side of a self
        // probe's wait.
        super::tune(&tcp);
        // The socket's own, for what it delivered (an upload's goodput).
        let fd = tcp
            .as_fd()
            .try_clone_to_owned()
            .map_err(|source| RpmError::Connect {
                addr: addr.to_string(),
                source,
            })?;
        let h2 = || {
            let mut b = hyper::client::conn::http2::Builder::new(TokioExecutor::new());
            b.initial_stream_window_size(4 << 20)
                .initial_connection_window_size(8 << 20)
                .adaptive_window(true)
                .max_send_buf_size(super::STREAM_SEND_BUFFER);
            b
        };
        let http_err = |e: hyper::Error| RpmError::Http {
            host: addr.to_string(),
            why: e.to_string(),
        };
        match &self.tls {
            Some(connector) => {
                let name = rustls::pki_types::ServerName::try_from(self.server_name.clone())
                    .map_err(|e| RpmError::Tls {
                        host: self.server_name.clone(),
                        source: io::Error::new(io::ErrorKind::InvalidInput, e),
                    })?;
                let t1 = Instant::now();
                let stream =
                    connector
                        .connect(name, tcp)
                        .await
                        .map_err(|source| RpmError::Tls {
                            host: self.server_name.clone(),
                            source,
                        })?;
                let (_, conn) = stream.get_ref();
                // A TLS 1.3 handshake is one round trip, 1.2's two.
                let trips = match conn.protocol_version() {
                    Some(rustls::ProtocolVersion::TLSv1_2) => 2.0,
                    _ => 1.0,
                };
                if conn.alpn_protocol() != Some(b"h2") {
                    return Err(RpmError::Http {
                        host: addr.to_string(),
                        why: "the server did not take HTTP/2 (ALPN h2)".into(),
                    });
                }
                let tls_ms = t1.elapsed().as_secs_f64() * 1e3 / trips;
                let (send, conn) = h2()
                    .handshake(TokioIo::new(stream))
                    .await
                    .map_err(http_err)?;
                tokio::spawn(conn);
                Ok(Opened {
                    send,
                    tcp_ms,
                    tls_ms: Some(tls_ms),
                    fd,
                })
            }
            None => {
                let (send, conn) = h2().handshake(TokioIo::new(tcp)).await.map_err(http_err)?;
                tokio::spawn(conn);
                Ok(Opened {
                    send,
                    tcp_ms,
                    tls_ms: None,
                    fd,
                })
            }
        }
    }

    /// The whole method, up to `limit` for each direction's phase.
    async fn measure(self, limit: Duration, stop: &Stop) -> Result<Outcome, RpmError> {
        let client = Arc::new(self);
        let idle_rtt_ms = client.idle_rtt().await?;
        let phases: Vec<Vec<bool>> = match client.spec.order {
            RpmOrder::Parallel => vec![vec![false, true]],
            RpmOrder::Sequential => vec![vec![false], vec![true]],
        };
        let mut figures = Responsiveness {
            draft: DRAFT.into(),
            url: client.url.clone(),
            idle_rtt_us: idle_rtt_ms * 1e3,
            ..Default::default()
        };
        let mut probes_all = ProbeTimes::default();
        let mut cut_short = None;
        let mut stable_all = (true, true);
        let mut intervals_min = usize::MAX;
        let before = (
            cpu::snapshot_threads(is_client_thread),
            cpu::snapshot_threads(is_server_thread),
        );
        for dirs in phases {
            let phase = Phase::run(client.clone(), &dirs, limit, stop).await?;
            intervals_min = intervals_min.min(phase.intervals.len());
            let t0 = figures.intervals.last().map_or(0.0, |i| i.t_s);
            figures
                .intervals
                .extend(phase.intervals.iter().cloned().map(|mut i| {
                    i.t_s += t0;
                    i
                }));
            for d in &phase.dirs {
                let cap = d.averages.last().copied().unwrap_or(0.0);
                let n = d.conns.len() as u32;
                if d.up {
                    figures.capacity_up_bps = cap;
                    figures.up_connections = n;
                } else {
                    figures.capacity_down_bps = cap;
                    figures.down_connections = n;
                }
                stable_all.0 &= d.stable;
            }
            stable_all.1 &= phase.responsiveness_stable;
            let p = phase.window_probes();
            probes_all.append(p);
            figures.foreign_probes += phase.foreign_count;
            figures.self_probes += phase.self_count;
            if stop() {
                cut_short = Some("interrupted".to_string());
                break;
            }
        }
        let after = (
            cpu::snapshot_threads(is_client_thread),
            cpu::snapshot_threads(is_server_thread),
        );
        figures.goodput_stable = stable_all.0;
        figures.responsiveness_stable = stable_all.1;
        let mad = client.spec.mad as usize;
        let n = if intervals_min == usize::MAX {
            0
        } else {
            intervals_min
        };
        let c =
            method::confidence(n, mad, stable_all.0).min(method::confidence(n, mad, stable_all.1));
        figures.confidence = Some(c);
        if let Some(r) = method::rpm(&probes_all, client.spec.tmp_pct) {
            figures.rpm = r.rpm;
            figures.foreign_rpm = r.foreign;
            figures.self_rpm = r.selfp;
            figures.tcp_handshake_us = r.tcp_ms * 1e3;
            figures.tls_handshake_us = r.tls_ms.unwrap_or(0.0) * 1e3;
            figures.http_foreign_us = r.http_foreign_ms * 1e3;
            figures.http_self_us = r.http_self_ms * 1e3;
            let tm = |v: &[f64]| method::trimmed_mean(v, client.spec.tmp_pct).map(|ms| ms * 1e3);
            figures.http_self_down_us = tm(&probes_all.http_self_down);
            figures.http_self_up_us = tm(&probes_all.http_self_up);
        } else if cut_short.is_none() {
            cut_short = Some("no probe completed under load".into());
        }
        Ok(Outcome {
            figures,
            cut_short,
            cpu_client: cpu::window(&before.0, &after.0),
            cpu_server: cpu::window(&before.1, &after.1),
        })
    }

    /// The median of requests for the small object on one idle connection.
    async fn idle_rtt(&self) -> Result<f64, RpmError> {
        let mut send = self.open(&self.urls.connect).await?.send;
        let mut times = Vec::with_capacity(IDLE_PROBES);
        for _ in 0..IDLE_PROBES {
            let t = Instant::now();
            get(&mut send, &self.urls.small, 1 << 20)
                .await
                .map_err(|why| RpmError::Http {
                    host: self.urls.connect.clone(),
                    why: format!("the small object: {why}"),
                })?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        Ok(times[times.len() / 2])
    }

    /// Opens a load-generating connection and starts its transfer.
    async fn load(
        &self,
        up: bool,
        failed: Arc<Mutex<Option<String>>>,
    ) -> Result<LoadConn, RpmError> {
        let o = self.open(&self.urls.connect).await?;
        let send = o.send;
        let delivered_at_start = crate::measure::tcpinfo::delivered(o.fd.as_raw_fd()).unwrap_or(0);
        let bytes = Arc::new(AtomicU64::new(0));
        let mut s = send.clone();
        let counter = bytes.clone();
        let pace = self.pace_down.clone().filter(|_| !up);
        let req = if up {
            Request::post(self.urls.upload.clone())
                .header("content-type", "application/octet-stream")
                .body(BoxBody::new(Zeros {
                    chunk: self.chunk.clone(),
                    pace: self.pace_up.clone(),
                    wait: None,
                }))
        } else {
            Request::get(self.urls.large.clone())
                .header("accept-encoding", "identity")
                .body(empty())
        }
        .map_err(|e| RpmError::Http {
            host: self.urls.connect.clone(),
            why: e.to_string(),
        })?;
        tokio::spawn(async move {
            let r: Result<(), String> = async {
                let resp = s.send_request(req).await.map_err(|e| e.to_string())?;
                if !resp.status().is_success() {
                    return Err(format!("status {}", resp.status()));
                }
                let mut body = resp.into_body();
                while let Some(f) = body.frame().await {
                    let f = f.map_err(|e| e.to_string())?;
                    if let Some(d) = f.data_ref() {
                        if !up {
                            counter.fetch_add(d.len() as u64, Ordering::Relaxed);
                        }
                        // Capped: the next frame is read (and its credit
                        // returned to the server) when the budget allows.
                        if let Some(p) = &pace {
                            let at = p.reserve(d.len());
                            if at > Instant::now() {
                                tokio::time::sleep_until(at.into()).await;
                            }
                        }
                    }
                }
                Err("the server ended the transfer".into())
            }
            .await;
            if let Err(why) = r {
                let mut f = failed.lock().unwrap_or_else(|e| e.into_inner());
                f.get_or_insert(why);
            }
        });
        Ok(LoadConn {
            send,
            bytes,
            fd: o.fd,
            delivered_at_start,
            up,
            started: Instant::now(),
        })
    }

    /// A foreign probe: a new connection and the small object on it.
    async fn foreign(&self) -> Option<Probe> {
        let o = self.open(&self.urls.connect).await.ok()?;
        let (mut send, tcp, tls) = (o.send, o.tcp_ms, o.tls_ms);
        let t = Instant::now();
        get(&mut send, &self.urls.small, 1 << 20).await.ok()?;
        Some(Probe::Foreign {
            tcp,
            tls,
            http: t.elapsed().as_secs_f64() * 1e3,
        })
    }
}

/// One loaded phase: its directions' connections, intervals and probes.
struct Phase {
    dirs: Vec<Direction>,
    intervals: Vec<RpmInterval>,
    /// Probes that ended, with the interval they ended in.
    probes: Vec<(usize, Probe)>,
    mad: usize,
    responsiveness_stable: bool,
    foreign_count: u64,
    self_count: u64,
}

impl Phase {
    async fn run(
        client: Arc<Client>,
        dirs: &[bool],
        limit: Duration,
        stop: &Stop,
    ) -> Result<Phase, RpmError> {
        let spec = client.spec.clone();
        let mad = spec.mad as usize;
        let id = Duration::from_secs_f64(spec.interval_s);
        let failed: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
        let done: Arc<Mutex<Vec<Probe>>> = Arc::new(Mutex::new(Vec::new()));
        let mut phase = Phase {
            dirs: Vec::new(),
            intervals: Vec::new(),
            probes: Vec::new(),
            mad,
            responsiveness_stable: false,
            foreign_count: 0,
            self_count: 0,
        };
        for &up in dirs {
            let c = client.load(up, failed.clone()).await?;
            phase.dirs.push(Direction {
                up,
                conns: vec![c],
                per_interval: Vec::new(),
                averages: Vec::new(),
                last_total: 0,
                stable: false,
                opening: 0,
            });
        }
        // Connections added later open in the background: a handshake
        // through a full queue takes seconds, which no interval may wait.
        let (opened_tx, mut opened) =
            tokio::sync::mpsc::unbounded_channel::<(usize, Result<LoadConn, RpmError>)>();
        let start = Instant::now();
        let mut last_sample = start;
        let mut rpms: Vec<f64> = Vec::new();
        let mut budget_bps = f64::INFINITY;
        let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(0x0052_504d);
        loop {
            let interval_start = Instant::now();
            let index = phase.intervals.len();
            phase
                .probe_interval(&client, interval_start, budget_bps, &mut rng, &done, stop)
                .await;
            tokio::time::sleep_until((interval_start + id).into()).await;
            if let Some(why) = failed.lock().unwrap_or_else(|e| e.into_inner()).take() {
                return Err(RpmError::LoadFailed { why });
            }
            while let Ok((i, c)) = opened.try_recv() {
                let d: &mut Direction = &mut phase.dirs[i];
                d.opening -= 1;
                match c {
                    Ok(c) => {
                        // Started in this interval: what it moved is this
                        // interval's (left out, a capped load's total dips
                        // by it each time a connection joins). Started
                        // before the last sample (a handshake slower than
                        // an interval): counted from now, as the earlier
                        // intervals are closed.
                        if c.started < last_sample {
                            d.last_total += c.moved();
                        }
                        d.conns.push(c);
                    }
                    Err(e) => return Err(RpmError::LoadFailed { why: e.to_string() }),
                }
            }
            // This interval's goodput each way, over the time it really took.
            let now = Instant::now();
            let secs = now.duration_since(last_sample).as_secs_f64().max(1e-6);
            last_sample = now;
            budget_bps = phase.sample_goodput(secs, &spec);
            {
                let mut done = done.lock().unwrap_or_else(|e| e.into_inner());
                phase.probes.extend(done.drain(..).map(|p| (index, p)));
            }
            let interval_rpm =
                method::rpm(&phase.probes_of(index, index), spec.tmp_pct).map(|r| r.rpm);
            if phase.dirs.iter().all(|d| d.stable) {
                if let Some(r) = method::rpm(&phase.window_probes(), spec.tmp_pct) {
                    rpms.push(r.rpm);
                    phase.responsiveness_stable = method::stable(&rpms, mad, spec.sdt_pct);
                }
            }
            phase
                .intervals
                .push(phase.interval(start.elapsed().as_secs_f64(), interval_rpm));
            if phase.responsiveness_stable || start.elapsed() >= limit || stop() {
                break;
            }
            // One more connection each way until its goodput is stable.
            for (i, d) in phase.dirs.iter_mut().enumerate() {
                if !d.stable && d.conns.len() + d.opening < spec.mnp as usize {
                    d.opening += 1;
                    let (c, f, tx, up) = (client.clone(), failed.clone(), opened_tx.clone(), d.up);
                    tokio::spawn(async move {
                        let _ = tx.send((i, c.load(up, f).await));
                    });
                }
            }
        }
        Ok(phase)
    }

    /// Probe pairs spread over one interval: MPS probes a second at most
    /// (a foreign and a self probe a pair), and no more than PTC of the
    /// goodput (`budget_bps`, the last interval's).
    async fn probe_interval(
        &mut self,
        client: &Arc<Client>,
        interval_start: Instant,
        budget_bps: f64,
        rng: &mut rand::rngs::StdRng,
        done: &Arc<Mutex<Vec<Probe>>>,
        stop: &Stop,
    ) {
        let spec = &client.spec;
        let by_rate = spec.mps as f64 / 2.0;
        let by_share = budget_bps / 8.0 * spec.ptc_pct / 100.0 / (FOREIGN_BYTES + SELF_BYTES);
        let pairs = (by_rate.min(by_share) * spec.interval_s).floor().max(1.0) as usize;
        let gap = Duration::from_secs_f64(spec.interval_s) / pairs as u32;
        for k in 0..pairs {
            tokio::time::sleep_until((interval_start + gap * k as u32).into()).await;
            if stop() {
                break;
            }
            let n: usize = self.dirs.iter().map(|d| d.conns.len()).sum();
            let pick = rand::Rng::random_range(rng, 0..n);
            let on = self
                .dirs
                .iter()
                .flat_map(|d| d.conns.iter())
                .nth(pick)
                .map(|c| (c.send.clone(), c.up));
            if let Some((on, up)) = on {
                self.foreign_count += 1;
                self.self_count += 1;
                spawn_pair(client.clone(), on, up, done.clone());
            }
        }
    }

    /// Each direction's goodput over the last `secs`, its moving average
    /// and stability; returns the sum of the moving averages (the probes'
    /// budget).
    fn sample_goodput(&mut self, secs: f64, spec: &RpmSpec) -> f64 {
        let mad = spec.mad as usize;
        let mut total_bps = 0.0;
        for d in &mut self.dirs {
            let total: u64 = d.conns.iter().map(LoadConn::moved).sum();
            let bps = total.saturating_sub(d.last_total) as f64 * 8.0 / secs;
            d.last_total = total;
            d.per_interval.push(bps);
            if let Some(avg) = method::moving_average(&d.per_interval, mad) {
                d.averages.push(avg);
            }
            total_bps += method::moving_average(&d.per_interval, mad.min(d.per_interval.len()))
                .unwrap_or(bps);
            if !d.stable {
                d.stable = method::stable(&d.averages, mad, spec.sdt_pct);
            }
        }
        total_bps
    }

    /// The interval just ended, for the result.
    fn interval(&self, t_s: f64, rpm: Option<f64>) -> RpmInterval {
        let sum = |up: bool, f: &dyn Fn(&Direction) -> f64| -> f64 {
            self.dirs.iter().filter(|d| d.up == up).map(f).sum()
        };
        let last = |d: &Direction| *d.per_interval.last().unwrap_or(&0.0);
        let conns = |d: &Direction| d.conns.len() as f64;
        RpmInterval {
            t_s,
            down_bps: sum(false, &last),
            up_bps: sum(true, &last),
            down_connections: sum(false, &conns) as u32,
            up_connections: sum(true, &conns) as u32,
            rpm,
        }
    }

    /// The probes that ended in intervals `from..=to`.
    fn probes_of(&self, from: usize, to: usize) -> ProbeTimes {
        let mut p = ProbeTimes::default();
        for (i, probe) in &self.probes {
            if *i < from || *i > to {
                continue;
            }
            match *probe {
                Probe::Foreign { tcp, tls, http } => {
                    p.tcp.push(tcp);
                    if let Some(t) = tls {
                        p.tls.push(t);
                    }
                    p.http_foreign.push(http);
                }
                Probe::Selfp { http, up } => {
                    p.http_self.push(http);
                    if up {
                        p.http_self_up.push(http);
                    } else {
                        p.http_self_down.push(http);
                    }
                }
            }
        }
        p
    }

    /// The probes of the last MAD intervals (the draft's window).
    fn window_probes(&self) -> ProbeTimes {
        let last = self
            .intervals
            .len()
            .max(self.probes.last().map_or(0, |p| p.0 + 1));
        let to = last.saturating_sub(1);
        self.probes_of(last.saturating_sub(self.mad), to)
    }
}

/// A foreign probe and a self probe on `on`, each recorded when it ends.
fn spawn_pair(
    client: Arc<Client>,
    mut on: SendRequest<ReqBody>,
    up: bool,
    done: Arc<Mutex<Vec<Probe>>>,
) {
    let record = |done: &Mutex<Vec<Probe>>, p: Probe| {
        done.lock().unwrap_or_else(|e| e.into_inner()).push(p);
    };
    let d = done.clone();
    let c = client.clone();
    tokio::spawn(async move {
        if let Ok(Some(p)) = tokio::time::timeout(PROBE_TIMEOUT, c.foreign()).await {
            record(&d, p);
        }
    });
    let small = client.urls.small.clone();
    tokio::spawn(async move {
        let t = Instant::now();
        if let Ok(Ok(_)) = tokio::time::timeout(PROBE_TIMEOUT, get(&mut on, &small, 1 << 20)).await
        {
            record(
                &done,
                Probe::Selfp {
                    http: t.elapsed().as_secs_f64() * 1e3,
                    up,
                },
            );
        }
    });
}

/// GETs `uri` on `send` and returns its body (at most `max` bytes).
async fn get(send: &mut SendRequest<ReqBody>, uri: &Uri, max: usize) -> Result<Vec<u8>, String> {
    let req = Request::get(uri.clone())
        .header("accept-encoding", "identity")
        .body(empty())
        .map_err(|e| e.to_string())?;
    let resp = send.send_request(req).await.map_err(|e| e.to_string())?;
    if !resp.status().is_success() {
        return Err(format!("{uri}: status {}", resp.status()));
    }
    let mut body = resp.into_body();
    let mut out = Vec::new();
    while let Some(f) = body.frame().await {
        let f = f.map_err(|e| e.to_string())?;
        if let Some(d) = f.data_ref() {
            if out.len() + d.len() > max {
                return Err(format!("{uri}: more than {max} bytes"));
            }
            out.extend_from_slice(d);
        }
    }
    Ok(out)
}

fn empty() -> ReqBody {
    BoxBody::new(Empty::<Bytes>::new().map_err(|never| match never {}))
}

/// `host:port` of a URL, the scheme's port when it names none.
fn authority(u: &Uri) -> String {
    let host = u.host().unwrap_or_default();
    let port = u.port_u16().unwrap_or(if u.scheme_str() == Some("https") {
        443
    } else {
        80
    });
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// An upload's endless body of zeros, paced when the load is capped.
struct Zeros {
    chunk: Bytes,
    pace: Option<Arc<Pace>>,
    /// The chunk reserved and waiting for its time.
    wait: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Body for Zeros {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if let Some(p) = &this.pace {
            if this.wait.is_none() {
                let at = p.reserve(this.chunk.len());
                if at > Instant::now() {
                    this.wait = Some(Box::pin(tokio::time::sleep_until(at.into())));
                }
            }
            if let Some(w) = this.wait.as_mut() {
                if std::future::Future::poll(w.as_mut(), cx).is_pending() {
                    return Poll::Pending;
                }
                this.wait = None;
            }
        }
        Poll::Ready(Some(Ok(Frame::data(this.chunk.clone()))))
    }
}
