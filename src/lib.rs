//! linerate: a network performance lab in one binary.
//!
//! The controller (`linerate run`) plans a test, opens its flows against an
//! agent (`linerate serve`, started locally when none is given), runs both
//! sides on a common timeline and folds their interval counters, CPU and
//! kernel views into one result. docs/architecture.md maps the floors below.
pub mod agent;
pub mod cli;
pub mod control;
pub mod controller;
pub mod engine;
pub mod error;
#[doc(hidden)]
pub mod fuzz;
pub mod history;
pub mod hostops;
pub mod kv;
pub mod lab;
pub mod measure;
pub mod model;
pub mod program;
pub mod report;
pub mod study;
pub mod units;
pub mod workload;
