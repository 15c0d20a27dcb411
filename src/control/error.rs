//! What the control layer refuses: a spec that fails the checks both ends
//! run (the user's input, exit 2 at the roof), and a token file that cannot
//! be read or holds no token (exit 1, as the command line always had it).

use std::path::PathBuf;

use crate::workload::SpecError;

/// Why a spec cannot run, or a token could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The spec's own rules, its workload's, or what the TLS library
    /// offers (`workload::check`).
    #[error(transparent)]
    Check(#[from] SpecError),
    #[error("cannot read token file {path}: {source}")]
    ReadTokenFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("token file {path} is empty: put a shared secret on its first line")]
    EmptyToken { path: PathBuf },
}

/// A workload's refusal is a failed check.
impl From<crate::workload::WorkloadError> for ControlError {
    fn from(e: crate::workload::WorkloadError) -> Self {
        ControlError::Check(e.into())
    }
}

/// A spec that fails the checks is input (Usage), whatever refused it: the
/// command line has always answered `check` so. A token file is Failed.
impl From<ControlError> for crate::error::Error {
    fn from(e: ControlError) -> Self {
        match e {
            ControlError::Check(_) => crate::error::Error::Usage(e.to_string()),
            ControlError::ReadTokenFile { .. } | ControlError::EmptyToken { .. } => {
                crate::error::Error::Failed(e.to_string())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn messages_are_unchanged_and_checks_are_usage() {
        let empty = ControlError::EmptyToken {
            path: "/tmp/t".into(),
        };
        assert_eq!(
            Error::from(empty),
            Error::Failed(
                "token file /tmp/t is empty: put a shared secret on its first line".into()
            )
        );
        let unreadable = ControlError::ReadTokenFile {
            path: "/nonexistent/t".into(),
            source: std::io::Error::from_raw_os_error(libc::ENOENT),
        };
        assert_eq!(
            unreadable.to_string(),
            format!(
                "cannot read token file /nonexistent/t: {}",
                std::io::Error::from_raw_os_error(libc::ENOENT)
            )
        );
        assert_eq!(
            Error::from(ControlError::from(SpecError::from(
                crate::workload::WorkloadError::NoKvMix
            ))),
            Error::Usage("memcache without its key-value mix".into())
        );
        // Usage even where the engine alone would say Failed.
        assert!(matches!(
            Error::from(ControlError::from(SpecError::from(
                crate::engine::EngineError::Cancelled
            ))),
            Error::Usage(_)
        ));
    }
}
