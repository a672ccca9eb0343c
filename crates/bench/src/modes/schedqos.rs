//! `schedqos`: Google's Sched QoS daemon (Qais Yousef, v0.1-alpha, announced on LKML in
//! April 2026) as its published defaults, applied by the harness — not the daemon itself.
//! Its QoS mapping (`qais-yousef/schedqos:configs/qos_mappings.json`, summarised in
//! `/work/shared/notes/anchors-2026.md` §4.1): USER_INTERACTIVE = SCHED_NORMAL, nice −4,
//! `sched_runtime` 8 ms; BACKGROUND = SCHED_BATCH, nice +4, `sched_runtime` 20 ms.
//! The harness plays the app config's author (`thread_qos`): every thread of the foreground
//! app is USER_INTERACTIVE, every thread of the load BACKGROUND. Not applied: BACKGROUND's
//! `util_max` 256 (uclamp only steers frequency under schedutil and placement on asymmetric
//! CPUs, neither present here) and the `sched_profiles` debugfs tunables (HRTICK, base slice),
//! which are system-wide and not part of the QoS mapping.

use super::{app_threads, background_threads, ignore_gone, Changes, Mode, Targets};
use anyhow::Result;
use uxsched_os::sched::{SCHED_BATCH, SCHED_OTHER};

/// USER_INTERACTIVE: (policy, nice, slice in ns).
pub const USER_INTERACTIVE: (u32, i32, u64) = (SCHED_OTHER, -4, 8_000_000);
/// BACKGROUND: (policy, nice, slice in ns).
pub const BACKGROUND: (u32, i32, u64) = (SCHED_BATCH, 4, 20_000_000);

#[derive(Default)]
pub struct SchedQos {
    changes: Changes,
}

impl Mode for SchedQos {
    fn apply(&mut self, t: &Targets) -> Result<()> {
        if let Some(app) = t.app {
            let (policy, nice, slice) = USER_INTERACTIVE;
            for (pid, tid) in app_threads(app) {
                ignore_gone(self.changes.sched_attr(pid, tid, policy, nice, slice))?;
            }
        }
        if let Some(leader) = t.background {
            let (policy, nice, slice) = BACKGROUND;
            for (pid, tid) in background_threads(leader) {
                ignore_gone(self.changes.sched_attr(pid, tid, policy, nice, slice))?;
            }
        }
        Ok(())
    }

    fn restore(&mut self) -> Result<()> {
        self.changes.restore()
    }
}
