//! From results to meaning: the landscape (metrics per point), the models
//! that bound it (line rate, window/RTT), key points, comparisons, and
//! the capacity searches' charts (a kind draws its own, `Kind::charts`).
pub mod check;
pub mod compare;
pub mod environments;
pub mod hosts;
pub mod keypoints;
pub mod landscape;
pub mod metrics;
pub mod overview;
pub mod search;
pub mod tunnel;
pub mod wanmodel;
