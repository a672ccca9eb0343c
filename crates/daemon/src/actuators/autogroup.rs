//! A session's autogroup nice as an [`Actuator`]; reading and writing it is
//! `uxsched_os::autogroup`.

use crate::types::Key;

use super::Actuator;
use crate::types::{Kind, Value};
use std::io;
use uxsched_os::autogroup::{get, members, read, set};
use uxsched_os::identity::{self, TaskId};

/// A session's autogroup nice as an [`Actuator`], keyed by the session (not by the thread that
/// asked): restored through any process still in the session when the app exits.
pub struct Autogroup;

impl Actuator for Autogroup {
    fn kind(&self) -> Kind {
        Kind::Autogroup
    }

    fn key(&self, task: &TaskId) -> io::Result<Option<Key>> {
        match read(task.pid) {
            Ok((id, _)) => Ok(Some(Key::Session(id))),
            Err(e) if e.kind() == io::ErrorKind::NotFound && identity::still_same(task) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn reach(&self, key: &Key) -> Option<i32> {
        let Key::Session(id) = key else {
            return None;
        };
        members(*id).ok()?.first().copied()
    }

    fn read(&self, via: i32) -> io::Result<Value> {
        get(via).map(Value::Autogroup)
    }

    fn write(&self, via: i32, value: &Value) -> io::Result<()> {
        match value {
            Value::Autogroup(n) => set(via, *n),
            other => Err(super::wrong_kind(Kind::Autogroup, other)),
        }
    }
}
