//! A fake kernel for the reconciler's unit tests: threads with scheduling attributes and I/O
//! priorities, processes, sessions with an autogroup nice, forks that copy the I/O priority,
//! exits and recycled tids — everything the real actuators reach through /proc and syscalls.

use super::{Reconciler, Tasks};
use crate::actuators::Actuator;
use crate::journal::Journal;
use crate::types::Key;
use crate::types::{Kind, Value};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};
use std::io;
use std::rc::Rc;
use uxsched_os::identity::TaskId;
use uxsched_os::sched::{SchedAttr, Uclamp, SCHED_OTHER};

pub const DEFAULT_SLICE: u64 = 2_800_000;

#[derive(Debug, Clone)]
pub struct Task {
    pub id: TaskId,
    pub sched: SchedAttr,
    pub ioprio: u16,
    pub session: u64,
    /// The thread that created it (I/O priority is copied from it).
    pub parent: Option<i32>,
}

#[derive(Debug, Default)]
pub struct World {
    pub tasks: BTreeMap<i32, Task>,
    pub sessions: BTreeMap<u64, i32>,
    /// systemd units' CPUWeight, one unit per session here (absent = not set).
    pub units: BTreeMap<u64, u64>,
    /// Their IOWeight, the same way.
    pub unit_io: BTreeMap<u64, u64>,
    /// Tasks that started less than the inheritance grace ago.
    pub newborn: HashSet<i32>,
    /// Writes that fail with EACCES, by kind.
    pub refuse: HashSet<Kind>,
    /// A tid recycled (exits and is reborn with this start time) right before the next write.
    pub recycle_on_write: Option<(i32, u64)>,
    pub writes: usize,
    /// A kernel before 6.12: a fair thread has no custom slice (`sched_getattr` reports no
    /// runtime for it, `sched_setattr` ignores one).
    pub before_6_12: bool,
}

pub type Shared = Rc<RefCell<World>>;

pub fn default_attr(nice: i32) -> SchedAttr {
    SchedAttr {
        policy: SCHED_OTHER,
        flags: 0,
        nice,
        priority: 0,
        runtime: DEFAULT_SLICE,
        deadline: 0,
        period: 0,
        uclamp: None,
    }
}

impl World {
    /// A new task; a thread `parent` creates inherits its I/O priority and session.
    pub fn spawn(&mut self, tid: i32, pid: i32, session: u64, parent: Option<i32>) -> TaskId {
        let id = TaskId {
            tid,
            pid,
            start: 100 + tid as u64,
        };
        let from = parent.and_then(|p| self.tasks.get(&p));
        let ioprio = from.map_or(0x4004, |p| p.ioprio); // BE 4, the kernel's default for nice 0
        let session = from.map_or(session, |p| p.session);
        self.sessions.entry(session).or_insert(0);
        let mut sched = default_attr(0);
        if self.before_6_12 {
            sched.runtime = 0;
        }
        self.tasks.insert(
            tid,
            Task {
                id,
                sched,
                ioprio,
                session,
                parent,
            },
        );
        id
    }

    pub fn exit(&mut self, tid: i32) {
        self.tasks.remove(&tid);
    }

    pub fn task(&self, tid: i32) -> &Task {
        &self.tasks[&tid]
    }

    fn alive(&self, t: &TaskId) -> bool {
        self.tasks.get(&t.tid).is_some_and(|x| x.id == *t)
    }
}

fn esrch() -> io::Error {
    io::Error::from_raw_os_error(libc::ESRCH)
}

/// One fake actuator per kind, all over one shared world.
pub struct FakeActuator {
    pub kind: Kind,
    pub world: Shared,
}

impl Actuator for FakeActuator {
    fn kind(&self) -> Kind {
        self.kind
    }

    fn key(&self, task: &TaskId) -> io::Result<Option<Key>> {
        if !matches!(self.kind, Kind::Autogroup | Kind::Unit | Kind::UnitIo) {
            // A thread is its own object, read without a look at it (as `actuators/` do): a
            // thread that exited since the scan is still named by a desired set.
            return Ok(Some(Key::Thread(*task)));
        }
        let w = self.world.borrow();
        let t = w.tasks.get(&task.tid).ok_or_else(esrch)?;
        Ok(Some(match self.kind {
            Kind::Autogroup => Key::Session(t.session),
            _ => Key::Unit(t.session),
        }))
    }

    fn reach(&self, key: &Key) -> Option<i32> {
        let w = self.world.borrow();
        match key {
            Key::Thread(t) | Key::Process(t) => w.alive(t).then_some(t.tid),
            Key::Session(s) | Key::Unit(s) => {
                w.tasks.values().find(|t| t.session == *s).map(|t| t.id.tid)
            }
        }
    }

    fn read(&self, via: i32) -> io::Result<Value> {
        let w = self.world.borrow();
        let t = w.tasks.get(&via).ok_or_else(esrch)?;
        Ok(match self.kind {
            // Like `get_params` in kernel/sched/syscalls.c: an RT task reports its priority
            // but neither nice nor slice.
            Kind::Sched if t.sched.is_rt() => Value::Sched(SchedAttr {
                nice: 0,
                runtime: 0,
                ..t.sched
            }),
            Kind::Sched => Value::Sched(t.sched),
            Kind::Ioprio => Value::Ioprio(t.ioprio),
            Kind::Autogroup => Value::Autogroup(w.sessions[&t.session]),
            Kind::Unit => Value::Unit(
                w.units
                    .get(&t.session)
                    .copied()
                    .unwrap_or(crate::actuators::unit::UNSET),
            ),
            Kind::UnitIo => Value::UnitIo(
                w.unit_io
                    .get(&t.session)
                    .copied()
                    .unwrap_or(crate::actuators::unit::UNSET),
            ),
            Kind::Cgroup => return Err(io::ErrorKind::Unsupported.into()),
        })
    }

    fn write(&self, via: i32, value: &Value) -> io::Result<()> {
        let mut w = self.world.borrow_mut();
        if let Some((tid, start)) = w.recycle_on_write.take() {
            let t = w.tasks.get_mut(&tid).ok_or_else(esrch)?;
            t.id.start = start;
        }
        if w.refuse.contains(&self.kind) {
            return Err(io::Error::from_raw_os_error(libc::EACCES));
        }
        w.writes += 1;
        let session = w.tasks.get(&via).ok_or_else(esrch)?.session;
        match value {
            Value::Autogroup(n) => {
                w.sessions.insert(session, *n);
            }
            Value::Sched(a) => {
                let before_6_12 = w.before_6_12;
                let t = w.tasks.get_mut(&via).ok_or_else(esrch)?;
                t.sched = kernel_sched_write(&t.sched, a)?;
                if before_6_12 {
                    t.sched.runtime = 0;
                }
            }
            Value::Ioprio(v) => w.tasks.get_mut(&via).ok_or_else(esrch)?.ioprio = *v,
            Value::Unit(u) => {
                w.units.insert(session, *u);
            }
            Value::UnitIo(u) => {
                w.unit_io.insert(session, *u);
            }
            Value::Cgroup(_) => return Err(io::ErrorKind::Unsupported.into()),
        }
        Ok(())
    }

    fn holds(&self, now: &Value, applied: &Value) -> bool {
        match (now, applied) {
            (Value::Sched(n), Value::Sched(a)) => uxsched_os::sched::holds(n, a),
            _ => now == applied,
        }
    }

    /// Live tasks created (transitively) by the owner, or by nobody alive once it has exited,
    /// that hold `applied`.
    fn inheritors(&self, key: &Key, applied: &Value) -> io::Result<Vec<TaskId>> {
        let (Kind::Ioprio, Key::Thread(owner), Value::Ioprio(v)) = (self.kind, key, applied) else {
            return Ok(Vec::new());
        };
        let w = self.world.borrow();
        let descends = |t: &Task| {
            let mut p = t.parent;
            while let Some(tid) = p {
                if tid == owner.tid {
                    return true;
                }
                p = w.tasks.get(&tid).and_then(|x| x.parent);
            }
            !w.alive(owner) && t.id.start >= owner.start
        };
        Ok(w.tasks
            .values()
            .filter(|t| t.id.tid != owner.tid && t.ioprio == *v && descends(t))
            .map(|t| t.id)
            .collect())
    }
}

/// What the kernel holds after `sched_setattr(a)` on a thread holding `old`: "no custom slice"
/// reads back as the default; `uclamp.min` changes only with SCHED_FLAG_UTIL_CLAMP_MIN (refused
/// with EOPNOTSUPP on a kernel without uclamp: `old.uclamp` is `None`), which is not kept.
fn kernel_sched_write(old: &SchedAttr, a: &SchedAttr) -> io::Result<SchedAttr> {
    use uxsched_os::sched::{SCHED_FLAG_UTIL_CLAMP_MAX, SCHED_FLAG_UTIL_CLAMP_MIN};
    let mut a = *a;
    if a.runtime == 0 {
        a.runtime = DEFAULT_SLICE;
    }
    let clamp = a.flags & SCHED_FLAG_UTIL_CLAMP_MIN != 0;
    a.flags &= !(SCHED_FLAG_UTIL_CLAMP_MIN | SCHED_FLAG_UTIL_CLAMP_MAX);
    a.uclamp = match (old.uclamp, a.uclamp) {
        (None, _) if clamp => return Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP)),
        (Some(o), Some(n)) if clamp => Some(Uclamp { min: n.min, ..o }),
        (o, _) => o,
    };
    Ok(a)
}

pub struct FakeTasks(pub Shared);

impl Tasks for FakeTasks {
    fn still_same(&self, task: &TaskId) -> bool {
        self.0.borrow().alive(task)
    }
    fn task_id(&self, tid: i32) -> io::Result<TaskId> {
        self.0
            .borrow()
            .tasks
            .get(&tid)
            .map(|t| t.id)
            .ok_or_else(esrch)
    }
    fn newborn(&self, task: &TaskId) -> bool {
        self.0.borrow().newborn.contains(&task.tid)
    }
}

/// A reconciler over `world`, with its journal at `journal`.
pub fn reconciler(world: &Shared, journal: &std::path::Path) -> Reconciler {
    reconciler_of(
        world,
        journal,
        &[Kind::Sched, Kind::Ioprio, Kind::Autogroup],
    )
}

/// The same on a systemd machine: placement is the unit's weight.
pub fn reconciler_with_units(world: &Shared, journal: &std::path::Path) -> Reconciler {
    reconciler_of(world, journal, &[Kind::Sched, Kind::Unit, Kind::UnitIo])
}

/// A reconciler as the daemon makes it on a kernel before 6.12, whose default slice reads 0.
pub fn reconciler_before_6_12(world: &Shared, journal: &std::path::Path) -> Reconciler {
    let mut rec = reconciler(world, journal);
    rec.default_slice = 0;
    rec
}

fn reconciler_of(world: &Shared, journal: &std::path::Path, kinds: &[Kind]) -> Reconciler {
    let actuators: Vec<Box<dyn Actuator>> = kinds
        .iter()
        .map(|&kind| {
            Box::new(FakeActuator {
                kind,
                world: world.clone(),
            }) as Box<dyn Actuator>
        })
        .collect();
    let journal = Journal::open(journal, |_| None).unwrap();
    Reconciler::with_kernel(
        journal,
        None,
        actuators,
        Box::new(FakeTasks(world.clone())),
        DEFAULT_SLICE,
    )
}

/// A world with one thread (tid 100 of pid 100, started at 7) and a directory for the journal.
pub fn one_thread() -> (Shared, tempfile::TempDir, TaskId) {
    let w = Rc::new(RefCell::new(World::default()));
    let dir = tempfile::tempdir().unwrap();
    let task = w.borrow_mut().spawn(100, 100, 7, None);
    (w, dir, task)
}

/// Desired state: `t` for `task`, nothing else.
pub fn want_one(task: TaskId, t: crate::types::Target) -> crate::types::Desired {
    want(&[(task, t)])
}

/// Desired state: these threads' targets, nothing else.
pub fn want(tasks: &[(TaskId, crate::types::Target)]) -> crate::types::Desired {
    let mut d = nothing();
    d.threads = tasks.iter().cloned().collect();
    d
}

/// Desired state: nothing at all.
pub fn nothing() -> crate::types::Desired {
    crate::types::Desired::nothing(&crate::config::Config::default())
}
