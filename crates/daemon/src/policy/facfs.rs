//! `facfs` (seed 004): FA-CFS scales a task's weight by f_old / f_new when its CPU slows down
//! (eq. 18), so the work it gets per period is unchanged. On a stock kernel the boosted unit is
//! the foreground group: its weight is `fg_shares` × f_max / f_cur of the CPUs the foreground's
//! threads last ran on (the slowest of them), read from cpufreq under a configurable sysfs root.
//! Without cpufreq the ratio is 1 and this mode equals a plain foreground-group boost.

use crate::types::{Desired, Target};

use super::Policy;
use crate::config::Config;
use crate::state::State;
use crate::types::Group;
use uxsched_model::formulas::facfs_scaled_weight;

pub struct Facfs;

impl Policy for Facfs {
    fn desired(&self, state: &State, cfg: &Config) -> Desired {
        let mut d = Desired::nothing(cfg);
        if let Some(app) = &state.focus {
            d.each(app, |_| {
                Some(Target {
                    group: Some(Group::Fg),
                    ..Target::default()
                })
            });
            // Eq. 18 with f_old = f_max (the speed the weight was chosen for).
            let scale = 1_000_000;
            let f_cur = (scale as f64 / state.freq_ratio.max(1e-3)).round() as u64;
            d.fg_shares = facfs_scaled_weight(cfg.fg_shares, scale, f_cur);
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_state::fg_state;
    use super::*;

    #[test]
    fn halved_frequency_doubles_the_group_weight() {
        let cfg = Config::default();
        let mut s = fg_state();
        s.freq_ratio = 2.0;
        let d = Facfs.desired(&s, &cfg);
        assert_eq!(d.fg_shares, 2 * cfg.fg_shares);
        assert_eq!(d.threads.len(), 3);
    }
}
