//! Keeping a journalled setting that is still wanted (the coexistence rule): update it while
//! the kernel still holds what uxsched applied, otherwise yield it to whoever changed it
//! (`yields.rs` says when a stronger wish asks again).

use super::Reconciler;
use crate::journal::{Entry, JournalError};
use crate::types::{Kind, Value};
use std::io;
use tracing::info;
use uxsched_os::identity::TaskId;

/// What keeping a journalled setting takes: nothing (the kernel holds the wish), an update to
/// journal and write, or nothing more (unreadable now, or yielded to whoever changed it).
pub(super) enum Keep {
    Held,
    Update(Box<Entry>),
    Not,
}

impl Reconciler {
    /// Whether the guard demoted the thread of this scheduling entry since the last pass.
    pub(super) fn guard_wrote(&self, entry: &Entry) -> bool {
        entry.kind() == Kind::Sched
            && self.guard.as_ref().is_some_and(|g| {
                g.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .contains_key(&entry.via)
            })
    }

    /// A journalled setting that is still wanted: if the kernel still holds what uxsched
    /// applied, update it to the new wish; otherwise someone else changed it — theirs stands.
    /// True when the kernel holds the wish afterwards (held already, or written now).
    pub(super) fn keep(
        &mut self,
        entry: &Entry,
        via: i32,
        task: TaskId,
        want: Value,
    ) -> Result<bool, JournalError> {
        match self.plan_keep(entry, via, task, want)? {
            Keep::Held => Ok(true),
            Keep::Not => Ok(false),
            Keep::Update(updated) => {
                self.journal.record(&updated)?;
                Ok(self.apply_update(via, &updated))
            }
        }
    }

    /// What keeping `entry` takes ([`Reconciler::keep`]); a setting someone else changed is
    /// yielded here (its row forgotten).
    pub(super) fn plan_keep(
        &mut self,
        entry: &Entry,
        via: i32,
        task: TaskId,
        want: Value,
    ) -> Result<Keep, JournalError> {
        let id = (entry.kind(), entry.key);
        let Some(act) = self.act(id.0) else {
            return Ok(Keep::Not);
        };
        let now = match act.read(via) {
            Ok(now) => now,
            Err(e) => {
                self.note_error(id, "read", &e);
                return Ok(Keep::Not);
            }
        };
        if entry.is_ours(&now, |a, b| act.holds(a, b)) || self.guard_wrote(entry) {
            if act.holds(&now, &entry.applied) && want == entry.applied && task == entry.via {
                return Ok(Keep::Held);
            }
            // A new wish, the thread it was journalled under left and another asks, or a crash
            // came between journalling an update and writing it: (re)write it, remembering
            // what the kernel holds until then as uxsched's too.
            return Ok(Keep::Update(Box::new(Entry {
                via: task,
                previous: Some(now),
                applied: want,
                ..entry.clone()
            })));
        }
        info!(
            object = entry.key.describe(),
            kind = id.0.name(),
            ours = ?entry.applied,
            theirs = ?now,
            "changed by someone else since uxsched set it; leaving theirs"
        );
        self.journal.forget(id.0, &id.1)?;
        // What they overrode is what the kernel held of ours, not this pass's wish: a wish that
        // grew stronger in the same pass (a thread found critical just as the app reset its
        // nice) is asked at the next pass, not yielded with the weaker one.
        self.yielded.record(id, &entry.applied);
        Ok(Keep::Not)
    }

    /// Write a journalled update through `via`; true when written.
    pub(super) fn apply_update(&mut self, via: i32, updated: &Entry) -> bool {
        let id = (updated.kind(), updated.key);
        let written = self
            .act(id.0)
            .ok_or_else(|| io::Error::from(io::ErrorKind::Unsupported))
            .and_then(|act| act.write(via, &updated.applied));
        match written {
            Ok(()) => true,
            Err(e) => {
                self.note_error(id, "update", &e);
                false
            }
        }
    }
}
