//! SVG charts of a [`Figure`]: lines with markers, or grouped bars.
//!
//! Written by hand, like `export/gantt.rs`: plotters' SVG backend needs a font file for text
//! metrics and its output depends on that font, while these files are committed to the
//! repository and must be byte-identical from run to run on any machine.

use super::{Figure, FigureKind};
use crate::export::xml;
use std::fmt::Write;

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 380.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 90.0;
const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// The figure as a standalone SVG document.
pub fn to_svg(f: &Figure) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" font-size="14" text-anchor="middle">{}</text>"#,
        WIDTH / 2.0,
        xml(&f.title)
    );
    let (x0, x1) = x_range(f);
    let y1 = nice_ceil(
        f.series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .filter(|y| y.is_finite())
            .fold(0.0, f64::max),
    );
    let plot = Plot {
        x0,
        x1,
        y1,
        w: WIDTH - LEFT - RIGHT,
        h: HEIGHT - TOP - BOTTOM,
    };
    axes(&mut s, f, y1, plot.w, plot.h);
    match f.kind {
        FigureKind::Lines => lines(&mut s, f, &plot),
        FigureKind::Bars => bars(&mut s, f, &plot),
    }
    legend(&mut s, f);
    s.push_str("</svg>\n");
    s
}

/// The plot area: its data ranges (x from `x0` to `x1`, y from 0 to `y1`) and its size in px.
struct Plot {
    x0: f64,
    x1: f64,
    y1: f64,
    w: f64,
    h: f64,
}

impl Plot {
    /// The px column of data x.
    fn sx(&self, x: f64) -> f64 {
        LEFT + (x - self.x0) / (self.x1 - self.x0) * self.w
    }

    /// The px row of data y.
    fn sy(&self, y: f64) -> f64 {
        TOP + self.h - y / self.y1 * self.h
    }
}

/// A line chart's x tick labels, and each series as a polyline with a marker per point.
fn lines(s: &mut String, f: &Figure, plot: &Plot) {
    for x in ticks(plot.x0, plot.x1) {
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            plot.sx(x),
            TOP + plot.h + 16.0,
            num(x)
        );
    }
    for (i, ser) in f.series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let pts: Vec<String> = ser
            .points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", plot.sx(x), plot.sy(y)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#,
            pts.join(" ")
        );
        for &(x, y) in &ser.points {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{c}"/>"#,
                plot.sx(x),
                plot.sy(y)
            );
        }
    }
}

/// A bar chart's category labels (slanted when wider than their slot, about 6 px a
/// character), and one bar per point, the series side by side in each category.
fn bars(s: &mut String, f: &Figure, plot: &Plot) {
    let groups = f.categories.len().max(1) as f64;
    let group_w = plot.w / groups;
    let n = f.series.len().max(1) as f64;
    let bar_w = group_w * 0.8 / n;
    let widest = f
        .categories
        .iter()
        .map(|c| c.chars().count())
        .max()
        .unwrap_or(0);
    let slant = widest as f64 * 6.0 > group_w;
    for (g, cat) in f.categories.iter().enumerate() {
        let (x, y) = (LEFT + (g as f64 + 0.5) * group_w, TOP + plot.h + 16.0);
        if slant {
            let _ = writeln!(
                s,
                r#"<text transform="translate({x:.1},{:.1}) rotate(-35)" text-anchor="end" font-size="9">{}</text>"#,
                y - 6.0,
                xml(cat)
            );
        } else {
            let _ = writeln!(
                s,
                r#"<text x="{x:.1}" y="{y:.1}" text-anchor="middle">{}</text>"#,
                xml(cat)
            );
        }
    }
    for (i, ser) in f.series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        for &(x, y) in &ser.points {
            let bx = LEFT + x * group_w + group_w * 0.1 + i as f64 * bar_w;
            let _ = writeln!(
                s,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{c}"><title>{}: {}</title></rect>"#,
                bx,
                plot.sy(y),
                bar_w,
                TOP + plot.h - plot.sy(y),
                xml(&ser.name),
                num(y)
            );
        }
    }
}

fn axes(s: &mut String, f: &Figure, y1: f64, plot_w: f64, plot_h: f64) {
    let _ = writeln!(
        s,
        r#"<path d="M{LEFT},{TOP} V{} H{}" fill="none" stroke="black"/>"#,
        TOP + plot_h,
        LEFT + plot_w
    );
    for y in ticks(0.0, y1) {
        let py = TOP + plot_h - y / y1 * plot_h;
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" x2="{}" y1="{py:.1}" y2="{py:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + plot_w,
            LEFT - 5.0,
            py + 4.0,
            num(y)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 15.0,
        xml(&f.x_label)
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(16,{:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        TOP + plot_h / 2.0,
        xml(&f.y_label)
    );
}

fn legend(s: &mut String, f: &Figure) {
    let x = WIDTH - RIGHT + 12.0;
    for (i, ser) in f.series.iter().enumerate() {
        let y = TOP + 10.0 + i as f64 * 18.0;
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="{:.1}" width="12" height="12" fill="{}"/><text x="{}" y="{:.1}">{}</text>"#,
            y - 10.0,
            COLORS[i % COLORS.len()],
            x + 17.0,
            y,
            xml(&ser.name)
        );
    }
}

/// The x extent: the data's for lines, the category slots for bars.
fn x_range(f: &Figure) -> (f64, f64) {
    if f.kind == FigureKind::Bars {
        return (0.0, f.categories.len().max(1) as f64);
    }
    let xs = f.series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let (lo, hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    if !lo.is_finite() || hi <= lo {
        (0.0, 1.0)
    } else {
        (lo, hi)
    }
}

/// 1, 2 or 5 × 10ᵏ at or above `v` (at least 1e-9 so an all-zero figure still has an axis).
fn nice_ceil(v: f64) -> f64 {
    let v = v.max(1e-9);
    let e = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * e)
        .find(|&c| c >= v)
        .unwrap_or(10.0 * e)
}

/// About five round tick values from `lo` to `hi`.
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let step = nice_ceil((hi - lo) / 5.0);
    let first = (lo / step).ceil() * step;
    (0..=10)
        .map(|i| first + i as f64 * step)
        .take_while(|&v| v <= hi + step * 1e-9)
        .collect()
}

fn num(v: f64) -> String {
    if v == v.round() && v.abs() < 1e9 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reproduce::Series;

    fn fig(kind: FigureKind) -> Figure {
        Figure {
            file: "t".into(),
            title: "a < b".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            kind,
            categories: vec!["one".into(), "two".into()],
            series: vec![Series {
                name: "s".into(),
                points: vec![(0.0, 1.0), (1.0, 3.0)],
            }],
        }
    }

    #[test]
    fn renders_escaped_deterministic_svg() {
        for k in [FigureKind::Lines, FigureKind::Bars] {
            let a = to_svg(&fig(k));
            assert_eq!(a, to_svg(&fig(k)));
            assert!(a.starts_with("<svg") && a.ends_with("</svg>\n"));
            assert!(a.contains("a &lt; b"));
        }
        assert!(to_svg(&fig(FigureKind::Bars)).matches("<rect x=").count() >= 2);
    }

    #[test]
    fn axis_tops_are_round() {
        assert_eq!(nice_ceil(3.2), 5.0);
        assert_eq!(nice_ceil(620.0), 1000.0);
        assert_eq!(ticks(0.0, 10.0), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
    }
}
