//! Runs points: each exactly as `sim run` would (`config_for` then `measure`), on `--jobs`
//! threads. A point's result depends only on the point, so the table is the same for any N.

use super::grid::{Grid, Point};
use super::rows::{self, Row, Select};
use crate::sim_cmd::{config_for, measure};
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use uxsched_sim::workload::Workload;

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

/// Runs one point.
pub fn run_point(
    grid: &Grid,
    workloads: &[Workload],
    p: &Point,
    select: &Select,
) -> anyhow::Result<Outcome> {
    let w = &workloads[p.workload];
    let a = grid.run_args(p);
    let cfg = config_for(w, &a)?;
    let (metrics, digest) = measure(w, cfg, &a.mechs, Vec::new(), false)?;
    let report = metrics.report(false);
    Ok(Outcome {
        index: p.index,
        id: p.id.clone(),
        digest: digest.hex(),
        cpus: report.cpus,
        duration_ns: report.duration_ns,
        rows: rows::of_report(&report, select)?,
    })
}

/// Runs `todo` on `jobs` threads, handing each result to `done` on this thread as it arrives
/// (so only this thread writes the journal). A panicking point is an error for that point, not
/// the end of the sweep.
pub fn run_all<'p>(
    todo: &[&'p Point],
    jobs: usize,
    run: impl Fn(&Point) -> anyhow::Result<Outcome> + Sync,
    mut done: impl FnMut(&'p Point, anyhow::Result<Outcome>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, todo.len().max(1)) {
            let tx = tx.clone();
            let (next, run) = (&next, &run);
            s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&p) = todo.get(i) else { break };
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(p)))
                    .unwrap_or_else(|e| {
                        Err(anyhow::anyhow!("the run panicked: {}", panic_text(&e)))
                    })
                    .with_context(|| format!("point {} ({})", p.index, p.id));
                if tx.send((i, r)).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        for (i, r) in rx {
            if let Err(e) = done(todo[i], r) {
                // Stop handing out points; the threads finish the ones they hold.
                next.store(todo.len(), Ordering::Relaxed);
                return Err(e);
            }
        }
        Ok(())
    })
}

fn panic_text(e: &Box<dyn std::any::Any + Send>) -> String {
    e.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| e.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}
