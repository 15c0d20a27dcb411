//! The lab: client, router and server namespaces joined by veth links, with
//! the WAN (delay, rate, loss) applied only in the router by linerate's own
//! user-space emulator. Addresses come from 198.18.0.0/15 (RFC 2544) and
//! exist only inside the lab's namespaces.
pub mod aqm;
pub mod calibrate;
pub mod emulator;
pub mod error;
pub mod firewall;
pub mod link;
pub mod netns;
pub mod nfqueue;
pub mod plumb;
pub mod record;
pub mod spec;
pub mod sshd;
pub mod state;
pub mod tap;
pub mod topology;
pub mod tunnel;
pub mod wire;

pub use error::{EmulatorError, LabError};
