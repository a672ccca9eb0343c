//! The synchronisation objects tasks share, by interned index, and what each operation on them
//! does. Semantics follow rt-app where it defines them:
//! - mutexes hand ownership to the first waiter in FIFO order on unlock (no priority
//!   inheritance — rt-app's `pi_enabled` is not modelled). glibc's futex mutex does not hand
//!   over: it wakes one waiter that must take the lock again, and a running task may take it
//!   first; the two differ only with a third contender in that window (docs/fidelity.md);
//! - `signal` wakes one waiter, `broad` all, and a signal with no waiter is lost;
//! - a barrier releases its waiters when every task whose program uses it has arrived;
//! - `resume` wakes every task suspended on that name;
//! - messages carry the sender's interaction; a task woken by `signal`/`resume` adopts the
//!   waker's interaction if it has none, so a chain of hand-offs stays one interaction.

use super::{Sim, State};
use std::collections::{HashMap, VecDeque};

/// Names to dense indices, in order of first use.
#[derive(Default)]
pub(super) struct Interner(HashMap<String, usize>);

impl Interner {
    pub(super) fn get(&mut self, name: &str) -> usize {
        let n = self.0.len();
        *self.0.entry(name.to_string()).or_insert(n)
    }

    pub(super) fn len(&self) -> usize {
        self.0.len()
    }
}

/// The shared objects, by interned index.
#[derive(Default)]
pub struct SyncObjects {
    pub(super) mutex_names: Interner,
    pub(super) cond_names: Interner,
    barrier_names: Interner,
    pub(super) suspend_names: Interner,
    pub(super) chan_names: Interner,
    pub(super) timer_names: Interner,
    mutex_owner: Vec<Option<u32>>,
    mutex_waiters: Vec<VecDeque<u32>>,
    cond_waiters: Vec<VecDeque<u32>>,
    /// Per barrier: distinct tasks using it, and arrivals so far.
    barrier_users: Vec<Vec<u32>>,
    barrier_waiting: Vec<Vec<u32>>,
    suspended: Vec<Vec<u32>>,
    /// Per channel: queued messages (the interaction they carry) and blocked receivers.
    chan_msgs: Vec<VecDeque<Option<(u64, u32)>>>,
    chan_receivers: Vec<VecDeque<u32>>,
}

fn grow<T: Default>(v: &mut Vec<T>, i: usize) {
    if v.len() <= i {
        v.resize_with(i + 1, T::default);
    }
}

impl SyncObjects {
    /// The index of barrier `name`, with `tid` among the tasks that must arrive at it.
    pub(super) fn barrier_user(&mut self, name: &str, tid: u32) -> usize {
        let i = self.barrier_names.get(name);
        grow(&mut self.barrier_users, i);
        if !self.barrier_users[i].contains(&tid) {
            self.barrier_users[i].push(tid);
        }
        i
    }

    /// Size every table once all programs are compiled.
    pub fn finish_barriers(&mut self) {
        let n = self.mutex_names.0.len();
        self.mutex_owner.resize(n, None);
        self.mutex_waiters.resize_with(n, Default::default);
        self.cond_waiters
            .resize_with(self.cond_names.0.len(), Default::default);
        self.barrier_users
            .resize_with(self.barrier_names.0.len(), Default::default);
        self.barrier_waiting
            .resize_with(self.barrier_names.0.len(), Default::default);
        self.suspended
            .resize_with(self.suspend_names.0.len(), Default::default);
        self.chan_msgs
            .resize_with(self.chan_names.0.len(), Default::default);
        self.chan_receivers
            .resize_with(self.chan_names.0.len(), Default::default);
    }
}

impl Sim {
    pub(super) fn try_lock(&mut self, tid: u32, m: usize) -> bool {
        match self.sync.mutex_owner[m] {
            None => {
                self.sync.mutex_owner[m] = Some(tid);
                true
            }
            Some(o) if o == tid => true,
            Some(_) => {
                self.sync.mutex_waiters[m].push_back(tid);
                self.tasks[tid as usize].state = State::Blocked;
                false
            }
        }
    }

    pub(super) fn unlock(&mut self, tid: u32, m: usize) {
        if self.sync.mutex_owner[m] != Some(tid) {
            return; // unlocking a mutex one does not hold is a no-op, as rt-app tolerates
        }
        self.sync.mutex_owner[m] = self.sync.mutex_waiters[m].pop_front();
        if let Some(w) = self.sync.mutex_owner[m] {
            self.wake(w, Some(tid));
        }
    }

    pub(super) fn cond_wait(&mut self, tid: u32, cond: usize, mutex: usize) {
        self.unlock(tid, mutex);
        self.sync.cond_waiters[cond].push_back(tid);
        let t = &mut self.tasks[tid as usize];
        t.state = State::Blocked;
        t.prog.relock = Some(mutex);
    }

    pub(super) fn cond_signal(&mut self, tid: u32, cond: usize, all: bool) {
        while let Some(w) = self.sync.cond_waiters[cond].pop_front() {
            self.wake_with_carry(w, tid);
            if !all {
                break;
            }
        }
    }

    pub(super) fn barrier_arrive(&mut self, tid: u32, b: usize) -> bool {
        self.sync.barrier_waiting[b].push(tid);
        if self.sync.barrier_waiting[b].len() < self.sync.barrier_users[b].len() {
            self.tasks[tid as usize].state = State::Blocked;
            return false;
        }
        for w in std::mem::take(&mut self.sync.barrier_waiting[b]) {
            if w != tid {
                self.wake(w, Some(tid));
            }
        }
        true
    }

    /// Wake `w` on behalf of `waker`, handing over the waker's interaction if `w` has none.
    fn wake_with_carry(&mut self, w: u32, waker: u32) {
        if self.tasks[w as usize].carry.is_none() {
            self.tasks[w as usize].carry = self.tasks[waker as usize].carry;
        }
        self.wake(w, Some(waker));
    }

    /// Send on channel `c`: the message carries the sender's interaction to the first blocked
    /// receiver, or is queued.
    pub(super) fn chan_send(&mut self, tid: u32, c: usize) {
        let carry = self.tasks[tid as usize].carry;
        if let Some(r) = self.sync.chan_receivers[c].pop_front() {
            self.tasks[r as usize].carry = carry;
            self.wake(r, Some(tid));
        } else {
            self.sync.chan_msgs[c].push_back(carry);
        }
    }

    /// Receive on channel `c`: takes a queued message's interaction, else blocks (returns
    /// false).
    pub(super) fn chan_recv(&mut self, tid: u32, c: usize) -> bool {
        let t = tid as usize;
        match self.sync.chan_msgs[c].pop_front() {
            Some(carry) => {
                self.tasks[t].carry = carry;
                true
            }
            None => {
                self.sync.chan_receivers[c].push_back(tid);
                self.tasks[t].state = State::Blocked;
                false
            }
        }
    }

    /// Suspend the task on suspend point `s` until a `resume` of it.
    pub(super) fn suspend(&mut self, tid: u32, s: usize) {
        self.sync.suspended[s].push(tid);
        self.tasks[tid as usize].state = State::Blocked;
    }

    /// Wake every task suspended on `s`.
    pub(super) fn resume(&mut self, tid: u32, s: usize) {
        for w in std::mem::take(&mut self.sync.suspended[s]) {
            self.wake_with_carry(w, tid);
        }
    }
}
