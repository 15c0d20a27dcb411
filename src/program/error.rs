//! What running a program in the lab can fail at: the lab under it (its
//! own kinds), the files and processes around the command, the command
//! itself.

use std::io;
use std::path::PathBuf;

use crate::lab::LabError;

#[derive(Debug, thiserror::Error)]
pub enum ProgramError {
    /// An exec or scp spec without its command.
    #[error("exec needs a command: linerate run exec --lab NAME -- COMMAND")]
    NoCommand,
    /// The lab's namespaces, sshd or window calibration.
    #[error(transparent)]
    Lab(#[from] LabError),
    /// A scratch folder, log or payload file that could not be made.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    /// A write or descriptor call whose message never named its file.
    #[error("{0}")]
    Os(io::Error),
    /// The command (or the ssh login probe) could not be started.
    #[error("cannot run {program}: {source}")]
    Run { program: String, source: io::Error },
    #[error("waiting for {program}: {source}")]
    Wait { program: String, source: io::Error },
    /// ssh could not log in to the lab's sshd: the last lines it wrote.
    #[error("ssh login to the lab's sshd failed: {0}")]
    Login(String),
    #[error("cannot start the server command: {0}")]
    ServerCommand(io::Error),
    #[error("{0}")]
    Address(std::net::AddrParseError),
}

/// A spec without its command is a usage error; the lab's errors keep
/// their class; everything else failed.
impl From<ProgramError> for crate::error::Error {
    fn from(e: ProgramError) -> Self {
        match e {
            ProgramError::NoCommand => crate::error::Error::Usage(e.to_string()),
            ProgramError::Lab(e) => e.into(),
            e => crate::error::Error::Failed(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn the_class_follows_the_kind() {
        assert_eq!(
            Error::from(ProgramError::NoCommand),
            Error::Usage("exec needs a command: linerate run exec --lab NAME -- COMMAND".into())
        );
        assert_eq!(
            Error::from(ProgramError::Lab(LabError::Name("X".into()))),
            Error::Usage("lab name 'X' must be 1-24 characters of a-z, 0-9 and '-'".into())
        );
        assert_eq!(
            Error::from(ProgramError::Login("Permission denied".into())),
            Error::Failed("ssh login to the lab's sshd failed: Permission denied".into())
        );
    }
}
