//! `cfs`: Linux's Completely Fair Scheduler as in 2.6.32–2.6.35, the baseline of seeds 000–004.
//!
//! - Virtual runtime advances by ω0/W × Δexec (seed 000 eq. 1; `update_curr`).
//! - A task's slice is W/ΣW × P with P = `latency` while n ≤ latency/min_granularity, else
//!   `min_granularity` × n (eq. 2–3; `sched_slice`, `__sched_period`). Android sets 5 ms / 1 ms.
//! - The leftmost (smallest vruntime) entity runs next (`__pick_next_entity`; the next/last
//!   buddies of 2.6.32 are not modelled).
//! - At each tick the current task is preempted once it has run its slice, or — after
//!   `min_granularity` — when it is ahead of the leftmost by more than a slice (`check_preempt_tick`).
//! - A waking task is placed at max(its vruntime, min_vruntime − latency/2): the sleeper credit of
//!   FAIR_SLEEPERS halved by GENTLE_FAIR_SLEEPERS (`place_entity`; seed 000 eq. 4 is this rule
//!   without credit). A new task starts one virtual slice after min_vruntime (START_DEBIT).
//! - A woken task preempts when current's vruntime exceeds its own by more than
//!   `wakeup_granularity` scaled to the woken task's weight (`wakeup_preempt_entity`); SCHED_BATCH
//!   and SCHED_IDLE wakees never preempt, a SCHED_IDLE current always yields to a normal wakee.

use super::vruntime_delta;
use super::{update_min_vruntime, Enqueue, Entity, EntityId, FairPolicy, FairRq};
use uxsched_model::formulas::{cfs_period, cfs_slice};
use uxsched_model::{Nanos, MS};

/// The sysctls and feature bits that shape 2.6.3x CFS.
#[derive(Debug, Clone, Copy)]
pub struct CfsTunables {
    /// `sysctl_sched_latency`: the period P while few tasks run.
    pub latency: Nanos,
    /// `sysctl_sched_min_granularity`: the per-task share of P once many run.
    pub min_granularity: Nanos,
    /// `sysctl_sched_wakeup_granularity`.
    pub wakeup_granularity: Nanos,
    /// FAIR_SLEEPERS: credit woken tasks up to `latency` (halved if `gentle_sleepers`).
    pub sleeper_credit: bool,
    /// GENTLE_FAIR_SLEEPERS.
    pub gentle_sleepers: bool,
    /// WAKEUP_PREEMPT: woken tasks may preempt the current one.
    pub wakeup_preempt: bool,
    /// START_DEBIT: new tasks start one virtual slice late.
    pub start_debit: bool,
    /// Charge the running task before placing an enqueued one, as 2.6.32's `enqueue_entity`
    /// and `task_new_fair` call `update_curr` before `place_entity` (see
    /// [`FairPolicy::update_curr_on_enqueue`] and docs/mechanisms.md).
    pub update_curr_first: bool,
}

impl CfsTunables {
    /// Android's settings as seed 000 gives them (P = 5 ms, 1 ms per task beyond 5) with the
    /// kernel's default features.
    pub fn android() -> Self {
        CfsTunables {
            latency: 5 * MS,
            min_granularity: MS,
            wakeup_granularity: MS,
            sleeper_credit: true,
            gentle_sleepers: true,
            wakeup_preempt: true,
            start_debit: true,
            update_curr_first: true,
        }
    }

    /// The model seed 000 reasons with in §III: no sleeper credit (eq. 4 places a woken task
    /// just at min_vruntime) and preemption only when a slice runs out.
    pub fn paper() -> Self {
        CfsTunables {
            sleeper_credit: false,
            wakeup_preempt: false,
            ..Self::android()
        }
    }
}

/// 2.6.3x CFS.
#[derive(Debug, Clone)]
pub struct Cfs {
    pub t: CfsTunables,
}

impl Cfs {
    pub fn new(t: CfsTunables) -> Self {
        Cfs { t }
    }

    /// Slice of `id` on `rq` (eq. 2 with P from eq. 3); counts `id` if it is not queued yet.
    pub fn slice(&self, rq: &FairRq, ents: &[Entity], id: EntityId) -> Nanos {
        let e = &ents[id];
        let (n, load) = if e.on_rq {
            (rq.nr_running, rq.load)
        } else {
            (rq.nr_running + 1, rq.load + e.weight)
        };
        cfs_slice(
            e.weight,
            load,
            cfs_period(n, self.t.latency, self.t.min_granularity),
        )
    }

    /// The queued entity with the smallest vruntime (the rb-tree's leftmost node).
    pub fn leftmost(rq: &FairRq, ents: &[Entity]) -> Option<EntityId> {
        rq.queued
            .iter()
            .copied()
            .min_by_key(|&e| (ents[e].vruntime, e))
    }
}

impl FairPolicy for Cfs {
    fn name(&self) -> &'static str {
        "cfs"
    }

    fn base_slice(&self) -> Nanos {
        self.t.min_granularity
    }

    fn update_curr_on_enqueue(&self) -> bool {
        self.t.update_curr_first
    }

    fn place(&self, rq: &FairRq, ents: &mut [Entity], id: EntityId, why: Enqueue) {
        let mut v = rq.min_vruntime;
        match why {
            Enqueue::Initial => {
                if self.t.start_debit {
                    v += vruntime_delta(self.slice(rq, ents, id), ents[id].weight) as i64;
                }
                ents[id].vruntime = v;
            }
            Enqueue::Wakeup => {
                if self.t.sleeper_credit {
                    let credit = if self.t.gentle_sleepers {
                        self.t.latency / 2
                    } else {
                        self.t.latency
                    };
                    v -= credit as i64;
                }
                ents[id].vruntime = ents[id].vruntime.max(v);
            }
            // `rebase` already moved vruntime onto this queue's min_vruntime.
            Enqueue::Migrated => {}
        }
    }

    fn rebase(&self, from: &FairRq, to: &FairRq, e: &mut Entity) {
        e.vruntime = e.vruntime - from.min_vruntime + to.min_vruntime;
    }

    fn charge(&self, rq: &mut FairRq, ents: &mut [Entity], id: EntityId, delta: Nanos) -> bool {
        let e = &mut ents[id];
        e.sum_exec += delta;
        e.vruntime += vruntime_delta(delta, e.weight) as i64;
        update_min_vruntime(rq, ents);
        false
    }

    fn pick(&self, rq: &FairRq, ents: &[Entity]) -> Option<EntityId> {
        let left = Self::leftmost(rq, ents);
        match (rq.curr, left) {
            (Some(c), Some(l)) if ents[c].on_rq && ents[c].vruntime <= ents[l].vruntime => Some(c),
            (Some(c), None) if ents[c].on_rq => Some(c),
            (_, l) => l,
        }
    }

    fn tick_preempt(&self, rq: &FairRq, ents: &[Entity], curr: EntityId) -> bool {
        if rq.nr_running < 2 {
            return false;
        }
        let ideal = self.slice(rq, ents, curr);
        let ran = ents[curr].sum_exec - ents[curr].prev_sum_exec;
        if ran > ideal {
            return true;
        }
        if !self.t.wakeup_preempt || ran < self.t.min_granularity {
            return false;
        }
        match Self::leftmost(rq, ents) {
            Some(l) => ents[curr].vruntime - ents[l].vruntime > ideal as i64,
            None => false,
        }
    }

    fn wakeup_preempt(
        &self,
        _rq: &mut FairRq,
        ents: &mut [Entity],
        curr: EntityId,
        woken: EntityId,
    ) -> bool {
        let (c, w) = (&ents[curr], &ents[woken]);
        if c.is_idle && !w.is_idle {
            return true;
        }
        if !self.t.wakeup_preempt || w.no_wakeup_preempt {
            return false;
        }
        let gran = vruntime_delta(self.t.wakeup_granularity, w.weight) as i64;
        c.vruntime - w.vruntime > gran
    }
    // yield_curr: the default no-op is 2.6.32's `yield_task_fair` with sysctl_sched_compat_yield = 0 —
    // the engine re-picks, and the leftmost (possibly the yielder itself) runs.
}
