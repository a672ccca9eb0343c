//! The event queue and its total order.
//!
//! Events are ordered by (time, kind, tie-break): at one instant, period refreshes and mechanism
//! timers come first (so a throttled class is released before anyone picks), then completions of
//! CPU work, then wake-ups (timers, task starts, block-device completions), then scheduler ticks. Within a kind, events fire
//! in the order they were scheduled, except work completions, which fire in CPU order. Nothing
//! depends on hash order or addresses, so a run is a pure function of workload, configuration and
//! seed.
//!
//! Work completions do not go through the heap: each CPU has at most one pending completion, which
//! is replaced whenever the running work changes (preemption re-times it). Keeping them in a
//! per-CPU slot avoids filling the heap with stale completions of preempted long-running work.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use uxsched_model::Nanos;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// RT throttling period or a cgroup's bandwidth period restarts, or a mechanism's timer
    /// (e.g. a DVFS governor's sample).
    Period = 0,
    /// The running task on a CPU finishes its current piece of work.
    RunDone = 1,
    /// A blocked task's sleep or timer expires, a task starts, or the block device completes.
    Wake = 2,
    /// A CPU's scheduler tick.
    Tick = 3,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ev {
    RtPeriod,
    Bandwidth {
        group: u32,
    },
    RunDone {
        cpu: u16,
    },
    Wake {
        task: u32,
        gen: u64,
    },
    Tick {
        cpu: u16,
    },
    /// The block device finished the request in service ([`super::blockdev`]).
    IoDone,
    /// The I/O scheduler's idle window ends.
    IoIdle,
    /// A mechanism's timer ([`super::hooks`]).
    Mech {
        idx: u16,
        token: u64,
    },
}

impl Ev {
    fn kind(&self) -> Kind {
        match self {
            Ev::RtPeriod | Ev::Bandwidth { .. } | Ev::Mech { .. } => Kind::Period,
            Ev::RunDone { .. } => Kind::RunDone,
            Ev::Wake { .. } | Ev::IoDone | Ev::IoIdle => Kind::Wake,
            Ev::Tick { .. } => Kind::Tick,
        }
    }
}

/// (time, kind, sequence) packed into one integer so heap comparisons are a single compare:
/// time in the high 64 bits, then 2 bits of kind, then 62 bits of insertion sequence.
fn key(at: Nanos, kind: Kind, seq: u64) -> u128 {
    (at as u128) << 64 | (kind as u128) << 62 | (seq as u128 & ((1 << 62) - 1))
}

#[derive(Default)]
pub struct EventQueue {
    heap: BinaryHeap<Reverse<(u128, Ev)>>,
    seq: u64,
    /// Pending work completion of each CPU.
    run_done: Vec<Option<Nanos>>,
    /// The earliest pending completion, (time, CPU), kept up to date as slots change.
    first_done: Option<(Nanos, usize)>,
}

impl EventQueue {
    /// Schedule an event; work completions go through [`EventQueue::set_run_done`] instead.
    pub fn push(&mut self, at: Nanos, ev: Ev) {
        debug_assert!(!matches!(ev, Ev::RunDone { .. }), "use set_run_done");
        self.seq += 1;
        self.heap.push(Reverse((key(at, ev.kind(), self.seq), ev)));
    }

    /// CPU `c`'s running work completes at `at` (replacing any pending completion of that CPU).
    pub fn set_run_done(&mut self, c: usize, at: Nanos) {
        if self.run_done.len() <= c {
            self.run_done.resize(c + 1, None);
        }
        self.run_done[c] = Some(at);
        match self.first_done {
            Some((_, fc)) if fc == c => self.refresh_first_done(),
            Some(first) if first <= (at, c) => {}
            _ => self.first_done = Some((at, c)),
        }
    }

    /// Forget CPU `cpu`'s pending work completion (its running work changed).
    pub fn cancel_run_done(&mut self, cpu: usize) {
        if let Some(slot) = self.run_done.get_mut(cpu) {
            if slot.take().is_some() && self.first_done.is_some_and(|(_, c)| c == cpu) {
                self.refresh_first_done();
            }
        }
    }

    fn refresh_first_done(&mut self) {
        self.first_done = self
            .run_done
            .iter()
            .enumerate()
            .filter_map(|(c, s)| s.map(|t| (t, c)))
            .min();
    }

    pub fn pop_until(&mut self, until: Nanos) -> Option<(Nanos, Ev)> {
        let heap_first = self.heap.peek().map(|Reverse((k, _))| *k);
        let take_done = match (self.first_done, heap_first) {
            (Some((t, _)), Some(k)) => key(t, Kind::RunDone, 0) < k,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if take_done {
            let (t, c) = self.first_done.expect("checked");
            if t > until {
                return None;
            }
            self.run_done[c] = None;
            self.refresh_first_done();
            return Some((t, Ev::RunDone { cpu: c as u16 }));
        }
        match heap_first {
            Some(k) if (k >> 64) as Nanos <= until => self
                .heap
                .pop()
                .map(|Reverse((k, ev))| ((k >> 64) as Nanos, ev)),
            _ => None,
        }
    }
}
