//! The foundation floor: everything linerate persists or exchanges (the
//! test spec, the options that build it, results, flow and host reports,
//! lab and program records). Data and pure functions only: nothing here
//! imports another floor of linerate (only the leaves `units` and `error`),
//! so a schema change is audited in one folder. docs/result-schema.md
//! mirrors `result`.
pub mod aqm;
pub mod auto;
pub mod chart;
pub mod cryptohw;
pub mod error;
pub mod exec;
pub mod firewall;
pub mod flow;
pub mod host;
pub mod hosts;
pub mod kind;
pub mod lab;
pub mod metric;
pub mod nic;
pub mod options;
pub mod own;
pub mod phase;
pub mod points;
pub mod result;
pub mod sample;
pub mod search;
pub mod security;
pub mod spec;
pub mod tunnel;

pub use error::{Invalid, ModelError};
pub use result::{SCHEMA, SCHEMA_VERSION};
