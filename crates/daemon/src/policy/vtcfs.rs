//! `vtcfs` (seed 000): the thread that receives the user's interaction — the UI thread, until
//! the tracker names it precisely — gets the weight of eq. 6, W' = C × ΣW / P (capped at ω−20),
//! computed from the live run-queue load, as the nice value whose weight is at least W'; plus a
//! short custom EEVDF slice (`sched_runtime` = T), the stock-kernel stand-in for VT-CFS's
//! constant preemption tick. The boost lapses after `budget_ms` (the paper demotes the task
//! when its slice runs out or it blocks; a stock kernel tells userspace neither, so a budget
//! per interaction bounds it instead).
//!
//! ΣW: each runnable task counted at nice 0 (ω0) — a daemon cannot read other tasks' weights
//! per run-queue without debugfs, which is locked down here — spread over the CPUs.

use crate::types::{Desired, Target};

use super::Policy;
use crate::config::Config;
use crate::state::{Role, State};
use uxsched_model::formulas::{boost_weight, cfs_period};
use uxsched_model::{weight_to_nice_at_least, MS, NICE_0_LOAD, US};

pub struct Vtcfs;

/// The nice value eq. 6 asks for with `runnable` tasks over `cpus` run-queues.
pub fn eq6_nice(runnable: u32, cpus: u32, cfg: &Config) -> i32 {
    // Tasks per run-queue, plus the boosted task itself (the paper's S includes τa).
    let n = (runnable as usize).div_ceil(cpus.max(1) as usize).max(1);
    let total = n as u64 * NICE_0_LOAD;
    let period = cfs_period(
        n,
        cfg.vtcfs.latency_ms * MS,
        cfg.vtcfs.min_granularity_us * US,
    );
    // A boost never lowers priority: if nice 0 already gives a slice of C, no boost is needed.
    weight_to_nice_at_least(boost_weight(cfg.vtcfs.c_ms * MS, total, period)).min(0)
}

impl Policy for Vtcfs {
    fn desired(&self, state: &State, cfg: &Config) -> Desired {
        let mut d = Desired::nothing(cfg);
        let Some(app) = &state.focus else {
            return d;
        };
        if state.since_focus_ms >= cfg.vtcfs.budget_ms {
            return d; // the boost has lapsed until the next interaction
        }
        let nice = eq6_nice(state.runnable, state.cpus, cfg);
        d.each(app, |t| {
            (t.role == Role::Ui).then(|| Target {
                nice: Some(nice),
                slice_ns: Some(cfg.vtcfs.slice_us * 1000),
                ..Target::default()
            })
        });
        d
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_state::{fg_state, tid};
    use super::*;

    #[test]
    fn only_the_ui_thread_is_boosted_until_the_budget_lapses() {
        let cfg = Config::default();
        let mut s = fg_state();
        let d = Vtcfs.desired(&s, &cfg);
        assert_eq!(d.threads.len(), 1);
        let ui = tid(&d, 100).unwrap();
        assert_eq!(ui.slice_ns, Some(100_000));
        assert_eq!(ui.group, None);
        s.since_focus_ms = cfg.vtcfs.budget_ms;
        assert!(Vtcfs.desired(&s, &cfg).threads.is_empty());
    }

    #[test]
    fn eq6_weight_grows_with_load_and_caps_at_nice_minus_20() {
        let mut cfg = Config::default();
        cfg.vtcfs.c_ms = 3;
        // Idle: the task alone already gets its slice; no boost needed.
        assert_eq!(eq6_nice(1, 1, &cfg), 0);
        // 4 nice-0 tasks, P = 6 ms: W' = 3 ms × 4096 / 6 ms = 2048 -> nice -4 (3121 ≥ 2048 > 1991).
        assert_eq!(eq6_nice(4, 1, &cfg), -4);
        cfg.vtcfs.c_ms = 100;
        assert_eq!(eq6_nice(40, 2, &cfg), -20);
    }
}
