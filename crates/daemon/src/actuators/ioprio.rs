//! I/O priority of one thread through `ioprio_get(2)` / `ioprio_set(2)` (not wrapped by libc).
//! Honoured by the bfq and mq-deadline schedulers; `none` ignores it.

use super::{Actuator, Key};
use crate::identity::{self, TaskId};
use crate::journal::{Kind, Value};
use crate::process_tree;
use std::io;

const IOPRIO_WHO_PROCESS: libc::c_int = 1;
const IOPRIO_CLASS_SHIFT: u32 = 13;

pub const CLASS_RT: u16 = 1;
pub const CLASS_BE: u16 = 2;
pub const CLASS_IDLE: u16 = 3;

/// An I/O priority value as the kernel encodes it: class << 13 | level.
pub fn encode(class: u16, level: u16) -> u16 {
    (class << IOPRIO_CLASS_SHIFT) | (level & 7)
}

/// (class, level) of an encoded value.
pub fn decode(v: u16) -> (u16, u16) {
    (v >> IOPRIO_CLASS_SHIFT, v & 7)
}

/// Read a thread's I/O priority.
pub fn get(tid: i32) -> io::Result<u16> {
    // SAFETY: plain integer arguments.
    let r = unsafe { libc::syscall(libc::SYS_ioprio_get, IOPRIO_WHO_PROCESS, tid) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as u16)
}

/// Set a thread's I/O priority.
pub fn set(tid: i32, value: u16) -> io::Result<()> {
    // SAFETY: plain integer arguments.
    let r = unsafe {
        libc::syscall(
            libc::SYS_ioprio_set,
            IOPRIO_WHO_PROCESS,
            tid,
            value as libc::c_int,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_is_the_kernels() {
        assert_eq!(encode(CLASS_BE, 7), 0x4007);
        assert_eq!(encode(CLASS_RT, 4), 0x2004);
        assert_eq!(decode(0x6000), (CLASS_IDLE, 0));
        assert!(get(0).is_ok());
    }
}
