//! RPM from several clients toward one server on one window (a rack lab's
//! clients, a hosts file's): each client agent runs the draft's whole
//! method on its own (its load connections, its probes) from one common
//! start, against one server. That is a home network's question: how
//! responsive the path stays while every device on it saturates it.
//!
//! The result pools the clients' probes: a side's round trip is the mean
//! of the clients' trimmed means weighted by their probe counts (the
//! trimmed mean of the pooled probes, up to the trimming), RPM the mean of
//! the foreign and the self RPM as the draft forms it; capacity is the sum
//! of what the clients carried at once; confidence the lowest of theirs;
//! intervals are summed over the ones every client ran.
//! Each client's own figures are kept (`clients`).

use super::client::is_server_thread;
use super::local::own_server;
use super::params::{self, ClientRpm, Responsiveness, RpmInterval, RpmSpec};
use crate::measure::cpu;
use crate::model::result::{Pair, Status, TestResult};
use crate::model::spec::TestSpec;
use crate::workload::kind::{ClientRun, Clients, Place, SharedServer};

pub struct RpmClients;

/// The server this test started, and its threads' CPU when it did.
struct Held {
    _server: crate::workload::local_server::LocalServer,
    before: cpu::CpuSnapshot,
}

impl Clients for RpmClients {
    fn server(&self, spec: &TestSpec, place: &Place) -> crate::error::Result<SharedServer> {
        let mut r = RpmSpec::of(spec).map_err(crate::error::Error::Failed)?;
        let mut spec = spec.clone();
        let (address, guard): (String, Option<Box<dyn std::any::Any + Send>>) = match &r.url {
            Some(url) => {
                // --tls-ca is a file of this host: its certificates travel
                // in the spec.
                if let Some(path) = spec.tls.as_ref().and_then(|t| t.ca_file.clone()) {
                    let pem = std::fs::read(&path)
                        .map_err(|e| crate::error::usage(format!("--tls-ca {path}: {e}")))?;
                    r.trust_der = crate::engine::tls_web::pem_certs(&pem)
                        .map_err(|e| crate::error::usage(format!("--tls-ca {path}: {e}")))?;
                    if let Some(t) = spec.tls.as_mut() {
                        t.ca_file = None;
                    }
                }
                (url.clone(), None)
            }
            None if place.server.is_none() => {
                return Err(crate::error::usage(
                    "several clients need one server they all reach: give --url of an RPM server (`linerate serve --rpm` on the server's host), or run in a rack lab (`lab up NAME --clients N`)",
                ));
            }
            None => {
                let own = own_server(&spec, &r, place)?;
                r.url = Some(own.url.clone());
                r.trust_der = own.cert.into_iter().collect();
                let held = Held {
                    _server: own.server,
                    before: cpu::snapshot_threads(is_server_thread),
                };
                (own.url, Some(Box::new(held)))
            }
        };
        spec.own.set(params::SECTION, &r);
        Ok(SharedServer {
            spec,
            address,
            guard,
        })
    }

    fn merge(
        &self,
        spec: &TestSpec,
        runs: &[ClientRun],
        server: &SharedServer,
    ) -> Result<TestResult, String> {
        let each: Vec<(&ClientRun, Responsiveness)> = runs
            .iter()
            .filter_map(|c| {
                let it = c.result.iterations.first()?;
                Some((c, Responsiveness::of(&it.own)?))
            })
            .collect();
        if each.is_empty() {
            return Err("no client's result holds the responsiveness figures".into());
        }
        let figures = pool(&each, &server.address);
        let first = &each[0].0.result;
        let secs = runs
            .iter()
            .map(|c| c.result.summary.duration_s)
            .fold(0.0, f64::max);
        let bytes: u64 = runs.iter().map(|c| c.result.summary.bytes).sum();
        let status = if runs.iter().all(|c| c.result.summary.status.is_ok()) {
            Status::Ok
        } else {
            Status::Partial
        };
        // The clients' CPU as one machine's; the server's, where it is
        // this process's (from its start to now: its CPU seconds are the
        // test's, its share of the wall a little diluted).
        let client_cpu: Vec<_> = runs
            .iter()
            .filter_map(|c| c.result.iterations.first()?.cpu.client.as_ref())
            .collect();
        let measured = super::metrics::Measured {
            secs,
            bytes,
            status,
            error: runs
                .iter()
                .find_map(|c| c.result.iterations.first()?.error.clone()),
            cpu: Pair {
                client: cpu::merge_hosts(&client_cpu),
                agent: server
                    .guard
                    .as_ref()
                    .and_then(|g| g.downcast_ref::<Held>())
                    .map(|h| cpu::window(&h.before, &cpu::snapshot_threads(is_server_thread))),
            },
        };
        let (it, summary) = super::metrics::iteration_and_summary(spec, &figures, measured);
        Ok(TestResult {
            schema: first.schema.clone(),
            schema_version: first.schema_version,
            started_at: first.started_at.clone(),
            command: Vec::new(),
            spec: spec.clone(),
            agent: crate::model::result::AgentInfo {
                address: server.address.clone(),
                local: server.guard.is_some(),
                pid: None,
                ..Default::default()
            },
            environment: Pair {
                client: first.environment.client.clone(),
                agent: if server.guard.is_some() {
                    crate::measure::host::collect()
                } else {
                    Default::default()
                },
            },
            summary,
            iterations: vec![it],
            ..Default::default()
        })
    }
}

/// The clients' figures pooled (see the module's doc).
fn pool(each: &[(&ClientRun, Responsiveness)], url: &str) -> Responsiveness {
    let rs: Vec<&Responsiveness> = each.iter().map(|(_, r)| r).collect();
    let foreign_n: u64 = rs.iter().map(|r| r.foreign_probes).sum();
    let self_n: u64 = rs.iter().map(|r| r.self_probes).sum();
    // A mean of the clients' values weighted by `w`.
    let mean = |w: &dyn Fn(&Responsiveness) -> f64, v: &dyn Fn(&Responsiveness) -> Option<f64>| {
        let (mut sum, mut n) = (0.0, 0.0);
        for r in &rs {
            if let Some(x) = v(r).filter(|x| x.is_finite() && *x > 0.0) {
                sum += w(r) * x;
                n += w(r);
            }
        }
        (n > 0.0).then(|| sum / n)
    };
    let by_foreign = |r: &Responsiveness| r.foreign_probes.max(1) as f64;
    let by_self = |r: &Responsiveness| r.self_probes.max(1) as f64;
    let ms = |rpm: f64| (rpm > 0.0).then(|| 60_000.0 / rpm);
    let foreign_rpm = mean(&by_foreign, &|r| ms(r.foreign_rpm)).map_or(0.0, |m| 60_000.0 / m);
    let self_rpm = mean(&by_self, &|r| ms(r.self_rpm)).map_or(0.0, |m| 60_000.0 / m);
    let one = |_: &Responsiveness| 1.0;
    // The common window: the intervals every client ran (a client whose
    // method ended sooner stops adding to the sums).
    let common = rs.iter().map(|r| r.intervals.len()).min().unwrap_or(0);
    let intervals = (0..common)
        .map(|k| {
            let at: Vec<&RpmInterval> = rs.iter().filter_map(|r| r.intervals.get(k)).collect();
            let rpms: Vec<f64> = at.iter().filter_map(|i| i.rpm).collect();
            RpmInterval {
                t_s: at.iter().map(|i| i.t_s).fold(0.0, f64::max),
                down_bps: at.iter().map(|i| i.down_bps).sum(),
                up_bps: at.iter().map(|i| i.up_bps).sum(),
                down_connections: at.iter().map(|i| i.down_connections).sum(),
                up_connections: at.iter().map(|i| i.up_connections).sum(),
                rpm: (!rpms.is_empty()).then(|| rpms.iter().sum::<f64>() / rpms.len() as f64),
            }
        })
        .collect();
    Responsiveness {
        rpm: (foreign_rpm + self_rpm) / 2.0,
        foreign_rpm,
        self_rpm,
        confidence: rs
            .iter()
            .map(|r| r.confidence)
            .reduce(|a, b| a.zip(b).map(|(a, b)| a.min(b)))
            .flatten(),
        idle_rtt_us: mean(&one, &|r| Some(r.idle_rtt_us)).unwrap_or(0.0),
        capacity_up_bps: rs.iter().map(|r| r.capacity_up_bps).sum(),
        capacity_down_bps: rs.iter().map(|r| r.capacity_down_bps).sum(),
        tcp_handshake_us: mean(&by_foreign, &|r| Some(r.tcp_handshake_us)).unwrap_or(0.0),
        tls_handshake_us: mean(&by_foreign, &|r| Some(r.tls_handshake_us)).unwrap_or(0.0),
        http_foreign_us: mean(&by_foreign, &|r| Some(r.http_foreign_us)).unwrap_or(0.0),
        http_self_us: mean(&by_self, &|r| Some(r.http_self_us)).unwrap_or(0.0),
        http_self_down_us: mean(&by_self, &|r| r.http_self_down_us),
        http_self_up_us: mean(&by_self, &|r| r.http_self_up_us),
        foreign_probes: foreign_n,
        self_probes: self_n,
        down_connections: rs.iter().map(|r| r.down_connections).sum(),
        up_connections: rs.iter().map(|r| r.up_connections).sum(),
        goodput_stable: rs.iter().all(|r| r.goodput_stable),
        responsiveness_stable: rs.iter().all(|r| r.responsiveness_stable),
        draft: rs[0].draft.clone(),
        url: url.to_string(),
        intervals,
        clients: each
            .iter()
            .map(|(c, r)| ClientRpm {
                name: c.name.clone(),
                rpm: r.rpm,
                foreign_rpm: r.foreign_rpm,
                self_rpm: r.self_rpm,
                confidence: r.confidence,
                idle_rtt_us: r.idle_rtt_us,
                capacity_down_bps: r.capacity_down_bps,
                capacity_up_bps: r.capacity_up_bps,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::model::result::Iteration;

    fn client(name: &str, foreign: f64, own: f64, probes: u64, down: f64) -> ClientRun {
        let ran = if name == "c1" { 3 } else { 2 };
        let r = Responsiveness {
            intervals: (0..ran)
                .map(|k| RpmInterval {
                    t_s: k as f64 + 1.0,
                    down_bps: down,
                    ..Default::default()
                })
                .collect(),
            rpm: (foreign + own) / 2.0,
            foreign_rpm: foreign,
            self_rpm: own,
            confidence: Some(params::Confidence::High),
            foreign_probes: probes,
            self_probes: probes,
            capacity_down_bps: down,
            ..Default::default()
        };
        let it = Iteration {
            own: crate::model::own::Own::with(params::FIGURES, &r),
            ..Default::default()
        };
        ClientRun {
            name: name.into(),
            result: TestResult {
                iterations: vec![it],
                ..Default::default()
            },
        }
    }

    /// The pooled round trip is the probe-weighted mean of the clients'
    /// (60,000 / RPM); capacity adds up; the draft's RPM is the mean of
    /// the two sides.
    #[test]
    fn clients_pool_their_probes_and_add_their_capacity() {
        let runs = [
            client("c1", 600.0, 300.0, 100, 40e6),
            client("c2", 200.0, 100.0, 300, 60e6),
        ];
        let each: Vec<_> = runs
            .iter()
            .map(|c| {
                let r = Responsiveness::of(&c.result.iterations[0].own).unwrap();
                (c, r)
            })
            .collect();
        let p = pool(&each, "https://x/.well-known/nq");
        // Foreign: (100 x 100 ms + 300 x 300 ms) / 400 = 250 ms = 240 RPM.
        assert!((p.foreign_rpm - 240.0).abs() < 1e-9, "{}", p.foreign_rpm);
        // Self: (100 x 200 ms + 300 x 600 ms) / 400 = 500 ms = 120 RPM.
        assert!((p.self_rpm - 120.0).abs() < 1e-9, "{}", p.self_rpm);
        assert!((p.rpm - 180.0).abs() < 1e-9);
        assert_eq!(p.capacity_down_bps, 100e6);
        assert_eq!(p.foreign_probes, 400);
        assert_eq!(p.confidence, Some(params::Confidence::High));
        assert_eq!(p.clients.len(), 2);
        assert_eq!(p.clients[1].name, "c2");
        // c1 ran 3 intervals, c2 2: the common window is 2, each both's.
        assert_eq!(p.intervals.len(), 2);
        assert_eq!(p.intervals[1].down_bps, 100e6);
    }
}
