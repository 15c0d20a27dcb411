//! scp: real OpenSSH `scp` of `bytes` to linerate's own sshd in a lab's
//! server namespace (`crate::program` runs it as exec with the command
//! built for it).

use super::kind::{Kind, KindFacts, Needs, Program};
use crate::model::spec::{self, TestSpec};
use crate::units::fmt_bytes;

pub struct Scp;

/// This kind's name in a spec, on the command line and in the registry.
pub const NAME: spec::Workload = spec::Workload::named("scp");

impl Kind for Scp {
    fn facts(&self) -> KindFacts {
        KindFacts {
            sshd: true,
            ..KindFacts::ALL
        }
    }

    fn rules(&self, spec: &TestSpec) -> Result<(), crate::model::error::Invalid> {
        if spec.bytes.is_none() {
            return Err("scp needs --bytes (the size of the file copied)".into());
        }
        super::rules::program(spec)
    }

    fn workload(&self) -> spec::Workload {
        NAME
    }

    fn help(&self) -> &'static str {
        "Real OpenSSH scp of `--bytes` to linerate's own sshd in the server namespace"
    }
    fn needs(&self) -> Needs {
        Needs::LAB
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
    fn program(&self) -> Option<&dyn Program> {
        Some(self)
    }
}

impl Program for Scp {
    /// `--rcvbuf` is the window the seed's unmodified server offers.
    fn server_window(&self, spec: &TestSpec) -> Option<u64> {
        spec.rcvbuf.map(|w| w as u64)
    }
    /// `scp -q -F CONFIG FILE server:/dev/null`: the payload to the lab's
    /// sshd, through the client namespace's ssh.
    fn command(
        &self,
        _spec: &TestSpec,
        sshd_config: Option<&std::path::Path>,
        file: Option<&std::path::Path>,
    ) -> Option<Vec<String>> {
        let shown = |p: Option<&std::path::Path>| p.map(|p| p.display().to_string());
        Some(vec![
            "scp".to_string(),
            "-q".into(),
            "-F".into(),
            shown(sshd_config).unwrap_or_default(),
            shown(file).unwrap_or_default(),
            "server:/dev/null".into(),
        ])
    }
}
