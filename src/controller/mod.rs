//! The controller process's side: a connection to an agent (`conn`), many
//! agents on one window (`fleet`), a local agent it spawns (`local`), where
//! a test runs (`target`), iterations folded into a result (`run`), and the
//! one pipeline that runs a point (`point::run_point`) for `linerate run`
//! and for every point of a study, with its progress line; mixed tests
//! (`mix`, `together`) and rrul, a mix built in (`rrul`).
pub mod auto;
pub mod clients;
pub mod conn;
pub mod driver;
pub mod error;
pub mod local;
pub mod mix;
pub mod point;
pub mod progress;
pub mod run;
pub mod search;
pub mod target;
pub mod together;

pub use error::ControllerError;
