//! `mcfs` (seed 002): MCFS divides the vruntime growth of high-priority (foreground) tasks by
//! the cut-rate c, so priority outweighs fairness. On a stock kernel the same ratio is a weight
//! gap: dividing vruntime growth by c is multiplying weight by c, and one nice level is a factor
//! 1.25, so the foreground's threads are lifted by log1.25(c) nice levels (c = 16 → 12), clamped
//! to `min_nice`, and put in the foreground group so the gap holds across sessions.
//! Approximation: MCFS also cuts the *switch* rate (fewer preemptions); weights cannot.

use crate::types::{Desired, Target};

use super::Policy;
use crate::config::Config;
use crate::state::State;
use crate::types::Group;
use uxsched_model::formulas::mcfs_equivalent_nice_levels;

pub struct Mcfs;

impl Policy for Mcfs {
    fn desired(&self, state: &State, cfg: &Config) -> Desired {
        let mut d = Desired::nothing(cfg);
        let levels = mcfs_equivalent_nice_levels(cfg.mcfs.cut_rate).round() as i32;
        if let Some(app) = &state.focus {
            d.each(app, |_| {
                Some(Target {
                    nice: Some((-levels).max(cfg.min_nice)),
                    group: Some(Group::Fg),
                    ..Target::default()
                })
            });
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_state::{fg_state, tid};
    use super::*;

    #[test]
    fn cut_rate_16_is_12_nice_levels_and_is_clamped() {
        let mut cfg = Config::default();
        let d = Mcfs.desired(&fg_state(), &cfg);
        assert_eq!(tid(&d, 102).unwrap().nice, Some(-12));
        cfg.mcfs.cut_rate = 1024; // 31 levels
        assert_eq!(
            tid(&Mcfs.desired(&fg_state(), &cfg), 100).unwrap().nice,
            Some(-19)
        );
        cfg.mcfs.cut_rate = 1;
        assert_eq!(
            tid(&Mcfs.desired(&fg_state(), &cfg), 100).unwrap().nice,
            Some(0)
        );
    }
}
