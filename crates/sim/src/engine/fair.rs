//! The fair class over the cgroup hierarchy: the engine's side of `kernel/sched/fair.c`.
//!
//! Each CPU has a root run-queue; each cgroup has a run-queue per CPU and, in its parent's
//! run-queue on that CPU, a group entity whose weight is the group's `shares` split across CPUs
//! in proportion to the group's load on each (`calc_group_shares`, with instantaneous runnable
//! weight standing in for PELT's load average — see docs/mechanisms.md). Every policy hook is
//! applied level by level, like `for_each_sched_entity`.

use super::{Class, Sim, State};
use crate::policy::{Enqueue, EntityId};

/// Smallest weight a group entity may have (`MIN_SHARES`).
const MIN_SHARES: u64 = 2;

/// Deepest cgroup nesting the engine accepts (the kernel allows more; workloads need ~3).
pub const MAX_DEPTH: usize = 8;

/// `(run-queue, entity)` pairs along one task's hierarchy, kept inline: these are built on every
/// charge, tick and pick, so they must not allocate. Stored as 32-bit indices (72 bytes instead
/// of 144): clearing and returning a path was a `memcpy` call per pick.
#[derive(Clone, Copy)]
pub struct Path {
    len: usize,
    items: [(u32, u32); MAX_DEPTH + 1],
}

impl Path {
    fn new() -> Self {
        Path {
            len: 0,
            items: [(0, 0); MAX_DEPTH + 1],
        }
    }

    fn push(&mut self, (rq, e): (usize, EntityId)) {
        debug_assert!(rq <= u32::MAX as usize && e <= u32::MAX as usize);
        self.items[self.len] = (rq as u32, e as u32);
        self.len += 1;
    }

    /// The pairs, from the task (or the root, for a pick) on.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (usize, EntityId)> + '_ {
        self.items[..self.len]
            .iter()
            .map(|&(rq, e)| (rq as usize, e as EntityId))
    }

    pub fn first(&self) -> Option<(usize, EntityId)> {
        self.iter().next()
    }

    pub fn last(&self) -> Option<(usize, EntityId)> {
        self.iter().next_back()
    }
}

impl Sim {
    pub(super) fn ents_task(&self, e: EntityId) -> u32 {
        debug_assert!(e < self.tasks.len());
        e as u32
    }

    fn rq_group(&self, rq: usize) -> usize {
        self.rqs[rq].group
    }

    pub(super) fn group_entity(&self, group: usize, cpu: usize) -> EntityId {
        self.group_ents[group * self.ncpus() + cpu]
    }

    /// `(run-queue, entity)` pairs from the task up to the CPU's root run-queue.
    fn path_up(&self, tid: u32, cpu: usize) -> Path {
        let mut path = Path::new();
        let mut e = tid as EntityId;
        loop {
            let rq = self.ents[e].rq;
            path.push((rq, e));
            let g = self.rq_group(rq);
            if g == 0 {
                return path;
            }
            e = self.group_entity(g, cpu);
        }
    }

    pub(super) fn add_load(&mut self, rq: usize, delta: i64) {
        let r = &mut self.rqs[rq];
        r.load = (r.load as i64 + delta) as u64;
        let g = r.group;
        self.groups[g].total_load = (self.groups[g].total_load as i64 + delta) as u64;
    }

    /// Recompute the weight of group `g`'s entity on `cpu` and of every ancestor's.
    pub(super) fn refresh_shares(&mut self, mut g: usize, cpu: usize) {
        while g != 0 {
            let grp = &self.groups[g];
            let local = self.rqs[self.rq_index(g, cpu)].load;
            let w = if grp.total_load == 0 {
                grp.shares
            } else {
                (grp.shares as u128 * local as u128 / grp.total_load as u128) as u64
            }
            .clamp(MIN_SHARES, grp.shares.max(MIN_SHARES));
            let ge = self.group_entity(g, cpu);
            let old = self.ents[ge].weight;
            if old != w {
                if self.ents[ge].on_rq {
                    let prq = self.ents[ge].rq;
                    self.reweight_queued(prq, ge, w);
                    self.add_load(prq, w as i64 - old as i64);
                } else {
                    self.ents[ge].weight = w;
                }
            }
            g = self.groups[g].parent.unwrap_or(0);
        }
    }

    /// Let the policy reweight `e`, queued on `rq`, and keep the queue's sums (the policy sees
    /// them with the old weight, as `reweight_entity` computes the lag before the change).
    pub(super) fn reweight_queued(&mut self, rq: usize, e: EntityId, weight: u64) {
        let in_tree = self.rqs[rq].curr != Some(e);
        let before = self.ents[e].clone();
        self.policy
            .reweight(&self.rqs[rq], &mut self.ents, e, weight);
        if in_tree {
            let r = &mut self.rqs[rq];
            r.avg_add(&before, -1);
            r.avg_add(&self.ents[e], 1);
        }
    }

    /// Enqueue a task and, where its group was empty on this CPU, the group entities above it.
    /// Under policies that ask for it the running task is charged first (see
    /// [`crate::policy::FairPolicy::update_curr_on_enqueue`]).
    pub(super) fn fair_enqueue(&mut self, tid: u32, cpu: usize, why: Enqueue) {
        if self.policy.update_curr_on_enqueue() {
            self.update_curr(cpu);
        }
        self.cpus[cpu].fair_tasks.push(tid);
        self.stamp_mru(tid);
        self.refresh_cpu_load(cpu);
        let g = self.tasks[tid as usize].group;
        self.fair_enqueue_up(tid as EntityId, g, cpu, why);
        self.refresh_shares(g, cpu);
        self.pelt_enqueued(tid);
    }

    /// Enqueue entity `e` on group `g`'s run-queue on `cpu`, then its group entity if that was
    /// not queued (and the group is not throttled), and so on up.
    pub(super) fn fair_enqueue_up(
        &mut self,
        mut e: EntityId,
        mut g: usize,
        cpu: usize,
        mut why: Enqueue,
    ) {
        loop {
            let rq = self.rq_index(g, cpu);
            self.ents[e].rq = rq;
            self.policy.place(&self.rqs[rq], &mut self.ents, e, why);
            self.ents[e].on_rq = true;
            let w = self.ents[e].weight;
            self.rqs[rq].push_queued(e, &self.ents);
            let r = &mut self.rqs[rq];
            r.nr_running += 1;
            self.add_load(rq, w as i64);
            if g == 0 {
                return;
            }
            let ge = self.group_entity(g, cpu);
            if self.ents[ge].on_rq || self.bandwidth_throttled(g) {
                return;
            }
            self.refresh_shares(g, cpu);
            e = ge;
            g = self.groups[g].parent.unwrap_or(0);
            why = Enqueue::Wakeup;
        }
    }

    /// Dequeue a task and any group entity whose run-queue it leaves empty.
    pub(super) fn fair_dequeue(&mut self, tid: u32, cpu: usize, sleep: bool) {
        let ft = &mut self.cpus[cpu].fair_tasks;
        if let Some(i) = ft.iter().position(|&t| t == tid) {
            ft.swap_remove(i);
            self.refresh_cpu_load(cpu);
            self.pelt_dequeued(tid);
        }
        self.fair_dequeue_up(tid as EntityId, cpu, sleep);
    }

    /// Dequeue entity `e` (if queued), then each group entity whose run-queue becomes empty.
    pub(super) fn fair_dequeue_up(&mut self, mut e: EntityId, cpu: usize, sleep: bool) {
        while self.ents[e].on_rq {
            let rq = self.ents[e].rq;
            self.policy
                .on_dequeue(&self.rqs[rq], &mut self.ents, e, sleep);
            self.ents[e].on_rq = false;
            let w = self.ents[e].weight;
            let r = &mut self.rqs[rq];
            // The current entity is never in `queued` (set_next takes it out, put_prev puts it
            // back), and it is the one that usually leaves: no search for it.
            if r.curr != Some(e) {
                if let Some(i) = r.queued.iter().position(|&x| x == e) {
                    r.remove_queued(i, &self.ents);
                }
            } else {
                debug_assert!(!r.queued.contains(&e), "the current entity is queued");
            }
            r.nr_running -= 1;
            self.add_load(rq, -(w as i64));
            let g = self.rq_group(rq);
            if g == 0 {
                return;
            }
            if self.rqs[rq].nr_running > 0 {
                self.refresh_shares(g, cpu);
                return;
            }
            e = self.group_entity(g, cpu);
        }
    }

    /// Move a task's virtual time from `from`'s run-queue to `to`'s (the policy decides how).
    /// Is sleeping task `tid` one the kernel would still hold queued (DELAY_DEQUEUE) on its
    /// previous CPU? See [`crate::policy::FairPolicy::wakes_where_queued`].
    pub(super) fn fair_still_queued(&self, tid: u32) -> bool {
        let t = &self.tasks[tid as usize];
        if t.class != Class::Fair || !t.allows(t.cpu) {
            return false;
        }
        let rq = self.ents[tid as usize].rq;
        self.policy
            .wakes_where_queued(&self.rqs[rq], &self.ents, tid as EntityId)
    }

    pub(super) fn fair_rebase(&mut self, tid: u32, from: usize, to: usize) {
        let g = self.tasks[tid as usize].group;
        let (a, b) = (self.rq_index(g, from), self.rq_index(g, to));
        let e = &mut self.ents[tid as usize];
        self.policy.rebase(&self.rqs[a], &self.rqs[b], e);
    }

    /// Pick down the hierarchy; returns the `(run-queue, entity)` path ending at a task.
    pub(super) fn fair_pick_path(&self, cpu: usize) -> Option<Path> {
        let mut rq = self.rq_index(0, cpu);
        let mut path = Path::new();
        loop {
            let e = self.policy.pick(&self.rqs[rq], &self.ents)?;
            path.push((rq, e));
            match self.ents[e].my_rq {
                Some(child) => rq = child,
                None => return Some(path),
            }
        }
    }

    /// Make `path` current at every level (`set_next_entity`).
    pub(super) fn fair_set_next(&mut self, _cpu: usize, path: &Path) {
        for (rq, e) in path.iter() {
            let r = &mut self.rqs[rq];
            if r.curr == Some(e) {
                continue;
            }
            if let Some(old) = r.curr.take() {
                if self.ents[old].on_rq {
                    r.push_queued(old, &self.ents);
                }
            }
            if let Some(i) = r.queued.iter().position(|&x| x == e) {
                r.remove_queued(i, &self.ents);
            }
            r.curr = Some(e);
            self.policy.on_pick(&self.rqs[rq], &mut self.ents, e);
        }
    }

    /// The entity one level above `e`'s run-queue on `cpu`, or None at the root — the step of
    /// [`Sim::path_up`], for the hot walks that need no [`Path`].
    fn parent_entity(&self, rq: usize, cpu: usize) -> Option<EntityId> {
        match self.rqs[rq].group {
            0 => None,
            g => Some(self.group_entity(g, cpu)),
        }
    }

    /// The running task leaves the CPU: put its entities back in their queues (`put_prev_entity`).
    pub(super) fn fair_put_prev(&mut self, cpu: usize, tid: u32) {
        let mut next = Some(tid as EntityId);
        while let Some(e) = next {
            let rq = self.ents[e].rq;
            let r = &mut self.rqs[rq];
            if r.curr == Some(e) {
                r.curr = None;
                if self.ents[e].on_rq {
                    r.push_queued(e, &self.ents);
                }
            }
            next = self.parent_entity(rq, cpu);
        }
    }

    /// Charge `delta` to the running task at every level, task first (the order of
    /// [`Sim::path_up`]); true if a policy asks to reschedule.
    pub(super) fn fair_charge(&mut self, cpu: usize, tid: u32, delta: u64) -> bool {
        let mut resched = false;
        let mut next = Some(tid as EntityId);
        while let Some(e) = next {
            let rq = self.ents[e].rq;
            resched |= self
                .policy
                .charge(&mut self.rqs[rq], &mut self.ents, e, delta);
            next = self.parent_entity(rq, cpu);
        }
        resched
    }

    pub(super) fn fair_tick(&mut self, cpu: usize, tid: u32) -> bool {
        let mut next = Some(tid as EntityId);
        while let Some(e) = next {
            let rq = self.ents[e].rq;
            if self.rqs[rq].nr_running > 1 && self.policy.tick_preempt(&self.rqs[rq], &self.ents, e)
            {
                return true;
            }
            next = self.parent_entity(rq, cpu);
        }
        false
    }

    /// Compare the woken task with the running one where their hierarchies meet
    /// (`find_matching_se`), and let the policy decide.
    pub(super) fn fair_wakeup_preempt(&mut self, cpu: usize, curr: u32, woken: u32) -> bool {
        let (ce, we) = (curr as EntityId, woken as EntityId);
        let rq = self.ents[ce].rq;
        if rq == self.ents[we].rq && ce != we {
            // Same run-queue, so the same ancestors: they meet at the bottom (no paths needed).
            return self
                .policy
                .wakeup_preempt(&mut self.rqs[rq], &mut self.ents, ce, we);
        }
        let (a, b) = (self.path_up(curr, cpu), self.path_up(woken, cpu));
        for (x, y) in a.iter().rev().zip(b.iter().rev()) {
            if x.1 != y.1 {
                debug_assert_eq!(x.0, y.0);
                return self
                    .policy
                    .wakeup_preempt(&mut self.rqs[x.0], &mut self.ents, x.1, y.1);
            }
        }
        false
    }

    pub(super) fn fair_yield(&mut self, cpu: usize, tid: u32) {
        let (rq, e) = self.path_up(tid, cpu).first().expect("non-empty path");
        self.policy.yield_curr(&mut self.rqs[rq], &mut self.ents, e);
    }

    /// Move a runnable, not running fair task to another CPU (load balancing).
    pub(super) fn fair_migrate(&mut self, tid: u32, from: usize, to: usize) {
        self.fair_dequeue(tid, from, false);
        self.fair_rebase(tid, from, to);
        self.tasks[tid as usize].cpu = to;
        self.fair_enqueue(tid, to, Enqueue::Migrated);
    }

    /// Move a fair task to cgroup `g` on its CPU, like `sched_move_task`: charge the running
    /// task, take it off the old hierarchy (dequeue, then `put_prev` if it runs), carry its
    /// virtual time from the old group's run-queue to the new one's, and put it back (enqueue,
    /// then `set_next` if it runs). The CPU reschedules so the new weights decide at once.
    pub(super) fn set_task_group(&mut self, tid: u32, g: usize) -> bool {
        let t = tid as usize;
        if self.tasks[t].class != Class::Fair
            || self.tasks[t].state == State::Exited
            || g >= self.groups.len()
        {
            return false;
        }
        let old = self.tasks[t].group;
        if old == g {
            return true;
        }
        let cpu = self.tasks[t].cpu;
        let running = self.cpus[cpu].curr == Some(tid);
        if running {
            self.update_curr(cpu);
        }
        let queued = self.ents[t].on_rq;
        if queued {
            self.fair_dequeue(tid, cpu, false);
        }
        if running {
            self.fair_put_prev(cpu, tid);
        }
        let (from, to) = (self.rq_index(old, cpu), self.rq_index(g, cpu));
        self.policy
            .rebase(&self.rqs[from], &self.rqs[to], &mut self.ents[t]);
        self.ents[t].rq = to;
        self.tasks[t].group = g;
        if queued {
            self.fair_enqueue(tid, cpu, Enqueue::Migrated);
        }
        if running {
            let path = self.path_up(tid, cpu);
            self.fair_set_next(cpu, &path);
        }
        if queued {
            self.resched(cpu);
        }
        true
    }
}
