//! Tests that are programs, not flows: a real command timed in the lab
//! (`exec`), and real OpenSSH `scp` to linerate's own sshd (`scp`, exec
//! with the command built by linerate). They run beside the engine, not
//! in it, and fold what they measured into the same result schema.
pub mod error;
pub mod exec;

pub use error::ProgramError;
pub use exec::run;

use crate::model::spec::{TestSpec, Workload};
use crate::units::fmt_bytes;

/// What a program test runs, in words, and its time limit: a result's
/// first line (a program has no flows or window).
pub fn describe(spec: &TestSpec) -> String {
    let what = match spec.workload {
        Workload::Scp => format!(
            "scp of {} to the server's sshd{}",
            fmt_bytes(spec.bytes.unwrap_or(0)),
            spec.rcvbuf
                .map(|w| format!(", server window {} via tcp_rmem", fmt_bytes(w as u64)))
                .unwrap_or_default()
        ),
        _ => format!(
            "exec: {}",
            spec.exec
                .as_ref()
                .map(|e| e.command.join(" "))
                .unwrap_or_default()
        ),
    };
    format!("{what} (time limit {:.0} s)", spec.duration_s)
}
