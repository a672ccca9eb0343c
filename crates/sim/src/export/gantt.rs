//! A Gantt chart of a time window, as SVG (seed 000 Fig. 3): one row per task, a bar per span
//! it ran, coloured by CPU; wake-up markers above the bars; interaction begin/end lines.
//!
//! The SVG is written by hand rather than with `plotters`: every bar and marker carries a
//! `<title>` tooltip (task, CPU, start, duration) and a `class`, which is what makes a chart of
//! hundreds of threads readable in a browser and checkable in tests; plotters' SVG backend
//! draws bare primitives and has no way to attach either. Output is deterministic: fixed
//! number formatting, rows in task-id order, elements in log order.

use super::xml;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};

use uxsched_model::time::fmt_ns;
use uxsched_model::{Nanos, MS};

use crate::log::{CpuId, Record, RunMeta, Sink, TaskId};

/// One span a task ran on a CPU, clipped to the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slice {
    pub task: TaskId,
    pub cpu: CpuId,
    pub start: Nanos,
    pub end: Nanos,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Mark {
    Wakeup {
        t: Nanos,
        task: TaskId,
        cpu: CpuId,
    },
    Interaction {
        t: Nanos,
        task: TaskId,
        kind: u32,
        id: u64,
        begin: bool,
    },
}

/// The Gantt sink for the window `[from, to)`; render with [`GanttChart::to_svg`].
#[derive(Debug)]
pub struct GanttChart {
    from: Nanos,
    to: Nanos,
    meta: RunMeta,
    running: Vec<Option<(TaskId, Nanos)>>,
    slices: Vec<Slice>,
    marks: Vec<Mark>,
    open: BTreeMap<u64, u32>,
}

/// The chart's geometry, computed once per render.
struct Layout {
    /// Each shown task's row.
    row_of: BTreeMap<TaskId, usize>,
    /// The rows' task names, top to bottom.
    names: Vec<String>,
    /// x of the plot's left edge (right of the names).
    left: f64,
    axis_y: f64,
    legend_y: f64,
    width: f64,
    height: f64,
    /// The CPUs that ran a bar, for the legend.
    cpus: Vec<CpuId>,
}

impl Layout {
    /// The top of `task`'s row.
    fn row_y(&self, task: TaskId) -> f64 {
        TOP + self.row_of[&task] as f64 * ROW_H
    }
}

/// Each row's task name, every other row shaded.
fn row_labels(s: &mut String, l: &Layout) {
    let left = l.left;
    for (i, name) in l.names.iter().enumerate() {
        let y = TOP + i as f64 * ROW_H;
        if i % 2 == 1 {
            let _ = writeln!(
                s,
                r##"<rect x="{left:.2}" y="{y:.2}" width="{PLOT_W:.2}" height="{ROW_H:.2}" fill="#f4f4f4"/>"##
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.2}" y="{:.2}" text-anchor="end">{}</text>"#,
            left - 5.0,
            y + ROW_H - 5.0,
            xml(name)
        );
    }
}

const PALETTE: [&str; 12] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac", "#1f77b4", "#8c564b",
];
const ROW_H: f64 = 18.0;
const BAR_H: f64 = 12.0;
const PLOT_W: f64 = 1000.0;
const TOP: f64 = 36.0;
const CHAR_W: f64 = 7.0;

impl GanttChart {
    /// A chart of `[from, to)`; an empty window is an error the user can fix.
    pub fn new(from: Nanos, to: Nanos) -> Result<Self, String> {
        if from >= to {
            return Err(format!(
                "Gantt window {}..{} is empty: the end must be after the start",
                fmt_ns(from as f64),
                fmt_ns(to as f64)
            ));
        }
        Ok(GanttChart {
            from,
            to,
            meta: RunMeta::default(),
            running: Vec::new(),
            slices: Vec::new(),
            marks: Vec::new(),
            open: BTreeMap::new(),
        })
    }

    /// The bars, clipped to the window, in the order they ended.
    pub fn slices(&self) -> &[Slice] {
        &self.slices
    }

    fn in_window(&self, t: Nanos) -> bool {
        (self.from..self.to).contains(&t)
    }

    fn close(&mut self, cpu: CpuId, t: Nanos) {
        let Some((task, since)) = self.running.get_mut(cpu as usize).and_then(Option::take) else {
            return;
        };
        let (start, end) = (since.max(self.from), t.min(self.to));
        if start < end {
            self.slices.push(Slice {
                task,
                cpu,
                start,
                end,
            });
        }
    }

    fn task_name(&self, task: TaskId) -> String {
        self.meta
            .tasks
            .get(task as usize)
            .map_or_else(|| format!("task{task}"), |m| m.name.clone())
    }

    fn x(&self, t: Nanos, left: f64) -> f64 {
        left + (t - self.from) as f64 / (self.to - self.from) as f64 * PLOT_W
    }

    /// Writes the SVG to `w`.
    pub fn write_svg(&self, w: &mut dyn Write) -> io::Result<()> {
        w.write_all(self.to_svg().as_bytes())
    }

    /// The chart as an SVG document.
    pub fn to_svg(&self) -> String {
        let l = self.layout();
        let (left, width, height) = (l.left, l.width, l.height);
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="monospace" font-size="11">"#
        );
        let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
        let _ = writeln!(
            s,
            r#"<text x="{left:.2}" y="20" font-size="13">{} — {} — {} .. {}</text>"#,
            xml(&self.meta.workload),
            xml(&self.meta.sched),
            fmt_ns(self.from as f64),
            fmt_ns(self.to as f64)
        );
        row_labels(&mut s, &l);
        self.axis(&mut s, left, l.axis_y);
        for sl in &self.slices {
            self.slice_svg(&mut s, &l, sl);
        }
        for m in &self.marks {
            self.mark_svg(&mut s, &l, m);
        }
        self.legend(&mut s, left, l.legend_y, &l.cpus);
        s.push_str("</svg>\n");
        s
    }

    /// Where everything goes: a row per task with a bar or mark, in task-id order, the plot
    /// left of a name column as wide as the longest name (up to 32 characters).
    fn layout(&self) -> Layout {
        let mut rows: Vec<TaskId> = self.slices.iter().map(|s| s.task).collect();
        rows.extend(self.marks.iter().map(|m| match *m {
            Mark::Wakeup { task, .. } | Mark::Interaction { task, .. } => task,
        }));
        rows.sort_unstable();
        rows.dedup();
        let row_of = rows.iter().enumerate().map(|(i, &t)| (t, i)).collect();
        let names: Vec<String> = rows.iter().map(|&t| self.task_name(t)).collect();
        let longest = names.iter().map(|n| n.chars().count()).max().unwrap_or(4);
        let left = 10.0 + (longest.min(32) as f64) * CHAR_W;
        let plot_h = rows.len().max(1) as f64 * ROW_H;
        let axis_y = TOP + plot_h;
        let mut cpus: Vec<CpuId> = self.slices.iter().map(|s| s.cpu).collect();
        cpus.sort_unstable();
        cpus.dedup();
        let legend_y = axis_y + 40.0;
        Layout {
            row_of,
            names,
            left,
            axis_y,
            legend_y,
            width: left + PLOT_W + 20.0,
            height: legend_y + 30.0,
            cpus,
        }
    }

    /// One bar, labelled with its CPU when wide enough.
    fn slice_svg(&self, s: &mut String, l: &Layout, sl: &Slice) {
        let (x0, x1) = (self.x(sl.start, l.left), self.x(sl.end, l.left));
        let y = l.row_y(sl.task) + (ROW_H - BAR_H) / 2.0;
        let _ = write!(
            s,
            r#"<rect class="slice" x="{x0:.2}" y="{y:.2}" width="{:.2}" height="{BAR_H:.2}" fill="{}"><title>{} on CPU {} at {} for {}</title></rect>"#,
            (x1 - x0).max(0.5),
            color(sl.cpu),
            xml(&self.task_name(sl.task)),
            sl.cpu,
            fmt_ns(sl.start as f64),
            fmt_ns((sl.end - sl.start) as f64)
        );
        if x1 - x0 >= 8.0 * (1 + sl.cpu.to_string().len()) as f64 {
            let _ = write!(
                s,
                r#"<text x="{:.2}" y="{:.2}" fill="white" font-size="9">{}</text>"#,
                x0 + 2.0,
                y + BAR_H - 3.0,
                sl.cpu
            );
        }
        s.push('\n');
    }

    /// A wake-up marker above the bars, or an interaction's begin or end line across the row.
    fn mark_svg(&self, s: &mut String, l: &Layout, m: &Mark) {
        match *m {
            Mark::Wakeup { t, task, cpu } => {
                let (x, y) = (self.x(t, l.left), l.row_y(task) + (ROW_H - BAR_H) / 2.0);
                let _ = writeln!(
                    s,
                    r#"<path class="wakeup" d="M{x:.2} {y:.2} l-3 -4 h6 z" fill="black"><title>{} woken at {} onto CPU {cpu}</title></path>"#,
                    xml(&self.task_name(task)),
                    fmt_ns(t as f64)
                );
            }
            Mark::Interaction {
                t,
                task,
                kind,
                id,
                begin,
            } => {
                let (x, y) = (self.x(t, l.left), l.row_y(task));
                let (class, colour, word) = if begin {
                    ("interaction-begin", "#2ca02c", "begins")
                } else {
                    ("interaction-end", "#d62728", "ends")
                };
                let kind = self
                    .meta
                    .interactions
                    .get(kind as usize)
                    .cloned()
                    .unwrap_or_else(|| format!("interaction{kind}"));
                let _ = writeln!(
                    s,
                    r#"<line class="{class}" x1="{x:.2}" y1="{y:.2}" x2="{x:.2}" y2="{:.2}" stroke="{colour}" stroke-width="2"><title>{} #{id} {word} on {} at {}</title></line>"#,
                    y + ROW_H,
                    xml(&kind),
                    xml(&self.task_name(task)),
                    fmt_ns(t as f64)
                );
            }
        }
    }

    fn axis(&self, s: &mut String, left: f64, y: f64) {
        let _ = writeln!(
            s,
            r#"<line x1="{left:.2}" y1="{y:.2}" x2="{:.2}" y2="{y:.2}" stroke="black"/>"#,
            left + PLOT_W
        );
        let step = tick_step(self.to - self.from);
        let decimals = ms_decimals(step);
        let mut t = self.from.div_ceil(step) * step;
        while t <= self.to {
            let x = self.x(t, left);
            let ms = t as f64 / MS as f64;
            let _ = writeln!(
                s,
                r##"<line x1="{x:.2}" y1="{TOP:.2}" x2="{x:.2}" y2="{:.2}" stroke="#dddddd"/><text x="{x:.2}" y="{:.2}" text-anchor="middle">{ms:.decimals$}</text>"##,
                y + 4.0,
                y + 16.0
            );
            t += step;
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.2}" y="{:.2}" text-anchor="middle">time (ms)</text>"#,
            left + PLOT_W / 2.0,
            y + 30.0
        );
    }

    fn legend(&self, s: &mut String, left: f64, y: f64, cpus: &[CpuId]) {
        let mut x = left;
        for &cpu in cpus {
            let _ = writeln!(
                s,
                r#"<rect x="{x:.2}" y="{:.2}" width="12" height="12" fill="{}"/><text x="{:.2}" y="{y:.2}">CPU {cpu}</text>"#,
                y - 10.0,
                color(cpu),
                x + 16.0
            );
            x += 16.0 + CHAR_W * (5 + cpu.to_string().len()) as f64 + 10.0;
        }
        let _ = writeln!(
            s,
            r##"<path d="M{:.2} {:.2} l-3 -4 h6 z" fill="black"/><text x="{:.2}" y="{y:.2}">wake-up</text><line x1="{:.2}" y1="{:.2}" x2="{:.2}" y2="{y:.2}" stroke="#2ca02c" stroke-width="2"/><text x="{:.2}" y="{y:.2}">interaction begin</text><line x1="{:.2}" y1="{:.2}" x2="{:.2}" y2="{y:.2}" stroke="#d62728" stroke-width="2"/><text x="{:.2}" y="{y:.2}">interaction end</text>"##,
            x + 3.0,
            y - 2.0,
            x + 10.0,
            x + 80.0,
            y - 12.0,
            x + 80.0,
            x + 86.0,
            x + 220.0,
            y - 12.0,
            x + 220.0,
            x + 226.0
        );
    }
}

impl Sink for GanttChart {
    fn begin(&mut self, meta: &RunMeta) {
        self.meta = meta.clone();
        self.running = vec![None; meta.cpus.max(meta.cpu_domain.len())];
    }

    fn record(&mut self, rec: &Record) {
        match *rec {
            // Picked again at once: the running span goes on.
            Record::Switch {
                prev: Some(p),
                next: Some(n),
                ..
            } if p == n => {}
            Record::Switch { t, cpu, next, .. } => {
                self.close(cpu, t);
                if let Some(n) = next {
                    if self.running.len() <= cpu as usize {
                        self.running.resize(cpu as usize + 1, None);
                    }
                    self.running[cpu as usize] = Some((n, t));
                }
            }
            Record::Wakeup { t, task, cpu, .. } if self.in_window(t) => {
                self.marks.push(Mark::Wakeup { t, task, cpu });
            }
            Record::InteractionBegin { t, id, name, task } => {
                self.open.insert(id, name);
                if self.in_window(t) {
                    self.marks.push(Mark::Interaction {
                        t,
                        task,
                        kind: name,
                        id,
                        begin: true,
                    });
                }
            }
            Record::InteractionEnd { t, id, task } => {
                let kind = self.open.remove(&id).unwrap_or(u32::MAX);
                if self.in_window(t) {
                    self.marks.push(Mark::Interaction {
                        t,
                        task,
                        kind,
                        id,
                        begin: false,
                    });
                }
            }
            _ => {}
        }
    }

    fn end(&mut self, end: Nanos) {
        for cpu in 0..self.running.len() {
            self.close(cpu as CpuId, end);
        }
    }
}

/// Parses a `--window` value `A..B` (durations with units, e.g. `100ms..150ms`).
pub fn parse_window(s: &str) -> Result<(Nanos, Nanos), String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("window `{s}` must look like START..END, e.g. 100ms..150ms"))?;
    let from = uxsched_model::time::parse_duration(a).map_err(|e| format!("window start: {e}"))?;
    let to = uxsched_model::time::parse_duration(b).map_err(|e| format!("window end: {e}"))?;
    if from >= to {
        return Err(format!(
            "window `{s}` is empty: the end must be after the start"
        ));
    }
    Ok((from, to))
}

fn color(cpu: CpuId) -> &'static str {
    PALETTE[cpu as usize % PALETTE.len()]
}

/// A tick step of 1, 2 or 5 × 10^k ns giving about ten ticks over `span`.
fn tick_step(span: Nanos) -> Nanos {
    let raw = (span / 10).max(1);
    let mut base = 1;
    while base * 10 <= raw {
        base *= 10;
    }
    [1, 2, 5, 10]
        .into_iter()
        .map(|m| m * base)
        .find(|&s| s >= raw)
        .unwrap_or(10 * base)
}

/// Decimals needed to print multiples of `step` ns in milliseconds exactly.
fn ms_decimals(step: Nanos) -> usize {
    (0..6)
        .find(|&d| step.checked_rem(MS / 10u64.pow(d as u32)) == Some(0))
        .unwrap_or(6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_printed_exactly() {
        assert_eq!(tick_step(100 * MS), 10 * MS);
        assert_eq!(tick_step(30 * MS), 5 * MS);
        assert_eq!(tick_step(3 * MS), 500_000);
        assert_eq!(ms_decimals(10 * MS), 0);
        assert_eq!(ms_decimals(500_000), 1);
        assert_eq!(ms_decimals(20_000), 2);
    }

    #[test]
    fn windows_parse_with_units() {
        assert_eq!(parse_window("100ms..1.5s"), Ok((100 * MS, 1_500 * MS)));
        assert!(parse_window("100ms").unwrap_err().contains("START..END"));
        assert!(parse_window("2ms..1ms").unwrap_err().contains("empty"));
    }

    #[test]
    fn empty_window_is_refused() {
        assert!(GanttChart::new(5, 5).unwrap_err().contains("empty"));
    }
}
