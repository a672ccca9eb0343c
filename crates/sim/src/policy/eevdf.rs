//! `eevdf`: the fair class of Linux ≥ 6.6 (Earliest Eligible Virtual Deadline First), with the
//! 6.12–6.18 refinements we can observe on the development machine's 6.18 kernel.
//!
//! - Virtual time V = Σ wᵢvᵢ / Σ wᵢ over the queue (`avg_vruntime`); an entity is *eligible* when
//!   vᵢ ≤ V (lag = V − vᵢ ≥ 0, `entity_eligible`).
//! - Each entity requests a slice: `base_slice` = 0.75 ms × (1 + log2 min(ncpus, 8))
//!   (`sysctl_sched_base_slice`, scaled by `SCHED_TUNABLESCALING_LOG`) or its custom slice
//!   (`sched_attr.sched_runtime`, clamped 0.1–100 ms, 6.12); deadline = v + slice × ω0/w.
//! - The eligible entity with the earliest deadline runs (`pick_eevdf`). RUN_TO_PARITY keeps the
//!   current entity until its protection ends: min(deadline, v + the smallest slice on the
//!   queue), `set_protect_slice` of 6.17+.
//! - When the current entity reaches its deadline a new one is set and the CPU is rescheduled
//!   (`update_deadline`) — noticed at the next tick, as the kernel does without HRTICK.
//! - Lag is kept across sleep and migration: saved at dequeue, clamped to ±max(2 × slice, tick)
//!   in virtual time, re-applied at placement inflated by (W + w)/W so that V does not move
//!   (`update_entity_lag`, `place_entity` with PLACE_LAG); new tasks get half a virtual slice
//!   (PLACE_DEADLINE_INITIAL).
//! - A waking entity preempts if `pick_eevdf` would choose it; with PREEMPT_SHORT a wakee with a
//!   shorter slice is picked without the current's protection, which is cancelled if it preempts
//!   and shrunk to the smallest queued slice if not (`check_preempt_wakeup_fair`,
//!   `update_protect_slice`, 6.17–6.18).
//! - Once the current entity's protection is over, every accounting asks for a pick
//!   (`update_curr`: `resched || !protect_slice(curr)`, 6.17+).
//! - PLACE_REL_DEADLINE (6.13+): an entity dequeued without sleeping (migration, cgroup move)
//!   keeps its deadline relative to its vruntime and gets it back at placement.
//! - DELAY_DEQUEUE and DELAY_ZERO (6.12+, `dequeue_entity`, `requeue_delayed_entity`,
//!   `finish_delayed_dequeue_entity`): the kernel keeps a sleeper that is not eligible queued
//!   until it is picked, and then dequeues it with its lag clipped to 0; woken before that, it
//!   keeps its place. We dequeue at once but remember the queue ([`Entity::delayed_on`]): woken
//!   on that queue, it keeps its vruntime while V has not reached it, and is placed with zero
//!   lag once V has (it would have been eligible, hence picked and dequeued, or re-placed by
//!   `requeue_delayed_entity`). Woken while still delayed it stays on its CPU (`ttwu_runnable`,
//!   [`FairPolicy::wakes_where_queued`]). The sleeper's own weight in V meanwhile is not
//!   modelled, nor is its wait for the earliest deadline — see docs/mechanisms.md.
//! - `reweight_entity` (6.14–6.18): a queued entity's lag is clamped, rescaled and re-placed
//!   with `place_entity`, against a V that still counts it when it is the current one.

use super::{
    rq_members, update_min_vruntime_members, vruntime_delta, Enqueue, Entity, EntityId, FairPolicy,
    FairRq,
};
use uxsched_model::{Nanos, MS, US};

#[derive(Debug, Clone, Copy)]
pub struct EevdfTunables {
    /// `sysctl_sched_base_slice`.
    pub base_slice: Nanos,
    /// Scheduler tick, for the lag clamp.
    pub tick: Nanos,
    pub run_to_parity: bool,
    pub preempt_short: bool,
    pub place_lag: bool,
    pub wakeup_preempt: bool,
    /// DELAY_DEQUEUE with DELAY_ZERO (both on since 6.12).
    pub delay_dequeue: bool,
    /// PLACE_REL_DEADLINE (on since 6.13).
    pub place_rel_deadline: bool,
}

impl EevdfTunables {
    /// The kernel defaults for `ncpus` CPUs at HZ = 250.
    pub fn for_cpus(ncpus: usize) -> Self {
        let factor = 1 + (ncpus.clamp(1, 8) as u64).ilog2() as u64;
        EevdfTunables {
            base_slice: 750 * US * factor,
            tick: 4 * MS,
            run_to_parity: true,
            preempt_short: true,
            place_lag: true,
            wakeup_preempt: true,
            delay_dequeue: true,
            place_rel_deadline: true,
        }
    }
}

/// Queues up to this long are scanned with the exact eligibility product per entity, longer ones
/// against one floor-rounded V ([`eligible_max`]); the results are the same.
const SHORT_QUEUE: usize = 4;

/// Custom slices are clamped to this range (`sched_setattr`, 6.12).
pub const CUSTOM_SLICE_RANGE: (Nanos, Nanos) = (100 * US, 100 * MS);

#[derive(Debug, Clone)]
pub struct Eevdf {
    pub t: EevdfTunables,
}

impl Eevdf {
    pub fn new(t: EevdfTunables) -> Self {
        Eevdf { t }
    }
}

/// Σ wᵢ(vᵢ − min_vruntime) and Σ wᵢ over the queue, including the current entity while it is
/// queued: the run-queue's kept sums plus the current one (`avg_vruntime`, 6.6–6.18), O(1).
fn avg_parts(rq: &FairRq, ents: &[Entity]) -> (i128, i128) {
    let (mut sum, mut load) = (rq.avg_vruntime, rq.avg_load);
    if let Some(c) = rq.curr.filter(|&c| ents[c].on_rq) {
        let w = ents[c].weight as i128;
        sum += w * (ents[c].vruntime - rq.min_vruntime) as i128;
        load += w;
    }
    (sum, load)
}

/// V, the load-weighted average vruntime (`avg_vruntime`); min_vruntime on an empty queue.
pub fn avg_vruntime(rq: &FairRq, ents: &[Entity]) -> i64 {
    let (sum, load) = avg_parts(rq, ents);
    if load == 0 {
        return rq.min_vruntime;
    }
    // Round towards −∞ like the kernel's div_s64 with its "sign flip" fix-up, so V ≤ exact
    // (in 64 bits when the sums fit, as they do but for extreme weights and spreads).
    let q = match (i64::try_from(sum), i64::try_from(load)) {
        (Ok(s), Ok(l)) => s.div_euclid(l),
        _ => sum.div_euclid(load) as i64,
    };
    rq.min_vruntime + q
}

/// vᵢ ≤ V, evaluated exactly as Σ wⱼ(vⱼ − vᵢ) ≥ 0 (`vruntime_eligible`).
pub fn eligible(rq: &FairRq, ents: &[Entity], id: EntityId) -> bool {
    eligible_with(avg_parts(rq, ents), rq, &ents[id])
}

/// [`eligible`] with the queue's sums computed once, for loops over the queue. The load fits in
/// 64 bits but for absurd weights, so the product is one 64×64→128-bit multiply.
#[inline]
fn eligible_with((sum, load): (i128, i128), rq: &FairRq, e: &Entity) -> bool {
    let d = (e.vruntime - rq.min_vruntime) as i128;
    match i64::try_from(load) {
        Ok(l) => sum >= d * l as i128,
        Err(_) => sum >= d * load,
    }
}

/// The largest vruntime that is eligible: min_vruntime + ⌊Σ wᵢ(vᵢ − min_vruntime) / Σ wᵢ⌋, so
/// that `v ≤ eligible_max` ⇔ `Σ wᵢ(vᵢ − min_vruntime) ≥ (v − min_vruntime) Σ wᵢ` (the exact test
/// of [`eligible`]); every vruntime is eligible on an empty sum.
fn eligible_max((sum, load): (i128, i128), rq: &FairRq) -> i64 {
    if load <= 0 {
        return i64::MAX;
    }
    let q = match (i64::try_from(sum), i64::try_from(load)) {
        (Ok(s), Ok(l)) => s.div_euclid(l) as i128,
        _ => sum.div_euclid(load),
    };
    (rq.min_vruntime as i128 + q).clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// `x × num / den`, truncated towards zero (`place_entity`'s inflation of the lag by
/// (W + w) / W, and `reweight_entity`'s rescaling by old / new weight), in 64 bits unless the
/// product overflows.
fn scale_lag(lag: i64, num: u64, den: u64) -> i64 {
    let den = den.max(1);
    match (i64::try_from(num).ok(), i64::try_from(den)) {
        (Some(n), Ok(d)) => match lag.checked_mul(n) {
            Some(p) => p / d,
            None => (lag as i128 * n as i128 / d as i128) as i64,
        },
        _ => (lag as i128 * num as i128 / den as i128) as i64,
    }
}

fn vslice(e: &Entity, slice: Nanos) -> i64 {
    vruntime_delta(slice, e.weight) as i64
}

impl Eevdf {
    /// `set_protect_slice`: protect the current entity until min(deadline, v + smallest slice).
    fn protect(&self, rq: &FairRq, ents: &mut [Entity], id: EntityId) {
        let min_slice = self.min_slice(rq, ents, id);
        let e = &ents[id];
        let vprot = if min_slice < e.slice {
            e.deadline.min(e.vruntime + vslice(e, min_slice))
        } else {
            e.deadline
        };
        ents[id].vprot = vprot;
    }

    /// `cfs_rq_min_slice` over the queue and `id`. Without a custom slice on the queue every
    /// queued slice is the base slice (set at each placement and new request), so no scan.
    fn min_slice(&self, rq: &FairRq, ents: &[Entity], id: EntityId) -> Nanos {
        let scan = || {
            rq_members(rq, ents)
                .chain(std::iter::once(id))
                .map(|e| ents[e].slice)
                .min()
                .unwrap_or(0)
        };
        if rq.nr_custom_slice > 0 {
            return scan();
        }
        let queued = rq.queued.iter().any(|&e| e != id);
        let fast = if queued {
            ents[id].slice.min(self.t.base_slice)
        } else {
            ents[id].slice
        };
        debug_assert_eq!(fast, scan(), "smallest slice without custom slices");
        fast
    }

    /// `update_protect_slice` (6.17+): a wakee that did not preempt shortens the current
    /// entity's protection to v + the smallest slice now queued, so that its lag stays within
    /// its slice (+ a tick).
    fn shrink_protection(&self, rq: &FairRq, ents: &mut [Entity], id: EntityId) {
        let min_slice = self.min_slice(rq, ents, id);
        let e = &ents[id];
        ents[id].vprot = e.vprot.min(e.vruntime + vslice(e, min_slice));
    }

    fn pick_eevdf(&self, rq: &FairRq, ents: &[Entity]) -> Option<EntityId> {
        self.pick_protected(rq, ents, true)
    }

    /// `__pick_eevdf(cfs_rq, protect)`: with `protect` false the current entity's slice
    /// protection is ignored (PREEMPT_SHORT's look at the queue, 6.12–6.18).
    fn pick_protected(&self, rq: &FairRq, ents: &[Entity], protect: bool) -> Option<EntityId> {
        let mut curr = rq.curr.filter(|&c| ents[c].on_rq);
        if rq.nr_running == 1 {
            return curr.or_else(|| rq.queued.first().copied());
        }
        // v ≤ V with V rounded down is exactly Σ wⱼ(vⱼ − v) ≥ 0 for integer v: one division
        // for the whole scan instead of a 128-bit product per entity.
        let parts = avg_parts(rq, ents);
        if let Some(c) = curr {
            if !eligible_with(parts, rq, &ents[c]) {
                curr = None;
            }
        }
        if let Some(c) = curr {
            if protect && self.t.run_to_parity && ents[c].vprot > ents[c].vruntime {
                return Some(c);
            }
        }
        // On a short queue a product per entity is cheaper than one division (a 64-bit idiv
        // took ≈ 10 % of this function's time); on a long one, the division pays.
        let mut best: Option<(i64, EntityId)> = None;
        if rq.queued.len() <= SHORT_QUEUE {
            for &e in &rq.queued {
                let x = &ents[e];
                if best.is_none_or(|b| (x.deadline, e) < b) && eligible_with(parts, rq, x) {
                    best = Some((x.deadline, e));
                }
            }
        } else {
            let v_max = eligible_max(parts, rq);
            for &e in &rq.queued {
                let x = &ents[e];
                if x.vruntime <= v_max && best.is_none_or(|b| (x.deadline, e) < b) {
                    best = Some((x.deadline, e));
                }
            }
        }
        let best = best.map(|(_, e)| e);
        // The current entity keeps the CPU only with a strictly earlier deadline: pick_eevdf's
        // `if (!best || (curr && entity_before(curr, best))) best = curr;` with
        // `entity_before` = `(s64)(a->deadline - b->deadline) < 0` (kernel/sched/fair.c,
        // 6.6–6.18). A tie is systematic, not rare: a lone hog's deadline, renewed by the
        // `update_curr` of a wake-up's enqueue (`update_deadline`: v + slice), equals the
        // deadline of a wakee placed at V = that same v with the same slice — the wakee wins.
        match (curr, best) {
            (Some(c), Some(b)) if ents[c].deadline < ents[b].deadline => Some(c),
            (Some(c), None) => Some(c),
            (_, Some(b)) => Some(b),
            // Nothing eligible can only happen through rounding; fall back to the earliest vruntime.
            (None, None) => rq
                .queued
                .iter()
                .copied()
                .min_by_key(|&e| (ents[e].vruntime, e)),
        }
    }
}

impl FairPolicy for Eevdf {
    fn name(&self) -> &'static str {
        "eevdf"
    }

    fn base_slice(&self) -> Nanos {
        self.t.base_slice
    }

    fn update_curr_on_enqueue(&self) -> bool {
        true
    }

    fn place(&self, rq: &FairRq, ents: &mut [Entity], id: EntityId, why: Enqueue) {
        if !ents[id].custom_slice {
            ents[id].slice = self.t.base_slice;
        }
        let v = avg_vruntime(rq, ents);
        if let Some(on) = ents[id].delayed_on.take() {
            if why == Enqueue::Wakeup && on == ents[id].rq {
                if v < ents[id].vruntime {
                    return; // still queued in the kernel: it keeps vruntime and deadline
                }
                ents[id].vlag = 0; // DELAY_ZERO
            }
        }
        let mut lag = 0i64;
        if self.t.place_lag && rq.nr_running > 0 && why != Enqueue::Initial {
            lag = scale_lag(ents[id].vlag, rq.load + ents[id].weight, rq.load);
        }
        let e = &mut ents[id];
        e.vruntime = v - lag;
        if std::mem::take(&mut e.rel_deadline) {
            // PLACE_REL_DEADLINE: `se->deadline += se->vruntime` (place_entity, 6.13–6.18).
            e.deadline += e.vruntime;
            return;
        }
        let mut vs = vslice(e, e.slice);
        if why == Enqueue::Initial {
            vs /= 2;
        }
        e.deadline = e.vruntime + vs;
    }

    fn on_dequeue(&self, rq: &FairRq, ents: &mut [Entity], id: EntityId, sleep: bool) {
        // `update_entity_lag`, computed while the entity is still counted in V.
        let v = avg_vruntime(rq, ents);
        let e = &ents[id];
        let limit = vruntime_delta((2 * e.slice).max(self.t.tick), e.weight) as i64;
        let lag = (v - e.vruntime).clamp(-limit, limit);
        // DELAY_DEQUEUE: only a sleeper that is not eligible is delayed.
        ents[id].delayed_on = (self.t.delay_dequeue && sleep && lag < 0).then_some(e.rq);
        ents[id].vlag = lag;
        // PLACE_REL_DEADLINE (`dequeue_entity`, 6.13–6.18): an entity that leaves without
        // sleeping — migrated, moved to another cgroup — keeps the rest of its request
        // (`se->deadline -= se->vruntime; se->rel_deadline = 1`) instead of a new full slice at
        // its next placement.
        if self.t.place_rel_deadline && !sleep {
            let e = &mut ents[id];
            e.deadline -= e.vruntime;
            e.rel_deadline = true;
        }
    }

    fn charge(&self, rq: &mut FairRq, ents: &mut [Entity], id: EntityId, delta: Nanos) -> bool {
        let e = &mut ents[id];
        e.sum_exec += delta;
        e.vruntime += vruntime_delta(delta, e.weight) as i64;
        let mut resched = false;
        if e.vruntime >= e.deadline {
            // `update_deadline`: a new request, and the CPU is offered to others.
            if !e.custom_slice {
                e.slice = self.t.base_slice;
            }
            e.deadline = e.vruntime + vslice(e, e.slice);
            e.vprot = e.vruntime; // the new slice is not protected until picked again
            resched = rq.nr_running > 1;
        }
        update_min_vruntime_members(rq, ents);
        // `update_curr`, 6.17+: `if (resched || !protect_slice(curr)) resched_curr_lazy(rq);`
        // ("sched/fair: Always trigger resched at the end of a protected period", which replaced
        // 6.12's `did_preempt_short`, a resched only for an *ineligible* entity whose protection
        // PREEMPT_SHORT had cancelled). Once the protection is over, every accounting — each
        // tick, each wake-up's enqueue — asks for a pick, so a queued entity that has become
        // eligible with an earlier deadline gets the CPU at the next tick instead of waiting for
        // the current entity's deadline. Re-picked, the current entity stays unprotected
        // (`set_next_entity`, hence `set_protect_slice`, runs only for a different task).
        if !resched && rq.nr_running > 1 && ents[id].vprot <= ents[id].vruntime {
            resched = true;
        }
        resched
    }

    fn pick(&self, rq: &FairRq, ents: &[Entity]) -> Option<EntityId> {
        self.pick_eevdf(rq, ents)
    }

    /// The kernel keeps a delayed sleeper queued until it is picked (eligible); [`Eevdf::place`]
    /// takes V having reached its vruntime as that moment. Until then it is `on_rq`, and
    /// `try_to_wake_up` wakes it with `ttwu_runnable` (`if (p->se.sched_delayed)
    /// enqueue_task(rq, p, ENQUEUE_NOCLOCK | ENQUEUE_DELAYED)`, kernel/sched/core.c 6.12–6.18)
    /// on its own CPU, never through `select_task_rq`.
    fn wakes_where_queued(&self, rq: &FairRq, ents: &[Entity], id: EntityId) -> bool {
        let e = &ents[id];
        self.t.delay_dequeue && e.delayed_on == Some(e.rq) && avg_vruntime(rq, ents) < e.vruntime
    }

    fn on_pick(&self, rq: &FairRq, ents: &mut [Entity], id: EntityId) {
        ents[id].prev_sum_exec = ents[id].sum_exec;
        self.protect(rq, ents, id);
    }

    fn tick_preempt(&self, _rq: &FairRq, _ents: &[Entity], _curr: EntityId) -> bool {
        // EEVDF's entity_tick only updates the current entity; `charge` asks for the resched.
        false
    }

    fn wakeup_preempt(
        &self,
        rq: &mut FairRq,
        ents: &mut [Entity],
        curr: EntityId,
        woken: EntityId,
    ) -> bool {
        let (c, w) = (&ents[curr], &ents[woken]);
        if c.is_idle && !w.is_idle {
            return true;
        }
        if c.is_idle != w.is_idle || !self.t.wakeup_preempt || w.no_wakeup_preempt {
            return false;
        }
        // `check_preempt_wakeup_fair`, 6.17–6.18: a wakee with a shorter slice looks at the
        // queue without the current entity's protection (`__pick_eevdf(cfs_rq,
        // !do_preempt_short)`); if it is then the pick it preempts and the protection is
        // cancelled (`cancel_protect_slice`), else, under RUN_TO_PARITY, the protection shrinks
        // to the smallest queued slice (`update_protect_slice`). The protection is left alone
        // when another entity, not the wakee, would be picked (6.12 cancelled it there too).
        let short = self.t.preempt_short && w.slice < c.slice;
        if self.pick_protected(rq, ents, !short) == Some(woken) {
            if short {
                ents[curr].vprot = ents[curr].vruntime;
            }
            return true;
        }
        if short && self.t.run_to_parity {
            self.shrink_protection(rq, ents, curr);
        }
        false
    }

    fn yield_curr(&self, _rq: &mut FairRq, ents: &mut [Entity], curr: EntityId) {
        // `yield_task_fair`: push the deadline one slice out so another entity is picked.
        let e = &mut ents[curr];
        e.deadline += vslice(e, e.slice);
        e.vprot = e.vruntime;
    }

    /// `reweight_entity` of 6.14–6.18 (commit 6d71a9c61604, "sched/fair: Fix EEVDF entity
    /// placement bug causing scheduling lag", and "sched/fair: Adhere to place_entity()
    /// constraints"): a queued entity's lag is taken with `update_entity_lag` — *clamped* to
    /// ±max(2 × slice, tick) — and its deadline made relative; both are scaled by old / new
    /// weight; then `place_entity(cfs_rq, se, 0)` puts it back with the lag inflated by
    /// (W + w) / W against the queue without it (`nr_queued--` first: no lag when it is alone).
    /// For the *current* entity `avg_vruntime` and place_entity's load still count it, already
    /// at its new weight (`curr->on_rq`): the kernel's own error, reported after 6.18 with a
    /// revert posted ("[PATCH v2 6/7] sched/fair: Revert 6d71a9c61604" on LKML:
    /// "avg_vruntime() always includes cfs_rq->curr ... place_entity() doesn't work right"); a
    /// current entity with positive lag moves back at each reweight. 6.18 has it, so we do.
    fn reweight(&self, rq: &FairRq, ents: &mut [Entity], id: EntityId, weight: u64) {
        let (old, new) = (ents[id].weight.max(1), weight.max(1));
        if !ents[id].on_rq {
            // Asleep: only `se->vlag = div_s64(se->vlag * se->load.weight, weight)`.
            ents[id].vlag = scale_lag(ents[id].vlag, old, new);
            ents[id].weight = weight;
            return;
        }
        let is_curr = rq.curr == Some(id);
        // update_entity_lag, with the entity still counted in V at its old weight.
        let (sum, load) = avg_parts(rq, ents);
        let e = &ents[id];
        let v = if load == 0 {
            rq.min_vruntime
        } else {
            rq.min_vruntime + sum.div_euclid(load) as i64
        };
        let limit = vruntime_delta((2 * e.slice).max(self.t.tick), old) as i64;
        let vlag = scale_lag((v - e.vruntime).clamp(-limit, limit), old, new);
        let rel_deadline = scale_lag(e.deadline - e.vruntime, old, new);
        // The queue place_entity sees: the others, plus this entity at its new weight and old
        // vruntime if it is the current one.
        let d = (e.vruntime - rq.min_vruntime) as i128;
        let (mut sum, mut load) = (sum - old as i128 * d, load - old as i128);
        if is_curr {
            sum += new as i128 * d;
            load += new as i128;
        }
        let v_place = if load <= 0 {
            rq.min_vruntime
        } else {
            rq.min_vruntime + sum.div_euclid(load) as i64
        };
        let others = rq.nr_running.saturating_sub(1);
        let mut lag = 0;
        if self.t.place_lag && others > 0 && vlag != 0 && load > 0 {
            lag = scale_lag(vlag, load as u64 + new, load as u64);
        }
        let e = &mut ents[id];
        e.weight = weight;
        e.vlag = vlag;
        e.vruntime = v_place - lag;
        e.deadline = e.vruntime + rel_deadline;
    }
}
