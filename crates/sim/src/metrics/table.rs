//! The human table: compact, aligned, and short enough for a 200-thread workload.
//!
//! Which tasks are shown (documented in `docs/metrics.md`): with a filter, every task whose name
//! or one of whose labels starts with it; without one, every task if there are at most `top`,
//! else the `top` with the highest p99 wake-up latency. Shown tasks keep id order; a footer
//! counts the rest, and per-label and per-family tables summarise everyone. Processes and
//! families follow the same top-N rule; labels, cgroups and interactions are shown in full.

use std::fmt;

use uxsched_model::time::fmt_ns;

use super::dist::{Stats, Summary};
use super::report::{GroupReport, Report, TaskReport};

#[derive(Debug, Clone)]
pub struct TableOptions {
    /// At most this many tasks (and processes, families) are listed: the worst p99 wake-up
    /// latencies.
    pub top: usize,
    /// Show only tasks whose name or a label starts with this.
    pub filter: Option<String>,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            top: 20,
            filter: None,
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_table(&TableOptions::default()))
    }
}

impl Report {
    pub fn to_table(&self, opts: &TableOptions) -> String {
        let mut out = format!(
            "{} under {} — {} CPUs, seed {}, {} simulated\n",
            self.workload,
            self.sched,
            self.cpus,
            self.seed,
            fmt_ns(self.duration_ns as f64)
        );
        let (shown, hidden) = self.shown_tasks(opts);
        out += &task_table(&shown, hidden, opts);
        out += &io_table(&shown);
        out += &self.interaction_table();
        out += &aggregate_table("label", &all(&self.labels), 0);
        if hidden > 0 {
            out += &top_table("task family", &self.families, opts.top);
        }
        out += &top_table("process", &self.processes, opts.top);
        if self.groups.len() > 1 {
            out += &aggregate_table("cgroup", &all(&self.groups), 0);
        }
        if !self.anomalies.is_empty() {
            out += &format!(
                "\n{} log anomalies (engine bug?), first: {}\n",
                self.anomalies.count,
                self.anomalies.examples.join("; ")
            );
        }
        out
    }

    /// Each interaction kind's counts and response times (nothing when there is none).
    fn interaction_table(&self) -> String {
        if self.interactions.is_empty() {
            return String::new();
        }
        let mut rows = vec![header(&[
            "interaction",
            "begun",
            "done",
            "unfinished",
            "resp p50",
            "resp p90",
            "resp p99",
            "resp max",
        ])];
        for i in &self.interactions {
            let s = i.response_time.stats;
            rows.push(vec![
                i.name.clone(),
                i.begun.to_string(),
                i.response_time.count.to_string(),
                i.unfinished.to_string(),
                time(s, |s| s.p50),
                time(s, |s| s.p90),
                time(s, |s| s.p99),
                time(s, |s| s.max),
            ]);
        }
        format!("\n{}", render(&rows, 1))
    }

    fn shown_tasks(&self, opts: &TableOptions) -> (Vec<&TaskReport>, usize) {
        let shown: Vec<&TaskReport> = match &opts.filter {
            Some(prefix) => self
                .tasks
                .iter()
                .filter(|t| {
                    t.name.starts_with(prefix.as_str())
                        || t.labels.iter().any(|l| l.starts_with(prefix.as_str()))
                })
                .collect(),
            None => {
                let mut order: Vec<usize> = (0..self.tasks.len()).collect();
                order.sort_by_key(|&i| {
                    (
                        std::cmp::Reverse(p99(&self.tasks[i].metrics.wakeup_latency)),
                        i,
                    )
                });
                order.truncate(opts.top);
                order.sort_unstable();
                order.into_iter().map(|i| &self.tasks[i]).collect()
            }
        };
        let hidden = self.tasks.len() - shown.len();
        (shown, hidden)
    }
}

fn all(groups: &[GroupReport]) -> Vec<&GroupReport> {
    groups.iter().collect()
}

fn p99(s: &Summary) -> i64 {
    s.stats.map_or(i64::MIN, |s| s.p99)
}

/// The `top` groups with the worst p99 wake-up latency, in their original order.
fn top_table(kind: &str, groups: &[GroupReport], top: usize) -> String {
    let mut order: Vec<usize> = (0..groups.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(p99(&groups[i].metrics.wakeup_latency)), i));
    order.truncate(top);
    order.sort_unstable();
    let shown: Vec<&GroupReport> = order.iter().map(|&i| &groups[i]).collect();
    aggregate_table(kind, &shown, groups.len() - shown.len())
}

/// A table of aggregates (empty string when there are none) and a footer for `hidden` ones.
fn aggregate_table(kind: &str, groups: &[&GroupReport], hidden: usize) -> String {
    if groups.is_empty() {
        return String::new();
    }
    let mut rows = vec![header(&[
        kind,
        "tasks",
        "cpu%",
        "wake p50",
        "wake p99",
        "preempt p99",
        "csw vol",
        "invol",
        "loops/s",
        "misses",
    ])];
    for g in groups {
        let m = &g.metrics;
        let w = m.wakeup_latency.stats;
        rows.push(vec![
            if g.name.is_empty() {
                "/".into()
            } else {
                g.name.clone()
            },
            g.tasks.to_string(),
            format!("{:.1}", m.cpu_share * 100.0),
            time(w, |s| s.p50),
            time(w, |s| s.p99),
            time(m.preemption_latency.stats, |s| s.p99),
            m.csw_voluntary.to_string(),
            m.csw_involuntary.to_string(),
            format!("{:.1}", m.loops_per_s),
            m.deadline_misses.to_string(),
        ]);
    }
    let mut out = format!("\n{}", render(&rows, 1));
    if hidden > 0 {
        out += &format!("  … {hidden} more hidden (top by wake p99)\n");
    }
    out
}

/// Block-device reads of the shown tasks that did any (empty string when none did).
fn io_table(tasks: &[&TaskReport]) -> String {
    let readers: Vec<&&TaskReport> = tasks
        .iter()
        .filter(|t| t.metrics.io_wait.count > 0)
        .collect();
    if readers.is_empty() {
        return String::new();
    }
    let mut rows = vec![header(&[
        "task",
        "reads",
        "io wait p50",
        "io wait p99",
        "io wait max",
    ])];
    for t in readers {
        let s = t.metrics.io_wait.stats;
        rows.push(vec![
            t.name.clone(),
            t.metrics.io_wait.count.to_string(),
            time(s, |s| s.p50),
            time(s, |s| s.p99),
            time(s, |s| s.max),
        ]);
    }
    format!("\n{}", render(&rows, 1))
}

/// The shown tasks' rows, and a footer counting the hidden ones.
fn task_table(shown: &[&TaskReport], hidden: usize, opts: &TableOptions) -> String {
    let mut rows = vec![header(&[
        "task",
        "policy",
        "cpu%",
        "wakeups",
        "wake p50",
        "wake p99",
        "wake max",
        "preempt p99",
        "csw vol",
        "invol",
        "migr",
        "loops/s",
        "misses",
    ])];
    rows.extend(shown.iter().map(|t| task_row(t)));
    let mut out = render(&rows, 2);
    match (&opts.filter, hidden) {
        (_, 0) => {}
        (Some(prefix), _) => out += &format!("  … {hidden} tasks not matching `{prefix}` hidden\n"),
        (None, _) => {
            out += &format!(
                "  … {hidden} more tasks hidden (shown: top {} by wake p99; filter by name or label prefix to see others)\n",
                opts.top
            )
        }
    }
    out
}

fn task_row(t: &TaskReport) -> Vec<String> {
    let m = &t.metrics;
    let w = m.wakeup_latency.stats;
    vec![
        t.name.clone(),
        t.policy.clone(),
        format!("{:.1}", m.cpu_share * 100.0),
        m.wakeup_latency.count.to_string(),
        time(w, |s| s.p50),
        time(w, |s| s.p99),
        time(w, |s| s.max),
        time(m.preemption_latency.stats, |s| s.p99),
        m.csw_voluntary.to_string(),
        m.csw_involuntary.to_string(),
        m.migrations.to_string(),
        format!("{:.1}", m.loops_per_s),
        m.deadline_misses.to_string(),
    ]
}

fn header(cols: &[&str]) -> Vec<String> {
    cols.iter().map(|c| c.to_string()).collect()
}

/// A time statistic, or `-` when the distribution is empty.
fn time(s: Option<Stats>, pick: impl Fn(&Stats) -> i64) -> String {
    s.map_or_else(|| "-".into(), |s| fmt_ns(pick(&s) as f64))
}

/// Aligns `rows` (the first is the header): the first `text_cols` columns left, the rest right.
fn render(rows: &[Vec<String>], text_cols: usize) -> String {
    let ncols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..ncols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, s)| {
                if c < text_cols {
                    format!("{s:<w$}", w = widths[c])
                } else {
                    format!("{s:>w$}", w = widths[c])
                }
            })
            .collect();
        out += cells.join("  ").trim_end();
        out += "\n";
    }
    out
}
