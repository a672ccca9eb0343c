//! The RT class: SCHED_FIFO and SCHED_RR over priorities 1–99, with RT throttling.
//!
//! A higher priority always runs first; equal priorities run in FIFO order, a preempted task
//! staying at the head of its list. SCHED_RR tasks go to the tail when their quantum
//! (`sched_rr_timeslice`, 100 ms) is used up and another task of the same priority waits.
//! Throttling (`sched_rt_runtime_us` / `sched_rt_period_us` = 950 ms / 1 s) is accounted per
//! CPU, as the kernel does without RT_RUNTIME_SHARE: once RT tasks have run `rt_runtime` in the
//! current period, the CPU serves only the fair class until the period ends.

use super::queue::Ev;
use super::{Class, Sim, State};
use crate::log::Record;
use std::collections::{BTreeMap, VecDeque};
use uxsched_model::Nanos;

#[derive(Default)]
pub struct RtRq {
    /// Queued (not running) RT tasks by priority.
    queues: BTreeMap<u8, VecDeque<u32>>,
    /// RT time used on this CPU in the current period.
    time: Nanos,
    pub throttled: bool,
    /// The running RR task used up its quantum: it goes to the tail when put back.
    rr_expired: bool,
}

impl RtRq {
    fn best(&self) -> Option<(u8, u32)> {
        self.queues
            .iter()
            .next_back()
            .and_then(|(&p, q)| q.front().map(|&t| (p, t)))
    }

    fn remove(&mut self, prio: u8, tid: u32) -> bool {
        if let Some(q) = self.queues.get_mut(&prio) {
            if let Some(i) = q.iter().position(|&t| t == tid) {
                q.remove(i);
                if q.is_empty() {
                    self.queues.remove(&prio);
                }
                return true;
            }
        }
        false
    }

    pub fn has_queued(&self) -> bool {
        !self.queues.is_empty()
    }
}

impl Sim {
    fn rt_prio(&self, tid: u32) -> u8 {
        match self.tasks[tid as usize].class {
            Class::Rt { prio, .. } => prio,
            Class::Fair => 0,
        }
    }

    pub(super) fn rt_enqueue(&mut self, cpu: usize, tid: u32, head: bool) {
        let prio = self.rt_prio(tid);
        let q = self.cpus[cpu].rt.queues.entry(prio).or_default();
        if head {
            q.push_front(tid);
        } else {
            q.push_back(tid);
        }
    }

    pub(super) fn rt_dequeue(&mut self, cpu: usize, tid: u32) {
        let prio = self.rt_prio(tid);
        self.cpus[cpu].rt.remove(prio, tid);
    }

    /// The RT task that should run on `cpu`, if the class is not throttled.
    pub(super) fn rt_pick(&self, cpu: usize) -> Option<u32> {
        let c = &self.cpus[cpu];
        if c.rt.throttled {
            return None;
        }
        let queued = c.rt.best();
        let running = c.curr.filter(|&t| {
            self.tasks[t as usize].state == State::Running
                && matches!(self.tasks[t as usize].class, Class::Rt { .. })
                && !self.tasks[t as usize].yielded
                && !c.rt.rr_expired
        });
        match (running, queued) {
            (Some(r), Some((p, q))) => Some(if p > self.rt_prio(r) { q } else { r }),
            (Some(r), None) => Some(r),
            (None, q) => q.map(|(_, t)| t),
        }
    }

    pub(super) fn rt_set_next(&mut self, cpu: usize, tid: u32) {
        self.rt_dequeue(cpu, tid);
    }

    /// The running RT task leaves the CPU while still runnable: back to the head of its
    /// priority list if preempted, to the tail after a yield or an expired RR quantum.
    pub(super) fn rt_put_prev(&mut self, cpu: usize, tid: u32) {
        if self.tasks[tid as usize].state != State::Running {
            return;
        }
        let tail =
            self.tasks[tid as usize].yielded || std::mem::take(&mut self.cpus[cpu].rt.rr_expired);
        self.rt_enqueue(cpu, tid, !tail);
        self.rt_push(cpu, tid);
    }

    /// A runnable RT task that cannot run here moves to a CPU running something less important
    /// (`push_rt_task`).
    fn rt_push(&mut self, cpu: usize, tid: u32) {
        let prio = self.rt_prio(tid);
        let target = (0..self.ncpus()).find(|&c| {
            c != cpu
                && self.tasks[tid as usize].allows(c)
                && !self.cpus[c].rt.throttled
                && self.cpus[c].rt.best().is_none_or(|(p, _)| p < prio)
                && self.cpus[c].curr.is_none_or(|r| self.rt_prio(r) < prio)
        });
        if let Some(to) = target {
            self.rt_dequeue(cpu, tid);
            self.tasks[tid as usize].cpu = to;
            self.rt_enqueue(to, tid, false);
            let now = self.now;
            self.emit(Record::Migrate {
                t: now,
                task: tid,
                from: cpu as u16,
                to: to as u16,
            });
            self.resched(to);
        }
    }

    pub(super) fn rt_charge(&mut self, cpu: usize, tid: u32, delta: Nanos) {
        let c = &mut self.cpus[cpu];
        c.rt.time += delta;
        let t = &mut self.tasks[tid as usize];
        t.rr_left = t.rr_left.saturating_sub(delta);
        if c.rt.time > self.cfg.rt_runtime
            && !c.rt.throttled
            && self.cfg.rt_runtime < self.cfg.rt_period
        {
            c.rt.throttled = true;
            let now = self.now;
            self.emit(Record::Throttle {
                t: now,
                group: u32::MAX,
                cpu: cpu as u16,
                on: true,
            });
            self.resched(cpu);
        }
    }

    pub(super) fn rt_tick(&mut self, cpu: usize, tid: u32) {
        let Class::Rt { prio, rr: true } = self.tasks[tid as usize].class else {
            return;
        };
        if self.tasks[tid as usize].rr_left > 0 {
            return;
        }
        self.tasks[tid as usize].rr_left = self.cfg.rr_quantum;
        if self.cpus[cpu]
            .rt
            .queues
            .get(&prio)
            .is_some_and(|q| !q.is_empty())
        {
            self.cpus[cpu].rt.rr_expired = true;
            self.resched(cpu);
        }
    }

    /// A new RT period: usage restarts and throttled CPUs serve RT again.
    pub(super) fn rt_period(&mut self) {
        let now = self.now;
        for c in 0..self.ncpus() {
            self.cpus[c].rt.time = 0;
            if std::mem::take(&mut self.cpus[c].rt.throttled) {
                self.emit(Record::Throttle {
                    t: now,
                    group: u32::MAX,
                    cpu: c as u16,
                    on: false,
                });
                self.resched(c);
            }
        }
        self.queue.push(now + self.cfg.rt_period, Ev::RtPeriod);
    }
}
