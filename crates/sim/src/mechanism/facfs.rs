//! FA-CFS (seed 004 §4): the frequency-aware extension of CFS.
//!
//! When "the running thread" loses speed — the governor lowers its CPU's frequency while it
//! runs, or it is moved (migrated, or woken) onto a slower CPU — its weight is scaled by
//! f_j / f_k, the old speed over the new (eq. 18, `formulas::facfs_scaled_weight`), which by
//! eq. 17 stretches its CFS slice ω/Ω × P by the same factor (eq. 16) so the work it does per
//! slice stays what it was. Speeds are capacity × frequency, so a slower core of another
//! cluster counts as well as a lower clock.
//!
//! The compensation is measured against the speed the task had before its first loss and is
//! undone by the same rule when speed comes back (a rise gives f_j / f_k < 1): once the task's
//! CPU is again at least as fast as that reference, its weight is its nice weight again. The
//! paper does not say when compensation ends; this is our reading (docs/mechanisms.md).
//! Works on any fair policy with weights (`cfs`, `eevdf`, …): it acts only through
//! [`Control::set_task_weight`].

use crate::engine::{Control, Mechanism};
use crate::log::Record;
use crate::policy::Params;
use uxsched_model::formulas::facfs_scaled_weight;

#[derive(Default)]
pub struct FaCfs {
    /// Per task: its own (nice) weight, taken at start.
    base: Vec<u64>,
    /// Per task: the speed it is being compensated against, while compensated.
    reference: Vec<Option<u64>>,
    /// Per task: the CPU it was last seen on (to see moves at wake-up); `None` before its
    /// first wake-up, whose placement is no move.
    cpu: Vec<Option<usize>>,
    /// Per CPU: the task running there.
    curr: Vec<Option<u32>>,
    /// Per domain: its frequency as last seen.
    khz: Vec<u32>,
}

impl FaCfs {
    pub fn from_params(p: &mut Params) -> Result<Self, String> {
        let _ = p; // no tunables: eq. 18 has none
        Ok(FaCfs::default())
    }

    fn speed(&self, ctl: &Control, cpu: usize) -> u64 {
        ctl.cpu_capacity(cpu) as u64 * self.khz[ctl.cpu_domain(cpu)] as u64
    }

    /// The task now runs (or will) at `speed`, having had `before`: apply eq. 18.
    fn moved(&mut self, ctl: &mut Control, task: u32, before: u64, speed: u64) {
        let t = task as usize;
        if !ctl.is_fair(task) {
            return;
        }
        if self.reference[t].is_none() && speed < before {
            self.reference[t] = Some(before);
        }
        let Some(f_j) = self.reference[t] else {
            return;
        };
        if speed >= f_j {
            self.reference[t] = None;
            ctl.set_task_weight(task, self.base[t]);
        } else {
            ctl.set_task_weight(task, facfs_scaled_weight(self.base[t], f_j, speed));
        }
    }
}

impl Mechanism for FaCfs {
    fn name(&self) -> &'static str {
        "facfs"
    }

    fn start(&mut self, ctl: &mut Control) {
        let n = ctl.meta().tasks.len();
        self.base = (0..n as u32).map(|t| ctl.task_weight(t)).collect();
        self.reference = vec![None; n];
        self.cpu = vec![None; n];
        self.curr = vec![None; ctl.ncpus()];
        self.khz = (0..ctl.domains()).map(|d| ctl.domain_khz(d)).collect();
    }

    fn observe(&mut self, rec: &Record, ctl: &mut Control) {
        match *rec {
            Record::Switch { cpu, next, .. } => self.curr[cpu as usize] = next,
            Record::Wakeup { task, cpu, .. } => {
                let (from, to) = (self.cpu[task as usize], cpu as usize);
                self.cpu[task as usize] = Some(to);
                if let Some(from) = from.filter(|&f| f != to) {
                    let (a, b) = (self.speed(ctl, from), self.speed(ctl, to));
                    self.moved(ctl, task, a, b);
                }
            }
            Record::Migrate { task, from, to, .. } => {
                self.cpu[task as usize] = Some(to as usize);
                let (a, b) = (self.speed(ctl, from as usize), self.speed(ctl, to as usize));
                self.moved(ctl, task, a, b);
            }
            Record::Freq { domain, khz, .. } => {
                let d = domain as usize;
                let old = self.khz[d];
                self.khz[d] = khz;
                let cpus: Vec<usize> = (0..ctl.ncpus())
                    .filter(|&c| ctl.cpu_domain(c) == d)
                    .collect();
                for cpu in cpus {
                    let cap = ctl.cpu_capacity(cpu) as u64;
                    let (before, now) = (cap * old as u64, cap * khz as u64);
                    if khz < old {
                        // A drop compensates the thread running through it.
                        if let Some(t) = self.curr[cpu] {
                            self.moved(ctl, t, before, now);
                        }
                    } else {
                        // A rise undoes compensation for every task on this CPU.
                        let here: Vec<u32> = (0..self.cpu.len() as u32)
                            .filter(|&t| {
                                self.cpu[t as usize] == Some(cpu)
                                    && self.reference[t as usize].is_some()
                            })
                            .collect();
                        for t in here {
                            self.moved(ctl, t, before, now);
                        }
                    }
                }
            }
            _ => {}
        }
    }
}
