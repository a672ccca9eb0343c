//! `eimos`: EIMOS's scheduler support, seed 001 §3.1–3.2 (Table 1, Fig. 2).
//!
//! The topmost process is the one in the FOREGROUND_APP class (`oom_adj` 0, Table 1; the
//! workload's `oom_adj` field stands for the low-memory-killer's `oomkilladj`). Its tasks get the
//! "dynamic priority bonus of 19". In the O(1) scheduler a bonus lowers the dynamic priority
//! number; CFS has no dynamic priority, so the bonus is applied to the static one: nice − 19,
//! clamped at −20 (a nice-0 app runs at nice −19, weight 71755). The same weight applies under
//! `cfs` and `eevdf` (EEVDF uses weights for lag and deadlines exactly as CFS does for vruntime).
//!
//! I/O prefetch (§3.3): "the maximum size of the read-ahead buffer is fixed but we also extend it
//! eight times in case of the topmost process" — the topmost process's tasks get `eimos.readahead`
//! (default 8; the paper also measures 16) times their maximum read-ahead window, which the page
//! cache's on-demand read-ahead ramps up to (`engine/pagecache.rs`).
//!
//! When the topmost process changes (Fig. 2's last step) the previous one gets its own weights
//! and read-ahead back and the new one gets the bonus. The ActivityManager's change is modelled by a timer:
//! `eimos.switch_at=5s` and `eimos.next=<process>` make `<process>` topmost at 5 s.

use crate::engine::{Control, Mechanism};
use crate::policy::Params;
use std::collections::BTreeMap;
use uxsched_model::weights::{nice_to_weight, weight_to_nice_at_least};
use uxsched_model::Nanos;

/// Table 1: FOREGROUND_APP.
pub const FOREGROUND_APP: i32 = 0;
/// §3.2: the bonus given to the topmost process.
pub const PRIORITY_BONUS: i32 = 19;
/// §3.3: the topmost process's read-ahead maximum is extended eight times.
pub const READAHEAD_FACTOR: u64 = 8;

pub struct Eimos {
    /// When, and to which process, the topmost process changes.
    pub switch: Option<(Nanos, String)>,
    /// Read-ahead multiplier for the topmost process (`eimos.readahead`).
    pub readahead: u64,
    /// Boosted task → its own weight and read-ahead (KiB).
    boosted: BTreeMap<u32, (u64, u64)>,
    /// The current topmost process, if any.
    pub topmost: Option<String>,
}

impl Eimos {
    pub fn from_params(p: &mut Params) -> Result<Self, String> {
        let at = p.take_duration("eimos.switch_at")?;
        let next = p.take_str("eimos.next");
        let switch =
            match (at, next) {
                (Some(t), Some(n)) => Some((t, n)),
                (None, None) => None,
                _ => return Err(
                    "--param eimos.switch_at and eimos.next go together (e.g. eimos.switch_at=5s \
                     eimos.next=browser)"
                        .into(),
                ),
            };
        let readahead = p
            .take_num::<u64>("eimos.readahead")?
            .unwrap_or(READAHEAD_FACTOR);
        if !(1..=64).contains(&readahead) {
            return Err(format!(
                "--param eimos.readahead={readahead} is out of range (use 1..=64; the paper: 8, 16)"
            ));
        }
        Ok(Eimos {
            switch,
            readahead,
            boosted: BTreeMap::new(),
            topmost: None,
        })
    }

    /// The weight a task of nice-equivalent weight `own` gets with the bonus.
    pub fn bonus_weight(own: u64) -> u64 {
        nice_to_weight(weight_to_nice_at_least(own) - PRIORITY_BONUS)
    }

    fn make_topmost(&mut self, process: Option<String>, ctl: &mut Control) {
        for (tid, (own, ra)) in std::mem::take(&mut self.boosted) {
            ctl.set_task_weight(tid, own);
            ctl.set_task_readahead_kb(tid, ra);
        }
        if let Some(p) = &process {
            let tids: Vec<u32> = (0..ctl.meta().tasks.len() as u32)
                .filter(|&t| ctl.meta().tasks[t as usize].process == *p && ctl.is_fair(t))
                .collect();
            for t in tids {
                let (own, ra) = (ctl.task_weight(t), ctl.task_readahead_kb(t));
                self.boosted.insert(t, (own, ra));
                ctl.set_task_weight(t, Self::bonus_weight(own));
                ctl.set_task_readahead_kb(t, ra * self.readahead);
            }
        }
        self.topmost = process;
    }
}

impl Mechanism for Eimos {
    fn name(&self) -> &'static str {
        "eimos"
    }

    fn start(&mut self, ctl: &mut Control) {
        let fg = ctl
            .meta()
            .tasks
            .iter()
            .find(|t| t.oom_adj == Some(FOREGROUND_APP))
            .map(|t| t.process.clone());
        self.make_topmost(fg, ctl);
        if let Some((at, _)) = &self.switch {
            ctl.timer_at(*at, 0);
        }
    }

    fn timer(&mut self, _token: u64, ctl: &mut Control) {
        if let Some((_, next)) = self.switch.take() {
            self.make_topmost(Some(next), ctl);
        }
    }
}
