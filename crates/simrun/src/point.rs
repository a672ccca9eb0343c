//! A sweep point as it travels (`Job`: settings, the workload's text, the rows wanted) and what it
//! gives back (`Outcome`: the journal's line). `run_job` is what a Ray worker calls;
//! `run_point` is what the local threads call on a workload they parsed once.

use crate::rows::{self, Row, Select};
use crate::run::{config_for, measure, RunSettings};
use crate::source::WorkloadSource;
use serde::{Deserialize, Serialize};
use uxsched_sim::workload::Workload;

/// One point, self-contained.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    pub index: usize,
    pub id: String,
    pub workload: WorkloadSource,
    pub settings: RunSettings,
    pub select: Select,
}

/// What one finished point gives the table (and the journal keeps).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Outcome {
    pub index: usize,
    pub id: String,
    /// The event log's digest, as `sim run --determinism-check` prints it.
    pub digest: String,
    /// The CPUs and simulated time the run really had (the workload's when the spec gave none).
    pub cpus: usize,
    pub duration_ns: u64,
    pub rows: Vec<Row>,
}

/// Runs one point on an already parsed workload.
pub fn run_point(
    w: &Workload,
    index: usize,
    id: &str,
    s: &RunSettings,
    select: &Select,
) -> anyhow::Result<Outcome> {
    let cfg = config_for(w, s)?;
    let (metrics, digest) = measure(w, cfg, &s.mechs, Vec::new(), &mut |_| {})?;
    let report = metrics.report(false);
    Ok(Outcome {
        index,
        id: id.to_string(),
        digest: digest.hex(),
        cpus: report.cpus,
        duration_ns: report.duration_ns,
        rows: rows::of_report(&report, select)?,
    })
}

/// Runs a travelling point: parses its workload, then [`run_point`].
pub fn run_job(job: &Job) -> anyhow::Result<Outcome> {
    let w = job.workload.parse()?;
    run_point(&w, job.index, &job.id, &job.settings, &job.select)
}
