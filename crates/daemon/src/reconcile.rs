//! The reconciler: desired (from the policy) vs journal (what uxsched set) vs kernel (what holds
//! now). Applies the difference, journalling first, and restores every setting that dropped out
//! of the desired set. Unfocus, mode change, `restore`, shutdown and crash recovery are the same
//! call with "desired = nothing".
//!
//! Safety rules, each with the failure it prevents:
//! - *Identity*: a task is (tid, start time), re-checked before and after each change — a
//!   recycled pid (the focused app exited, another process got its number) is never touched.
//! - *Journal first*: the row (original, applied) is committed before the syscall — a SIGKILL
//!   between the two can never leave an unrecorded change behind.
//! - *Coexistence*: a setting is changed or restored only while the kernel still holds what
//!   uxsched applied — if the user, GameMode or the app itself changed it meanwhile, theirs
//!   stands: uxsched forgets the row and does not re-boost that thread for this focus.
//! - *Only raise, only fair*: nice is never raised above the original (no accidental demotion of
//!   a thread someone else boosted) and real-time/deadline/idle threads are left alone.
//! - *Races are normal*: a thread exiting mid-change (ESRCH), no permission, read-only cgroupfs
//!   — logged once per task and setting, never fatal.

use crate::actuators::cgroup::{Group, Groups};
use crate::actuators::{autogroup, ioprio, sched};
use crate::identity::{self, TaskId};
use crate::journal::{Entry, Journal, JournalError, Kind, Value};
use crate::policy::{Desired, Target};
use std::collections::{BTreeMap, HashSet};
use std::io;
use tracing::{debug, info, warn};

/// Bound on the remembered "warned once" / "yielded" keys (no unbounded memory as apps come and go).
const MAX_REMEMBERED: usize = 4096;

pub struct Reconciler {
    pub journal: Journal,
    pub groups: Option<Groups>,
    /// The kernel's default fair slice (restoring it writes "no custom slice").
    default_slice: u64,
    /// Settings someone else changed after uxsched did: left alone until the focus changes.
    yielded: HashSet<(TaskId, Kind)>,
    warned: HashSet<(TaskId, Kind)>,
}

impl Reconciler {
    pub fn new(journal: Journal, groups: Option<Groups>, default_slice: u64) -> Reconciler {
        Reconciler {
            journal,
            groups,
            default_slice,
            yielded: HashSet::new(),
            warned: HashSet::new(),
        }
    }

    /// Forget which settings were yielded to others (called when the focus changes, so a new
    /// interaction starts from a clean slate).
    pub fn new_episode(&mut self) {
        self.yielded.clear();
        self.warned.clear();
    }

    /// Bring the kernel to `desired`. Returns an error only if the journal itself fails
    /// (then nothing more is changed: no change without its journal row).
    pub fn reconcile(&mut self, desired: &Desired) -> Result<(), JournalError> {
        let mut handled: HashSet<(TaskId, Kind)> = HashSet::new();
        // 1. What uxsched already changed: keep, update, restore or yield.
        for entry in self.journal.entries()? {
            let key = (entry.task, entry.kind());
            handled.insert(key);
            if !identity::still_same(&entry.task) {
                debug!(
                    tid = entry.task.tid,
                    kind = entry.kind().name(),
                    "task gone; forgetting"
                );
                self.journal.forget(&entry.task, entry.kind())?;
                continue;
            }
            let want = desired
                .threads
                .get(&entry.task)
                .and_then(|t| self.wanted(entry.kind(), &entry.original, t));
            match want {
                None => self.restore(&entry)?,
                Some(want) => self.keep(&entry, want)?,
            }
        }
        // 2. New changes.
        for (task, target) in &desired.threads {
            for kind in [Kind::Sched, Kind::Cgroup, Kind::Ioprio, Kind::Autogroup] {
                let key = (*task, kind);
                if handled.contains(&key) || self.yielded.contains(&key) {
                    continue;
                }
                if let Err(e) = self.start(task, kind, target) {
                    self.note_error(task, kind, "change", &e);
                }
            }
        }
        // 3. Tasks in uxsched's groups that nothing wants there (children that inherited the
        //    group, leftovers of a killed daemon): back where their process came from.
        self.sweep_groups(desired)?;
        if let Some(g) = &self.groups {
            for (group, shares) in [
                (Group::Fg, desired.fg_shares),
                (Group::Bg, desired.bg_shares),
            ] {
                if g.weight(group).is_some_and(|w| w != shares) {
                    if let Err(e) = g.set_weight(group, shares) {
                        warn!(?group, shares, "cannot set group weight: {e}");
                    }
                }
            }
        }
        Ok(())
    }

    /// The value of `kind` that `target` asks for, given the thread's original value; `None`
    /// when the target leaves that setting alone (or it would not be an improvement).
    fn wanted(&self, kind: Kind, original: &Value, target: &Target) -> Option<Value> {
        match (kind, original) {
            (Kind::Sched, Value::Sched(orig)) => {
                if !orig.is_fair() || (target.nice.is_none() && target.slice_ns.is_none()) {
                    return None;
                }
                let base = sched::restorable(orig, self.default_slice);
                let nice = target.nice.map_or(orig.nice, |n| n.min(orig.nice));
                let runtime = target.slice_ns.unwrap_or(base.runtime);
                if nice == orig.nice && runtime == base.runtime {
                    return None;
                }
                Some(Value::Sched(sched::SchedAttr {
                    flags: orig.flags | sched::SCHED_FLAG_RESET_ON_FORK,
                    nice,
                    runtime,
                    ..base
                }))
            }
            (Kind::Cgroup, Value::Cgroup(orig)) => {
                let rel = self.groups.as_ref()?.rel(target.group?);
                (rel != *orig).then_some(Value::Cgroup(rel))
            }
            (Kind::Ioprio, Value::Ioprio(orig)) => {
                let v = target.ioprio?;
                (v != *orig).then_some(Value::Ioprio(v))
            }
            (Kind::Autogroup, Value::Autogroup(orig)) => {
                let n = target.autogroup_nice?.min(*orig); // only ever raise the session
                (n != *orig).then_some(Value::Autogroup(n))
            }
            _ => None,
        }
    }

    /// First change of one setting of one task: read the original, journal, apply.
    fn start(&mut self, task: &TaskId, kind: Kind, target: &Target) -> io::Result<()> {
        let Some(original) = self.read_original(task, kind)? else {
            return Ok(());
        };
        let Some(applied) = self.wanted(kind, &original, target) else {
            return Ok(());
        };
        if !identity::still_same(task) {
            return Ok(()); // exited (or recycled) since the scan
        }
        let entry = Entry {
            task: *task,
            original,
            applied,
        };
        self.journal.record(&entry).map_err(io::Error::other)?;
        match self.write(task, &entry.applied) {
            Ok(()) => {
                debug!(
                    tid = task.tid,
                    kind = kind.name(),
                    "applied {:?}",
                    entry.applied
                );
                self.check_after(task, kind);
                Ok(())
            }
            Err(e) => {
                self.journal.forget(task, kind).map_err(io::Error::other)?;
                Err(e)
            }
        }
    }

    /// A journalled setting that is still wanted: if the kernel still holds what uxsched
    /// applied, update it to the new wish; otherwise someone else changed it — theirs stands.
    fn keep(&mut self, entry: &Entry, want: Value) -> Result<(), JournalError> {
        let kind = entry.kind();
        match self.holds(&entry.task, &entry.applied) {
            Ok(true) if want == entry.applied => {}
            Ok(true) => {
                let updated = Entry {
                    applied: want,
                    ..entry.clone()
                };
                self.journal.record(&updated)?;
                if let Err(e) = self.write(&entry.task, &updated.applied) {
                    self.note_error(&entry.task, kind, "update", &e);
                }
            }
            Ok(false) => {
                info!(
                    tid = entry.task.tid,
                    kind = kind.name(),
                    "changed by someone else since uxsched set it; leaving theirs"
                );
                self.journal.forget(&entry.task, kind)?;
                if self.yielded.len() < MAX_REMEMBERED {
                    self.yielded.insert((entry.task, kind));
                }
            }
            Err(e) => self.note_error(&entry.task, kind, "read", &e),
        }
        Ok(())
    }

    /// Put the original back if the kernel still holds what uxsched applied; forget the row.
    fn restore(&mut self, entry: &Entry) -> Result<(), JournalError> {
        let kind = entry.kind();
        match self.holds(&entry.task, &entry.applied) {
            Ok(true) => {
                let original = match &entry.original {
                    Value::Sched(a) => Value::Sched(sched::restorable(a, self.default_slice)),
                    other => other.clone(),
                };
                match self.write(&entry.task, &original) {
                    Ok(()) => {
                        debug!(tid = entry.task.tid, kind = kind.name(), "restored");
                        self.check_after(&entry.task, kind);
                    }
                    Err(e) => self.note_error(&entry.task, kind, "restore", &e),
                }
            }
            Ok(false) => info!(
                tid = entry.task.tid,
                kind = kind.name(),
                "not restoring: changed by someone else since uxsched set it"
            ),
            Err(e) => self.note_error(&entry.task, kind, "read", &e),
        }
        self.journal.forget(&entry.task, kind)
    }

    fn read_original(&self, task: &TaskId, kind: Kind) -> io::Result<Option<Value>> {
        Ok(match kind {
            Kind::Sched => Some(Value::Sched(sched::get(task.tid)?)),
            Kind::Ioprio => Some(Value::Ioprio(ioprio::get(task.tid)?)),
            Kind::Autogroup => Some(Value::Autogroup(autogroup::get(task.tid)?)),
            Kind::Cgroup => {
                let Some(g) = &self.groups else {
                    return Ok(None);
                };
                let now = g.hierarchy.current(task.tid)?;
                // A thread born inside uxsched's group inherited it: its original is its
                // process's, or the root.
                Some(Value::Cgroup(if g.which(&now).is_some() {
                    self.process_origin(task.pid)
                } else {
                    now
                }))
            }
        })
    }

    /// The original cgroup journalled for any thread of process `pid`, else the root.
    fn process_origin(&self, pid: i32) -> String {
        self.journal
            .entries()
            .ok()
            .and_then(|es| {
                es.into_iter()
                    .find_map(|e| match (e.task.pid == pid, e.original) {
                        (true, Value::Cgroup(p)) => Some(p),
                        _ => None,
                    })
            })
            .unwrap_or_else(|| "/".to_owned())
    }

    fn holds(&self, task: &TaskId, applied: &Value) -> io::Result<bool> {
        Ok(match applied {
            Value::Sched(a) => sched::holds(&sched::get(task.tid)?, a),
            Value::Ioprio(v) => ioprio::get(task.tid)? == *v,
            Value::Autogroup(n) => autogroup::get(task.tid)? == *n,
            Value::Cgroup(p) => match &self.groups {
                Some(g) => g.hierarchy.current(task.tid)? == *p,
                None => false,
            },
        })
    }

    fn write(&self, task: &TaskId, value: &Value) -> io::Result<()> {
        if !identity::still_same(task) {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        match value {
            Value::Sched(a) => sched::set(task.tid, a),
            Value::Ioprio(v) => ioprio::set(task.tid, *v),
            Value::Autogroup(n) => autogroup::set(task.tid, *n),
            Value::Cgroup(p) => {
                let g = self.groups.as_ref().ok_or(io::ErrorKind::Unsupported)?;
                g.hierarchy.move_to(task.tid, p).or_else(|e| {
                    // The original group may have been removed meanwhile: fall back to the root.
                    if e.kind() == io::ErrorKind::NotFound && p != "/" {
                        g.hierarchy.move_to(task.tid, "/")
                    } else {
                        Err(e)
                    }
                })
            }
        }
    }

    /// rtkit's "after" check: if the task is no longer the one we meant, say so loudly.
    fn check_after(&self, task: &TaskId, kind: Kind) {
        if identity::task_id(task.tid).is_ok_and(|now| now.start != task.start) {
            warn!(
                tid = task.tid,
                kind = kind.name(),
                "tid was recycled during the change"
            );
        }
    }

    fn note_error(&mut self, task: &TaskId, kind: Kind, what: &str, e: &io::Error) {
        if e.raw_os_error() == Some(libc::ESRCH) || e.kind() == io::ErrorKind::NotFound {
            debug!(
                tid = task.tid,
                kind = kind.name(),
                "thread exited during {what}"
            );
            return;
        }
        if self.warned.len() < MAX_REMEMBERED && self.warned.insert((*task, kind)) {
            warn!(
                tid = task.tid,
                pid = task.pid,
                kind = kind.name(),
                "cannot {what}: {e}"
            );
        }
    }

    /// Move tasks that nothing wants in uxsched's groups back to their process's original group.
    fn sweep_groups(&mut self, desired: &Desired) -> Result<(), JournalError> {
        let Some(g) = &self.groups else {
            return Ok(());
        };
        let mut wanted: BTreeMap<i32, Group> = BTreeMap::new();
        for (task, t) in &desired.threads {
            if let Some(group) = t.group {
                wanted.insert(task.tid, group);
            }
        }
        let journalled: HashSet<i32> = self
            .journal
            .entries()?
            .into_iter()
            .filter(|e| e.kind() == Kind::Cgroup)
            .map(|e| e.task.tid)
            .collect();
        for group in [Group::Fg, Group::Bg] {
            for tid in g.members(group) {
                if wanted.get(&tid) == Some(&group) || journalled.contains(&tid) {
                    continue;
                }
                let Ok(pid) = identity::tgid(tid) else {
                    continue;
                };
                let home = self.process_origin(pid);
                match g.hierarchy.move_to(tid, &home) {
                    Ok(()) => debug!(tid, home, "moved out of uxsched's group"),
                    Err(e) => {
                        let _ = g.hierarchy.move_to(tid, "/");
                        debug!(tid, "moving out of uxsched's group: {e}");
                    }
                }
            }
        }
        Ok(())
    }
}
