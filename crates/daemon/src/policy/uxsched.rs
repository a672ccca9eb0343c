//! `uxsched` (default): the combination the measurements justify (docs/mechanisms.md). The
//! whole foreground app goes into the high-weight foreground group (the only knob that works
//! across autogroups/sessions); inside it the UI and render threads get `min_nice` plus a short
//! custom slice (EEVDF picks a woken short-slice task first: the wake-up latency knob, VT-CFS's
//! idea on a stock kernel) and the other threads a mild bonus, so the UI still wins over the
//! app's own workers.

use super::{Desired, Policy, Target};
use crate::actuators::cgroup::Group;
use crate::config::Config;
use crate::state::{Role, State};

pub struct Uxsched;

impl Policy for Uxsched {
    fn desired(&self, state: &State, cfg: &Config) -> Desired {
        let mut d = Desired::nothing(cfg);
        if let Some(app) = &state.focus {
            d.each(app, |t| {
                let critical = matches!(t.role, Role::Ui | Role::Render);
                Some(Target {
                    nice: Some(if critical {
                        cfg.min_nice
                    } else {
                        cfg.uxsched.others_nice
                    }),
                    slice_ns: critical.then_some(cfg.uxsched.slice_us * 1000),
                    group: Some(Group::Fg),
                    ioprio: None,
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
    fn ui_and_render_get_the_short_slice_others_a_mild_bonus() {
        let d = Uxsched.desired(&fg_state(), &Config::default());
        for t in [100, 101] {
            assert_eq!(tid(&d, t).unwrap().nice, Some(-19));
            assert_eq!(tid(&d, t).unwrap().slice_ns, Some(100_000));
        }
        let w = tid(&d, 102).unwrap();
        assert_eq!(
            (w.nice, w.slice_ns, w.group),
            (Some(-5), None, Some(Group::Fg))
        );
    }
}
