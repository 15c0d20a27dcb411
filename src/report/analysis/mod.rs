//! From results to meaning: the landscape (metrics per point), the models
//! that bound it (line rate, window/RTT), key points, and comparisons.
pub mod check;
pub mod compare;
pub mod environments;
pub mod figure;
pub mod hosts;
pub mod keypoints;
pub mod landscape;
pub mod metrics;
pub mod wanmodel;
