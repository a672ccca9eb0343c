//! I/O priority of one thread as an [`Actuator`]; the system calls are `uxsched_os::ioprio`.

use crate::types::Key;

use super::Actuator;
use crate::types::{Kind, Value};
use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use uxsched_os::identity::{self, TaskId};
use uxsched_os::ioprio::{get, set};
use uxsched_os::process_tree;

/// I/O priority as an [`Actuator`]: one thread each. The kernel copies a thread's I/O priority
/// into every thread and process it creates, and nothing resets it on fork, so a boosted thread's
/// creations are found ([`Actuator::inheritors`]) and put back by the reconciler.
#[derive(Default)]
pub struct Ioprio {
    /// What one pass read of the process tree and its threads' I/O priorities, shared by the
    /// pass's entries: every critical thread of a browser asked for the same tree, and the walk
    /// (a `children` file per thread, an `ioprio_get` per thread) was half the daemon's CPU.
    pass: RefCell<PassCache>,
}

#[derive(Default)]
struct PassCache {
    /// A process and its descendants, by the process.
    trees: HashMap<i32, Vec<i32>>,
    /// Every process of the machine (a boosted thread that exited: its children re-parented).
    all: Option<Vec<i32>>,
    /// A process's threads and their I/O priority when read (`None`: unreadable, gone).
    threads: HashMap<i32, Vec<(i32, Option<u16>)>>,
    /// The identity of a thread that holds a boosted class (every critical thread holds the
    /// one each of the others applied, so each entry asked for all of them).
    ids: HashMap<i32, Option<TaskId>>,
}

impl PassCache {
    fn tree(&mut self, pid: i32) -> Vec<i32> {
        self.trees
            .entry(pid)
            .or_insert_with(|| process_tree::with_descendants(pid).into_iter().collect())
            .clone()
    }

    fn all(&mut self) -> io::Result<Vec<i32>> {
        if self.all.is_none() {
            self.all = Some(process_tree::all_processes()?);
        }
        Ok(self.all.clone().unwrap_or_default())
    }

    fn threads(&mut self, pid: i32) -> &[(i32, Option<u16>)] {
        self.threads.entry(pid).or_insert_with(|| {
            identity::threads(pid)
                .into_iter()
                .map(|tid| (tid, get(tid).ok()))
                .collect()
        })
    }

    fn id(&mut self, tid: i32) -> Option<TaskId> {
        *self
            .ids
            .entry(tid)
            .or_insert_with(|| identity::task_id(tid).ok())
    }

    /// A write of this pass: later entries see the thread's new priority, so a creation put
    /// back once is not found again.
    fn wrote(&mut self, tid: i32, v: u16) {
        for t in self.threads.values_mut().flatten() {
            if t.0 == tid {
                t.1 = Some(v);
            }
        }
    }
}

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
            Value::Ioprio(v) => {
                set(via, *v)?;
                self.pass.borrow_mut().wrote(via, *v);
                Ok(())
            }
            other => Err(super::wrong_kind(Kind::Ioprio, other)),
        }
    }

    fn new_pass(&self) {
        *self.pass.borrow_mut() = PassCache::default();
    }

    /// Threads that hold exactly `applied` and were created no earlier than the boosted thread:
    /// while it lives, among its process's other threads and every process descending from it;
    /// once it has exited (its children re-parented), among every thread of the machine.
    fn inheritors(&self, key: &Key, applied: &Value) -> io::Result<Vec<TaskId>> {
        let (Key::Thread(owner), Value::Ioprio(v)) = (key, applied) else {
            return Ok(Vec::new());
        };
        let mut pass = self.pass.borrow_mut();
        let processes = if identity::still_same(owner) {
            pass.tree(owner.pid)
        } else {
            pass.all()?
        };
        let mut found = Vec::new();
        for pid in processes {
            let holders: Vec<i32> = pass
                .threads(pid)
                .iter()
                .filter(|&&(tid, prio)| tid != owner.tid && prio == Some(*v))
                .map(|&(tid, _)| tid)
                .collect();
            for tid in holders {
                match pass.id(tid) {
                    Some(t) if t.start >= owner.start => found.push(t),
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
    use uxsched_os::ioprio::{encode, CLASS_BE};

    /// A pass shares its reads among its entries: a creation put back by one entry's sweep is
    /// not found again by the next, and a change made between passes is seen by the next pass.
    #[test]
    fn one_pass_shares_its_reads_and_sees_its_own_writes() {
        let (boosted, usual) = (encode(CLASS_BE, 2), encode(CLASS_BE, 5));
        let me = unsafe { libc::gettid() };
        let before = get(me).unwrap();
        set(me, boosted).unwrap();
        let owner = identity::task_id(me).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let child = std::thread::spawn(move || {
            tx.send(unsafe { libc::gettid() }).unwrap();
            let _ = stop_rx.recv();
        });
        let heir = rx.recv().unwrap();
        let act = Ioprio::default();
        let (key, applied) = (Key::Thread(owner), Value::Ioprio(boosted));
        let found = |a: &Ioprio| -> Vec<i32> {
            let heirs = a.inheritors(&key, &applied).unwrap();
            heirs.iter().map(|t| t.tid).collect()
        };
        act.new_pass();
        assert_eq!(found(&act), vec![heir], "the creation inherited the class");
        act.write(heir, &Value::Ioprio(usual)).unwrap();
        assert!(
            found(&act).is_empty(),
            "put back in this pass: not found again"
        );
        set(heir, boosted).unwrap(); // someone (its own code) raises it again
        assert!(
            found(&act).is_empty(),
            "within the pass: what the pass read"
        );
        act.new_pass();
        assert_eq!(found(&act), vec![heir], "a new pass reads again");
        stop_tx.send(()).unwrap();
        child.join().unwrap();
        set(me, before).unwrap();
    }
}
