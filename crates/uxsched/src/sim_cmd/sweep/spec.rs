//! The sweep spec (`SPEC.toml`): what to vary, read strictly so that a typo is refused with its
//! line before anything runs (docs/sweep.md).

use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

/// The file as written. Every axis keeps its span so a later check can name its line.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// Shown in the summary and the plots' titles.
    #[serde(default)]
    pub name: Option<String>,
    /// Built-in names or files (`.toml` native, `.json` rt-app), relative to the spec's folder.
    pub workloads: Spanned<Vec<String>>,
    /// Fair policies (default: `eevdf`, as `sim run`).
    #[serde(default)]
    pub scheds: Option<Spanned<Vec<String>>>,
    /// Sets of mechanisms, each attached to a run as repeated `--mech` (default: one empty set).
    #[serde(default)]
    pub mechs: Option<Spanned<Vec<Vec<String>>>>,
    /// CPU counts (default: the workload's platform, as `sim run` without `--cpus`).
    #[serde(default)]
    pub cpus: Option<Spanned<Vec<usize>>>,
    /// Tick frequencies (default: 250).
    #[serde(default)]
    pub hz: Option<Spanned<Vec<u32>>>,
    /// A list of seeds, or `{ from = 1, count = 10 }`.
    pub seeds: Spanned<Seeds>,
    /// Simulated time of every run (default: the workload's, else 10s, as `sim run`).
    #[serde(default)]
    pub duration: Option<Spanned<String>>,
    /// `cfs` only: `kernel` or `paper` (as `sim run --cfs-model`).
    #[serde(default)]
    pub cfs_model: Option<Spanned<String>>,
    /// The block device's I/O scheduler (as `sim run --io-sched`).
    #[serde(default)]
    pub io_sched: Option<Spanned<String>>,
    /// Tunables, each with its list of values (`"mcfs.cut_rate" = [1, 4, 16]`). An axis applies
    /// only to the points whose policy, mechanism or I/O scheduler its prefix names.
    #[serde(default)]
    pub params: BTreeMap<Spanned<String>, Spanned<Vec<toml::Value>>>,
    #[serde(default)]
    pub output: Output,
    #[serde(default)]
    pub plot: Vec<Spanned<PlotSpec>>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Seeds {
    List(Vec<u64>),
    Range { from: u64, count: u64 },
}

impl Seeds {
    pub fn values(&self) -> Vec<u64> {
        match self {
            Seeds::List(v) => v.clone(),
            Seeds::Range { from, count } => (*from..from.saturating_add(*count)).collect(),
        }
    }
}

/// Which rows the table keeps (a 2,000-thread run has 2,000 tasks × ~60 metrics).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Output {
    /// Keep tasks, labels and interactions whose name or a label starts with one of these
    /// (as `sim run --filter`); default: all.
    #[serde(default)]
    pub tasks: Option<Spanned<Vec<String>>>,
    /// Keep these metrics (`wakeup_latency.p99`, `cpu_share`, …); default: all.
    #[serde(default)]
    pub metrics: Option<Spanned<Vec<String>>>,
}

/// One plot: `metric` of `task` against `x`, one line per value of `series`, mean over the
/// remaining axes (seeds) with their min–max as error bars.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlotSpec {
    pub metric: String,
    /// A task, label or interaction name, as in the table's `name` column.
    pub task: String,
    /// A column of the table: `cpus`, `hz`, `seed`, `sched`, `mechs`, `workload` or a param.
    pub x: String,
    #[serde(default)]
    pub series: Option<String>,
}

/// Reads the spec; toml's own message names the line and the key (unknown field, wrong type).
pub fn parse(text: &str, file: &str) -> Result<Spec, String> {
    toml::from_str(text).map_err(|e| format!("{file}: {e}"))
}

/// 1-based line of a byte offset, for messages about a spanned value.
pub fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// A TOML value as `--param` takes it: `16`, `0.5`, `"3ms"` → `16`, `0.5`, `3ms`.
pub fn param_text(v: &toml::Value) -> Result<String, String> {
    match v {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::Boolean(b) => Ok(b.to_string()),
        other => Err(format!(
            "`{other}` is not a tunable value (a number, a string or a boolean)"
        )),
    }
}
