//! Operations on hosts rather than tests: agents started and stopped over
//! OpenSSH (`cluster`) and the journals that restore the kernel settings
//! (`sysctl`) and NIC settings (`nic`, through `ethtool`) an agent changed. Below both processes' rooms: the agent
//! journals its sysctls here, the controller reads cluster state here, and
//! cluster reaches an agent only through the probe the caller hands it.
pub mod cluster;
pub mod error;
pub mod ethtool;
pub mod k8s;
pub mod nic;
pub mod sysctl;

pub use error::{HostError, OpsError};
