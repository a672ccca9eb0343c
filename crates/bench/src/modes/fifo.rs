//! `fifo`: every foreground thread at SCHED_FIFO priority 1 — the latency reference, and its
//! cost. Bounded like rtkit: a soft RLIMIT_RTTIME of 200 ms on the app (SIGXCPU ends a process
//! whose thread runs that long without blocking), SCHED_RESET_ON_FORK, and restored on every exit path.
//! The background is left alone.

use super::{app_threads, ignore_gone, Changes, Mode, Targets};
use crate::sys;
use anyhow::Result;

const RT_PRIORITY: i32 = 1;
const RTTIME_LIMIT_US: u64 = 200_000;

#[derive(Default)]
pub struct Fifo {
    changes: Changes,
}

impl Mode for Fifo {
    fn apply(&mut self, t: &Targets) -> Result<()> {
        let Some(app) = t.app else { return Ok(()) };
        // The limit goes first: no thread of ours is ever RT without it.
        self.changes.rttime_limit(app, RTTIME_LIMIT_US)?;
        for (pid, tid) in app_threads(app) {
            ignore_gone(self.changes.policy(pid, tid, sys::SCHED_FIFO, RT_PRIORITY))?;
        }
        Ok(())
    }

    fn restore(&mut self) -> Result<()> {
        self.changes.restore()
    }
}
