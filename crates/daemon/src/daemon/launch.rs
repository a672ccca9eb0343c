//! The launches in front (`sources/launch.rs` finds them): each from its exec until its window
//! maps — the focus then moves to it and it is the app — or until `[storage] launch_budget_ms`
//! runs out, whichever comes first; at most `launch_max` at once, the first ones kept.

use crate::types::AppId;
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
pub struct Launches {
    live: Vec<(AppId, Instant)>,
}

impl Launches {
    /// A launch was seen now; `false` when it is not taken (already there, or `max` reached).
    pub fn add(&mut self, app: AppId, now: Instant, max: usize) -> bool {
        if self.live.len() >= max || self.live.iter().any(|(a, _)| *a == app) {
            return false;
        }
        self.live.push((app, now));
        true
    }

    /// Drop the launches whose budget ran out by `now`, that exited, or that are the focus
    /// now (their window mapped and was focused). Returns whether any was dropped.
    pub fn prune(&mut self, focus: Option<AppId>, now: Instant, budget: Duration) -> bool {
        let before = self.live.len();
        self.live
            .retain(|(a, since)| now < *since + budget && Some(*a) != focus && a.alive());
        self.live.len() != before
    }

    /// When the oldest launch's budget runs out.
    pub fn next_end(&self, budget: Duration) -> Option<Instant> {
        self.live.iter().map(|(_, since)| *since + budget).min()
    }

    pub fn apps(&self) -> impl Iterator<Item = AppId> + '_ {
        self.live.iter().map(|(a, _)| *a)
    }

    pub fn clear(&mut self) {
        self.live.clear();
    }
}

impl super::Daemon {
    /// How long a launch stays in front at most.
    pub(super) fn launch_budget(&self) -> Duration {
        Duration::from_millis(self.cfg.storage.launch_budget_ms)
    }

    /// The launch watcher saw `app` start under the app in front: in front from now, at once
    /// (not held back by `min_focus_interval_ms`: its first reads are what it waits on).
    pub(super) fn launch_seen(&mut self, app: AppId, min_interval: Duration) {
        if !self.policy().follows_chain() || self.focus == Some(app) {
            return;
        }
        let now = Instant::now();
        if self.launches.add(app, now, self.cfg.storage.launch_max) {
            self.dirty = true;
            self.last_apply = now.checked_sub(min_interval).unwrap_or(now);
        }
    }

    /// `status`'s storage lines: the disks and what they honour, the groups' I/O classes, the
    /// BFQ switches and blk-iocost this daemon holds, the launches in front.
    pub(super) fn storage_status(&self) -> Vec<String> {
        let probe = uxsched_os::block::Probe::read();
        let mut lines: Vec<String> = match &probe {
            Ok(p) => p.describe().lines().map(str::to_owned).collect(),
            Err(e) => vec![format!("cannot probe the block devices: {e}")],
        };
        let disks = probe.map(|p| p.devices).unwrap_or_default();
        let db = self.rec.journal.connection();
        let asked = self.cfg.storage.group_prio_classes() != (None, None);
        lines.extend(crate::actuators::io_class::status_lines(db, &disks, asked));
        match crate::devices::switches(&self.rec.journal) {
            Ok(s) => lines.extend(s.iter().map(|s| {
                format!(
                    "{}: switched to {} while the daemon runs (was {})",
                    s.name, s.applied, s.original
                )
            })),
            Err(e) => lines.push(format!(
                "cannot read the device switches from the journal: {e}"
            )),
        }
        match crate::devices::iocost::rows(&self.rec.journal) {
            Ok(rows) => lines.extend(rows.iter().map(|(dev, name)| {
                format!("{name} ({dev}): blk-iocost enabled while the daemon runs (was off)")
            })),
            Err(e) => lines.push(format!("cannot read the iocost rows from the journal: {e}")),
        }
        let budget = self.launch_budget();
        if budget.is_zero() {
            lines.push("launches: off ([storage] launch_budget_ms = 0)".into());
        } else {
            let live: Vec<String> = self.launches.apps().map(|a| a.pid.to_string()).collect();
            lines.push(format!(
                "launches in front (each at most {budget:?}): {}",
                if live.is_empty() {
                    "none".into()
                } else {
                    live.join(", ")
                }
            ));
        }
        lines
    }

    /// Tell the launch watcher what is in front now, with its user (nothing when the owner
    /// cannot be read: no launch is taken on a guess).
    pub(super) fn launch_front_changed(&mut self) {
        self.launches.clear();
        let front = self.focus.and_then(|a| {
            let leader = uxsched_os::identity::TaskId {
                tid: a.pid,
                pid: a.pid,
                start: a.start,
            };
            let uid = uxsched_os::identity::uids_of(&leader).ok()?[0];
            Some((a, uid))
        });
        self.launch_front.set(front);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launch_ends_at_its_budget_at_focus_or_at_exit_and_at_most_max_are_kept() {
        let me = AppId::of(std::process::id() as i32).unwrap();
        let gone = AppId {
            pid: me.pid,
            start: me.start + 1,
        };
        let t0 = Instant::now();
        let budget = Duration::from_millis(500);
        let mut l = Launches::default();
        assert!(l.add(me, t0, 1));
        assert!(!l.add(me, t0, 2), "the same launch twice");
        assert!(!l.add(gone, t0, 1), "over the limit");
        assert_eq!(l.next_end(budget), Some(t0 + budget));
        assert!(!l.prune(None, t0 + budget / 2, budget), "within its budget");
        assert!(l.prune(None, t0 + budget, budget), "its budget ran out");
        assert_eq!(l.apps().count(), 0);
        l.add(me, t0, 1);
        assert!(l.prune(Some(me), t0, budget), "it is the focus now");
        l.add(gone, t0, 1);
        assert!(l.prune(None, t0, budget), "it exited (another start time)");
        assert_eq!(l.next_end(budget), None);
    }
}
