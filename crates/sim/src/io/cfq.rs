//! A CFQ-like I/O scheduler (Linux `cfq-iosched.c`, the Android default of seed 003's era):
//! one queue per stream; the real-time class is served before best-effort, best-effort before
//! idle; within a class, queues take turns, each for a time slice that grows with priority —
//! slice = slice_sync + slice_sync / 5 × (4 − level), `cfq_prio_slice` — and, when its queue
//! runs dry, CFQ keeps the device idle `slice_idle` waiting for that stream's next (synchronous)
//! request instead of switching at once. A real-time request preempts a best-effort slice
//! (`cfq_should_preempt`). Defaults: slice_sync 100 ms, slice_idle 8 ms.

use super::{Decision, IoPrio, IoScheduler, Request};
use std::collections::VecDeque;
use uxsched_model::{Nanos, MS};

pub struct Cfq {
    pub slice_sync: Nanos,
    pub slice_idle: Nanos,
    queues: Vec<VecDeque<Request>>,
    prio: Vec<IoPrio>,
    /// The queue being served, its slice end, and when its idle window closes (if idling).
    active: Option<(usize, Nanos, Option<Nanos>)>,
    /// Round-robin position per class.
    cursor: [usize; 3],
}

impl Cfq {
    pub fn new(streams: usize) -> Self {
        Cfq {
            slice_sync: 100 * MS,
            slice_idle: 8 * MS,
            queues: vec![VecDeque::new(); streams],
            prio: vec![IoPrio::BestEffort(4); streams],
            active: None,
            cursor: [0; 3],
        }
    }

    fn slice(&self, prio: IoPrio) -> Nanos {
        let base = self.slice_sync as i64;
        (base + base / 5 * (4 - prio.level() as i64)).max(base / 5) as Nanos
    }

    /// The next non-empty queue of the best class, round robin within it.
    fn select(&mut self) -> Option<usize> {
        let n = self.queues.len();
        let class = (0..n)
            .filter(|&i| !self.queues[i].is_empty())
            .map(|i| self.prio[i].class_rank())
            .min()?;
        let c = class as usize;
        let i = (0..n)
            .map(|k| (self.cursor[c] + k) % n)
            .find(|&i| !self.queues[i].is_empty() && self.prio[i].class_rank() == class)?;
        self.cursor[c] = (i + 1) % n;
        Some(i)
    }
}

impl IoScheduler for Cfq {
    fn add(&mut self, r: Request, _now: Nanos) {
        self.prio[r.stream] = r.prio;
        self.queues[r.stream].push_back(r);
        // A real-time request preempts a lower-class slice.
        if let Some((a, _, _)) = self.active {
            if r.prio.class_rank() < self.prio[a].class_rank() {
                self.active = None;
            }
        }
    }

    fn next(&mut self, now: Nanos) -> Decision {
        if let Some((a, end, idle)) = self.active {
            if now < end {
                if let Some(r) = self.queues[a].pop_front() {
                    self.active = Some((a, end, None));
                    return Decision::Serve(r);
                }
                let until = idle.unwrap_or(now + self.slice_idle).min(end);
                if now < until {
                    self.active = Some((a, end, Some(until)));
                    return Decision::IdleUntil(until);
                }
            }
            self.active = None; // slice used up, or the stream did not come back in time
        }
        let Some(q) = self.select() else {
            return Decision::Nothing;
        };
        let end = now + self.slice(self.prio[q]);
        self.active = Some((q, end, None));
        let r = self.queues[q]
            .pop_front()
            .expect("selected a non-empty queue");
        Decision::Serve(r)
    }
}
