//! A lab point's NIC settings (`nic.*`): the lab sets them itself on the
//! data interface of every client and server namespace (the link end that
//! holds the host's lab address), reads them back, runs the point, and
//! puts every value back when the point ends, so a point that does not set
//! them runs on the lab as it was made.
//!
//! The router's ports are left alone: they are the emulated network, not
//! an end's NIC, and the emulator batches by what GRO hands it (`lab.offloads`
//! is the setting that changes every link end, the router's included).
//!
//! The lab's agents are not asked to apply them again: the point is sent
//! to them without its `nic` table (two appliers in one namespace would
//! restore each other's values in a race at the test's end), and the
//! result gets the table back with what each end's interfaces had,
//! `environment.client.nic` (the client namespaces) and
//! `environment.agent.nic` (the server namespaces).

use crate::error::{Error, Result};
use crate::hostops::nic::{self, Applied, Place};
use crate::lab::state::LabState;
use crate::model::nic::NicInterface;
use crate::model::result::TestResult;
use crate::model::spec::TestSpec;

/// Applies `spec.nic` in the lab's host namespaces, runs `run` with the
/// point stripped of it, and puts the interfaces back; the result records
/// the settings and what each interface had.
pub fn run_with_nic(
    st: &LabState,
    spec: &TestSpec,
    groups: &[crate::workload::group::Group],
    run: impl FnOnce(&TestSpec, &[crate::workload::group::Group]) -> Result<TestResult>,
) -> Result<TestResult> {
    if spec.nic.is_empty() {
        return run(spec, groups);
    }
    let mut guards: Vec<Applied> = Vec::new();
    let mut client: Vec<NicInterface> = Vec::new();
    let mut server: Vec<NicInterface> = Vec::new();
    let ends = st
        .client_hosts()
        .into_iter()
        .map(|h| (h, true))
        .chain(st.server_hosts().into_iter().map(|h| (h, false)));
    for (h, is_client) in ends {
        let addr: std::net::IpAddr = h
            .addr
            .parse()
            .map_err(|e| Error::Failed(format!("lab address {}: {e}", h.addr)))?;
        let iface = nic::interface_in(&h.ns, addr).map_err(|e| Error::Failed(e.to_string()))?;
        let (g, recs) = nic::apply(&spec.nic, &[iface], Place::Lab(h.ns.clone()))
            .map_err(|e| Error::Failed(e.to_string()))?;
        guards.push(g);
        if is_client {
            client.extend(recs);
        } else {
            server.extend(recs);
        }
    }
    let mut bare = spec.clone();
    bare.nic.clear();
    let bare_groups: Vec<crate::workload::group::Group> = groups
        .iter()
        .map(|g| {
            let mut g = g.clone();
            g.spec.nic.clear();
            g
        })
        .collect();
    let out = run(&bare, &bare_groups);
    // Put back before anything else runs in the lab; a failure is said
    // (the lab is the study's own and goes with it).
    let mut failed = Vec::new();
    for g in guards {
        failed.extend(g.undo());
    }
    for e in &failed {
        eprintln!("linerate: lab NIC setting not put back: {e}");
    }
    let mut r = out?;
    r.spec.nic = spec.nic.clone();
    for (gr, g) in r.groups.iter_mut().zip(groups) {
        gr.spec.nic = g.spec.nic.clone();
    }
    r.environment.client.nic = client;
    r.environment.agent.nic = server;
    Ok(r)
}
