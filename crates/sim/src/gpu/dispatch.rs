//! Which batches enter the GPU ring: stock KGSL's FIFO and ShuffleDog's two-class round robin
//! with adaptive inflight (seed 003 §5.3, eq. 1).

use super::{Batch, GpuClass};
use std::collections::VecDeque;
use uxsched_model::formulas::adaptive_inflight;
use uxsched_model::Nanos;

pub trait Dispatcher {
    /// Move batches from the context queues into `ring` (at most `capacity` in it). Returns the
    /// number of best-effort batches this dispatch allows in the ring (for checks and reports).
    fn fill(
        &mut self,
        queues: &mut [VecDeque<Batch>],
        ring: &mut VecDeque<Batch>,
        capacity: usize,
    ) -> usize;
    /// A batch finished after running `exec` on the GPU.
    fn completed(&mut self, _batch: &Batch, _exec: Nanos) {}
}

/// Stock KGSL as the paper describes it (§5.3 "Inadequacies"): no priorities — each context's
/// batches in submission order, contexts taken in turn — and up to `inflight` batches in the
/// ring (KGSL's `_dispatcher_inflight`, 15).
pub struct Fifo {
    pub inflight: usize,
    next: usize,
}

impl Fifo {
    pub fn new(inflight: usize) -> Self {
        Fifo { inflight, next: 0 }
    }
}

impl Dispatcher for Fifo {
    fn fill(
        &mut self,
        queues: &mut [VecDeque<Batch>],
        ring: &mut VecDeque<Batch>,
        capacity: usize,
    ) -> usize {
        let cap = self.inflight.min(capacity);
        let n = queues.len();
        while ring.len() < cap {
            let Some(i) = (0..n)
                .map(|k| (self.next + k) % n)
                .find(|&i| !queues[i].is_empty())
            else {
                break;
            };
            self.next = (i + 1) % n;
            ring.push_back(queues[i].pop_front().expect("non-empty"));
        }
        cap
    }
}

/// ShuffleDog's GPU scheduler: real-time contexts first, round robin, at most `rt_per_dispatch`
/// (5) of their batches per dispatch; best-effort batches only when no real-time batch waits,
/// round robin, and never more than inflight(x) = ⌊16.7 ms / x⌋ of them in the ring, x the median
/// execution time of the last five best-effort batches (eq. 1).
pub struct ShuffleDog {
    pub rt_per_dispatch: usize,
    /// Execution times of the last five best-effort batches.
    recent_be: VecDeque<Nanos>,
    /// Round-robin cursors per class.
    next_rt: usize,
    next_be: usize,
}

impl Default for ShuffleDog {
    fn default() -> Self {
        ShuffleDog {
            rt_per_dispatch: 5,
            recent_be: VecDeque::new(),
            next_rt: 0,
            next_be: 0,
        }
    }
}

impl ShuffleDog {
    /// Eq. 1 on the recorded history; with none yet, one batch (nothing is known of its size).
    pub fn be_inflight(&self) -> usize {
        if self.recent_be.is_empty() {
            return 1;
        }
        let mut v: Vec<Nanos> = self.recent_be.iter().copied().collect();
        v.sort_unstable();
        // Fewer than five seen and an even count: the upper middle.
        let median = v[v.len() / 2];
        adaptive_inflight(median) as usize
    }

    /// Take the next batch of `class` round robin from `cursor`.
    fn take(queues: &mut [VecDeque<Batch>], class: GpuClass, cursor: &mut usize) -> Option<Batch> {
        let n = queues.len();
        for k in 0..n {
            let i = (*cursor + k) % n;
            if queues[i].front().is_some_and(|b| b.class == class) {
                *cursor = (i + 1) % n;
                return queues[i].pop_front();
            }
        }
        None
    }
}

impl Dispatcher for ShuffleDog {
    fn fill(
        &mut self,
        queues: &mut [VecDeque<Batch>],
        ring: &mut VecDeque<Batch>,
        capacity: usize,
    ) -> usize {
        let mut rt = 0;
        while rt < self.rt_per_dispatch && ring.len() < capacity {
            match Self::take(queues, GpuClass::RealTime, &mut self.next_rt) {
                Some(b) => {
                    ring.push_back(b);
                    rt += 1;
                }
                None => break,
            }
        }
        let limit = self.be_inflight();
        let rt_waiting = queues
            .iter()
            .any(|q| q.front().is_some_and(|b| b.class == GpuClass::RealTime));
        if rt_waiting {
            return limit;
        }
        let mut be = ring
            .iter()
            .filter(|b| b.class == GpuClass::BestEffort)
            .count();
        while be < limit && ring.len() < capacity {
            match Self::take(queues, GpuClass::BestEffort, &mut self.next_be) {
                Some(b) => {
                    ring.push_back(b);
                    be += 1;
                }
                None => break,
            }
        }
        limit
    }

    fn completed(&mut self, batch: &Batch, exec: Nanos) {
        if batch.class == GpuClass::BestEffort {
            if self.recent_be.len() == 5 {
                self.recent_be.pop_front();
            }
            self.recent_be.push_back(exec);
        }
    }
}
