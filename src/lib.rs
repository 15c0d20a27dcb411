//! linerate: a network performance lab in one binary.
//!
//! The controller (`linerate run`) plans a test, opens its flows against an
//! agent (`linerate serve`, started locally when none is given), runs both
//! sides on a common timeline and folds their interval counters, CPU and
//! kernel views into one result. See DESIGN.md for the vocabulary.
pub mod agent;
pub mod cli;
pub mod engine;
pub mod env;
pub mod lab;
pub mod measure;
pub mod report;
pub mod result;
pub mod run;
pub mod spec;
pub mod study;
pub mod units;
pub mod workload;
