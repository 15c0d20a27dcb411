//! Workloads: what flows do. One file each; the engine drives them.
pub mod crr;
pub mod exec;
pub mod rr;
pub mod stream;

use std::sync::Arc;

use crate::engine::flow::{Flow, FlowBase};
use crate::spec::{FlowPlan, TestSpec};

/// Builds the flow for an established connection according to `plan`.
pub fn persistent_flow(
    plan: FlowPlan,
    spec: &TestSpec,
    base: FlowBase,
    zerocopy: Option<Arc<stream::ZeroCopySource>>,
) -> Box<dyn Flow> {
    match plan {
        FlowPlan::Stream { send, recv } => Box::new(stream::StreamFlow::new(
            base,
            spec.message,
            send,
            recv,
            zerocopy,
        )),
        FlowPlan::Requester {
            request,
            response,
            count,
        } => {
            let per_flow_rate = spec.rate.map(|r| r / spec.flows as f64);
            Box::new(rr::Requester::new(
                base,
                request,
                response,
                spec.outstanding,
                count,
                per_flow_rate,
            ))
        }
        FlowPlan::Responder { request, response } => {
            Box::new(rr::Responder::new(base, request, response))
        }
        FlowPlan::Connector { .. } => unreachable!("crr clients open their own connections"),
    }
}
