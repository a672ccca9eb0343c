//! The tracker's fast path (issue 10: "critical → boosted" p99 ≤ 1 ms). A full pass scans the
//! app, asks the policy, walks the journal and reads back every setting uxsched holds: 1–2 ms
//! here, and the tracker's set changes with every keystroke. When the set gains members, only
//! their boosts are written at once — the same target the `uxsched` policy gives them
//! (`policy::critical_target`), through the reconciler's first-change path (journal first,
//! identity before and after, only fair threads), and for the rt lever only once the guard
//! watches them; under the scx backend the app's own members are switched to `SCHED_EXT` with
//! the critical class instead, as a pass would. Threads uxsched already holds a row for, dropped members and everything else
//! wait for the full pass, which follows within `min_focus_interval_ms` and owns every other
//! decision.

use super::Daemon;
use crate::policy::critical_target;
use crate::state;
use crate::types::Desired;
use crate::types::Event;
use crate::types::{Critical, CriticalKind};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use uxsched_os::identity::TaskId;

impl Daemon {
    /// The tracker sends a set per change, often several within 100 µs of one keystroke (one
    /// per ring-buffer batch); the sets it sent while the loop was busy are newer views of the
    /// same interaction, and one fast path for the newest beats one per set — the second waited
    /// behind the first (p99 of "critical → boosted" 1.5 ms where each took 0.7). An episode's
    /// record between them goes to `episodes`, kept for after the fast path; the first other
    /// event read stays in `stash` for the next turn.
    pub(super) fn newest_critical(
        &self,
        rx: &mpsc::Receiver<Event>,
        (mut app, mut set): (Option<i32>, Vec<Critical>),
        stash: &mut Option<Event>,
        episodes: &mut Vec<Event>,
    ) -> (Option<i32>, Vec<Critical>) {
        while let Ok(event) = rx.try_recv() {
            match event {
                Event::Critical { app: a, set: s } => {
                    self.loan.received();
                    (app, set) = (a, s);
                }
                e @ Event::Episode { .. } => episodes.push(e),
                other => {
                    *stash = Some(other);
                    break;
                }
            }
        }
        (app, set)
    }

    /// The user `app` runs as: as the last pass (or fast path) read it for that app, else now.
    pub(super) fn owner_of(&self, app: crate::types::AppId) -> Option<u32> {
        match self.owner_seen.get() {
            Some((seen, uid)) if seen == app => uid,
            _ => {
                let uid = state::owner(app);
                self.owner_seen.set(Some((app, uid)));
                uid
            }
        }
    }

    /// The tracker's set for the app in front changed: its new members are boosted at once
    /// (the tracker decides early so the boost is not too late); the full pass follows.
    pub(super) fn critical_changed(
        &mut self,
        set: Vec<Critical>,
        min_interval: Duration,
    ) -> anyhow::Result<()> {
        let new: Vec<_> = (set.iter())
            .filter(|c| !self.critical.iter().any(|o| o.task == c.task))
            .cloned()
            .collect();
        if let Some(oldest) = new.iter().map(|c| c.since_ns).filter(|&t| t > 0).min() {
            let now = uxsched_tracker::procfs::monotonic_ns();
            let age_us = now.saturating_sub(oldest) / 1000;
            tracing::debug!(new = new.len(), age_us, "critical set received");
        }
        self.boost_pending
            .extend(new.iter().map(|c| (c.task, c.since_ns)));
        let written = self.boost_new(&new)?;
        self.boosts_written(Some(&written));
        let dropped = (self.critical.iter()).any(|o| !set.iter().any(|c| c.task == o.task));
        self.critical = set;
        self.dirty = true;
        // When the fast path wrote boosts it counts as this change's application: the full
        // pass (members dropped, or left out because uxsched already holds a row for them, like
        // the app's own threads' mild bonus) waits its turn, at most `min_focus_interval_ms` —
        // a pass right away made the next keystroke's set wait behind it (13 ms with cgroup
        // moves on an idle machine). Otherwise (another mode, nothing new written) a pass now.
        self.last_apply = if written.is_empty() && (dropped || !new.is_empty()) {
            Instant::now() - min_interval
        } else {
            Instant::now()
        };
        Ok(())
    }

    /// Boost the critical set's new members now; returns the threads whose boost was written,
    /// each with when (`CLOCK_MONOTONIC`, ns).
    pub(super) fn boost_new(&mut self, new: &[Critical]) -> anyhow::Result<Vec<(TaskId, u64)>> {
        let Some(app) = self.focus.filter(|_| self.policy().follows_chain()) else {
            return Ok(Vec::new());
        };
        // Without the CPU levers (`cpu_levers = false`) there is no boost to write here: the
        // new members' I/O class is the full pass's, which then follows at once (nothing was
        // written: `critical_changed`).
        if new.is_empty() || !self.cfg.cpu_levers {
            return Ok(Vec::new());
        }
        self.boost_new_at(app, new, Instant::now())
    }

    fn boost_new_at(
        &mut self,
        app: crate::types::AppId,
        new: &[Critical],
        now: Instant,
    ) -> anyhow::Result<Vec<(TaskId, u64)>> {
        let rt = self.policy().rt_lever(&self.cfg)
            && self.rt.is_some()
            && self.rt_suspended_until.is_none_or(|until| until <= now);
        let cpu0 = thread_cpu_ns();
        let cooling = self.rt.as_ref().map(|g| g.cooling(now)).unwrap_or_default();
        let t_cool = now.elapsed();
        // The app's own threads on the path, and the partners and kernel workers the config and
        // ownership allow (the same filter as a full pass).
        let kinds = |c: &Critical| (c.task, c.kind);
        let own = new.iter().filter(|c| c.task.pid == app.pid).map(kinds);
        let chain = state::chain(app, || self.owner_of(app), new, &self.cfg);
        let members: Vec<(TaskId, CriticalKind)> = own.chain(chain.iter().map(kinds)).collect();
        let t_chain = now.elapsed();
        let mut desired = Desired::nothing(&self.cfg);
        let groups = self.rec.groups.as_deref();
        let app_takes_rt = self.app_takes_rt(app);
        for (task, kind) in members {
            // A thread still in a cgroup that refuses real-time threads (the full pass moves the
            // app into the fg group first) gets the fair boost now rather than an EPERM. Its
            // cgroup is read (one /proc read, here between an input and its boost) only where
            // it may refuse: never for a kernel worker (they live in the root), for the app's
            // own threads only where its home or the fg group may.
            let may_refuse = match kind {
                CriticalKind::KernelWorker => false,
                CriticalKind::App => !app_takes_rt,
                CriticalKind::Partner => true,
            };
            let refused = || may_refuse && groups.is_some_and(|g| g.refuses_rt(task.tid));
            let rt = rt && !cooling.contains(&task) && !refused();
            desired.threads.insert(task, critical_target(&self.cfg, rt));
        }
        let t_targets = now.elapsed();
        // Under sched_ext the app's members get the critical class now (those already switched
        // too: the map is outside the journal); partners keep the stock levers, as in a pass.
        let mut desired = desired.bounded(&self.cfg);
        self.backend.shape_critical(app.pid, &mut desired);
        let t_shaped = now.elapsed();
        let mut plan = self.rec.fast_plan(&desired)?;
        let t_candidates = now.elapsed();
        // The rt lever's bound is in force before a thread is made real-time.
        if let Some(g) = &self.rt {
            for task in g.follow_more(plan.rt_threads()) {
                self.rec
                    .replan(&mut plan, task, critical_target(&self.cfg, false))?;
            }
        }
        let t_followed = now.elapsed();
        let written = self.rec.add_planned(plan)?;
        let t_added = now.elapsed();
        if !written.is_empty() {
            self.publish_rt();
        }
        tracing::debug!(
            new = new.len(),
            waited_us = waited_ns(new, now) / 1000,
            written = written.len(),
            cool_us = t_cool.as_micros() as u64,
            chain_us = t_chain.as_micros() as u64,
            targets_us = t_targets.as_micros() as u64,
            shaped_us = t_shaped.as_micros() as u64,
            candidates_us = t_candidates.as_micros() as u64,
            followed_us = t_followed.as_micros() as u64,
            added_us = t_added.as_micros() as u64,
            fast_us = now.elapsed().as_micros() as u64,
            cpu_us = (thread_cpu_ns() - cpu0) / 1000,
            "fast path"
        );
        Ok(written)
    }
}

impl Daemon {
    /// Whether every cgroup the app's threads may be in takes real-time threads, as the last
    /// pass found its placement: its home does not refuse them and uxsched's fg group takes
    /// them. False when no pass has placed this app yet (then each thread's cgroup is read).
    fn app_takes_rt(&self, app: crate::types::AppId) -> bool {
        let placed = match self.placement_seen {
            Some((a, _, p)) if a == app => p,
            _ => return false,
        };
        let fg_takes = self.rec.groups.as_ref().is_none_or(|g| g.takes_rt());
        fg_takes && !placed.home_refuses_rt()
    }
}

/// How long the oldest input-driven member of `new` waited for the fast path that started at
/// `started`: the tracker's thread, the channel, the loop's wake-up, a fast path under way.
/// Worked out only for the debug line: the start's `CLOCK_MONOTONIC` time is now's less the
/// time since.
fn waited_ns(new: &[Critical], started: Instant) -> u64 {
    let start_ns = uxsched_os::clock::ns(libc::CLOCK_MONOTONIC)
        .saturating_sub(started.elapsed().as_nanos() as u64);
    let since = new.iter().map(|c| c.since_ns).filter(|&t| t > 0).min();
    since.map_or(0, |t| start_ns.saturating_sub(t))
}

/// This thread's CPU time (ns): set beside the fast path's wall time, the difference is time
/// spent waiting for a CPU.
fn thread_cpu_ns() -> u64 {
    uxsched_os::clock::ns(libc::CLOCK_THREAD_CPUTIME_ID)
}
