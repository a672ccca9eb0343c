//! Scheduling attributes of one thread as an [`Actuator`]. The `sched_getattr(2)` /
//! `sched_setattr(2)` layer itself is `uxsched_os::sched`, shared with the sched_ext backend
//! and re-exported here so the daemon's call sites name it as before.

use super::{Actuator, Key};
use crate::identity::TaskId;
use crate::journal::{Kind, Value};
use std::io;

pub use uxsched_os::sched::*;

/// Raise the calling thread to `nice` (the daemon's loop and tracker thread: −20, the fair
/// class's top, so they do not queue behind the load they protect; never real-time).
pub fn raise_own_nice(nice: i32) -> io::Result<()> {
    // SAFETY: setpriority on this thread's own tid.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, nice) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Scheduling attributes (nice, policy, custom slice) as an [`Actuator`]: one thread each.
pub struct Sched;

impl Actuator for Sched {
    fn kind(&self) -> Kind {
        Kind::Sched
    }

    fn key(&self, task: &TaskId) -> io::Result<Option<Key>> {
        Ok(Some(Key::Thread(*task)))
    }

    fn reach(&self, key: &Key) -> Option<i32> {
        super::reach_task(key)
    }

    fn read(&self, via: i32) -> io::Result<Value> {
        get(via).map(Value::Sched)
    }

    fn write(&self, via: i32, value: &Value) -> io::Result<()> {
        match value {
            Value::Sched(a) => set(via, a),
            other => Err(super::wrong_kind(Kind::Sched, other)),
        }
    }

    fn holds(&self, now: &Value, applied: &Value) -> bool {
        matches!((now, applied), (Value::Sched(n), Value::Sched(a)) if holds(n, a))
    }
}
