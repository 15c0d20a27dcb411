//! Output for people, in two halves and the pipeline over them. `analysis`
//! turns a results folder into a landscape (tables and curves per metric),
//! the models beside it and the key points drawn from it, and compares two
//! folders; `render` writes that one model as HTML, Markdown, CSV and SVG
//! plots, and a single result as text; `pipeline` loads a folder, runs
//! both and writes the files. Analysis never imports render, and neither
//! imports the pipeline. Reports are drawn from a folder alone, never by
//! running anything.
pub mod analysis;
pub mod pipeline;
pub mod render;
