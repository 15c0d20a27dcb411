//! The library's errors, typed by what the user should do about them. Only
//! the command-line roof (`cli`) turns them into exit codes and messages.

/// What went wrong, in one line a user can act on.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Error {
    /// The input is wrong (flags, a study file, an option's value): exit 2.
    #[error("{0}")]
    Usage(String),
    /// Something failed and nothing (more) was measured: exit 1.
    #[error("{0}")]
    Failed(String),
    /// The test or study ended early; what was measured is kept: exit 3.
    #[error("{0}")]
    Partial(String),
    /// `compare --fail-if` found a change past its threshold: exit 4.
    #[error("{0}")]
    Threshold(String),
}

impl From<String> for Error {
    fn from(message: String) -> Self {
        Error::Failed(message)
    }
}

/// A usage error: `map_err(usage)` on a parser's message.
pub fn usage(message: impl Into<String>) -> Error {
    Error::Usage(message.into())
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
