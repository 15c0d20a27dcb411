//! From results to meaning: the landscape (metrics per point), the models
//! that bound it (line rate, window/RTT), key points, comparisons, and
//! rrul's figures (latency over time and its distribution).
pub mod check;
pub mod compare;
pub mod environments;
pub mod figure;
pub mod hosts;
pub mod keypoints;
pub mod landscape;
pub mod metrics;
pub mod overview;
pub mod rpm;
pub mod rrul;
pub mod search;
pub mod tunnel;
pub mod wanmodel;
