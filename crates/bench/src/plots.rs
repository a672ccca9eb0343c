//! Plots of a report, each written as SVG and PNG: the metric's CDF per mode, the p95/p99
//! ratios to `idle` as bars with their 95 % intervals, and percentile curves (p50 → p99.9).
//!
//! Text is laid out with plotters' pure-Rust `ab_glyph` backend from a TrueType file read at
//! run time (DejaVu Sans from Debian's `fonts-dejavu-core`, or `$UXSCHED_FONT`), so nothing
//! needs fontconfig at build time.

use crate::report::Report;
use crate::stats;
use anyhow::{bail, Context, Result};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const FONT_PATHS: [&str; 4] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];
const SIZE: (u32, u32) = (900, 560);

/// Register the font once (also for `sim sweep`'s plots); an actionable error when none is installed.
pub fn ensure_font() -> Result<()> {
    static FONT: OnceLock<Result<(), String>> = OnceLock::new();
    FONT.get_or_init(|| {
        let candidates: Vec<PathBuf> = std::env::var_os("UXSCHED_FONT")
            .map(PathBuf::from)
            .into_iter()
            .chain(FONT_PATHS.iter().map(PathBuf::from))
            .collect();
        let path = candidates.iter().find(|p| p.is_file()).ok_or_else(|| {
            format!("no TrueType font for plot labels (looked for {}): install Debian's fonts-dejavu-core or set UXSCHED_FONT", FONT_PATHS[0])
        })?;
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        plotters::style::register_font("sans-serif", FontStyle::Normal, Box::leak(bytes.into_boxed_slice()))
            .map_err(|_| format!("{}: not a usable TrueType font", path.display()))
    })
    .clone()
    .map_err(anyhow::Error::msg)
}

/// Write all plots of `report` into `dir`; returns the files written.
pub fn write_all(report: &Report, dir: &Path) -> Result<Vec<PathBuf>> {
    ensure_font()?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut files = Vec::new();
    for (name, plot) in [
        ("cdf", Plot::Cdf),
        ("ratios", Plot::Ratios),
        ("percentiles", Plot::Percentiles),
    ] {
        // Named by scenario, and by layout when it is not the default one.
        let layout = match report.layout {
            crate::layout::Layout::OtherSession => String::new(),
            l => format!("-{}", l.name()),
        };
        let base = dir.join(format!("{}{layout}-{name}", report.scenario));
        let svg_path = base.with_extension("svg");
        draw(
            plot,
            report,
            SVGBackend::new(&svg_path, SIZE).into_drawing_area(),
        )
        .with_context(|| format!("drawing {}", svg_path.display()))?;
        let png_path = base.with_extension("png");
        draw(
            plot,
            report,
            BitMapBackend::new(&png_path, SIZE).into_drawing_area(),
        )
        .with_context(|| format!("drawing {}", png_path.display()))?;
        files.extend([svg_path, png_path]);
    }
    Ok(files)
}

#[derive(Clone, Copy)]
enum Plot {
    Cdf,
    Ratios,
    Percentiles,
}

fn draw<DB: DrawingBackend>(
    plot: Plot,
    report: &Report,
    root: DrawingArea<DB, Shift>,
) -> Result<()> {
    match plot {
        Plot::Cdf => cdf(report, root),
        Plot::Ratios => ratios(report, root),
        Plot::Percentiles => percentile_curves(report, root),
    }
}

fn color(i: usize) -> RGBColor {
    const PALETTE: [RGBColor; 8] = [
        RGBColor(0x44, 0x44, 0x44),
        RGBColor(0xd6, 0x27, 0x28),
        RGBColor(0x1f, 0x77, 0xb4),
        RGBColor(0x2c, 0xa0, 0x2c),
        RGBColor(0x94, 0x67, 0xbd),
        RGBColor(0xff, 0x7f, 0x0e),
        RGBColor(0x8c, 0x56, 0x4b),
        RGBColor(0x17, 0xbe, 0xcf),
    ];
    PALETTE[i % PALETTE.len()]
}

fn pooled(report: &Report, i: usize) -> Vec<f64> {
    let mode = report.modes[i].mode;
    let all: Vec<f64> = report
        .records
        .iter()
        .filter(|r| r.mode == mode)
        .flat_map(|r| r.samples_ms.iter().copied())
        .collect();
    stats::sorted(&all)
}

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow::anyhow!("{e:?}")
}

/// Upper x bound: the largest p99.9 over modes, so one outlier does not flatten the plot.
fn x_limit(report: &Report) -> f64 {
    (0..report.modes.len())
        .map(|i| stats::percentile(&pooled(report, i), 99.9))
        .filter(|x| x.is_finite())
        .fold(0.0, f64::max)
        .max(1e-3)
        * 1.05
}

fn cdf<DB: DrawingBackend>(report: &Report, root: DrawingArea<DB, Shift>) -> Result<()> {
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "{}: CDF of the metric per mode (load {})",
                report.scenario, report.load
            ),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..x_limit(report), 0.0..1.0)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("ms")
        .y_desc("fraction of samples ≤ x")
        .draw()
        .map_err(err)?;
    for (i, row) in report.modes.iter().enumerate() {
        let data = pooled(report, i);
        let n = data.len() as f64;
        let points = data
            .iter()
            .enumerate()
            .map(|(k, &x)| (x, (k + 1) as f64 / n));
        mode_line(&mut chart, points, i, row.mode.name())?;
    }
    finish(chart, &root, SeriesLabelPosition::LowerRight)
}

fn ratios<DB: DrawingBackend>(report: &Report, root: DrawingArea<DB, Shift>) -> Result<()> {
    root.fill(&WHITE).map_err(err)?;
    let rows: Vec<_> = report
        .modes
        .iter()
        .filter(|r| r.p95_ratio.is_some())
        .collect();
    if rows.is_empty() {
        bail!("no ratio to idle to plot (the run has no idle mode)");
    }
    let top = rows
        .iter()
        .flat_map(|r| [r.p95_ratio.unwrap().hi, r.p99_ratio.unwrap().hi])
        .fold(1.0, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "{}: ratio to idle, p95 (left) and p99 (right), 95% CI",
                report.scenario
            ),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..rows.len() as f64, 0.0..top)
        .map_err(err)?;
    let names: Vec<&str> = rows.iter().map(|r| r.mode.name()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(rows.len() * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            if (x - i as f64 - 0.5).abs() < 0.26 {
                names.get(i).copied().unwrap_or("").to_string()
            } else {
                String::new()
            }
        })
        .y_desc("metric under mode / metric idle")
        .draw()
        .map_err(err)?;
    for (i, row) in rows.iter().enumerate() {
        for (k, r) in [row.p95_ratio.unwrap(), row.p99_ratio.unwrap()]
            .into_iter()
            .enumerate()
        {
            let x0 = i as f64 + 0.12 + k as f64 * 0.4;
            let style = if k == 0 {
                color(i).filled()
            } else {
                color(i).mix(0.5).filled()
            };
            chart
                .draw_series([Rectangle::new([(x0, 0.0), (x0 + 0.34, r.value)], style)])
                .map_err(err)?;
            chart
                .draw_series([ErrorBar::new_vertical(
                    x0 + 0.17,
                    r.lo,
                    r.value,
                    r.hi,
                    BLACK.stroke_width(1),
                    10,
                )])
                .map_err(err)?;
        }
    }
    chart
        .draw_series(LineSeries::new(
            [(0.0, 1.0), (rows.len() as f64, 1.0)],
            BLACK.mix(0.4),
        ))
        .map_err(err)?;
    root.present().map_err(err)
}

fn percentile_curves<DB: DrawingBackend>(
    report: &Report,
    root: DrawingArea<DB, Shift>,
) -> Result<()> {
    root.fill(&WHITE).map_err(err)?;
    let ps: Vec<f64> = (0..=99)
        .map(|k| 50.0 + k as f64 * 0.5)
        .chain([99.9])
        .collect();
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{}: percentile curves (p50 → p99.9)", report.scenario),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(55)
        .build_cartesian_2d(50.0..100.0, 0.0..x_limit(report))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("percentile")
        .y_desc("ms")
        .draw()
        .map_err(err)?;
    for (i, row) in report.modes.iter().enumerate() {
        let data = pooled(report, i);
        let points: Vec<(f64, f64)> = ps
            .iter()
            .map(|&p| (p, stats::percentile(&data, p)))
            .collect();
        mode_line(&mut chart, points, i, row.mode.name())?;
    }
    finish(chart, &root, SeriesLabelPosition::UpperLeft)
}

type XyChart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// One mode's line, in its colour, with a legend entry.
fn mode_line<'a, DB: DrawingBackend + 'a>(
    chart: &mut XyChart<'a, DB>,
    points: impl IntoIterator<Item = (f64, f64)>,
    i: usize,
    name: &str,
) -> Result<()> {
    chart
        .draw_series(LineSeries::new(points, color(i).stroke_width(2)))
        .map_err(err)?
        .label(name)
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color(i).stroke_width(2)));
    Ok(())
}

/// Draw the legend at `pos` and write the picture out.
fn finish<'a, DB: DrawingBackend + 'a>(
    mut chart: XyChart<'a, DB>,
    root: &DrawingArea<DB, Shift>,
    pos: SeriesLabelPosition,
) -> Result<()> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(pos)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}
