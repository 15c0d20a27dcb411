//! `watch --metrics-listen ADDR`: the watch as a Prometheus target. A
//! watch is a long-running process, the kind Prometheus pulls from; the
//! Pushgateway is meant for batch jobs that end (its own documentation
//! says so) and keeps a dead watch's last push forever, while a scrape of
//! a watch that died fails and `up` says so. Served with hyper (HTTP/1.1)
//! on a tokio runtime of its own thread: GET /metrics, in Prometheus's
//! text format.
//!
//! What it serves: the watch's runs by how they ended and the changes
//! found (counters), when the last run ended, and the newest measured
//! run's figures as gauges in base units (`report::render::openmetrics`),
//! labelled by watch, series, point, workload and lab: bounded by what
//! the watch runs, nothing per run or per flow.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use super::store::{Filter, Run, Store};
use super::HistoryError;
use crate::report::render::openmetrics::{escape, gauge, num};

/// The thread that serves, by name.
const THREAD: &str = "metrics-listen";

/// How often the accept loop looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(100);

/// Prometheus's text format, which every Prometheus scrapes and promtool
/// checks: its counters are named with `_total` in TYPE and HELP, which
/// OpenMetrics forbids, so the text is served as what it is.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A scrape endpoint serving the text last `set`; stops when dropped.
pub struct Exporter {
    pub addr: SocketAddr,
    text: Arc<Mutex<String>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Exporter {
    /// Listens on `addr` (HOST:PORT) at once, so a port in use is said
    /// before the first run.
    pub fn start(addr: &str) -> Result<Exporter, HistoryError> {
        let listener = std::net::TcpListener::bind(addr).map_err(|e| {
            HistoryError::Usage(format!(
                "--metrics-listen {addr}: cannot listen there: {e} (give a free HOST:PORT, e.g. 127.0.0.1:9464)"
            ))
        })?;
        let io = |source| HistoryError::Io {
            path: addr.into(),
            source,
        };
        listener.set_nonblocking(true).map_err(io)?;
        let local = listener.local_addr().map_err(io)?;
        let text = Arc::new(Mutex::new(String::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (t, s) = (text.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name(THREAD.into())
            .spawn(move || serve(listener, t, s))
            .map_err(io)?;
        Ok(Exporter {
            addr: local,
            text,
            stop,
            thread: Some(thread),
        })
    }

    /// What the next scrape gets.
    pub fn set(&self, text: String) {
        *self.text.lock().unwrap_or_else(|e| e.into_inner()) = text;
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(listener: std::net::TcpListener, text: Arc<Mutex<String>>, stop: Arc<AtomicBool>) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    crate::engine::signals::block_in_this_thread();
    rt.block_on(async move {
        let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
            return;
        };
        while !stop.load(Ordering::Relaxed) {
            let Ok(Ok((tcp, _))) = tokio::time::timeout(STOP_POLL, listener.accept()).await else {
                continue;
            };
            let text = text.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let body = text.lock().unwrap_or_else(|e| e.into_inner()).clone();
                    async move { Ok::<_, Infallible>(answer(&req, body)) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), service)
                    .await;
            });
        }
    });
    rt.shutdown_timeout(Duration::from_millis(200));
}

fn answer<B>(req: &Request<B>, body: String) -> Response<Full<Bytes>> {
    let (status, body, kind) = match (req.method().as_str(), req.uri().path()) {
        ("GET" | "HEAD", "/metrics") => (StatusCode::OK, body, CONTENT_TYPE),
        ("GET" | "HEAD", _) => (
            StatusCode::NOT_FOUND,
            "linerate watch serves /metrics\n".into(),
            "text/plain",
        ),
        _ => (
            StatusCode::METHOD_NOT_ALLOWED,
            "GET /metrics\n".into(),
            "text/plain",
        ),
    };
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(kind) {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

/// The watch `label`'s metrics from the store: its runs and changes, and
/// the newest measured run's figures.
pub fn render(store: &Store, label: &str) -> Result<String, HistoryError> {
    let runs = store.runs(&Filter {
        watch: Some(label.into()),
        ..Default::default()
    })?;
    let w = format!("watch=\"{}\"", escape(label));
    let mut o = String::new();
    let _ = writeln!(o, "# TYPE linerate_watch_runs_total counter");
    let _ = writeln!(
        o,
        "# HELP linerate_watch_runs_total Runs of this watch, by how they ended."
    );
    for status in ["ok", "partial", "failed"] {
        let n = runs.iter().filter(|r| r.status == status).count();
        let _ = writeln!(
            o,
            "linerate_watch_runs_total{{{w},status=\"{status}\"}} {n}"
        );
    }
    let mut series: Vec<&str> = runs.iter().map(|r| r.series.as_str()).collect();
    series.sort();
    series.dedup();
    let mut changes = 0;
    for s in &series {
        changes += store.changes(s)?.len();
    }
    let _ = writeln!(o, "# TYPE linerate_watch_changes_total counter");
    let _ = writeln!(
        o,
        "# HELP linerate_watch_changes_total Changes found in the series this watch runs."
    );
    let _ = writeln!(o, "linerate_watch_changes_total{{{w}}} {changes}");
    // When the newest run started, as the store keeps it (none yet: no sample).
    let _ = writeln!(o, "# TYPE linerate_watch_last_run_timestamp_seconds gauge");
    let _ = writeln!(
        o,
        "# HELP linerate_watch_last_run_timestamp_seconds When the watch's newest run started."
    );
    if let Some(at) = runs.last().and_then(|r| crate::units::parse_rfc3339(&r.at)) {
        let _ = writeln!(o, "linerate_watch_last_run_timestamp_seconds{{{w}}} {at}");
    }
    if let Some(last) = runs.iter().rev().find(|r| r.status != "failed") {
        figures(&mut o, store, last, &w)?;
    }
    Ok(o)
}

/// The run's figures as gauges, one family per metric name.
fn figures(o: &mut String, store: &Store, run: &Run, w: &str) -> Result<(), HistoryError> {
    let mut families: BTreeMap<String, (&'static str, Vec<String>)> = BTreeMap::new();
    let mut seen = std::collections::HashSet::new();
    for f in store.figures(run.id)? {
        let Some((name, title, v)) = gauge(&f.metric, f.value) else {
            continue;
        };
        let sample = format!(
            "{name}{{{w},series=\"{}\",point=\"{}\",workload=\"{}\",lab=\"{}\"}}",
            escape(&run.series),
            escape(&f.point),
            escape(&run.name),
            escape(&run.lab)
        );
        // Two keys of one base name are one series twice: the first stands.
        if !seen.insert(sample.clone()) {
            continue;
        }
        let family = families.entry(name).or_insert((title, Vec::new()));
        family.1.push(format!("{sample} {}", num(v)));
    }
    for (name, (title, samples)) in families {
        let _ = writeln!(o, "# TYPE {name} gauge");
        let _ = writeln!(
            o,
            "# HELP {name} {title} (the watch's newest measured run)."
        );
        for s in samples {
            let _ = writeln!(o, "{s}");
        }
    }
    Ok(())
}
