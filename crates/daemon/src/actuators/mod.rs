//! The kernel interfaces uxsched changes, one file each, each behind the small [`Actuator`]
//! interface. Actuators only name, read and write; the decisions (what, whether it is still ours,
//! journalling) are the reconciler's, which is why it can be tested against a fake kernel
//! (`reconcile/fake.rs`).
//!
//! A setting belongs to a kernel object, and that object — not the thread that asked for the
//! setting — is what uxsched journals and restores ([`Key`]): scheduling attributes and I/O
//! priority belong to a thread, a cgroup v2 placement to a whole process, an autogroup nice to a
//! whole session.

pub mod autogroup;
pub mod cgroup;
pub mod io_class;
pub mod ioprio;
pub mod mover;
pub mod placement;
pub mod prefetch;
pub mod sched;
pub mod unit;
pub mod unit_weight;

use crate::types::Key;
use crate::types::{Kind, Value};
use std::io;
use uxsched_os::identity::TaskId;

/// One kernel interface as the reconciler sees it.
pub trait Actuator {
    fn kind(&self) -> Kind;

    /// The object that `task`'s setting of this kind lives on now; `None` where this interface
    /// has nothing to act on for it (no cgroup hierarchy, no autogroup of its own).
    fn key(&self, task: &TaskId) -> io::Result<Option<Key>>;

    /// A live thread through which `key` can be read and written now; `None` once the object
    /// is gone (the thread or process exited or was recycled, every member of the session
    /// exited).
    fn reach(&self, key: &Key) -> Option<i32>;

    fn read(&self, via: i32) -> io::Result<Value>;

    fn write(&self, via: i32, value: &Value) -> io::Result<()>;

    /// Whether the kernel's value `now` is still what uxsched `applied` (the coexistence check).
    fn holds(&self, now: &Value, applied: &Value) -> bool {
        now == applied
    }

    /// Tasks created by the object at `key` that inherited `applied` on fork and are not
    /// uxsched's to boost (only I/O priority leaks this way: `SCHED_FLAG_RESET_ON_FORK` covers
    /// scheduling attributes, cgroup children are swept by the group sweep).
    fn inheritors(&self, _key: &Key, _applied: &Value) -> io::Result<Vec<TaskId>> {
        Ok(Vec::new())
    }

    /// A reconciler pass begins: an actuator that shares what it read among the pass's
    /// entries (the process tree, for [`Actuator::inheritors`]) drops it here.
    fn new_pass(&self) {}
}

/// The live thread behind a thread or process key (its identity re-checked), else `None`.
pub(crate) fn reach_task(key: &Key) -> Option<i32> {
    match key {
        Key::Thread(t) | Key::Process(t) => uxsched_os::identity::still_same(t).then_some(t.tid),
        Key::Session(_) | Key::Unit(_) => None,
    }
}

/// An actuator was handed another kind's value: a reconciler bug, reported as an error.
pub(crate) fn wrong_kind(kind: Kind, value: &Value) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "{} actuator given a {} value",
            kind.name(),
            value.kind().name()
        ),
    )
}
