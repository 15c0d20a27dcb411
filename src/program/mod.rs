//! Tests that are programs, not flows: a real command timed in the lab
//! (`exec`), and real OpenSSH `scp` to linerate's own sshd (`scp`, exec
//! with the command built by linerate). They run beside the engine, not
//! in it, and fold what they measured into the same result schema.
pub mod error;
pub mod exec;

pub use error::ProgramError;
pub use exec::run;
