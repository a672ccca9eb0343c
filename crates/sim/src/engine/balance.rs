//! Where tasks run: wake-up CPU selection, periodic load balancing and new-idle pulling.
//!
//! - Wake-up (`select_task_rq_fair`, simplified as the issue specifies): the previous CPU if it
//!   is idle, else an idle CPU in the previous CPU's frequency domain (the LLC), else the previous
//!   CPU. A new task starts on the least loaded allowed CPU. RT tasks go where they would run at
//!   once (`find_lowest_rq`).
//! - Periodic balancing (every `balance_interval` on a busy CPU) and new-idle balancing pull one
//!   runnable, not running, not cache-hot task from the busiest CPU when the imbalance is at least
//!   two tasks, comparing runnable fair tasks per unit of capacity. A task that ran within
//!   `migration_cost` (0.5 ms) is cache-hot and stays (`task_hot`). A busy CPU with waiting work
//!   also pushes one task to an idle CPU (the effect of nohz idle balancing).

use super::{Class, Sim, State};
use crate::log::Record;

impl Sim {
    pub(super) fn cpu_idle(&self, c: usize) -> bool {
        self.cpus[c].curr.is_none()
            && self.cpus[c].fair_tasks.is_empty()
            && !self.cpus[c].rt.has_queued()
    }

    /// Runnable fair tasks scaled to capacity (1024 = one task on a full-size CPU).
    fn cpu_load(&self, c: usize) -> u64 {
        self.cpus[c].fair_load
    }

    /// Recompute `cpu`'s [`Sim::cpu_load`] after its fair task list changed.
    pub(super) fn refresh_cpu_load(&mut self, cpu: usize) {
        let c = &mut self.cpus[cpu];
        c.fair_load = c.fair_tasks.len() as u64 * 1024 * 1024 / c.capacity.max(1) as u64;
        let bit = 1u64 << (cpu % 64);
        if c.fair_tasks.len() >= 2 {
            self.overloaded[cpu / 64] |= bit;
        } else {
            self.overloaded[cpu / 64] &= !bit;
        }
    }

    /// CPUs with at least two runnable fair tasks, in increasing order.
    fn overloaded_cpus(&self) -> impl Iterator<Item = usize> + '_ {
        self.overloaded.iter().enumerate().flat_map(|(w, &bits)| {
            let mut b = bits;
            std::iter::from_fn(move || {
                (b != 0).then(|| {
                    let i = b.trailing_zeros() as usize;
                    b &= b - 1;
                    w * 64 + i
                })
            })
        })
    }

    pub(super) fn select_cpu(&mut self, tid: u32, initial: bool) -> usize {
        let t = &self.tasks[tid as usize];
        let allowed = (0..self.ncpus()).filter(|&c| t.allows(c));
        if let Class::Rt { prio, .. } = t.class {
            let prev = t.cpu;
            let score = |s: &Self, c: usize| match s.cpus[c].curr {
                None => 0u16,
                Some(r) => match s.tasks[r as usize].class {
                    Class::Fair => 1,
                    Class::Rt { prio: p, .. } => 2 + p as u16,
                },
            };
            if t.allows(prev) && score(self, prev) < 2 + prio as u16 {
                return prev;
            }
            return allowed
                .min_by_key(|&c| (score(self, c), c))
                .expect("non-empty affinity");
        }
        if initial {
            return allowed
                .min_by_key(|&c| (!self.cpu_idle(c), self.cpu_load(c), c))
                .expect("non-empty affinity");
        }
        let prev = if t.allows(t.cpu) {
            t.cpu
        } else {
            (0..self.ncpus())
                .find(|&c| t.allows(c))
                .expect("non-empty affinity")
        };
        if self.cpu_idle(prev) {
            return prev;
        }
        let domain = self.cpus[prev].domain;
        allowed
            .filter(|&c| self.cpus[c].domain == domain)
            .find(|&c| self.cpu_idle(c))
            .unwrap_or(prev)
    }

    /// A runnable fair task on `from` that may move to `to` now.
    fn movable_task(&self, from: usize, to: usize) -> Option<u32> {
        let now = self.now;
        self.cpus[from].fair_tasks.iter().rev().copied().find(|&t| {
            let task = &self.tasks[t as usize];
            task.state == State::Runnable
                && task.allows(to)
                && now.saturating_sub(task.last_ran) >= self.cfg.migration_cost
        })
    }

    fn pull_one(&mut self, from: usize, to: usize) -> bool {
        let Some(t) = self.movable_task(from, to) else {
            return false;
        };
        self.fair_migrate(t, from, to);
        let now = self.now;
        self.emit(Record::Migrate {
            t: now,
            task: t,
            from: from as u16,
            to: to as u16,
        });
        if self.cpus[to].curr.is_none() {
            self.resched(to);
        }
        true
    }

    /// Pull from the busiest CPU if it has at least two more runnable tasks (per capacity).
    fn balance_into(&mut self, cpu: usize) -> bool {
        let mine = self.cpu_load(cpu);
        let busiest = self
            .overloaded_cpus()
            .filter(|&c| c != cpu)
            .max_by_key(|&c| (self.cpu_load(c), std::cmp::Reverse(c)));
        match busiest {
            Some(b)
                if self.cpu_load(b) >= mine + 2 * 1024
                    || (mine == 0 && self.cpu_load(b) >= 2 * 1024) =>
            {
                self.pull_one(b, cpu)
            }
            _ => false,
        }
    }

    /// Called when `cpu` is about to go idle; true if it found work.
    pub(super) fn newidle_balance(&mut self, cpu: usize) -> bool {
        self.balance_into(cpu)
    }

    pub(super) fn periodic_balance(&mut self, cpu: usize) {
        self.balance_into(cpu);
        if self.cpus[cpu].fair_tasks.len() >= 2 {
            if let Some(idle) = (0..self.ncpus()).find(|&c| c != cpu && self.cpu_idle(c)) {
                self.pull_one(cpu, idle);
            }
        }
    }
}
