//! Interaction hints (seed 000 §IV, framework-assisted task characterisation): a toolkit that
//! knows which thread is handling user input says so — `interaction_start` … `interaction_end` —
//! and that thread is boosted like the tracker's user-interactive thread in the `uxsched` mode
//! (the daemon's `min_nice` and `[uxsched] slice_us`, never below the caller's rule's
//! `min_nice`) while it handles it. The paper promotes the task "temporarily"; here the bound is
//! explicit: without an end, the boost lapses after `interaction_max_ms`.

use super::Refused;
use crate::types::Desired;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use uxsched_client::proto::Refusal;
use uxsched_os::identity::{self, TaskId};
use uxsched_os::peer::Caller;

/// The user-interactive boost: the daemon's `min_nice` and the `uxsched` mode's slice.
#[derive(Debug, Clone, Copy)]
pub struct UiBoost {
    pub nice: i32,
    pub slice_ns: u64,
}

#[derive(Debug, Clone, Copy)]
struct Interaction {
    uid: u32,
    conn: u64,
    nice: i32,
    ends: Instant,
}

#[derive(Debug)]
pub struct Interactions {
    boost: UiBoost,
    max: Duration,
    active: BTreeMap<TaskId, Interaction>,
}

impl Interactions {
    pub fn new(boost: UiBoost, max: Duration) -> Interactions {
        Interactions {
            boost,
            max,
            active: BTreeMap::new(),
        }
    }

    /// `caller`'s thread handles input from now (again: its time restarts).
    pub fn start(
        &mut self,
        caller: &Caller,
        conn: u64,
        min_nice: i32,
        max_per_user: usize,
    ) -> Result<(), Refused> {
        let mine = self
            .active
            .iter()
            .filter(|(t, i)| i.uid == caller.uid && **t != caller.task)
            .count();
        if mine >= max_per_user {
            return Err((
                Refusal::UserCap,
                format!(
                    "uid {} has {mine} threads in an interaction (`max_threads_per_user`)",
                    caller.uid
                ),
            ));
        }
        self.active.insert(
            caller.task,
            Interaction {
                uid: caller.uid,
                conn,
                nice: self.boost.nice.max(min_nice),
                ends: Instant::now() + self.max,
            },
        );
        Ok(())
    }

    /// `task` is done with the input. Whether it was in one.
    pub fn end(&mut self, task: &TaskId) -> bool {
        self.active.remove(task).is_some()
    }

    /// Connection `conn` closed: its interactions end. Whether any did.
    pub fn closed(&mut self, conn: u64) -> bool {
        let before = self.active.len();
        self.active.retain(|_, i| i.conn != conn);
        before != self.active.len()
    }

    /// Forget interactions that lapsed or whose thread exited.
    pub fn prune(&mut self, now: Instant) {
        self.active
            .retain(|t, i| now < i.ends && identity::still_same(t));
    }

    /// When the next interaction lapses (the loop must pass then).
    pub fn next_wake(&self) -> Option<Instant> {
        self.active.values().map(|i| i.ends).min()
    }

    pub fn merge_into(&self, desired: &mut Desired) {
        for (task, i) in &self.active {
            let t = desired.threads.entry(*task).or_default();
            t.nice = Some(t.nice.map_or(i.nice, |n| n.min(i.nice)));
            let s = self.boost.slice_ns;
            t.slice_ns = Some(t.slice_ns.map_or(s, |m| m.min(s)));
        }
    }
}
