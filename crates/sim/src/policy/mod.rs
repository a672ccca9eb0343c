//! Fair-class policies behind one small trait, one file each.
//!
//! The engine owns time, run-queues and the cgroup hierarchy; a policy only decides, for one
//! run-queue ([`FairRq`]) at a time: where an entity is placed when it is enqueued, how its
//! virtual time advances when charged, which entity runs next, and whether the current one
//! should be preempted on a tick or a wake-up. Hierarchical (cgroup) scheduling calls the same
//! hooks at every level, like the kernel's `for_each_sched_entity`.

pub mod cfs;
pub mod eevdf;
pub mod mcfs;
pub mod params;
pub mod vtcfs;

use uxsched_model::Nanos;

/// `uxsched_model::formulas::vruntime_delta` with its nice-0 case inline: most charges are of
/// nice-0 entities, and the call across crates (not inlined without LTO) cost more than the
/// formula. The result is the formula's.
#[inline]
pub fn vruntime_delta(delta: Nanos, weight: u64) -> Nanos {
    if weight == uxsched_model::weights::NICE_0_LOAD {
        delta
    } else {
        uxsched_model::formulas::vruntime_delta(delta, weight)
    }
}

/// Index of an entity in the engine's entity arena (tasks first, then group entities).
pub type EntityId = usize;

/// A schedulable entity of the fair class: a task or a cgroup's per-CPU representative.
#[derive(Debug, Clone, Default)]
pub struct Entity {
    /// Load weight (nice table, SCHED_IDLE's 3, or the group's share on this CPU).
    pub weight: u64,
    /// Virtual runtime (ns of nice-0 CPU time), signed so placement may go below zero.
    pub vruntime: i64,
    /// EEVDF virtual deadline.
    pub deadline: i64,
    /// EEVDF lag saved at dequeue (V − v), re-applied at placement.
    pub vlag: i64,
    /// EEVDF protection end for RUN_TO_PARITY (`se->vprot`).
    pub vprot: i64,
    /// EEVDF DELAY_DEQUEUE: the run-queue this entity went to sleep on while not eligible
    /// (`se->sched_delayed`); see `policy::eevdf`.
    pub delayed_on: Option<usize>,
    /// EEVDF PLACE_REL_DEADLINE (6.13+): dequeued without sleeping (migration, cgroup move),
    /// `deadline` holds the time left to it (`deadline − vruntime`), restored at placement.
    pub rel_deadline: bool,
    /// Requested slice: EEVDF base or custom slice.
    pub slice: Nanos,
    /// `sched_attr.sched_runtime` was set explicitly.
    pub custom_slice: bool,
    /// Total CPU time received.
    pub sum_exec: Nanos,
    /// `sum_exec` when last picked: `sum_exec − prev_sum_exec` is the time run in this slice.
    pub prev_sum_exec: Nanos,
    /// Queued on (or current of) its run-queue.
    pub on_rq: bool,
    /// SCHED_IDLE (task) or an idle group: always preempted by a non-idle wakee.
    pub is_idle: bool,
    /// SCHED_BATCH or SCHED_IDLE task: never preempts on wake-up.
    pub no_wakeup_preempt: bool,
    /// The run-queue this entity is queued on.
    pub rq: usize,
    /// For a group entity, the run-queue it stands for.
    pub my_rq: Option<usize>,
}

/// One fair run-queue: a CPU's root queue or a cgroup's queue on that CPU.
#[derive(Debug, Clone, Default)]
pub struct FairRq {
    /// Queued entities, not including `curr` (the kernel's rb-tree). Unordered: policies pick
    /// by their own key with the entity id as the final tie-break.
    pub queued: Vec<EntityId>,
    /// The entity running at this level, if any (still counted in `nr_running` and `load`).
    pub curr: Option<EntityId>,
    pub nr_running: usize,
    /// Sum of the weights of `queued` and `curr`.
    pub load: u64,
    /// Monotonic floor of the queue's virtual time.
    pub min_vruntime: i64,
    /// Σ wᵢ(vᵢ − min_vruntime) over `queued` (`cfs_rq->avg_vruntime`, kept by
    /// `avg_vruntime_add`/`_sub` as entities enter and leave the tree and shifted by
    /// `avg_vruntime_update` when min_vruntime moves; kernel/sched/fair.c 6.6–6.18). The current
    /// entity is added when V is computed, as `avg_vruntime()` does.
    pub avg_vruntime: i128,
    /// Σ wᵢ over `queued` (`cfs_rq->avg_load`).
    pub avg_load: i128,
    /// The cgroup this run-queue belongs to (0 = the CPU's root run-queue); kept here so the
    /// engine's hierarchy walks need no division of the run-queue index.
    pub group: usize,
    /// Queued entities with a custom slice (`sched_attr.sched_runtime`): while there are none,
    /// every queued slice is the policy's base slice and EEVDF's smallest-slice scan is skipped.
    pub nr_custom_slice: usize,
    /// Some queued entity has vruntime ≤ `min_vruntime`, so `update_min_vruntime` cannot raise
    /// it and needs no scan. Set by a scan or an entry at or below the floor; cleared whenever a
    /// queued entity leaves or changes (the one it held on to may be gone).
    floor_held: bool,
}

impl FairRq {
    /// An empty run-queue of cgroup `group`.
    pub fn for_group(group: usize) -> Self {
        FairRq {
            group,
            ..FairRq::default()
        }
    }

    /// Put `e` in the queue (`__enqueue_entity`, with `avg_vruntime_add`).
    pub fn push_queued(&mut self, e: EntityId, ents: &[Entity]) {
        self.queued.push(e);
        self.nr_custom_slice += ents[e].custom_slice as usize;
        self.avg_add(&ents[e], 1);
    }

    /// Take the entity at `queued[i]` out of the queue (`__dequeue_entity`, `avg_vruntime_sub`).
    /// The queue's order is not part of the model (every pick has its own key and the entity id
    /// as the final tie-break), so the last entity fills the hole instead of shifting the rest.
    pub fn remove_queued(&mut self, i: usize, ents: &[Entity]) -> EntityId {
        let e = self.queued.swap_remove(i);
        self.nr_custom_slice -= ents[e].custom_slice as usize;
        self.avg_add(&ents[e], -1);
        e
    }

    /// Add (`sign` 1) or remove (−1) an entity's weight and weighted offset.
    pub fn avg_add(&mut self, e: &Entity, sign: i128) {
        let w = e.weight as i128;
        self.avg_vruntime += sign * w * (e.vruntime - self.min_vruntime) as i128;
        self.avg_load += sign * w;
        if sign < 0 {
            self.floor_held = false;
        } else if e.vruntime <= self.min_vruntime {
            self.floor_held = true;
        }
    }
}

/// Why an entity is being enqueued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueue {
    /// A new task's first enqueue (fork).
    Initial,
    /// Waking after blocking.
    Wakeup,
    /// Moved from another CPU while runnable (its lag/relative vruntime is preserved).
    Migrated,
}

/// Platform facts some policies scale by.
#[derive(Debug, Clone, Copy)]
pub struct PolicyEnv {
    pub ncpus: usize,
    /// Scheduler tick period (1/HZ).
    pub tick: Nanos,
}

/// The decisions a fair-class policy makes about one run-queue.
pub trait FairPolicy {
    /// Name used on the command line and in reports.
    fn name(&self) -> &'static str;

    /// Default slice of a new entity (EEVDF base slice; CFS computes slices per period instead).
    fn base_slice(&self) -> Nanos;

    /// Charge the running task before an enqueue, as `enqueue_entity` calls `update_curr`
    /// before `place_entity` (kernel/sched/fair.c, 2.6.32 through 6.18), so that placement sees
    /// the queue's virtual time as of now rather than as of the last tick. `eevdf` does (a stale
    /// V handed every waking entity the lag the current one had accrued since the tick: issue
    /// 11), and so do `cfs` and the policies built on it (`CfsTunables::update_curr_first`;
    /// docs/mechanisms.md has the evidence and what it changed).
    fn update_curr_on_enqueue(&self) -> bool {
        false
    }

    /// Set `ents[id]`'s virtual time before it joins `rq` (`place_entity`).
    fn place(&self, rq: &FairRq, ents: &mut [Entity], id: EntityId, why: Enqueue);

    /// Called when `id` leaves `rq` (sleep = blocked, otherwise migration/throttle);
    /// EEVDF records the lag here.
    fn on_dequeue(&self, _rq: &FairRq, _ents: &mut [Entity], _id: EntityId, _sleep: bool) {}

    /// Charge `delta` ns of CPU to the running entity `id` (`update_curr`). Returns true when
    /// the policy wants the CPU rescheduled (e.g. an EEVDF deadline was reached).
    fn charge(&self, rq: &mut FairRq, ents: &mut [Entity], id: EntityId, delta: Nanos) -> bool;

    /// Choose the entity to run next among `rq.queued` and `rq.curr` (`pick_next_entity`).
    fn pick(&self, rq: &FairRq, ents: &[Entity]) -> Option<EntityId>;

    /// `id` was just picked to run (`set_next_entity`).
    fn on_pick(&self, _rq: &FairRq, ents: &mut [Entity], id: EntityId) {
        ents[id].prev_sum_exec = ents[id].sum_exec;
    }

    /// Periodic tick for the running entity: preempt it? (`check_preempt_tick`).
    fn tick_preempt(&self, rq: &FairRq, ents: &[Entity], curr: EntityId) -> bool;

    /// Should waking entity `woken` preempt `curr`, both on `rq`? (`check_preempt_wakeup`).
    fn wakeup_preempt(
        &self,
        rq: &mut FairRq,
        ents: &mut [Entity],
        curr: EntityId,
        woken: EntityId,
    ) -> bool;

    /// `id` moves from run-queue `from` to `to` (another CPU). CFS re-bases vruntime on the new
    /// queue's min_vruntime (`task_waking_fair`, `migrate_task_rq_fair`); EEVDF keeps lag instead.
    fn rebase(&self, _from: &FairRq, _to: &FairRq, _e: &mut Entity) {}

    /// `sched_yield` by the running entity.
    fn yield_curr(&self, _rq: &mut FairRq, _ents: &mut [Entity], _curr: EntityId) {}

    /// Would the kernel still have `id` — asleep, dequeued here — on `rq` as a delayed entity
    /// (DELAY_DEQUEUE), so that `try_to_wake_up` takes `ttwu_runnable` and requeues it where it
    /// is instead of choosing a CPU? Only `eevdf` delays dequeues.
    fn wakes_where_queued(&self, _rq: &FairRq, _ents: &[Entity], _id: EntityId) -> bool {
        false
    }

    /// The entity's weight changes while queued (`reweight_entity`).
    fn reweight(&self, _rq: &FairRq, ents: &mut [Entity], id: EntityId, weight: u64) {
        ents[id].weight = weight;
    }
}

/// Every entity on `rq` (queued and current), in a fixed order. The current entity is included
/// even after it was dequeued (it blocked and the CPU has not switched yet), as 2.6.32 does.
pub fn rq_entities(rq: &FairRq) -> impl Iterator<Item = EntityId> + '_ {
    rq.curr.into_iter().chain(rq.queued.iter().copied())
}

/// The entities that count on `rq` in kernels ≥ 6.6: the current one only while it is still
/// queued (`curr && curr->on_rq` in `avg_vruntime`, `update_min_vruntime`, `cfs_rq_min_slice`).
pub fn rq_members<'a>(rq: &'a FairRq, ents: &'a [Entity]) -> impl Iterator<Item = EntityId> + 'a {
    rq.curr
        .filter(|&c| ents[c].on_rq)
        .into_iter()
        .chain(rq.queued.iter().copied())
}

/// Raise `rq.min_vruntime` to `smallest`, never lowering it (`update_min_vruntime`).
fn raise_min_vruntime(rq: &mut FairRq, smallest: Option<i64>) {
    if let Some(v) = smallest.filter(|&v| v > rq.min_vruntime) {
        // `avg_vruntime_update`: the offsets are relative to min_vruntime.
        rq.avg_vruntime -= rq.avg_load * (v - rq.min_vruntime) as i128;
        rq.min_vruntime = v;
    }
}

/// 2.6.32's `update_min_vruntime`: the current entity counts even once dequeued. (CFS picks
/// the smallest vruntime, so its floor is rarely held by a queued entity: a plain scan.)
#[inline]
pub fn update_min_vruntime(rq: &mut FairRq, ents: &[Entity]) {
    let curr = rq.curr.map(|c| ents[c].vruntime);
    raise_min_vruntime(rq, min_with(curr, queued_min(rq, ents)));
}

/// The smallest vruntime in `rq.queued` (a plain loop: this runs at every charge).
#[inline]
fn queued_min(rq: &FairRq, ents: &[Entity]) -> Option<i64> {
    let mut it = rq.queued.iter();
    let mut m = ents[*it.next()?].vruntime;
    for &e in it {
        m = m.min(ents[e].vruntime);
    }
    Some(m)
}

#[inline]
fn min_with(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

/// ≥ 6.6's `update_min_vruntime`: a dequeued current entity no longer counts. The queue is
/// scanned only when no queued entity is known to sit at or below the floor
/// (`FairRq::floor_held`; under EEVDF the entity holding it often waits for many charges):
/// the result is the same either way.
pub fn update_min_vruntime_members(rq: &mut FairRq, ents: &[Entity]) {
    if rq.floor_held {
        return;
    }
    let queued = queued_min(rq, ents);
    let curr = rq.curr.filter(|&c| ents[c].on_rq).map(|c| ents[c].vruntime);
    raise_min_vruntime(rq, min_with(curr, queued));
    rq.floor_held = queued.is_some_and(|q| q <= rq.min_vruntime);
}

pub use params::Params;

/// Names accepted by [`by_name`].
pub const POLICY_NAMES: &[&str] = &["cfs", "eevdf", "vtcfs", "mcfs"];

/// Build a fair policy by name; `params` (`--param key=value`) override its tunables and any key
/// it does not know is an error naming it.
pub fn by_name(name: &str, env: PolicyEnv, params: &Params) -> Result<Box<dyn FairPolicy>, String> {
    let mut p = params.clone();
    let policy: Box<dyn FairPolicy> = match name {
        "cfs" => Box::new(cfs::Cfs::new(cfs::CfsTunables::android())),
        "eevdf" => {
            let mut t = eevdf::EevdfTunables::for_cpus(env.ncpus);
            t.tick = env.tick;
            if let Some(s) = p.take_duration("eevdf.base_slice")? {
                t.base_slice = s;
            }
            Box::new(eevdf::Eevdf::new(t))
        }
        "vtcfs" => {
            let t = p
                .take_duration("vtcfs.tick")?
                .unwrap_or_else(|| vtcfs::VtCfs::default_tick(env.tick));
            Box::new(vtcfs::VtCfs::new(t, env.tick)?)
        }
        "mcfs" => {
            let c = p
                .take_num("mcfs.cut_rate")?
                .unwrap_or(mcfs::Mcfs::DEFAULT_CUT_RATE);
            Box::new(mcfs::Mcfs::new(c)?)
        }
        _ => {
            return Err(format!(
                "unknown scheduler `{name}` (valid: {})",
                POLICY_NAMES.join(", ")
            ))
        }
    };
    p.finish(name)?;
    Ok(policy)
}
