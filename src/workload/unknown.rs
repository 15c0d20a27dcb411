//! A kind's name this build does not have: a result written by a newer
//! linerate (or an edited one) still reads, and says what it is where it is
//! described. It runs nothing: `workload::check` refuses it before a test
//! starts, and if one reached a runner anyway its `run_here` fails with the
//! same words.

use super::kind::{Kind, Needs};
use crate::model::result::TestResult;
use crate::model::sample::Confidence;
use crate::model::spec::{self, TestSpec};

pub struct Unknown;

impl Kind for Unknown {
    /// Not a name: `find` never returns this kind, and no spec is built
    /// for it.
    fn workload(&self) -> spec::Workload {
        spec::Workload::named("-")
    }
    fn help(&self) -> &'static str {
        "a kind this build of linerate does not have"
    }
    fn needs(&self) -> Needs {
        Needs::NOTHING
    }
    fn describe(&self, spec: &TestSpec) -> String {
        format!("{} ({})", spec.workload, self.help())
    }
    fn describes_all(&self) -> bool {
        true
    }
    fn searches(&self) -> bool {
        false
    }
    fn run_here(
        &self,
        spec: &TestSpec,
        _confidence: Confidence,
        _command: &[String],
        _place: &super::kind::Place,
    ) -> Option<crate::error::Result<TestResult>> {
        let why = super::known(spec.workload).err()?;
        Some(Err(crate::error::usage(why.to_string())))
    }
}
