//! A run's report as tidy rows: one per task (or label, or interaction kind) × metric, with the
//! names `sim run --json` uses (`wakeup_latency.p99` is the JSON's `wakeup_latency.p99`).

use serde::{Deserialize, Serialize};
use uxsched_sim::metrics::Report;

/// `scope` is `task`, `label` or `interaction`; `name` the task, label or interaction kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub scope: String,
    pub name: String,
    pub metric: String,
    pub value: f64,
}

/// The distributions of a report and the statistics each has (an empty one has only `count`).
const DISTRIBUTIONS: [&str; 6] = [
    "wakeup_latency",
    "preemption_latency",
    "preemption_waits",
    "slack",
    "io_wait",
    "response_time",
];
const STATS: [&str; 9] = [
    "count", "mean", "min", "p50", "p90", "p95", "p99", "p99.9", "max",
];
const SCALARS: [&str; 11] = [
    "cpu_ns",
    "cpu_share",
    "unfinished_activations",
    "csw_voluntary",
    "csw_involuntary",
    "migrations",
    "loops",
    "loops_per_s",
    "deadline_misses",
    "begun",
    "unfinished",
];

/// Every metric name a row can have (the spec's `output.metrics` is checked against it).
pub fn metric_names() -> Vec<String> {
    let mut names: Vec<String> = SCALARS.iter().map(|s| s.to_string()).collect();
    for d in DISTRIBUTIONS {
        names.extend(STATS.iter().map(|s| format!("{d}.{s}")));
    }
    names
}

/// Which rows to keep (a sweep spec's `[output]`); empty = all.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Select {
    pub tasks: Vec<String>,
    pub metrics: Vec<String>,
}

impl Select {
    fn keeps_name(&self, name: &str, labels: &[String]) -> bool {
        self.tasks.is_empty()
            || self.tasks.iter().any(|f| {
                name.starts_with(f.as_str()) || labels.iter().any(|l| l.starts_with(f.as_str()))
            })
    }

    fn keeps_metric(&self, metric: &str) -> bool {
        self.metrics.is_empty() || self.metrics.iter().any(|m| m == metric)
    }
}

/// The report's tasks, labels and interaction kinds as rows, in the report's order.
pub fn of_report(r: &Report, select: &Select) -> anyhow::Result<Vec<Row>> {
    let mut out = Vec::new();
    for t in &r.tasks {
        if select.keeps_name(&t.name, &t.labels) {
            push(
                &mut out,
                select,
                "task",
                &t.name,
                serde_json::to_value(&t.metrics)?,
            );
        }
    }
    for l in &r.labels {
        if select.keeps_name(&l.name, &[]) {
            push(
                &mut out,
                select,
                "label",
                &l.name,
                serde_json::to_value(&l.metrics)?,
            );
        }
    }
    for i in &r.interactions {
        if select.keeps_name(&i.name, &[]) {
            push(
                &mut out,
                select,
                "interaction",
                &i.name,
                serde_json::to_value(i)?,
            );
        }
    }
    Ok(out)
}

/// One row per number in `v`, nested objects named `outer.inner`; strings (names) are skipped.
fn push(out: &mut Vec<Row>, select: &Select, scope: &str, name: &str, v: serde_json::Value) {
    let mut stack = vec![(String::new(), v)];
    while let Some((path, v)) = stack.pop() {
        match v {
            serde_json::Value::Object(m) => {
                // Reversed so that the stack yields the fields in the map's (key) order.
                for (k, v) in m.into_iter().rev() {
                    let key = if path.is_empty() {
                        k
                    } else {
                        format!("{path}.{k}")
                    };
                    stack.push((key, v));
                }
            }
            serde_json::Value::Number(n) if select.keeps_metric(&path) => out.push(Row {
                scope: scope.into(),
                name: name.into(),
                metric: path,
                value: n.as_f64().unwrap_or(f64::NAN),
            }),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uxsched_model::MS;
    use uxsched_sim::engine::{Sim, SimConfig};
    use uxsched_sim::metrics::MetricsCollector;
    use uxsched_sim::platform::PlatformSpec;

    /// Every metric a real report flattens to is one `output.metrics` accepts, so the list
    /// cannot drift from the report.
    #[test]
    fn rows_use_only_known_metric_names() {
        let w = uxsched_sim::workload::builtin("showcase").unwrap();
        let mut cfg = SimConfig::new("eevdf", PlatformSpec::uniform(4));
        cfg.duration = 200 * MS;
        let mut m = MetricsCollector::new();
        Sim::new(&w, cfg).unwrap().run(&mut m, &mut |_| {}).unwrap();
        let rows = of_report(&m.report(false), &Select::default()).unwrap();
        let known = metric_names();
        assert!(rows.iter().any(|r| r.scope == "interaction"));
        assert!(rows.iter().any(|r| r.metric == "wakeup_latency.p99"));
        for r in &rows {
            assert!(
                known.contains(&r.metric),
                "{} not in metric_names()",
                r.metric
            );
        }
    }
}
