//! Output for people: the live progress line, the tables printed at the end,
//! and the reports drawn from a study's results folder.
pub mod compare;
pub mod csv;
pub mod document;
pub mod html;
pub mod human;
pub mod keypoints;
pub mod landscape;
pub mod markdown;
pub mod metrics;
pub mod plot;
pub mod progress;
pub mod wanmodel;
