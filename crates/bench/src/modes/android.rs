//! `android`: what Android's framework does for the top app (OomAdjuster/ProcessList):
//! the UI thread and RenderThread at nice −10 (`TOP_APP_PRIORITY_BOOST`), background
//! processes at nice 10 in the `background` cpu group with cpu.shares 52 (≈5 % of a nice-0
//! task). Our models name those threads `ui` and `render`.

use super::{app_threads, background_threads, ignore_gone, Changes, Mode, Targets};
use crate::cgroup::CpuGroup;
use crate::sys;
use anyhow::Result;
use std::collections::HashSet;

const TOP_APP_NICE: i32 = -10;
const BACKGROUND_NICE: i32 = 10;
const BACKGROUND_SHARES: u64 = 52;
const BOOSTED_THREADS: [&str; 2] = ["ui", "render"];

#[derive(Default)]
pub struct Android {
    changes: Changes,
    moved: HashSet<i32>,
}

impl Mode for Android {
    fn prepare(&mut self) -> Result<()> {
        let name = format!("uxsched-bench-bg-{}", std::process::id());
        self.changes
            .group(CpuGroup::create(&name, BACKGROUND_SHARES)?);
        Ok(())
    }

    fn apply(&mut self, t: &Targets) -> Result<()> {
        if let Some(app) = t.app {
            for (pid, tid) in app_threads(app) {
                let name = sys::thread_name(pid, tid).unwrap_or_default();
                if BOOSTED_THREADS.contains(&name.as_str()) {
                    ignore_gone(self.changes.nice(pid, tid, TOP_APP_NICE))?;
                }
            }
        }
        if let Some(sid) = t.background {
            for pid in sys::load_members(sid) {
                if self.moved.insert(pid) {
                    if let Some(g) = self.changes.groups().next() {
                        g.add(pid)?;
                    }
                }
            }
            for (pid, tid) in background_threads(sid) {
                ignore_gone(self.changes.nice(pid, tid, BACKGROUND_NICE))?;
            }
        }
        Ok(())
    }

    fn restore(&mut self) -> Result<()> {
        self.moved.clear();
        self.changes.restore()
    }
}
