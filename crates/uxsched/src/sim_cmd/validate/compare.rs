//! Per task, the kernel's figures over the repeated rt-app runs against the simulator's over
//! several seeds, and whether they agree: the simulator's median within 10 % of the kernel's
//! median, or within the kernel's own run-to-run range (the smallest to the largest per-run
//! figure) where that is wider — issue 34's criterion.
//!
//! The simulator runs several seeds because a seed fixes the CPUs' tick phases, and the suite's
//! timers are multiples of the tick (16, 20, 100 ms at HZ 250): every wake-up of one run meets
//! the tick at the same phase, so a tick-bound p90 is one of a few values per seed (periodic-vs-
//! hogs: 5.41, 3.33 or 2.29 ms for seeds 1–3). The kernel's runs start at a random tick phase
//! each, so one seed against one kernel run compares two draws.

use super::rtapp::ThreadLog;
use serde::Serialize;
use uxsched_model::stats::nearest_rank;
use uxsched_sim::metrics::dist::Summary;

/// Relative agreement the suite aims at.
pub const TOLERANCE: f64 = 0.10;

/// One metric of one task.
#[derive(Debug, Serialize)]
pub struct Row {
    pub metric: &'static str,
    /// Median of the per-run figures.
    pub kernel: i64,
    /// Smallest and largest per-run figure (equal to `kernel` with one run).
    pub kernel_lo: i64,
    pub kernel_hi: i64,
    /// Median over the simulated seeds, and their smallest and largest figure.
    pub sim: i64,
    pub sim_lo: i64,
    pub sim_hi: i64,
    pub rel_error: Option<f64>,
    /// Within [`TOLERANCE`] of `kernel` or inside `kernel_lo..=kernel_hi`.
    pub agrees: bool,
}

#[derive(Debug, Serialize)]
pub struct TaskResult {
    pub task: String,
    /// Why the task is not compared (no timer, no rt-app log), if it is not.
    pub skipped: Option<String>,
    /// rt-app runs that logged this task.
    pub runs: usize,
    /// Simulated seeds.
    pub seeds: usize,
    pub rows: Vec<Row>,
}

/// The figures of one sample set, in [`METRICS`] order.
fn figures(wu_lat: &[i64], slack: &[i64]) -> [i64; 6] {
    let wu = Summary::of(wu_lat, false).stats.expect("non-empty");
    let sl = Summary::of(slack, false).stats.expect("non-empty");
    let mut s = slack.to_vec();
    s.sort_unstable();
    let misses = slack.iter().filter(|&&x| x < 0).count() as i64;
    [wu.p50, wu.p90, wu.p99, nearest_rank(&s, 10), sl.p50, misses]
}

pub const METRICS: [&str; 6] = [
    "wake p50",
    "wake p90",
    "wake p99",
    "slack p10",
    "slack p50",
    "misses",
];

/// The lower median and the extremes of `v` (not empty).
fn spread(v: &mut [i64]) -> (i64, i64, i64) {
    v.sort_unstable();
    (v[(v.len() - 1) / 2], v[0], v[v.len() - 1])
}

fn row(metric: &'static str, per_run: &mut [i64], per_seed: &mut [i64]) -> Row {
    let (kernel, lo, hi) = spread(per_run);
    let (sim, sim_lo, sim_hi) = spread(per_seed);
    let rel_error = (kernel != 0).then(|| (sim - kernel) as f64 / kernel.abs() as f64);
    let agrees = (lo..=hi).contains(&sim)
        || rel_error.map_or(sim == kernel, |e| e.abs() <= TOLERANCE + 1e-9);
    Row {
        metric,
        kernel,
        kernel_lo: lo,
        kernel_hi: hi,
        sim,
        sim_lo,
        sim_hi,
        rel_error,
        agrees,
    }
}

/// Compare `name`'s simulated samples, `(wu_lat, slack)` per seed, with its logs from each
/// kernel run (`None` where a run has no log for it).
pub fn compare(name: &str, kernel: &[Option<&ThreadLog>], sim: &[(&[i64], &[i64])]) -> TaskResult {
    let skip = |why: &str| TaskResult {
        task: name.to_string(),
        skipped: Some(why.to_string()),
        runs: 0,
        seeds: 0,
        rows: Vec::new(),
    };
    let logs: Vec<&ThreadLog> = kernel.iter().flatten().copied().collect();
    if logs.is_empty() {
        return skip("no rt-app log for this thread");
    }
    let timed: Vec<&ThreadLog> = logs
        .into_iter()
        .filter(|k| !k.wu_lat.is_empty() && !k.slack.is_empty())
        .collect();
    let sim: Vec<[i64; 6]> = sim
        .iter()
        .filter(|(wu, slack)| !wu.is_empty() && !slack.is_empty())
        .map(|(wu, slack)| figures(wu, slack))
        .collect();
    if sim.is_empty() || timed.is_empty() {
        return skip("no timer: rt-app measures wake-up latency and slack at timers only");
    }
    let per_run: Vec<[i64; 6]> = timed.iter().map(|k| figures(&k.wu_lat, &k.slack)).collect();
    let rows = METRICS
        .iter()
        .enumerate()
        .map(|(m, &metric)| {
            let mut k: Vec<i64> = per_run.iter().map(|f| f[m]).collect();
            let mut s: Vec<i64> = sim.iter().map(|f| f[m]).collect();
            row(metric, &mut k, &mut s)
        })
        .collect();
    TaskResult {
        task: name.to_string(),
        skipped: None,
        runs: timed.len(),
        seeds: sim.len(),
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreement_is_ten_percent_or_the_kernel_range() {
        // Median 100, range 80..=300: 250 is 150 % off but inside the kernel's own spread.
        let r = row("wake p90", &mut [300, 100, 80], &mut [250]);
        assert_eq!((r.kernel, r.kernel_lo, r.kernel_hi), (100, 80, 300));
        assert!(r.agrees);
        // One run: only the 10 % holds.
        assert!(row("wake p50", &mut [100], &mut [109]).agrees);
        assert!(!row("wake p50", &mut [100], &mut [112]).agrees);
        assert!(!row("wake p50", &mut [100, 104], &mut [79]).agrees);
        // The simulator's figure is its seeds' (lower) median.
        let r = row("wake p90", &mut [100], &mut [5000, 95, 300]);
        assert_eq!((r.sim, r.sim_lo, r.sim_hi), (300, 95, 5000));
        assert!(!r.agrees);
        assert!(row("wake p90", &mut [100], &mut [5000, 95, 105]).agrees);
    }
}
