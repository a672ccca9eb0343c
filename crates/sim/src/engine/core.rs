//! Dispatch, accounting, ticks and the scheduling loop.

use super::program::Next;
use super::queue::Ev;
use super::{Class, Segment, Sim, SimError, State};
use crate::log::{LeaveReason, Record};
use crate::platform::SPEED_ONE;
use crate::policy::Enqueue;
use uxsched_model::Nanos;

/// Schedule passes allowed at one instant before the run is declared stuck (a livelock of
/// zero-time operations, e.g. two tasks signalling each other with no work in between).
const MAX_PASSES_PER_INSTANT: u64 = 1_000_000;

impl Sim {
    pub(super) fn start(&mut self) {
        for (d, dom) in self.meta.domains.clone().iter().enumerate() {
            self.emit(Record::Freq {
                t: 0,
                domain: d as u16,
                khz: dom.initial_khz,
            });
        }
        if self
            .tasks
            .iter()
            .any(|t| matches!(t.class, Class::Rt { .. }))
        {
            self.queue.push(self.cfg.rt_period, Ev::RtPeriod);
        }
        self.start_bandwidth_timers();
    }

    pub(super) fn finish(&mut self) {
        for c in 0..self.ncpus() {
            self.update_curr(c);
        }
    }

    pub(super) fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::RtPeriod => self.rt_period(),
            Ev::Bandwidth { group } => self.bandwidth_refresh(group as usize),
            Ev::RunDone { cpu } => {
                // The queue holds at most one completion per CPU, replaced whenever the running
                // work changes and cancelled at every switch, so it is always the current one.
                let c = cpu as usize;
                self.update_curr(c);
                if let Some(t) = self.cpus[c].curr {
                    self.tasks[t as usize].seg = Segment::None;
                    self.tasks[t as usize].work_end = self.now;
                    self.continue_curr(c);
                }
            }
            Ev::Wake { task, gen } => {
                let t = &self.tasks[task as usize];
                let due = match t.state {
                    State::NotStarted => gen == 0,
                    State::Blocked => gen == t.wake_gen,
                    _ => false,
                };
                if due && self.tasks[task as usize].wake_cost_pending {
                    self.pay_wake_cost(task, gen);
                } else if due {
                    self.wake(task, None);
                }
            }
            Ev::Tick { cpu } => self.tick(cpu as usize),
            Ev::IoDone => self.io_done(),
            Ev::IoIdle => self.io_idle_over(),
            Ev::Mech { idx, token } => self.mechanism_timer(idx as usize, token),
        }
    }

    pub(super) fn resched(&mut self, cpu: usize) {
        if !std::mem::replace(&mut self.cpus[cpu].need_resched, true) {
            self.resched_list.push(cpu);
        }
    }

    /// Run `schedule()` on every CPU that asked for it, lowest CPU first, until none does.
    pub(super) fn schedule_pending(&mut self) -> Result<(), SimError> {
        while let Some(i) = (0..self.resched_list.len()).min_by_key(|&i| self.resched_list[i]) {
            let c = self.resched_list.swap_remove(i);
            if !self.cpus[c].need_resched {
                continue;
            }
            self.passes_now += 1;
            if self.passes_now > MAX_PASSES_PER_INSTANT {
                return Err(SimError::Stuck {
                    t: self.now,
                    message:
                        "tasks keep waking each other without doing any work (zero-time livelock); \
                              add run/sleep events between the hand-offs"
                            .into(),
                });
            }
            self.schedule(c);
        }
        Ok(())
    }

    /// `__schedule()` for one CPU.
    fn schedule(&mut self, cpu: usize) {
        self.cpus[cpu].need_resched = false;
        self.update_curr(cpu);
        let prev = self.cpus[cpu].curr;
        let next = self.pick_next_task(cpu, prev);
        if next == prev {
            if let Some(t) = next {
                self.tasks[t as usize].yielded = false;
                if self.tasks[t as usize].seg == Segment::None {
                    self.continue_curr(cpu);
                }
            }
            return;
        }
        let now = self.now;
        let reason = match prev {
            None => LeaveReason::Blocked,
            Some(p) => {
                let t = &mut self.tasks[p as usize];
                t.last_ran = now;
                match t.state {
                    State::Running if std::mem::take(&mut t.yielded) => {
                        t.state = State::Runnable;
                        LeaveReason::Yielded
                    }
                    State::Running => {
                        t.state = State::Runnable;
                        LeaveReason::Preempted
                    }
                    State::Exited => LeaveReason::Exited,
                    _ => LeaveReason::Blocked,
                }
            }
        };
        self.emit(Record::Switch {
            t: now,
            cpu: cpu as u16,
            prev,
            reason,
            next,
        });
        let c = &mut self.cpus[cpu];
        c.curr = next;
        c.exec_start = now;
        self.queue.cancel_run_done(cpu);
        if let Some(t) = next {
            self.stamp_mru(t);
            self.tasks[t as usize].state = State::Running;
            self.tasks[t as usize].cpu = cpu;
            self.arm_tick(cpu);
            if self.tasks[t as usize].seg == Segment::None {
                self.continue_curr(cpu);
            } else {
                self.start_segment(cpu);
            }
        }
    }

    /// Choose the next task: RT (unless throttled), then fair, then pull work, else idle.
    fn pick_next_task(&mut self, cpu: usize, prev: Option<u32>) -> Option<u32> {
        if let Some(t) = self.rt_pick(cpu) {
            if prev != Some(t) {
                self.put_prev(cpu, prev);
                self.rt_set_next(cpu, t);
            }
            return Some(t);
        }
        for attempt in 0..2 {
            if let Some(path) = self.fair_pick_path(cpu) {
                let t = self.ents_task(path.last().expect("non-empty path").1);
                if prev != Some(t) {
                    self.put_prev(cpu, prev);
                    self.fair_set_next(cpu, &path);
                }
                return Some(t);
            }
            if attempt == 0 {
                self.put_prev(cpu, prev);
                if !self.newidle_balance(cpu) {
                    break;
                }
            }
        }
        None
    }

    fn put_prev(&mut self, cpu: usize, prev: Option<u32>) {
        let Some(p) = prev else { return };
        match self.tasks[p as usize].class {
            Class::Fair => self.fair_put_prev(cpu, p),
            Class::Rt { .. } => self.rt_put_prev(cpu, p),
        }
    }

    /// Execute the running task's program until it needs the CPU or leaves it.
    pub(super) fn continue_curr(&mut self, cpu: usize) {
        let Some(tid) = self.cpus[cpu].curr else {
            return;
        };
        match self.step_program(tid) {
            Next::Cpu => self.start_segment(cpu),
            Next::Blocked => {
                self.deactivate(tid, true);
                self.resched(cpu);
            }
            Next::Yield => {
                self.tasks[tid as usize].yielded = true;
                self.class_yield(cpu, tid);
                self.resched(cpu);
            }
            Next::Exit => {
                self.tasks[tid as usize].state = State::Exited;
                self.deactivate(tid, true);
                let now = self.now;
                self.emit(Record::Exit { t: now, task: tid });
                self.resched(cpu);
            }
        }
    }

    pub(super) fn start_segment(&mut self, cpu: usize) {
        let Some(tid) = self.cpus[cpu].curr else {
            return;
        };
        let c = &mut self.cpus[cpu];
        let dur = match self.tasks[tid as usize].seg {
            Segment::Work(w) => match w.checked_mul(SPEED_ONE) {
                Some(p) => p.div_ceil(c.speed.max(1)),
                None => ((w as u128 * SPEED_ONE as u128).div_ceil(c.speed.max(1) as u128)) as u64,
            },
            Segment::Busy(end) => end.saturating_sub(self.now),
            Segment::None => return,
        };
        self.queue.set_run_done(cpu, self.now + dur.max(1));
    }

    /// Account the running task's time since the last update (`update_curr`).
    #[inline]
    pub(super) fn update_curr(&mut self, cpu: usize) {
        // Most calls find nothing to charge (an idle CPU, or already charged at this instant):
        // that test is inline, the charge is not (its prologue cost more than the test).
        if let Some(tid) = self.cpus[cpu].curr {
            let delta = self.now - self.cpus[cpu].exec_start;
            if delta != 0 {
                self.charge_curr(cpu, tid, delta);
            }
        }
    }

    #[inline(never)]
    fn charge_curr(&mut self, cpu: usize, tid: u32, delta: Nanos) {
        self.cpus[cpu].exec_start = self.now;
        self.cpus[cpu].busy += delta;
        let speed = self.cpus[cpu].speed;
        let t = &mut self.tasks[tid as usize];
        t.seg = match t.seg {
            Segment::Work(w) => Segment::Work(
                w.saturating_sub((delta as u128 * speed as u128 / SPEED_ONE as u128) as u64),
            ),
            Segment::Busy(end) => Segment::Busy(end),
            Segment::None => Segment::None,
        };
        match t.class {
            Class::Fair => {
                if self.fair_charge(cpu, tid, delta) {
                    self.resched(cpu);
                }
                self.bandwidth_charge(tid, delta);
            }
            Class::Rt { .. } => self.rt_charge(cpu, tid, delta),
        }
    }

    fn tick(&mut self, cpu: usize) {
        if self.cpus[cpu].curr.is_none() {
            self.cpus[cpu].tick_armed = false; // tickless idle
            return;
        }
        self.update_curr(cpu);
        if let Some(tid) = self.cpus[cpu].curr {
            match self.tasks[tid as usize].class {
                Class::Fair => {
                    if self.fair_tick(cpu, tid) {
                        self.resched(cpu);
                    }
                }
                Class::Rt { .. } => self.rt_tick(cpu, tid),
            }
        }
        if self.now >= self.cpus[cpu].next_balance {
            self.cpus[cpu].next_balance = self.now + self.cfg.balance_interval;
            self.periodic_balance(cpu);
        }
        self.queue
            .push(self.now + self.tick, Ev::Tick { cpu: cpu as u16 });
    }

    fn arm_tick(&mut self, cpu: usize) {
        let c = &mut self.cpus[cpu];
        if c.tick_armed {
            return;
        }
        c.tick_armed = true;
        let phase = c.tick_phase;
        let next = if self.now < phase {
            phase
        } else {
            phase + ((self.now - phase) / self.tick + 1) * self.tick
        };
        self.queue.push(next, Ev::Tick { cpu: cpu as u16 });
    }

    /// Make a blocked or new task runnable (`try_to_wake_up`).
    pub(super) fn wake(&mut self, tid: u32, waker: Option<u32>) {
        let t = &mut self.tasks[tid as usize];
        let initial = match t.state {
            State::NotStarted => true,
            State::Blocked => false,
            _ => return,
        };
        t.wake_gen += 1;
        t.state = State::Runnable;
        t.wake_cost_pending = false;
        let prev_cpu = t.cpu;
        // A delayed sleeper is still queued in the kernel: `ttwu_runnable` requeues it on its
        // CPU without `select_task_rq` (kernel/sched/core.c, 6.12–6.18).
        let cpu = if !initial && self.fair_still_queued(tid) {
            prev_cpu
        } else {
            self.select_cpu(tid, initial)
        };
        let now = self.now;
        if !initial && cpu != prev_cpu {
            self.emit(Record::Migrate {
                t: now,
                task: tid,
                from: prev_cpu as u16,
                to: cpu as u16,
            });
        }
        let why = if initial {
            Enqueue::Initial
        } else {
            Enqueue::Wakeup
        };
        self.activate(tid, cpu, why, if initial { None } else { Some(prev_cpu) });
        self.emit(Record::Wakeup {
            t: now,
            task: tid,
            cpu: cpu as u16,
            waker,
        });
        self.check_preempt(cpu, tid);
    }

    /// Put a runnable task on `cpu`'s run-queue of its class.
    pub(super) fn activate(&mut self, tid: u32, cpu: usize, why: Enqueue, from_cpu: Option<usize>) {
        self.tasks[tid as usize].cpu = cpu;
        match self.tasks[tid as usize].class {
            Class::Fair => {
                if let Some(from) = from_cpu.filter(|&f| f != cpu) {
                    self.fair_rebase(tid, from, cpu);
                }
                self.fair_enqueue(tid, cpu, why);
            }
            Class::Rt { .. } => self.rt_enqueue(cpu, tid, false),
        }
    }

    /// Take a task off its run-queue (`sleep`: it blocked or exited, rather than migrating).
    pub(super) fn deactivate(&mut self, tid: u32, sleep: bool) {
        let cpu = self.tasks[tid as usize].cpu;
        match self.tasks[tid as usize].class {
            Class::Fair => self.fair_dequeue(tid, cpu, sleep),
            Class::Rt { .. } => self.rt_dequeue(cpu, tid),
        }
    }

    /// Should `tid`, just enqueued on `cpu`, preempt what runs there?
    fn check_preempt(&mut self, cpu: usize, tid: u32) {
        let Some(curr) = self.cpus[cpu].curr else {
            self.resched(cpu);
            return;
        };
        let preempt = match (
            self.tasks[curr as usize].class,
            self.tasks[tid as usize].class,
        ) {
            (Class::Fair, Class::Rt { .. }) => !self.cpus[cpu].rt.throttled,
            (Class::Rt { prio: pc, .. }, Class::Rt { prio: pw, .. }) => pw > pc,
            (Class::Rt { .. }, Class::Fair) => false,
            (Class::Fair, Class::Fair) => {
                self.update_curr(cpu);
                self.fair_wakeup_preempt(cpu, curr, tid)
            }
        };
        if preempt {
            self.resched(cpu);
        }
    }

    fn class_yield(&mut self, cpu: usize, tid: u32) {
        if self.tasks[tid as usize].class == Class::Fair {
            self.fair_yield(cpu, tid);
        }
    }
}
