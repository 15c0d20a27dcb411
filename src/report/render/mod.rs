//! Writing the analysis down: the report document (HTML and Markdown), the
//! landscape as CSV, SVG plots, and one result as text for a terminal.
pub mod csv;
pub mod document;
pub mod groups;
pub mod html;
pub mod human;
pub mod markdown;
pub mod openmetrics;
pub mod plot;
pub mod search;
