//! `[[plot]]`: a metric of one task against a numeric column, one line per value of `series`,
//! the mean over the other axes (seeds) with their min–max as error bars; SVG and PNG, in the style of
//! the bench's plots (crates/bench/src/plots.rs, whose font set-up it shares).

use super::grid::{Grid, Point};
use super::spec::PlotSpec;
use anyhow::{Context, Result};
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use uxsched_model::time::parse_duration;
use uxsched_simrun::Outcome;

/// Columns a plot may put on its x axis besides the params (numbers).
pub const X_COLUMNS: [&str; 3] = ["cpus", "hz", "seed"];
/// Columns that may name a plot's series besides the params.
pub const SERIES_COLUMNS: [&str; 6] = ["workload", "sched", "mechs", "cpus", "hz", "seed"];

const SIZE: (u32, u32) = (900, 560);

/// The points of one plot: series → x → the metric's values (one per point at that x).
type Data = BTreeMap<String, BTreeMap<i64, (f64, Vec<f64>)>>;

/// A column's value at a point, as text.
fn column(grid: &Grid, p: &Point, o: &Outcome, col: &str) -> Option<String> {
    Some(match col {
        "workload" => grid.workloads[p.workload].clone(),
        "sched" => p.sched.clone(),
        "mechs" => p.mechs.join("+"),
        "cpus" => o.cpus.to_string(),
        "hz" => p.hz.to_string(),
        "seed" => p.seed.to_string(),
        k => p.params.iter().find(|(pk, _)| pk == k)?.1.clone(),
    })
}

/// A column's text as a number: plain, or a duration in ms (`3ms` → 3).
fn number(text: &str) -> Option<f64> {
    text.parse::<f64>()
        .ok()
        .or_else(|| parse_duration(text).ok().map(|ns| ns as f64 / 1e6))
}

/// Time metrics are shown in ms.
fn is_time(metric: &str) -> bool {
    [
        "latency",
        "waits",
        "slack",
        "wait",
        "response_time",
        "cpu_ns",
    ]
    .iter()
    .any(|t| metric.contains(t))
        && !metric.ends_with(".count")
}

/// Collects one plot's data from the finished points.
pub fn collect(grid: &Grid, spec: &PlotSpec, outcomes: &[Outcome]) -> Data {
    let mut data = Data::new();
    let scale = if is_time(&spec.metric) { 1e-6 } else { 1.0 };
    for o in outcomes {
        let p = &grid.points[o.index];
        let (Some(x), Some(series)) = (
            column(grid, p, o, &spec.x).as_deref().and_then(number),
            spec.series
                .as_ref()
                .map_or(Some(String::new()), |s| column(grid, p, o, s)),
        ) else {
            continue;
        };
        let label = match &spec.series {
            Some(s) => format!("{s}={series}"),
            None => spec.task.clone(),
        };
        for r in o
            .rows
            .iter()
            .filter(|r| r.name == spec.task && r.metric == spec.metric)
        {
            let at = data.entry(label.clone()).or_default();
            // Keyed in micro-units so that the map orders the x values exactly.
            at.entry((x * 1e6) as i64)
                .or_insert((x, vec![]))
                .1
                .push(r.value * scale);
        }
    }
    data
}

/// Draws one plot as `dir/plot-N-METRIC-vs-X.svg` (and `.png` beside it); returns the SVG's path.
pub fn write(dir: &Path, n: usize, title: &str, spec: &PlotSpec, data: &Data) -> Result<PathBuf> {
    uxsched_bench::plots::ensure_font()?;
    let path =
        dir.join(format!("plot-{n}-{}-vs-{}.svg", spec.metric, spec.x).replace(['/', ' '], "_"));
    if data.is_empty() {
        anyhow::bail!(
            "plot {n}: no row has task `{}` and metric `{}` (check [[plot]] against the table's name and metric columns)",
            spec.task,
            spec.metric
        );
    }
    draw(
        SVGBackend::new(&path, SIZE).into_drawing_area(),
        title,
        spec,
        data,
    )
    .with_context(|| format!("drawing {}", path.display()))?;
    let png = path.with_extension("png");
    draw(
        BitMapBackend::new(&png, SIZE).into_drawing_area(),
        title,
        spec,
        data,
    )
    .with_context(|| format!("drawing {}", png.display()))?;
    Ok(path)
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    spec: &PlotSpec,
    data: &Data,
) -> Result<()> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow::anyhow!("{e:?}");
    root.fill(&WHITE).map_err(err)?;
    let xs = data.values().flat_map(|m| m.values().map(|(x, _)| *x));
    let (x0, x1) = xs.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
    let pad = ((x1 - x0) * 0.05).max(0.5);
    let top = data
        .values()
        .flat_map(|m| m.values().flat_map(|(_, v)| v.iter().copied()))
        .fold(0.0, f64::max)
        * 1.1;
    let unit = if is_time(&spec.metric) { " (ms)" } else { "" };
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{title}: {} of {} by {}", spec.metric, spec.task, spec.x),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(x0 - pad..x1 + pad, 0.0..top.max(1e-9))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(spec.x.as_str())
        .y_desc(format!("{}{unit}", spec.metric))
        .draw()
        .map_err(err)?;
    for (i, (label, by_x)) in data.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let line: Vec<(f64, f64)> = by_x.values().map(|(x, v)| (*x, mean(v))).collect();
        chart
            .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(label.as_str())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
        chart
            .draw_series(by_x.values().map(|(x, v)| {
                let lo = v.iter().copied().fold(f64::MAX, f64::min);
                let hi = v.iter().copied().fold(f64::MIN, f64::max);
                ErrorBar::new_vertical(*x, lo, mean(v), hi, color.stroke_width(1), 8)
            }))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}
