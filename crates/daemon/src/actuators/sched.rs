//! Scheduling attributes of one thread as an [`Actuator`]. The `sched_getattr(2)` /
//! `sched_setattr(2)` layer itself is `uxsched_os::sched`, shared with the sched_ext backend
//! and re-exported here so the daemon's call sites name it as before.

use super::{Actuator, Key};
use crate::identity::TaskId;
use crate::journal::{Kind, Value};
use std::io;

pub use uxsched_os::sched::*;

/// The real-time priority of the daemon's own event path (the tracker thread, and the loop
/// while it waits and boosts): one above the critical set's ([`crate::policy::RT_PRIORITY`]),
/// so a boost never queues behind the chain it raises nor behind the load; below the guard,
/// the watchdog and any client grant above 2. Nice −20 alone was not enough: under EEVDF a thread that
/// slept with negative lag wakes ineligible, and the tracker waited 2.6 ms beside 12 hogs
/// (`perf sched timehist`, 2026-11-23).
pub const OWN_RT_PRIORITY: u32 = 2;

/// The slice the daemon's threads ask for in the fair class: the kernel's shortest (0.1 ms).
pub const OWN_SLICE_NS: u64 = 100_000;

/// The daemon's own class on its event path: real time where the kernel grants it, else the
/// fair class's top. Full passes ([`OwnClass::for_pass`]) run at the critical set's own
/// priority instead: they read `/proc` and write cgroup files for about half a millisecond of
/// CPU, which at that priority never preempts the app's real-time chain (FIFO does not preempt
/// its equal) yet is not stretched by the load — in the fair class beside 12 hogs a 0.45 ms
/// pass took 4 ms, and a boost that arrived meanwhile waited for it.
#[derive(Debug, Clone, Copy)]
pub struct OwnClass {
    rt: bool,
}

impl OwnClass {
    /// Put the calling thread on the event path's class; `who` names it in the warning when
    /// real time is refused (no CAP_SYS_NICE, a unit with `RestrictRealtime=`, a cgroup
    /// without RT runtime).
    pub fn event_path(who: &str) -> OwnClass {
        let rt = match set(0, &own(Some(OWN_RT_PRIORITY))) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(
                    "{who}: cannot run at SCHED_FIFO {OWN_RT_PRIORITY} ({e}); on the fair \
                     class's top instead, where boosts may wait behind the load"
                );
                if let Err(e) = set(0, &own(None)) {
                    tracing::warn!("{who}: cannot raise itself to nice -20 either ({e})");
                }
                false
            }
        };
        OwnClass { rt }
    }

    /// The critical set's priority until the returned guard is dropped, then the event
    /// path's again (nothing changes where the event path is not real-time).
    pub fn for_pass(self) -> PassClass {
        if self.rt {
            if let Err(e) = set(0, &own(Some(crate::policy::RT_PRIORITY))) {
                tracing::debug!("cannot lower itself for a pass: {e}");
            }
        }
        PassClass { own: self }
    }
}

/// See [`OwnClass::for_pass`].
pub struct PassClass {
    own: OwnClass,
}

impl Drop for PassClass {
    fn drop(&mut self) {
        if self.own.rt {
            if let Err(e) = set(0, &own(Some(OWN_RT_PRIORITY))) {
                tracing::debug!("cannot return to real time after a pass: {e}");
            }
        }
    }
}

/// The daemon's own attributes: SCHED_FIFO at `rt`, or (`None`) nice −20 with the shortest
/// slice; never inherited by what the thread forks.
fn own(rt: Option<u32>) -> SchedAttr {
    SchedAttr {
        policy: if rt.is_some() {
            SCHED_FIFO
        } else {
            SCHED_OTHER
        },
        flags: SCHED_FLAG_RESET_ON_FORK,
        nice: if rt.is_some() { 0 } else { -20 },
        priority: rt.unwrap_or(0),
        runtime: if rt.is_some() { 0 } else { OWN_SLICE_NS },
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
