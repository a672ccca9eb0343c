//! The `rt` lever's guard (issue 10): a thread of its own, at SCHED_FIFO 99, that enforces the
//! run-time budget of every thread the lever made real-time ([`RtBudget`]) and demotes one that
//! used it up by itself, with one `sched_setattr` — no file write, no journal, nothing that can
//! wait on another thread.
//!
//! Why not the daemon's loop: a pass of the loop writes cgroup and autogroup files, and such a
//! write can wait for a per-CPU kernel thread that a FIFO thread on that CPU starves (measured:
//! a session's autogroup write blocked 0.95 s, until the kernel's RT throttling). A budget
//! checked by that loop is unchecked for as long. The guard only reads `/proc` statistics and
//! calls `sched_setattr`, so a runaway is demoted within its limit plus one tick plus one
//! [`rt_budget::CHECK`], whatever the loop is doing.
//!
//! A demotion puts the thread on the fair lever's boost (nice `min_nice` and the short slice,
//! computed from its journalled original and published by the loop after each pass, so the
//! thread is never left at its plain original until the loop runs; SCHED_OTHER nice 0 for a
//! thread made RT in a pass not yet published), marks it so that
//! the reconciler counts the guard's write as uxsched's own ([`RtGuard::demoted_by_guard`]), and
//! wakes the loop, which then gives the thread the fair boost for its cool-down.

use crate::rt_budget::{self, Limits, RtBudget};
use crate::types::Event;
use std::collections::{BTreeSet, HashMap};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tracing::warn;
use uxsched_os::identity::{self, TaskId};
use uxsched_os::sched::{self, SchedAttr};

/// The guard's priority: above every real-time thread uxsched makes (the lever's FIFO 2, grants
/// up to 98), as rtkit's watchdog.
pub const PRIORITY: u32 = 99;

/// Threads the guard demoted, with the number of the demotion (see [`RtGuard::settled`]).
pub type Demoted = Arc<Mutex<HashMap<TaskId, u64>>>;

struct Inner {
    budget: RtBudget,
    /// What each RT thread of the lever is demoted to (the fair lever's boost of its journalled
    /// original), after a pass. Was: what each RT thread of the lever goes back to.
    originals: HashMap<TaskId, SchedAttr>,
    /// Demotions so far (numbers the entries of `demoted`).
    count: u64,
    /// New threads were followed since the guard last looked: check at full rate again.
    fresh: bool,
}

struct Shared {
    inner: Mutex<Inner>,
    wake: Condvar,
    demoted: Demoted,
}

/// The loop's handle on the guard thread.
pub struct RtGuard {
    shared: Arc<Shared>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl RtGuard {
    /// Start the guard at SCHED_FIFO [`PRIORITY`]. An error (no CAP_SYS_NICE, RT forbidden by
    /// the unit) means the lever cannot be bounded, so it must not be used.
    pub fn spawn(limits: Limits, events: Sender<Event>) -> std::io::Result<RtGuard> {
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                budget: RtBudget::new(limits),
                originals: HashMap::new(),
                count: 0,
                fresh: false,
            }),
            wake: Condvar::new(),
            demoted: Arc::default(),
        });
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let s = shared.clone();
        std::thread::Builder::new()
            .name("uxsched-rt-guard".into())
            .spawn(move || {
                let fifo = SchedAttr {
                    policy: sched::SCHED_FIFO,
                    flags: sched::SCHED_FLAG_RESET_ON_FORK,
                    nice: 0,
                    priority: PRIORITY,
                    runtime: 0,
                    deadline: 0,
                    period: 0,
                    uclamp: None,
                };
                let r = sched::set(0, &fifo);
                let ok = r.is_ok();
                let _ = started_tx.send(r);
                if ok {
                    guard_loop(&s, &events);
                }
            })?;
        started_rx
            .recv()
            .unwrap_or_else(|_| Err(std::io::Error::other("the guard thread died")))?;
        Ok(RtGuard { shared })
    }

    /// The threads the lever asks to run real-time from now on, each sampled before its boost
    /// is written; the ones that cannot be read are returned (not real-time).
    pub fn follow(&self, wanted: impl IntoIterator<Item = TaskId>) -> Vec<TaskId> {
        let mut g = lock(&self.shared.inner);
        let before = g.budget.followed();
        let unreadable = g.budget.follow(wanted);
        g.fresh |= g.budget.followed().iter().any(|t| !before.contains(t));
        drop(g);
        self.shared.wake.notify_one();
        unreadable
    }

    /// New threads the lever makes real-time between passes (the fast path), watched from
    /// now on besides the others; the ones that cannot be read are returned (not real-time).
    pub fn follow_more(&self, new: impl IntoIterator<Item = TaskId>) -> Vec<TaskId> {
        let mut g = lock(&self.shared.inner);
        let unreadable = g.budget.follow_more(new);
        g.fresh = true;
        drop(g);
        self.shared.wake.notify_one();
        unreadable
    }

    /// The threads watched now.
    pub fn followed(&self) -> BTreeSet<TaskId> {
        lock(&self.shared.inner).budget.followed()
    }

    /// Whether any thread is watched.
    pub fn active(&self) -> bool {
        lock(&self.shared.inner).budget.active()
    }

    /// Threads cooling down now.
    pub fn cooling(&self, now: Instant) -> BTreeSet<TaskId> {
        lock(&self.shared.inner).budget.demoted(now)
    }

    /// What each RT thread of the lever is demoted to (the fair lever's boost of its journalled
    /// original), after a pass.
    pub fn publish(&self, originals: impl IntoIterator<Item = (TaskId, SchedAttr)>) {
        lock(&self.shared.inner).originals = originals.into_iter().collect();
    }

    /// The number of the latest demotion: a pass that starts after it and completes has
    /// rewritten every thread demoted up to it ([`RtGuard::settled`]).
    pub fn demotions(&self) -> u64 {
        lock(&self.shared.inner).count
    }

    /// A pass that started when [`RtGuard::demotions`] was `upto` has completed: the guard's
    /// writes up to then are the journal's business again.
    pub fn settled(&self, upto: u64) {
        lock(&self.shared.demoted).retain(|_, n| *n > upto);
    }

    /// The threads whose current (fair) attributes the guard wrote: the reconciler counts them
    /// as uxsched's own, not someone else's change.
    pub fn demoted_by_guard(&self) -> Demoted {
        self.shared.demoted.clone()
    }
}

/// Sleep while nothing is real-time; check every [`rt_budget::CHECK`] while something is and
/// has run lately, every [`rt_budget::QUIET_CHECK`] once none has run for
/// [`rt_budget::QUIET_AFTER`] checks — until a thread runs again or a new one is followed.
fn guard_loop(s: &Shared, events: &Sender<Event>) {
    let mut quiet = 0u32;
    loop {
        {
            let mut g = lock(&s.inner);
            while !g.budget.active() {
                g = s
                    .wake
                    .wait_timeout(g, Duration::from_secs(1))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            let interval = if quiet >= rt_budget::QUIET_AFTER && !g.fresh {
                rt_budget::QUIET_CHECK
            } else {
                rt_budget::CHECK
            };
            let until = Instant::now() + interval;
            // A thread followed meanwhile ends a quiet wait: it is checked at full rate.
            while !g.fresh || interval == rt_budget::CHECK {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                g = s
                    .wake
                    .wait_timeout(g, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            if std::mem::take(&mut g.fresh) {
                quiet = 0;
            }
        }
        let (demoted, ran) = check_and_demote(s);
        quiet = if ran { 0 } else { quiet.saturating_add(1) };
        if demoted > 0 && events.send(Event::RtOver).is_err() {
            return; // the loop is gone; the daemon is stopping
        }
    }
}

/// One check; the over-budget threads are demoted here and now. Returns how many, and whether
/// any watched thread ran since the last check.
fn check_and_demote(s: &Shared) -> (usize, bool) {
    let mut g = lock(&s.inner);
    let over = g.budget.check(Instant::now());
    let ran = g.budget.ran();
    for t in &over {
        g.count += 1;
        let n = g.count;
        lock(&s.demoted).insert(*t, n); // before the write: the reconciler may look at once
        let back = g
            .originals
            .get(t)
            .copied()
            .unwrap_or_else(SchedAttr::ordinary);
        if !identity::still_same(t) || !sched::get(t.tid).is_ok_and(|a| a.is_rt()) {
            continue; // gone, or no longer ours to demote
        }
        if let Err(e) = sched::set(t.tid, &back) {
            warn!(
                tid = t.tid,
                "cannot demote a thread over its real-time budget: {e}"
            );
        }
    }
    (over.len(), ran)
}
