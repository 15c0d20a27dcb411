//! mix: several groups (each a flow workload with its options) on one
//! window (`controller::mix` runs them; each group is described below it
//! by its own kind).

use super::kind::Kind;
use super::RateColumn;
use crate::model::spec::{self, TestSpec};

pub struct Mix;

impl Kind for Mix {
    fn workload(&self) -> spec::Workload {
        spec::Workload::Mix
    }
    fn describe(&self, _spec: &TestSpec) -> String {
        "several workloads on one window (each group below)".to_string()
    }
    fn rate_column(&self, _spec: &TestSpec) -> RateColumn {
        // The groups' transactions, summed.
        RateColumn::Transactions
    }
}
