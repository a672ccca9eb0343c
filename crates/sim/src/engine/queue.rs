//! The event queue and its total order.
//!
//! Events are ordered by (time, kind, sequence number): at one instant, period refreshes come
//! first (so a throttled class is released before anyone picks), then completions of CPU work,
//! then wake-ups (timers, task starts), then scheduler ticks. Within a kind, events fire in the
//! order they were scheduled. Nothing depends on hash order or addresses, so a run is a pure
//! function of workload, configuration and seed.

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
    /// A blocked task's sleep or timer expires, or a task starts.
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
        gen: u64,
    },
    Wake {
        task: u32,
        gen: u64,
    },
    Tick {
        cpu: u16,
    },
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
            Ev::Wake { .. } => Kind::Wake,
            Ev::Tick { .. } => Kind::Tick,
        }
    }
}

#[derive(Default)]
pub struct EventQueue {
    heap: BinaryHeap<Reverse<(Nanos, Kind, u64, Ev)>>,
    seq: u64,
}

impl EventQueue {
    pub fn push(&mut self, at: Nanos, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((at, ev.kind(), self.seq, ev)));
    }

    pub fn pop_until(&mut self, until: Nanos) -> Option<(Nanos, Ev)> {
        match self.heap.peek() {
            Some(Reverse((t, ..))) if *t <= until => {
                self.heap.pop().map(|Reverse((t, _, _, ev))| (t, ev))
            }
            _ => None,
        }
    }
}
