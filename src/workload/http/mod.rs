//! `linerate run http`: HTTP requests per second and their latency, the
//! question h2load and wrk answer, against any HTTP/1.1 or HTTP/2 server
//! (`--http-url`: nginx, an application, a CDN's edge) or against a server
//! this run starts (loopback, or a lab's server namespace, so the lab's
//! link and queue sit between them).
//!
//! `--flows` connections, `--outstanding` requests in flight on each
//! (HTTP/2 streams; HTTP/1.1 has one), a closed loop; GET, or POST of
//! `--request` bytes (`--http-method post`); the server of its own
//! answers `--response` bytes.
//! TLS by the URL's scheme, or `--tls` for the server of its own, with the
//! agent's certificate and rustls. Transactions are requests with a 2xx
//! answer; others are counted apart (`http_figures.non_2xx`).
//!
//! Like rpm it runs in the controller's process (`run_here`): the client
//! is hyper, not the engine's flows, so the HTTP stack measured is a
//! well-kept one and a foreign server speaks to it as to any client.

pub mod client;
pub mod options;
pub mod server;

use std::time::Duration;

use crate::error::{Error, Result};
use crate::measure::histogram;
use crate::model::result::{AgentInfo, Iteration, Pair, Status, TestInterval, TestResult};
use crate::model::sample::{Confidence, CpuWindow};
use crate::model::spec::{self, Figures, MainMetric, TestSpec, TlsSpec};
use crate::units::fmt_bytes;
use crate::workload::kind::{Kind, KindFacts, Needs, Place, Section};
use crate::workload::RateColumn;
use options::{HttpFigures, HttpMethod, HttpSpec, HttpVersion, FIGURES, SECTION};

pub struct Http;

/// This kind's name in a spec, on the command line and in the registry.
pub const NAME: spec::Workload = spec::Workload::named("http");

impl Kind for Http {
    fn workload(&self) -> spec::Workload {
        NAME
    }

    fn help(&self) -> &'static str {
        "HTTP/1.1 or HTTP/2 requests per second and latency (h2load, wrk), against --http-url or a server on loopback or in the lab"
    }

    fn facts(&self) -> KindFacts {
        KindFacts {
            section: Section::Own(SECTION),
            // --request (a POST's body), --response (the object of the
            // server of its own), --outstanding (streams).
            exchange: true,
            no_auto: Some("its windows run in linerate's own process"),
            ..KindFacts::NONE
        }
    }

    fn rules(&self, spec: &TestSpec) -> std::result::Result<(), crate::model::error::Invalid> {
        let h = HttpSpec::of(spec)?;
        h.validate()?;
        if h.version == HttpVersion::H1 && spec.outstanding > 1 {
            return Err(
                "HTTP/1.1 has one request in flight per connection (no pipelining): --outstanding 1, more --flows, or --http-version 2"
                    .into(),
            );
        }
        if h.url.is_some() && !h.https() && spec.tls.is_some() {
            return Err("--tls with an http:// --http-url: give its https:// URL".into());
        }
        if spec
            .tls
            .as_ref()
            .is_some_and(|t| t.backend != Default::default())
        {
            return Err("http runs TLS with rustls (hyper's): --backend openssl applies to linerate's own flows".into());
        }
        Ok(())
    }

    fn needs(&self) -> Needs {
        Needs::NOTHING
    }

    fn describe(&self, spec: &TestSpec) -> String {
        let h = HttpSpec::of(spec).unwrap_or_default();
        let what = match h.method {
            HttpMethod::Post => format!("POST {}", fmt_bytes(spec.request)),
            HttpMethod::Get => "GET".into(),
        };
        let streams = match h.version {
            HttpVersion::H1 => String::new(),
            HttpVersion::H2 => format!(" x {} streams", spec.outstanding),
        };
        let target = match &h.url {
            Some(u) => u.clone(),
            None => format!(
                "a server of its own answering {} ({})",
                fmt_bytes(spec.response),
                if spec.tls.is_some() { "https" } else { "http" }
            ),
        };
        let threads = h.threads.unwrap_or(1);
        format!(
            "http {} {what}, {} connection{}{streams}, {threads} client thread{}, against {target}",
            h.version.name(),
            spec.flows,
            if spec.flows == 1 { "" } else { "s" },
            if threads == 1 { "" } else { "s" }
        )
    }

    fn describes_all(&self) -> bool {
        true
    }

    fn figures(&self, _spec: &TestSpec) -> Figures {
        Figures {
            latency: true,
            ..Figures::default()
        }
    }

    fn main_metric(&self, _spec: &TestSpec) -> MainMetric {
        MainMetric::TransactionRate
    }

    fn rate_column(&self, _spec: &TestSpec) -> RateColumn {
        RateColumn::Transactions
    }

    fn run_here(
        &self,
        spec: &TestSpec,
        confidence: Confidence,
        command: &[String],
        place: &Place,
    ) -> Option<Result<TestResult>> {
        Some(run(spec, confidence, command.to_vec(), place))
    }

    fn report_lines(&self, _spec: &TestSpec, it: &Iteration) -> Vec<(&'static str, String)> {
        let Some(f) = it.own.get::<HttpFigures>(FIGURES) else {
            return Vec::new();
        };
        let mut v = vec![(
            "http",
            format!(
                "{} to {}{}, {} connection(s) x {} in flight",
                f.protocol,
                f.url,
                f.server
                    .as_ref()
                    .map(|s| format!(" (server: {s})"))
                    .unwrap_or_default(),
                f.connections,
                f.streams
            ),
        )];
        if f.non_2xx > 0 || f.failed > 0 {
            v.push((
                "errors",
                format!(
                    "{} answers not 2xx, {} requests failed or refused (not in the rate)",
                    f.non_2xx, f.failed
                ),
            ));
        }
        if f.reopened > 0 {
            v.push((
                "reopened",
                format!(
                    "{} connections closed by the server and opened again (its keep-alive limit: nginx's keepalive_requests)",
                    f.reopened
                ),
            ));
        }
        v
    }
}

/// The load's target: `--http-url`'s server, or one started here (kept
/// alive by the returned guard).
fn target(
    spec: &TestSpec,
    h: &HttpSpec,
    place: &Place,
) -> Result<(
    client::Load,
    Option<crate::workload::local_server::LocalServer>,
)> {
    let fail = |e: String| Error::Failed(e);
    let tls_spec = spec.tls.clone().unwrap_or_default();
    let (url, tls, local) = match &h.url {
        Some(url) => {
            let tls = if h.https() {
                Some(
                    crate::engine::tls_web::web_client_config(&tls_spec)
                        .map_err(|e| fail(e.to_string()))?,
                )
            } else {
                None
            };
            (url.clone(), tls, None)
        }
        None => {
            let (server_tls, client_tls) = match &spec.tls {
                Some(t) => {
                    let (cfg, id) =
                        crate::engine::tls::server_config(t).map_err(|e| fail(e.to_string()))?;
                    let client = crate::engine::tls::client_config(t, &id.cert)
                        .map_err(|e| fail(e.to_string()))?;
                    (Some(cfg), Some(client))
                }
                None => (None, None),
            };
            let (local, url) = server::start(
                place,
                spec.ipv6,
                spec.response,
                server_tls,
                spec.agent_workers as usize,
            )
            .map_err(fail)?;
            (url, client_tls, Some(local))
        }
    };
    let uri: hyper::Uri = url.parse().map_err(|e| fail(format!("http: {url}: {e}")))?;
    let host = uri.host().unwrap_or_default().to_string();
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        });
    let connect = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    // The certificate's name: --tls-name when given, else the URL's host
    // (the server of its own: the name its generated certificate shows).
    let server_name = if h.url.is_none() || tls_spec.server_name != TlsSpec::default().server_name {
        tls_spec.server_name.clone()
    } else {
        host.trim_matches(['[', ']']).to_string()
    };
    Ok((
        client::Load {
            url: uri,
            connect,
            tls,
            server_name,
            version: h.version,
            connections: spec.flows,
            streams: spec.outstanding.max(1),
            threads: h.threads.unwrap_or(1) as usize,
            upload: match h.method {
                HttpMethod::Post => spec.request,
                HttpMethod::Get => 0,
            },
        },
        local,
    ))
}

fn is_server_thread(name: &str) -> bool {
    name == server::THREAD
}

/// Runs the load: a warm-up, then `confidence.min` windows (at least one).
pub fn run(
    spec: &TestSpec,
    confidence: Confidence,
    command: Vec<String>,
    place: &Place,
) -> Result<TestResult> {
    let h = HttpSpec::of(spec).map_err(Error::Failed)?;
    let host = crate::measure::host::collect();
    let (load, local) = target(spec, &h, place)?;
    let url = load.url.to_string();
    let plan = client::Plan {
        warmup: Duration::from_secs_f64(spec.warmup_s),
        windows: confidence.min.max(1),
        window: Duration::from_secs_f64(spec.duration_s),
        interval: Duration::from_secs_f64(spec.interval_s.max(0.1)),
    };
    let connections = load.connections;
    let streams = load.streams;
    let out = client::run(
        load,
        plan,
        crate::engine::signals::test_interrupted,
        is_server_thread,
    )
    .map_err(|e| Error::Failed(e.to_string()))?;
    let served_by_us = local.is_some();
    drop(local);
    let figures = |c: &client::Counts| HttpFigures {
        protocol: out.protocol.into(),
        server: out.server.clone(),
        url: url.clone(),
        connections,
        streams,
        non_2xx: c.non_2xx,
        failed: c.failed,
        bytes_down: c.bytes_down,
        bytes_up: c.bytes_up,
        reopened: out.reopened,
    };
    let mut all = histogram::new_hist();
    let mut iterations = Vec::new();
    for (index, w) in out.windows.iter().enumerate() {
        histogram::merge(&mut all, &w.counts.hist);
        iterations.push(iteration(index, w, served_by_us, &figures(&w.counts), &out));
    }
    if iterations.is_empty() {
        return Err(Error::Partial(
            out.cut_short
                .unwrap_or_else(|| "nothing was measured".into()),
        ));
    }
    let metric = MainMetric::TransactionRate;
    let mut summary = crate::measure::fold::summarize(
        spec,
        Http.figures(spec),
        &iterations,
        (histogram::summarize(&all), None),
        confidence.level_pct,
        metric,
    );
    summary.tls = out.tls.clone().map(|mut t| {
        t.cert = match (&spec.tls, served_by_us) {
            (Some(own), true) => own.cert.name().to_string(),
            _ => "the server's".into(),
        };
        t
    });
    let mut total = client::Counts {
        start_s: 0.0,
        end_s: 0.0,
        requests: 0,
        non_2xx: 0,
        failed: 0,
        bytes_down: 0,
        bytes_up: 0,
        hist: all,
    };
    for w in &out.windows {
        total.non_2xx += w.counts.non_2xx;
        total.failed += w.counts.failed;
        total.bytes_down += w.counts.bytes_down;
        total.bytes_up += w.counts.bytes_up;
    }
    summary.own = crate::model::own::Own::with(FIGURES, &figures(&total));
    if out.cut_short.is_some() {
        summary.status = Status::Partial;
    }
    Ok(TestResult {
        schema: crate::model::result::SCHEMA.into(),
        schema_version: crate::model::result::SCHEMA_VERSION,
        started_at: crate::units::rfc3339_now(),
        command,
        spec: spec.clone(),
        confidence_target: confidence,
        agent: AgentInfo {
            address: url,
            local: served_by_us,
            pid: None,
            ..Default::default()
        },
        environment: Pair {
            client: host.clone(),
            agent: host,
        },
        summary,
        iterations,
        ..Default::default()
    })
}

/// One window as an iteration: requests with a 2xx answer are its
/// transactions, both bodies its bytes.
fn iteration(
    index: usize,
    w: &client::Window,
    served_by_us: bool,
    figures: &HttpFigures,
    out: &client::Outcome,
) -> Iteration {
    let c = &w.counts;
    let secs = (c.end_s - c.start_s).max(1e-9);
    let bytes = c.bytes_down + c.bytes_up;
    let cost = |cpu: &CpuWindow| crate::measure::cpu::cost(cpu, bytes, c.requests, 0.0);
    let server_cpu = served_by_us.then(|| w.cpu_server.clone());
    let intervals = w
        .intervals
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let d = (s.end_s - s.start_s).max(1e-9);
            let b = s.bytes_down + s.bytes_up;
            TestInterval {
                index: i,
                start_s: s.start_s - c.start_s,
                end_s: s.end_s - c.start_s,
                bytes: b,
                throughput_bps: b as f64 * 8.0 / d,
                transactions: s.requests,
                transactions_per_s: s.requests as f64 / d,
                latency_us: histogram::summarize(&s.hist),
                ..Default::default()
            }
        })
        .collect();
    let last = index + 1 == out.windows.len();
    Iteration {
        index,
        status: if last && out.cut_short.is_some() {
            Status::Partial
        } else {
            Status::Ok
        },
        error: if last { out.cut_short.clone() } else { None },
        duration_s: secs,
        bytes,
        throughput_bps: bytes as f64 * 8.0 / secs,
        transactions: c.requests,
        transactions_per_s: c.requests as f64 / secs,
        latency_us: histogram::summarize(&c.hist),
        cpu: Pair {
            client: Some(w.cpu_client.clone()),
            agent: server_cpu.clone(),
        },
        cost: Pair {
            client: cost(&w.cpu_client),
            agent: server_cpu.as_ref().map(cost).unwrap_or_default(),
        },
        intervals,
        own: crate::model::own::Own::with(FIGURES, figures),
        ..Default::default()
    }
}
