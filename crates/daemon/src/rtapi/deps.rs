//! Dependencies (seed 002 §III.B: "a music player depends on the media server … prioritizing
//! an application alone cannot guarantee the quality of music services", so the app names the
//! services it depends on): a thread says "I depend on process/thread X", and while that thread
//! is raised — by a grant, a hint session, an interaction or the mode itself — X's threads are
//! raised with it, and lowered when it no longer is. Like every grant they are one more source
//! of desired settings, so the reconciler journals and restores them exactly.
//!
//! What X gets is the fair-class part of the app's boost: its nice (never below the rule's
//! `min_nice`) and its slice. Real time is not passed on: X's runaway would not be stopped by
//! the app's RLIMIT_RTTIME, and a service's threads are not the app's to make real-time (the
//! paper leaves "system-related threads" out of the real-time class too, §V); an RT app's
//! dependency gets the highest fair priority its rule allows (`min_nice`).
//!
//! Who may be named: the caller's `[[rtapi.allow]]` rule lists `dependencies`: `"same-uid"`
//! (X runs, with every uid, as the caller) and/or absolute paths of executables
//! (`/proc/X/exe`, e.g. a system media server).

use super::Refused;
use crate::config::rtapi::SAME_UID;
use crate::types::Desired;
use std::collections::BTreeMap;
use tracing::info;
use uxsched_client::proto::{Refusal, Until};
use uxsched_os::identity::{self, TaskId};
use uxsched_os::peer::Caller;

/// What a dependency names: a whole process (every thread, found again each pass) or one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum On {
    Process(TaskId),
    Thread(TaskId),
}

#[derive(Debug, Clone)]
struct Dep {
    uid: u32,
    conn: u64,
    until: Until,
    /// The caller's rule's `min_nice`: the most X may be raised.
    floor: i32,
    /// X's threads raised by the last merge.
    raised: Vec<i32>,
}

/// Every dependency, keyed by the depending thread and what it depends on.
#[derive(Debug, Default)]
pub struct Deps {
    deps: BTreeMap<(TaskId, On), Dep>,
}

impl Deps {
    /// `caller` depends on `on` from now on (checked against the rule's `dependencies`).
    pub fn add(
        &mut self,
        caller: &Caller,
        conn: u64,
        until: Until,
        on: i32,
        rule: &crate::config::rtapi::Allow,
        max_per_user: usize,
    ) -> Result<(), Refused> {
        let target = named(caller, on, rule)?;
        let key = (caller.task, target);
        let mine = self.deps.values().filter(|d| d.uid == caller.uid).count();
        if !self.deps.contains_key(&key) && mine >= max_per_user {
            return Err((
                Refusal::UserCap,
                format!(
                    "uid {} already has {mine} dependencies (`max_threads_per_user`); drop some \
                     with `undepend`",
                    caller.uid
                ),
            ));
        }
        info!(
            tid = caller.task.tid,
            on, "dependency: raised with the thread while it is"
        );
        self.deps.insert(
            key,
            Dep {
                uid: caller.uid,
                conn,
                until,
                floor: rule.min_nice,
                raised: Vec::new(),
            },
        );
        Ok(())
    }

    /// `owner` no longer depends on `on`. Whether it did.
    pub fn remove(&mut self, owner: &TaskId, on: i32) -> bool {
        let before = self.deps.len();
        self.deps
            .retain(|(o, t), _| o != owner || (t.id().tid != on && t.id().pid != on));
        before != self.deps.len()
    }

    /// `owner` was reset: all its dependencies end.
    pub fn forget(&mut self, owner: &TaskId) {
        self.deps.retain(|(o, _), _| o != owner);
    }

    /// Connection `conn` closed: its `Close` dependencies end. Whether any did.
    pub fn closed(&mut self, conn: u64) -> bool {
        let before = self.deps.len();
        self.deps
            .retain(|_, d| d.conn != conn || d.until == Until::Exit);
        before != self.deps.len()
    }

    /// Forget dependencies whose depending thread or whose X has exited.
    pub fn prune(&mut self) {
        self.deps
            .retain(|(owner, on), _| identity::still_same(owner) && identity::still_same(&on.id()));
    }

    /// The threads raised for `owner`'s dependency on `on` by the last merge.
    pub fn raised(&self, owner: &TaskId, on: i32) -> Vec<i32> {
        self.deps
            .iter()
            .filter(|((o, t), _)| o == owner && (t.id().tid == on || t.id().pid == on))
            .flat_map(|(_, d)| d.raised.iter().copied())
            .collect()
    }

    /// Raise X's threads with their depending thread: after everything else is merged, each
    /// dependency's threads get the depending thread's fair boost (bounded by the rule), at most
    /// `max_threads` of them per dependency. A thread with settings of its own keeps the
    /// stronger of the two.
    pub fn merge_into(&mut self, desired: &mut Desired, max_threads: usize) {
        let mut raise: Vec<(TaskId, Option<i32>, Option<u64>)> = Vec::new();
        for ((owner, on), dep) in self.deps.iter_mut() {
            dep.raised.clear();
            let Some(t) = desired.threads.get(owner) else {
                continue;
            };
            let nice = match t.rt {
                Some(_) => Some(dep.floor),
                None => t.nice.filter(|n| *n < 0).map(|n| n.max(dep.floor)),
            };
            let slice = t.rt.is_none().then_some(t.slice_ns).flatten();
            if nice.is_none() && slice.is_none() {
                continue;
            }
            for task in on.threads().into_iter().take(max_threads) {
                if task == *owner {
                    continue;
                }
                dep.raised.push(task.tid);
                raise.push((task, nice, slice));
            }
        }
        for (task, nice, slice) in raise {
            let t = desired.threads.entry(task).or_default();
            if t.rt.is_some() {
                continue;
            }
            if let Some(n) = nice {
                t.nice = Some(t.nice.map_or(n, |m| m.min(n)));
            }
            if let Some(s) = slice {
                t.slice_ns = Some(t.slice_ns.map_or(s, |m| m.min(s)));
            }
        }
    }
}

impl On {
    fn id(&self) -> TaskId {
        match *self {
            On::Process(t) | On::Thread(t) => t,
        }
    }

    /// X's live threads now (a process's are listed again each pass: new threads join).
    fn threads(&self) -> Vec<TaskId> {
        match *self {
            On::Thread(t) => identity::still_same(&t).then_some(t).into_iter().collect(),
            On::Process(p) if identity::still_same(&p) => identity::threads(p.pid)
                .into_iter()
                .filter_map(|tid| identity::task_id(tid).ok())
                .filter(|t| t.pid == p.pid)
                .collect(),
            On::Process(_) => Vec::new(),
        }
    }
}

/// Check that `caller`'s rule lets it name `on`, and capture `on`'s identity.
fn named(caller: &Caller, on: i32, rule: &crate::config::rtapi::Allow) -> Result<On, Refused> {
    let gone = |e: String| (Refusal::Identity, e);
    let task = identity::task_id(on).map_err(|_| {
        gone(format!(
            "{on} is not a live process or thread; name one that runs"
        ))
    })?;
    let (process, _pidfd) = identity::observe(task.pid)
        .map_err(|e| gone(format!("cannot look at process {}: {e}", task.pid)))?;
    let exe = std::fs::read_link(format!("/proc/{}/exe", task.pid)).ok();
    if !identity::still_same(&task) || process.start != process_start(task.pid)? {
        return Err(gone(format!(
            "{on} changed while it was checked; ask again"
        )));
    }
    let same_uid = rule.dependencies.iter().any(|d| d == SAME_UID) && process.owned_by(caller.uid);
    let listed = exe.as_ref().is_some_and(|e| {
        rule.dependencies
            .iter()
            .any(|d| std::path::Path::new(d) == e)
    });
    if !(same_uid || listed) {
        return Err((
            Refusal::NotAllowed,
            format!(
                "process {} (uids {:?}, {}) is not one your rule lets you depend on \
                 (`dependencies` = {:?} in its `[[rtapi.allow]]`); the administrator can list \
                 its executable there",
                task.pid,
                process.uids,
                exe.map_or("executable unknown".into(), |e| e.display().to_string()),
                rule.dependencies
            ),
        ));
    }
    Ok(if task.tid == task.pid {
        On::Process(task)
    } else {
        On::Thread(task)
    })
}

fn process_start(pid: i32) -> Result<u64, Refused> {
    identity::stat(pid)
        .map(|s| s.start)
        .map_err(|e| (Refusal::Identity, format!("process {pid}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::rtapi::Allow;
    use crate::types::{Rt, RtPolicy, Target};

    fn gettid() -> i32 {
        // SAFETY: no preconditions.
        unsafe { libc::gettid() }
    }

    #[test]
    fn x_follows_the_app_fair_part_only_within_the_rule() {
        let me = identity::task_id(gettid()).unwrap();
        // X: another thread of this process, waiting until told to exit.
        let (tx, rx) = std::sync::mpsc::channel();
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let h = std::thread::spawn(move || {
            tx.send(gettid()).unwrap();
            let _ = wait.recv();
        });
        let x = identity::task_id(rx.recv().unwrap()).unwrap();
        // SAFETY: no preconditions.
        let uid = unsafe { libc::getuid() };
        let caller = Caller {
            task: me,
            uid,
            exe: None,
        };
        let none = Allow {
            dependencies: vec![],
            ..Allow::default()
        };
        let mut deps = Deps::default();
        let (why, msg) = deps
            .add(&caller, 1, Until::Close, x.tid, &none, 10)
            .unwrap_err();
        assert_eq!(why, Refusal::NotAllowed, "{msg}");
        let rule = Allow {
            min_nice: -7,
            ..Allow::default()
        };
        deps.add(&caller, 1, Until::Close, x.tid, &rule, 10)
            .unwrap();
        let merged = |deps: &mut Deps, app: Target| {
            let mut d = Desired::default();
            d.threads.insert(me, app);
            deps.merge_into(&mut d, 64);
            d.threads.get(&x).cloned()
        };
        // An RT app: X gets the rule's floor, never RT.
        let rt = Target {
            rt: Some(Rt {
                policy: RtPolicy::Fifo,
                priority: 5,
            }),
            ..Target::default()
        };
        let got = merged(&mut deps, rt).unwrap();
        assert_eq!((got.nice, got.rt, got.slice_ns), (Some(-7), None, None));
        assert_eq!(deps.raised(&me, x.tid), vec![x.tid]);
        // A fair app: its nice (bounded by the floor) and its slice.
        let fair = |nice, slice| Target {
            nice: Some(nice),
            slice_ns: slice,
            ..Target::default()
        };
        let got = merged(&mut deps, fair(-3, Some(500_000))).unwrap();
        assert_eq!((got.nice, got.slice_ns), (Some(-3), Some(500_000)));
        assert_eq!(merged(&mut deps, fair(-12, None)).unwrap().nice, Some(-7));
        // An app not raised raises nothing.
        assert_eq!(merged(&mut deps, fair(3, None)), None);
        assert!(deps.raised(&me, x.tid).is_empty());
        // Undepend, and X's exit, end it.
        assert!(deps.remove(&me, x.tid));
        deps.add(&caller, 1, Until::Close, x.tid, &rule, 10)
            .unwrap();
        drop(done);
        h.join().unwrap();
        deps.prune();
        assert_eq!(merged(&mut deps, fair(-3, None)), None);
        assert!(deps.deps.is_empty());
    }
}
