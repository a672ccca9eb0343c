//! Modes: each a pure function from [`State`] to the [`Desired`] settings of each thread, one
//! file per mode behind the small [`Policy`] trait. Policies never touch the kernel; the
//! reconciler applies (and bounds) what they ask for, so they are testable without root.

mod eimos;
mod facfs;
mod mcfs;
mod shuffledog;
mod uxsched;
mod vtcfs;

use crate::actuators::cgroup::Group;
use crate::config::{Config, Mode};
use crate::state::{App, State};
use std::collections::BTreeMap;
pub use uxsched::critical_target;
use uxsched_os::identity::TaskId;

/// What one thread should have. `None` = leave that setting as it was.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Target {
    pub nice: Option<i32>,
    /// Custom EEVDF slice (`sched_attr.sched_runtime`), ns.
    pub slice_ns: Option<u64>,
    /// Utilisation clamp `uclamp.min` (0..=1024; a hint session's boost, `rtapi/hint.rs`),
    /// only ever raised; ignored where the kernel has no uclamp.
    pub uclamp_min: Option<u32>,
    pub group: Option<Group>,
    /// Encoded I/O priority (see `actuators::ioprio`).
    pub ioprio: Option<u16>,
    /// Nice of the thread's session autogroup (see `actuators::autogroup`).
    pub autogroup_nice: Option<i32>,
    /// A real-time class instead of the fair one (an app's grant through the real-time API,
    /// `rtapi/`, or the tracker's rt lever). When set it decides the thread's scheduling
    /// attributes: `slice_ns` (and `uclamp_min`) are ignored for it, and `nice` (only ever
    /// lower than the original) is the fair-class nice the thread holds meanwhile — set in
    /// the fair class before the switch, so a later demotion to it keeps the thread's lag
    /// (`uxsched_os::sched::set_keeping_lag`). Always applied with `SCHED_FLAG_RESET_ON_FORK`.
    pub rt: Option<Rt>,
    /// Move the thread to `SCHED_EXT` (the `scx` backend, `backend/scx.rs`), keeping its nice and
    /// custom slice unless `nice`/`slice_ns` say otherwise; `rt` still wins.
    pub ext: bool,
}

/// The real-time priority of the tracker's `rt` lever: one above the lowest, below every RT
/// thread someone else asked for (audio servers, threaded IRQs at 50, watchdogs at 99). The
/// lowest is the daemon's tracker thread (`uxsched_os::own::OWN_RT_PRIORITY`).
pub const RT_PRIORITY: u32 = 2;

/// A real-time scheduling class and priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rt {
    pub policy: RtPolicy,
    /// 1..=99 (`sched_priority`).
    pub priority: u32,
}

/// The two POSIX real-time policies (SCHED_DEADLINE is not offered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RtPolicy {
    Fifo,
    Rr,
}

impl RtPolicy {
    /// The kernel's policy number.
    pub fn number(self) -> u32 {
        match self {
            RtPolicy::Fifo => uxsched_os::sched::SCHED_FIFO,
            RtPolicy::Rr => uxsched_os::sched::SCHED_RR,
        }
    }
}

/// The settings a mode wants for the device. Threads absent from `threads` want nothing: the
/// reconciler restores whatever uxsched changed on them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Desired {
    pub threads: BTreeMap<TaskId, Target>,
    /// Weight of uxsched's foreground / background groups in `cpu.shares` units.
    pub fg_shares: u64,
    pub bg_shares: u64,
}

impl Desired {
    /// "Desired = nothing": unfocus, `restore`, shutdown and crash recovery.
    pub fn nothing(cfg: &Config) -> Desired {
        Desired {
            threads: BTreeMap::new(),
            fg_shares: cfg.fg_shares,
            bg_shares: cfg.bg_shares,
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

/// A mode.
pub trait Policy {
    fn desired(&self, state: &State, cfg: &Config) -> Desired;
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
    use crate::state::{App, AppId, Role, State, ThreadInfo};
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

    pub fn tid(d: &super::Desired, tid: i32) -> Option<&super::Target> {
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
