//! `uxsched` (default): the combination the measurements justify (docs/mechanisms.md). The UI
//! and render threads get `min_nice` plus a short custom slice (EEVDF runs a woken short-slice
//! task first: the wake-up latency knob, VT-CFS's idea on a stock kernel), the other threads a
//! mild bonus so the UI still wins over the app's own workers. Across sessions: with autogroup
//! on, the app's session autogroup gets `min_nice` (the app stays in its own task group, where
//! the short slice keeps working — moving it into a cgroup lost that in our measurements);
//! without autogroup, the foreground cgroup. With the tracker, the app's threads on the
//! interaction's path count as critical, and the rest of the chain (partner processes' threads,
//! kernel workers) gets the UI thread's nice and slice too: an interaction is a chain, and only
//! the whole chain reaches the idle machine's latency (VISION.md).

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
                let critical = matches!(t.role, Role::Ui | Role::Render | Role::Critical);
                Some(Target {
                    nice: Some(if critical {
                        cfg.min_nice
                    } else {
                        cfg.uxsched.others_nice
                    }),
                    slice_ns: critical.then_some(cfg.uxsched.slice_us * 1000),
                    group: (!state.autogroup).then_some(Group::Fg),
                    ioprio: None,
                    // One thread carries the process's session autogroup.
                    autogroup_nice: (state.autogroup && t.role == Role::Ui).then_some(cfg.min_nice),
                    rt: None,
                })
            });
            // The rest of the interaction's chain (tracker): partners' threads and kernel
            // workers on the path get what the UI thread gets, in the fair class only.
            for c in &state.chain {
                d.threads.insert(
                    c.task,
                    Target {
                        nice: Some(cfg.min_nice),
                        slice_ns: Some(cfg.uxsched.slice_us * 1000),
                        ..Target::default()
                    },
                );
            }
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
        let mut s = fg_state();
        let d = Uxsched.desired(&s, &Config::default());
        for t in [100, 101] {
            assert_eq!(tid(&d, t).unwrap().nice, Some(-19));
            assert_eq!(tid(&d, t).unwrap().slice_ns, Some(100_000));
        }
        assert_eq!(tid(&d, 100).unwrap().autogroup_nice, Some(-19));
        assert_eq!(tid(&d, 101).unwrap().autogroup_nice, None);
        let w = tid(&d, 102).unwrap();
        assert_eq!((w.nice, w.slice_ns, w.group), (Some(-5), None, None));
        // Without autogroup, the foreground cgroup instead.
        s.autogroup = false;
        let d = Uxsched.desired(&s, &Config::default());
        assert_eq!(tid(&d, 102).unwrap().group, Some(Group::Fg));
        assert_eq!(tid(&d, 100).unwrap().autogroup_nice, None);
    }

    #[test]
    fn the_trackers_chain_gets_the_ui_threads_boost() {
        use crate::identity::TaskId;
        use crate::sources::tracker::{Critical, CriticalKind};
        let mut s = fg_state();
        s.focus.as_mut().unwrap().threads[2].role = Role::Critical;
        s.chain = vec![Critical {
            task: TaskId {
                tid: 300,
                pid: 300,
                start: 1,
            },
            comm: "kworker/u8:2".into(),
            kind: CriticalKind::KernelWorker,
            provisional: true,
        }];
        let d = Uxsched.desired(&s, &Config::default());
        for t in [102, 300] {
            let x = tid(&d, t).unwrap();
            assert_eq!((x.nice, x.slice_ns), (Some(-19), Some(100_000)), "tid {t}");
            assert_eq!((x.group, x.autogroup_nice), (None, None), "tid {t}");
        }
    }
}
