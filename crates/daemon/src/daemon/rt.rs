//! The real-time side of a pass: the rt lever's threads and their originals published to the
//! guard and the canary, and the "critical → boosted" latency of the tracker's new members.

use super::{Daemon, LATENCIES};
use crate::actuators::sched;
use crate::config::Mode;
use crate::journal::Value;
use crate::policy::Desired;

impl Daemon {
    /// The new critical threads' boosts are written: record how long after the tracker's
    /// decision (in the `uxsched` mode, the one that boosts them).
    pub(super) fn boosts_written(&mut self) {
        let now = uxsched_tracker::procfs::monotonic_ns();
        for since in self.boost_pending.drain(..) {
            if self.mode == Mode::Uxsched && since > 0 {
                if self.boost_latency.len() == LATENCIES {
                    self.boost_latency.pop_front();
                }
                self.boost_latency.push_back(now.saturating_sub(since));
            }
        }
    }

    /// Tell the canary's watchdog and the rt lever's guard which threads uxsched holds at real
    /// time or is about to (the lever's), with the originals to put back.
    pub(super) fn publish_rt(&mut self) {
        let lever = self.rt.as_ref().map(|g| g.followed()).unwrap_or_default();
        let mut originals = Vec::new();
        for e in self.rec.journal.entries().unwrap_or_default() {
            if let (Value::Sched(orig), Value::Sched(applied)) = (&e.original, &e.applied) {
                if applied.is_rt() || lever.contains(&e.via) {
                    let back = sched::restorable(orig, self.features.default_slice_ns);
                    originals.push((e.via, back, applied.is_rt()));
                }
            }
        }
        if let Some(g) = &self.rt {
            g.publish(originals.iter().map(|&(t, back, _)| (t, back)));
        }
        if let Some(c) = &self.canary {
            let mut held = c.held.lock().unwrap_or_else(|e| e.into_inner());
            held.clear();
            held.extend(
                originals
                    .iter()
                    .filter(|o| o.2)
                    .map(|&(t, back, _)| (t, back)),
            );
        }
    }

    /// The threads the `uxsched` mode's `rt` lever asks to run real-time (none otherwise).
    pub(super) fn rt_lever_threads(&self, desired: &Desired) -> Vec<crate::identity::TaskId> {
        if self.mode != Mode::Uxsched || self.cfg.tracker.lever != crate::config::Lever::Rt {
            return Vec::new();
        }
        desired
            .threads
            .iter()
            .filter(|(_, t)| t.rt.is_some())
            .map(|(task, _)| *task)
            .collect()
    }
}
