//! The agent process (`linerate serve`): admission of control connections
//! (a lobby for connections that have not spoken, slots for those that
//! did), authenticated sessions, and the agent's end of every test.
pub mod admission;
pub mod error;
pub mod lobby;
pub mod serve;

pub use error::AgentError;
