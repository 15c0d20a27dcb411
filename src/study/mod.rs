//! Studies: declarative files of sweeps over tests, run into a results
//! folder that reports are drawn from.
pub mod builtin;
pub mod commands;
pub mod config;
pub mod file;
pub mod folder;
pub mod quick;
pub mod runner;
pub mod sweep;
