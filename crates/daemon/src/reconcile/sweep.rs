//! What boosts leave beyond the objects uxsched set: I/O priorities that a boosted thread's
//! creations inherited (the kernel copies a thread's ioprio on fork and nothing resets it), and
//! tasks that sit in uxsched's cgroups without being wanted there (children that inherited the
//! group, leftovers of a killed daemon). Both are put back every pass.

use super::{gone, group_name, Reconciler, Wants};
use crate::actuators::cgroup::Hierarchy;
use crate::actuators::Actuator;
use crate::journal::{Entry, JournalError};
use crate::types::Desired;
use crate::types::Group;
use crate::types::Key;
use crate::types::{Kind, Value};
use std::collections::{BTreeMap, HashSet};
use tracing::{debug, info, warn};
use uxsched_os::identity;

/// How long a task that inherited a boosted thread's I/O class keeps it while that thread stays
/// boosted: a program the app in front starts is forked first and exec'd a moment later, and
/// only its exec tells the launch watcher (`sources/launch/`) it is a launch; a pass in
/// between would put its class back and the next raise it again (seen in the daemon's log as
/// "put back a setting the task inherited" just before the launch). A restore (the boost ending,
/// the daemon stopping) puts back heirs of any age.
pub(super) const INHERIT_GRACE: std::time::Duration = std::time::Duration::from_millis(100);

/// Objects whose I/O priority is uxsched's own to hold: wanted or journalled.
pub(super) fn protected(wants: &Wants, entries: &[Entry]) -> HashSet<Key> {
    let journalled = entries.iter().map(|e| (e.kind(), e.key));
    wants
        .keys()
        .copied()
        .chain(journalled)
        .filter(|(kind, _)| *kind == Kind::Ioprio)
        .map(|(_, key)| key)
        .collect()
}

impl Reconciler {
    /// Put back the value the boosted object had on every task that inherited what uxsched
    /// applied to it (or before its latest update: a fork may have copied that) and is not
    /// itself boosted. `kept`: the policy still wants exactly what was applied — young heirs
    /// then keep it ([`INHERIT_GRACE`]), but only while the boosted thread lives. An heir
    /// skipped when the value is about to change, or when the thread has exited and its row is
    /// forgotten, would never be looked for again (both seen in the reliability smoke test: a
    /// forked `sleep` left real-time).
    pub(super) fn sweep_inheritors(
        &self,
        act: &dyn Actuator,
        entry: &Entry,
        protected: &HashSet<Key>,
        kept: bool,
    ) {
        let previous = entry.previous.as_ref().filter(|p| **p != entry.applied);
        let values = std::iter::once(&entry.applied).chain(previous);
        let mut heirs = Vec::new();
        for value in values {
            match act.inheritors(&entry.key, value) {
                Ok(h) => heirs.extend(h),
                Err(e) => {
                    warn!(
                        object = entry.key.describe(),
                        "cannot look for tasks that inherited its {}: {e}",
                        entry.kind().name()
                    );
                    return;
                }
            }
        }
        let original = self.restorable(&entry.original);
        let grace = kept && matches!(entry.key, Key::Thread(t) if self.tasks.still_same(&t));
        for heir in heirs {
            if protected.contains(&Key::Thread(heir))
                || !self.tasks.still_same(&heir)
                || (grace && self.tasks.newborn(&heir))
            {
                continue;
            }
            match act.write(heir.tid, &original) {
                Ok(()) if self.tasks.still_same(&heir) => info!(
                    tid = heir.tid,
                    from = entry.key.describe(),
                    kind = entry.kind().name(),
                    "put back a setting the task inherited from a boosted thread"
                ),
                Ok(()) => warn!(
                    tid = heir.tid,
                    "tid recycled while putting back an inherited setting"
                ),
                Err(e) => debug!(tid = heir.tid, "putting back an inherited setting: {e}"),
            }
        }
    }

    /// Move tasks that nothing wants in uxsched's groups back to their process's home group.
    pub(super) fn sweep_groups(&mut self, desired: &Desired) -> Result<(), JournalError> {
        let Some(g) = self.groups.clone() else {
            return Ok(());
        };
        let per_process = matches!(g.hierarchy, Hierarchy::V2 { .. });
        // Who may stay: wanted there, or journalled (restored by the journal's own rules).
        let mut wanted: BTreeMap<i32, Group> = BTreeMap::new();
        for (task, t) in &desired.threads {
            if let Some(group) = t.group {
                wanted.insert(if per_process { task.pid } else { task.tid }, group);
            }
        }
        let journalled: HashSet<i32> = self
            .journal
            .entries()?
            .into_iter()
            .filter_map(|e| match e.key {
                Key::Thread(t) if e.kind() == Kind::Cgroup => Some(t.tid),
                Key::Process(t) if e.kind() == Kind::Cgroup => Some(t.pid),
                _ => None,
            })
            .collect();
        for group in [Group::Fg, Group::Bg] {
            let members = match g.members(group) {
                Ok(m) => m,
                Err(e) => {
                    warn!(
                        group = group_name(group),
                        "cannot list uxsched's group: {e}; tasks left in it keep its weight \
                         until the next pass — check the cgroup filesystem"
                    );
                    continue;
                }
            };
            for id in members {
                let stays = wanted.get(&id) == Some(&group) || journalled.contains(&id);
                if stays || g.moving(id) {
                    continue; // a queued move (a restore) takes it out already
                }
                let Ok(pid) = identity::tgid(id) else {
                    continue; // exited
                };
                let home = self.process_origin(pid)?;
                let moved = g.place(id, &home).or_else(|e| {
                    if gone(&e) {
                        return Err(e); // exited meanwhile: nothing to move
                    }
                    warn!(
                        tid = id,
                        home, "cannot move back home ({e}); moving to the root"
                    );
                    g.place(id, "/")
                });
                match moved {
                    Ok(()) => debug!(tid = id, home, "moving out of uxsched's group"),
                    Err(e) if gone(&e) => {}
                    Err(e) => warn!(
                        tid = id,
                        group = group_name(group),
                        "cannot move out of uxsched's group: {e}; it keeps the group's weight"
                    ),
                }
            }
        }
        Ok(())
    }

    /// Moves the mover could not make (`actuators/mover.rs`): a first move's row is forgotten
    /// (the task never left its group: nothing to restore) and the failure shown by `status`,
    /// as a failed write on the loop's thread was; a move out of uxsched's groups is tried
    /// again by the group sweep, since the task is still there.
    pub(super) fn failed_moves(&mut self) -> Result<(), JournalError> {
        let Some(g) = self.groups.clone() else {
            return Ok(());
        };
        let failed = g.take_failed_moves();
        if failed.is_empty() {
            return Ok(());
        }
        let mut rows = self.journal.entries()?;
        for f in failed {
            let wanted = Value::Cgroup(f.to.clone());
            let row = (rows.iter()).position(|e| {
                e.kind() == Kind::Cgroup && e.via.tid == f.tid && e.applied == wanted
            });
            match row.map(|i| rows.swap_remove(i)) {
                Some(e) => {
                    self.journal.forget(Kind::Cgroup, &e.key)?;
                    self.note_error((Kind::Cgroup, e.key), "move", &f.error);
                }
                None => warn!(
                    tid = f.tid,
                    group = f.to,
                    "cannot move the task: {}; the group sweep tries again",
                    f.error
                ),
            }
        }
        Ok(())
    }

    /// Keep uxsched's group weights at what the desired set says.
    pub(super) fn set_group_weights(&self, desired: &Desired) {
        let Some(g) = &self.groups else {
            return;
        };
        for (group, shares) in [
            (Group::Fg, desired.fg_shares),
            (Group::Bg, desired.bg_shares),
        ] {
            // Compared in the hierarchy's own unit: a correct weight is left alone.
            if let Err(e) = g.ensure_weight(group, shares) {
                warn!(
                    group = group_name(group),
                    shares, "cannot set group weight: {e}"
                );
            }
        }
    }

    /// The home cgroup of process `pid`: the original journalled for it (or any of its
    /// threads), else the group of one of its threads outside uxsched's groups, else the root.
    pub(super) fn process_origin(&self, pid: i32) -> Result<String, JournalError> {
        let journalled = self.journal.entries()?.into_iter().find_map(|e| {
            match (e.via.pid == pid, e.original) {
                (true, Value::Cgroup(p)) => Some(p),
                _ => None,
            }
        });
        if let Some(p) = journalled {
            return Ok(p);
        }
        let Some(g) = &self.groups else {
            return Ok("/".to_owned());
        };
        let sibling = identity::threads(pid)
            .into_iter()
            .filter_map(|tid| g.hierarchy.current(tid).ok())
            .find(|p| g.which(p).is_none());
        Ok(sibling.unwrap_or_else(|| {
            debug!(pid, "no home cgroup known; the root");
            "/".to_owned()
        }))
    }
}
