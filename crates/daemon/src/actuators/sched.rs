//! Scheduling attributes of one thread as an [`Actuator`]. The `sched_getattr(2)` /
//! `sched_setattr(2)` layer itself is `uxsched_os::sched`.

use crate::types::Key;

use super::Actuator;
use crate::types::{Kind, Value};
use std::io;
use uxsched_os::identity::TaskId;

use uxsched_os::sched::{get, holds, set_keeping_lag};

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
            Value::Sched(a) => set_keeping_lag(via, a),
            other => Err(super::wrong_kind(Kind::Sched, other)),
        }
    }

    fn holds(&self, now: &Value, applied: &Value) -> bool {
        matches!((now, applied), (Value::Sched(n), Value::Sched(a)) if holds(n, a))
    }
}
