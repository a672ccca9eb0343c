//! `shuffledog` (seed 003): delay-critical threads — from the tracker when present; here the
//! UI, render and configured (`shuffledog.critical_threads`) threads — run above everything
//! else and just below the UI thread (nice `min_nice` + 1; UI at `min_nice`), in the
//! foreground group (out of the background group), with real-time I/O priority (RT 4, or
//! best-effort 0 when `io_realtime = false`). Threads of background apps (apps that were in
//! front before) go to the background group with best-effort 7 I/O.

use crate::types::{Desired, Target};

use super::Policy;
use crate::config::Config;
use crate::state::{Role, State};
use crate::types::Group;
use uxsched_os::ioprio::{encode, CLASS_BE, CLASS_RT};

pub struct Shuffledog;

impl Policy for Shuffledog {
    fn desired(&self, state: &State, cfg: &Config) -> Desired {
        let mut d = Desired::nothing(cfg);
        let critical_io = if cfg.shuffledog.io_realtime {
            encode(CLASS_RT, 4)
        } else {
            encode(CLASS_BE, 0)
        };
        if let Some(app) = &state.focus {
            d.each(app, |t| {
                let nice = match t.role {
                    Role::Ui => cfg.min_nice,
                    Role::Render | Role::Critical => (cfg.min_nice + 1).min(0),
                    _ => return None,
                };
                Some(Target {
                    nice: Some(nice),
                    group: Some(Group::Fg),
                    ioprio: Some(critical_io),
                    unit_io: Some(Group::Fg),
                    ..Target::default()
                })
            });
        }
        // Delay-critical threads of other processes and kernel workers on the path (the
        // tracker, across processes): CPU precedence like the app's critical threads; their
        // I/O class is left alone (a shared worker's I/O is not the app's).
        if state.focus.is_some() {
            for c in &state.chain {
                d.threads.insert(
                    c.task,
                    Target {
                        nice: Some((cfg.min_nice + 1).min(0)),
                        ..Target::default()
                    },
                );
            }
        }
        for app in &state.background {
            d.each(app, |_| {
                Some(Target {
                    group: Some(Group::Bg),
                    ioprio: Some(encode(CLASS_BE, 7)),
                    unit_io: Some(Group::Bg),
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
    use crate::state::{App, ThreadInfo};
    use crate::types::AppId;
    use uxsched_os::identity::TaskId;

    #[test]
    fn critical_below_ui_background_demoted() {
        let mut s = fg_state();
        s.background.push(App {
            id: AppId { pid: 200, start: 9 },
            threads: vec![ThreadInfo {
                task: TaskId {
                    tid: 200,
                    pid: 200,
                    start: 9,
                },
                comm: "bg".into(),
                role: Role::Background,
                cpu: 1,
            }],
        });
        let d = Shuffledog.desired(&s, &Config::default());
        assert_eq!(tid(&d, 100).unwrap().nice, Some(-19));
        assert_eq!(tid(&d, 101).unwrap().nice, Some(-18));
        assert_eq!(tid(&d, 101).unwrap().ioprio, Some(encode(CLASS_RT, 4)));
        assert!(tid(&d, 102).is_none(), "not delay-critical");
        let bg = tid(&d, 200).unwrap();
        assert_eq!(
            (bg.group, bg.ioprio),
            (Some(Group::Bg), Some(encode(CLASS_BE, 7)))
        );
    }
}
