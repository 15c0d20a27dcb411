//! The model's errors. Everything the model refuses is input that does not
//! hold (an option's value, a combination of options, a hosts file), so
//! every variant is a usage error at the command-line roof (exit 2).

use crate::units::UnitsError;

/// What in a test's options, a spec or a hosts file does not hold.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// A size, duration, count, rate or CPU list typed wrong.
    #[error(transparent)]
    Units(#[from] UnitsError),
    /// A `--rate` that is neither a count nor a bit rate with its unit.
    #[error("{0}; a bit rate takes its unit: 500mbit")]
    Rate(UnitsError),
    /// A value not of its form (`9:1`, `99,5`, `3..10`, on/off): the input
    /// and the form, with an example.
    #[error("'{input}' is not {form}")]
    Form { input: String, form: &'static str },
    /// A value out of its bounds or a combination of options that the
    /// options' or the spec's rules refuse.
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// A study table's or a sweep point's keys that are not options, or
    /// values of the wrong type (the TOML reader's message).
    #[error("{}", .0.message().trim())]
    Keys(toml::de::Error),
    /// A hosts file that is not TOML or not its schema: line and message.
    #[error("{line}: {message}")]
    HostsSyntax { line: usize, message: String },
    /// A hosts file's or `--clients`'s address that is not an IP address.
    #[error("host {host}: {what} '{text}' is not an IP address (write e.g. 10.0.0.1)")]
    NotAnIp {
        host: String,
        what: &'static str,
        text: String,
    },
    #[error("host name '{0}' must be 1-32 characters of letters, digits, '-', '_' and '.'")]
    HostName(String),
    #[error("no [[host]] entries: list each machine with a name and an address")]
    NoHosts,
    #[error("host {0} is listed twice")]
    HostTwice(String),
    #[error("host {host}: connect lists {connect} addresses for {data} data addresses: one per data address, in its order")]
    ConnectCount {
        host: String,
        connect: usize,
        data: usize,
    },
    #[error("an empty host list: name hosts of the hosts file, e.g. d1,d2")]
    NoPicks,
}

/// A rule of the options or of the spec that a value or a combination
/// breaks, in the words the user reads ("--flows must be at least 1").
/// One kind with many messages: the rules are many and each names the
/// flags it is about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

impl From<&str> for Invalid {
    fn from(message: &str) -> Self {
        Invalid(message.into())
    }
}

impl From<String> for Invalid {
    fn from(message: String) -> Self {
        Invalid(message)
    }
}

/// Every model error is the user's input: exit 2.
impl From<ModelError> for crate::error::Error {
    fn from(e: ModelError) -> Self {
        crate::error::Error::Usage(e.to_string())
    }
}

impl From<Invalid> for crate::error::Error {
    fn from(e: Invalid) -> Self {
        crate::error::Error::Usage(e.0)
    }
}

/// `units` and `error` are leaves side by side and cannot name each other;
/// a quantity typed wrong is the user's input: exit 2.
impl From<UnitsError> for crate::error::Error {
    fn from(e: UnitsError) -> Self {
        crate::error::Error::Usage(e.to_string())
    }
}
