//! `vtcfs`: VT-CFS, the virtual-time CFS of seed 000 §V (Fig. 5, eq. 7).
//!
//! CFS's data structures and virtual runtime (eq. 1) are kept; what changes is *when* a task is
//! preempted and *where* a woken task is placed:
//! - **Preemption tick** (Fig. 5): at every scheduler tick, once the current task has run at least
//!   the preemption tick T since it was picked (T is a multiple of the scheduler tick, 3 ms or
//!   5 ms in the paper), it is preempted if its vruntime is no longer the smallest on the
//!   run-queue. There is no time slice (eq. 2 is not used for preemption) and no wake-up
//!   preemption: the flowchart decides only at ticks.
//! - **Wake-up placement** (eq. 7): a woken task gets vruntime = min_vruntime + ω0/ω−20 × T_tick,
//!   T_tick the *scheduler* tick, so it sits second from the left and runs after at most one
//!   preemption tick of the current task. The paper sets it unconditionally (a task that slept
//!   keeps no vruntime of its own), and so do we.
//! - New tasks (START_DEBIT) and migrations are placed as in `cfs`.

use super::cfs::{Cfs, CfsTunables};
use super::{Enqueue, Entity, EntityId, FairPolicy, FairRq};
use uxsched_model::formulas::vtcfs_wakeup_vruntime;
use uxsched_model::Nanos;

/// VT-CFS over 2.6.32 CFS.
#[derive(Debug, Clone)]
pub struct VtCfs {
    cfs: Cfs,
    /// The preemption tick T (a multiple of `sched_tick`).
    pub preempt_tick: Nanos,
    /// The scheduler tick (1/HZ), eq. 7's T.
    pub sched_tick: Nanos,
}

impl VtCfs {
    /// The paper's default preemption tick (§VI.B.2).
    pub const DEFAULT_TICK_MS: Nanos = 3;

    /// `preempt_tick` must be a positive multiple of `sched_tick`; the message says what to do.
    pub fn new(preempt_tick: Nanos, sched_tick: Nanos) -> Result<Self, String> {
        if preempt_tick == 0 || sched_tick == 0 || preempt_tick % sched_tick != 0 {
            return Err(format!(
                "vtcfs.tick={} ns is not a positive multiple of the scheduler tick ({} ns): \
                 use a multiple, or change --hz (e.g. --hz 1000 for 3ms)",
                preempt_tick, sched_tick
            ));
        }
        // CFS without wake-up preemption: VT-CFS preempts only at ticks.
        let t = CfsTunables {
            wakeup_preempt: false,
            ..CfsTunables::android()
        };
        Ok(VtCfs {
            cfs: Cfs::new(t),
            preempt_tick,
            sched_tick,
        })
    }

    /// The smallest multiple of the scheduler tick that is at least 3 ms (the paper's T).
    pub fn default_tick(sched_tick: Nanos) -> Nanos {
        let want = Self::DEFAULT_TICK_MS * uxsched_model::MS;
        want.div_ceil(sched_tick).max(1) * sched_tick
    }
}

impl FairPolicy for VtCfs {
    fn name(&self) -> &'static str {
        "vtcfs"
    }

    fn base_slice(&self) -> Nanos {
        self.preempt_tick
    }

    fn update_curr_on_enqueue(&self) -> bool {
        self.cfs.update_curr_on_enqueue()
    }

    fn place(&self, rq: &FairRq, ents: &mut [Entity], id: EntityId, why: Enqueue) {
        match why {
            Enqueue::Wakeup => {
                // Eq. (7) with rq.min_vruntime (the kernel's floor of min over S); applied as an
                // offset because placement may take vruntime below zero.
                let offset = vtcfs_wakeup_vruntime(0, self.sched_tick) as i64;
                ents[id].vruntime = rq.min_vruntime + offset;
            }
            _ => self.cfs.place(rq, ents, id, why),
        }
    }

    fn rebase(&self, from: &FairRq, to: &FairRq, e: &mut Entity) {
        self.cfs.rebase(from, to, e);
    }

    fn charge(&self, rq: &mut FairRq, ents: &mut [Entity], id: EntityId, delta: Nanos) -> bool {
        self.cfs.charge(rq, ents, id, delta)
    }

    fn pick(&self, rq: &FairRq, ents: &[Entity]) -> Option<EntityId> {
        self.cfs.pick(rq, ents)
    }

    /// Fig. 5: after T of running, preempt unless the current task still has the smallest
    /// vruntime.
    fn tick_preempt(&self, rq: &FairRq, ents: &[Entity], curr: EntityId) -> bool {
        let ran = ents[curr].sum_exec - ents[curr].prev_sum_exec;
        if ran < self.preempt_tick {
            return false;
        }
        match Cfs::leftmost(rq, ents) {
            Some(l) => ents[curr].vruntime > ents[l].vruntime,
            None => false,
        }
    }

    /// Only CFS's SCHED_IDLE rule remains (`wakeup_preempt` is off in the inner CFS).
    fn wakeup_preempt(
        &self,
        rq: &mut FairRq,
        ents: &mut [Entity],
        curr: EntityId,
        woken: EntityId,
    ) -> bool {
        self.cfs.wakeup_preempt(rq, ents, curr, woken)
    }
}
