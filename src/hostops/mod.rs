//! Operations on hosts rather than tests: agents started and stopped over
//! OpenSSH (`cluster`) and the journal that restores the kernel settings
//! an agent changed (`sysctl`). Below both processes' rooms: the agent
//! journals its sysctls here, the controller reads cluster state here, and
//! cluster reaches an agent only through the probe the caller hands it.
pub mod cluster;
pub mod error;
pub mod sysctl;

pub use error::{HostError, OpsError};
