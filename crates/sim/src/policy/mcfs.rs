//! `mcfs`: MCFS, seed 002 §III.A (Fig. 3) — CFS whose vruntime grows `cut_rate` times slower.
//!
//! `update_curr` adds delta_fair / c to the vruntime (a shift for c a power of two, the paper's
//! choice; default c = 16) while the real CPU time (`sum_exec`) is charged in full. Everything
//! else is `cfs` (kernel defaults), so here is exactly which comparison sees the slowed vruntime:
//! - **min_vruntime** and the **leftmost pick**: slowed for every task alike (one system-wide c),
//!   so who is leftmost is unchanged, but all gaps are c times smaller per ns of CPU.
//! - **Tick check**, "current ahead of leftmost by more than its slice": the vruntime gap (slowed)
//!   is compared with the slice in real ns (not slowed) — it takes c times longer to trigger, so
//!   context switches are deferred (the paper's Fig. 3 example). The other tick check, "ran its
//!   whole slice" (`sum_exec`, real time), is unchanged.
//! - **Wake-up preemption**: the slowed gap is compared with `wakeup_granularity` scaled to the
//!   wakee's weight (not slowed): c times harder for equals, but a nice −20 wakee's granularity is
//!   tiny, so it still preempts low-priority work.
//! - **Wake-up placement**: max(own vruntime, min_vruntime − latency/2): the sleeper credit is in
//!   vruntime units, so it is worth c times more CPU time than under `cfs`.
//! - **New-task placement** (START_DEBIT, a virtual slice) is not slowed: a new task starts c times
//!   further behind in CPU-time terms.

use super::cfs::{Cfs, CfsTunables};
use super::vruntime_delta;
use super::{update_min_vruntime, Enqueue, Entity, EntityId, FairPolicy, FairRq};
use uxsched_model::formulas::mcfs_delta_fair;
use uxsched_model::Nanos;

#[derive(Debug, Clone)]
pub struct Mcfs {
    cfs: Cfs,
    /// The system-wide cut-rate c.
    pub cut_rate: u32,
}

impl Mcfs {
    /// The paper's empirically chosen cut-rate (§IV).
    pub const DEFAULT_CUT_RATE: u32 = 16;

    pub fn new(cut_rate: u32) -> Result<Self, String> {
        if cut_rate == 0 {
            return Err("--param mcfs.cut_rate must be at least 1 (1 = plain cfs)".into());
        }
        Ok(Mcfs {
            cfs: Cfs::new(CfsTunables::android()),
            cut_rate,
        })
    }
}

impl FairPolicy for Mcfs {
    fn name(&self) -> &'static str {
        "mcfs"
    }

    fn base_slice(&self) -> Nanos {
        self.cfs.base_slice()
    }

    fn update_curr_on_enqueue(&self) -> bool {
        self.cfs.update_curr_on_enqueue()
    }

    fn place(&self, rq: &FairRq, ents: &mut [Entity], id: EntityId, why: Enqueue) {
        self.cfs.place(rq, ents, id, why);
    }

    fn rebase(&self, from: &FairRq, to: &FairRq, e: &mut Entity) {
        self.cfs.rebase(from, to, e);
    }

    /// Fig. 3 (B): delta goes to the executed time, delta_fair / c to the vruntime.
    fn charge(&self, rq: &mut FairRq, ents: &mut [Entity], id: EntityId, delta: Nanos) -> bool {
        let e = &mut ents[id];
        e.sum_exec += delta;
        e.vruntime += mcfs_delta_fair(vruntime_delta(delta, e.weight), self.cut_rate) as i64;
        update_min_vruntime(rq, ents);
        false
    }

    fn pick(&self, rq: &FairRq, ents: &[Entity]) -> Option<EntityId> {
        self.cfs.pick(rq, ents)
    }

    fn tick_preempt(&self, rq: &FairRq, ents: &[Entity], curr: EntityId) -> bool {
        self.cfs.tick_preempt(rq, ents, curr)
    }

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
