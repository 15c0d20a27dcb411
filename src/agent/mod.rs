//! The agent daemon (`linerate serve`) and the controller's side of the
//! control protocol.
pub mod controller;
pub mod local;
pub mod protocol;
pub mod server;
