//! exec: a real command timed in a lab's client namespace
//! (`crate::program` runs it).

use super::kind::{Kind, KindFacts, Needs, Program};
use crate::model::spec::{self, TestSpec};

pub struct Exec;

/// This kind's name in a spec, on the command line and in the registry.
pub const NAME: spec::Workload = spec::Workload::named("exec");

impl Kind for Exec {
    fn facts(&self) -> KindFacts {
        KindFacts {
            user_command: true,
            ..KindFacts::ALL
        }
    }

    fn rules(&self, spec: &TestSpec) -> Result<(), crate::model::error::Invalid> {
        if spec.exec.as_ref().is_none_or(|e| e.command.is_empty()) {
            return Err(
                "exec needs a command: linerate run exec [--lab NAME] -- COMMAND ARGS".into(),
            );
        }
        super::rules::program(spec)
    }

    fn workload(&self) -> spec::Workload {
        NAME
    }

    fn help(&self) -> &'static str {
        "A real command in the client namespace, timed (no agent flows)"
    }
    fn needs(&self) -> Needs {
        Needs::LAB
    }
    fn describe(&self, spec: &TestSpec) -> String {
        let command = spec
            .exec
            .as_ref()
            .map(|e| e.command.join(" "))
            .unwrap_or_default();
        format!("exec: {command} (time limit {:.0} s)", spec.duration_s)
    }
    fn describes_all(&self) -> bool {
        true
    }
    fn program(&self) -> Option<&dyn Program> {
        Some(self)
    }
}

/// The spec's own command, as written (`crate::program` fills its
/// placeholders).
impl Program for Exec {}
