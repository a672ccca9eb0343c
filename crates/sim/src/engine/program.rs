//! What a task does next: its compiled program, and the synchronisation objects tasks share.
//!
//! Names (locks, conditions, barriers, suspend points, channels, timers) are interned to indices
//! when the workload is built. Semantics follow rt-app where it defines them:
//! - mutexes hand ownership to the first waiter in FIFO order on unlock (no priority
//!   inheritance — rt-app's `pi_enabled` is not modelled). glibc's futex mutex does not hand
//!   over: it wakes one waiter that must take the lock again, and a running task may take it
//!   first; the two differ only with a third contender in that window (docs/fidelity.md);
//! - `signal` wakes one waiter, `broad` all, and a signal with no waiter is lost;
//! - a barrier releases its waiters when every task whose program uses it has arrived;
//! - `resume` wakes every task suspended on that name;
//! - timers are per task and drift-free: each arrival moves the next deadline one period on;
//!   in `relative` mode a late arrival restarts the period from now, in `absolute` mode it
//!   catches up without sleeping;
//! - messages carry the sender's interaction; a task woken by `signal`/`resume` adopts the
//!   waker's interaction if it has none, so a chain of hand-offs stays one interaction.

use super::{Segment, Sim, State};
use crate::log::Record;
use crate::workload::{Event, TaskSpec};
use std::collections::{HashMap, VecDeque};
use uxsched_model::Nanos;

/// A compiled event.
#[derive(Debug, Clone, Copy)]
pub enum Op {
    Run(u64),
    Runtime(u64),
    Sleep(u64),
    Io(u64),
    Read {
        file: usize,
        bytes: u64,
    },
    Timer {
        timer: usize,
        period: Nanos,
        absolute: bool,
    },
    Lock(usize),
    Unlock(usize),
    Wait {
        cond: usize,
        mutex: usize,
    },
    Signal(usize),
    Broadcast(usize),
    SignalWait {
        cond: usize,
        mutex: usize,
    },
    Barrier(usize),
    Suspend(usize),
    Resume(usize),
    Send(usize),
    Recv(usize),
    Yield,
    Begin(u32),
    End(u32),
}

/// A task's position in its program.
#[derive(Debug, Clone)]
pub struct Cursor {
    /// Phases: (ops, repetitions, CPU affinity while in the phase).
    phases: Vec<(Vec<Op>, u64)>,
    masks: Vec<Option<Vec<u64>>>,
    /// The cursor just entered a phase whose affinity must be applied.
    entered_phase: bool,
    loops: Option<u64>,
    phase: usize,
    rep: u64,
    op: usize,
    loop_no: u64,
    /// Next deadline of each of this task's timers.
    timers: Vec<Option<Nanos>>,
    /// After waking from a condition wait, the mutex still to re-acquire.
    pub relock: Option<usize>,
    /// A pass over the phases ended with the op just stepped past; reported once it is done.
    loop_done_pending: bool,
}

#[derive(Default)]
struct Interner(HashMap<String, usize>);

impl Interner {
    fn get(&mut self, name: &str) -> usize {
        let n = self.0.len();
        *self.0.entry(name.to_string()).or_insert(n)
    }
}

/// The shared objects, by interned index.
#[derive(Default)]
pub struct SyncObjects {
    mutex_names: Interner,
    cond_names: Interner,
    barrier_names: Interner,
    suspend_names: Interner,
    chan_names: Interner,
    timer_names: Interner,
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

/// Compile one task's phases, interning every name. `interactions` collects interaction kinds.
pub fn compile(
    tid: u32,
    t: &TaskSpec,
    phase_masks: Vec<Option<Vec<u64>>>,
    s: &mut SyncObjects,
    interactions: &mut Vec<String>,
    files: &[crate::workload::FileSpec],
) -> Result<Cursor, String> {
    let mut interaction = |name: &str| -> u32 {
        match interactions.iter().position(|n| n == name) {
            Some(i) => i as u32,
            None => {
                interactions.push(name.to_string());
                (interactions.len() - 1) as u32
            }
        }
    };
    let mut phases = Vec::new();
    let mut masks = Vec::new();
    for (p, mask) in t.phases.iter().zip(phase_masks) {
        let mut ops = Vec::with_capacity(p.events.len());
        for e in &p.events {
            ops.push(match e {
                Event::Run(w) => Op::Run(*w),
                Event::Runtime(d) => Op::Runtime(*d),
                Event::Sleep(d) => Op::Sleep(*d),
                Event::Io(d) => Op::Io(*d),
                Event::Read { file, bytes } => Op::Read {
                    file: files.iter().position(|f| f.name == *file).ok_or_else(|| {
                        format!(
                            "task `{}`, phase `{}`: file `{file}` is not declared",
                            t.name, p.name
                        )
                    })?,
                    bytes: *bytes,
                },
                Event::Timer {
                    name,
                    period,
                    absolute,
                } => {
                    if *period == 0 {
                        return Err(format!(
                            "task `{}`, phase `{}`: timer `{name}` has a zero period",
                            t.name, p.name
                        ));
                    }
                    let timer = s.timer_names.get(&format!("{tid}/{name}"));
                    Op::Timer {
                        timer,
                        period: *period,
                        absolute: *absolute,
                    }
                }
                Event::Lock(m) => Op::Lock(s.mutex_names.get(m)),
                Event::Unlock(m) => Op::Unlock(s.mutex_names.get(m)),
                Event::Wait { cond, mutex } => Op::Wait {
                    cond: s.cond_names.get(cond),
                    mutex: s.mutex_names.get(mutex),
                },
                Event::Signal(c) => Op::Signal(s.cond_names.get(c)),
                Event::Broadcast(c) => Op::Broadcast(s.cond_names.get(c)),
                Event::SignalWait { cond, mutex } => Op::SignalWait {
                    cond: s.cond_names.get(cond),
                    mutex: s.mutex_names.get(mutex),
                },
                Event::Barrier(b) => {
                    let i = s.barrier_names.get(b);
                    grow(&mut s.barrier_users, i);
                    if !s.barrier_users[i].contains(&tid) {
                        s.barrier_users[i].push(tid);
                    }
                    Op::Barrier(i)
                }
                Event::Suspend(n) => Op::Suspend(s.suspend_names.get(n)),
                Event::Resume(n) => Op::Resume(s.suspend_names.get(n)),
                Event::Send(c) => Op::Send(s.chan_names.get(c)),
                Event::Recv(c) => Op::Recv(s.chan_names.get(c)),
                Event::Yield => Op::Yield,
                Event::Begin(n) => Op::Begin(interaction(n)),
                Event::End(n) => Op::End(interaction(n)),
            });
        }
        if !ops.is_empty() && p.loops > 0 {
            phases.push((ops, p.loops));
            masks.push(mask);
        }
    }
    let timers = vec![None; s.timer_names.0.len()];
    Ok(Cursor {
        phases,
        masks,
        entered_phase: true,
        loops: t.loops,
        phase: 0,
        rep: 0,
        op: 0,
        loop_no: 0,
        timers,
        relock: None,
        loop_done_pending: false,
    })
}

/// What the running task does after its zero-time operations.
pub enum Next {
    /// It needs the CPU for a segment (already stored in the task).
    Cpu,
    /// It blocked.
    Blocked,
    /// It yielded the CPU (still runnable).
    Yield,
    /// Its program is over.
    Exit,
}

impl Cursor {
    fn current(&self) -> Option<Op> {
        self.phases.get(self.phase).map(|(ops, _)| ops[self.op])
    }

    /// Step past the current op. Returns true when a whole pass over the phases completed.
    fn advance(&mut self) -> bool {
        let Some((ops, reps)) = self.phases.get(self.phase) else {
            return false;
        };
        self.op += 1;
        if self.op < ops.len() {
            return false;
        }
        self.op = 0;
        self.rep += 1;
        if self.rep < *reps {
            return false;
        }
        self.rep = 0;
        self.phase += 1;
        self.entered_phase = true;
        if self.phase < self.phases.len() {
            return false;
        }
        self.phase = 0;
        self.loop_no += 1;
        if self.loops.is_some_and(|l| self.loop_no >= l) {
            self.phases.clear();
        }
        true
    }
}

impl Sim {
    /// Execute the running task `tid`'s program from where it is, at the current instant,
    /// until it needs the CPU, blocks, yields or exits.
    pub(super) fn step_program(&mut self, tid: u32) -> Next {
        let t = tid as usize;
        if let Some(m) = self.tasks[t].prog.relock.take() {
            // Woken from a condition wait: take the mutex back first.
            if !self.try_lock(tid, m) {
                return Next::Blocked;
            }
        }
        if let Some((file, bytes)) = self.tasks[t].pending_read.take() {
            // Woken by the page it waited for: finish that read first.
            if !self.page_read(tid, file, bytes) {
                return Next::Blocked;
            }
        }
        for _ in 0..1_000_000 {
            if std::mem::take(&mut self.tasks[t].prog.loop_done_pending) {
                let now = self.now;
                self.emit(Record::LoopDone { t: now, task: tid });
            }
            if std::mem::take(&mut self.tasks[t].prog.entered_phase)
                && self.apply_phase_affinity(tid)
            {
                return Next::Blocked;
            }
            let Some(op) = self.tasks[t].prog.current() else {
                return Next::Exit;
            };
            // Ops that block leave the cursor *after* themselves, so a woken task continues.
            self.tasks[t].prog.loop_done_pending = self.tasks[t].prog.advance();
            match op {
                Op::Run(w) if w > 0 => {
                    self.tasks[t].seg = Segment::Work(w);
                    return Next::Cpu;
                }
                Op::Runtime(d) if d > 0 => {
                    self.tasks[t].seg = Segment::Busy(d);
                    return Next::Cpu;
                }
                Op::Run(_) | Op::Runtime(_) => {}
                Op::Sleep(d) => {
                    self.tasks[t].work_end = self.now;
                    self.sleep_until(tid, self.now + d);
                    return Next::Blocked;
                }
                Op::Io(d) if d > 0 => {
                    self.io_submit(tid, d);
                    return Next::Blocked;
                }
                Op::Io(_) => {}
                Op::Read { file, bytes } => {
                    if !self.page_read(tid, file, bytes) {
                        return Next::Blocked;
                    }
                }
                Op::Timer {
                    timer,
                    period,
                    absolute,
                } => {
                    let now = self.now;
                    let next =
                        self.tasks[t].prog.timers[timer].map_or(now + period, |n| n + period);
                    let slack = next as i64 - now as i64;
                    self.emit(Record::Period {
                        t: now,
                        task: tid,
                        slack,
                    });
                    let next = if next < now && !absolute {
                        now + period
                    } else {
                        next
                    };
                    self.tasks[t].prog.timers[timer] = Some(next);
                    if next > now {
                        self.sleep_until(tid, next);
                        return Next::Blocked;
                    }
                }
                Op::Lock(m) => {
                    if !self.try_lock(tid, m) {
                        return Next::Blocked;
                    }
                }
                Op::Unlock(m) => self.unlock(tid, m),
                Op::Wait { cond, mutex } => {
                    self.cond_wait(tid, cond, mutex);
                    return Next::Blocked;
                }
                Op::Signal(c) => self.cond_signal(tid, c, false),
                Op::Broadcast(c) => self.cond_signal(tid, c, true),
                Op::SignalWait { cond, mutex } => {
                    self.cond_signal(tid, cond, false);
                    self.cond_wait(tid, cond, mutex);
                    return Next::Blocked;
                }
                Op::Barrier(b) => {
                    if !self.barrier_arrive(tid, b) {
                        return Next::Blocked;
                    }
                }
                Op::Suspend(s) => {
                    self.sync.suspended[s].push(tid);
                    self.tasks[t].state = State::Blocked;
                    return Next::Blocked;
                }
                Op::Resume(s) => {
                    for w in std::mem::take(&mut self.sync.suspended[s]) {
                        self.wake_with_carry(w, tid);
                    }
                }
                Op::Send(c) => {
                    let carry = self.tasks[t].carry;
                    if let Some(r) = self.sync.chan_receivers[c].pop_front() {
                        self.tasks[r as usize].carry = carry;
                        self.wake(r, Some(tid));
                    } else {
                        self.sync.chan_msgs[c].push_back(carry);
                    }
                }
                Op::Recv(c) => match self.sync.chan_msgs[c].pop_front() {
                    Some(carry) => self.tasks[t].carry = carry,
                    None => {
                        self.sync.chan_receivers[c].push_back(tid);
                        self.tasks[t].state = State::Blocked;
                        return Next::Blocked;
                    }
                },
                Op::Yield => return Next::Yield,
                Op::Begin(name) => {
                    let id = self.next_interaction;
                    self.next_interaction += 1;
                    self.tasks[t].carry = Some((id, name));
                    let now = self.now;
                    self.emit(Record::InteractionBegin {
                        t: now,
                        id,
                        name,
                        task: tid,
                    });
                }
                Op::End(name) => {
                    // Only the interaction of that kind ends; another carried one goes on.
                    if let Some((id, _)) = self.tasks[t].carry.filter(|&(_, k)| k == name) {
                        self.tasks[t].carry = None;
                        let now = self.now;
                        self.emit(Record::InteractionEnd {
                            t: now,
                            id,
                            task: tid,
                        });
                    }
                }
            }
        }
        // A program of only zero-time operations in an endless loop never needs the CPU.
        Next::Exit
    }

    /// Set the affinity of the phase the task enters. If its CPU is no longer allowed, it leaves
    /// the CPU and is woken at once on an allowed one (returns true) — a migration that the log
    /// shows as a switch-out and a wake-up at the same instant.
    fn apply_phase_affinity(&mut self, tid: u32) -> bool {
        let task = &mut self.tasks[tid as usize];
        // `clone_from` reuses the mask's buffer: every loop of a program passes here.
        match task.prog.masks.get(task.prog.phase) {
            Some(Some(mask)) => task.allowed.clone_from(mask),
            _ => task.allowed.clone_from(&task.base_allowed),
        }
        if task.allows(task.cpu) {
            return false;
        }
        self.block_until(tid, self.now);
        true
    }

    /// Block on a sleep or timer until `at`, plus the timer slack for fair tasks (the hrtimer
    /// fires at the end of its range `[at, at + slack]` when nothing else interrupts earlier).
    /// The measured wake-up cost ([`super::SimConfig::wakeup_cost`]) comes on top.
    fn sleep_until(&mut self, tid: u32, at: Nanos) {
        let slack = match self.tasks[tid as usize].class {
            super::Class::Fair => self.cfg.timer_slack,
            super::Class::Rt { .. } => 0,
        };
        self.block_until(tid, at + slack + self.cfg.wakeup_cost);
    }

    fn block_until(&mut self, tid: u32, at: Nanos) {
        let t = &mut self.tasks[tid as usize];
        t.state = State::Blocked;
        t.wake_gen += 1;
        let gen = t.wake_gen;
        self.queue
            .push(at, super::queue::Ev::Wake { task: tid, gen });
    }

    fn try_lock(&mut self, tid: u32, m: usize) -> bool {
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

    fn unlock(&mut self, tid: u32, m: usize) {
        if self.sync.mutex_owner[m] != Some(tid) {
            return; // unlocking a mutex one does not hold is a no-op, as rt-app tolerates
        }
        self.sync.mutex_owner[m] = self.sync.mutex_waiters[m].pop_front();
        if let Some(w) = self.sync.mutex_owner[m] {
            self.wake(w, Some(tid));
        }
    }

    fn cond_wait(&mut self, tid: u32, cond: usize, mutex: usize) {
        self.unlock(tid, mutex);
        self.sync.cond_waiters[cond].push_back(tid);
        let t = &mut self.tasks[tid as usize];
        t.state = State::Blocked;
        t.prog.relock = Some(mutex);
    }

    fn cond_signal(&mut self, tid: u32, cond: usize, all: bool) {
        while let Some(w) = self.sync.cond_waiters[cond].pop_front() {
            self.wake_with_carry(w, tid);
            if !all {
                break;
            }
        }
    }

    fn barrier_arrive(&mut self, tid: u32, b: usize) -> bool {
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
}
