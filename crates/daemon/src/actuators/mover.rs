//! Cgroup moves off the daemon's loop. Writing a task to `tasks`/`cgroup.procs` takes
//! `cgroup_threadgroup_rwsem`, whose writer waits for an RCU grace period (median 24 ms on the
//! 2-vCPU VM with 6 hogs, `scripts/cgroup-move-cost.sh`); made on the loop's thread, a move held
//! back the fast path of every input that arrived meanwhile. Here one thread of its own makes
//! them in order, and the loop only queues them.
//!
//! What the reconciler needs of a move it cannot wait for:
//! - *Read-back*: a queued move counts as made ([`Mover::pending`]), so the pass after it finds
//!   the group it asked for and neither writes it again nor takes it for someone else's change.
//! - *Failures*: a move that fails is handed back ([`Mover::take_failed`]) for the next pass to
//!   forget its row and show it in `status`, as a failed synchronous write did.
//! - *Order*: moves of one task are made in the order queued (one thread, one queue); a
//!   scheduling change that must follow a move (real time only where the group takes it) is
//!   decided on the kernel's view (`Groups::refuses_rt`), which changes only once the move is
//!   made, and [`Mover`]'s `wake` asks the loop for a pass then.
//! - *Stop*: [`Mover::settle`] waits until every queued move is made, before the groups are
//!   removed. A daemon killed with moves queued leaves tasks in its groups without a row; the
//!   next daemon's group sweep (`reconcile/sweep.rs`) puts them back, as it does a killed
//!   daemon's children.

use super::cgroup::{Groups, Hierarchy};
use std::collections::HashMap;
use std::io;
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tracing::{debug, warn};
use uxsched_os::identity::{self, TaskId};

/// Bound on remembered failures (a group that refuses every move must not grow memory).
const MAX_FAILED: usize = 256;

/// A move that did not happen.
#[derive(Debug)]
pub struct Failed {
    pub tid: i32,
    pub to: String,
    pub error: io::Error,
}

struct Job {
    task: TaskId,
    to: String,
    seq: u64,
}

#[derive(Default)]
struct Moves {
    /// The newest queued target of each task, with its sequence number.
    pending: HashMap<i32, (u64, String)>,
    failed: Vec<Failed>,
    queued: usize,
    next_seq: u64,
}

struct Shared {
    moves: Mutex<Moves>,
    settled: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Moves> {
        self.moves.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The thread that makes cgroup moves, and what it has yet to make.
pub struct Mover {
    shared: Arc<Shared>,
    jobs: mpsc::Sender<Job>,
}

impl Mover {
    /// Start the mover's thread on `hierarchy`; `wake` is called each time the queue runs empty
    /// (the daemon then makes a pass: a thread moved into a group that takes real time can be
    /// made real-time now).
    pub fn start(hierarchy: Hierarchy, wake: Box<dyn Fn() + Send>) -> io::Result<Mover> {
        let shared = Arc::new(Shared {
            moves: Mutex::default(),
            settled: Condvar::new(),
        });
        let (jobs, rx) = mpsc::channel::<Job>();
        let s = shared.clone();
        std::thread::Builder::new()
            .name("uxsched-mover".into())
            .spawn(move || {
                // The loop's priority: a queued move must not wait behind the load either.
                if let Err(e) = uxsched_os::sched::set(0, &uxsched_os::own::own_fair()) {
                    warn!("the cgroup mover cannot raise itself to nice -20 ({e}): moves may wait behind the load");
                }
                for job in rx {
                    let result = move_checked(&hierarchy, &job.task, &job.to);
                    s.done(job, result, wake.as_ref());
                }
            })?;
        Ok(Mover { shared, jobs })
    }

    /// Queue a move of `tid` into `to` (relative to the mount). A move to where the newest
    /// queued one already goes is not queued again. The task's identity is taken now (the
    /// caller has just checked it) and checked again around the move.
    pub fn submit(&self, tid: i32, to: &str) -> io::Result<()> {
        let queued_already = |m: &Moves| m.pending.get(&tid).is_some_and(|(_, p)| p == to);
        if queued_already(&self.shared.lock()) {
            return Ok(()); // no /proc read for a move already on its way
        }
        let task = identity::task_id(tid)?;
        let mut m = self.shared.lock();
        if queued_already(&m) {
            return Ok(());
        }
        m.next_seq += 1;
        let seq = m.next_seq;
        let job = Job {
            task,
            to: to.to_owned(),
            seq,
        };
        self.jobs
            .send(job)
            .map_err(|_| io::Error::other("the cgroup mover's thread has ended"))?;
        m.pending.insert(tid, (seq, to.to_owned()));
        m.queued += 1;
        Ok(())
    }

    /// Where the newest queued move of `tid` goes, while it is not made yet.
    pub fn pending(&self, tid: i32) -> Option<String> {
        self.shared
            .lock()
            .pending
            .get(&tid)
            .map(|(_, to)| to.clone())
    }

    /// Whether a move of `tid` is queued and not made yet.
    pub fn is_pending(&self, tid: i32) -> bool {
        self.shared.lock().pending.contains_key(&tid)
    }

    /// How many queued moves are not made yet.
    pub fn queued(&self) -> usize {
        self.shared.lock().queued
    }

    /// The moves that failed since the last call.
    pub fn take_failed(&self) -> Vec<Failed> {
        std::mem::take(&mut self.shared.lock().failed)
    }

    /// Wait until every queued move is made, at most `timeout`; false if some are still queued.
    pub fn settle(&self, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        let mut m = self.shared.lock();
        while m.queued > 0 {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            m = (self.shared.settled.wait_timeout(m, left))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }
}

/// Placement through the mover where it runs: what `Placement` and the group sweep call.
impl Groups {
    /// Make moves on a thread of their own from now on (`mover.rs`): [`Groups::place`] then
    /// only queues them; `wake` is called when the queue runs empty.
    pub fn move_off_thread(&mut self, wake: Box<dyn Fn() + Send>) -> io::Result<()> {
        self.mover = Some(Mover::start(self.hierarchy.clone(), wake)?);
        Ok(())
    }

    /// Move `tid` into the group at `rel` (relative to the mount; an original group removed
    /// meanwhile: the root): queued where the mover runs, made now otherwise.
    pub fn place(&self, tid: i32, rel: &str) -> io::Result<()> {
        match &self.mover {
            Some(m) => m.submit(tid, rel),
            None => move_or_root(&self.hierarchy, tid, rel),
        }
    }

    /// The group `tid` is in, or goes to once its queued move is made.
    pub fn placed(&self, tid: i32) -> io::Result<String> {
        match self.mover.as_ref().and_then(|m| m.pending(tid)) {
            Some(to) => Ok(to),
            None => self.hierarchy.current(tid),
        }
    }

    /// Whether a move of `tid` is queued and not made yet.
    pub fn moving(&self, tid: i32) -> bool {
        self.mover.as_ref().is_some_and(|m| m.is_pending(tid))
    }

    /// Whether any queued move is not made yet.
    pub fn busy(&self) -> bool {
        self.mover.as_ref().is_some_and(|m| m.queued() > 0)
    }

    /// The queued moves that failed since the last call.
    pub fn take_failed_moves(&self) -> Vec<Failed> {
        self.mover
            .as_ref()
            .map(|m| m.take_failed())
            .unwrap_or_default()
    }

    /// Wait until every queued move is made (at most `timeout`); false if some are not.
    pub fn settle(&self, timeout: std::time::Duration) -> bool {
        self.mover.as_ref().is_none_or(|m| m.settle(timeout))
    }
}

impl std::fmt::Debug for Mover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = self.shared.lock();
        f.debug_struct("Mover").field("queued", &m.queued).finish()
    }
}

impl Shared {
    /// Record a made (or failed) move; wake the loop when the queue is empty.
    fn done(&self, job: Job, result: io::Result<()>, wake: &dyn Fn()) {
        let tid = job.task.tid;
        let empty = {
            let mut m = self.lock();
            if m.pending.get(&tid).is_some_and(|(seq, _)| *seq == job.seq) {
                m.pending.remove(&tid);
            }
            match result {
                Ok(()) => debug!(tid, to = job.to, "moved"),
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                    debug!(tid, "exited before its move")
                }
                Err(error) if m.failed.len() < MAX_FAILED => m.failed.push(Failed {
                    tid,
                    to: job.to,
                    error,
                }),
                Err(e) => warn!(tid, to = job.to, "cannot move: {e}"),
            }
            m.queued -= 1;
            m.queued == 0
        };
        if empty {
            self.settled.notify_all();
            wake();
        }
    }
}

/// Move `task` into `to` if it is still the task queued; a tid that names another task after
/// the move (recycled meanwhile) is moved back where it was (rtkit's "after" check).
fn move_checked(h: &Hierarchy, task: &TaskId, to: &str) -> io::Result<()> {
    let gone = || io::Error::from_raw_os_error(libc::ESRCH);
    if !identity::still_same(task) {
        return Err(gone());
    }
    let before = h.current(task.tid);
    move_or_root(h, task.tid, to)?;
    if identity::still_same(task) {
        return Ok(());
    }
    if let (Ok(now), Ok(before)) = (identity::task_id(task.tid), before) {
        warn!(
            tid = task.tid,
            new_start = now.start,
            "tid was recycled during a cgroup move; moving the new task back"
        );
        if let Err(e) = h.move_to(task.tid, &before) {
            warn!(tid = task.tid, "cannot move the recycled tid back: {e}");
        }
    }
    Err(gone())
}

/// Move into `to`; an original group removed meanwhile falls back to the root (the only place
/// left that every task may be in), with a warning naming both.
pub fn move_or_root(h: &Hierarchy, tid: i32, to: &str) -> io::Result<()> {
    match h.move_to(tid, to) {
        Err(e) if e.kind() == io::ErrorKind::NotFound && to != "/" => {
            warn!(
                tid,
                group = to,
                "the original cgroup is gone; moving the task to the root instead"
            );
            h.move_to(tid, "/")
        }
        r => r,
    }
}
