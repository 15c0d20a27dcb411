//! Output for people: the live progress line and the tables printed at the end.
pub mod human;
pub mod progress;
