//! A kind that runs in its client's process (rpm), run by several client
//! agents at once toward one server (a rack lab's clients, a hosts file's
//! `--clients`): the kind starts or names the server (`Clients::server`),
//! every client agent runs the kind from one scheduled instant
//! (`Driver::run_clients_here`), and the kind merges their results. Each
//! client's run is a host row of the result, beside the merged figures.

use super::driver::{Driver, HereRun};
use super::error::ControllerError;
use super::target::Target;
use crate::error::{Error, Result};
use crate::lab::record;
use crate::lab::state::LabState;
use crate::model::result::{HostClock, HostRun, Status, TestResult};
use crate::model::spec::TestSpec;
use crate::workload::kind::{ClientRun, Clients, Place};
use crate::workload::Kind;

/// Runs `spec` on every client agent of `target` toward one server, in
/// `lab`'s record when there is one; None: `kind` does not run on several
/// clients, or `target` has no client agents.
pub fn on_clients(
    target: &mut Target,
    lab: Option<&LabState>,
    kind: &dyn Kind,
    spec: &TestSpec,
    place: &Place,
    command: &[String],
) -> Option<Result<TestResult>> {
    let c = kind.clients()?;
    let d = target.conn.as_mut().filter(|d| d.client_agents() > 0)?;
    let mut go = || run(d, c, spec, place, command.to_vec());
    Some(match lab {
        Some(st) => {
            let mut out = None;
            let rec = record::around(st, || {
                out = Some(go());
                Ok::<(), ControllerError>(())
            });
            match (out, rec) {
                (Some(r), rec) => r.map(|mut r| {
                    if let Ok((_, rec)) = rec {
                        r.lab = Some(rec);
                    }
                    r
                }),
                (None, Err(e)) => Err(ControllerError::Lab(e).into()),
                (None, Ok(_)) => Err(Error::Failed("the lab's record ran no test".into())),
            }
        }
        None => go(),
    })
}

/// Runs `spec` on every client agent of `driver` toward one server.
fn run(
    driver: &mut Driver,
    clients: &dyn Clients,
    spec: &TestSpec,
    place: &Place,
    command: Vec<String>,
) -> Result<TestResult> {
    let server = clients.server(spec, place)?;
    let runs = driver.run_clients_here(&server.spec)?;
    let rows: Vec<HostRun> = runs.iter().map(host_row).collect();
    let failed: Vec<String> = runs
        .iter()
        .filter_map(|r| {
            r.result
                .as_ref()
                .err()
                .map(|e| format!("host {}: {e}", r.name))
        })
        .collect();
    let starts: Vec<f64> = runs
        .iter()
        .filter(|h| h.result.is_ok())
        .map(|h| h.start_late_us)
        .collect();
    let ok: Vec<ClientRun> = runs
        .into_iter()
        .filter_map(|r| {
            let name = r.name;
            r.result.ok().map(|result| ClientRun { name, result })
        })
        .collect();
    if ok.is_empty() {
        let why = format!("no client measured: {}", failed.join("; "));
        return Err(if crate::engine::signals::test_interrupted() {
            Error::Partial(why)
        } else {
            Error::Failed(why)
        });
    }
    let merged = clients.merge(spec, &ok, &server);
    // The clients are done: the server can stop.
    drop(server);
    let mut r = merged.map_err(Error::Failed)?;
    r.command = command;
    r.hosts = rows;
    // Every clock is corrected: the clients' starts differ by how late
    // each woke.
    let first = starts.iter().copied().fold(f64::INFINITY, f64::min);
    for h in &mut r.hosts {
        h.start_offset_us = (h.start_late_us - first).max(0.0);
    }
    let skew = starts.iter().copied().fold(0.0, f64::max) - first;
    for it in &mut r.iterations {
        it.hosts = r.hosts.clone();
        it.start_skew_us = Some(skew.max(0.0));
    }
    if !failed.is_empty() {
        let why = failed.join("; ");
        r.summary.status = Status::Partial;
        for it in &mut r.iterations {
            it.status = Status::Partial;
            it.error = Some(why.clone());
        }
    }
    Ok(r)
}

/// A client's run as a host row: what it carried, its probes and its CPU.
fn host_row(h: &HereRun) -> HostRun {
    let clock = HostClock {
        offset_ns: h.clock.offset_ns,
        uncertainty_ns: h.clock.uncertainty_ns,
        rtt_ns: h.clock.rtt_ns,
    };
    let mut row = HostRun {
        name: h.name.clone(),
        role: "client".into(),
        control: h.control.to_string(),
        clock,
        start_late_us: h.start_late_us,
        ..Default::default()
    };
    match &h.result {
        Ok(r) => {
            let it = r.iterations.first();
            row.addresses = vec![r.agent.address.clone()];
            row.window_s = r.summary.duration_s;
            row.throughput_bps = r.summary.throughput_bps;
            row.transactions_per_s = r.summary.transactions_per_s;
            row.cpu = it.and_then(|i| i.cpu.client.clone());
            row.cost = it.map(|i| i.cost.client.clone()).unwrap_or_default();
            row.errors = it.and_then(|i| i.error.clone()).into_iter().collect();
            row.environment = r.environment.client.clone();
        }
        Err(e) => row.errors = vec![e.clone()],
    }
    row
}
