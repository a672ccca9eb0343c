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

#[cfg(test)]
mod tests {
    use super::*;
    use uxsched_model::MS;

    fn batch(ctx: usize, class: GpuClass) -> Batch {
        Batch {
            ctx,
            class,
            exec: 4 * MS,
            submitted: 0,
        }
    }

    /// Contexts 0..8 real-time with one batch each, context 8 best-effort with ten.
    fn queues() -> Vec<VecDeque<Batch>> {
        let mut q: Vec<VecDeque<Batch>> = (0..8)
            .map(|i| VecDeque::from([batch(i, GpuClass::RealTime)]))
            .collect();
        q.push((0..10).map(|_| batch(8, GpuClass::BestEffort)).collect());
        q
    }

    #[test]
    fn shuffledog_dispatches_at_most_five_real_time_batches_and_best_effort_only_after() {
        let mut d = ShuffleDog::default();
        let mut q = queues();
        let mut ring = VecDeque::new();
        d.fill(&mut q, &mut ring, 15);
        assert_eq!(ring.len(), 5);
        assert!(ring.iter().all(|b| b.class == GpuClass::RealTime));
        // Second dispatch: the last three real-time batches, then best-effort up to eq. 1's
        // limit — one batch while no best-effort batch has completed yet.
        d.fill(&mut q, &mut ring, 15);
        assert_eq!(ring.len(), 9);
        assert_eq!(ring.back().unwrap().class, GpuClass::BestEffort);
        // Five 4 ms completions: inflight ⌊16.7 / 4⌋ = 4.
        for _ in 0..5 {
            d.completed(&batch(8, GpuClass::BestEffort), 4 * MS);
        }
        assert_eq!(d.be_inflight(), 4);
        d.fill(&mut q, &mut ring, 15);
        let be = ring
            .iter()
            .filter(|b| b.class == GpuClass::BestEffort)
            .count();
        assert_eq!(be, 4);
    }

    #[test]
    fn fifo_ignores_classes_and_takes_contexts_in_turn() {
        let mut q = queues();
        let mut ring = VecDeque::new();
        Fifo::new(15).fill(&mut q, &mut ring, 15);
        assert_eq!(ring.len(), 15);
        let order: Vec<usize> = ring.iter().map(|b| b.ctx).collect();
        assert_eq!(&order[..9], &[0, 1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(order[9..].iter().all(|&c| c == 8));
    }
}
