//! Scheduling attributes of one thread as an [`Actuator`]. The `sched_getattr(2)` /
//! `sched_setattr(2)` layer itself is `uxsched_os::sched`, shared with the sched_ext backend
//! and re-exported here so the daemon's call sites name it as before.

use super::{Actuator, Key};
use crate::identity::TaskId;
use crate::journal::{Kind, Value};
use std::io;

pub use uxsched_os::sched::*;

/// Raise the calling thread to `nice` (−20, the fair class's top, where real time is refused).
pub fn raise_own_nice(nice: i32) -> io::Result<()> {
    // SAFETY: setpriority on this thread's own tid.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, nice) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Put the calling thread — the tracker's — at SCHED_FIFO [`crate::policy::OWN_RT_PRIORITY`],
/// above the load and below the critical set it finds, never inherited by what it forks; where
/// real time is refused (no CAP_SYS_NICE, `RestrictRealtime=`, a cgroup without RT runtime),
/// nice −20 and a warning naming `who`.
/// In the fair class, even at nice −20, a thread that slept with negative lag wakes ineligible
/// under EEVDF: beside 12 hogs the tracker waited 2.6 ms to run (`perf sched timehist`,
/// 2026-11-23) while a keystroke's new members waited for it. Below the set, a chain thread
/// that wakes where it runs preempts it and stays on its warm CPU. (The loop stays at nice −20:
/// at SCHED_FIFO 1 — while waiting only, or in passes too — it raised painting's p95 in `units`
/// from 1.02–1.05 to 1.09–1.15× idle in interleaved A/B rounds, 2026-11-24.)
pub fn raise_own(who: &str) {
    let Err(e) = set(0, &own_fifo()) else {
        return;
    };
    tracing::warn!(
        "{who}: cannot run at SCHED_FIFO {} ({e}); at nice -20 instead, where boosts may \
         wait behind the load",
        crate::policy::OWN_RT_PRIORITY
    );
    if let Err(e) = raise_own_nice(-20) {
        tracing::warn!("{who}: cannot raise itself to nice -20 either ({e})");
    }
}

/// The tracker's thread lends its real-time priority to the daemon's loop for one hand-over:
/// a keystroke's new critical threads wait for the loop to write their boosts, and at nice −20
/// the loop waited 3–5 ms behind 12 hogs (EEVDF's lag, as for the tracker's thread). Lent only
/// for the fast path: the loop pays it back before anything else (a full pass, shutdown), since
/// a loop that stayed real-time raised painting's p95 in `units` (see [`raise_own`]).
#[derive(Debug, Clone)]
pub struct Loan {
    loop_tid: i32,
    lent: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Loan {
    /// A loan to the calling thread: the daemon's loop.
    pub fn to_this_thread() -> Loan {
        Loan {
            // SAFETY: gettid has no preconditions.
            loop_tid: unsafe { libc::gettid() },
            lent: Default::default(),
        }
    }

    /// The lender's side: raise the loop before sending it what it must act on at once. The
    /// flag is set after the raise, so the loop's next [`Loan::repay`] after the send sees it.
    pub fn lend(&self) {
        match set(self.loop_tid, &own_fifo()) {
            Ok(()) => self.lent.store(true, std::sync::atomic::Ordering::Release),
            Err(e) => tracing::debug!("cannot lend the loop real time: {e}"),
        }
    }

    /// The loop's side: back to nice −20 if a loan is out. True if one was.
    pub fn repay(&self) -> bool {
        if !self.lent.swap(false, std::sync::atomic::Ordering::AcqRel) {
            return false;
        }
        match set(0, &own_fair()) {
            Ok(()) => tracing::debug!("loop: the tracker's loan of real time repaid"),
            Err(e) => tracing::warn!(
                "the daemon's loop cannot return to nice -20 ({e}); it stays real-time"
            ),
        }
        true
    }
}

/// The loop's own attributes: the fair class's top, not inherited by what it forks.
pub fn own_fair() -> SchedAttr {
    SchedAttr {
        policy: SCHED_OTHER,
        flags: SCHED_FLAG_RESET_ON_FORK,
        nice: -20,
        priority: 0,
        runtime: 0,
        deadline: 0,
        period: 0,
        uclamp: None,
    }
}

fn own_fifo() -> SchedAttr {
    SchedAttr {
        policy: SCHED_FIFO,
        flags: SCHED_FLAG_RESET_ON_FORK,
        nice: 0,
        priority: crate::policy::OWN_RT_PRIORITY,
        runtime: 0,
        deadline: 0,
        period: 0,
        uclamp: None,
    }
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
