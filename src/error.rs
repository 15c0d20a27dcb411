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

/// `From<$t> for Error` for a room's error that knows its own class
/// (`fn is_usage(&self) -> bool`): Usage (exit 2) when the user's input is
/// what is wrong, else Failed (exit 1). One rule, written once.
macro_rules! classed_by_is_usage {
    ($t:ty) => {
        impl From<$t> for $crate::error::Error {
            fn from(e: $t) -> Self {
                if e.is_usage() {
                    $crate::error::Error::Usage(e.to_string())
                } else {
                    $crate::error::Error::Failed(e.to_string())
                }
            }
        }
    };
}
pub(crate) use classed_by_is_usage;
