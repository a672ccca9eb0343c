//! cgroup CPU bandwidth (`cpu.cfs_quota_us` / `cpu.cfs_period_us`, `cpu.max` on v2).
//!
//! A limited group may use `quota` of CPU time per `period`, summed over all CPUs and over its
//! descendants. Usage is charged as its tasks run; when the pool is empty the group is throttled —
//! its entity leaves its parent's run-queue on every CPU — until the next period refills the
//! pool (no burst carry-over). Exhaustion is noticed when the running task is accounted (at
//! ticks and scheduling events), so a group can overrun by up to a tick per CPU, like the kernel
//! between its runtime checks.

use super::queue::Ev;
use super::Sim;
use crate::log::Record;
use crate::policy::Enqueue;
use crate::workload::Bandwidth;
use uxsched_model::Nanos;

#[derive(Debug, Clone)]
pub struct Pool {
    quota: Nanos,
    period: Nanos,
    remaining: i64,
    throttled: bool,
}

impl Pool {
    pub fn new(b: Bandwidth) -> Self {
        Pool {
            quota: b.quota,
            period: b.period,
            remaining: b.quota as i64,
            throttled: false,
        }
    }
}

impl Sim {
    pub(super) fn start_bandwidth_timers(&mut self) {
        for g in 0..self.groups.len() {
            if let Some(p) = &self.groups[g].bw {
                self.queue.push(p.period, Ev::Bandwidth { group: g as u32 });
            }
        }
    }

    pub(super) fn bandwidth_throttled(&self, g: usize) -> bool {
        self.groups[g].bw.as_ref().is_some_and(|p| p.throttled)
    }

    /// Charge `delta` of the task's CPU time to every limited group it is in.
    pub(super) fn bandwidth_charge(&mut self, tid: u32, delta: Nanos) {
        let mut g = self.tasks[tid as usize].group;
        while g != 0 {
            let exhausted = match &mut self.groups[g].bw {
                Some(p) => {
                    p.remaining -= delta as i64;
                    p.remaining <= 0 && !p.throttled
                }
                None => false,
            };
            if exhausted {
                self.throttle(g);
            }
            g = self.groups[g].parent.unwrap_or(0);
        }
    }

    fn throttle(&mut self, g: usize) {
        if let Some(p) = &mut self.groups[g].bw {
            p.throttled = true;
        }
        let now = self.now;
        for c in 0..self.ncpus() {
            let ge = self.group_entity(g, c);
            if self.ents[ge].on_rq {
                self.fair_dequeue_up(ge, c, false);
                self.emit(Record::Throttle {
                    t: now,
                    group: g as u32,
                    cpu: c as u16,
                    on: true,
                });
                // Whatever runs there may belong to the group: let schedule() decide.
                self.resched(c);
            }
        }
    }

    pub(super) fn bandwidth_refresh(&mut self, g: usize) {
        let Some(p) = &mut self.groups[g].bw else {
            return;
        };
        p.remaining = p.quota as i64;
        let period = p.period;
        let was = std::mem::take(&mut p.throttled);
        if was {
            let now = self.now;
            let parent = self.groups[g].parent.unwrap_or(0);
            for c in 0..self.ncpus() {
                let ge = self.group_entity(g, c);
                if self.rqs[self.rq_index(g, c)].nr_running > 0 && !self.ents[ge].on_rq {
                    self.fair_enqueue_up(ge, parent, c, Enqueue::Wakeup);
                    self.emit(Record::Throttle {
                        t: now,
                        group: g as u32,
                        cpu: c as u16,
                        on: false,
                    });
                    if self.cpus[c].curr.is_none() {
                        self.resched(c);
                    }
                }
            }
        }
        self.queue
            .push(self.now + period, Ev::Bandwidth { group: g as u32 });
    }
}
