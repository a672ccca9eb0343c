//! The reconciler: desired (from the policy) vs journal (what uxsched set) vs kernel (what holds
//! now). Applies the difference, journalling first, and restores every setting that dropped out
//! of the desired set. Unfocus, mode change, `restore`, shutdown and crash recovery are the same
//! call with "desired = nothing".
//!
//! Safety rules, each with the failure it prevents:
//! - *Objects, not threads*: a setting is journalled under the kernel object it changes
//!   ([`Key`]: a thread, a process for cgroup v2, a session for autogroup nice) and restored when
//!   that object leaves the desired set — so a session's autogroup is put back when the app
//!   that raised it exits, through any process still in the session.
//! - *Identity*: a task is (tid, start time), re-checked before and after each change; a change
//!   that landed on a recycled tid is undone at once.
//! - *Journal first*: the row (object, original, applied) is committed before the syscall — a
//!   SIGKILL between the two can never leave an unrecorded change behind.
//! - *Coexistence*: a setting is changed or restored only while the kernel still holds what
//!   uxsched applied — if someone else changed it meanwhile, theirs stands and uxsched does not
//!   re-boost it for this focus.
//! - *Only raise, only fair*: nice is never raised above the original and real-time/deadline/
//!   idle threads are left alone; a real-time class (`Target::rt`, an app's grant) is put only
//!   on a fair thread, with `SCHED_FLAG_RESET_ON_FORK`, and restored to its fair original.
//! - *No inherited leftovers*: what forks copy and nothing resets (I/O priority) is swept back
//!   from the boosted thread's creations ([`sweep`]).
//! - *Failures are visible*: a restore that fails keeps its row (retried every pass) and is
//!   listed in [`Reconciler::failures`] for `status`; a thread exiting mid-change is normal.

mod add;
#[cfg(test)]
mod fake;
mod keep;
mod sweep;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_ext;
#[cfg(test)]
mod tests_levers;
#[cfg(test)]
mod tests_rt;
#[cfg(test)]
mod tests_uclamp;
#[cfg(test)]
mod tests_unit_io;
mod values;
mod yields;

use crate::actuators::autogroup::Autogroup;
use crate::actuators::cgroup::Groups;
use crate::actuators::ioprio::Ioprio;
use crate::actuators::placement::Placement;
use crate::actuators::sched::Sched;
use crate::actuators::unit_weight::UnitWeight;
use crate::actuators::Actuator;
use crate::journal::{Entry, Journal, JournalError};
use crate::types::Group;
use crate::types::Key;
use crate::types::{Desired, Target};
use crate::types::{Kind, Value};
use std::collections::{BTreeMap, HashSet};
use std::io;
use std::rc::Rc;
use tracing::{debug, info, warn};
use uxsched_model::weights::shares_to_cgroup_weight;
use uxsched_os::identity::{self, TaskId};

/// Bound on the remembered "warned once" / "yielded" / failure keys (no unbounded memory as
/// apps come and go).
const MAX_REMEMBERED: usize = 4096;

/// Task identity as the reconciler needs it (the real one reads /proc; tests use a fake).
pub trait Tasks {
    /// Whether `task` is still the live task it was (not exited, not recycled).
    fn still_same(&self, task: &TaskId) -> bool;
    /// The identity of whatever task has `tid` now.
    fn task_id(&self, tid: i32) -> io::Result<TaskId>;
    /// Whether `task` started less than [`sweep::INHERIT_GRACE`] ago.
    fn newborn(&self, task: &TaskId) -> bool;
}

/// The running kernel's tasks.
pub struct ProcTasks;

impl Tasks for ProcTasks {
    fn still_same(&self, task: &TaskId) -> bool {
        identity::still_same(task)
    }
    fn task_id(&self, tid: i32) -> io::Result<TaskId> {
        identity::task_id(tid)
    }
    fn newborn(&self, task: &TaskId) -> bool {
        identity::age(task).is_some_and(|a| a < sweep::INHERIT_GRACE)
    }
}

/// One setting of one object: the reconciler's unit of work.
type Setting = (Kind, Key);

/// What the desired set wants of one object: the thread that asks and its target.
type Wants = BTreeMap<Setting, (TaskId, Target)>;

pub struct Reconciler {
    pub journal: Journal,
    pub groups: Option<Rc<Groups>>,
    actuators: Vec<Box<dyn Actuator>>,
    tasks: Box<dyn Tasks>,
    /// The kernel's default fair slice (restoring it writes "no custom slice").
    default_slice: u64,
    /// Settings someone else changed after uxsched did: left alone until the focus changes,
    /// or until uxsched wants more of them than they overrode (`yields.rs`).
    yielded: yields::Yields,
    warned: HashSet<Setting>,
    /// Settings uxsched could not change or restore, with the error (shown by `status`).
    pub failures: BTreeMap<Setting, String>,
    /// `cpu.weight` for a unit whose app is wanted in the fg / bg group (systemd machines).
    unit_weights: (u64, u64),
    /// `io.weight` for the unit in front / a background app's unit (0: left alone).
    unit_io_weights: (u64, u64),
    /// Threads whose scheduling the rt lever's guard wrote since the last pass (`rt_guard.rs`):
    /// uxsched's own change, not someone else's.
    guard: Option<crate::rt_guard::Demoted>,
    /// A `SCHED_EXT` thread met for the first time inherited the class from one the `scx`
    /// backend switched (a new thread of the app): its original is `SCHED_OTHER`.
    pub ext_inherited: bool,
    /// A disk runs BFQ: a thread reniced below 0 that has no I/O priority of its own gets
    /// best-effort level 4 while it is raised (`values.rs`, [`PINNED_IO_LEVEL`]).
    pub pin_io_weight: bool,
}

/// The I/O priority a thread has at nice 0 (best effort, level 4), written explicitly on a
/// thread uxsched renices where a disk runs BFQ. Without it the kernel derives the level from
/// the nice (`(nice + 20) / 5`: 3 at nice −1…−5), BFQ gives the queue the weight of that level
/// (50, not 40), and BFQ weight-raises only queues of the default weight
/// (`bfq_update_bfqq_wr_on_rq_arrival`'s `new_weight == 40`: "otherwise we assume the user
/// wanted to control its weight explicitly"), so a reniced app loses the ×30 boost of its
/// interactive and soft real-time reads while a background job started beside it keeps it
/// (docs/storage.md, "The BFQ stall, found").
pub const PINNED_IO_LEVEL: u16 = 4;

impl Reconciler {
    /// A reconciler acting on the running kernel through the real actuators.
    pub fn new(journal: Journal, groups: Option<Groups>, default_slice: u64) -> Reconciler {
        let groups = groups.map(Rc::new);
        let mut actuators: Vec<Box<dyn Actuator>> = vec![
            Box::new(Sched),
            Box::new(Ioprio::default()),
            Box::new(Autogroup),
        ];
        if let Some(g) = &groups {
            actuators.push(Box::new(Placement(g.clone())));
        }
        Reconciler::with_kernel(
            journal,
            groups,
            actuators,
            Box::new(ProcTasks),
            default_slice,
        )
    }

    /// A reconciler over any kernel (tests use a fake one).
    pub fn with_kernel(
        journal: Journal,
        groups: Option<Rc<Groups>>,
        actuators: Vec<Box<dyn Actuator>>,
        tasks: Box<dyn Tasks>,
        default_slice: u64,
    ) -> Reconciler {
        Reconciler {
            journal,
            groups,
            actuators,
            tasks,
            default_slice,
            yielded: yields::Yields::default(),
            warned: HashSet::new(),
            failures: BTreeMap::new(),
            unit_weights: (0, 0),
            unit_io_weights: (0, 0),
            guard: None,
            ext_inherited: false,
            pin_io_weight: false,
        }
    }

    /// A reconciler for a systemd machine: placement raises the app's own unit's `CPUWeight`
    /// (`actuators/unit_weight.rs`) instead of moving processes into uxsched's groups, and the
    /// storage lever its `IOWeight`.
    pub fn with_units(journal: Journal, cgroup2: std::path::PathBuf, default_slice: u64) -> Self {
        use crate::actuators::unit::Property;
        let actuators: Vec<Box<dyn Actuator>> = vec![
            Box::new(Sched),
            Box::new(Ioprio::default()),
            Box::new(Autogroup),
            Box::new(UnitWeight::new(cgroup2.clone(), Property::Cpu)),
            Box::new(UnitWeight::new(cgroup2, Property::Io)),
        ];
        Reconciler::with_kernel(journal, None, actuators, Box::new(ProcTasks), default_slice)
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
        self.unit_weights = (
            shares_to_cgroup_weight(desired.fg_shares),
            shares_to_cgroup_weight(desired.bg_shares),
        );
        self.unit_io_weights = desired.unit_io_weights;
        self.failed_moves()?;
        for act in &self.actuators {
            act.new_pass();
        }
        let wants = self.wants(desired);
        let mut entries = self.journal.entries()?;
        // Scheduling first: a real-time thread goes back to the fair class before it moves
        // back to a group that may refuse real-time threads (RT group scheduling).
        entries.sort_by_key(|e| e.kind() != Kind::Sched);
        let protected = sweep::protected(&wants, &entries);
        let mut handled: HashSet<Setting> = HashSet::new();
        // 1. What uxsched already changed: keep, update, restore or yield.
        for entry in &entries {
            let id = (entry.kind(), entry.key);
            handled.insert(id);
            self.settle(entry, wants.get(&id), &protected)?;
        }
        // 2. New changes.
        for (&(kind, key), (task, target)) in &wants {
            if handled.contains(&(kind, key)) || self.yielded.holds(&(kind, key), target) {
                continue;
            }
            match self.start(kind, key, task, target) {
                Ok(()) => {
                    self.failures.remove(&(kind, key));
                }
                Err(e) => self.note_error((kind, key), "change", &e),
            }
        }
        // 3. Tasks in uxsched's groups that nothing wants there (children that inherited the
        //    group, leftovers of a killed daemon): back where their process came from.
        self.sweep_groups(desired)?;
        self.set_group_weights(desired);
        Ok(())
    }

    fn act(&self, kind: Kind) -> Option<&dyn Actuator> {
        self.actuators
            .iter()
            .find(|a| a.kind() == kind)
            .map(|a| a.as_ref())
    }

    /// The desired set per object: each thread's target, for each kind it names, under the
    /// object that kind lives on (the first thread naming an object speaks for it).
    fn wants(&mut self, desired: &Desired) -> Wants {
        let mut wants = Wants::new();
        let mut errors = Vec::new();
        for (task, target) in &desired.threads {
            for act in &self.actuators {
                let kind = act.kind();
                if !self.names(target, kind) {
                    continue;
                }
                match act.key(task) {
                    Ok(Some(key)) => {
                        let want = wants.entry((kind, key)).or_insert((*task, target.clone()));
                        // A unit shared by the front and a background app is the front's.
                        if kind == Kind::UnitIo && target.unit_io == Some(Group::Fg) {
                            *want = (*task, target.clone());
                        }
                    }
                    Ok(None) => {}
                    Err(e) => errors.push(((kind, Key::Thread(*task)), e)),
                }
            }
        }
        for (id, e) in errors {
            self.note_error(id, "find the object of", &e);
        }
        wants
    }

    /// A live thread through which the object of `entry` is reached: the thread it was
    /// journalled under while that still belongs to the object, else any the actuator finds.
    fn reach(&self, act: &dyn Actuator, entry: &Entry) -> Option<i32> {
        if self.tasks.still_same(&entry.via)
            && act.key(&entry.via).ok().flatten() == Some(entry.key)
        {
            return Some(entry.via.tid);
        }
        act.reach(&entry.key)
    }

    /// One journalled setting: restore it (object no longer wanted), keep or update it, or
    /// forget it (object gone). I/O priorities its thread's creations inherited go back too.
    fn settle(
        &mut self,
        entry: &Entry,
        want: Option<&(TaskId, Target)>,
        protected: &HashSet<Key>,
    ) -> Result<(), JournalError> {
        let id = (entry.kind(), entry.key);
        let Some(act) = self.act(entry.kind()) else {
            warn!(
                object = entry.key.describe(),
                kind = entry.kind().name(),
                "no way to reach this kind of setting any more (its cgroup hierarchy is gone); \
                 forgetting it — check the object by hand"
            );
            return self.journal.forget(id.0, &id.1);
        };
        let wanted = want.and_then(|(task, target)| {
            let v = self.wanted(entry.kind(), &entry.original, target)?;
            Some((*task, v))
        });
        let unchanged = wanted.as_ref().is_some_and(|(_, v)| *v == entry.applied);
        self.sweep_inheritors(act, entry, protected, unchanged);
        let Some(via) = self.reach(act, entry) else {
            debug!(
                object = entry.key.describe(),
                kind = entry.kind().name(),
                "object gone; forgetting"
            );
            self.failures.remove(&id);
            return self.journal.forget(id.0, &id.1);
        };
        match wanted {
            None => self.restore(entry, via),
            Some((task, v)) => self.keep(entry, via, task, v).map(|_| ()),
        }
    }

    /// First change of one setting of one object: read the original, journal, apply.
    fn start(&mut self, kind: Kind, key: Key, task: &TaskId, target: &Target) -> io::Result<()> {
        let Some(entry) = self.plan_start(kind, key, task, target)? else {
            return Ok(());
        };
        self.journal.record(&entry).map_err(io::Error::other)?;
        self.apply_start(&entry).map(|_| ())
    }

    /// The row a first change would journal: the original read now and what to apply, or
    /// `None` (nothing to raise, or the task exited or was recycled since the scan).
    fn plan_start(
        &self,
        kind: Kind,
        key: Key,
        task: &TaskId,
        target: &Target,
    ) -> io::Result<Option<Entry>> {
        let Some(original) = self.read_original(kind, task)? else {
            return Ok(None);
        };
        let Some(applied) = self.wanted(kind, &original, target) else {
            return Ok(None);
        };
        if !self.tasks.still_same(task) {
            return Ok(None); // exited (or recycled) since the scan
        }
        Ok(Some(Entry {
            key,
            via: *task,
            original,
            applied,
            previous: None,
        }))
    }

    /// Write a journalled first change, then check the identity after it. True when the
    /// change holds on the task it was meant for.
    fn apply_start(&mut self, entry: &Entry) -> io::Result<bool> {
        let kind = entry.kind();
        let act = self.act(kind).ok_or(io::ErrorKind::Unsupported)?;
        match act.write(entry.via.tid, &entry.applied) {
            Ok(()) => {
                debug!(
                    object = entry.key.describe(),
                    kind = kind.name(),
                    "applied {:?}",
                    entry.applied
                );
                self.check_after(entry).map_err(io::Error::other)
            }
            Err(e) => {
                self.journal
                    .forget(kind, &entry.key)
                    .map_err(io::Error::other)?;
                Err(e)
            }
        }
    }

    /// Count the rt lever guard's demotions as uxsched's own writes.
    pub fn trust(&mut self, guard: crate::rt_guard::Demoted) {
        self.guard = Some(guard);
    }

    /// Put the original back if the kernel still holds what uxsched applied, then forget the
    /// row. A restore that fails for another reason than the object leaving keeps its row, so
    /// the next pass (or the next daemon) tries again, and `status` shows it.
    fn restore(&mut self, entry: &Entry, via: i32) -> Result<(), JournalError> {
        let id = (entry.kind(), entry.key);
        let Some(act) = self.act(id.0) else {
            return Ok(());
        };
        let result = act.read(via).and_then(|now| {
            if !entry.is_ours(&now, |a, b| act.holds(a, b)) && !self.guard_wrote(entry) {
                info!(
                    object = entry.key.describe(),
                    kind = id.0.name(),
                    "not restoring: changed by someone else since uxsched set it"
                );
                return Ok(());
            }
            act.write(via, &self.restorable(&entry.original))?;
            debug!(
                object = entry.key.describe(),
                kind = id.0.name(),
                "restored"
            );
            Ok(())
        });
        match result {
            Ok(()) => {}
            Err(e) if gone(&e) => debug!(object = entry.key.describe(), "gone during restore"),
            Err(e) => {
                self.note_error(id, "restore", &e);
                return Ok(()); // keep the row: retried on the next pass
            }
        }
        self.failures.remove(&id);
        self.journal.forget(id.0, &id.1)
    }

    fn read_original(&self, kind: Kind, task: &TaskId) -> io::Result<Option<Value>> {
        let Some(act) = self.act(kind) else {
            return Ok(None);
        };
        let now = act.read(task.tid)?;
        if let Some(inherited) = self.inherited_original(act, task, &now)? {
            return Ok(Some(inherited));
        }
        if let (Value::Sched(a), true) = (&now, self.ext_inherited) {
            if a.is_ext() {
                return Ok(Some(Value::Sched(a.inherited_ext_origin())));
            }
        }
        if let (Value::Cgroup(path), Some(g)) = (&now, &self.groups) {
            if g.which(path).is_some() {
                // Born inside uxsched's group (inherited it): its home is its process's.
                return Ok(Some(Value::Cgroup(
                    self.process_origin(task.pid).map_err(io::Error::other)?,
                )));
            }
        }
        Ok(Some(now))
    }

    /// The original of a task that holds what uxsched applied to a thread it was forked from
    /// (the kernel copies the I/O class on fork): that thread's original. A child raised while
    /// it still holds the inherited class (a launch exec'd within the inheritance grace) would
    /// otherwise be journalled with nothing to restore, and keep the class after the boost.
    fn inherited_original(
        &self,
        act: &dyn Actuator,
        task: &TaskId,
        now: &Value,
    ) -> io::Result<Option<Value>> {
        // I/O priority is the only setting a fork copies that uxsched does not reset; and a
        // task of class none (most) holds nothing uxsched applies, which is always a class:
        // the journal is read only for a task that may have inherited one.
        if act.kind() != Kind::Ioprio || *now == Value::Ioprio(0) {
            return Ok(None);
        }
        let entries = self.journal.entries().map_err(io::Error::other)?;
        for e in entries
            .iter()
            .filter(|e| e.kind() == act.kind() && e.applied == *now && e.key != Key::Thread(*task))
        {
            if act.inheritors(&e.key, &e.applied)?.contains(task) {
                return Ok(Some(e.original.clone()));
            }
        }
        Ok(None)
    }

    /// rtkit's "after" check: if the tid no longer names the task we meant, the change may
    /// have landed on a new task that took the number — undo it there at once.
    fn check_after(&mut self, entry: &Entry) -> Result<bool, JournalError> {
        if self.tasks.still_same(&entry.via) {
            return Ok(true);
        }
        let tid = entry.via.tid;
        if let (Ok(now), Some(act)) = (self.tasks.task_id(tid), self.act(entry.kind())) {
            warn!(
                tid,
                kind = entry.kind().name(),
                new_start = now.start,
                "tid was recycled during the change; undoing it on the new task"
            );
            let undone = act.read(tid).and_then(|v| {
                if entry.is_ours(&v, |a, b| act.holds(a, b)) {
                    act.write(tid, &self.restorable(&entry.original))
                } else {
                    Ok(())
                }
            });
            if let Err(e) = undone {
                if !gone(&e) {
                    warn!(tid, "cannot undo the change on the recycled tid: {e}");
                }
            }
        }
        self.journal.forget(entry.kind(), &entry.key)?;
        Ok(false)
    }

    /// Log an error once per setting (a thread exiting mid-change is normal and only debug)
    /// and remember it for `status`.
    fn note_error(&mut self, id: Setting, what: &str, e: &io::Error) {
        if gone(e) {
            debug!(
                object = id.1.describe(),
                kind = id.0.name(),
                "exited during {what}"
            );
            return;
        }
        if self.failures.len() < MAX_REMEMBERED || self.failures.contains_key(&id) {
            self.failures.insert(id, format!("cannot {what}: {e}"));
        }
        if self.warned.len() < MAX_REMEMBERED && self.warned.insert(id) {
            warn!(
                object = id.1.describe(),
                kind = id.0.name(),
                "cannot {what}: {e}; uxsched retries on every pass — `uxsched status` lists it"
            );
        }
    }
}

/// Whether an error only says that the task or object is gone.
fn gone(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ESRCH) || e.kind() == io::ErrorKind::NotFound
}

impl Reconciler {
    /// Whether `target` says anything about `kind` (where a disk runs BFQ, a lowered nice speaks
    /// for the I/O priority too: [`PINNED_IO_LEVEL`]).
    fn names(&self, target: &Target, kind: Kind) -> bool {
        match kind {
            Kind::Sched => {
                target.nice.is_some()
                    || target.slice_ns.is_some()
                    || target.rt.is_some()
                    || target.uclamp_min.is_some()
                    || target.ext
            }
            Kind::Cgroup | Kind::Unit => target.group.is_some(),
            // Any side, while either weight is set: a front that asks nothing still keeps a
            // unit it shares with a background app from being lowered (`wants`).
            Kind::UnitIo => target.unit_io.is_some() && self.unit_io_weights != (0, 0),
            Kind::Ioprio => target.ioprio.is_some() || (self.pin_io_weight && lowers_nice(target)),
            Kind::Autogroup => target.autogroup_nice.is_some(),
        }
    }
}

/// Whether `target` renices its thread below 0 in the fair class (the I/O level the kernel
/// derives from the nice drops). A real-time thread is left out: with no I/O priority of its
/// own the kernel derives the real-time I/O class from its policy, which a pin would take away.
fn lowers_nice(target: &Target) -> bool {
    target.rt.is_none() && target.nice.is_some_and(|n| n < 0)
}

/// Name of a group for logs.
fn group_name(g: Group) -> &'static str {
    match g {
        Group::Fg => "fg",
        Group::Bg => "bg",
    }
}
