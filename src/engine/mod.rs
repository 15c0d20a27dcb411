//! The data path: sockets, flows as small state machines, workers that drive
//! many flows from one epoll loop (mio), and a side that runs the workers of
//! one host on a common timeline and merges their interval counters.
pub mod error;
pub mod flow;
pub mod io;
pub mod limits;
pub mod pace;
pub mod poll;
pub mod setup;
pub mod side;
pub mod signals;
pub mod sockopt;
pub mod timer;
pub mod tls;
pub mod tls_common;
#[cfg(feature = "openssl")]
pub mod tls_openssl;
pub mod tls_web;
pub mod udp;
pub mod wait;
pub mod worker;

pub use error::EngineError;
