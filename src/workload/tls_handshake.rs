//! `tls-handshake`: connect, a full (or, with `--resume on`, resumed) TLS
//! handshake, one small request/response, close. crr's flows with TLS
//! required: handshakes/s and CPU per handshake on each end.

use super::kind::KindFacts;
use super::{crr, Conns, Pattern, Plugin, WorkloadError};
use crate::engine::flow::Flow;
use crate::model::result::Iteration;
use crate::model::spec::{self, MainMetric, TestSpec};
use crate::units::fmt_bytes;

pub struct TlsHandshake;

/// This kind's name in a spec, on the command line and in the registry.
pub const NAME: spec::Workload = spec::Workload::named("tls-handshake");

impl Plugin for TlsHandshake {
    fn facts(&self) -> KindFacts {
        KindFacts {
            tls_always: true,
            ..KindFacts::EXCHANGE
        }
    }

    fn kind(&self) -> spec::Workload {
        NAME
    }

    fn help(&self) -> &'static str {
        "Connect, full (or resumed) TLS handshake, one small exchange, close"
    }

    /// Without TLS a handshake is a connection with one exchange: crr.
    fn clear_twin(&self) -> spec::Workload {
        crr::NAME
    }

    fn pattern(&self) -> Pattern {
        Pattern::PerTransaction
    }

    fn describe(&self, spec: &TestSpec) -> String {
        format!(
            "tls-handshake {}/{}",
            fmt_bytes(spec.request),
            fmt_bytes(spec.response)
        )
    }

    fn report_lines(&self, _spec: &TestSpec, it: &Iteration) -> Vec<(&'static str, String)> {
        vec![crr::conns_line(it)]
    }

    fn main_metric(&self, _spec: &TestSpec) -> MainMetric {
        MainMetric::TransactionRate
    }

    fn validate(&self, spec: &TestSpec) -> Result<(), WorkloadError> {
        match spec.tls {
            Some(_) => Ok(()),
            None => Err(WorkloadError::TlsHandshakeNeedsTls),
        }
    }

    fn client_flows(
        &self,
        spec: &TestSpec,
        conns: Conns,
    ) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
        crr::client_flows(spec, conns)
    }

    fn agent_flows(
        &self,
        spec: &TestSpec,
        conns: Conns,
    ) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
        crr::agent_flows(spec, conns)
    }
}
