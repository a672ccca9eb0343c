//! The fast path (issue 10: "critical → boosted" within a millisecond): the scheduling boosts of
//! the tracker's new members, and nothing else — no scan, no journal walk, no restore, no sweep.
//! A full [`Reconciler::reconcile`] follows soon after and owns every other decision. Per
//! thread it may only:
//! - start a boost on a thread uxsched has not touched (journal first, only fair threads,
//!   identity checked before and after: every rule of a first change);
//! - raise a boost uxsched itself wrote and the kernel still holds (an app thread's mild
//!   bonus becoming the critical boost) — only ever to a stronger one, never over a grant's real
//!   time or a setting someone else changed, through the pass's own update ([`Reconciler::keep`]);
//! - find the thread already holds that boost (the UI thread, boosted at the focus).
//!
//! Anything else (a weaker wish, a yielded setting) waits for the pass: the fast path never
//! lowers or overrides what a pass decided. Left to the pass, an app thread on its mild bonus
//! got its critical boost up to `min_focus_interval_ms` (100 ms) late.

use super::{names, Reconciler};
use crate::actuators::{sched, Key};
use crate::identity::TaskId;
use crate::journal::{Entry, JournalError, Kind, Value};
use crate::policy::{Desired, Target};

/// What the fast path does for one thread.
enum Step {
    Start(Key),
    Raise(Entry, Value),
    Holds(Entry),
}

impl Reconciler {
    /// The threads of `desired` the fast path can boost now ([`Reconciler::add`]).
    pub fn fast_candidates(&self, mut desired: Desired) -> Result<Desired, JournalError> {
        let mut keep = std::collections::BTreeSet::new();
        for (task, target) in &desired.threads {
            if self.step(task, target)?.is_some() {
                keep.insert(*task);
            }
        }
        desired.threads.retain(|t, _| keep.contains(t));
        Ok(desired)
    }

    /// Boost the threads of `desired` as far as the fast path may. Returns the threads that
    /// hold their boost now (written, or held already). An error only when the journal fails.
    pub fn add(&mut self, desired: &Desired) -> Result<Vec<TaskId>, JournalError> {
        let mut done = Vec::new();
        for (task, target) in &desired.threads {
            let id = (Kind::Sched, Key::Thread(*task));
            let before = self.journal.writes();
            match self.step(task, target)? {
                None => {}
                Some(Step::Holds(entry)) => {
                    let act = self.act(Kind::Sched);
                    let via = act.and_then(|a| Some((a, self.reach(a, &entry)?)));
                    let holds = via.is_some_and(|(a, via)| {
                        a.read(via).is_ok_and(|now| a.holds(&now, &entry.applied))
                    });
                    if holds {
                        done.push(*task);
                    }
                }
                Some(Step::Start(key)) => match self.start(Kind::Sched, key, task, target) {
                    Ok(()) => {
                        self.failures.remove(&id);
                        if self.journal.writes() != before {
                            done.push(*task);
                        }
                    }
                    Err(e) => self.note_error(id, "change", &e),
                },
                Some(Step::Raise(entry, want)) => {
                    let Some(act) = self.act(Kind::Sched) else {
                        continue;
                    };
                    let Some(via) = self.reach(act, &entry) else {
                        continue; // gone: the pass forgets it
                    };
                    self.keep(&entry, via, *task, want)?;
                    if self.journal.writes() != before && self.journal.get(id.0, &id.1)?.is_some() {
                        done.push(*task);
                    }
                }
            }
        }
        Ok(done)
    }

    /// What the fast path may do for `task`; `None`: leave it to the pass.
    fn step(&self, task: &TaskId, target: &Target) -> Result<Option<Step>, JournalError> {
        if !names(target, Kind::Sched) {
            return Ok(None);
        }
        let Some(act) = self.act(Kind::Sched) else {
            return Ok(None);
        };
        let key = match act.key(task) {
            Ok(Some(key)) => key,
            _ => return Ok(None),
        };
        if self.yielded.contains(&(Kind::Sched, key)) {
            return Ok(None);
        }
        let Some(entry) = self.journal.get(Kind::Sched, &key)? else {
            return Ok(Some(Step::Start(key)));
        };
        let Some(want) = self.wanted(Kind::Sched, &entry.original, target) else {
            return Ok(None);
        };
        if want == entry.applied {
            return Ok(Some(Step::Holds(entry)));
        }
        Ok(stronger(&want, &entry.applied).then_some(Step::Raise(entry, want)))
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
