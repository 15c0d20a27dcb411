//! `linerate run rpm`: the responsiveness test as a kind. It runs in this
//! process (`run_here`), against the server at `--url`, or against an RPM
//! server it starts on loopback for the test (TLS with a generated
//! certificate the client trusts, or clear HTTP/2 with `--rpm-clear`).

use crate::model::points::{KeyPoint, PointView};
use std::time::Duration;

use super::client::{self, Target};
use super::method;
use super::params;
use crate::error::{Error, Result};
use crate::model::result::{AgentInfo, Iteration, Pair, Status, TestResult};
use crate::model::sample::Confidence;
use crate::model::spec::{self, TestSpec, TlsSpec};
use crate::units::{fmt_bps, fmt_us};
use crate::workload::kind::{Kind, KindFacts, Needs, Place, Section};
use crate::workload::local_server::LocalServer;
use crate::workload::rpm::params::{Responsiveness, RpmOrder, RpmSpec};

pub struct Rpm;

pub const NAME: spec::Workload = spec::Workload::named("rpm");

impl Kind for Rpm {
    fn workload(&self) -> spec::Workload {
        NAME
    }

    fn help(&self) -> &'static str {
        "The IETF responsiveness test (RPM, draft-ietf-ippm-responsiveness): round trips per minute under working conditions, against --url or a server on loopback"
    }

    fn facts(&self) -> KindFacts {
        KindFacts {
            section: Section::Own(params::SECTION),
            // The draft's test is HTTP/2 over TLS: --tls-ca and --tls-name
            // apply without --tls.
            tls_always: true,
            // `--rate 50mbit` caps its load; `--search 'rpm>=N'` finds the
            // most load that keeps the RPM at N.
            load_bits: true,
            no_auto: Some("the draft's method decides when it has measured"),
            default_warmup_s: Some(0.0),
            default_duration_s: Some(20.0),
            ..KindFacts::NONE
        }
    }

    fn rules(&self, spec: &TestSpec) -> std::result::Result<(), crate::model::error::Invalid> {
        if spec.rate.is_some() {
            return Err(
                "rpm's --rate is a bit rate, its load's goodput each way at most (50mbit)".into(),
            );
        }
        RpmSpec::of(spec)?.validate()
    }

    fn needs(&self) -> Needs {
        Needs::NOTHING
    }

    fn describe(&self, spec: &TestSpec) -> String {
        let r = RpmSpec::of(spec).unwrap_or_default();
        format!(
            "rpm ({}) against {}: {}, MAD {}, ID {} s, TMP {}%, SDT {}%, MNP {}, MPS {}; at most {} s {}",
            crate::workload::rpm::params::DRAFT,
            r.url.as_deref().unwrap_or(if r.clear {
                "a clear HTTP/2 server of its own (loopback, or a lab's server)"
            } else {
                "an HTTP/2 over TLS server of its own (loopback, or a lab's server)"
            }),
            match r.order {
                RpmOrder::Parallel => "upload and download at once",
                RpmOrder::Sequential => "download, then upload",
            },
            r.mad,
            r.interval_s,
            r.tmp_pct,
            r.sdt_pct,
            r.mnp,
            r.mps,
            spec.duration_s,
            match r.order {
                RpmOrder::Parallel => "loaded",
                RpmOrder::Sequential => "each way",
            },
        )
    }

    fn describes_all(&self) -> bool {
        true
    }

    fn run_here(
        &self,
        spec: &TestSpec,
        _confidence: Confidence,
        command: &[String],
        place: &Place,
    ) -> Option<Result<TestResult>> {
        Some(run(spec, command.to_vec(), place))
    }

    fn clients(&self) -> Option<&dyn crate::workload::kind::Clients> {
        Some(&super::fleet::RpmClients)
    }

    fn metrics(&self) -> &'static [crate::model::metric::Metric] {
        super::metrics::METRICS
    }

    fn charts(&self, points: &[PointView]) -> Vec<crate::model::chart::Chart> {
        super::charts::charts(points)
    }

    fn key_points(&self, points: &[PointView]) -> Vec<KeyPoint> {
        super::keypoints::responsiveness(points)
    }

    fn report_lines(&self, _spec: &TestSpec, it: &Iteration) -> Vec<(&'static str, String)> {
        Responsiveness::of(&it.own)
            .as_ref()
            .map(lines)
            .unwrap_or_default()
    }
}

/// The result's lines, in the draft's words.
fn lines(r: &Responsiveness) -> Vec<(&'static str, String)> {
    let conf = r.confidence.map_or("none", |c| c.name());
    let idle_rpm = if r.idle_rtt_us > 0.0 {
        60e6 / r.idle_rtt_us
    } else {
        0.0
    };
    let mut v = vec![
        (
            "responsiveness",
            format!(
                "{:.0} RPM ({}), confidence {conf}: foreign {:.0}, self {:.0} RPM",
                r.rpm,
                method::rating(r.rpm),
                r.foreign_rpm,
                r.self_rpm
            ),
        ),
        (
            "capacity",
            format!(
                "download {} with {} connections, upload {} with {}",
                fmt_bps(r.capacity_down_bps),
                r.down_connections,
                fmt_bps(r.capacity_up_bps),
                r.up_connections
            ),
        ),
        (
            "idle",
            format!(
                "round trip {} ({:.0} RPM), loaded {:.1}x slower",
                fmt_us(r.idle_rtt_us),
                idle_rpm,
                if r.rpm > 0.0 { idle_rpm / r.rpm } else { 0.0 }
            ),
        ),
        (
            "probes",
            format!(
                "{} foreign (TCP {}, TLS {} per round trip, HTTP {}), {} self (HTTP {}), trimmed means",
                r.foreign_probes,
                fmt_us(r.tcp_handshake_us),
                fmt_us(r.tls_handshake_us),
                fmt_us(r.http_foreign_us),
                r.self_probes,
                fmt_us(r.http_self_us)
            ),
        ),
    ];
    // Several clients at once: each one's own figures after the pooled.
    for (k, c) in r.clients.iter().enumerate() {
        v.push((
            if k == 0 { "clients" } else { "" },
            format!(
                "{} {:.0} RPM ({}), confidence {}: foreign {:.0}, self {:.0}; download {}, upload {}; idle {}",
                c.name,
                c.rpm,
                method::rating(c.rpm),
                c.confidence.map_or("none", |x| x.name()),
                c.foreign_rpm,
                c.self_rpm,
                fmt_bps(c.capacity_down_bps),
                fmt_bps(c.capacity_up_bps),
                fmt_us(c.idle_rtt_us)
            ),
        ));
    }
    if let (Some(d), Some(u)) = (r.http_self_down_us, r.http_self_up_us) {
        let (slow, fast, by) = if d >= u {
            ("download", "upload", d / u.max(1e-3))
        } else {
            ("upload", "download", u / d.max(1e-3))
        };
        v.push((
            "loaded queue",
            format!(
                "self probes on download connections {}, on upload connections {}: the {slow} direction's queue held them {by:.1}x the {fast}'s",
                fmt_us(d),
                fmt_us(u)
            ),
        ));
    }
    v
}

/// The target: `--url`'s server, or one started here.
fn target(spec: &TestSpec, r: &RpmSpec, place: &Place) -> Result<(Target, Option<LocalServer>)> {
    let tls_spec = spec.tls.clone().unwrap_or_default();
    if let Some(url) = &r.url {
        let tls = if url.starts_with("https://") {
            Some(
                crate::engine::tls_web::web_client_config_trusting(&tls_spec, &r.trust_der)
                    .map_err(|e| Error::Failed(e.to_string()))?,
            )
        } else {
            None
        };
        // A carried certificate is an agent's (or --tls-ca's, whose name
        // --tls-name gives): the name to check is the spec's; else the
        // URL's host, unless --tls-name says another.
        let carried = !r.trust_der.is_empty();
        let server_name = (carried || tls_spec.server_name != TlsSpec::default().server_name)
            .then(|| tls_spec.server_name.clone());
        return Ok((
            Target {
                url: url.clone(),
                tls,
                server_name,
            },
            None,
        ));
    }
    let own = super::local::own_server(spec, r, place)?;
    Ok((
        Target {
            url: own.url.clone(),
            tls: own.client_tls.clone(),
            server_name: Some(tls_spec.server_name.clone()),
        },
        Some(own.server),
    ))
}

pub fn run(spec: &TestSpec, command: Vec<String>, place: &Place) -> Result<TestResult> {
    let r = &RpmSpec::of(spec).map_err(Error::Failed)?;
    let host = crate::measure::host::collect();
    let (target, local) = target(spec, r, place)?;
    let limit = Duration::from_secs_f64(spec.duration_s);
    let url = target.url.clone();
    let outcome = client::run(r, target, limit, crate::engine::signals::test_interrupted)
        .map_err(|e| Error::Failed(e.to_string()))?;
    drop(local);
    let f = outcome.figures;
    let secs = f.intervals.last().map_or(0.0, |i| i.t_s);
    let status = if outcome.cut_short.is_some() {
        Status::Partial
    } else {
        Status::Ok
    };
    let bytes = ((f.capacity_down_bps + f.capacity_up_bps) / 8.0 * secs) as u64;
    let measured = super::metrics::Measured {
        secs,
        bytes,
        status,
        error: outcome.cut_short.clone(),
        // The server's threads are this run's only when it started them.
        cpu: Pair {
            client: Some(outcome.cpu_client),
            agent: r.url.is_none().then_some(outcome.cpu_server),
        },
    };
    let (it, summary) = super::metrics::iteration_and_summary(spec, &f, measured);
    Ok(TestResult {
        schema: crate::model::result::SCHEMA.into(),
        schema_version: crate::model::result::SCHEMA_VERSION,
        started_at: crate::units::rfc3339_now(),
        command,
        spec: spec.clone(),
        agent: AgentInfo {
            address: url,
            local: r.url.is_none(),
            pid: None,
            ..Default::default()
        },
        environment: Pair {
            client: host.clone(),
            agent: host,
        },
        summary,
        iterations: vec![it],
        ..Default::default()
    })
}
