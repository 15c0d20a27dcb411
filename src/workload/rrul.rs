//! rrul: flent's Realtime Response Under Load, as a mix on one timeline:
//! two probes alone (idle), then beside TCP streams each way (loaded)
//! (`controller::rrul` builds its groups and folds its phases).

use super::kind::Kind;
use super::RateColumn;
use crate::model::spec::{self, TestSpec};

pub struct Rrul;

impl Kind for Rrul {
    fn workload(&self) -> spec::Workload {
        spec::Workload::Rrul
    }
    fn describe(&self, spec: &TestSpec) -> String {
        let r = spec.rrul.clone().unwrap_or_default();
        format!(
            "rrul: {} TCP stream{} each way beside two probes (rr and udp-rr {}/{} B at {}/s each, open loop): {} s idle, {} s ramp, {} s loaded",
            r.streams,
            if r.streams == 1 { "" } else { "s" },
            spec.request,
            spec.response,
            r.probe_rate,
            r.idle_s,
            spec.warmup_s,
            spec.duration_s
        )
    }
    fn describes_all(&self) -> bool {
        // It says its phases; its groups' flows are below it.
        true
    }
    fn rate_column(&self, _spec: &TestSpec) -> RateColumn {
        RateColumn::Transactions
    }
    fn one_row(&self) -> bool {
        true
    }
    fn searches(&self) -> bool {
        false
    }
}
