//! Runs points: each exactly as `sim run` would (crates/simrun: `config_for` then `measure`), on
//! `--jobs` threads. A point's result depends only on the point, so the table is the same for any
//! N.

use super::grid::{Grid, Point};
use anyhow::Context;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use uxsched_sim::workload::Workload;
use uxsched_simrun::rows::Select;
use uxsched_simrun::{Job, Outcome, WorkloadSource};

/// Runs one point on the workloads parsed once from the plan's sources.
pub fn run_point(
    grid: &Grid,
    workloads: &[Workload],
    p: &Point,
    select: &Select,
) -> anyhow::Result<Outcome> {
    let s = grid.settings(p);
    uxsched_simrun::run_point(&workloads[p.workload], p.index, &p.id, &s, select)
}

/// The point as it travels to a Ray worker: the same settings, the workload's text.
pub fn job(grid: &Grid, sources: &[WorkloadSource], p: &Point, select: &Select) -> Job {
    Job {
        index: p.index,
        id: p.id.clone(),
        workload: sources[p.workload].clone(),
        settings: grid.settings(p),
        select: select.clone(),
    }
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
