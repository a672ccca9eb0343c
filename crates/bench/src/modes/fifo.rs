//! `fifo`: the whole foreground at SCHED_FIFO priority 1 — the latency reference ("the limit"),
//! and its cost. The whole foreground is every thread of every process of the app's tree (a
//! browser's renderers and GPU process, xterm's `cat`: [`Targets::app_family`], followed as
//! processes come and go) and, for real applications, the X server they draw through.
//! Bounded like rtkit: a soft RLIMIT_RTTIME of 200 ms on each of those processes (SIGXCPU ends
//! one whose thread runs that long without blocking), SCHED_RESET_ON_FORK, and restored on every
//! exit path. The background is left alone.

use super::{ignore_gone, Changes, Mode, Targets};
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
        let mut procs = t.app_family();
        procs.extend(t.x_server);
        for pid in procs {
            // The limit goes first: no thread of ours is ever RT without it. A helper that
            // exited since the tree was read is skipped.
            ignore_gone(self.changes.rttime_limit(pid, RTTIME_LIMIT_US))?;
            for tid in sys::threads(pid) {
                ignore_gone(self.changes.policy(pid, tid, sys::SCHED_FIFO, RT_PRIORITY))?;
            }
        }
        Ok(())
    }

    fn restore(&mut self) -> Result<()> {
        self.changes.restore()
    }
}
