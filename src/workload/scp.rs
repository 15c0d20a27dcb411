//! scp: real OpenSSH `scp` of `bytes` to linerate's own sshd in a lab's
//! server namespace (`crate::program` runs it as exec with the command
//! built for it).

use super::kind::{Kind, Needs};
use crate::model::spec::{self, TestSpec};
use crate::units::fmt_bytes;

pub struct Scp;

impl Kind for Scp {
    fn workload(&self) -> spec::Workload {
        spec::Workload::Scp
    }
    fn needs(&self) -> Needs {
        Needs {
            agent: false,
            lab: true,
        }
    }
    fn describe(&self, spec: &TestSpec) -> String {
        format!(
            "scp of {} to the server's sshd{} (time limit {:.0} s)",
            fmt_bytes(spec.bytes.unwrap_or(0)),
            spec.rcvbuf
                .map(|w| format!(", server window {} via tcp_rmem", fmt_bytes(w as u64)))
                .unwrap_or_default(),
            spec.duration_s
        )
    }
    fn describes_all(&self) -> bool {
        true
    }
}
