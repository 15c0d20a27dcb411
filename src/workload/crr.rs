//! `crr`: connect, request, response, close per transaction (netperf
//! TCP_CRR). Each client flow is a slot that opens one connection after
//! another; the agent accepts on one SO_REUSEPORT listener per worker and
//! answers each connection once.
//!
//! Ports: in `graceful` mode the agent closes first, so TIME_WAIT stays on
//! the agent's side and the client's ephemeral port is free at once; the
//! agent's kernel accepts a new SYN on a TIME_WAIT pair when its timestamps
//! are newer. In `reset` mode the client closes with SO_LINGER 0 and no
//! TIME_WAIT exists at all. Either way a long run does not exhaust the
//! client's ports; the counters record how each connection ended.

use mio::net::TcpStream;

use crate::engine::flow::{Flow, FlowBase};
use crate::engine::tls::Role;
use crate::model::spec::{self, CloseMode, MainMetric, TestSpec};
use crate::workload::rr::Responder;
use std::sync::Arc;

use super::kind::KindFacts;
use super::per_conn::{Acceptor, Carries, Connector, OnAccept};
use super::{Conns, Pattern, Plugin, WorkloadError};
use crate::model::result::Iteration;
use crate::units::{fmt_bytes, fmt_rate};

/// Connect, request, response, close per transaction.
pub struct Crr;

/// This kind's name in a spec, on the command line and in the registry.
pub const NAME: spec::Workload = spec::Workload::named("crr");

impl Plugin for Crr {
    fn facts(&self) -> KindFacts {
        KindFacts {
            threads: true,
            threads_when_closed: true,
            ..KindFacts::EXCHANGE
        }
    }

    fn kind(&self) -> spec::Workload {
        NAME
    }

    fn help(&self) -> &'static str {
        "Connect, request, response, close per transaction (TCP_CRR)"
    }

    fn pattern(&self) -> Pattern {
        Pattern::PerTransaction
    }

    fn describe(&self, spec: &TestSpec) -> String {
        format!(
            "crr {}/{}, {} close",
            fmt_bytes(spec.request),
            fmt_bytes(spec.response),
            format!("{:?}", spec.close).to_lowercase()
        )
    }

    fn report_lines(&self, _spec: &TestSpec, it: &Iteration) -> Vec<(&'static str, String)> {
        vec![conns_line(it)]
    }

    fn main_metric(&self, _spec: &TestSpec) -> MainMetric {
        MainMetric::TransactionRate
    }

    fn client_flows(
        &self,
        spec: &TestSpec,
        conns: Conns,
    ) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
        client_flows(spec, conns)
    }

    fn agent_flows(
        &self,
        spec: &TestSpec,
        conns: Conns,
    ) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
        agent_flows(spec, conns)
    }
}

/// Connections per second and how they ended (the client's count).
pub fn conns_line(it: &Iteration) -> (&'static str, String) {
    let c = &it.counters.client;
    (
        "conns/s",
        format!(
            "{} ({} graceful, {} reset)",
            fmt_rate(it.connections_per_s),
            c.graceful_closes,
            c.resets
        ),
    )
}

/// One connecting slot per flow, each to its agent data address.
pub fn client_flows(spec: &TestSpec, conns: Conns) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
    if conns.connect_to.is_empty() {
        return Err(WorkloadError::NoDataAddress("a per-transaction workload"));
    }
    Ok(conns
        .connect_to
        .iter()
        .map(|&(id, to)| {
            Box::new(Connector::new(
                id,
                to,
                spec,
                Carries::Exchange {
                    request: spec.request,
                    response: spec.response,
                },
                conns.cookie,
                conns.tls.clone(),
            )) as Box<dyn Flow>
        })
        .collect())
}

/// One acceptor per listener (one per agent worker, SO_REUSEPORT).
pub fn agent_flows(spec: &TestSpec, conns: Conns) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
    Ok(conns
        .listeners
        .into_iter()
        .map(|l| {
            Box::new(Acceptor::new(
                l,
                OneShot {
                    request: spec.request,
                    response: spec.response,
                    cookie: conns.cookie,
                    close_first: spec.close == CloseMode::Graceful,
                    tls: conns.tls.clone(),
                },
            )) as Box<dyn Flow>
        })
        .collect())
}

/// The agent's crr server: each connection it accepts is answered once
/// by a one-shot `Responder`.
pub struct OneShot {
    request: u64,
    response: u64,
    cookie: u64,
    close_first: bool,
    tls: Option<Arc<Role>>,
}

impl OnAccept for OneShot {
    fn serve(&mut self, stream: TcpStream) -> Option<Box<dyn Flow>> {
        Some(Box::new(Responder::one_shot(
            FlowBase::new(0, stream),
            self.request,
            self.response,
            self.cookie,
            self.close_first,
            self.tls.clone(),
        )))
    }
}
