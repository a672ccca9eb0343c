//! `boost`: framework-assisted task characterization, seed 000 §IV (eq. 6).
//!
//! Android's InputDeviceDispatcher hands each input event to the user-interactive task over
//! binder, and the modified framework passes that task's TID to the kernel. Here the dispatcher is
//! any task labelled `input`: when it wakes a task (`Record::Wakeup { waker }`), that task is
//! boosted to W' = C × ΣW / P (eq. 6; ΣW and P over the run-queue S it was woken onto, P by eq. 3),
//! capped at ω−20, then rounded up to the nice level whose weight is at least W'. It returns to
//! its own weight when it leaves the CPU — its slice ran out (preempted) or it blocked.
//!
//! Note: eq. 6 uses ΣW from before the boost; the boost itself grows ΣW, so the slice eq. 2 then
//! gives is C × ΣW / (ΣW − w + W'), somewhat under C unless capped (the paper's Example 1 is
//! capped: 9.86 ms). We apply eq. 6 as published.
//!
//! Works with any fair policy (`cfs`, `vtcfs`, `eevdf`, …) since it acts only through weights.

use crate::engine::{Control, Mechanism};
use crate::log::Record;
use crate::policy::Params;
use std::collections::BTreeMap;
use uxsched_model::formulas::{boost_weight, cfs_period};
use uxsched_model::weights::{nice_to_weight, weight_to_nice_at_least};
use uxsched_model::{Nanos, MS};

/// Android's CFS period constants (seed 000 eq. 3).
const LATENCY: Nanos = 5 * MS;
const MIN_GRANULARITY: Nanos = MS;

pub struct Boost {
    /// The system-wide constant C (§IV: the time a task needs to answer a request).
    pub c: Nanos,
    /// Boosted task → its own weight, to restore.
    boosted: BTreeMap<u32, u64>,
    /// Tasks labelled `input` (filled at start).
    dispatchers: Vec<u32>,
    /// Boosts applied (for reports and tests).
    pub count: u64,
}

impl Boost {
    pub fn new(c: Nanos) -> Self {
        Boost {
            c,
            boosted: BTreeMap::new(),
            dispatchers: Vec::new(),
            count: 0,
        }
    }

    /// Takes `boost.c` (default 3 ms, the paper's smaller setting).
    pub fn from_params(p: &mut Params) -> Result<Self, String> {
        let c = p.take_duration("boost.c")?.unwrap_or(3 * MS);
        if c == 0 {
            return Err("--param boost.c must be positive (e.g. boost.c=3ms)".into());
        }
        Ok(Self::new(c))
    }

    /// Eq. 6 then the nice rounding: the weight a task on a run-queue with `n` entities of total
    /// weight `total` is boosted to.
    pub fn boosted_weight(c: Nanos, n: usize, total: u64) -> u64 {
        let w = boost_weight(c, total, cfs_period(n, LATENCY, MIN_GRANULARITY));
        nice_to_weight(weight_to_nice_at_least(w))
    }
}

impl Mechanism for Boost {
    fn name(&self) -> &'static str {
        "boost"
    }

    fn start(&mut self, ctl: &mut Control) {
        self.dispatchers = ctl
            .meta()
            .tasks
            .iter()
            .enumerate()
            .filter(|(_, t)| t.labels.iter().any(|l| l == "input"))
            .map(|(i, _)| i as u32)
            .collect();
    }

    fn observe(&mut self, rec: &Record, ctl: &mut Control) {
        match *rec {
            Record::Wakeup {
                task,
                waker: Some(w),
                ..
            } if self.dispatchers.contains(&w) && ctl.is_fair(task) => {
                let own = *self
                    .boosted
                    .entry(task)
                    .or_insert_with(|| ctl.task_weight(task));
                let (n, total) = ctl.task_rq_load(task);
                let w = Self::boosted_weight(self.c, n, total).max(own);
                ctl.set_task_weight(task, w);
                self.count += 1;
            }
            Record::Switch { prev: Some(p), .. } => {
                if let Some(own) = self.boosted.remove(&p) {
                    ctl.set_task_weight(p, own);
                }
            }
            _ => {}
        }
    }
}
