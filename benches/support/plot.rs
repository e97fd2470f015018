//! PNG line charts for the docs' figures: plotters draws an SVG, resvg rasterises it with the
//! machine's fonts (Debian's DejaVu on our machines). Shared by the benches that write figures
//! (`#[path = "support/plot.rs"] mod plot;`). Nothing here is part of the service.

#![allow(dead_code)]

use std::path::Path;

use plotters::coord::combinators::IntoLogRange;
use plotters::prelude::*;
use resvg::{tiny_skia, usvg};

/// One line of a chart: its legend and its (x, y) points (NaN points are skipped).
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// How a chart is drawn.
pub struct Chart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub log_x: bool,
    pub log_y: bool,
    /// Fixed y range; `None` fits the data.
    pub y_range: Option<(f64, f64)>,
}

const WIDTH: u32 = 900;
const HEIGHT: u32 = 560;

fn bounds(values: impl Iterator<Item = f64>, log: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (if log { 0.1 } else { 0.0 }, 1.0);
    }
    if log {
        (lo / 1.5, hi * 1.5)
    } else {
        let pad = ((hi - lo) * 0.05).max(1e-9);
        (lo - pad, hi + pad)
    }
}

/// A tick value as a person writes it: six significant digits at most, no trailing zeros, plain
/// decimals from 0.001 to 999 999 and scientific notation outside (`1e-5`, `2.5e7`). Floating
/// point noise from the log scale's powers of ten disappears: 9.999999e-6 prints as `1e-5`.
pub fn tick_label(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    if !v.is_finite() {
        return format!("{v}");
    }
    // Round to 6 significant digits through the scientific form, then read the exponent back.
    let rounded: f64 = format!("{v:.5e}").parse().unwrap_or(v);
    let exponent = rounded.abs().log10().floor() as i32;
    if (-3..6).contains(&exponent) {
        let decimals = (5 - exponent).max(0) as usize;
        trim_zeros(format!("{rounded:.decimals$}"))
    } else {
        let text = format!("{rounded:.5e}");
        let (mantissa, exp) = text.split_once('e').unwrap_or((&text, "0"));
        format!("{}e{exp}", trim_zeros(mantissa.to_string()))
    }
}

/// Drops a decimal fraction's trailing zeros and then a trailing point: "2.500" → "2.5", "10.0" → "10".
fn trim_zeros(text: String) -> String {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// The label of a tick on an axis over `range`: [`tick_label`], except that on a log axis
/// spanning more than one decade only the ticks at 1, 2 and 5 times a power of ten are labelled
/// (the others keep their grid line), so that minor ticks do not overlap.
pub fn axis_label(v: f64, log: bool, range: (f64, f64)) -> String {
    let label = tick_label(v);
    if !log || !(range.1 > 10.0 * range.0) {
        return label;
    }
    let mantissa = v.abs() / 10f64.powi(v.abs().log10().floor() as i32);
    let near = |m: f64| (mantissa - m).abs() < 1e-6 || (mantissa - 10.0 * m).abs() < 1e-5;
    if [1.0, 2.0, 5.0].into_iter().any(near) {
        label
    } else {
        String::new()
    }
}

/// Draws `series` as lines with markers and writes a PNG to `path`.
pub fn line_chart(path: &Path, chart: &Chart<'_>, series: &[Series]) -> Result<(), String> {
    let svg = draw_svg(chart, series).map_err(|e| format!("drawing {}: {e}", path.display()))?;
    rasterise(&svg, path)
}

/// [`line_chart`], saying on stderr whether the file was written.
pub fn write_line_chart(path: &Path, chart: &Chart<'_>, series: &[Series]) {
    match line_chart(path, chart, series) {
        Ok(()) => eprintln!("wrote {}", path.display()),
        Err(e) => eprintln!("could not write {}: {e}", path.display()),
    }
}

/// The chart as SVG text (what [`line_chart`] rasterises).
pub fn draw_svg(chart: &Chart<'_>, series: &[Series]) -> Result<String, Box<dyn std::error::Error>> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        let xs = bounds(
            series.iter().flat_map(|s| s.points.iter().map(|p| p.0)),
            chart.log_x,
        );
        let ys = chart.y_range.unwrap_or_else(|| {
            bounds(
                series.iter().flat_map(|s| s.points.iter().map(|p| p.1)),
                chart.log_y,
            )
        });
        let mut builder = ChartBuilder::on(&root);
        builder
            .caption(chart.title, ("sans-serif", 22))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(70);
        // The four axis combinations have different coordinate types.
        macro_rules! draw {
            ($ctx:expr) => {{
                let mut ctx = $ctx;
                ctx.configure_mesh()
                    .x_label_formatter(&|v| axis_label(*v, chart.log_x, xs))
                    .y_label_formatter(&|v| axis_label(*v, chart.log_y, ys))
                    .x_desc(chart.x_label)
                    .y_desc(chart.y_label)
                    .label_style(("sans-serif", 15))
                    .axis_desc_style(("sans-serif", 17))
                    .draw()?;
                for (i, s) in series.iter().enumerate() {
                    let color = Palette99::pick(i).to_rgba();
                    let points: Vec<(f64, f64)> = s
                        .points
                        .iter()
                        .copied()
                        .filter(|(x, y)| {
                            x.is_finite()
                                && y.is_finite()
                                && (!chart.log_x || *x > 0.0)
                                && (!chart.log_y || *y > 0.0)
                        })
                        .collect();
                    ctx.draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
                        .label(s.name.as_str())
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                        });
                    ctx.draw_series(
                        points
                            .into_iter()
                            .map(|p| Circle::new(p, 4, color.filled())),
                    )?;
                }
                ctx.configure_series_labels()
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK)
                    .label_font(("sans-serif", 15))
                    .position(SeriesLabelPosition::LowerRight)
                    .draw()?;
            }};
        }
        match (chart.log_x, chart.log_y) {
            (false, false) => draw!(builder.build_cartesian_2d(xs.0..xs.1, ys.0..ys.1)?),
            (true, false) => draw!(builder.build_cartesian_2d((xs.0..xs.1).log_scale(), ys.0..ys.1)?),
            (false, true) => draw!(builder.build_cartesian_2d(xs.0..xs.1, (ys.0..ys.1).log_scale())?),
            (true, true) => {
                draw!(builder.build_cartesian_2d((xs.0..xs.1).log_scale(), (ys.0..ys.1).log_scale())?)
            }
        }
        root.present()?;
    }
    Ok(svg)
}

/// SVG → PNG with the system's fonts; fails clearly when no sans-serif font is installed.
fn rasterise(svg: &str, path: &Path) -> Result<(), String> {
    let mut options = usvg::Options::default();
    let fonts = options.fontdb_mut();
    fonts.load_system_fonts();
    if fonts.is_empty() {
        return Err("no system fonts found (install fonts-dejavu-core) to draw the figures".into());
    }
    fonts.set_sans_serif_family("DejaVu Sans");
    let tree = usvg::Tree::from_str(svg, &options).map_err(|e| format!("parsing the chart: {e}"))?;
    let size = tree.size().to_int_size();
    let mut pixmap =
        tiny_skia::Pixmap::new(size.width(), size.height()).ok_or_else(|| "empty chart".to_string())?;
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    pixmap
        .save_png(path)
        .map_err(|e| format!("writing {}: {e}", path.display()))
}
