//! The fast path (issue 10: "critical → boosted" within a millisecond): the scheduling boosts of
//! the tracker's new members, and nothing else — no scan, no journal walk, no restore, no sweep.
//! A full [`Reconciler::reconcile`] follows soon after and owns every other decision. Per
//! thread it may only:
//! - start a boost on a thread uxsched has not touched (journal first, only fair threads,
//!   identity checked before and after: every rule of a first change);
//! - through the pass's own update ([`Reconciler::keep`]), on a boost uxsched itself wrote and
//!   the kernel still holds: find it is that boost already (the UI thread, boosted at the
//!   focus), or raise it (an app thread's mild bonus becoming the critical boost) — only ever
//!   to a stronger one, never over a grant's real time or a setting someone else changed.
//!
//! Anything else (a weaker wish, a yielded setting) waits for the pass: the fast path never
//! lowers or overrides what a pass decided. Left to the pass, an app thread on its mild bonus
//! got its critical boost up to `min_focus_interval_ms` (100 ms) late.

use super::keep::Keep;
use super::Reconciler;
use crate::journal::{Entry, JournalError};
use crate::types::Key;
use crate::types::{Desired, Target};
use crate::types::{Kind, Value};
use uxsched_os::identity::TaskId;
use uxsched_os::sched;

/// What the fast path does for one thread: a first change, or the update of uxsched's own row
/// to a wish that is the same or stronger.
enum Step {
    Start(Key),
    Update(Box<(Entry, Value)>),
}

/// A change decided and waiting for its row: a first change, or an update written through a
/// live thread of its object.
enum Planned {
    First(Entry),
    Update(i32, Entry),
}

impl Planned {
    fn entry(&self) -> &Entry {
        match self {
            Planned::First(e) | Planned::Update(_, e) => e,
        }
    }
}

/// The fast path's decisions for a batch, worked out once ([`Reconciler::fast_plan`]) and
/// carried out as decided ([`Reconciler::add_planned`]): the threads it may boost now, each
/// with its target and step, so that picking the candidates and writing them agree.
pub struct FastPlan {
    steps: Vec<(TaskId, Target, Step)>,
}

impl FastPlan {
    /// The planned threads whose target is real-time.
    pub fn rt_threads(&self) -> Vec<TaskId> {
        (self.steps.iter())
            .filter(|(_, t, _)| t.rt.is_some())
            .map(|(task, _, _)| *task)
            .collect()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// The planned threads, in order.
    #[cfg(test)]
    pub fn threads(&self) -> Vec<TaskId> {
        self.steps.iter().map(|(task, _, _)| *task).collect()
    }
}

impl Reconciler {
    /// The threads of `desired` the fast path can boost now, with what it would do for each.
    pub fn fast_plan(&self, desired: &Desired) -> Result<FastPlan, JournalError> {
        let mut steps = Vec::new();
        for (task, target) in &desired.threads {
            if let Some(step) = self.step(task, target)? {
                steps.push((*task, target.clone(), step));
            }
        }
        Ok(FastPlan { steps })
    }

    /// Give `task` another target in `plan` (the guard could not read it: the fair boost
    /// instead); its step is worked out again, and it leaves the plan if there is none.
    pub fn replan(
        &self,
        plan: &mut FastPlan,
        task: TaskId,
        target: Target,
    ) -> Result<(), JournalError> {
        let Some(i) = plan.steps.iter().position(|(t, _, _)| *t == task) else {
            return Ok(());
        };
        match self.step(&task, &target)? {
            Some(step) => plan.steps[i] = (task, target, step),
            None => {
                plan.steps.remove(i);
            }
        }
        Ok(())
    }

    /// Boost the threads of `desired` as far as the fast path may. Returns the threads that
    /// hold their boost now (written, or held already). An error only when the journal fails.
    pub fn add(&mut self, desired: &Desired) -> Result<Vec<TaskId>, JournalError> {
        let plan = self.fast_plan(desired)?;
        Ok(self
            .add_planned(plan)?
            .into_iter()
            .map(|(t, _)| t)
            .collect())
    }

    /// Carry out `plan`, returning when (`CLOCK_MONOTONIC`, ns) each thread's boost was in
    /// force: the tracker's "critical → boosted" ends there, not after the batch's last thread.
    /// Every row is journalled first, in one transaction (one commit per batch, not per row),
    /// then the boosts are written, each checked after as a pass does.
    pub fn add_planned(&mut self, plan: FastPlan) -> Result<Vec<(TaskId, u64)>, JournalError> {
        let mut done = Vec::new();
        let now = uxsched_tracker::procfs::monotonic_ns;
        let mut planned: Vec<(TaskId, Planned)> = Vec::new();
        for (task, target, step) in plan.steps {
            let id = (Kind::Sched, Key::Thread(task));
            match step {
                Step::Start(key) => match self.plan_start(Kind::Sched, key, &task, &target) {
                    Ok(Some(entry)) => planned.push((task, Planned::First(entry))),
                    Ok(None) => {} // exited, or nothing to raise
                    Err(e) => self.note_error(id, "change", &e),
                },
                Step::Update(update) => {
                    let (entry, want) = *update;
                    let act = self.act(Kind::Sched);
                    // Gone: the pass forgets it.
                    let Some(via) = act.and_then(|a| self.reach(a, &entry)) else {
                        continue;
                    };
                    match self.plan_keep(&entry, via, task, want)? {
                        Keep::Held => done.push((task, now())),
                        Keep::Update(updated) => {
                            planned.push((task, Planned::Update(via, *updated)))
                        }
                        Keep::Not => {}
                    }
                }
            }
        }
        self.journal
            .record_all(planned.iter().map(|(_, p)| p.entry()))?;
        for (task, plan) in planned {
            let written = match plan {
                Planned::First(entry) => match self.apply_start(&entry) {
                    Ok(holds) => {
                        self.failures.remove(&(Kind::Sched, entry.key));
                        holds
                    }
                    Err(e) => {
                        self.note_error((Kind::Sched, entry.key), "change", &e);
                        false
                    }
                },
                Planned::Update(via, updated) => self.apply_update(via, &updated),
            };
            if written {
                done.push((task, now()));
            }
        }
        Ok(done)
    }

    /// What the fast path may do for `task`; `None`: leave it to the pass.
    fn step(&self, task: &TaskId, target: &Target) -> Result<Option<Step>, JournalError> {
        if !self.names(target, Kind::Sched) {
            return Ok(None);
        }
        let Some(act) = self.act(Kind::Sched) else {
            return Ok(None);
        };
        let key = match act.key(task) {
            Ok(Some(key)) => key,
            _ => return Ok(None),
        };
        if self.yielded.holds(&(Kind::Sched, key), target) {
            return Ok(None);
        }
        let Some(entry) = self.journal.get(Kind::Sched, &key)? else {
            return Ok(Some(Step::Start(key)));
        };
        let Some(want) = self.wanted(Kind::Sched, &entry.original, target) else {
            return Ok(None);
        };
        let update = want == entry.applied || stronger(&want, &entry.applied);
        Ok(update.then(|| Step::Update(Box::new((entry, want)))))
    }
}

/// Whether `want` is a stronger boost than `applied` for a fair thread: real time over the
/// fair class, or a lower nice with no longer a slice. Real time already applied (a grant,
/// the lever's own) and `SCHED_EXT` are the pass's to change.
fn stronger(want: &Value, applied: &Value) -> bool {
    let (Value::Sched(w), Value::Sched(a)) = (want, applied) else {
        return false;
    };
    let fair = |x: &sched::SchedAttr| x.is_fair() && !x.is_ext();
    if !fair(a) {
        return false;
    }
    if w.is_rt() {
        return true;
    }
    fair(w) && w.nice <= a.nice && (a.runtime == 0 || (w.runtime != 0 && w.runtime <= a.runtime))
}
