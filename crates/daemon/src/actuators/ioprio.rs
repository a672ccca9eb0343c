//! I/O priority of one thread as an [`Actuator`]; the system calls are `uxsched_os::ioprio`.

use crate::types::Key;

use super::Actuator;
use crate::types::{Kind, Value};
use std::io;
use uxsched_os::identity::{self, TaskId};
use uxsched_os::ioprio::{get, set};
use uxsched_os::process_tree;

/// I/O priority as an [`Actuator`]: one thread each. The kernel copies a thread's I/O priority
/// into every thread and process it creates, and nothing resets it on fork, so a boosted thread's
/// creations are found ([`Actuator::inheritors`]) and put back by the reconciler.
pub struct Ioprio;

impl Actuator for Ioprio {
    fn kind(&self) -> Kind {
        Kind::Ioprio
    }

    fn key(&self, task: &TaskId) -> io::Result<Option<Key>> {
        Ok(Some(Key::Thread(*task)))
    }

    fn reach(&self, key: &Key) -> Option<i32> {
        super::reach_task(key)
    }

    fn read(&self, via: i32) -> io::Result<Value> {
        get(via).map(Value::Ioprio)
    }

    fn write(&self, via: i32, value: &Value) -> io::Result<()> {
        match value {
            Value::Ioprio(v) => set(via, *v),
            other => Err(super::wrong_kind(Kind::Ioprio, other)),
        }
    }

    /// Threads that hold exactly `applied` and were created no earlier than the boosted thread:
    /// while it lives, among its process's other threads and every process descending from it;
    /// once it has exited (its children re-parented), among every thread of the machine.
    fn inheritors(&self, key: &Key, applied: &Value) -> io::Result<Vec<TaskId>> {
        let (Key::Thread(owner), Value::Ioprio(v)) = (key, applied) else {
            return Ok(Vec::new());
        };
        let processes: Vec<i32> = if identity::still_same(owner) {
            process_tree::with_descendants(owner.pid)
                .into_iter()
                .collect()
        } else {
            process_tree::all_processes()?
        };
        let mut found = Vec::new();
        for pid in processes {
            for tid in identity::threads(pid) {
                if tid == owner.tid || get(tid).ok() != Some(*v) {
                    continue;
                }
                match identity::task_id(tid) {
                    Ok(t) if t.start >= owner.start => found.push(t),
                    _ => {}
                }
            }
        }
        Ok(found)
    }
}
