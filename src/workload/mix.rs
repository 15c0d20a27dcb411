//! mix: several groups (each a flow workload with its options) on one
//! window (`controller::mix` runs them; each group is described below it
//! by its own kind).

use super::group::{self, Group, GroupError};
use super::kind::Composite;
use super::kind::Kind;
use super::RateColumn;
use crate::model::options::TestOptions;
use crate::model::spec::{self, TestSpec};
use crate::model::Invalid;

pub struct Mix;

/// This kind's name in a spec, on the command line and in the registry.
pub const NAME: spec::Workload = spec::Workload::named("mix");

impl Kind for Mix {
    fn workload(&self) -> spec::Workload {
        NAME
    }

    fn help(&self) -> &'static str {
        "Several workloads (groups) on one window: `linerate run mix 'G1' 'G2'`"
    }
    fn facts(&self) -> super::kind::KindFacts {
        super::kind::KindFacts::GROUPS
    }
    fn describe(&self, _spec: &TestSpec) -> String {
        "several workloads on one window (each group below)".to_string()
    }
    fn rate_column(&self, _spec: &TestSpec) -> RateColumn {
        // The groups' transactions, summed.
        RateColumn::Transactions
    }
    fn composite(&self) -> Option<&dyn Composite> {
        Some(self)
    }
}

impl Composite for Mix {
    fn takes_groups(&self) -> bool {
        true
    }
    /// Each group's options over the common ones (`opts` without its
    /// groups), built by `build`, then checked together.
    fn groups(
        &self,
        opts: &TestOptions,
        _local: bool,
        build: &mut dyn FnMut(TestOptions) -> Result<TestSpec, String>,
    ) -> Result<Vec<Group>, GroupError> {
        let texts = opts.run.groups.as_ref().ok_or_else(|| {
            Invalid::from(
                "workload = \"mix\" needs groups = [\"stream --flows 4\", \"rr --rate 100\"]",
            )
        })?;
        let mut common = opts.clone();
        common.run.groups = None;
        common.run.label = None;
        let mut out = Vec::new();
        for (i, text) in texts.iter().enumerate() {
            let name = format!("g{}", i + 1);
            let (w, o) = group::parse_group(text)?;
            let mut o = common.overlay(&o);
            o.run.workload = Some(w);
            let spec = build(o).map_err(|e| Invalid(format!("group {name} ({text}): {e}")))?;
            out.push(Group::new(name, text.clone(), spec));
        }
        group::check(&out)?;
        Ok(out)
    }
    fn spec(
        &self,
        _opts: &TestOptions,
        _local: bool,
        groups: &[Group],
    ) -> Result<TestSpec, GroupError> {
        Ok(group::spec_of(groups, NAME))
    }
}
