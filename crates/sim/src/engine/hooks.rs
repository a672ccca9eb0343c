//! Mechanisms: code that watches the event log and acts on the running system.
//!
//! A seed mechanism that is not a fair-class policy — framework-assisted boosting (seed 000 §IV),
//! EIMOS's topmost bonus (001), a DVFS governor and FA-CFS's frequency scaling (004),
//! ShuffleDog's resource managers (003) — is a [`Mechanism`]. It sees every record the engine
//! emits, can set timers, and acts only through [`Control`], which re-checks and applies each
//! action inside the engine (reweighting a queued entity, re-timing running work after a
//! frequency change). Mechanisms run after each event, in the order they were added, until the
//! instant produces no new records.

use super::queue::Ev;
use super::{Class, Segment, Sim};
use crate::log::{Record, RunMeta};
use uxsched_model::Nanos;

pub trait Mechanism {
    /// Name used on the command line and in reports.
    fn name(&self) -> &'static str;
    /// Called once before the first event.
    fn start(&mut self, _ctl: &mut Control) {}
    /// Called for every record, in log order.
    fn observe(&mut self, _rec: &Record, _ctl: &mut Control) {}
    /// A timer this mechanism set with [`Control::timer_at`] fired.
    fn timer(&mut self, _token: u64, _ctl: &mut Control) {}
}

/// What a mechanism may see and do.
pub struct Control<'a> {
    sim: &'a mut Sim,
    mech: usize,
}

impl Control<'_> {
    pub fn now(&self) -> Nanos {
        self.sim.now
    }

    pub fn meta(&self) -> &RunMeta {
        &self.sim.meta
    }

    pub fn ncpus(&self) -> usize {
        self.sim.ncpus()
    }

    /// The scheduler tick period (1/HZ).
    pub fn tick(&self) -> Nanos {
        self.sim.tick
    }

    /// The CPU a task runs or last ran on.
    pub fn task_cpu(&self, tid: u32) -> usize {
        self.sim.tasks[tid as usize].cpu
    }

    /// Whether a task is in the fair class (only those have weights).
    pub fn is_fair(&self, tid: u32) -> bool {
        self.sim.tasks[tid as usize].class == Class::Fair
    }

    pub fn task_weight(&self, tid: u32) -> u64 {
        self.sim.ents[tid as usize].weight
    }

    /// CPU time the task has used since it was last picked (its current slice so far).
    pub fn task_slice_used(&self, tid: u32) -> Nanos {
        let e = &self.sim.ents[tid as usize];
        e.sum_exec - e.prev_sum_exec
    }

    /// (runnable entities, ΣW) of the run-queue the task is queued on (or would be, on its CPU):
    /// seed 000's S.
    pub fn task_rq_load(&self, tid: u32) -> (usize, u64) {
        let t = &self.sim.tasks[tid as usize];
        let rq = &self.sim.rqs[self.sim.rq_index(t.group, t.cpu)];
        (rq.nr_running, rq.load)
    }

    /// Change a fair task's load weight now, keeping the run-queue consistent.
    /// Returns false for RT tasks (which have no weight).
    pub fn set_task_weight(&mut self, tid: u32, weight: u64) -> bool {
        self.sim.set_task_weight(tid, weight.max(1))
    }

    /// The cgroup (index into [`RunMeta::groups`]) a task is in now; mechanisms may move tasks,
    /// so this can differ from `meta().tasks[tid].group`, which is where it started.
    pub fn task_group(&self, tid: u32) -> usize {
        self.sim.tasks[tid as usize].group
    }

    /// Move a fair task to cgroup `group` (index into [`RunMeta::groups`]) now, whether it is
    /// running, runnable or blocked (`sched_move_task`). Returns false, changing nothing, for
    /// RT tasks, exited tasks and unknown groups.
    pub fn set_task_group(&mut self, tid: u32, group: usize) -> bool {
        self.sim.set_task_group(tid, group)
    }

    /// The I/O priority a task's next block-device request will carry.
    pub fn task_ioprio(&self, tid: u32) -> crate::io::IoPrio {
        self.sim.tasks[tid as usize].ioprio
    }

    /// `ioprio_set`: requests the task submits from now on carry `prio`.
    pub fn set_task_ioprio(&mut self, tid: u32, prio: crate::io::IoPrio) {
        self.sim.tasks[tid as usize].ioprio = prio;
    }

    /// A task's maximum read-ahead window in KiB (`read_ahead_kb` unless changed).
    pub fn task_readahead_kb(&self, tid: u32) -> u64 {
        self.sim.tasks[tid as usize].ra_pages * uxsched_model::size::PAGE / 1024
    }

    /// Set a task's maximum read-ahead window (KiB); its next read-ahead uses it.
    pub fn set_task_readahead_kb(&mut self, tid: u32, kb: u64) {
        self.sim.tasks[tid as usize].ra_pages = (kb * 1024 / uxsched_model::size::PAGE).max(1);
    }

    pub fn domains(&self) -> usize {
        self.sim.meta.domains.len()
    }

    pub fn cpu_domain(&self, cpu: usize) -> usize {
        self.sim.cpus[cpu].domain
    }

    /// Operating points of a domain, ascending (kHz).
    pub fn domain_opps(&self, domain: usize) -> &[u32] {
        &self.sim.cfg.platform.domains[domain].opps_khz
    }

    pub fn domain_khz(&self, domain: usize) -> u32 {
        self.sim.domain_khz[domain]
    }

    /// Set a domain's frequency (must be one of its operating points); running work is re-timed.
    pub fn set_domain_khz(&mut self, domain: usize, khz: u32) -> Result<(), String> {
        if !self.domain_opps(domain).contains(&khz) {
            return Err(format!(
                "{khz} kHz is not an operating point of domain {domain}"
            ));
        }
        self.sim.set_domain_khz(domain, khz);
        Ok(())
    }

    /// Capacity (out of 1024) of a CPU at its domain's top frequency.
    pub fn cpu_capacity(&self, cpu: usize) -> u32 {
        self.sim.cpus[cpu].capacity
    }

    /// Total time the CPU has been running a task, up to now (governors sample it).
    pub fn cpu_busy(&self, cpu: usize) -> Nanos {
        let c = &self.sim.cpus[cpu];
        c.busy
            + if c.curr.is_some() {
                self.sim.now - c.exec_start
            } else {
                0
            }
    }

    /// Call this mechanism's [`Mechanism::timer`] with `token` at `at` (not before now).
    pub fn timer_at(&mut self, at: Nanos, token: u64) {
        let at = at.max(self.sim.now);
        self.sim.queue.push(
            at,
            Ev::Mech {
                idx: self.mech as u16,
                token,
            },
        );
    }
}

impl Sim {
    /// Attach a mechanism before [`Sim::run`].
    pub fn add_mechanism(&mut self, m: Box<dyn Mechanism>) {
        self.mechs.push(m);
    }

    pub(super) fn mechanisms_start(&mut self) {
        let mut mechs = std::mem::take(&mut self.mechs);
        for (i, m) in mechs.iter_mut().enumerate() {
            m.start(&mut Control { sim: self, mech: i });
        }
        self.mechs = mechs;
    }

    pub(super) fn mechanism_timer(&mut self, idx: usize, token: u64) {
        let mut mechs = std::mem::take(&mut self.mechs);
        if let Some(m) = mechs.get_mut(idx) {
            m.timer(
                token,
                &mut Control {
                    sim: self,
                    mech: idx,
                },
            );
        }
        self.mechs = mechs;
    }

    /// Show mechanisms the records from `from` on (including those their actions cause).
    pub(super) fn mechanisms_observe(&mut self, mut from: usize) {
        if self.mechs.is_empty() {
            return;
        }
        let mut mechs = std::mem::take(&mut self.mechs);
        while from < self.out.len() {
            let rec = self.out[from].clone();
            for (i, m) in mechs.iter_mut().enumerate() {
                m.observe(&rec, &mut Control { sim: self, mech: i });
            }
            from += 1;
        }
        self.mechs = mechs;
    }

    fn set_task_weight(&mut self, tid: u32, weight: u64) -> bool {
        let t = tid as usize;
        if self.tasks[t].class != Class::Fair {
            return false;
        }
        let old = self.ents[t].weight;
        if old == weight {
            return true;
        }
        let cpu = self.tasks[t].cpu;
        if self.cpus[cpu].curr == Some(tid) {
            self.update_curr(cpu); // charge the time run so far at the old weight
        }
        if self.ents[t].on_rq {
            let rq = self.ents[t].rq;
            self.reweight_queued(rq, t, weight);
            self.add_load(rq, weight as i64 - old as i64);
            self.refresh_shares(self.tasks[t].group, cpu);
        } else {
            self.ents[t].weight = weight;
        }
        true
    }

    fn set_domain_khz(&mut self, domain: usize, khz: u32) {
        if self.domain_khz[domain] == khz {
            return;
        }
        self.domain_khz[domain] = khz;
        for c in 0..self.ncpus() {
            if self.cpus[c].domain != domain {
                continue;
            }
            self.update_curr(c); // work so far at the old speed
            self.cpus[c].speed = self.cfg.platform.speed(self.cpus[c].capacity, khz);
            if let Some(t) = self.cpus[c].curr {
                if self.tasks[t as usize].seg != Segment::None {
                    self.start_segment(c);
                }
            }
        }
        let now = self.now;
        self.emit(Record::Freq {
            t: now,
            domain: domain as u16,
            khz,
        });
    }
}
