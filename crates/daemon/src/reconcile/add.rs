//! The fast path (issue 10: "critical → boosted" within a millisecond): start the scheduling
//! boosts of threads uxsched has not touched yet, and nothing else — no scan, no journal walk,
//! no restore, no sweep. A full [`Reconciler::reconcile`] follows soon after and owns every other
//! decision: a thread that already has a journal row (a grant, an app thread's mild bonus, a
//! setting someone else changed) is left to it, so the fast path can never lower or override
//! what a full pass decided. Every safety rule of a first change still holds: journal first,
//! only fair threads, identity checked before and after.

use super::{names, Reconciler};
use crate::identity::TaskId;
use crate::journal::{JournalError, Kind};
use crate::policy::Desired;

impl Reconciler {
    /// The threads of `desired` whose scheduling uxsched has not touched (no journal row, not
    /// yielded to someone else): the ones [`Reconciler::add`] would start.
    pub fn untouched(&self, mut desired: Desired) -> Result<Desired, JournalError> {
        let mut keep = std::collections::BTreeSet::new();
        for task in desired.threads.keys() {
            let id = (Kind::Sched, crate::actuators::Key::Thread(*task));
            if !self.yielded.contains(&id) && self.journal.get(id.0, &id.1)?.is_none() {
                keep.insert(*task);
            }
        }
        desired.threads.retain(|t, _| keep.contains(t));
        Ok(desired)
    }

    /// Start the scheduling settings `desired` asks for on threads without a journal row.
    /// Returns the threads whose setting was written. An error only when the journal fails.
    pub fn add(&mut self, desired: &Desired) -> Result<Vec<TaskId>, JournalError> {
        let mut written = Vec::new();
        for (task, target) in &desired.threads {
            if !names(target, Kind::Sched) {
                continue;
            }
            let Some(act) = self.act(Kind::Sched) else {
                return Ok(written);
            };
            let key = match act.key(task) {
                Ok(Some(key)) => key,
                Ok(None) => continue,
                Err(e) => {
                    self.note_error(
                        (Kind::Sched, crate::actuators::Key::Thread(*task)),
                        "find the object of",
                        &e,
                    );
                    continue;
                }
            };
            let id = (Kind::Sched, key);
            if self.yielded.contains(&id) || self.journal.get(Kind::Sched, &key)?.is_some() {
                continue;
            }
            let before = self.journal.writes();
            match self.start(Kind::Sched, key, task, target) {
                Ok(()) => {
                    self.failures.remove(&id);
                    if self.journal.writes() != before {
                        written.push(*task);
                    }
                }
                Err(e) => self.note_error(id, "change", &e),
            }
        }
        Ok(written)
    }
}
