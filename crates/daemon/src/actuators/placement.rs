//! Placement in uxsched's CPU cgroups as an [`Actuator`]. cgroup v1 places single threads
//! (`tasks`), so a placement is a thread's; cgroup v2 places whole processes (`cgroup.procs`),
//! so a placement is the process's, journalled and restored once for all its threads.

use super::cgroup::{Groups, Hierarchy};
use super::Actuator;
use crate::types::Key;
use crate::types::{Kind, Value};
use std::io;
use std::rc::Rc;
use uxsched_os::identity::{self, TaskId};

pub struct Placement(pub Rc<Groups>);

impl Placement {
    fn per_process(&self) -> bool {
        matches!(self.0.hierarchy, Hierarchy::V2 { .. })
    }
}

impl Actuator for Placement {
    fn kind(&self) -> Kind {
        Kind::Cgroup
    }

    fn key(&self, task: &TaskId) -> io::Result<Option<Key>> {
        if !self.per_process() {
            return Ok(Some(Key::Thread(*task)));
        }
        let leader = identity::task_id(task.pid)?;
        Ok(Some(Key::Process(leader)))
    }

    fn reach(&self, key: &Key) -> Option<i32> {
        super::reach_task(key)
    }

    /// The group `via` is in, or goes to once its queued move is made: a queued move counts as
    /// made, so the pass after it neither queues it again nor takes it for someone else's.
    fn read(&self, via: i32) -> io::Result<Value> {
        self.0.placed(via).map(Value::Cgroup)
    }

    /// Move into `value`'s group, off the loop's thread where the mover runs (`mover.rs`).
    fn write(&self, via: i32, value: &Value) -> io::Result<()> {
        let Value::Cgroup(path) = value else {
            return Err(super::wrong_kind(Kind::Cgroup, value));
        };
        self.0.place(via, path)
    }
}
