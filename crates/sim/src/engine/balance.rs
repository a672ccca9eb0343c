//! Where tasks run: wake-up CPU selection, periodic load balancing and new-idle pulling.
//!
//! - Wake-up (`select_task_rq_fair`, simplified as the issue specifies): the previous CPU if it
//!   is idle, else an idle CPU in the previous CPU's frequency domain (the LLC), else the previous
//!   CPU. A new task starts on the least loaded allowed CPU. RT tasks go where they would run at
//!   once (`find_lowest_rq`).
//! - Periodic balancing (every `balance_interval` on a busy CPU) and new-idle balancing, as
//!   `sched_balance_rq` between single-CPU groups (kernel/sched/fair.c, 6.6–6.18): each CPU is
//!   classified (`group_classify`: overloaded when it has more than one task and its PELT
//!   utilisation or runnable average exceeds its capacity by `imbalance_pct` 117, has spare
//!   capacity when idle or well under it, else fully busy; [`super::pelt`]). A CPU with spare
//!   capacity pulls by task count (`migrate_task`: half the difference, so one task when the
//!   busiest has at least two more). A busy CPU pulls from an overloaded one by load
//!   (`migrate_load`): only when its own average load is under the busiest's and under the two
//!   CPUs' average (and, when it is overloaded itself, the busiest's exceeds it by more than
//!   17 %), it moves tasks whose `load_avg` (shifted right
//!   by the passes that failed in a row, `nr_balance_failed`) fits in
//!   `min(busiest − average, average − local)` until that is used up (`detach_tasks`, least
//!   recently used first; `LB_MIN` off, as by default). A task
//!   that ran within `migration_cost` (0.5 ms) is cache-hot and stays (`task_hot`) unless two
//!   passes in a row failed (`cache_nice_tries` 1). The pull by load runs on a busy CPU every
//!   `sd->balance_interval` × `busy_factor` (the CPU count in ms × 16: 32 ms on 2 CPUs; the
//!   kernel also doubles the interval after a balanced pass, not modelled), the pull by count
//!   at every balancing pass as before. A busy CPU with waiting work also pushes
//!   one task to an idle CPU (the effect of nohz idle balancing). Not modelled: active
//!   balancing of a running task, misfit and asymmetric-capacity rules, and NUMA.

use super::{Class, Sim, State};
use crate::log::Record;
use uxsched_model::MS;

/// `sd->imbalance_pct` of a multi-core (LLC) domain.
const IMBALANCE_PCT: u32 = 117;
/// `sd->cache_nice_tries` of a multi-core domain.
const CACHE_NICE_TRIES: u32 = 1;
/// `sd->busy_factor`: a busy CPU balances this many times less often than an idle one.
const BUSY_FACTOR: u64 = 16;

/// `enum group_type`, the three a single CPU without asymmetry or misfits can take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    HasSpare,
    FullyBusy,
    Overloaded,
}

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

    /// Put `t` at the most recently used end of its CPU's task list ([`super::Task::mru`]).
    pub(super) fn stamp_mru(&mut self, t: u32) {
        self.mru_clock += 1;
        self.tasks[t as usize].mru = self.mru_clock;
    }

    /// The runnable fair tasks on `from` that may move to `to` now (`can_migrate_task`; a
    /// cache-hot one only after `cache_nice_tries` failed passes), in no order: balancing takes
    /// them least recently used first ([`super::Task::mru`]).
    fn movable_tasks(&self, from: usize, to: usize) -> impl Iterator<Item = u32> + '_ {
        let now = self.now;
        let hot_ok = self.cpus[to].balance_failed > CACHE_NICE_TRIES;
        self.cpus[from]
            .fair_tasks
            .iter()
            .copied()
            .filter(move |&t| {
                let task = &self.tasks[t as usize];
                task.state == State::Runnable
                    && task.allows(to)
                    && (hot_ok || now.saturating_sub(task.last_ran) >= self.cfg.migration_cost)
            })
    }

    fn pull_one(&mut self, from: usize, to: usize) -> bool {
        let Some(t) = self
            .movable_tasks(from, to)
            .min_by_key(|&t| self.tasks[t as usize].mru)
        else {
            return false;
        };
        self.migrate(t, from, to);
        true
    }

    fn migrate(&mut self, t: u32, from: usize, to: usize) {
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
    }

    /// `group_classify` of one CPU, with its `avg_load` (load per 1024 of capacity).
    fn classify(&mut self, cpu: usize) -> (Kind, f64) {
        self.update_cpu_util(cpu);
        let c = &self.cpus[cpu];
        let nr = c.fair_tasks.len() + usize::from(c.rt.has_queued());
        let cap = c.capacity.max(1) as f64;
        let util = c.util.avg;
        if nr == 0 {
            // Idle: spare capacity whatever its averages, and its load is not read (the pull by
            // count), so the walk over every task is skipped (new-idle balancing is frequent).
            return (Kind::HasSpare, 0.0);
        }
        let (load, runnable) = self.cpu_load_avg(cpu);
        let pct = IMBALANCE_PCT as f64;
        let kind = if nr > 1 && (cap * 100.0 < util * pct || cap * pct < runnable * 100.0) {
            Kind::Overloaded
        } else if cap * pct >= runnable * 100.0 && cap * 100.0 > util * pct {
            Kind::HasSpare
        } else {
            Kind::FullyBusy
        };
        (kind, load * 1024.0 / cap)
    }

    /// Pull into `cpu` from the busiest CPU, by task count while `cpu` has spare capacity,
    /// by load while it is busy (the module's doc).
    fn balance_into(&mut self, cpu: usize) -> bool {
        let (local, local_load) = self.classify(cpu);
        if local == Kind::HasSpare {
            let mine = self.cpu_load(cpu);
            let busiest = self
                .overloaded_cpus()
                .filter(|&c| c != cpu)
                .max_by_key(|&c| (self.cpu_load(c), std::cmp::Reverse(c)));
            return match busiest {
                Some(b) if self.cpu_load(b) >= mine + 2 * 1024 => self.pull_one(b, cpu),
                _ => false,
            };
        }
        // A busy CPU balances every `sd->balance_interval` (the domain's CPU count in ms) ×
        // `busy_factor` (`get_sd_balance_interval`): 32 ms on 2 CPUs, not every pass.
        if self.now < self.cpus[cpu].next_load_balance {
            return false;
        }
        self.cpus[cpu].next_load_balance = self.now + BUSY_FACTOR * self.ncpus() as u64 * MS;
        let mut busiest: Option<(usize, f64)> = None;
        for c in self
            .overloaded_cpus()
            .filter(|&c| c != cpu)
            .collect::<Vec<_>>()
        {
            let (kind, load) = self.classify(c);
            if kind == Kind::Overloaded && busiest.is_none_or(|(_, l)| load > l) {
                busiest = Some((c, load));
            }
        }
        let Some((b, busiest_load)) = busiest else {
            return false;
        };
        let (cap_b, cap_l) = (
            self.cpus[b].capacity.max(1) as f64,
            self.cpus[cpu].capacity.max(1) as f64,
        );
        let avg = (busiest_load * cap_b + local_load * cap_l) / (cap_b + cap_l);
        // find_busiest_group's tests (the margin only between two overloaded CPUs) and
        // calculate_imbalance's for a fully busy one.
        if local_load >= busiest_load
            || local_load >= avg
            || (local == Kind::Overloaded
                && 100.0 * busiest_load <= IMBALANCE_PCT as f64 * local_load)
        {
            return false;
        }
        let mut imbalance = ((busiest_load - avg) * cap_b).min((avg - local_load) * cap_l) / 1024.0;
        let failed = self.cpus[cpu].balance_failed;
        let mut moved = false;
        // Collected first: each move changes `b`'s task list. `detach_tasks` walks `cfs_tasks`
        // from its tail, the least recently used end (kernel/sched/fair.c 6.6–6.18).
        let mut movable: Vec<u32> = self.movable_tasks(b, cpu).collect();
        movable.sort_unstable_by_key(|&t| self.tasks[t as usize].mru);
        for t in movable {
            // `LB_MIN` (skip a load under 16 while no pass failed) is off by default
            // (kernel/sched/features.h), so a light task may move at the first pass.
            let load = self.task_load(t);
            if load / f64::from(1u32 << failed.min(31)) > imbalance {
                continue;
            }
            self.migrate(t, b, cpu);
            moved = true;
            imbalance -= load;
            if imbalance <= 0.0 {
                break;
            }
        }
        self.cpus[cpu].balance_failed = if moved { 0 } else { failed + 1 };
        moved
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
