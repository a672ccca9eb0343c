//! Modes: each a pure function from [`State`] to the [`Desired`] settings of each thread, one
//! file per mode behind the small [`Policy`] trait. Policies never touch the kernel; the
//! reconciler applies (and bounds) what they ask for, so they are testable without root.

mod audible;
mod eimos;
mod facfs;
mod mcfs;
mod shuffledog;
mod uxsched;
mod vtcfs;

use crate::config::{Config, Mode};
use crate::state::{App, State};
use crate::types::{Desired, Rt, Target};
use std::collections::BTreeMap;
pub use uxsched::critical_target;

/// The real-time priority of the tracker's `rt` lever: one above the lowest, below every RT
/// thread someone else asked for (audio servers, threaded IRQs at 50, watchdogs at 99). The
/// lowest is the daemon's tracker thread (`uxsched_os::own::OWN_RT_PRIORITY`).
pub const RT_PRIORITY: u32 = 2;

impl Desired {
    /// "Desired = nothing": unfocus, `restore`, shutdown and crash recovery.
    pub fn nothing(cfg: &Config) -> Desired {
        Desired {
            threads: BTreeMap::new(),
            fg_shares: cfg.fg_shares,
            bg_shares: cfg.bg_shares,
            unit_io_weights: cfg.storage.unit_io_weights().unwrap_or_default(),
        }
    }

    /// Apply the config's limits whatever the policy asked: no nice below `min_nice`, custom
    /// slices within the kernel's 0.1–100 ms, RT priorities within 1..=99, group weights within
    /// cgroup v1's range.
    pub fn bounded(mut self, cfg: &Config) -> Desired {
        for t in self.threads.values_mut() {
            t.nice = t.nice.map(|n| n.clamp(cfg.min_nice, 19));
            t.autogroup_nice = t.autogroup_nice.map(|n| n.clamp(cfg.min_nice, 19));
            t.slice_ns = t.slice_ns.map(|s| s.clamp(100_000, 100_000_000));
            t.uclamp_min = t.uclamp_min.map(|u| u.min(uxsched_os::sched::UCLAMP_SCALE));
            t.rt = t.rt.map(|r| Rt {
                priority: r.priority.clamp(1, 99),
                ..r
            });
        }
        self.fg_shares = self.fg_shares.clamp(2, 262_144);
        self.bg_shares = self.bg_shares.clamp(2, 262_144);
        self
    }

    /// `cpu_levers = false` (seed 003's I/O manager alone): every target cut to its storage
    /// levers, the I/O class and the unit's I/O weight, and a thread left with none dropped, so the reconciler makes no
    /// nice, slice, policy (real time, `SCHED_EXT`), uclamp, autogroup, cgroup or systemd unit
    /// change and restores any it made; unchanged when the switch is on (the default). The
    /// groups' weights stay as they are: with no thread placed, the groups hold nothing.
    /// Applied after the backend's shaping and before the real-time API's grants, which are an
    /// app's own request and keep their own switch (`[rtapi] enabled`).
    pub fn cpu_switch(mut self, cfg: &Config) -> Desired {
        if cfg.cpu_levers {
            return self;
        }
        self.threads = std::mem::take(&mut self.threads)
            .into_iter()
            .filter_map(|(task, t)| {
                let io = Target {
                    ioprio: t.ioprio,
                    unit_io: t.unit_io,
                    ..Target::default()
                };
                (io != Target::default()).then_some((task, io))
            })
            .collect();
        self
    }

    /// Set `target` for every thread of `app` chosen by `pick`.
    fn each(
        &mut self,
        app: &App,
        mut pick: impl FnMut(&crate::state::ThreadInfo) -> Option<Target>,
    ) {
        for t in &app.threads {
            if let Some(target) = pick(t) {
                self.threads.insert(t.task, target);
            }
        }
    }
}

/// A mode: what it wants of the state, and which of the daemon's parts it needs beyond that.
pub trait Policy {
    fn desired(&self, state: &State, cfg: &Config) -> Desired;

    /// Whether the mode boosts the tracker's critical set as it changes (the loop's fast path,
    /// the "critical → boosted" latency), so each pass reads the app's owner and placement.
    fn follows_chain(&self) -> bool {
        false
    }

    /// Whether the mode makes the critical set real-time (`[tracker] lever = "rt"`), so the
    /// loop keeps the rt lever's guard and group placement in step.
    fn rt_lever(&self, _cfg: &Config) -> bool {
        false
    }

    /// Whether the mode reads ahead for the app in front (seed 001's enlarged window).
    fn prefetches(&self, _cfg: &Config) -> bool {
        false
    }
}

/// The policy of a mode.
pub fn for_mode(mode: Mode) -> &'static dyn Policy {
    match mode {
        Mode::Eimos => &eimos::Eimos,
        Mode::Vtcfs => &vtcfs::Vtcfs,
        Mode::Mcfs => &mcfs::Mcfs,
        Mode::Facfs => &facfs::Facfs,
        Mode::Shuffledog => &shuffledog::Shuffledog,
        Mode::Uxsched => &uxsched::Uxsched,
    }
}

#[cfg(test)]
pub(crate) mod test_state {
    use crate::state::{App, Role, State, ThreadInfo};
    use crate::types::AppId;
    use uxsched_os::identity::TaskId;

    /// A foreground app with pid 100: UI thread 100, render thread 101, worker 102.
    pub fn fg_state() -> State {
        let t = |tid, comm: &str, role| ThreadInfo {
            task: TaskId {
                tid,
                pid: 100,
                start: 5,
            },
            comm: comm.into(),
            role,
            cpu: 0,
        };
        State {
            focus: Some(App {
                id: AppId { pid: 100, start: 5 },
                threads: vec![
                    t(100, "app", Role::Ui),
                    t(101, "RenderThread", Role::Render),
                    t(102, "worker", Role::Other),
                ],
            }),
            runnable: 7,
            cpus: 2,
            autogroup: true,
            freq_ratio: 1.0,
            ..State::default()
        }
    }

    pub fn tid(d: &crate::types::Desired, tid: i32) -> Option<&crate::types::Target> {
        d.threads.iter().find(|(k, _)| k.tid == tid).map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_wants_nothing_without_focus() {
        let cfg = Config::default();
        for m in Mode::ALL {
            let d = for_mode(m).desired(&State::default(), &cfg);
            assert!(d.threads.is_empty(), "{m}");
        }
    }

    #[test]
    fn only_uxsched_follows_the_chain_and_only_its_rt_lever_is_real_time() {
        let mut cfg = Config::default();
        cfg.tracker.lever = crate::config::Lever::Rt;
        cfg.eimos.prefetch = true;
        for m in Mode::ALL {
            let p = for_mode(m);
            assert_eq!(p.follows_chain(), m == Mode::Uxsched, "{m}");
            assert_eq!(p.rt_lever(&cfg), m == Mode::Uxsched, "{m}");
            assert_eq!(p.prefetches(&cfg), m == Mode::Eimos, "{m}");
        }
        cfg.tracker.lever = crate::config::Lever::Fair;
        cfg.eimos.prefetch = false;
        assert!(!for_mode(Mode::Uxsched).rt_lever(&cfg));
        assert!(!for_mode(Mode::Eimos).prefetches(&cfg));
        // Without the CPU levers the tracker still follows the chain (the I/O class needs its
        // set), but nothing is real-time, whatever the lever says.
        cfg.tracker.lever = crate::config::Lever::Rt;
        cfg.cpu_levers = false;
        assert!(for_mode(Mode::Uxsched).follows_chain());
        assert!(!for_mode(Mode::Uxsched).rt_lever(&cfg));
    }

    #[test]
    fn cpu_levers_off_leaves_every_mode_only_its_io_class() {
        use crate::types::{Critical, CriticalKind};
        use uxsched_os::ioprio::{encode, CLASS_RT};
        let mut on = Config::default();
        on.tracker.lever = crate::config::Lever::Fair;
        let off = Config {
            cpu_levers: false,
            ..on.clone()
        };
        let mut state = test_state::fg_state();
        state.chain = vec![Critical {
            task: uxsched_os::identity::TaskId {
                tid: 400,
                pid: 400,
                start: 1,
            },
            comm: "partner".into(),
            kind: CriticalKind::Partner,
            provisional: false,
            since_ns: 0,
        }];
        for autogroup in [true, false] {
            state.autogroup = autogroup;
            for m in Mode::ALL {
                let d = for_mode(m).desired(&state, &on).bounded(&on);
                // On: as before, untouched.
                assert_eq!(d.clone().cpu_switch(&on), d, "{m}");
                let cut = d.clone().cpu_switch(&off);
                for (task, t) in &cut.threads {
                    let io = Target {
                        ioprio: t.ioprio,
                        unit_io: t.unit_io,
                        ..Target::default()
                    };
                    assert_eq!(*t, io, "{m}: {task:?}");
                    assert_ne!(*t, Target::default(), "{m}: {task:?} kept with nothing");
                    assert_eq!(t.ioprio, d.threads[task].ioprio, "{m}");
                    assert_eq!(t.unit_io, d.threads[task].unit_io, "{m}");
                }
                let with_io = d
                    .threads
                    .values()
                    .filter(|t| t.ioprio.is_some() || t.unit_io.is_some());
                assert_eq!(cut.threads.len(), with_io.count(), "{m}");
            }
        }
        // The uxsched mode: its critical set and partner keep the front's I/O class.
        let d = for_mode(Mode::Uxsched).desired(&state, &off).bounded(&off);
        let d = d.cpu_switch(&off);
        let rt4 = Some(encode(CLASS_RT, 4));
        for t in [100, 101, 400] {
            assert_eq!(test_state::tid(&d, t).unwrap().ioprio, rt4, "tid {t}");
        }
        assert!(test_state::tid(&d, 102).is_none());
    }

    #[test]
    fn bounds_hold_whatever_the_policy_asks() {
        let cfg = Config {
            min_nice: -5,
            ..Config::default()
        };
        let state = test_state::fg_state();
        for m in Mode::ALL {
            let d = for_mode(m).desired(&state, &cfg).bounded(&cfg);
            for t in d.threads.values() {
                assert!(t.nice.is_none_or(|n| n >= -5), "{m}: {t:?}");
                assert!(t.autogroup_nice.is_none_or(|n| n >= -5), "{m}: {t:?}");
            }
        }
    }
}
