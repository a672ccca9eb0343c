//! What a task does next: its compiled program, run op by op at each instant.
//!
//! Names (locks, conditions, barriers, suspend points, channels, timers) are interned to indices
//! of the shared [`SyncObjects`] when the workload is built; their semantics are in
//! [`super::sync`]. Timers are per task and drift-free: each arrival moves the next deadline one
//! period on; in `relative` mode a late arrival restarts the period from now, in `absolute` mode
//! it catches up without sleeping.

use super::sync::SyncObjects;
use super::{Segment, Sim, State};
use crate::log::Record;
use crate::workload::{Event, FileSpec, Phase, TaskSpec};
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

/// Compile one task's phases, interning every name. `interactions` collects interaction kinds.
pub fn compile(
    tid: u32,
    t: &TaskSpec,
    phase_masks: Vec<Option<Vec<u64>>>,
    s: &mut SyncObjects,
    interactions: &mut Vec<String>,
    files: &[FileSpec],
) -> Result<Cursor, String> {
    let mut c = Compiler {
        tid,
        task: t,
        s,
        interactions,
        files,
    };
    let mut phases = Vec::new();
    let mut masks = Vec::new();
    for (p, mask) in t.phases.iter().zip(phase_masks) {
        let mut ops = Vec::with_capacity(p.events.len());
        for e in &p.events {
            ops.push(c.op(p, e)?);
        }
        if !ops.is_empty() && p.loops > 0 {
            phases.push((ops, p.loops));
            masks.push(mask);
        }
    }
    let timers = vec![None; c.s.timer_names.len()];
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

/// One task's compilation: the names it interns go into the shared tables.
struct Compiler<'a> {
    tid: u32,
    task: &'a TaskSpec,
    s: &'a mut SyncObjects,
    interactions: &'a mut Vec<String>,
    files: &'a [FileSpec],
}

impl Compiler<'_> {
    /// The op of event `e` of phase `p`; errors name the task and the phase.
    fn op(&mut self, p: &Phase, e: &Event) -> Result<Op, String> {
        let (tid, s) = (self.tid, &mut *self.s);
        Ok(match e {
            Event::Run(w) => Op::Run(*w),
            Event::Runtime(d) => Op::Runtime(*d),
            Event::Sleep(d) => Op::Sleep(*d),
            Event::Io(d) => Op::Io(*d),
            Event::Read { file, bytes } => Op::Read {
                file: self
                    .files
                    .iter()
                    .position(|f| f.name == *file)
                    .ok_or_else(|| {
                        format!(
                            "task `{}`, phase `{}`: file `{file}` is not declared",
                            self.task.name, p.name
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
                        self.task.name, p.name
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
            Event::Barrier(b) => Op::Barrier(s.barrier_user(b, tid)),
            Event::Suspend(n) => Op::Suspend(s.suspend_names.get(n)),
            Event::Resume(n) => Op::Resume(s.suspend_names.get(n)),
            Event::Send(c) => Op::Send(s.chan_names.get(c)),
            Event::Recv(c) => Op::Recv(s.chan_names.get(c)),
            Event::Yield => Op::Yield,
            Event::Begin(n) => Op::Begin(self.interaction(n)),
            Event::End(n) => Op::End(self.interaction(n)),
        })
    }

    /// The index of an interaction kind, added on first use.
    fn interaction(&mut self, name: &str) -> u32 {
        match self.interactions.iter().position(|n| n == name) {
            Some(i) => i as u32,
            None => {
                self.interactions.push(name.to_string());
                (self.interactions.len() - 1) as u32
            }
        }
    }
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
            if let Some(next) = self.do_op(tid, op) {
                return next;
            }
        }
        // A program of only zero-time operations in an endless loop never needs the CPU.
        Next::Exit
    }

    /// Do one op of the running task `tid`: `Some` when the task stops there (it needs the
    /// CPU, blocked or yielded), `None` when its next op follows at the same instant.
    fn do_op(&mut self, tid: u32, op: Op) -> Option<Next> {
        let t = tid as usize;
        let goes_on = match op {
            Op::Run(w) if w > 0 => {
                self.tasks[t].seg = Segment::Work(w);
                return Some(Next::Cpu);
            }
            Op::Runtime(d) if d > 0 => {
                self.tasks[t].seg = Segment::Busy(self.now + d);
                return Some(Next::Cpu);
            }
            Op::Io(d) if d > 0 => {
                self.io_submit(tid, d);
                false
            }
            Op::Run(_) | Op::Runtime(_) | Op::Io(_) => true,
            Op::Sleep(d) => {
                self.tasks[t].work_end = self.now;
                self.sleep_until(tid, self.now + d);
                false
            }
            Op::Read { file, bytes } => self.page_read(tid, file, bytes),
            Op::Timer {
                timer,
                period,
                absolute,
            } => self.timer_arrive(tid, timer, period, absolute),
            Op::Lock(m) => self.try_lock(tid, m),
            Op::Unlock(m) => {
                self.unlock(tid, m);
                true
            }
            Op::Wait { cond, mutex } => {
                self.cond_wait(tid, cond, mutex);
                false
            }
            Op::Signal(c) => {
                self.cond_signal(tid, c, false);
                true
            }
            Op::Broadcast(c) => {
                self.cond_signal(tid, c, true);
                true
            }
            Op::SignalWait { cond, mutex } => {
                self.cond_signal(tid, cond, false);
                self.cond_wait(tid, cond, mutex);
                false
            }
            Op::Barrier(b) => self.barrier_arrive(tid, b),
            Op::Suspend(s) => {
                self.suspend(tid, s);
                false
            }
            Op::Resume(s) => {
                self.resume(tid, s);
                true
            }
            Op::Send(c) => {
                self.chan_send(tid, c);
                true
            }
            Op::Recv(c) => self.chan_recv(tid, c),
            Op::Yield => return Some(Next::Yield),
            Op::Begin(name) => {
                self.interaction_begin(tid, name);
                true
            }
            Op::End(name) => {
                self.interaction_end(tid, name);
                true
            }
        };
        (!goes_on).then_some(Next::Blocked)
    }

    /// A timer arrival: logs the slack to the deadline and sleeps until it unless it has
    /// passed (returns false when the task sleeps). A late arrival restarts the period from now
    /// in `relative` mode and catches up in `absolute` mode.
    fn timer_arrive(&mut self, tid: u32, timer: usize, period: Nanos, absolute: bool) -> bool {
        let t = tid as usize;
        let now = self.now;
        let next = self.tasks[t].prog.timers[timer].map_or(now + period, |n| n + period);
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
            return false;
        }
        true
    }

    /// A new interaction of kind `name`, carried by the task from now on.
    fn interaction_begin(&mut self, tid: u32, name: u32) {
        let id = self.next_interaction;
        self.next_interaction += 1;
        self.tasks[tid as usize].carry = Some((id, name));
        let now = self.now;
        self.emit(Record::InteractionBegin {
            t: now,
            id,
            name,
            task: tid,
        });
    }

    /// End the carried interaction if it is of kind `name`; another carried one goes on.
    fn interaction_end(&mut self, tid: u32, name: u32) {
        let t = tid as usize;
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
        let fair = self.tasks[tid as usize].class == super::Class::Fair;
        if fair && !self.cfg.idle_wakeup_costs.is_empty() {
            // The cost depends on the CPU's state when the timer fires: chosen then.
            self.block_until(tid, at + self.cfg.timer_slack);
            self.tasks[tid as usize].wake_cost_pending = true;
            return;
        }
        let (slack, cost) = if fair {
            (self.cfg.timer_slack, self.fair_wakeup_cost())
        } else {
            (0, self.cfg.wakeup_cost)
        };
        self.block_until(tid, at + slack + cost);
    }

    /// A fair timer fired whose wake-up cost is still to be paid: draw it — from the idle
    /// costs if the CPU it would wake on is idle — and wake the task that much later.
    pub(super) fn pay_wake_cost(&mut self, tid: u32, gen: u64) {
        use rand::Rng;
        self.tasks[tid as usize].wake_cost_pending = false;
        let target = self.select_cpu(tid, false);
        let cost = if self.cpu_idle(target) {
            let idle_for = self.now.saturating_sub(self.cpus[target].exec_start);
            let long = &self.cfg.long_idle_wakeup_costs;
            let costs = if idle_for >= self.cfg.long_idle && !long.is_empty() {
                long
            } else {
                &self.cfg.idle_wakeup_costs
            };
            costs[self.cost_rng.gen_range(0..costs.len())]
        } else {
            self.fair_wakeup_cost()
        };
        if cost == 0 {
            self.wake(tid, None);
        } else {
            self.queue
                .push(self.now + cost, super::queue::Ev::Wake { task: tid, gen });
        }
    }

    /// One measured fair wake-up cost ([`super::SimConfig::fair_wakeup_costs`]), drawn with the
    /// run's seed; the single [`super::SimConfig::wakeup_cost`] where none was measured.
    fn fair_wakeup_cost(&mut self) -> Nanos {
        use rand::Rng;
        let costs = &self.cfg.fair_wakeup_costs;
        if costs.is_empty() {
            return self.cfg.wakeup_cost;
        }
        costs[self.cost_rng.gen_range(0..costs.len())]
    }

    fn block_until(&mut self, tid: u32, at: Nanos) {
        let t = &mut self.tasks[tid as usize];
        t.state = State::Blocked;
        t.wake_gen += 1;
        let gen = t.wake_gen;
        self.queue
            .push(at, super::queue::Ev::Wake { task: tid, gen });
    }
}
