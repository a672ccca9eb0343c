//! `uxsched` (default): the combination the measurements justify (docs/mechanisms.md). The UI
//! and render threads get `min_nice` plus a short custom slice (EEVDF runs a woken short-slice
//! task first: the wake-up latency knob, VT-CFS's idea on a stock kernel), the other threads
//! the same slice with a mild bonus, so the UI still wins over the app's own workers. Across sessions: with autogroup
//! on, the app's session autogroup gets `min_nice` (the app stays in its own task group, where
//! the short slice keeps working — moving it into a cgroup lost that in our measurements);
//! without autogroup, the foreground cgroup. With the tracker, the app's threads on the
//! interaction's path count as critical, and the rest of the chain (partner processes' threads,
//! kernel workers) gets the UI thread's nice and slice too: an interaction is a chain, and only
//! the whole chain reaches the idle machine's latency (VISION.md). `[tracker] lever = "rt"`
//! raises that critical set to SCHED_FIFO 2 instead, each thread under its run-time budget
//! (`rt_budget.rs`): one that used it up gets the fair boost until its cool-down ends.

use crate::types::{CriticalKind, Desired, Rt, RtPolicy, Target};

use super::{Policy, RT_PRIORITY};
use crate::config::Config;
use crate::state::{Role, State};
use crate::types::Group;
use uxsched_os::identity::TaskId;

pub struct Uxsched;

impl Policy for Uxsched {
    fn follows_chain(&self) -> bool {
        true
    }

    fn rt_lever(&self, cfg: &Config) -> bool {
        cfg.rt_lever_in_force()
    }

    fn desired(&self, state: &State, cfg: &Config) -> Desired {
        let mut d = Desired::nothing(cfg);
        let Some(app) = &state.focus else {
            super::audible::protect(&mut d, state, cfg);
            return d;
        };
        let lever = Raise::of(state, cfg);
        // The critical set's I/O class (`[storage] front_class`): seed 003's delay-critical
        // threads first at the disk too; the app's other threads keep theirs.
        let io = cfg.storage.front_ioprio();
        d.each(app, |t| {
            let critical = t.role.is_critical();
            let mut target = if critical {
                Target {
                    ioprio: io,
                    unit_io: Some(Group::Fg),
                    ..lever.raise(&t.task)
                }
            } else {
                // The short slice too: a thread of the app that sleeps and must then run at
                // once (an alarm, a timer the tracker does not see as input) gets its wake-up
                // latency from the slice, not from its weight; the slice does not change its
                // share, which `others_nice` keeps below the UI's.
                Target {
                    nice: Some(cfg.uxsched.others_nice),
                    slice_ns: Some(cfg.uxsched.slice_us * 1000),
                    ..Target::default()
                }
            };
            // The critical threads of the rt lever stay where they are (a cgroup move waits for
            // RCU, which real-time threads can hold up: measured as boosts 1.7 s late), unless
            // the app's own cgroup refuses real-time threads and the fg group takes them; the
            // whole app stays where moving a thread moves its process into a group that
            // refuses them (cgroup v2 with RT group scheduling).
            // A critical thread already in the fg group stays there: it runs real-time there
            // too, and moving it home is the RCU wait the rule above avoids.
            let keeps_home = critical || state.rt_keeps_home;
            let home = keeps_home && !state.rt_needs_fg && !state.rt_in_fg.contains(&t.task);
            let stays = state.autogroup || (lever.rt && home);
            target.group = (!stays).then_some(Group::Fg);
            // One thread carries the process's session autogroup.
            target.autogroup_nice = (state.autogroup && t.role == Role::Ui).then_some(cfg.min_nice);
            Some(target)
        });
        // The rest of the interaction's chain (tracker): partners' threads and kernel workers
        // on the path get what the UI thread gets — the I/O class too, but not a kernel
        // worker, which serves everyone's I/O (a flusher's writeback is the background's).
        for c in &state.chain {
            let mut target = lever.raise(&c.task);
            if c.kind != CriticalKind::KernelWorker {
                target.ioprio = io;
                target.unit_io = Some(Group::Fg);
            }
            d.threads.insert(c.task, target);
        }
        launches(&mut d, state, cfg);
        background_units(&mut d, state, cfg);
        super::audible::protect(&mut d, state, cfg);
        d
    }
}

/// The apps that were in front before (a file manager left copying), while another is: their
/// units' `IOWeight` lowered, where `[storage] background_unit_io_weight` asks for it. Nothing
/// else of theirs is touched, nor a thread of theirs that is on the interaction's chain.
fn background_units(d: &mut Desired, state: &State, cfg: &Config) {
    if cfg.storage.background_unit_io_weight == 0 {
        return;
    }
    for t in state.background.iter().flat_map(|app| &app.threads) {
        d.threads.entry(t.task).or_insert(Target {
            unit_io: Some(Group::Bg),
            ..Target::default()
        });
    }
}

/// A program started from the app in front (`daemon/launch.rs`) until its window maps: the
/// fair boost and the front's I/O class for every thread, never real time (a launch can be
/// anything the user typed, a build too: its budget bounds it), never above the app's own.
/// With autogroup it sits in its own session's group (a terminal's shell's), raised through
/// that group like the app's; without, in the fg group.
fn launches(d: &mut Desired, state: &State, cfg: &Config) {
    for app in &state.launching {
        for t in &app.threads {
            if d.threads.contains_key(&t.task) {
                continue;
            }
            let mut target = critical_target(cfg, false);
            target.ioprio = cfg.storage.front_ioprio();
            target.unit_io = Some(Group::Fg);
            target.group = (!state.autogroup).then_some(Group::Fg);
            target.autogroup_nice =
                (state.autogroup && t.task.tid == app.id.pid).then_some(cfg.min_nice);
            d.threads.insert(t.task, target);
        }
    }
}

/// What a thread of the critical set gets: SCHED_FIFO 2 when `rt` (the `rt` lever, in force
/// and not cooling down for this thread), else the fair boost (`min_nice` and the short slice).
/// The daemon's fast path (`daemon/fast.rs`) uses it too, so both write the same boost.
/// On the rt lever the thread holds `min_nice` in the fair class too — what the guard demotes
/// it to — so its lag survives the demotion (`uxsched_os::sched::set_keeping_lag`).
pub fn critical_target(cfg: &Config, rt: bool) -> Target {
    if rt {
        Target {
            rt: Some(Rt {
                policy: RtPolicy::Fifo,
                priority: RT_PRIORITY,
            }),
            nice: Some(cfg.min_nice),
            ..Target::default()
        }
    } else {
        Target {
            nice: Some(cfg.min_nice),
            slice_ns: Some(cfg.uxsched.slice_us * 1000),
            ..Target::default()
        }
    }
}

/// How the critical set is raised ([`crate::config::Lever`]).
struct Raise<'a> {
    rt: bool,
    cfg: &'a Config,
    demoted: &'a std::collections::BTreeSet<TaskId>,
    refused: &'a std::collections::BTreeSet<TaskId>,
}

impl<'a> Raise<'a> {
    fn of(state: &'a State, cfg: &'a Config) -> Raise<'a> {
        Raise {
            rt: cfg.rt_lever_in_force() && !state.rt_suspended,
            cfg,
            demoted: &state.rt_demoted,
            refused: &state.rt_refused,
        }
    }

    /// The fair boost, or FIFO 2 on the `rt` lever unless the thread used up its budget
    /// (`rt_budget.rs`: then the fair boost until its cool-down ends) or its cgroup refuses
    /// real-time threads.
    fn raise(&self, task: &TaskId) -> Target {
        let fair = self.demoted.contains(task) || self.refused.contains(task);
        critical_target(self.cfg, self.rt && !fair)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_state::{fg_state, tid};
    use super::*;
    use crate::config;

    /// The fair lever's settings (the rt lever, the default, has its own test below).
    fn fair() -> Config {
        let mut cfg = Config::default();
        cfg.tracker.lever = config::Lever::Fair;
        cfg
    }

    #[test]
    fn every_app_thread_gets_the_short_slice_ui_and_render_the_most_weight() {
        let mut s = fg_state();
        let d = Uxsched.desired(&s, &fair());
        for t in [100, 101] {
            assert_eq!(tid(&d, t).unwrap().nice, Some(-19));
            assert_eq!(tid(&d, t).unwrap().slice_ns, Some(100_000));
        }
        assert_eq!(tid(&d, 100).unwrap().autogroup_nice, Some(-19));
        assert_eq!(tid(&d, 101).unwrap().autogroup_nice, None);
        let w = tid(&d, 102).unwrap();
        assert_eq!(
            (w.nice, w.slice_ns, w.group),
            (Some(-5), Some(100_000), None)
        );
        // Without autogroup, the foreground cgroup instead.
        s.autogroup = false;
        let d = Uxsched.desired(&s, &fair());
        assert_eq!(tid(&d, 102).unwrap().group, Some(Group::Fg));
        assert_eq!(tid(&d, 100).unwrap().autogroup_nice, None);
    }

    #[test]
    fn the_trackers_chain_gets_the_ui_threads_boost() {
        use crate::types::{Critical, CriticalKind};
        use uxsched_os::identity::TaskId;
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
            since_ns: 0,
        }];
        let d = Uxsched.desired(&s, &fair());
        for t in [102, 300] {
            let x = tid(&d, t).unwrap();
            assert_eq!((x.nice, x.slice_ns), (Some(-19), Some(100_000)), "tid {t}");
            assert_eq!((x.group, x.autogroup_nice), (None, None), "tid {t}");
        }
    }

    /// `[storage] front_class`: the critical set and its partners in the RT I/O class, not the
    /// app's other threads nor a kernel worker; a launch gets the fair boost and the class,
    /// through its own session's autogroup; `off` leaves I/O priorities alone.
    #[test]
    fn the_critical_set_and_a_launch_get_the_front_io_class() {
        use crate::state::{App, ThreadInfo};
        use crate::types::{AppId, Critical};
        use uxsched_os::ioprio::{encode, CLASS_RT};
        let mut cfg = fair();
        let mut s = fg_state();
        let task = |tid, pid| TaskId { tid, pid, start: 1 };
        let critical = |tid, kind| Critical {
            task: task(tid, tid),
            comm: "x".into(),
            kind,
            provisional: false,
            since_ns: 0,
        };
        s.chain = vec![
            critical(300, CriticalKind::KernelWorker),
            critical(400, CriticalKind::Partner),
        ];
        s.launching = vec![App {
            id: AppId { pid: 500, start: 1 },
            threads: [500, 501]
                .map(|tid| ThreadInfo {
                    task: task(tid, 500),
                    comm: "mousepad".into(),
                    role: Role::Other,
                    cpu: 0,
                })
                .to_vec(),
        }];
        let rt4 = Some(encode(CLASS_RT, 4));
        let d = Uxsched.desired(&s, &cfg);
        let io = |t| tid(&d, t).unwrap().ioprio;
        assert_eq!([io(100), io(101), io(400), io(500), io(501)], [rt4; 5]);
        assert_eq!([io(102), io(300)], [None, None]);
        let (main, other) = (tid(&d, 500).unwrap(), tid(&d, 501).unwrap());
        assert_eq!(
            (main.nice, main.slice_ns, main.rt),
            (Some(-19), Some(100_000), None)
        );
        assert_eq!(
            (main.autogroup_nice, other.autogroup_nice),
            (Some(-19), None)
        );
        cfg.storage.front_class = crate::config::storage::FrontClass::Off;
        let d = Uxsched.desired(&s, &cfg);
        assert!(d.threads.values().all(|t| t.ioprio.is_none()));
    }

    #[test]
    fn the_rt_lever_puts_the_critical_set_at_fifo_1_except_threads_over_budget() {
        use crate::types::{Critical, CriticalKind};
        use uxsched_os::identity::TaskId;
        let mut cfg = Config::default();
        cfg.tracker.lever = config::Lever::Rt;
        let mut s = fg_state();
        s.autogroup = false;
        let kworker = TaskId {
            tid: 300,
            pid: 300,
            start: 1,
        };
        s.chain = vec![Critical {
            task: kworker,
            comm: "kworker/u8:2".into(),
            kind: CriticalKind::KernelWorker,
            provisional: false,
            since_ns: 0,
        }];
        let fifo1 = Some(Rt {
            policy: RtPolicy::Fifo,
            priority: RT_PRIORITY,
        });
        let d = Uxsched.desired(&s, &cfg).bounded(&cfg);
        for t in [100, 101, 300] {
            let x = tid(&d, t).unwrap();
            assert_eq!((x.rt, x.group), (fifo1, None), "tid {t}");
        }
        let w = tid(&d, 102).unwrap();
        assert_eq!((w.rt, w.nice, w.group), (None, Some(-5), Some(Group::Fg)));
        // Where the app's cgroup refuses real-time threads, its own join the fg group.
        s.rt_needs_fg = true;
        let d = Uxsched.desired(&s, &cfg).bounded(&cfg);
        for (t, group) in [(100, Some(Group::Fg)), (101, Some(Group::Fg)), (300, None)] {
            let x = tid(&d, t).unwrap();
            assert_eq!((x.rt, x.group), (fifo1, group), "tid {t}");
        }
        s.rt_needs_fg = false;
        // Where the fg group refuses them and a move takes the whole process (cgroup v2 with
        // RT group scheduling), the app stays home, its other threads too.
        s.rt_keeps_home = true;
        let d = Uxsched.desired(&s, &cfg).bounded(&cfg);
        let w = tid(&d, 102).unwrap();
        assert_eq!((w.rt, w.nice, w.group), (None, Some(-5), None));
        assert_eq!(tid(&d, 100).unwrap().rt, fifo1);
        // … but not for the fair lever, where nothing is real-time.
        cfg.tracker.lever = config::Lever::Fair;
        let d = Uxsched.desired(&s, &cfg).bounded(&cfg);
        assert_eq!(tid(&d, 102).unwrap().group, Some(Group::Fg));
        cfg.tracker.lever = config::Lever::Rt;
        s.rt_keeps_home = false;
        // A thread whose cgroup refuses real-time threads (a partner in another group, here the
        // kernel worker standing in for one) gets the fair boost.
        s.rt_refused.insert(kworker);
        let d = Uxsched.desired(&s, &cfg).bounded(&cfg);
        let k = tid(&d, 300).unwrap();
        assert_eq!((k.rt, k.nice, k.slice_ns), (None, Some(-19), Some(100_000)));
        assert_eq!(tid(&d, 100).unwrap().rt, fifo1);
        s.rt_refused.clear();
        // A critical thread uxsched already keeps in the fg group stays there (no move home),
        // real-time there too; the others stay home as before.
        let render = s.focus.as_ref().unwrap().threads[1].task;
        s.rt_in_fg.insert(render);
        let d = Uxsched.desired(&s, &cfg).bounded(&cfg);
        let r = tid(&d, 101).unwrap();
        assert_eq!((r.rt, r.group), (fifo1, Some(Group::Fg)));
        assert_eq!(tid(&d, 100).unwrap().group, None);
        // … unless the app is raised through its session's autogroup, which needs it home.
        s.autogroup = true;
        let d = Uxsched.desired(&s, &cfg).bounded(&cfg);
        assert_eq!(tid(&d, 101).unwrap().group, None);
        s.autogroup = false;
        s.rt_in_fg.clear();
        // The render thread used up its budget: the fair boost until its cool-down ends.
        let render = s.focus.as_ref().unwrap().threads[1].task;
        s.rt_demoted.insert(render);
        let d = Uxsched.desired(&s, &cfg);
        let r = tid(&d, 101).unwrap();
        assert_eq!((r.rt, r.nice, r.slice_ns), (None, Some(-19), Some(100_000)));
        assert_eq!(tid(&d, 100).unwrap().rt, fifo1);
        // The fair lever never asks for a real-time class, nor does the rt lever while it is
        // suspended (the canary tripped, or it has no guard).
        cfg.tracker.lever = config::Lever::Fair;
        let d = Uxsched.desired(&s, &cfg);
        assert!(d.threads.values().all(|t| t.rt.is_none()));
        cfg.tracker.lever = config::Lever::Rt;
        s.rt_suspended = true;
        let d = Uxsched.desired(&s, &cfg);
        assert!(d.threads.values().all(|t| t.rt.is_none()));
    }
}
