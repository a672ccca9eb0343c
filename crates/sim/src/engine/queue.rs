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
//!
//! Layout, for speed (popping was ≈ 20 % of a run's time on `phone`): keys are bare 16-byte
//! integers, (time, kind, sequence, slot) packed into one `u128`, and the events themselves sit in
//! a slab that the key's low bits index, so a compare is one integer compare and a move 16 bytes.
//! The slot bits never decide an order: sequence numbers are unique. The keys are kept in a
//! calendar queue ([`super::wheel`]): a binary heap for the current millisecond, unsorted buckets
//! for later ones. (A 4-ary heap of all keys executed 2 % more instructions per event on `phone`
//! than a binary one and was no faster.)

use super::wheel::Wheel;
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

/// Bits of a key that index the slab: up to 16 M pending events.
const SLOT_BITS: u32 = 24;
/// Bits of the insertion sequence; when they run out the pending keys are renumbered
/// ([`EventQueue::renumber`]), keeping their order.
const SEQ_BITS: u32 = 62 - SLOT_BITS;
const SLOT_MASK: u128 = (1 << SLOT_BITS) - 1;
const SEQ_MASK: u128 = ((1 << SEQ_BITS) - 1) << SLOT_BITS;

/// (time, kind, sequence, slot) packed into one integer so that heap comparisons are a single
/// compare: time in the high 64 bits, then 2 bits of kind, the sequence, the slab slot.
fn key(at: Nanos, kind: Kind, seq: u64, slot: u32) -> u128 {
    (at as u128) << 64 | (kind as u128) << 62 | (seq as u128) << SLOT_BITS | slot as u128
}

pub struct EventQueue {
    /// The pending keys ([`super::wheel`]).
    keys: Wheel,
    /// Events by slot; a slot is free once its key has been popped.
    slab: Vec<Ev>,
    free: Vec<u32>,
    seq: u64,
    /// Key (time, RunDone, 0, CPU) of each CPU's pending work completion, [`NO_DONE`] if none.
    run_done: Vec<u128>,
    /// The smallest of `run_done`, kept up to date as slots change.
    first_done: u128,
}

/// No pending completion; its slot bits match no CPU.
const NO_DONE: u128 = u128::MAX;

impl Default for EventQueue {
    fn default() -> Self {
        EventQueue {
            keys: Wheel::default(),
            slab: Vec::new(),
            free: Vec::new(),
            seq: 0,
            run_done: Vec::new(),
            first_done: NO_DONE,
        }
    }
}

impl EventQueue {
    /// Schedule an event; work completions go through [`EventQueue::set_run_done`] instead.
    pub fn push(&mut self, at: Nanos, ev: Ev) {
        debug_assert!(!matches!(ev, Ev::RunDone { .. }), "use set_run_done");
        let slot = match self.free.pop() {
            Some(s) => {
                self.slab[s as usize] = ev;
                s
            }
            None => {
                assert!(self.slab.len() < 1 << SLOT_BITS, "too many pending events");
                self.slab.push(ev);
                (self.slab.len() - 1) as u32
            }
        };
        if self.seq >= (1 << SEQ_BITS) - 1 {
            self.renumber();
        }
        self.seq += 1;
        self.keys.push(key(at, ev.kind(), self.seq, slot));
    }

    /// Give the pending keys the sequence numbers 1, 2, … in their order, which leaves the order
    /// of every pair of keys unchanged.
    #[cold]
    fn renumber(&mut self) {
        let mut all = self.keys.take_all();
        all.sort_unstable();
        for (i, k) in all.iter().enumerate() {
            self.keys
                .push((*k & !SEQ_MASK) | ((i as u128 + 1) << SLOT_BITS));
        }
        self.seq = all.len() as u64;
    }

    /// CPU `c`'s running work completes at `at` (replacing any pending completion of that CPU).
    pub fn set_run_done(&mut self, c: usize, at: Nanos) {
        if self.run_done.len() <= c {
            self.run_done.resize(c + 1, NO_DONE);
        }
        let k = key(at, Kind::RunDone, 0, c as u32);
        self.run_done[c] = k;
        if self.first_done & SLOT_MASK == c as u128 {
            self.refresh_first_done();
        } else if k < self.first_done {
            self.first_done = k;
        }
    }

    /// Forget CPU `cpu`'s pending work completion (its running work changed).
    pub fn cancel_run_done(&mut self, cpu: usize) {
        if let Some(slot) = self.run_done.get_mut(cpu) {
            let was = std::mem::replace(slot, NO_DONE);
            if was != NO_DONE && self.first_done & SLOT_MASK == cpu as u128 {
                self.refresh_first_done();
            }
        }
    }

    /// The smallest completion key: a plain minimum, no branch per CPU.
    fn refresh_first_done(&mut self) {
        self.first_done = self.run_done.iter().copied().fold(NO_DONE, u128::min);
    }

    pub fn pop_until(&mut self, until: Nanos) -> Option<(Nanos, Ev)> {
        let heap_first = self.keys.first();
        if heap_first.is_none_or(|h| self.first_done < h) {
            let k = self.first_done;
            let t = (k >> 64) as Nanos;
            if k == NO_DONE || t > until {
                return None;
            }
            let c = (k & SLOT_MASK) as usize;
            self.run_done[c] = NO_DONE;
            self.refresh_first_done();
            return Some((t, Ev::RunDone { cpu: c as u16 }));
        }
        if heap_first.is_some_and(|h| (h >> 64) as Nanos > until) {
            return None;
        }
        let k = self.keys.pop_first();
        let slot = (k & SLOT_MASK) as u32;
        self.free.push(slot);
        Some(((k >> 64) as Nanos, self.slab[slot as usize]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pops everything, with the reference order (time, kind, insertion) beside it.
    fn check_order(start_seq: u64) {
        let mut q = EventQueue {
            seq: start_seq,
            ..EventQueue::default()
        };
        let mut expect = Vec::new();
        let mut x = 7u64;
        for i in 0..500u32 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let at = (x >> 33) % 50;
            let ev = if i % 3 == 0 {
                Ev::Tick { cpu: i as u16 }
            } else {
                Ev::Wake { task: i, gen: 0 }
            };
            q.push(at, ev);
            expect.push((at, ev.kind(), i, ev));
            if i % 7 == 0 {
                q.set_run_done((i % 4) as usize, at);
            }
        }
        expect.sort_by_key(|&(at, kind, i, _)| (at, kind, i));
        let got: Vec<_> = std::iter::from_fn(|| q.pop_until(Nanos::MAX))
            .filter(|(_, ev)| !matches!(ev, Ev::RunDone { .. }))
            .collect();
        let want: Vec<_> = expect.iter().map(|&(at, _, _, ev)| (at, ev)).collect();
        assert_eq!(got, want);
    }

    /// Pushes and pops interleaved, with delays from nanoseconds to seconds (same bucket, the
    /// wheel, the overflow, and jumps over empty wheels), against a sorted reference.
    #[test]
    fn interleaved_pushes_and_pops_keep_the_order() {
        let mut q = EventQueue::default();
        let mut reference = std::collections::BTreeSet::new();
        let (mut now, mut x, mut n) = (0u64, 11u64, 0u32);
        for step in 0..20_000u32 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            if x >> 62 != 0 {
                let scale =
                    [1u64, 1_000, 1_000_000, 100_000_000, 3_000_000_000][(x >> 20) as usize % 5];
                let at = now + (x >> 33) % scale;
                let ev = if step % 5 == 0 {
                    Ev::Tick { cpu: 0 }
                } else {
                    Ev::Wake { task: n, gen: 0 }
                };
                q.push(at, ev);
                reference.insert((at, ev.kind(), n, ev));
                n += 1;
            } else {
                let want = reference.pop_first().map(|(at, _, _, ev)| (at, ev));
                assert_eq!(q.pop_until(Nanos::MAX), want);
                if let Some((at, _)) = want {
                    now = at;
                }
            }
        }
        while let Some((at, _, _, ev)) = reference.pop_first() {
            assert_eq!(q.pop_until(Nanos::MAX), Some((at, ev)));
        }
        assert_eq!(q.pop_until(Nanos::MAX), None);
    }

    #[test]
    fn pops_in_time_kind_insertion_order() {
        check_order(0);
    }

    #[test]
    fn renumbering_keeps_the_order() {
        check_order((1 << SEQ_BITS) - 100);
    }
}
