//! `s76`: system76-scheduler's shipped default profiles (its data/config.kdl), applied by the
//! harness: autogroup off ("autogroup nullifies nice"), the foreground process nice 0 with
//! I/O best-effort 0, background processes nice 6 with I/O class idle — on every thread, as
//! its daemon does. Autogroup is switched back on restore.

use super::{app_threads, background_threads, ignore_gone, Changes, Mode, Targets};
use anyhow::Result;

const FOREGROUND_NICE: i32 = 0;
const BACKGROUND_NICE: i32 = 6;

#[derive(Default)]
pub struct S76 {
    changes: Changes,
}

impl Mode for S76 {
    fn prepare(&mut self) -> Result<()> {
        self.changes.autogroup(false)
    }

    fn apply(&mut self, t: &Targets) -> Result<()> {
        if let Some(app) = t.app {
            let be0 = uxsched_os::ioprio::encode(uxsched_os::ioprio::CLASS_BE, 0);
            for (pid, tid) in app_threads(app) {
                ignore_gone(self.changes.nice(pid, tid, FOREGROUND_NICE))?;
                ignore_gone(self.changes.ioprio(tid, be0))?;
            }
        }
        if let Some(sid) = t.background {
            let idle = uxsched_os::ioprio::encode(uxsched_os::ioprio::CLASS_IDLE, 0);
            for (pid, tid) in background_threads(sid) {
                ignore_gone(self.changes.nice(pid, tid, BACKGROUND_NICE))?;
                ignore_gone(self.changes.ioprio(tid, idle))?;
            }
        }
        Ok(())
    }

    fn restore(&mut self) -> Result<()> {
        self.changes.restore()
    }
}
