//! Load tracking for balancing by load (PELT, kernel/sched/pelt.c and fair.c, 6.6–6.18).
//!
//! The kernel keeps, per entity, `load_avg`: its weight times the share of recent time it was
//! runnable, a geometric average over 1024-µs periods with y³² = ½ (a 32-ms half-life:
//! `___update_load_sum`, `___update_load_avg`). A CPU's load is the sum over the tasks
//! attributed to it, including the decaying contribution of those blocked there
//! (`cfs_rq->avg.load_avg` keeps a sleeper's load until it wakes on another CPU:
//! `migrate_task_rq_fair` removes it, `attach_entity_load_avg` adds it on the new one). Its
//! utilisation `util_avg` is the same average of the time the CPU ran anything, scaled to 1024.
//!
//! How this differs, on purpose: the average runs in continuous time,
//! `a ← a·2^(−Δ/P) + w·(1 − 2^(−Δ/P))` while runnable and `a ← a·2^(−Δ/P)` while not
//! (`P` = 32 × 1024 µs), instead of sums over whole periods with partial first and last
//! segments; the two agree at period boundaries up to the kernel's integer rounding and its
//! `LOAD_AVG_MAX` normalisation (a task runnable for ever reads `w` here, ~0.98 `w` there). A
//! task's average is kept in its own weight (`se->avg.load_avg`, in its group's run-queue); the
//! hierarchy's share of the root run-queue is applied when balancing reads it (`task_h_load`),
//! from the instantaneous run-queue weights of that moment. A CPU's `util_avg` is updated from its busy time at each balancing pass, as if the
//! busy time were spread evenly over the interval.

use super::{Class, Sim, State};
use uxsched_model::{Nanos, US};

/// 32 periods of 1024 µs: the time in which a contribution halves.
const HALF_LIFE: Nanos = 32 * 1024 * US;

/// A task's tracked load.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct TaskLoad {
    /// `se->avg.load_avg` at `last`.
    avg: f64,
    /// `se->avg.runnable_avg` at `last` (the same average of being runnable, scaled to 1024).
    run: f64,
    last: Nanos,
    /// On its CPU's run-queue since `last` (runnable or running).
    runnable: bool,
    /// Its own weight while runnable (`se->load.weight`, in its group's run-queue); the
    /// hierarchy's share is applied when the load is read ([`Sim::task_load`]).
    weight: f64,
}

/// A CPU's tracked utilisation.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct CpuUtil {
    /// `util_avg`, 0..=1024.
    pub(super) avg: f64,
    last: Nanos,
    /// The CPU's `busy` total at `last`.
    busy: Nanos,
}

fn decay(dt: Nanos) -> f64 {
    (-(dt as f64) / HALF_LIFE as f64).exp2()
}

impl TaskLoad {
    /// (`load_avg`, `runnable_avg`) at `now`, the task's state unchanged since `last`.
    fn at(&self, now: Nanos) -> (f64, f64) {
        let d = decay(now.saturating_sub(self.last));
        let (w, r) = if self.runnable {
            (self.weight, 1024.0)
        } else {
            (0.0, 0.0)
        };
        (self.avg * d + w * (1.0 - d), self.run * d + r * (1.0 - d))
    }

    fn advance(&mut self, now: Nanos) {
        (self.avg, self.run) = self.at(now);
        self.last = now;
    }
}

impl Sim {
    /// A fair task joined a run-queue (wake-up, migration, start): account the time it was
    /// away, then count it runnable with its own weight.
    pub(super) fn pelt_enqueued(&mut self, tid: u32) {
        let now = self.now;
        let weight = self.ents[tid as usize].weight as f64;
        let l = &mut self.tasks[tid as usize].load;
        l.advance(now);
        l.runnable = true;
        l.weight = weight;
    }

    /// A fair task left its run-queue (sleep, migration, exit).
    pub(super) fn pelt_dequeued(&mut self, tid: u32) {
        let now = self.now;
        let l = &mut self.tasks[tid as usize].load;
        l.advance(now);
        l.runnable = false;
    }

    /// The share of the root run-queue a unit of the task's load stands for now: its group
    /// entity's weight over its group run-queue's load, level by level up the hierarchy
    /// (`task_h_load` = `load_avg` × `cfs_rq->h_load` / `cfs_rq` load, computed when balancing
    /// reads it: `update_cfs_rq_h_load`). Run-queue loads are the instantaneous weights here
    /// (docs/mechanisms.md); an empty one counts as holding just the entity below.
    fn h_factor(&self, tid: u32) -> f64 {
        let t = &self.tasks[tid as usize];
        let mut below = self.ents[tid as usize].weight;
        let mut factor = 1.0;
        let mut g = t.group;
        while g != 0 {
            let rq = &self.rqs[self.rq_index(g, t.cpu)];
            let ge = &self.ents[self.group_entity(g, t.cpu)];
            factor *= ge.weight as f64 / rq.load.max(below).max(1) as f64;
            below = ge.weight;
            g = self.groups[g].parent.unwrap_or(0);
        }
        factor
    }

    /// The task's `load_avg` as the root run-queue sees it now (`task_h_load`).
    pub(super) fn task_load(&self, tid: u32) -> f64 {
        self.tasks[tid as usize].load.at(self.now).0 * self.h_factor(tid)
    }

    /// (`load_avg`, `runnable_avg`) of `cpu`'s root run-queue: every fair task attributed to
    /// it, blocked ones included, exited ones not.
    pub(super) fn cpu_load_avg(&self, cpu: usize) -> (f64, f64) {
        (0..self.tasks.len() as u32)
            .filter(|&t| {
                let t = &self.tasks[t as usize];
                t.cpu == cpu
                    && t.class == Class::Fair
                    && !matches!(t.state, State::NotStarted | State::Exited)
            })
            .map(|t| {
                let (load, runnable) = self.tasks[t as usize].load.at(self.now);
                (load * self.h_factor(t), runnable)
            })
            .fold((0.0, 0.0), |(l, r), (a, b)| (l + a, r + b))
    }

    /// Bring `cpu`'s `util_avg` up to now from its busy time since the last update.
    pub(super) fn update_cpu_util(&mut self, cpu: usize) {
        let now = self.now;
        let busy = self.cpus[cpu].busy;
        let u = &mut self.cpus[cpu].util;
        let dt = now.saturating_sub(u.last);
        if dt == 0 {
            return;
        }
        let ran = busy.saturating_sub(u.busy).min(dt) as f64 / dt as f64;
        let d = decay(dt);
        u.avg = u.avg * d + 1024.0 * ran * (1.0 - d);
        u.last = now;
        u.busy = busy;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::SimConfig;
    use crate::log::VecSink;
    use crate::platform::PlatformSpec;
    use uxsched_model::{MS, SEC};

    /// `task_h_load` is read when balancing reads it. A 512-share group on two CPUs: hog `a`
    /// alone on CPU 0 from the start, hog `b` on CPU 1 from 100 ms (beside a root hog `c`),
    /// and `d`, 0.5 ms every 10 ms on CPU 0 from 200 ms (its wake-ups and sleeps recompute the
    /// group's entity there); all pinned. The group's tasks carry its 512 between them (256
    /// each for the hogs, `d` little); taken at each one's enqueue instead, `a` kept the whole
    /// group's weight it had while it ran alone (512).
    #[test]
    fn a_groups_tasks_carry_the_groups_weight_between_them_wherever_they_run() {
        let w = crate::workload::native::parse(
            r#"
name = "h"
[[group]]
path = "g"
shares = 512
[[task]]
name = "a"
group = "g"
cpus = [0]
events = [{ run = "10s" }]
[[task]]
name = "b"
group = "g"
cpus = [1]
delay = "100ms"
events = [{ run = "10s" }]
[[task]]
name = "c"
cpus = [1]
events = [{ run = "10s" }]
[[task]]
name = "d"
group = "g"
cpus = [0]
delay = "200ms"
events = [{ run = "500us" }, { sleep = "9500us" }]
"#,
            "h.toml",
        )
        .unwrap();
        let mut cfg = SimConfig::new("eevdf", PlatformSpec::uniform(2));
        cfg.duration = 2 * SEC;
        let mut sim = Sim::new(&w, cfg).unwrap();
        sim.run(&mut VecSink::default(), &mut |_| {}).unwrap();
        let load = |t| sim.task_load(t);
        let sum = load(0) + load(1) + load(3);
        assert!((sum - 512.0).abs() < 0.05 * 512.0, "a + b + d = {sum}");
        assert!((load(0) - 256.0).abs() < 0.1 * 256.0, "a = {}", load(0));
        assert!((load(2) - 1024.0).abs() < 0.02 * 1024.0);
    }

    #[test]
    fn a_task_runnable_for_one_half_life_reaches_half_its_weight_and_decays_back_by_half() {
        let mut l = TaskLoad {
            runnable: true,
            weight: 1024.0,
            ..TaskLoad::default()
        };
        let (half, run) = l.at(HALF_LIFE);
        assert!(
            (half - 512.0).abs() < 1e-9 && (run - 512.0).abs() < 1e-9,
            "{half} {run}"
        );
        l.advance(HALF_LIFE);
        l.runnable = false;
        assert!((l.at(2 * HALF_LIFE).0 - 256.0).abs() < 1e-9);
        // Runnable for ever: the weight (the kernel's LOAD_AVG_MAX-normalised sum ≈ 0.98 w).
        let on = TaskLoad {
            runnable: true,
            weight: 3121.0,
            ..TaskLoad::default()
        };
        assert!((on.at(2000 * MS).0 - 3121.0).abs() < 1e-6);
    }
}
