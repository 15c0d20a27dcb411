//! What a chart shows, as data: measured series, model lines and curves,
//! axis labels and scales. The report's landscape and a kind's own charts
//! (`Kind::charts`) describe them with these; the report's `render::plot`
//! draws them (as SVG), so neither depends on how a chart is drawn.

/// One measured curve.
pub struct Series {
    /// Legend text.
    pub name: String,
    /// (x, y, optional half-width of the confidence interval for an error bar)
    pub points: Vec<(f64, f64, Option<f64>)>,
}

/// A horizontal reference line from a model rather than a measurement.
pub struct HLine {
    /// Legend text, e.g. "line rate".
    pub label: String,
    pub y: f64,
}

/// A model drawn as a curve beside a measured series (the window/RTT model
/// of a transfer at each RTT), dashed in that series' colour.
pub struct Curve {
    /// Legend text ("" for none).
    pub label: String,
    /// Index into `Chart::series` of the series it models (its colour).
    pub series: usize,
    pub points: Vec<(f64, f64)>,
}

/// Everything one chart shows.
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// Logarithmic x axis, for sweeps over sizes that double; non-positive
    /// x values are left out. Ignored for a categorical axis.
    pub log_x: bool,
    /// Logarithmic y axis; non-positive y values are left out.
    pub log_y: bool,
    /// A linear y axis fitted to the data rather than started at zero:
    /// a figure over time, where a 5% change must be seen, not a
    /// comparison by ratio.
    pub zoom_y: bool,
    /// When Some, x values are indices 0..n into these names and the x axis shows the names (categorical axis, e.g. test cases).
    pub x_categories: Option<Vec<String>>,
    pub series: Vec<Series>,
    /// Horizontal model lines (line rate, 90% threshold), drawn dashed and labelled in the legend.
    pub hlines: Vec<HLine>,
    /// Model curves, dashed in their series' colour; like `hlines`, they are
    /// no chart on their own.
    pub curves: Vec<Curve>,
}
