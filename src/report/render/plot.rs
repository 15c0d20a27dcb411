//! Charts for study reports, drawn as SVG text.
//!
//! A report is one self-contained HTML page, so every chart is rendered to an
//! inline `<svg>` string: no image files to keep next to the page, no
//! scripts, and the page stays readable (and diffable) as text. Plotters is
//! built without any font feature, so it lays text out with its naive size
//! estimate and leaves the glyphs to the browser through a `font-family`
//! attribute; nothing here needs a font on the machine that runs the study.
//!
//! The input is plain numbers from measurements, which can contain anything:
//! NaN from a failed division, zeros on a log axis, one point per series. The
//! renderer drops what cannot be drawn instead of panicking, and only refuses
//! (with `Err`) when nothing at all is left to draw.

use std::ops::Range;

use plotters::coord::combinators::LogCoord;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged, ValueFormatter};
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use crate::error::{Error, Result};
use crate::model::chart::Chart;

/// Chart size in pixels: wide enough for a sweep of a dozen points and a
/// legend, small enough to put two side by side on a laptop screen.
const WIDTH: u32 = 760;
const HEIGHT: u32 = 420;

/// Extra room above the tallest value (and error bar or model line), so the
/// maximum is not drawn on the frame.
const HEADROOM: f64 = 1.08;

/// Width of the plotting area in pixels, for fitting labels: the chart
/// minus its margins and the y label area.
const PLOT_WIDTH: f64 = WIDTH as f64 - 2.0 * MARGIN as f64 - Y_LABEL_AREA as f64;
const MARGIN: u32 = 12;
const Y_LABEL_AREA: u32 = 84;
const X_LABEL_AREA: u32 = 58;

/// Font sizes as given to plotters (its SVG backend writes about 0.8 of
/// them). The report scales the 760 px chart to its ~1000 px column, so
/// 16 here reads as ~17 px on screen and ~12 pt when printed.
const TITLE_FONT: u32 = 22;
const AXIS_DESC_FONT: u32 = 18;
const LABEL_FONT: u32 = 16;
const LEGEND_FONT: u32 = 16;

/// Share of a category's slot its group of bars fills; the rest is the gap
/// between groups.
const BAR_GROUP: f64 = 0.8;

/// Ticks requested on a log axis: all nine per decade for up to four
/// decades (the labels are thinned separately, see `axis_tick`).
const LOG_TICKS: usize = 40;

/// Model marks on bars: dark, so they show on a bar of any colour.
const MODEL_MARK: RGBColor = RGBColor(20, 20, 20);

/// Series colours: a qualitative palette with good contrast on white.
/// (Plotters' `Palette99` starts red, green, yellow; the yellow is hard to see
/// on a white background.)
const SERIES_COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Model lines are dark and dashed so they read as references, not data.
const HLINE_COLORS: [RGBColor; 4] = [
    RGBColor(40, 40, 40),
    RGBColor(150, 30, 30),
    RGBColor(30, 90, 150),
    RGBColor(110, 110, 110),
];

/// Renders a chart as a standalone `<svg ...>...</svg>` string, 760x420 px, suitable to inline into an HTML page (no XML prolog, no external references, no scripts).
///
/// Points that cannot be placed (non-finite, or non-positive on a log axis,
/// or outside the category list) are skipped; an error bar whose lower end
/// would be non-positive on a log axis is cut at the bottom of the chart.
/// Returns `Err` when no point is left to draw, or when the values span a
/// range no axis can show (e.g. overflowing to infinity).
pub fn svg(chart: &Chart) -> Result<String> {
    let plan = Plan::new(chart)?;
    let title = clean_text(&chart.title);
    let x_label = clean_text(&chart.x_label);
    let y_label = clean_text(&chart.y_label);

    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut builder = ChartBuilder::on(&root);
        builder
            .margin(MARGIN)
            .x_label_area_size(X_LABEL_AREA)
            .y_label_area_size(Y_LABEL_AREA);
        if !title.is_empty() {
            builder.caption(&title, ("sans-serif", TITLE_FONT));
        }
        let (x, y) = (plan.x, plan.y);
        let labels = (x_label.as_str(), y_label.as_str());
        // Each combination of linear and log axes is a different coordinate
        // type, so the drawing itself is generic and chosen here.
        match (x.log, y.log) {
            (false, false) => {
                let mut c = builder
                    .build_cartesian_2d(x.lo..x.hi, y.lo..y.hi)
                    .map_err(plot_err)?;
                draw(&mut c, &plan, labels)?;
            }
            (true, false) => {
                let mut c = builder
                    .build_cartesian_2d(LogAxis::new(x.lo..x.hi), y.lo..y.hi)
                    .map_err(plot_err)?;
                draw(&mut c, &plan, labels)?;
            }
            (false, true) => {
                let mut c = builder
                    .build_cartesian_2d(x.lo..x.hi, LogAxis::new(y.lo..y.hi))
                    .map_err(plot_err)?;
                draw(&mut c, &plan, labels)?;
            }
            (true, true) => {
                let mut c = builder
                    .build_cartesian_2d(LogAxis::new(x.lo..x.hi), LogAxis::new(y.lo..y.hi))
                    .map_err(plot_err)?;
                draw(&mut c, &plan, labels)?;
            }
        }
        root.present().map_err(plot_err)?;
    }
    // Plotters' SVG backend writes no prolog today; strip one anyway so the
    // string can always be inlined into HTML.
    match buf.find("<svg") {
        Some(0) => Ok(buf),
        Some(i) => Ok(buf[i..].to_string()),
        None => Err(Error::Failed(
            "plotters produced no <svg> element".to_string(),
        )),
    }
}

fn plot_err<E: std::fmt::Display>(e: E) -> Error {
    Error::Failed(format!("drawing the chart failed: {e}"))
}

/// Control characters are not allowed in XML 1.0 text even when escaped, so
/// they would make the whole page invalid; a newline in a legend would also
/// break plotters' line layout. Plotters escapes `&`, `<`, `>` and quotes.
fn clean_text(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// One axis range, already padded and checked to be drawable.
#[derive(Clone, Copy, Debug)]
struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
}

impl Axis {
    /// Position of `v` along the axis, 0 at `lo` and 1 at `hi`.
    fn frac(&self, v: f64) -> f64 {
        if self.log {
            (v / self.lo).ln() / (self.hi / self.lo).ln()
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
    }

    /// Plotters loops forever or asserts on ranges it cannot subdivide
    /// (NaN, infinite, subnormal spans), so every range is checked here.
    fn checked(self, what: &str) -> Result<Axis> {
        let ok = self.lo.is_finite()
            && self.hi.is_finite()
            && self.lo < self.hi
            && if self.log {
                self.lo > 0.0 && (self.hi / self.lo).is_finite()
            } else {
                (self.hi - self.lo).is_finite()
            };
        if ok {
            Ok(self)
        } else {
            Err(Error::Failed(format!(
                "the {what} values span a range that cannot be drawn ({} .. {})",
                self.lo, self.hi
            )))
        }
    }
}

/// A series reduced to the points that can be drawn, in x order.
struct Prepared {
    name: String,
    color: RGBColor,
    /// Index of the measured series (its own, or the one a model curve
    /// belongs to): its colour and its bar's place in a category.
    slot: usize,
    /// (x, y, half-width): the half-width is finite and positive when present.
    points: Vec<(f64, f64, Option<f64>)>,
}

/// What to draw and where, computed before touching plotters so that every
/// refusal happens up front.
struct Plan {
    series: Vec<Prepared>,
    hlines: Vec<(String, f64, RGBColor)>,
    /// Model curves, in the same form as measured series (no error bars).
    curves: Vec<Prepared>,
    x: Axis,
    y: Axis,
    categories: Option<Vec<String>>,
    /// On a categorical axis, series are bars side by side within each
    /// category (a line between unrelated tests would suggest a trend):
    /// the half-width of one bar in x units. Point x values are then the
    /// bar centres.
    bar_half_width: Option<f64>,
    legend: Corner,
}

impl Plan {
    fn new(chart: &Chart) -> Result<Plan> {
        let categories: Option<Vec<String>> = chart
            .x_categories
            .as_ref()
            .map(|c| c.iter().map(|s| clean_text(s)).collect());
        if categories.as_ref().is_some_and(|c| c.is_empty()) {
            return Err(Error::Failed(
                "a categorical x axis needs at least one category".to_string(),
            ));
        }
        let log_x = chart.log_x && categories.is_none();
        let log_y = chart.log_y;
        let n_cat = categories.as_ref().map_or(0, |c| c.len());

        let x_ok = |x: f64| {
            x.is_finite()
                && if categories.is_some() {
                    // Within half a slot of a category, so it lands in its column.
                    x >= -0.5 && x <= n_cat as f64 - 0.5
                } else {
                    !log_x || x > 0.0
                }
        };
        let y_ok = |y: f64| y.is_finite() && (!log_y || y > 0.0);

        let series: Vec<Prepared> = chart
            .series
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut points: Vec<(f64, f64, Option<f64>)> = s
                    .points
                    .iter()
                    .filter(|&&(x, y, _)| x_ok(x) && y_ok(y))
                    .map(|&(x, y, hw)| (x, y, hw.filter(|h| h.is_finite() && *h > 0.0)))
                    .collect();
                // A line drawn in input order would zig-zag if the caller
                // collected the sweep out of order.
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                Prepared {
                    name: clean_text(&s.name),
                    color: SERIES_COLORS[i % SERIES_COLORS.len()],
                    slot: i,
                    points,
                }
            })
            .collect();

        let all = || series.iter().flat_map(|s| s.points.iter().copied());
        if all().next().is_none() {
            return Err(Error::Failed(format!(
                "no drawable points in chart {:?} (all empty, non-finite{})",
                chart.title,
                if log_x || log_y {
                    ", or non-positive on a log axis"
                } else {
                    ""
                }
            )));
        }

        let hlines: Vec<(String, f64, RGBColor)> = chart
            .hlines
            .iter()
            .filter(|h| y_ok(h.y))
            .enumerate()
            .map(|(i, h)| {
                (
                    clean_text(&h.label),
                    h.y,
                    HLINE_COLORS[i % HLINE_COLORS.len()],
                )
            })
            .collect();

        let curves: Vec<Prepared> = chart
            .curves
            .iter()
            .map(|c| {
                let mut points: Vec<(f64, f64, Option<f64>)> = c
                    .points
                    .iter()
                    .filter(|&&(x, y)| x_ok(x) && y_ok(y))
                    .map(|&(x, y)| (x, y, None))
                    .collect();
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                Prepared {
                    name: clean_text(&c.label),
                    color: SERIES_COLORS[c.series % SERIES_COLORS.len()],
                    slot: c.series,
                    points,
                }
            })
            .filter(|c| !c.points.is_empty())
            .collect();
        let (x, y) = axes(
            &series,
            &curves,
            &hlines,
            categories.as_deref(),
            log_x,
            log_y,
            chart.zoom_y,
        )?;

        let mut series = series;
        let mut curves = curves;
        let bar_half_width = categories
            .as_ref()
            .map(|_| place_bars(&mut series, &mut curves));
        let legend = legend_position(&series, &hlines, &curves, x, y, bar_half_width.is_some());
        Ok(Plan {
            series,
            hlines,
            curves,
            x,
            y,
            categories,
            bar_half_width,
            legend,
        })
    }
}

/// The chart's axes, x then y (each checked), over every point of the
/// series and curves (a model is never cut off) and, for y, the error bars
/// and horizontal lines.
fn axes(
    series: &[Prepared],
    curves: &[Prepared],
    hlines: &[(String, f64, RGBColor)],
    categories: Option<&[String]>,
    log_x: bool,
    log_y: bool,
    zoom_y: bool,
) -> Result<(Axis, Axis)> {
    // Axes span the curves too, so a model is never cut off.
    let all = || {
        series
            .iter()
            .chain(curves.iter())
            .flat_map(|s| s.points.iter().copied())
    };

    let x = match categories {
        Some(c) => Axis {
            lo: -0.5,
            hi: c.len() as f64 - 0.5,
            log: false,
        },
        None => {
            let lo = all().map(|p| p.0).fold(f64::INFINITY, f64::min);
            let hi = all().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
            if log_x {
                log_range(lo, hi, 0.05)
            } else {
                linear_range(lo, hi)
            }
        }
    }
    .checked("x")?;

    let y = if log_y {
        let values = all()
            .flat_map(|(_, y, hw)| {
                let hw = hw.unwrap_or(0.0);
                [y, y + hw, y - hw]
            })
            .chain(hlines.iter().map(|h| h.1))
            .filter(|v| v.is_finite() && *v > 0.0);
        let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
        log_range(lo, hi, 0.0)
    } else if zoom_y {
        let values = || {
            all()
                .map(|p| p.1)
                .chain(hlines.iter().map(|h| h.1))
                .filter(|v| v.is_finite())
        };
        let lo = values().fold(f64::INFINITY, f64::min);
        let hi = values().fold(f64::NEG_INFINITY, f64::max);
        // At least 10% of the level tall: noise of a tenth of a percent
        // is not drawn as a cliff, a 5% step is half the chart.
        let mid = lo / 2.0 + hi / 2.0;
        let half = ((hi - lo) / 2.0).max(mid.abs() * 0.05);
        linear_range(mid - half, mid + half)
    } else {
        let values = all()
            .flat_map(|(_, y, hw)| {
                let hw = hw.unwrap_or(0.0);
                [y, y + hw, y - hw]
            })
            .chain(hlines.iter().map(|h| h.1));
        // Linear y starts at zero: rates and costs are compared by ratio.
        let (lo, hi) = values.fold((0.0f64, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
        let hi = if hi > 0.0 { hi * HEADROOM } else { hi };
        let lo = if lo < 0.0 { lo * HEADROOM } else { lo };
        if lo == 0.0 && hi == 0.0 {
            Axis {
                lo: 0.0,
                hi: 1.0,
                log: false,
            }
        } else {
            let (lo, hi) = widen_degenerate(lo, hi);
            Axis { lo, hi, log: false }
        }
    }
    .checked("y")?;
    Ok((x, y))
}

/// Bars: series i of n takes the i-th of n equal slices of each
/// category's group; its points (and its model's) move to the slice's
/// centre. Returns the half-width of one bar, in x units.
fn place_bars(series: &mut [Prepared], curves: &mut [Prepared]) -> f64 {
    let n = series.len().max(1) as f64;
    let slice = BAR_GROUP / n;
    let centre = |i: usize, x: f64| x - BAR_GROUP / 2.0 + slice * (i as f64 + 0.5);
    for (i, s) in series.iter_mut().enumerate() {
        for p in &mut s.points {
            p.0 = centre(i, p.0);
        }
    }
    for c in curves.iter_mut() {
        for p in &mut c.points {
            p.0 = centre(c.slot, p.0);
        }
    }
    slice * 0.45
}

/// A linear range with 5% padding on each side, so end points and their
/// markers do not sit on the frame.
fn linear_range(lo: f64, hi: f64) -> Axis {
    let span = hi - lo;
    let (lo, hi) = widen_degenerate(lo - span * 0.05, hi + span * 0.05);
    Axis { lo, hi, log: false }
}

/// A range too narrow for plotters to place ticks in (a single x value, or
/// a difference lost in rounding) is widened around its centre.
fn widen_degenerate(lo: f64, hi: f64) -> (f64, f64) {
    let span = hi - lo;
    let mag = lo.abs().max(hi.abs());
    if span > 1e-9 * mag && span > 1e-150 {
        return (lo, hi);
    }
    let centre = lo / 2.0 + hi / 2.0;
    let half = if mag > 1e-150 { mag * 0.1 } else { 1.0 };
    (centre - half, centre + half)
}

/// A log range padded by `pad` of its width in decades on each side (at
/// least `HEADROOM`), widened when all values are equal, and stretched out
/// to the nearest one-digit values (like 300 or 400) when it holds fewer
/// than two: the ticks sit on those values, and a log axis needs two labels
/// to be read.
fn log_range(lo: f64, hi: f64, pad: f64) -> Axis {
    let (mut lo, mut hi) = if !(lo > 0.0 && hi >= lo) {
        (lo, hi)
    } else if hi / lo < 1.0 + 1e-9 {
        (lo / 2.0, hi * 2.0)
    } else {
        let factor = (hi / lo).powf(pad).max(HEADROOM);
        (lo / factor, hi * factor)
    };
    let inside = one_digit_values(lo, hi).len();
    if lo > 0.0 && hi.is_finite() && inside < 2 {
        let (down, up) = (
            round_one_digit(lo, f64::floor),
            round_one_digit(hi, f64::ceil),
        );
        if down > 0.0 && up.is_finite() {
            // With one value inside, stretching the nearer side is enough.
            let lo_is_nearer = lo / down <= up / hi;
            if inside == 0 || lo_is_nearer {
                lo = down.min(lo);
            }
            if inside == 0 || !lo_is_nearer {
                hi = up.max(hi);
            }
        }
    }
    Axis { lo, hi, log: true }
}

/// `v` rounded (down or up, by `round`) to one significant digit.
fn round_one_digit(v: f64, round: fn(f64) -> f64) -> f64 {
    let scale = 10f64.powf(v.log10().floor());
    round(v / scale) * scale
}

/// Every m * 10^e (m = 1..9) within lo..=hi, ascending: the ticks of a log
/// axis. Empty unless 0 < lo <= hi are finite; at most 9 per decade, and a
/// checked `Axis` spans at most ~630 decades.
fn one_digit_values(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi >= lo && hi.is_finite()) {
        return Vec::new();
    }
    let (first, last) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let (lo_t, hi_t) = (lo * (1.0 - 1e-12), hi * (1.0 + 1e-12));
    (first..=last)
        .flat_map(|e| (1..=9).map(move |m| f64::from(m) * 10f64.powi(e)))
        .filter(|&v| v > 0.0 && v >= lo_t && v <= hi_t)
        .collect()
}

/// A plotters log axis (`(lo..hi).log_scale()`) with its own tick positions.
/// Plotters' log ticks start at the first power of ten inside the range (a
/// range like 0.4..9 gets no tick below 1, and 200..300 gets none at all),
/// put each power of ten in twice (its label is drawn twice, overprinted),
/// and ignore the requested number of labels. Here the ticks are the
/// one-digit values 1..9 x 10^e inside the range, thinned to 1, 2, 5 and then
/// to every k-th power of ten when there are more than requested.
struct LogAxis(LogCoord<f64>);

impl LogAxis {
    fn new(range: Range<f64>) -> LogAxis {
        LogAxis(range.log_scale().into())
    }
}

impl Ranged for LogAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.0.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        let max = hint.max_num_points();
        let range = self.0.range();
        let all = one_digit_values(range.start, range.end);
        if all.len() <= max {
            return all;
        }
        let digit = |v: f64| (v / 10f64.powf(v.log10().floor())).round();
        let one_two_five: Vec<f64> = all
            .iter()
            .copied()
            .filter(|&v| matches!(digit(v) as u32, 1 | 2 | 5 | 10))
            .collect();
        if one_two_five.len() <= max {
            return one_two_five;
        }
        let powers: Vec<f64> = all
            .into_iter()
            .filter(|&v| matches!(digit(v) as u32, 1 | 10))
            .collect();
        let step = powers.len().div_ceil(max.max(1));
        powers.into_iter().step_by(step.max(1)).take(max).collect()
    }

    fn range(&self) -> Range<f64> {
        self.0.range()
    }
}

/// A corner of the plotting area, for the legend (plotters'
/// `SeriesLabelPosition` is not `Copy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Corner {
    UpperLeft,
    UpperRight,
    LowerRight,
    LowerLeft,
}

impl Corner {
    fn position(self) -> SeriesLabelPosition {
        match self {
            Corner::UpperLeft => SeriesLabelPosition::UpperLeft,
            Corner::UpperRight => SeriesLabelPosition::UpperRight,
            Corner::LowerRight => SeriesLabelPosition::LowerRight,
            Corner::LowerLeft => SeriesLabelPosition::LowerLeft,
        }
    }
}

/// Puts the legend in the corner that hides the fewest points, preferring
/// the upper left (throughput curves rise to the right).
fn legend_position(
    series: &[Prepared],
    hlines: &[(String, f64, RGBColor)],
    curves: &[Prepared],
    x: Axis,
    y: Axis,
    bars: bool,
) -> Corner {
    let names = series
        .iter()
        .map(|s| s.name.as_str())
        .chain(hlines.iter().map(|h| h.0.as_str()))
        .chain(
            curves
                .iter()
                .map(|c| c.name.as_str())
                .filter(|n| !n.trim().is_empty()),
        );
    let (entries, longest) = names.fold((0usize, 0usize), |(n, w), s| {
        (n + 1, w.max(s.chars().count()))
    });
    // Rough plot area and legend box in pixels, matching the sizes used for
    // the chart builder and plotters' naive text estimate.
    let (plot_w, plot_h) = (PLOT_WIDTH, HEIGHT as f64 - 100.0);
    let w = ((longest as f64 * 9.0 + 50.0) / plot_w).min(1.0);
    let h = ((entries as f64 * 20.0 + 16.0) / plot_h).min(1.0);
    let candidates = [
        (Corner::UpperLeft, 0.0, 1.0 - h),
        (Corner::UpperRight, 1.0 - w, 1.0 - h),
        (Corner::LowerRight, 1.0 - w, 0.0),
        (Corner::LowerLeft, 0.0, 0.0),
    ];
    let hidden = |x0: f64, y0: f64| {
        series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|p| {
                let (fx, fy) = (x.frac(p.0), y.frac(p.1));
                // A bar is hidden wherever it reaches into the box, a
                // point only when it lies inside it.
                fx >= x0 && fx <= x0 + w && fy >= y0 && (bars || fy <= y0 + h)
            })
            .count()
    };
    let mut best = (Corner::UpperLeft, usize::MAX);
    for (pos, x0, y0) in candidates {
        let n = hidden(x0, y0);
        if n < best.1 {
            best = (pos, n);
        }
    }
    best.0
}

/// A tick label for `v` on `axis`, blank for some ticks of a log axis so
/// labels do not overlap: all of 1..9 x 10^e are labelled within a single
/// decade, only 1, 2 and 5 up to `max_decades_125` decades (more fit on
/// the tall-character y axis than the wide-number x axis), and only powers
/// of ten beyond; the unlabelled ticks keep their grid lines.
fn axis_tick(axis: Axis, v: f64, max_decades_125: f64) -> String {
    if axis.log && v > 0.0 {
        let decades = (axis.hi / axis.lo).log10();
        let digit = (v / 10f64.powf(v.log10().floor())).round() as u32;
        let shown = decades <= 1.0
            || digit == 1
            || digit == 10
            || (decades <= max_decades_125 && (digit == 2 || digit == 5));
        if !shown {
            return String::new();
        }
    }
    fmt_tick(v)
}

/// Width of one character of a tick label, in chart pixels: "stream get
/// 20/20M" (17 characters) measured 111 px in Chromium at LABEL_FONT.
/// (7.2, the guess before, left two of the AWM set's five tests unnamed.)
const CHAR_WIDTH: f64 = 6.6;

/// How many category names fit side by side under the plot (CHAR_WIDTH a
/// character, plus a gap). When there are more categories, plotters is
/// asked for fewer ticks, lands on every 2nd, 5th or 10th category and only
/// those are named: better than names overprinted into an unreadable smear.
fn category_labels_that_fit(names: &[String]) -> usize {
    let longest = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    ((PLOT_WIDTH / (longest as f64 * CHAR_WIDTH + 12.0)) as usize).max(1)
}

/// Tick labels short enough for the axis: about five significant digits,
/// trailing zeros trimmed, exponent notation for very large or small values.
fn fmt_tick(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 || !a.is_finite() {
        return if a == 0.0 {
            "0".to_string()
        } else {
            v.to_string()
        };
    }
    let trim = |s: String| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if !(1e-3..1e6).contains(&a) {
        let s = format!("{v:.3e}");
        match s.split_once('e') {
            Some((mantissa, exp)) => format!("{}e{exp}", trim(mantissa.to_string())),
            None => s,
        }
    } else {
        let decimals = (4 - a.log10().floor() as i32).clamp(0, 8) as usize;
        trim(format!("{v:.decimals$}"))
    }
}

fn draw<'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    plan: &Plan,
    (x_label, y_label): (&str, &str),
) -> Result<()>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let x_fmt = |v: &f64| -> String {
        let Some(names) = &plan.categories else {
            return axis_tick(plan.x, *v, 4.0);
        };
        let r = v.round();
        if (v - r).abs() < 1e-6 && r >= 0.0 && (r as usize) < names.len() {
            names[r as usize].clone()
        } else {
            String::new()
        }
    };
    let y_fmt = |v: &f64| axis_tick(plan.y, *v, 6.0);

    let mut mesh = chart.configure_mesh();
    mesh.x_desc(x_label)
        .y_desc(y_label)
        .axis_desc_style(("sans-serif", AXIS_DESC_FONT))
        .label_style(("sans-serif", LABEL_FONT))
        .light_line_style(RGBColor(235, 235, 235))
        .bold_line_style(RGBColor(205, 205, 205))
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt);
    // A log axis gets a grid line at each of its ticks (see `LogAxis`),
    // up to 40 of them, and no light lines in between.
    if plan.x.log {
        mesh.x_labels(LOG_TICKS).x_max_light_lines(0);
    }
    if plan.y.log {
        mesh.y_labels(LOG_TICKS).y_max_light_lines(0);
    }
    if let Some(names) = &plan.categories {
        // A tick per category if the names fit (else every k-th); the
        // formatter leaves any tick between categories blank.
        mesh.x_labels(names.len().min(category_labels_that_fit(names)));
    }
    mesh.draw().map_err(plot_err)?;

    // Unnamed series and lines are drawn but left out of the legend, which
    // would otherwise show markers next to blank text.
    for s in &plan.series {
        let color = s.color;
        match plan.bar_half_width {
            Some(hw) => {
                // Bars stand on the bottom of the chart: zero on a linear
                // axis (which always includes it), the axis' lower end on
                // a log one.
                let base = if plan.y.log { plan.y.lo } else { 0.0 };
                let anno = chart
                    .draw_series(s.points.iter().map(|p| {
                        Rectangle::new([(p.0 - hw, base), (p.0 + hw, p.1)], color.filled())
                    }))
                    .map_err(plot_err)?;
                if !s.name.trim().is_empty() {
                    anno.label(s.name.as_str()).legend(move |(x, y)| {
                        Rectangle::new([(x, y - 6), (x + 20, y + 6)], color.filled())
                    });
                }
                draw_error_bars(chart, s, plan.y, RGBColor(30, 30, 30))?;
            }
            None => {
                draw_error_bars(chart, s, plan.y, color)?;
                let anno = chart
                    .draw_series(LineSeries::new(
                        s.points.iter().map(|p| (p.0, p.1)),
                        color.stroke_width(2),
                    ))
                    .map_err(plot_err)?;
                if !s.name.trim().is_empty() {
                    anno.label(s.name.as_str()).legend(move |(x, y)| {
                        EmptyElement::at((x, y))
                            + PathElement::new(vec![(0, 0), (20, 0)], color.stroke_width(2))
                            + Circle::new((10, 0), 3, color.filled())
                    });
                }
                chart
                    .draw_series(
                        s.points
                            .iter()
                            .map(|p| Circle::new((p.0, p.1), 3, color.filled())),
                    )
                    .map_err(plot_err)?;
            }
        }
    }

    for (label, y, color) in &plan.hlines {
        let color = *color;
        let anno = chart
            .draw_series(DashedLineSeries::new(
                [(plan.x.lo, *y), (plan.x.hi, *y)],
                8,
                5,
                color.stroke_width(2),
            ))
            .map_err(plot_err)?;
        if !label.trim().is_empty() {
            anno.label(label.as_str()).legend(move |(x, y)| {
                DashedPathElement::new(vec![(x, y), (x + 20, y)], 8, 5, color.stroke_width(2))
            });
        }
    }

    draw_curves(chart, plan)?;

    let named = |name: &String| !name.trim().is_empty();
    if plan.series.iter().any(|s| named(&s.name))
        || plan.hlines.iter().any(|h| named(&h.0))
        || plan.curves.iter().any(|c| named(&c.name))
    {
        chart
            .configure_series_labels()
            .position(plan.legend.position())
            .margin(8)
            .label_font(("sans-serif", LEGEND_FONT))
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(160, 160, 160))
            .draw()
            .map_err(plot_err)?;
    }
    Ok(())
}

/// The models (curves): a dashed line each, or on bars a dashed mark per
/// bar at the model's value (a line between bars of different tests would
/// be a line through nothing).
fn draw_curves<'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    plan: &Plan,
) -> Result<()>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    for c in &plan.curves {
        let color = c.color;
        let anno = match plan.bar_half_width {
            // A model joined between bars of different tests would be a
            // line through nothing: each bar gets its own dashed mark at
            // the model's value, a little wider than the bar, in black
            // over the bar's colour so it shows on and above the bar.
            Some(hw) => {
                let mut last = None;
                for p in &c.points {
                    last = Some(
                        chart
                            .draw_series(DashedLineSeries::new(
                                [(p.0 - hw * 1.2, p.1), (p.0 + hw * 1.2, p.1)],
                                5,
                                3,
                                MODEL_MARK.stroke_width(2),
                            ))
                            .map_err(plot_err)?,
                    );
                }
                match last {
                    Some(a) => a,
                    None => continue,
                }
            }
            None => chart
                .draw_series(DashedLineSeries::new(
                    c.points.iter().map(|p| (p.0, p.1)),
                    6,
                    4,
                    color.stroke_width(2),
                ))
                .map_err(plot_err)?,
        };
        let color = if plan.bar_half_width.is_some() {
            MODEL_MARK
        } else {
            color
        };
        if !c.name.trim().is_empty() {
            anno.label(c.name.as_str()).legend(move |(x, y)| {
                DashedPathElement::new(vec![(x, y), (x + 20, y)], 6, 4, color.stroke_width(2))
            });
        }
    }
    Ok(())
}

/// Vertical bars with short caps, drawn from plain paths: plotters'
/// `ErrorBar` element needs its `errorbar` feature, which is not enabled.
/// The caps are offset in pixels so they look the same on a log x axis.
fn draw_error_bars<X, Y>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<X, Y>>,
    s: &Prepared,
    y_axis: Axis,
    color: RGBColor,
) -> Result<()>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let style = color.stroke_width(1);
    // (x, lower end, upper end, whether each end is real or cut at the
    // chart's edge): a lower end at or below zero has no place on a log
    // axis, and an upper end that overflowed was left out of the range.
    let bars: Vec<(f64, f64, f64, bool, bool)> = s
        .points
        .iter()
        .filter_map(|&(x, y, hw)| {
            let hw = hw?;
            let (lower, upper) = (y - hw, y + hw);
            let (lower_real, upper_real) = (lower >= y_axis.lo, upper <= y_axis.hi);
            Some((
                x,
                lower.max(y_axis.lo),
                upper.min(y_axis.hi),
                lower_real,
                upper_real,
            ))
        })
        .collect();
    if bars.is_empty() {
        return Ok(());
    }
    chart
        .draw_series(
            bars.iter()
                .map(|&(x, lo, hi, ..)| PathElement::new(vec![(x, lo), (x, hi)], style)),
        )
        .map_err(plot_err)?;
    let caps = bars
        .iter()
        .flat_map(|&(x, lo, hi, lower_real, upper_real)| {
            let lower = lower_real.then_some((x, lo));
            let upper = upper_real.then_some((x, hi));
            lower.into_iter().chain(upper)
        });
    chart
        .draw_series(
            caps.map(|at| EmptyElement::at(at) + PathElement::new(vec![(-4, 0), (4, 0)], style)),
        )
        .map_err(plot_err)?;
    Ok(())
}

#[cfg(test)]
mod tests;
